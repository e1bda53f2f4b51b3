//! The site side's crates as docs/commands.md lays them out (issue 36): only the `mpistat`
//! binary's package depends on clap, only the store on a database driver, and no library on
//! `anyhow` (libraries return typed errors; binaries and build tools may use it).

use std::process::Command;

/// The workspace's packages that depend on `krate` directly (normal and build edges).
fn direct_dependents(krate: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "--offline", "--workspace", "--prefix", "none"])
        .args(["--edges", "normal,build", "--depth", "1", "--invert", krate])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree -i {krate}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with("mpistat-"))
        .map(str::to_string)
        .collect();
    packages.sort();
    packages.dedup();
    packages
}

#[test]
fn only_the_binary_depends_on_clap() {
    assert_eq!(direct_dependents("clap"), ["mpistat-digest"]);
}

#[test]
fn only_the_store_names_a_database_driver() {
    for driver in ["rusqlite", "postgres"] {
        assert_eq!(direct_dependents(driver), ["mpistat-store"], "{driver}");
    }
}

#[test]
fn no_library_uses_anyhow() {
    // The binaries (`mpistat`, the MPI analysis program) and the wrappers' generator.
    let binaries = [
        "mpistat-analyze-mpi",
        "mpistat-analyze-mpi-mpich",
        "mpistat-digest",
        "mpistat-wrapgen",
    ];
    assert_eq!(direct_dependents("anyhow"), binaries);
}
