//! OTF2 archives written by Python's `otf2` (as Score-P lays out an MPI trace) for the seed
//! documents' worked examples: imported, they give the documented wait states, delay costs and
//! critical path, in one process and in the distributed form.

use mpistat_analysis::analysis::{run_passes_on, summarise};
use mpistat_analysis::distributed::{forward_on, ThreadExchange};
use mpistat_analysis::distributed_replay;
use mpistat_analysis::examples::{assert_close, callpath_id};
use mpistat_analysis::patterns::Pattern;
use mpistat_analysis::Analysis;
use mpistat_otf2::Otf2Archive;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `example` with `write_examples.py` and opens it.
fn written(example: &str) -> (PathBuf, Otf2Archive) {
    let dir =
        std::env::temp_dir().join(format!("mpistat-otf2-py-{example}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/write_examples.py");
    // Debian's python3-otf2 is the system Python's.
    let status = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(&dir)
        .arg(example)
        .status()
        .expect("/usr/bin/python3 (python3-otf2: scripts/prereqs.sh)");
    assert!(status.success(), "{script:?} {example}");
    let archive = Otf2Archive::open(&dir).unwrap();
    (dir, archive)
}

/// The one-process analysis, and that the distributed one at 2 and 3 processes is the same.
fn analysed(example: &str) -> (Analysis, Vec<String>) {
    let (dir, archive) = written(example);
    let (passes, problems) = run_passes_on(&archive, &mut |_| {}).unwrap();
    let analysis = summarise(&passes);
    for processes in [2, 3] {
        let mut results = ThreadExchange::run(processes, |exchange| {
            let (local, _) = forward_on(&archive, exchange).unwrap();
            distributed_replay::analyze(&local, exchange).unwrap()
        });
        let distributed = results.swap_remove(0).expect("process 0 reports");
        assert_eq!(distributed, analysis, "{example} at {processes} processes");
    }
    std::fs::remove_dir_all(dir).unwrap();
    (analysis, problems)
}

fn waiting(analysis: &Analysis, label: &str, rank: u32, pattern: Pattern) -> f64 {
    let index = Pattern::ALL.iter().position(|&p| p == pattern).unwrap();
    analysis.cell(callpath_id(analysis, label), rank).waiting[index]
}

fn delay(analysis: &Analysis, label: &str, rank: u32) -> f64 {
    let cell = analysis.cell(callpath_id(analysis, label), rank);
    cell.delay_short_term + cell.delay_long_term
}

#[test]
fn late_sender() {
    let (analysis, problems) = analysed("late_sender");
    assert!(problems.is_empty(), "{problems:?}");
    assert_close(
        waiting(&analysis, "MPI_Recv (ls.c:20)", 1, Pattern::LateSender),
        5.0,
    );
    assert_close(delay(&analysis, "work", 0), 5.0);
    assert_eq!(analysis.ticks_per_second, 1000);
}

#[test]
fn late_receiver() {
    let (analysis, _) = analysed("late_receiver");
    assert_close(
        waiting(&analysis, "MPI_Ssend (lr.c:10)", 0, Pattern::LateReceiver),
        5.0,
    );
    assert_close(delay(&analysis, "work", 1), 5.0);
}

#[test]
fn wait_at_nxn() {
    let (analysis, _) = analysed("nxn");
    for rank in [0, 2] {
        assert_close(
            waiting(
                &analysis,
                "MPI_Allreduce (nxn.c:30)",
                rank,
                Pattern::WaitAtNxN,
            ),
            6.0,
        );
    }
    assert_close(
        waiting(&analysis, "MPI_Allreduce (nxn.c:30)", 1, Pattern::WaitAtNxN),
        0.0,
    );
    assert_close(delay(&analysis, "work", 1), 12.0);
}

#[test]
fn wait_at_a_barrier_with_what_the_analysis_does_not_use_noted_once() {
    let (analysis, problems) = analysed("barrier");
    for rank in 0..3 {
        assert_close(
            waiting(
                &analysis,
                "MPI_Barrier (b.c:12)",
                rank,
                Pattern::WaitAtBarrier,
            ),
            4.0,
        );
    }
    assert_close(analysis.total_waiting, 12.0);
    assert_eq!(analysis.ranks, 4, "the OpenMP thread is no rank");
    assert_eq!(
        problems,
        [
            "skipped what the analysis does not use: the events of OpenMP, metrics and 1 location \
          besides the MPI ranks' (threads, GPU streams, metrics)"
        ]
    );
}

/// Böhme et al., "Identifying the root causes of wait states in large-scale parallel
/// applications" (TOPC 2016), Fig. 2: as `analysis/tests/paper_examples.rs` checks it.
#[test]
fn delay_propagation_of_figure_2() {
    let (analysis, _) = analysed("figure2");
    let (comp, r1, r2) = (
        callpath_id(&analysis, "comp"),
        callpath_id(&analysis, "MPI_Recv (R1)"),
        callpath_id(&analysis, "MPI_Recv (R2)"),
    );
    let b = analysis.cell(r1, 1);
    assert_close(b.total_waiting(), 2.0);
    assert_close(b.direct_waiting, 2.0);
    assert_close(b.propagating_waiting, 2.0);
    let c = analysis.cell(r2, 2);
    assert_close(c.total_waiting(), 3.0);
    assert_close(c.indirect_waiting, 2.0);
    assert_close(c.direct_waiting, 1.0);
    assert_close(c.terminal_waiting, 3.0);
    assert_close(analysis.cell(comp, 0).delay_short_term, 2.0);
    assert_close(analysis.cell(comp, 0).delay_long_term, 2.0);
    assert_close(analysis.cell(r1, 1).delay_short_term, 1.0);
}

/// The same paper, Fig. 3: exact delay costs and the critical path A, B, C.
#[test]
fn delay_costs_and_critical_path_of_figure_3() {
    let (analysis, _) = analysed("figure3");
    let (f, g) = (callpath_id(&analysis, "f"), callpath_id(&analysis, "g"));
    let r3 = callpath_id(&analysis, "MPI_Recv (R3)");
    assert_close(analysis.cell(f, 0).delay_short_term, 0.75);
    assert_close(analysis.cell(f, 0).delay_long_term, 0.375);
    assert_close(analysis.cell(g, 0).delay_short_term, 2.25);
    assert_close(analysis.cell(g, 0).delay_long_term, 1.125);
    assert_close(analysis.cell(r3, 1).delay_short_term, 0.5);
    assert_close(analysis.total_waiting, 5.0);
    let start = analysis.start;
    let path: Vec<(u32, u64, u64)> = (analysis.critical_path.iter())
        .map(|s| (s.rank, s.start - start, s.end - start))
        .collect();
    assert_eq!(path, vec![(0, 0, 5), (1, 5, 7), (2, 7, 8)]);
    assert!(analysis.problems.is_empty(), "{:?}", analysis.problems);
}
