//! The units in `systemd/` pass `systemd-analyze verify` (skipped with a message when systemd is
//! not installed). `ExecStart` is pointed at the freshly built `mpistat` for the check.

use std::path::Path;
use std::process::Command;

#[test]
fn units_pass_systemd_analyze_verify() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: systemd-analyze is not installed");
        return;
    }
    let units = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd");
    let dir = std::env::temp_dir().join(format!("mpistat-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(&units).unwrap() {
        let path = entry.unwrap().path();
        let copy = dir.join(path.file_name().unwrap());
        if path.is_dir() {
            // A unit's drop-ins (`<unit>.d/*.conf`): verified with their unit, found beside it.
            std::fs::create_dir_all(&copy).unwrap();
            for drop_in in std::fs::read_dir(&path).unwrap() {
                let drop_in = drop_in.unwrap().path();
                std::fs::copy(&drop_in, copy.join(drop_in.file_name().unwrap())).unwrap();
            }
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replace("/usr/bin/mpistat", env!("CARGO_BIN_EXE_mpistat"));
        std::fs::write(&copy, text).unwrap();
        paths.push(copy);
    }
    assert_eq!(
        paths.len(),
        6,
        "ingest, digest and serve services, site-report template service, two timers"
    );
    let output = Command::new("systemd-analyze")
        .arg("verify")
        .args(&paths)
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .unwrap();
    let messages = String::from_utf8_lossy(&output.stderr);
    // Lines about units outside ours (the host's own configuration) are not our concern.
    let ours: Vec<&str> = messages
        .lines()
        .filter(|line| line.contains("mpistat-"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.status.success() && ours.is_empty(), "{messages}");
}
