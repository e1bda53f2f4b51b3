//! The kit is for tests: a shipped crate that took it as a dependency would link invented users,
//! a forger of wire lines and a counting allocator into the site's binaries. The end-to-end
//! tests' own library (`tests/src`, crate `mpistat-e2e`) may take it (its scratch directories),
//! as long as no crate but a test takes that library.

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
    let users_of = |crate_name: &str| {
        let mut users = Vec::new();
        for package in metadata["packages"].as_array().unwrap() {
            for dependency in package["dependencies"].as_array().unwrap() {
                if dependency["name"] == crate_name {
                    users.push((package["name"].clone(), dependency["kind"].clone()));
                }
            }
        }
        users
    };
    let users = users_of(env!("CARGO_PKG_NAME"));
    assert!(!users.is_empty(), "no crate takes the kit: {users:?}");
    let shipped: Vec<_> = users
        .iter()
        .filter(|(name, kind)| kind != "dev" && name != E2E)
        .collect();
    assert!(
        shipped.is_empty(),
        "the kit must be a dev-dependency only: {shipped:?}"
    );
    let e2e_users: Vec<_> = users_of(E2E)
        .into_iter()
        .filter(|(_, kind)| kind != "dev")
        .collect();
    assert!(
        e2e_users.is_empty(),
        "the end-to-end tests' library must be a dev-dependency only: {e2e_users:?}"
    );
}

/// The end-to-end tests' crate, whose library is test code too.
const E2E: &str = "mpistat-e2e";
