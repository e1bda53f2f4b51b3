//! The trace file format: round trips, and clear errors (never panics) on damaged files.

use mpistat_analysis::builder::{ExecutionBuilder, WORLD};
use mpistat_trace::error::TraceFileError;
use mpistat_trace::model::{
    Cartesian, ClockSample, Communicator, Event, EventKind, LocalDefinitions, Module, MpiClass,
    Region, RegionRole,
};
use mpistat_trace::tracefile::{
    decode_definitions, decode_local, decode_rank, encode_definitions, encode_local, encode_rank,
    local_file_name, rank_file_name, read_dir, write_dir,
};
use proptest::prelude::*;

fn sample() -> mpistat_trace::model::Trace {
    let mut b = ExecutionBuilder::new(4);
    let work = b.region("work", "");
    let (send, recv) = (b.region("MPI_Send", "a.c:1"), b.region("MPI_Recv", "a.c:2"));
    let allreduce = b.region("MPI_Allreduce", "a.c:3");
    b.set_partitions(vec![0, 0, 1, 1]);
    b.set_cartesian(Cartesian {
        dims: vec![2, 2],
        coords: vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]],
    });
    for rank in 0..4 {
        b.compute(rank, work, 10 + u64::from(rank) * 300);
    }
    b.message((0, send), (3, recv), -7, 1 << 40, true, 1, 2);
    b.collective(WORLD, allreduce, None, 5);
    b.finish()
}

#[test]
fn a_directory_round_trips() {
    let trace = sample();
    let dir = std::env::temp_dir().join(format!("mpistat-analysis-rt-{}", std::process::id()));
    write_dir(&dir, &trace).unwrap();
    let (read, problems) = read_dir(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(read, trace);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn every_truncation_is_a_clear_error() {
    let trace = sample();
    let rank = encode_rank(3, &trace.ranks[3]).unwrap();
    for len in 0..rank.len() {
        let err = decode_rank(&rank[..len], "rank-000003.mpt").unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("rank-000003.mpt: "), "{message}");
        assert!(
            matches!(
                err,
                TraceFileError::Truncated { .. } | TraceFileError::BadMagic { .. }
            ),
            "{message}"
        );
    }
    let defs = encode_definitions(&trace.definitions);
    for len in 0..defs.len() {
        assert!(decode_definitions(&defs[..len], "definitions.mpt").is_err());
    }
}

#[test]
fn other_versions_are_refused_by_name() {
    let mut bytes = encode_rank(0, &[]).unwrap();
    bytes[8] = 9;
    let err = decode_rank(&bytes, "r").unwrap_err().to_string();
    assert_eq!(
        err,
        "r: trace format version 9 is not supported (this mpistat reads version 1)"
    );
}

#[test]
fn events_are_compact() {
    let trace = sample();
    let events = trace.event_count();
    let bytes: usize = (0..4)
        .map(|r| encode_rank(r, &trace.ranks[r as usize]).unwrap().len())
        .sum();
    assert!(bytes < events * 8, "{bytes} bytes for {events} events");
}

proptest! {
    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200), keep in 0..40usize) {
        let mut real = encode_rank(1, &sample().ranks[1]).unwrap();
        let keep = keep.min(real.len());
        real.truncate(keep);
        real.extend(bytes);
        let _ = decode_rank(&real, "x");
        let mut defs = encode_definitions(&sample().definitions);
        defs.truncate(keep.max(10));
        defs.extend(real);
        let _ = decode_definitions(&defs, "x");
    }

    #[test]
    fn events_round_trip(times in prop::collection::vec(0..1u64 << 50, 0..50), tag in any::<i32>(), root in prop::option::of(0..1000u32)) {
        let mut times = times;
        times.sort_unstable();
        let kinds = [
            EventKind::Enter { region: 3 },
            EventKind::Send { peer: 2, tag, comm: 1, bytes: 99, synchronous: true },
            EventKind::Recv { peer: 5, tag, comm: 0, bytes: 0 },
            EventKind::RequestPost { request: u64::MAX },
            EventKind::RequestComplete { request: 7 },
            EventKind::CollectiveExit { comm: 2, root, sent: 1, received: 2 },
            EventKind::Exit,
        ];
        let events: Vec<Event> = times.iter().zip(kinds.iter().cycle()).map(|(&time, &kind)| Event { time, kind }).collect();
        let bytes = encode_rank(42, &events).unwrap();
        prop_assert_eq!(decode_rank(&bytes, "x").unwrap(), (42, events));
    }

    #[test]
    fn local_definitions_round_trip(
        rank in 0..64u32,
        names in prop::collection::vec("[a-zA-Z_]{1,12}", 0..6),
        comms in prop::collection::vec(prop::collection::vec(0..64u32, 0..5), 0..4),
        partition in prop::option::of(any::<u32>()),
        cart in prop::option::of((prop::collection::vec(1..8u32, 1..4), any::<u8>())),
        clock in prop::collection::vec((any::<u64>(), any::<i64>()), 0..3),
        stopped in prop::option::of("[a-z ]{1,30}"),
        build_id in "[0-9a-f]{0,40}",
        load_address in any::<u64>(),
        keep in 0..200usize,
    ) {
        let local = LocalDefinitions {
            rank,
            world_size: 64,
            ticks_per_second: 1_000_000_000,
            regions: names
                .iter()
                .map(|n| Region {
                    name: n.clone(),
                    site: format!("{n}+0x10"),
                    role: RegionRole::Mpi(MpiClass::of_routine(n)),
                })
                .collect(),
            communicators: comms.into_iter().map(|members| Communicator { members }).collect(),
            partition,
            cartesian: cart.map(|(dims, c)| {
                let coords = dims.iter().map(|d| u32::from(c) % d).collect();
                (dims, coords)
            }),
            clock: clock
                .into_iter()
                .map(|(local, offset)| ClockSample { local, offset })
                .collect(),
            stopped,
            modules: vec![Module { path: "/bin/app".into(), build_id, load_address }],
        };
        let bytes = encode_local(&local);
        prop_assert_eq!(decode_local(&bytes, "x").unwrap(), local);
        // A cut file is an error, never a panic.
        if keep < bytes.len() {
            prop_assert!(decode_local(&bytes[..keep], "x").is_err());
        }
    }
}

