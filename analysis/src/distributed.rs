//! The analysis split over processes, as Scalasca's parallel replay (Böhme et al., "Identifying the
//! root causes of wait states", and Böhme's thesis summary): each process reads only its block of
//! ranks, runs the per-rank passes on them, and exchanges with the other processes what the
//! original messages and collectives carried, never the traces.
//!
//! This module: reading, call-path unification, matching and the forward replay (wait states),
//! which equal the one-process analysis's ([`wait_state_report`]). The backward replay (delay
//! costs), the critical path and the metrics follow in [`crate::distributed_replay`].
//!
//! The passes talk through [`Exchange`], one collective all-to-all of bytes: the binary
//! `mpistat-analyze` implements it with MPI, [`ThreadExchange`] with threads (tests). This crate
//! stays free of MPI and IO beyond reading the trace.
//!
//! What crosses processes:
//! * call trees: each process merges its ranks' trees in rank order; the merged trees are
//!   exchanged and merged in process order, which numbers call paths as the one-process merge
//!   does;
//! * messages: per send, its channel position, operation, enter time and window start go to the
//!   receiver's process, which matches the k-th receive with the k-th send (MPI's non-overtaking
//!   rule) and answers each matched send with the receive's operation, enter time and window
//!   start (a Late Receiver needs them);
//! * collectives: every member's call goes to the instance's coordinator (a process chosen by
//!   communicator and sequence number), which finds the late arrival and tells the members.

use crate::analysis::remap_callpaths;
use crate::blocks::Blocks;
use crate::callpath::{CallNode, CallTree, CallpathId, Frame};
use crate::error::{AnalysisError, AnalyzeDirError};
use crate::forward::{latest_arrivals, local_window_starts, sorted_members, waits_of_rank};
use crate::forward::{Partner, WaitState};
use crate::matching::{problems, InstanceId, Participant};
use crate::patterns::Pattern;
use crate::source::{world_size, TraceDir, TraceSource};
use crate::timeline::{RankTimeline, SyncKind};
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{CommId, Definitions, MpiClass, Rank, Ticks};
use serde::Serialize;
use std::path::Path;
use std::sync::{Barrier, Mutex};

/// How the processes of a distributed analysis talk.
pub trait Exchange {
    /// This process's number, `0..processes()`.
    fn process(&self) -> usize;
    fn processes(&self) -> usize;
    /// Hands `outgoing[p]` to process `p` (one buffer per process, this one included) and returns
    /// what each process handed to this one, by process. All processes call it together.
    fn all_to_all(&self, outgoing: Vec<Vec<u8>>) -> Vec<Vec<u8>>;
}

/// The same bytes to every process; what each process sent, by process.
pub(crate) fn all_gather(exchange: &impl Exchange, mine: Vec<u8>) -> Vec<Vec<u8>> {
    exchange.all_to_all(vec![mine; exchange.processes()])
}

/// [`Exchange`] between threads of one process: the tests run the distributed passes with it.
pub struct ThreadExchange {
    processes: usize,
    /// `mailboxes[to][from]`.
    mailboxes: Mutex<Vec<Vec<Vec<u8>>>>,
    barrier: Barrier,
}

/// One thread's end of a [`ThreadExchange`].
pub struct ThreadEnd<'a> {
    shared: &'a ThreadExchange,
    process: usize,
}

impl ThreadExchange {
    pub fn new(processes: usize) -> Self {
        ThreadExchange {
            processes,
            mailboxes: Mutex::new(vec![vec![Vec::new(); processes]; processes]),
            barrier: Barrier::new(processes),
        }
    }

    /// Runs `f` on `processes` threads, each with its end; the results by process.
    pub fn run<T: Send>(processes: usize, f: impl Fn(&ThreadEnd<'_>) -> T + Sync) -> Vec<T> {
        let shared = ThreadExchange::new(processes);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..processes)
                .map(|process| {
                    let (shared, f) = (&shared, &f);
                    scope.spawn(move || f(&ThreadEnd { shared, process }))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an analysis thread panicked"))
                .collect()
        })
    }
}

