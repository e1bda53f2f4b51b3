//! The reference tools' reading of an archive, for the tests (this crate's and the end-to-end
//! ones): `otf2-print` (Debian's `otf2-tools`) must read every event, and an independent
//! reader in Python (`tests/check_archive.py`, Debian's `python3-otf2`) compares the archive
//! with mpistat's own trace event by event and matches its messages.

use mpistat_trace::model::{EventKind, MpiClass, RegionRole, Trace};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Events `otf2-print` prints of the archive whose anchor file is `anchor`; an error with its
/// output when it fails or reports an error.
pub fn otf2_print_events(anchor: &Path) -> Result<u64, String> {
    let output = Command::new("otf2-print")
        .arg(anchor)
        .output()
        .map_err(|e| format!("otf2-print (otf2-tools): {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || stderr.contains("error") || stdout.contains("==ERROR==") {
        return Err(format!("otf2-print failed: {stderr}{stdout}"));
    }
    // The events follow the table's rule line, one a line, until the next section.
    let events = stdout
        .lines()
        .skip_while(|line| !line.starts_with("-----"))
        .skip(1)
        .take_while(|line| !line.is_empty() && !line.starts_with("==="))
        .count();
    Ok(events as u64)
}

/// mpistat's own trace as `check_archive.py` reads it (JSON).
pub fn expected_json(trace: &Trace) -> String {
    let mut out = format!(
        "{{\"ticks_per_second\": {}, \"regions\": [",
        trace.definitions.ticks_per_second
    );
    let quoted = |s: &str| {
        let mut q = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(q, "\\u{:04x}", c as u32);
                }
                c => q.push(c),
            }
        }
        q + "\""
    };
    for (i, region) in trace.definitions.regions.iter().enumerate() {
        let collective = matches!(region.role, RegionRole::Mpi(c) if c != MpiClass::PointToPoint);
        let _ = write!(
            out,
            "{}[{}, {}, {collective}]",
            if i > 0 { ", " } else { "" },
            quoted(&region.name),
            quoted(&region.site)
        );
    }
    out.push_str("], \"ranks\": [");
    for (r, events) in trace.ranks.iter().enumerate() {
        out.push_str(if r > 0 { ", [" } else { "[" });
        for (i, event) in events.iter().enumerate() {
            let t = event.time;
            let item = match event.kind {
                EventKind::Enter { region } => format!("[\"enter\", {t}, {region}]"),
                EventKind::Exit => format!("[\"exit\", {t}]"),
                EventKind::Send {
                    peer,
                    tag,
                    comm,
                    bytes,
                    ..
                } => format!("[\"send\", {t}, {peer}, {tag}, {comm}, {bytes}]"),
                EventKind::Recv {
                    peer,
                    tag,
                    comm,
                    bytes,
                } => format!("[\"recv\", {t}, {peer}, {tag}, {comm}, {bytes}]"),
                EventKind::RequestPost { request } => format!("[\"post\", {t}, {request}]"),
                EventKind::RequestComplete { request } => {
                    format!("[\"complete\", {t}, {request}]")
                }
                EventKind::CollectiveExit {
                    comm,
                    root,
                    sent,
                    received,
                } => format!(
                    "[\"cexit\", {t}, {comm}, {}, {sent}, {received}]",
                    root.map_or("null".to_string(), |r| r.to_string())
                ),
            };
            out.push_str(if i > 0 { ", " } else { "" });
            out.push_str(&item);
        }
        out.push(']');
    }
    out + "]}\n"
}

/// Runs `check_archive.py` on the archive in `archive` against `trace` (mpistat's own, as the
/// analysis reads it); its summary line, or an error with what it said. `causal`: also check
/// that every receive ends at or after its send started.
pub fn python_check(archive: &Path, trace: &Trace, causal: bool) -> Result<String, String> {
    let expected = archive.with_extension("expected.json");
    std::fs::write(&expected, expected_json(trace)).map_err(|e| e.to_string())?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/check_archive.py");
    // Debian's python3-otf2 is the system Python's.
    let mut command = Command::new("/usr/bin/python3");
    command
        .arg(script)
        .arg(crate::anchor_file(archive))
        .arg(&expected);
    if causal {
        command.arg("--causal");
    }
    let output = command
        .output()
        .map_err(|e| format!("/usr/bin/python3: {e}"))?;
    let _ = std::fs::remove_file(&expected);
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        Ok(said.trim().to_string())
    } else {
        Err(said)
    }
}
