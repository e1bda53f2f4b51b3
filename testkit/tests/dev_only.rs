//! The kit is for tests: a shipped crate that took it as a dependency would link invented users,
//! a forger of wire lines and a counting allocator into the site's binaries.

use std::path::Path;
use std::process::Command;

#[test]
fn only_dev_dependencies_name_the_kit() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut users = Vec::new();
    for package in metadata["packages"].as_array().unwrap() {
        for dependency in package["dependencies"].as_array().unwrap() {
            if dependency["name"] == env!("CARGO_PKG_NAME") {
                users.push((package["name"].clone(), dependency["kind"].clone()));
            }
        }
    }
    assert!(!users.is_empty(), "no crate takes the kit: {users:?}");
    let shipped: Vec<_> = users.iter().filter(|(_, kind)| kind != "dev").collect();
    assert!(
        shipped.is_empty(),
        "the kit must be a dev-dependency only: {shipped:?}"
    );
}