impl Exchange for ThreadEnd<'_> {
    fn process(&self) -> usize {
        self.process
    }

    fn processes(&self) -> usize {
        self.shared.processes
    }

    fn all_to_all(&self, outgoing: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        {
            let mut boxes = self.shared.mailboxes.lock().expect("mailbox lock");
            for (to, bytes) in outgoing.into_iter().enumerate() {
                boxes[to][self.process] = bytes;
            }
        }
        // Everyone has written before anyone reads, and read before anyone writes again.
        self.shared.barrier.wait();
        let incoming = std::mem::replace(
            &mut self.shared.mailboxes.lock().expect("mailbox lock")[self.process],
            vec![Vec::new(); self.shared.processes],
        );
        self.shared.barrier.wait();
        incoming
    }
}

/// Little-endian encoding of the exchanged records.
#[derive(Default)]
pub(crate) struct Out(pub(crate) Vec<u8>);

impl Out {
    pub(crate) fn u32(&mut self, value: u32) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub(crate) fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Bit for bit.
    pub(crate) fn f64(&mut self, value: f64) -> &mut Self {
        self.u64(value.to_bits())
    }
}

/// Reads what [`Out`] wrote.
pub(crate) struct In<'a> {
    pub(crate) bytes: &'a [u8],
}

impl In<'_> {
    pub(crate) fn more(&self) -> bool {
        !self.bytes.is_empty()
    }

    pub(crate) fn u32(&mut self) -> u32 {
        let (head, rest) = self.bytes.split_at(4);
        self.bytes = rest;
        u32::from_le_bytes(head.try_into().expect("4 bytes"))
    }

    pub(crate) fn u64(&mut self) -> u64 {
        let (head, rest) = self.bytes.split_at(8);
        self.bytes = rest;
        u64::from_le_bytes(head.try_into().expect("8 bytes"))
    }

    pub(crate) fn f64(&mut self) -> f64 {
        f64::from_bits(self.u64())
    }
}

const NONE: u32 = u32::MAX;

fn option(value: Option<u32>) -> u32 {
    value.unwrap_or(NONE)
}

fn some(value: u32) -> Option<u32> {
    (value != NONE).then_some(value)
}

/// What one process holds after the distributed forward replay.
#[derive(Debug)]
pub struct LocalForward {
    pub definitions: Definitions,
    pub blocks: Blocks,
    /// This process's number.
    pub process: usize,
    /// The call tree of the whole trace (the same on every process).
    pub tree: CallTree,
    /// This process's ranks, from `blocks.first(process)` on.
    pub timelines: Vec<RankTimeline>,
    /// Per rank of this process, its wait states in operation order.
    pub waits: Vec<Vec<WaitState>>,
    /// What did not match (the same on every process).
    pub problems: Vec<String>,
}

/// The late partner of each synchronisation point of a rank, with its point's window start.
type Partners = Vec<Option<(Partner, Ticks)>>;

/// Reads this process's ranks of `dir` and runs the passes up to the forward replay together
/// with the other processes. Returns this process's part and the problems of its reading. A
/// process whose reading fails makes every process fail (the others with
/// [`AnalysisError::ElsewhereFailed`]).
pub fn forward_on_dir(
    dir: &Path,
    exchange: &impl Exchange,
) -> Result<(LocalForward, Vec<String>), AnalyzeDirError> {
    forward_on(&TraceDir(dir.to_path_buf()), exchange)
}

