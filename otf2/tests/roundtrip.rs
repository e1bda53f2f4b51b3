//! An mpistat trace exported as OTF2 and read back gives the same events, rank by rank, and
//! the same analysis, bit for bit.

use mpistat_analysis::analysis::{run_passes_on, run_passes_on_dir, summarise};
use mpistat_analysis::builder::ExecutionBuilder;
use mpistat_analysis::examples;
use mpistat_analysis::model::{Cartesian, Event, EventKind, Trace};
use mpistat_analysis::tracefile::{read_dir, write_dir};
use mpistat_otf2::{export_dir, Otf2Archive};
use proptest::prelude::*;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpistat-otf2-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Writes `trace`, exports it, reads the archive back: the trace's events and the archive's,
/// rank by rank, and both analyses.
fn round_trip(name: &str, trace: &Trace) {
    let base = scratch(name);
    let (dir, out) = (base.join("mpt"), base.join("otf2"));
    write_dir(&dir, trace).unwrap();
    let exported = export_dir(&dir, &out, &mut |_| {}).unwrap();
    assert_eq!(exported.ranks as usize, trace.ranks.len());
    let archive = Otf2Archive::open(&out).unwrap();
    let (read, _) = read_dir(&dir).unwrap();
    assert_eq!(
        archive.definitions(),
        &read.definitions,
        "{name}: definitions"
    );
    for (rank, expected) in read.ranks.iter().enumerate() {
        let mut events = archive.events(rank as u32).unwrap();
        let got: Vec<Event> = events.by_ref().collect();
        assert_eq!(events.finish().unwrap(), 0, "{name}: nothing skipped");
        assert_eq!(&got, expected, "{name}: rank {rank}'s events");
    }
    let (mpistat, _) = run_passes_on_dir(&dir, &mut |_| {}).unwrap();
    let (otf2, problems) = run_passes_on(&archive, &mut |_| {}).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        summarise(&otf2),
        summarise(&mpistat),
        "{name}: the analysis"
    );
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn the_papers_examples_come_back_the_same() {
    round_trip("fig2", &examples::topc_figure_2().finish());
    round_trip("fig3", &examples::topc_figure_3().finish());
}

#[test]
fn a_halo_exchange_comes_back_the_same() {
    round_trip("halo", &examples::halo(8, 20_000));
}

/// Nonblocking calls (the requests' events), a receive completed without its source, an event
/// between a collective's enter and its end, partitions and a Cartesian topology.
fn requests_and_topology() -> Trace {
    let mut b = ExecutionBuilder::new(2);
    let names = [
        "MPI_Isend",
        "MPI_Waitall",
        "MPI_Irecv",
        "MPI_Wait",
        "MPI_Barrier",
        "MPI_Recv",
        "MPI_Send",
    ];
    let [isend, waitall, irecv, wait, barrier, recv, send] = names.map(|n| b.region(n, "app.c:7"));
    b.set_partitions(vec![0, 1]);
    b.set_cartesian(Cartesian {
        dims: vec![2],
        coords: vec![vec![0], vec![1]],
    });
    let mut trace = b.finish();
    let message = |peer| (peer, 5, 0, 64);
    let send_to = |(peer, tag, comm, bytes)| EventKind::Send {
        peer,
        tag,
        comm,
        bytes,
        synchronous: false,
    };
    let recv_from = |(peer, tag, comm, bytes)| EventKind::Recv {
        peer,
        tag,
        comm,
        bytes,
    };
    let enter = |region| EventKind::Enter { region };
    let exit = EventKind::CollectiveExit {
        comm: 0,
        root: None,
        sent: 0,
        received: 0,
    };
    let timed = |events: Vec<(u64, EventKind)>| {
        events
            .into_iter()
            .map(|(time, kind)| Event { time, kind })
            .collect()
    };
    trace.ranks[0] = timed(vec![
        (0, enter(isend)),
        (0, send_to(message(1))),
        (1, EventKind::RequestPost { request: 1 }),
        (1, EventKind::Exit),
        (2, enter(waitall)),
        (3, EventKind::RequestComplete { request: 1 }),
        (3, EventKind::Exit),
        (4, enter(irecv)),
        (5, EventKind::RequestPost { request: 2 }),
        (5, EventKind::Exit),
        (6, enter(wait)),
        (8, EventKind::RequestComplete { request: 2 }),
        (8, recv_from(message(1))),
        (8, EventKind::Exit),
        (9, enter(wait)),
        (9, EventKind::RequestComplete { request: 3 }),
        (9, EventKind::Exit),
        (10, enter(barrier)),
        (10, EventKind::RequestComplete { request: 4 }),
        (12, exit),
    ]);
    trace.ranks[1] = timed(vec![
        (0, enter(recv)),
        (2, recv_from(message(0))),
        (2, EventKind::Exit),
        (3, enter(send)),
        (3, send_to(message(0))),
        (3, EventKind::Exit),
        (11, enter(barrier)),
        (12, exit),
    ]);
    trace
}

#[test]
fn requests_and_topologies_come_back_the_same() {
    round_trip("requests", &requests_and_topology());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn mixed_executions_come_back_the_same(ranks in 1u32..7, steps in 0usize..120, seed: u64) {
        round_trip(&format!("mixed-{seed}"), &examples::mixed(ranks, steps, seed));
    }
}
