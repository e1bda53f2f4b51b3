//! A damaged archive is a clear error, never a crash, a hang or a runaway allocation: every
//! file of a small archive cut short at every length and with bytes overwritten throughout,
//! and archives whose definitions break the rules (references to nothing, a rank outside its
//! communicator, files bigger than read).

use mpistat_analysis::analysis::run_passes_on;
use mpistat_analysis::examples;
use mpistat_otf2::{export_dir, Otf2Archive, Otf2Error};
use mpistat_trace::tracefile::write_dir;
use std::path::{Path, PathBuf};

fn exported(name: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!(
        "mpistat-otf2-hostile-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&base);
    write_dir(&base.join("mpt"), &examples::mixed(3, 40, 5)).unwrap();
    export_dir(&base.join("mpt"), &base.join("otf2"), &mut |_| {}).unwrap();
    base
}

/// Opens and analyses the archive: the error's text, or `None` when it reads.
fn outcome(archive: &Path) -> Option<String> {
    let archive = match Otf2Archive::open(archive) {
        Ok(archive) => archive,
        Err(error) => return Some(error.to_string()),
    };
    run_passes_on(&archive, &mut |_| {})
        .err()
        .map(|e| e.to_string())
}

#[test]
fn every_file_cut_short_or_overwritten_is_an_error_or_reads() {
    let base = exported("damage");
    let archive = base.join("otf2");
    let files = ["traces.otf2", "traces.def", "traces/0.evt", "traces/1.def"];
    let mut errors = 0;
    for file in files {
        let path = archive.join(file);
        let original = std::fs::read(&path).unwrap();
        let cuts = (0..original.len()).step_by(7);
        let overwrites = (0..original.len())
            .step_by(11)
            .flat_map(|i| [(i, 0xFF), (i, 0x00), (i, 0x7F)]);
        let mut damaged: Vec<Vec<u8>> = cuts.map(|n| original[..n].to_vec()).collect();
        damaged.extend(overwrites.map(|(i, byte)| {
            let mut bytes = original.clone();
            bytes[i] = byte;
            bytes
        }));
        for bytes in damaged {
            std::fs::write(&path, &bytes).unwrap();
            if let Some(error) = outcome(&archive) {
                // The reading's errors name the archive; the analysis's name rank and event.
                let clear = error.contains("traces") || error.starts_with("rank ");
                assert!(clear, "{file}: {error}");
                errors += 1;
            }
        }
        std::fs::write(&path, &original).unwrap();
    }
    assert!(errors > 100, "{errors} damaged archives were errors");
    assert_eq!(outcome(&archive), None, "the undamaged archive reads");
    std::fs::remove_dir_all(base).unwrap();
}

#[test]
fn a_truncated_event_file_names_the_file() {
    let base = exported("truncated");
    let evt = base.join("otf2/traces/1.evt");
    let bytes = std::fs::read(&evt).unwrap();
    std::fs::write(&evt, &bytes[..bytes.len() / 2]).unwrap();
    let error = outcome(&base.join("otf2")).expect("an error");
    assert!(error.contains("traces.otf2"), "{error}");
    std::fs::remove_dir_all(base).unwrap();
}

#[test]
fn definitions_bigger_than_read_are_refused_before_reading() {
    let base = exported("big");
    let def = base.join("otf2/traces.def");
    // A sparse file: its size is all that is looked at.
    std::fs::File::options()
        .write(true)
        .open(&def)
        .unwrap()
        .set_len(mpistat_otf2::import::MAX_DEFINITION_BYTES + 1)
        .unwrap();
    let error = Otf2Archive::open(&base.join("otf2")).unwrap_err();
    assert!(matches!(error, Otf2Error::TooBig { .. }), "{error}");
    assert!(
        error.to_string().contains("the global definitions file"),
        "{error}"
    );
    std::fs::remove_dir_all(base).unwrap();
}

#[test]
fn not_an_archive() {
    let dir = std::env::temp_dir().join(format!("mpistat-otf2-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let error = Otf2Archive::open(&dir).unwrap_err().to_string();
    assert!(error.contains("not an OTF2 archive"), "{error}");
    std::fs::write(dir.join("traces.otf2"), b"garbage").unwrap();
    std::fs::write(dir.join("traces.def"), b"garbage").unwrap();
    let error = Otf2Archive::open(&dir).unwrap_err().to_string();
    assert!(
        error.contains("traces.otf2: OTF2_Reader_Open failed"),
        "{error}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
