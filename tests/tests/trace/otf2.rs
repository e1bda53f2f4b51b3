//! OTF2 out and in with real traced jobs (issue 37), under both MPI families: a job traced by
//! the profiler (`delays.c`, `MPISTAT_TRACE=1`: per-rank local definitions, clocks corrected to
//! rank 0's, call sites turned into source lines) exported by `mpistat analyze --otf2`;
//! `otf2-print` reads every event of the archive, Python's `otf2` finds mpistat's own trace in
//! it event by event with every message matched; the archive analysed again gives the same
//! report; `mpistat-analyze --otf2` on 3 processes writes the same archive (file by file; the
//! anchor's random trace identifier aside) and the same Perfetto timeline, and reads the
//! archive back in parallel to the same report.

use mpistat_analysis_report::symbolize::symbolize;
use mpistat_e2e::*;
use mpistat_otf2::anchor_file;
use mpistat_otf2::reference::{otf2_print_events, python_check};
use mpistat_trace::tracefile::read_dir;
use std::path::Path;
use std::process::Command;

/// Every file of archive `a` is in `b` with the same bytes; the anchor files say the same but
/// for the trace identifier, which libotf2 draws at random.
fn assert_same_archive(a: &Path, b: &Path) {
    let files = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("traces"))
            .unwrap()
            .map(|e| format!("traces/{}", e.unwrap().file_name().to_string_lossy()))
            .chain(["traces.def".to_string()])
            .collect();
        names.sort();
        names
    };
    assert_eq!(files(a), files(b));
    for name in files(a) {
        assert!(
            std::fs::read(a.join(&name)).unwrap() == std::fs::read(b.join(&name)).unwrap(),
            "{name} differs"
        );
    }
    let anchor = |dir: &Path| {
        let out = Command::new("otf2-print")
            .arg("-A")
            .arg(anchor_file(dir))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|line| !line.starts_with("Trace identifier"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(anchor(a), anchor(b));
}

for_each_mpi! {
    fn a_real_traced_job_exported_read_back_and_written_in_parallel(mpi) {
        let _serial = serial();
        let home = Scratch::new("otf2-home");
        let info = traced_delays_job(mpi, 6, &home);
        let trace = Path::new(&info.dir);
        let out = Scratch::new("otf2-out");
        let archive = out.path().join("one");
        let timeline = out.path().join("one.json");
        let report = mpistat_analyze(&[
            Path::new("--otf2"),
            &archive,
            Path::new("--perfetto"),
            &timeline,
            trace,
        ]);

        // The reference tools: every event, and mpistat's own trace in it, event by event (with
        // the call sites as the export writes them: source lines).
        let printed = otf2_print_events(&anchor_file(&archive)).unwrap();
        let (mut own, _) = read_dir(trace).unwrap();
        symbolize(&mut own.definitions, trace);
        let said = python_check(&archive, &own, false).unwrap();
        assert!(said.starts_with(&format!("ok: {printed} events, ")), "{said}");
        let messages: u64 = said.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(messages >= 5, "the delayed send chain from rank to rank: {said}");

        // Read back: the same report.
        assert_eq!(mpistat_analyze(&[&archive]), report);

        // The parallel form writes the same archive, and reads it back in parallel.
        let parallel = out.path().join("three");
        let outcome = Job::new(analyze_mpi(mpi), 3)
            .mpi(mpi)
            .arg("--otf2")
            .arg(parallel.display().to_string())
            .arg("--perfetto")
            .arg(out.path().join("three.json").display().to_string())
            .arg(trace.display().to_string())
            .bare();
        outcome.assert_success();
        assert_eq!(outcome.stdout, report);
        assert_same_archive(&archive, &parallel);
        let read = |name: &str| std::fs::read(out.path().join(name)).unwrap();
        assert!(read("one.json") == read("three.json"), "the timelines differ");
        let outcome = Job::new(analyze_mpi(mpi), 2)
            .mpi(mpi)
            .arg(anchor_file(&archive).display().to_string())
            .bare();
        outcome.assert_success();
        assert_eq!(outcome.stdout, report);
    }
}
