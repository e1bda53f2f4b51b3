//! Properties of random valid executions, checked against an independent oracle: the program
//! activity graph of Korkhov et al. ("Finding bottlenecks in MPI programs by scalable critical path
//! analysis", Algorithms 2023), whose longest path is the critical path.

use mpistat_analysis::analysis::{run_passes_on_dir, summarise};
use mpistat_analysis::builder::{ExecutionBuilder, WORLD};
use mpistat_analysis::distributed::{wait_states_of, wait_states_on_threads};
use mpistat_analysis::distributed_replay::analysis_on_threads;
use mpistat_analysis::examples::{MixedRegions, ROUTINES};
use mpistat_analysis::{analyze, Analysis};
use mpistat_trace::model::{EventKind, MpiClass, RegionRole, Trace};
use mpistat_trace::tracefile::write_dir;
use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};

/// One step of a random execution.
#[derive(Debug, Clone)]
enum Step {
    Compute {
        rank: u32,
        region: usize,
        duration: u64,
    },
    Message {
        from: u32,
        to: u32,
        synchronous: bool,
        send_cost: u64,
        recv_cost: u64,
    },
    Collective {
        routine: usize,
        root: u32,
        on_half: bool,
        cost: u64,
    },
}

fn step(ranks: u32) -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..ranks, 0..3usize, 0..20u64).prop_map(|(rank, region, duration)| Step::Compute { rank, region, duration }),
        3 => (0..ranks, 1..ranks, any::<bool>(), 0..3u64, 0..3u64).prop_map(move |(from, offset, synchronous, send_cost, recv_cost)| {
            Step::Message { from, to: (from + offset) % ranks, synchronous, send_cost, recv_cost }
        }),
        1 => (0..ROUTINES.len(), 0..ranks, any::<bool>(), 0..3u64).prop_map(|(routine, root, on_half, cost)| {
            Step::Collective { routine, root, on_half, cost }
        }),
    ]
}

fn execution() -> impl Strategy<Value = Trace> {
    (2..7u32).prop_flat_map(|ranks| {
        prop::collection::vec(step(ranks), 1..60).prop_map(move |steps| build(ranks, &steps))
    })
}

fn build(ranks: u32, steps: &[Step]) -> Trace {
    let mut b = ExecutionBuilder::new(ranks);
    let init = b.region("MPI_Barrier", "init");
    let regions = MixedRegions::new(&mut b, "p.c");
    b.collective(WORLD, init, None, 1);
    for step in steps {
        match *step {
            Step::Compute {
                rank,
                region,
                duration,
            } => b.compute(rank, regions.users[region], duration),
            Step::Message {
                from,
                to,
                synchronous,
                send_cost,
                recv_cost,
            } => regions.message(&mut b, (from, to), synchronous, (send_cost, recv_cost)),
            Step::Collective {
                routine,
                root,
                on_half,
                cost,
            } => regions.collective(&mut b, routine, root, on_half, cost),
        }
    }
    b.finish()
}

/// An event: (rank, index).
type Vertex = (usize, usize);
/// The members of one collective instance: (rank, enter, collective exit).
type Members = Vec<(usize, Vertex, Vertex)>;

