//! Traces the OTF2 tests share.

use mpistat_analysis::builder::ExecutionBuilder;
use mpistat_trace::model::{Cartesian, Event, EventKind, Trace};

/// Nonblocking calls (the requests' events), a receive completed without its source, an event
/// between a collective's enter and its end, partitions and a Cartesian topology.
pub fn requests_and_topology() -> Trace {
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
