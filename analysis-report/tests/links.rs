//! The analysis as an MPI program runs in the user's job step: it links the analysis and its
//! reports, never the site side (issue 36: "analyze-mpi does not depend on the digest").

use std::process::Command;

/// What `mpistat-analyze` must not link: the digest, its database, mail and command line.
const SITE_SIDE: [&str; 5] = [
    "mpistat-digest",
    "mpistat-store",
    "mpistat-mailer",
    "rusqlite",
    "clap",
];

#[test]
fn the_mpi_analysis_links_nothing_of_the_site_side() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for package in [
        "mpistat-analyze-mpi",
        "mpistat-analyze-mpi-mpich",
        "mpistat-analysis-report",
    ] {
        let output = Command::new(&cargo)
            .args([
                "tree",
                "--offline",
                "--prefix",
                "none",
                "--edges",
                "normal,build",
            ])
            .args(["--package", package])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo tree runs");
        assert!(
            output.status.success(),
            "cargo tree -p {package}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let tree = String::from_utf8(output.stdout).expect("cargo prints UTF-8");
        let linked: Vec<&str> = tree
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| SITE_SIDE.contains(name))
            .collect();
        assert!(linked.is_empty(), "{package} links {linked:?}:\n{tree}");
    }
}
