//! Each wait-state pattern on a minimal execution, with who waits, how long, and who pays.

use mpistat_analysis::builder::{ExecutionBuilder, WORLD};
use mpistat_analysis::distributed::{forward_on_dir, ThreadExchange};
use mpistat_analysis::distributed_replay;
use mpistat_analysis::patterns::Pattern;
use mpistat_analysis::{analyze, Analysis};
use mpistat_trace::model::{Event, EventKind};

fn waiting(analysis: &Analysis, label: &str, rank: u32, pattern: Pattern) -> f64 {
    let id = analysis
        .callpath(label)
        .unwrap_or_else(|| panic!("no {label}"))
        .id;
    let index = Pattern::ALL.iter().position(|&p| p == pattern).unwrap();
    analysis.cell(id, rank).waiting[index]
}

fn delay(analysis: &Analysis, label: &str, rank: u32) -> f64 {
    let id = analysis.callpath(label).unwrap().id;
    let cell = analysis.cell(id, rank);
    cell.delay_short_term + cell.delay_long_term
}

#[test]
fn late_receiver_makes_the_synchronous_sender_wait() {
    let mut b = ExecutionBuilder::new(2);
    let (work, ssend, recv) = (
        b.region("work", ""),
        b.region("MPI_Ssend", "s.c:1"),
        b.region("MPI_Recv", "s.c:2"),
    );
    b.compute(1, work, 5);
    b.message((0, ssend), (1, recv), 0, 8, true, 0, 1);
    let analysis = analyze(&b.finish()).unwrap();
    assert_eq!(
        waiting(&analysis, "MPI_Ssend (s.c:1)", 0, Pattern::LateReceiver),
        5.0
    );
    assert!((delay(&analysis, "work", 1) - 5.0).abs() < 1e-9);
}

#[test]
fn collectives_blame_the_last_rank_the_root_or_the_last_sender() {
    let mut b = ExecutionBuilder::new(3);
    let work = b.region("work", "");
    let (bcast, reduce, allreduce) = (
        b.region("MPI_Bcast", "c.c:1"),
        b.region("MPI_Reduce", "c.c:2"),
        b.region("MPI_Allreduce", "c.c:3"),
    );
    // Late Broadcast: the root (0) is 3 late for ranks 1 and 2.
    b.compute(0, work, 4);
    b.compute(1, work, 1);
    b.compute(2, work, 1);
    b.collective(WORLD, bcast, Some(0), 0);
    // Early Reduce: the root (0) arrives 2 before the last sender (2).
    b.compute(2, work, 2);
    b.collective(WORLD, reduce, Some(0), 0);
    // Wait at N x N: rank 1 is 6 late for both others.
    b.compute(1, work, 8);
    b.collective(WORLD, allreduce, None, 0);
    let analysis = analyze(&b.finish()).unwrap();
    assert_eq!(
        waiting(&analysis, "MPI_Bcast (c.c:1)", 1, Pattern::LateBroadcast),
        3.0
    );
    assert_eq!(
        waiting(&analysis, "MPI_Bcast (c.c:1)", 2, Pattern::LateBroadcast),
        3.0
    );
    assert_eq!(
        waiting(&analysis, "MPI_Bcast (c.c:1)", 0, Pattern::LateBroadcast),
        0.0
    );
    assert_eq!(
        waiting(&analysis, "MPI_Reduce (c.c:2)", 0, Pattern::EarlyReduce),
        2.0
    );
    assert_eq!(
        waiting(&analysis, "MPI_Reduce (c.c:2)", 1, Pattern::EarlyReduce),
        0.0
    );
    // Rank 1 left the reduce at 4 (it does not wait for the root); rank 0 at 6, rank 2 at 6.
    assert_eq!(
        waiting(&analysis, "MPI_Allreduce (c.c:3)", 0, Pattern::WaitAtNxN),
        6.0
    );
    assert_eq!(
        waiting(&analysis, "MPI_Allreduce (c.c:3)", 2, Pattern::WaitAtNxN),
        6.0
    );
    let totals = analysis.totals();
    assert_eq!(analysis.total_waiting, 3.0 + 3.0 + 2.0 + 6.0 + 6.0);
    assert!(
        (totals.delay_short_term + totals.delay_long_term - analysis.total_waiting).abs() < 1e-9
    );
    assert!(
        delay(&analysis, "work", 0) > 0.0
            && delay(&analysis, "work", 1) > 0.0
            && delay(&analysis, "work", 2) > 0.0
    );
}

