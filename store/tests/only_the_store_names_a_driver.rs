//! Issue 35's acceptance: no crate but the store depends on a database driver (rusqlite, a
//! PostgreSQL client), nor names one in its code.

use std::path::{Path, PathBuf};

const DRIVERS: [&str; 4] = ["rusqlite", "libsqlite3", "postgres", "tokio-postgres"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | ".git" | "store" | "node_modules") {
                files(&path, out);
            }
        } else if name.ends_with(".rs") || name == "Cargo.toml" {
            out.push(path);
        }
    }
}

#[test]
fn no_other_crate_depends_on_or_names_a_driver() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = Vec::new();
    files(root, &mut found);
    assert!(found.len() > 100, "the workspace's files: {}", found.len());
    let offending: Vec<String> = found
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            DRIVERS
                .iter()
                .filter(|driver| {
                    text.lines().any(|line| {
                        let line = line.trim_start();
                        (line.starts_with(&format!("{driver} ="))
                            || line.contains(&format!("{}::", driver.replace('-', "_"))))
                            && !line.starts_with("//")
                    })
                })
                .map(|driver| format!("{}: {driver}", path.display()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(offending.is_empty(), "{offending:#?}");
}