/// [`forward_on_dir`] for any [`TraceSource`] (an OTF2 archive, say).
pub fn forward_on(
    source: &dyn TraceSource,
    exchange: &impl Exchange,
) -> Result<(LocalForward, Vec<String>), AnalyzeDirError> {
    let processes = exchange.processes();
    let process = exchange.process();
    // The world size comes with the definitions; read them before choosing the block.
    let read = source.read_timelines(&|_| false).and_then(|(defs, _, _)| {
        let blocks = Blocks {
            ranks: world_size(&defs),
            processes,
        };
        let in_block = |r: Rank| blocks.range(process).contains(&r);
        let (defs, built, problems) = source.read_timelines(&in_block)?;
        let built = built
            .into_iter()
            .flatten()
            .collect::<Result<Vec<_>, AnalysisError>>()?;
        Ok((blocks, defs, built, problems))
    });
    let failed = all_gather(exchange, vec![u8::from(read.is_err())]);
    let (blocks, definitions, built, read_problems) = read?;
    if let Some(elsewhere) = failed.iter().position(|f| f[0] != 0) {
        return Err(AnalysisError::ElsewhereFailed { process: elsewhere }.into());
    }
    if blocks.ranks == 0 {
        return Err(AnalysisError::Empty.into());
    }
    let (tree, timelines) = unify_call_trees(built, exchange);
    let members = sorted_members(&definitions);
    let window_starts: Vec<Vec<Ticks>> = timelines
        .iter()
        .map(|t| local_window_starts(t, blocks.ranks as usize, &members))
        .collect();
    let context = Context {
        exchange,
        blocks,
        first: blocks.first(process),
        timelines: &timelines,
        window_starts: &window_starts,
        definitions: &definitions,
    };
    let mut partners: Vec<Partners> = timelines
        .iter()
        .map(|t| vec![None; t.points.len()])
        .collect();
    let (unmatched_sends, unmatched_receives) = context.match_messages(&mut partners);
    let incomplete = context.match_collectives(&mut partners);
    let counts = Out::default()
        .u64(unmatched_sends)
        .u64(unmatched_receives)
        .u64(incomplete)
        .0
        .clone();
    let mut totals = [0u64; 3];
    for bytes in all_gather(exchange, counts) {
        let mut input = In { bytes: &bytes };
        for total in &mut totals {
            *total += input.u64();
        }
    }
    let [unmatched_sends, unmatched_receives, incomplete] = totals.map(|t| t as usize);
    let waits = (timelines.iter().zip(&window_starts).zip(&partners))
        .enumerate()
        .map(|(index, ((timeline, starts), partners))| {
            waits_of_rank(
                context.first + index as Rank,
                timeline,
                starts,
                |point, _| partners[point].map(|(p, _)| p),
                |point, _| partners[point].map_or(0, |(_, start)| start),
            )
        })
        .collect();
    Ok((
        LocalForward {
            definitions,
            blocks,
            process,
            tree,
            timelines,
            waits,
            problems: problems(unmatched_sends, unmatched_receives, incomplete),
        },
        read_problems,
    ))
}

fn encode_tree(tree: &CallTree) -> Vec<u8> {
    let mut out = Out::default();
    for node in &tree.nodes {
        out.u32(option(node.parent));
        match node.frame {
            Frame::Region(region) => out.u32(0).u32(region).u32(NONE),
            Frame::Between(after, before) => out.u32(1).u32(option(after)).u32(option(before)),
        };
    }
    out.0
}

fn decode_tree(bytes: &[u8]) -> CallTree {
    let mut input = In { bytes };
    let mut tree = CallTree::default();
    while input.more() {
        let parent = some(input.u32());
        let frame = match input.u32() {
            0 => {
                let region = input.u32();
                input.u32();
                Frame::Region(region)
            }
            _ => Frame::Between(some(input.u32()), some(input.u32())),
        };
        tree.intern(CallNode { parent, frame });
    }
    tree
}

/// Merges the call trees of all ranks in rank order, as the one-process analysis does, and
/// renumbers this process's timelines to the merged tree.
fn unify_call_trees(
    built: Vec<(RankTimeline, CallTree)>,
    exchange: &impl Exchange,
) -> (CallTree, Vec<RankTimeline>) {
    let mut mine = CallTree::default();
    let mut remaps = Vec::with_capacity(built.len());
    let mut timelines = Vec::with_capacity(built.len());
    for (timeline, tree) in built {
        remaps.push(mine.merge(&tree));
        timelines.push(timeline);
    }
    let mut tree = CallTree::default();
    let mut my_remap = Vec::new();
    for (process, bytes) in all_gather(exchange, encode_tree(&mine)).iter().enumerate() {
        let remap = tree.merge(&decode_tree(bytes));
        if process == exchange.process() {
            my_remap = remap;
        }
    }
    for (timeline, remap) in timelines.iter_mut().zip(&remaps) {
        let composed: Vec<CallpathId> = remap.iter().map(|&id| my_remap[id as usize]).collect();
        remap_callpaths(timeline, &composed);
    }
    (tree, timelines)
}