/// The longest path of the program activity graph, built from the raw events alone.
///
/// Vertices are events. Program edges join consecutive events of a rank and weigh the time
/// between them, except that an operation's completing event is reached from its enter only by
/// its time after the release (the latest enter of the ranks it depends on: Korkhov et al.'s
/// wait-before). Communication edges join each depended-on rank's enter to the completing event
/// and weigh the time in between.
fn longest_activity_path(trace: &Trace) -> u64 {
    let regions = &trace.definitions.regions;
    let comms = &trace.definitions.communicators;
    let mut edges: HashMap<Vertex, Vec<(Vertex, u64)>> = HashMap::new();
    let mut indegree: HashMap<Vertex, usize> = HashMap::new();
    let time = |v: Vertex| trace.ranks[v.0][v.1].time;
    // Enter of the operation around each event, and its class.
    let mut op_enter: HashMap<Vertex, Vertex> = HashMap::new();
    let mut sends: HashMap<(usize, usize), VecDeque<Vertex>> = HashMap::new();
    let mut collectives: HashMap<(u32, usize), Members> = HashMap::new();
    for (rank, events) in trace.ranks.iter().enumerate() {
        let mut enter = (rank, 0);
        let mut sequence: HashMap<u32, usize> = HashMap::new();
        for (index, event) in events.iter().enumerate() {
            match event.kind {
                EventKind::Enter { .. } => enter = (rank, index),
                EventKind::Send { peer, .. } => sends
                    .entry((rank, peer as usize))
                    .or_default()
                    .push_back(enter),
                EventKind::CollectiveExit { comm, .. } => {
                    let n = sequence.entry(comm).or_default();
                    collectives
                        .entry((comm, *n))
                        .or_default()
                        .push((rank, enter, (rank, index)));
                    *n += 1;
                }
                _ => {}
            }
            op_enter.insert((rank, index), enter);
        }
    }
    // Dependencies: completing event -> the enters it waits for.
    let mut depends: HashMap<Vertex, Vec<Vertex>> = HashMap::new();
    for (rank, events) in trace.ranks.iter().enumerate() {
        for (index, event) in events.iter().enumerate() {
            if let EventKind::Recv { peer, .. } = event.kind {
                let send_enter = sends
                    .get_mut(&(peer as usize, rank))
                    .and_then(VecDeque::pop_front)
                    .expect("matched");
                depends.entry((rank, index)).or_default().push(send_enter);
                let send_event = (send_enter.0, send_enter.1 + 1);
                if let EventKind::Send {
                    synchronous: true, ..
                } = trace.ranks[send_event.0][send_event.1].kind
                {
                    // The sender's exit follows its send event.
                    depends
                        .entry((send_event.0, send_event.1 + 1))
                        .or_default()
                        .push(op_enter[&(rank, index)]);
                }
            }
        }
    }
    for members in collectives.values() {
        let root = match trace.ranks[members[0].2 .0][members[0].2 .1].kind {
            EventKind::CollectiveExit { root, .. } => root.map(|r| r as usize),
            _ => None,
        };
        let class = match regions[match trace.ranks[members[0].1 .0][members[0].1 .1].kind {
            EventKind::Enter { region } => region as usize,
            _ => unreachable!(),
        }]
        .role
        {
            RegionRole::Mpi(class) => class,
            RegionRole::User => unreachable!(),
        };
        assert_eq!(
            members.len(),
            comms
                .iter()
                .map(|c| c.members.len())
                .find(|&n| n == members.len())
                .unwrap()
        );
        for &(rank, _, exit) in members {
            let on: Vec<Vertex> = members
                .iter()
                .filter(|&&(other, _, _)| match class {
                    MpiClass::OneToAll => Some(rank) != root && Some(other) == root,
                    MpiClass::AllToOne => Some(rank) == root,
                    _ => true,
                })
                .map(|&(_, enter, _)| enter)
                .collect();
            depends.entry(exit).or_default().extend(on);
        }
    }
    let mut add = |from: Vertex, to: Vertex, weight: u64| {
        edges.entry(from).or_default().push((to, weight));
        *indegree.entry(to).or_default() += 1;
        indegree.entry(from).or_default();
    };
    for (rank, events) in trace.ranks.iter().enumerate() {
        for index in 1..events.len() {
            let (from, to) = ((rank, index - 1), (rank, index));
            let weight = match depends.get(&to) {
                Some(on) => {
                    let release = on
                        .iter()
                        .map(|&v| time(v))
                        .chain([time(op_enter[&to])])
                        .max()
                        .unwrap();
                    // The previous event is inside the operation, at or before the release.
                    time(to) - release.max(time(from))
                }
                None => time(to) - time(from),
            };
            add(from, to, weight);
        }
    }
    for (&to, on) in &depends {
        for &from in on {
            add(from, to, time(to).saturating_sub(time(from)));
        }
    }
    // Kahn's topological order, longest distances.
    let mut distance: HashMap<Vertex, u64> = indegree.keys().map(|&v| (v, 0)).collect();
    let mut ready: Vec<Vertex> = indegree
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&v, _)| v)
        .collect();
    let mut visited = 0;
    while let Some(v) = ready.pop() {
        visited += 1;
        for &(to, weight) in edges.get(&v).map(Vec::as_slice).unwrap_or(&[]) {
            let candidate = distance[&v] + weight;
            let d = distance.get_mut(&to).unwrap();
            *d = (*d).max(candidate);
            let n = indegree.get_mut(&to).unwrap();
            *n -= 1;
            if *n == 0 {
                ready.push(to);
            }
        }
    }
    assert_eq!(visited, distance.len(), "the activity graph has a cycle");
    distance.values().copied().max().unwrap_or(0)
}