#[test]
fn a_nonblocking_receive_waits_in_mpi_wait() {
    let mut b = ExecutionBuilder::new(2);
    let (irecv, wait, isend, work) = (
        b.region("MPI_Irecv", "n.c:1"),
        b.region("MPI_Wait", "n.c:2"),
        b.region("MPI_Isend", "n.c:3"),
        b.region("work", ""),
    );
    b.compute(1, work, 5);
    let mut trace = b.finish();
    let event = |time, kind| Event { time, kind };
    trace.ranks[0] = vec![
        event(0, EventKind::Enter { region: irecv }),
        event(0, EventKind::RequestPost { request: 1 }),
        event(1, EventKind::Exit),
        event(2, EventKind::Enter { region: wait }),
        event(
            6,
            EventKind::Recv {
                peer: 1,
                tag: 0,
                comm: WORLD,
                bytes: 8,
            },
        ),
        event(6, EventKind::RequestComplete { request: 1 }),
        event(6, EventKind::Exit),
    ];
    trace.ranks[1].extend([
        event(5, EventKind::Enter { region: isend }),
        event(
            5,
            EventKind::Send {
                peer: 0,
                tag: 0,
                comm: WORLD,
                bytes: 8,
                synchronous: false,
            },
        ),
        event(5, EventKind::Exit),
    ]);
    let analysis = analyze(&trace).unwrap();
    assert_eq!(
        waiting(&analysis, "MPI_Wait (n.c:2)", 0, Pattern::LateSender),
        3.0
    );
    assert!((delay(&analysis, "work", 1) - 3.0).abs() < 1e-9);
    let between = "compute after MPI_Irecv (n.c:1) before MPI_Wait (n.c:2)";
    assert_eq!(analysis.callpath(between).unwrap().total.time, 1.0);
}

#[test]
fn receives_that_wait_for_each_other_stall_the_replay_with_a_clear_error() {
    // Each rank receives before it sends, yet the clocks say each receive waited for the other
    // rank's send: a cycle no backward replay can finish. It must end, naming both ranks.
    let mut b = ExecutionBuilder::new(2);
    let (send, recv) = (b.region("MPI_Send", "c.c:1"), b.region("MPI_Recv", "c.c:2"));
    let mut trace = b.finish();
    let event = |time, kind| Event { time, kind };
    for (rank, peer) in [(0, 1), (1, 0)] {
        trace.ranks[rank] = vec![
            event(0, EventKind::Enter { region: recv }),
            event(
                10,
                EventKind::Recv {
                    peer,
                    tag: 0,
                    comm: WORLD,
                    bytes: 8,
                },
            ),
            event(10, EventKind::Exit),
            event(10, EventKind::Enter { region: send }),
            event(
                10,
                EventKind::Send {
                    peer,
                    tag: 0,
                    comm: WORLD,
                    bytes: 8,
                    synchronous: false,
                },
            ),
            event(11, EventKind::Exit),
        ];
    }
    let error = mpistat_analysis::analysis::run_passes(&trace).err();
    let stalled = mpistat_analysis::AnalysisError::ReplayStalled { stuck: vec![0, 1] };
    assert_eq!(error.as_ref(), Some(&stalled));
    // The distributed replay stops too, everywhere, with the same error.
    let dir = std::env::temp_dir().join(format!("mpistat-stall-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    mpistat_trace::tracefile::write_dir(&dir, &trace).unwrap();
    for processes in 1..=3 {
        let results = ThreadExchange::run(processes, |exchange| {
            let (local, _) = forward_on_dir(&dir, exchange).unwrap();
            distributed_replay::analyze(&local, exchange).err()
        });
        assert!(
            results.iter().all(|e| e.as_ref() == Some(&stalled)),
            "{processes} processes: {results:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