/// What the matching steps of one process share.
struct Context<'a, E> {
    exchange: &'a E,
    blocks: Blocks,
    /// This process's first rank.
    first: Rank,
    timelines: &'a [RankTimeline],
    window_starts: &'a [Vec<Ticks>],
    definitions: &'a Definitions,
}

/// A send as its receiver's process learns it.
#[derive(Clone, Copy)]
struct SendRecord {
    point: u32,
    op: u32,
    enter: Ticks,
    window_start: Ticks,
}

impl<E: Exchange> Context<'_, E> {
    fn ranks(&self) -> impl Iterator<Item = (Rank, &RankTimeline)> {
        (self.first..).zip(self.timelines)
    }

    fn enter(&self, rank: Rank, op: u32) -> Ticks {
        self.timelines[(rank - self.first) as usize].ops[op as usize].enter
    }

    /// Matches the messages received by this process's ranks and tells the senders' processes;
    /// fills in both ends' partners. Returns this process's unmatched sends and receives.
    fn match_messages(&self, partners: &mut [Partners]) -> (u64, u64) {
        let processes = self.exchange.processes();
        let mut outgoing: Vec<Out> = (0..processes).map(|_| Out::default()).collect();
        let mut sends = 0u64;
        for (rank, timeline) in self.ranks() {
            let mut sequence: FastMap<(Rank, CommId, i32), u32> = FastMap::default();
            for (index, point) in timeline.points.iter().enumerate() {
                let SyncKind::Send {
                    peer, tag, comm, ..
                } = point.kind
                else {
                    continue;
                };
                sends += 1;
                if peer >= self.blocks.ranks {
                    continue;
                }
                let next = sequence.entry((peer, comm, tag)).or_default();
                outgoing[self.blocks.owner(peer)]
                    .u32(rank)
                    .u32(peer)
                    .u32(comm)
                    .u32(tag as u32)
                    .u32(*next)
                    .u32(index as u32)
                    .u32(point.op)
                    .u64(self.enter(rank, point.op))
                    .u64(self.window_starts[(rank - self.first) as usize][index]);
                *next += 1;
            }
        }
        // Per (receiver, sender, communicator, tag), the sends in order.
        let mut channels: FastMap<(Rank, Rank, CommId, i32), Vec<SendRecord>> = FastMap::default();
        for bytes in self
            .exchange
            .all_to_all(outgoing.into_iter().map(|o| o.0).collect())
        {
            let mut input = In { bytes: &bytes };
            while input.more() {
                let (sender, receiver, comm, tag) =
                    (input.u32(), input.u32(), input.u32(), input.u32() as i32);
                let _sequence = input.u32();
                let record = SendRecord {
                    point: input.u32(),
                    op: input.u32(),
                    enter: input.u64(),
                    window_start: input.u64(),
                };
                channels
                    .entry((receiver, sender, comm, tag))
                    .or_default()
                    .push(record);
            }
        }
        // The k-th receive on a channel meets the k-th send; messages are numbered by receiver,
        // then in receive order, as in one process.
        let mut matched: Vec<Vec<(u32, Rank, SendRecord)>> = Vec::new();
        let mut unmatched = 0u64;
        for (rank, timeline) in self.ranks() {
            let mut taken: FastMap<(Rank, CommId, i32), usize> = FastMap::default();
            let mut messages = Vec::new();
            for (index, point) in timeline.points.iter().enumerate() {
                let SyncKind::Recv { peer, tag, comm } = point.kind else {
                    continue;
                };
                let next = taken.entry((peer, comm, tag)).or_default();
                let send = channels
                    .get(&(rank, peer, comm, tag))
                    .and_then(|s| s.get(*next));
                match send {
                    Some(&send) => {
                        *next += 1;
                        messages.push((index as u32, peer, send));
                    }
                    None => unmatched += 1,
                }
            }
            matched.push(messages);
        }
        let counts: Vec<u8> = matched
            .iter()
            .fold(Out::default(), |mut out, m| {
                out.u32(m.len() as u32);
                out
            })
            .0;
        let mut first_id: InstanceId = 0;
        for (process, bytes) in all_gather(self.exchange, counts).iter().enumerate() {
            if process == self.exchange.process() {
                break;
            }
            let mut input = In { bytes };
            while input.more() {
                first_id += input.u32();
            }
        }
        let mut outgoing: Vec<Out> = (0..processes).map(|_| Out::default()).collect();
        let mut matched_sends = 0u64;
        for (local, messages) in matched.iter().enumerate() {
            let receiver = self.first + local as Rank;
            for &(point, sender, send) in messages {
                let op = self.timelines[local].points[point as usize].op;
                partners[local][point as usize] = Some((
                    Partner {
                        instance: first_id,
                        participant: Participant {
                            rank: sender,
                            op: send.op,
                        },
                        enter: send.enter,
                    },
                    send.window_start,
                ));
                outgoing[self.blocks.owner(sender)]
                    .u32(sender)
                    .u32(send.point)
                    .u32(first_id)
                    .u32(receiver)
                    .u32(op)
                    .u64(self.enter(receiver, op))
                    .u64(self.window_starts[local][point as usize]);
                first_id += 1;
            }
        }
        for bytes in self
            .exchange
            .all_to_all(outgoing.into_iter().map(|o| o.0).collect())
        {
            let mut input = In { bytes: &bytes };
            while input.more() {
                let (sender, point, instance) = (input.u32(), input.u32(), input.u32());
                let participant = Participant {
                    rank: input.u32(),
                    op: input.u32(),
                };
                let (enter, window_start) = (input.u64(), input.u64());
                matched_sends += 1;
                partners[(sender - self.first) as usize][point as usize] = Some((
                    Partner {
                        instance,
                        participant,
                        enter,
                    },
                    window_start,
                ));
            }
        }
        (sends - matched_sends, unmatched)
    }

    /// Sends every collective call of this process's ranks to its instance's coordinator, which
    /// finds the late arrival; fills in the partners. Returns how many instances this process
    /// coordinated that not every member joined.
    fn match_collectives(&self, partners: &mut [Partners]) -> u64 {
        let processes = self.exchange.processes();
        let coordinator = |comm: CommId, sequence: u32| {
            ((u64::from(comm) << 32 | u64::from(sequence)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                >> 32) as usize
                % processes
        };
        let mut outgoing: Vec<Out> = (0..processes).map(|_| Out::default()).collect();
        for (rank, timeline) in self.ranks() {
            let mut sequence: FastMap<CommId, u32> = FastMap::default();
            for (index, point) in timeline.points.iter().enumerate() {
                let SyncKind::Collective { comm, class, root } = point.kind else {
                    continue;
                };
                let next = sequence.entry(comm).or_default();
                outgoing[coordinator(comm, *next)]
                    .u32(comm)
                    .u32(*next)
                    .u32(class_code(class))
                    .u32(option(root))
                    .u32(rank)
                    .u32(index as u32)
                    .u32(point.op)
                    .u64(self.enter(rank, point.op))
                    .u64(self.window_starts[(rank - self.first) as usize][index]);
                *next += 1;
            }
        }
        /// A member's call: (enter, participant), its point and window start.
        type Call = ((Ticks, Participant), u32, Ticks);
        let mut instances: Vec<(CommId, MpiClass, Option<Rank>, Vec<Call>)> = Vec::new();
        let mut index: FastMap<(CommId, u32), usize> = FastMap::default();
        for bytes in self
            .exchange
            .all_to_all(outgoing.into_iter().map(|o| o.0).collect())
        {
            let mut input = In { bytes: &bytes };
            while input.more() {
                let (comm, sequence, class, root) = (
                    input.u32(),
                    input.u32(),
                    class_of_code(input.u32()),
                    some(input.u32()),
                );
                let (rank, point, op) = (input.u32(), input.u32(), input.u32());
                let (enter, window_start) = (input.u64(), input.u64());
                let slot = *index.entry((comm, sequence)).or_insert_with(|| {
                    instances.push((comm, class, root, Vec::new()));
                    instances.len() - 1
                });
                // Processes answer in order and each in rank order: the first call is the lowest
                // rank's, whose class and root the one-process matching takes too.
                instances[slot]
                    .3
                    .push(((enter, Participant { rank, op }), point, window_start));
            }
        }
        let numbers = Out::default().u32(instances.len() as u32).0.clone();
        let first_id: u32 = all_gather(self.exchange, numbers)
            .iter()
            .take(self.exchange.process())
            .map(|b| In { bytes: b }.u32())
            .sum();
        // Collective instance ids follow the messages' in the one-process analysis; here they
        // only need to differ from each other and from them.
        let first_id = first_id | 1 << 31;
        let mut outgoing: Vec<Out> = (0..processes).map(|_| Out::default()).collect();
        let mut incomplete = 0u64;
        for (number, (comm, class, root, calls)) in instances.iter().enumerate() {
            let expected = self.definitions.communicators[*comm as usize].members.len();
            let complete = calls.len() == expected;
            incomplete += u64::from(!complete);
            let entries: Vec<(Ticks, Participant)> = calls.iter().map(|c| c.0).collect();
            let cause = latest_arrivals(&entries, *root)
                .filter(|_| complete)
                .and_then(|a| a.cause(*class))
                .and_then(|(enter, late)| {
                    let call = calls.iter().find(|c| c.0 .1 == late)?;
                    Some((enter, late, call.2))
                });
            let Some((enter, late, window_start)) = cause else {
                continue;
            };
            for &((_, member), point, _) in calls {
                outgoing[self.blocks.owner(member.rank)]
                    .u32(member.rank)
                    .u32(point)
                    .u32(first_id + number as u32)
                    .u32(late.rank)
                    .u32(late.op)
                    .u64(enter)
                    .u64(window_start);
            }
        }
        for bytes in self
            .exchange
            .all_to_all(outgoing.into_iter().map(|o| o.0).collect())
        {
            let mut input = In { bytes: &bytes };
            while input.more() {
                let (rank, point, instance) = (input.u32(), input.u32(), input.u32());
                let participant = Participant {
                    rank: input.u32(),
                    op: input.u32(),
                };
                let (enter, window_start) = (input.u64(), input.u64());
                partners[(rank - self.first) as usize][point as usize] = Some((
                    Partner {
                        instance,
                        participant,
                        enter,
                    },
                    window_start,
                ));
            }
        }
        incomplete
    }
}