fn critical_length(analysis: &Analysis) -> u64 {
    analysis.critical_path.iter().map(|s| s.end - s.start).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn delay_costs_sum_to_total_waiting_time(trace in execution()) {
        let analysis = analyze(&trace).unwrap();
        let totals = analysis.totals();
        let costs = totals.delay_short_term + totals.delay_long_term;
        prop_assert!((costs - analysis.total_waiting).abs() <= 1e-6 * (1.0 + analysis.total_waiting),
            "costs {costs} waiting {}", analysis.total_waiting);
        prop_assert!((totals.direct_waiting + totals.indirect_waiting - analysis.total_waiting).abs() <= 1e-6 * (1.0 + analysis.total_waiting));
        prop_assert!((totals.propagating_waiting + totals.terminal_waiting - analysis.total_waiting).abs() <= 1e-9);
    }

    #[test]
    fn critical_path_is_as_long_as_the_run_and_free_of_waiting(trace in execution()) {
        let analysis = analyze(&trace).unwrap();
        prop_assert_eq!(critical_length(&analysis), analysis.wall());
        let totals = analysis.totals();
        prop_assert!((totals.critical - analysis.wall() as f64).abs() < 1e-9);
        let passes = mpistat_analysis::analysis::run_passes(&trace).unwrap();
        for segment in &analysis.critical_path {
            let timeline = &passes.timelines[segment.rank as usize];
            for wait in &passes.forward.waits[segment.rank as usize] {
                let enter = timeline.ops[wait.op as usize].enter;
                let overlap = (enter + wait.wait).min(segment.end).saturating_sub(enter.max(segment.start));
                prop_assert_eq!(overlap, 0, "wait state {:?} on the critical path {:?}", wait, segment);
            }
        }
    }

    #[test]
    fn critical_path_is_the_longest_activity_path(trace in execution()) {
        let analysis = analyze(&trace).unwrap();
        prop_assert_eq!(critical_length(&analysis), longest_activity_path(&trace));
    }
}

fn any_event_kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        (0..6u32).prop_map(|region| EventKind::Enter { region }),
        Just(EventKind::Exit),
        (0..5u32, 0..2i32, 0..3u32, any::<bool>()).prop_map(|(peer, tag, comm, synchronous)| {
            EventKind::Send {
                peer,
                tag,
                comm,
                bytes: 1,
                synchronous,
            }
        }),
        (0..5u32, 0..2i32, 0..3u32).prop_map(|(peer, tag, comm)| EventKind::Recv {
            peer,
            tag,
            comm,
            bytes: 1
        }),
        (0..3u32, prop::option::of(0..5u32)).prop_map(|(comm, root)| EventKind::CollectiveExit {
            comm,
            root,
            sent: 0,
            received: 0
        }),
    ]
}

/// A fresh directory for one case's trace files.
fn case_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mpistat-props-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    /// The distributed forward replay (threads standing in for MPI processes) finds the
    /// one-process analysis's wait states, for any number of processes, more than ranks too.
    #[test]
    fn distributed_wait_states_equal_one_process(trace in execution()) {
        let dir = case_dir();
        write_dir(&dir, &trace).unwrap();
        let (passes, _) = run_passes_on_dir(&dir, &mut |_| {}).unwrap();
        let expected = wait_states_of(&passes);
        for processes in 1..=(trace.ranks.len() + 1) {
            let report = wait_states_on_threads(&dir, processes).unwrap();
            prop_assert_eq!(&report, &expected, "{} processes", processes);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    /// The whole distributed analysis (backward replay, critical path, metrics) on threads
    /// standing in for MPI processes: the one-process result bit for bit (compared as JSON,
    /// which writes every bit of a float), for any number of processes; its delay costs add up
    /// to the waiting time and its critical path is as long as the run.
    #[test]
    fn distributed_analysis_equals_one_process(trace in execution()) {
        let dir = case_dir();
        write_dir(&dir, &trace).unwrap();
        let (passes, _) = run_passes_on_dir(&dir, &mut |_| {}).unwrap();
        let expected = serde_json::to_string(&summarise(&passes)).unwrap();
        for processes in 1..=(trace.ranks.len() + 1) {
            let analysis = analysis_on_threads(&dir, processes).unwrap();
            let totals = analysis.totals();
            let costs = totals.delay_short_term + totals.delay_long_term;
            prop_assert!((costs - analysis.total_waiting).abs() <= 1e-6 * (1.0 + analysis.total_waiting),
                "{} processes: costs {costs} waiting {}", processes, analysis.total_waiting);
            prop_assert_eq!(critical_length(&analysis), analysis.wall(), "{} processes", processes);
            prop_assert_eq!(serde_json::to_string(&analysis).unwrap(), expected.clone(), "{} processes", processes);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Arbitrary (mostly invalid) event lists give a result or an error, never a panic or a hang.
    #[test]
    fn arbitrary_events_never_panic(
        ranks in prop::collection::vec(prop::collection::vec((0..5u64, any_event_kind()), 0..25), 1..4)
    ) {
        let mut trace = build(2, &[]);
        trace.definitions.communicators.push(mpistat_trace::model::Communicator { members: vec![1, 0] });
        trace.ranks = ranks
            .into_iter()
            .map(|events| {
                let mut time = 0;
                events
                    .into_iter()
                    .map(|(delta, kind)| {
                        time += delta;
                        mpistat_trace::model::Event { time, kind }
                    })
                    .collect()
            })
            .collect();
        let _ = analyze(&trace);
    }
}