/// A directory as the profiler writes it: per-rank local definitions, unified on reading.
#[test]
fn profiler_directories_are_unified() {
    let dir = std::env::temp_dir().join(format!("mpistat-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let region = |name: &str| Region {
        name: name.into(),
        site: "app+0x1".into(),
        role: RegionRole::Mpi(MpiClass::of_routine(name)),
    };
    for rank in 0..2u32 {
        // Each rank met its routine first: local region 0 is MPI_Send on rank 0, MPI_Recv on 1.
        let (first, second) = if rank == 0 {
            ("MPI_Send", "MPI_Recv")
        } else {
            ("MPI_Recv", "MPI_Send")
        };
        let local = LocalDefinitions {
            rank,
            world_size: 2,
            ticks_per_second: 1_000_000_000,
            regions: vec![region(first), region(second)],
            communicators: vec![Communicator {
                members: vec![0, 1],
            }],
            clock: vec![ClockSample {
                local: 0,
                offset: if rank == 1 { 1_000 } else { 0 },
            }],
            stopped: (rank == 1).then(|| "recording stopped here".to_string()),
            ..Default::default()
        };
        std::fs::write(dir.join(local_file_name(rank)), encode_local(&local)).unwrap();
        let events = if rank == 0 {
            vec![
                Event {
                    time: 10,
                    kind: EventKind::Enter { region: 0 },
                },
                Event {
                    time: 10,
                    kind: EventKind::Send {
                        peer: 1,
                        tag: 0,
                        comm: 0,
                        bytes: 4,
                        synchronous: false,
                    },
                },
                Event {
                    time: 20,
                    kind: EventKind::Exit,
                },
            ]
        } else {
            vec![
                Event {
                    time: 0,
                    kind: EventKind::Enter { region: 0 },
                },
                Event {
                    time: 30,
                    kind: EventKind::Recv {
                        peer: 0,
                        tag: 0,
                        comm: 0,
                        bytes: 4,
                    },
                },
                Event {
                    time: 30,
                    kind: EventKind::Exit,
                },
            ]
        };
        std::fs::write(
            dir.join(rank_file_name(rank)),
            encode_rank(rank, &events).unwrap(),
        )
        .unwrap();
    }
    let (trace, problems) = read_dir(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(problems, vec!["recording stopped here".to_string()]);
    assert_eq!(trace.definitions.regions.len(), 2);
    assert_eq!(trace.definitions.partitions, None);
    let recv = trace
        .definitions
        .regions
        .iter()
        .position(|r| r.name == "MPI_Recv")
        .unwrap() as u32;
    assert_eq!(trace.ranks[1][0].kind, EventKind::Enter { region: recv });
    // Rank 1's clock is 1000 ticks behind rank 0's.
    assert_eq!(trace.ranks[1][1].time, 1_030);
    mpistat_analysis::analyze(&trace).unwrap();
}