const CLASSES: [MpiClass; 5] = [
    MpiClass::PointToPoint,
    MpiClass::Barrier,
    MpiClass::AllToAll,
    MpiClass::OneToAll,
    MpiClass::AllToOne,
];

fn class_code(class: MpiClass) -> u32 {
    CLASSES.iter().position(|&c| c == class).unwrap_or(0) as u32
}

fn class_of_code(code: u32) -> MpiClass {
    CLASSES
        .get(code as usize)
        .copied()
        .unwrap_or(MpiClass::PointToPoint)
}

/// One wait state, for people and for comparing the analyses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaitStateRow {
    pub rank: Rank,
    /// The index of the waiting operation on its rank.
    pub op: u32,
    pub callpath: String,
    pub pattern: &'static str,
    pub enter: Ticks,
    pub wait: Ticks,
    pub cause_rank: Rank,
    pub cause_op: u32,
    pub cause_enter: Ticks,
    pub window_start: Ticks,
}

/// The wait states of a trace: what the forward replay found, the same from the one-process and
/// the distributed analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaitStateReport {
    pub ranks: u32,
    pub events: usize,
    pub total_waiting: Ticks,
    pub wait_states: Vec<WaitStateRow>,
    pub problems: Vec<String>,
}

/// A wait state as numbers: (rank, callpath, wait state).
type Numbered = (Rank, CallpathId, WaitState);

/// The report from the wait states of all ranks, in rank order.
pub fn wait_state_report(
    definitions: &Definitions,
    tree: &CallTree,
    events: usize,
    ranks: u32,
    waits: impl Iterator<Item = Numbered>,
    problems: Vec<String>,
) -> WaitStateReport {
    let wait_states: Vec<WaitStateRow> = waits
        .map(|(rank, callpath, w)| WaitStateRow {
            rank,
            op: w.op,
            callpath: tree.label(callpath, &definitions.regions),
            pattern: w.pattern.name(),
            enter: w.enter,
            wait: w.wait,
            cause_rank: w.cause.rank,
            cause_op: w.cause.op,
            cause_enter: w.cause_enter,
            window_start: w.window_start,
        })
        .collect();
    WaitStateReport {
        ranks,
        events,
        total_waiting: wait_states.iter().map(|w| w.wait).sum(),
        wait_states,
        problems,
    }
}

/// The wait states of every rank with their call paths, in rank order.
pub fn numbered_waits<'a>(
    first: Rank,
    timelines: &'a [RankTimeline],
    waits: &'a [Vec<WaitState>],
) -> impl Iterator<Item = Numbered> + 'a {
    (first..)
        .zip(timelines.iter().zip(waits))
        .flat_map(|(rank, (timeline, waits))| {
            waits
                .iter()
                .map(move |w| (rank, timeline.ops[w.op as usize].callpath, *w))
        })
}

/// Gathers the wait states on process 0, which returns the report; the others return `None`.
pub fn gather_wait_states(
    local: &LocalForward,
    exchange: &impl Exchange,
) -> Option<WaitStateReport> {
    let mut out = Out::default();
    out.u64(local.timelines.iter().map(|t| t.events as u64).sum());
    for (rank, callpath, w) in numbered_waits(
        local.blocks.first(local.process),
        &local.timelines,
        &local.waits,
    ) {
        let pattern = Pattern::ALL
            .iter()
            .position(|&p| p == w.pattern)
            .unwrap_or(0);
        out.u32(rank)
            .u32(callpath)
            .u32(w.op)
            .u32(pattern as u32)
            .u64(w.enter)
            .u64(w.wait)
            .u32(w.cause.rank)
            .u32(w.cause.op)
            .u64(w.cause_enter)
            .u64(w.window_start);
    }
    let mut outgoing = vec![Vec::new(); exchange.processes()];
    outgoing[0] = out.0;
    let incoming = exchange.all_to_all(outgoing);
    if exchange.process() != 0 {
        return None;
    }
    let mut events = 0usize;
    let mut waits = Vec::new();
    for bytes in &incoming {
        let mut input = In { bytes };
        events += input.u64() as usize;
        while input.more() {
            let (rank, callpath, op, pattern) =
                (input.u32(), input.u32(), input.u32(), input.u32());
            let (enter, wait) = (input.u64(), input.u64());
            let cause = Participant {
                rank: input.u32(),
                op: input.u32(),
            };
            let (cause_enter, window_start) = (input.u64(), input.u64());
            let state = WaitState {
                op,
                enter,
                wait,
                pattern: Pattern::ALL[pattern as usize],
                instance: 0,
                cause,
                cause_enter,
                window_start,
            };
            waits.push((rank, callpath, state));
        }
    }
    Some(wait_state_report(
        &local.definitions,
        &local.tree,
        events,
        local.blocks.ranks,
        waits.into_iter(),
        local.problems.clone(),
    ))
}

/// The wait-state report of a one-process analysis.
pub fn wait_states_of(passes: &crate::analysis::Passes) -> WaitStateReport {
    wait_state_report(
        &passes.definitions,
        &passes.tree,
        passes.events,
        passes.timelines.len() as u32,
        numbered_waits(0, &passes.timelines, &passes.forward.waits),
        passes.matching.problems.clone(),
    )
}

/// The distributed forward replay of `dir` on `processes` threads; process 0's report.
pub fn wait_states_on_threads(
    dir: &Path,
    processes: usize,
) -> Result<WaitStateReport, AnalyzeDirError> {
    let mut reports = ThreadExchange::run(processes, |exchange| {
        let (local, _) = forward_on_dir(dir, exchange)?;
        Ok(gather_wait_states(&local, exchange))
    });
    reports
        .swap_remove(0)
        .map(|r| r.expect("process 0 reports"))
}
