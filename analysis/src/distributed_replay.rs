//! The distributed analysis after the forward replay ([`crate::distributed`]): the backward
//! replay (delay costs), the critical path and the metrics, with the same result as one process,
//! bit for bit.
//!
//! * Backward replay, in rounds of [`Exchange::all_to_all`]: each process runs its ranks'
//!   [`DelayProgram`]s (the one-process programs) until they are done or park at an instance
//!   whose waiters have not all handed over their side; a waiter reaching its wait state sends
//!   its side (short- and long-term cost, window start, interval profile) to the cause's
//!   process. Before the rounds, every wait state registers with its cause's process, which
//!   thereby learns where its ranks caused waiting (ordered by operation and instance, as one
//!   process orders them: message ids are the one-process ids, and one operation takes part in
//!   one collective at most) and how many waiters each instance has. A cause takes its waiters
//!   in rank order, so its costs add up in the one-process order. At the end the splits
//!   (direct, indirect) go back to the waiters' processes.
//! * Critical path, in the same rounds: the one-process walk ([`crate::critical::Ranks::walk`])
//!   on each process's ranks; where the path moves to a rank held elsewhere, the walk's [`Token`]
//!   goes there with the round's sides. Each round's buffers also carry every process's count of
//!   programs left and sides sent, which ends the rounds (or finds the replay stalled): one
//!   all-to-all per round.
//! * Metrics: each process computes its ranks' metrics ([`crate::analysis::rank_metrics`]);
//!   process 0 gathers them and the critical path and finishes the summary as one process does
//!   ([`crate::analysis::summarise_ranks`]).

use crate::analysis::Whole;
use crate::analysis::{rank_metrics, summarise_ranks, Analysis, Metrics, RankCells, RankResults};
use crate::backward::{interval, unsplit, DelayProgram, Delays, Peers, Profile, WaiterSide};
use crate::critical::{in_time_order, start, Ranks, Segment, Token};
use crate::distributed::{
    all_gather, forward_on_dir, Exchange, In, LocalForward, Out, ThreadExchange,
};
use crate::error::{AnalysisError, AnalyzeDirError};
use crate::forward::WaitState;
use crate::matching::InstanceId;
use crate::replay::Progress;
use crate::timeline::RankTimeline;
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{Rank, Ticks};
use std::path::Path;

/// What crossed to a cause's process from one waiter.
struct Contribution {
    side: WaiterSide,
    profile: Profile,
}

/// An instance where a rank of this process caused waiting: its waiters' sides so far.
#[derive(Default)]
struct Gate {
    expected: u32,
    arrived: Vec<Contribution>,
    parked: Option<Rank>,
}

/// The [`Peers`] of one process: the gates of the instances its ranks caused, and the sides
/// bound for other processes.
struct ProcessPeers<'a> {
    local: &'a LocalForward,
    first: Rank,
    gates: FastMap<InstanceId, Gate>,
    outgoing: Vec<Out>,
    /// Sides sent to other processes this round.
    sent: u64,
    profile: Profile,
}

impl ProcessPeers<'_> {
    /// A waiter's side reached its cause's gate; wakes the cause when it was the last.
    fn deliver(&mut self, instance: InstanceId, contribution: Contribution, woken: &mut Vec<Rank>) {
        let Some(gate) = self.gates.get_mut(&instance) else {
            return;
        };
        gate.arrived.push(contribution);
        if gate.arrived.len() == gate.expected as usize {
            gate.arrived.sort_unstable_by_key(|c| c.side.rank);
            woken.extend(gate.parked.take());
        }
    }

    fn receive(&mut self, bytes: &[u8], woken: &mut Vec<Rank>) {
        let mut input = In { bytes };
        while input.more() {
            let instance = input.u32();
            let side = WaiterSide {
                rank: input.u32(),
                wait: input.u32(),
                short_term: input.f64(),
                long_term: input.f64(),
                window_start: input.u64(),
            };
            let profile = (0..input.u32())
                .map(|_| (input.u32(), input.f64()))
                .collect();
            self.deliver(instance, Contribution { side, profile }, woken);
        }
    }
}

impl Peers for ProcessPeers<'_> {
    fn open(&self, instance: InstanceId) -> bool {
        self.gates
            .get(&instance)
            .is_none_or(|g| g.arrived.len() == g.expected as usize)
    }

    fn waiter_count(&self, instance: InstanceId) -> usize {
        self.gates.get(&instance).map_or(0, |g| g.arrived.len())
    }

    fn waiter(&self, instance: InstanceId, n: usize, profile: &mut Profile) -> WaiterSide {
        let contribution = &self.gates[&instance].arrived[n];
        profile.clone_from(&contribution.profile);
        contribution.side
    }

    /// The sides are not needed any more: a process holds only those of the instances its
    /// ranks' walks have not passed yet.
    fn taken(&mut self, instance: InstanceId) {
        self.gates.remove(&instance);
    }

    fn arrive(
        &mut self,
        rank: Rank,
        index: usize,
        instance: InstanceId,
        long_term: f64,
        woken: &mut Vec<Rank>,
    ) {
        let local = (rank - self.first) as usize;
        let waits = &self.local.waits[local];
        let state = waits[index];
        interval(
            &self.local.timelines[local],
            (waits, index),
            state.window_start,
            state.op as usize,
            &mut self.profile,
            None,
        );
        let side = WaiterSide {
            rank,
            wait: index as u32,
            short_term: state.wait as f64,
            long_term,
            window_start: state.window_start,
        };
        let owner = self.local.blocks.owner(state.cause.rank);
        if owner == self.local.process {
            let profile = self.profile.clone();
            self.deliver(instance, Contribution { side, profile }, woken);
            return;
        }
        let out = &mut self.outgoing[owner];
        out.u32(instance)
            .u32(side.rank)
            .u32(side.wait)
            .f64(side.short_term)
            .f64(side.long_term)
            .u64(side.window_start)
            .u32(self.profile.len() as u32);
        for &(callpath, time) in &self.profile {
            out.u32(callpath).f64(time);
        }
        self.sent += 1;
    }
}

/// Per rank of a process, the instances where it caused waiting: (operation, instance), in order.
type Caused = Vec<Vec<(u32, InstanceId)>>;

/// Per rank of this process, the instances where it caused waiting; and the gates of those
/// instances with the number of waiters each. Every wait state registers with its cause's
/// process.
fn register(local: &LocalForward, exchange: &impl Exchange) -> (Caused, FastMap<InstanceId, Gate>) {
    let mut outgoing: Vec<Out> = (0..exchange.processes()).map(|_| Out::default()).collect();
    for wait in local.waits.iter().flatten() {
        outgoing[local.blocks.owner(wait.cause.rank)]
            .u32(wait.cause.rank)
            .u32(wait.cause.op)
            .u32(wait.instance);
    }
    let first = local.blocks.first(local.process);
    let mut caused: Caused = vec![Vec::new(); local.timelines.len()];
    let mut gates: FastMap<InstanceId, Gate> = FastMap::default();
    for bytes in exchange.all_to_all(outgoing.into_iter().map(|o| o.0).collect()) {
        let mut input = In { bytes: &bytes };
        while input.more() {
            let (rank, op, instance) = (input.u32(), input.u32(), input.u32());
            let gate = gates.entry(instance).or_default();
            if gate.expected == 0 {
                caused[(rank - first) as usize].push((op, instance));
            }
            gate.expected += 1;
        }
    }
    for list in &mut caused {
        list.sort_unstable();
    }
    (caused, gates)
}

/// This process's side of the backward replay: its ranks' programs and their peers.
struct Backward<'a> {
    first: Rank,
    /// Each program with whether it is done.
    programs: Vec<(DelayProgram<'a>, bool)>,
    peers: ProcessPeers<'a>,
    ready: Vec<Rank>,
    /// Programs not done yet.
    remaining: u64,
    woken: Vec<Rank>,
}

impl<'a> Backward<'a> {
    fn new(local: &'a LocalForward, caused: &'a Caused, gates: FastMap<InstanceId, Gate>) -> Self {
        let first = local.blocks.first(local.process);
        let programs: Vec<(DelayProgram, bool)> = (local.timelines.iter())
            .zip(&local.waits)
            .zip(caused)
            .enumerate()
            .map(|(index, ((timeline, waits), caused))| {
                let program = DelayProgram::new(first + index as Rank, timeline, waits, caused);
                (program, false)
            })
            .collect();
        Backward {
            first,
            ready: (first..first + programs.len() as Rank).rev().collect(),
            remaining: programs.len() as u64,
            programs,
            peers: ProcessPeers {
                local,
                first,
                gates,
                outgoing: Vec::new(),
                sent: 0,
                profile: Profile::new(),
            },
            woken: Vec::new(),
        }
    }

    /// Runs the ready programs until each is done or parked; the sides for other processes go
    /// into `outgoing` (one buffer per process).
    fn run(&mut self, outgoing: Vec<Out>) -> Vec<Out> {
        self.peers.outgoing = outgoing;
        while let Some(rank) = self.ready.pop() {
            let (program, done) = &mut self.programs[(rank - self.first) as usize];
            match program.resume(&mut self.peers, &mut self.woken) {
                Progress::Done => {
                    *done = true;
                    self.remaining -= 1;
                }
                Progress::Blocked(instance) => {
                    if let Some(gate) = self.peers.gates.get_mut(&instance) {
                        gate.parked = Some(rank);
                    }
                }
            }
            self.ready.append(&mut self.woken);
        }
        std::mem::take(&mut self.peers.outgoing)
    }

    fn receive(&mut self, input: &[u8]) {
        self.peers.receive(input, &mut self.woken);
        self.ready.append(&mut self.woken);
    }

    /// The ranks whose programs are not done.
    fn stuck(&self) -> impl Iterator<Item = Rank> + '_ {
        (self.first..)
            .zip(&self.programs)
            .filter(|(_, (_, done))| !done)
            .map(|(rank, _)| rank)
    }

    /// The delay costs and splits of this process's ranks: each cause's splits go back to its
    /// waiters' processes.
    fn finish(self, local: &LocalForward, exchange: &impl Exchange) -> Delays {
        let mut delays = Delays::default();
        let mut outgoing: Vec<Out> = (0..exchange.processes()).map(|_| Out::default()).collect();
        for (program, _) in self.programs {
            let (costs, long_term, splits) = program.finish();
            delays.costs.push(costs);
            delays.splits.push(unsplit(&long_term));
            for (rank, wait, direct, indirect) in splits {
                outgoing[local.blocks.owner(rank)]
                    .u32(rank)
                    .u32(wait)
                    .f64(direct)
                    .f64(indirect);
            }
        }
        for bytes in exchange.all_to_all(outgoing.into_iter().map(|o| o.0).collect()) {
            let mut input = In { bytes: &bytes };
            while input.more() {
                let (rank, wait) = (input.u32(), input.u32());
                let (direct, indirect) = (input.f64(), input.f64());
                delays.splits[(rank - self.first) as usize][wait as usize].add(direct, indirect);
            }
        }
        delays
    }
}

/// This process's side of the critical-path walk.
struct Walk<'a> {
    ranks: Ranks<'a>,
    /// The token, when it is here, with the number of segments walked before it.
    holding: Option<(Token, u64)>,
    /// The segments walked here, each with its place in the walk (from the end of the run
    /// backwards; empty ones included).
    segments: Vec<(u64, Segment)>,
    walked: Vec<Segment>,
    ended: bool,
}

/// What a round's buffer says of the walk.
const WALK_ON: u32 = 0;
const WALK_TOKEN: u32 = 1;
const WALK_ENDED: u32 = 2;

impl<'a> Walk<'a> {
    /// Where the walk starts: every process gathers the ranks' ends and the number of wait
    /// states, and so finds the same start.
    fn new(local: &'a LocalForward, exchange: &impl Exchange) -> Self {
        let first = local.blocks.first(local.process);
        let mut mine = Out::default();
        mine.u64(local.waits.iter().map(Vec::len).sum::<usize>() as u64);
        for (rank, timeline) in (first..).zip(&local.timelines) {
            mine.u32(rank).u64(timeline.end);
        }
        let (mut waits, mut ends) = (0usize, Vec::new());
        for bytes in all_gather(exchange, mine.0) {
            let mut input = In { bytes: &bytes };
            waits += input.u64() as usize;
            while input.more() {
                ends.push((input.u32(), input.u64()));
            }
        }
        let token = start(ends.into_iter(), waits);
        Walk {
            ranks: Ranks::new(first, &local.timelines, &local.waits),
            holding: token
                .filter(|t| local.blocks.owner(t.rank) == local.process)
                .map(|t| (t, 0)),
            segments: Vec::new(),
            walked: Vec::new(),
            ended: token.is_none(),
        }
    }

    /// Walks on if the token is here; then starts each process's buffer with what it needs to
    /// know of the walk: the token for its owner, or that the walk ended.
    fn run(&mut self, local: &LocalForward, outgoing: &mut [Out]) {
        let mut said = vec![WALK_ON; outgoing.len()];
        let mut token_for = None;
        if let Some((token, mut sequence)) = self.holding.take() {
            let next = self.ranks.walk(token, &mut self.walked);
            for segment in self.walked.drain(..) {
                self.segments.push((sequence, segment));
                sequence += 1;
            }
            match next {
                Some(token) => {
                    let owner = local.blocks.owner(token.rank);
                    said[owner] = WALK_TOKEN;
                    token_for = Some((owner, token, sequence));
                }
                None => said.fill(WALK_ENDED),
            }
        }
        for (process, out) in outgoing.iter_mut().enumerate() {
            out.u32(said[process]);
            if let Some((_, token, sequence)) = token_for.filter(|t| t.0 == process) {
                out.u32(token.rank)
                    .u64(token.time)
                    .u32(token.cause_op.unwrap_or(u32::MAX))
                    .u64(token.steps_left as u64)
                    .u64(sequence);
            }
        }
    }

    /// Reads what a process's buffer says of the walk.
    fn receive(&mut self, input: &mut In<'_>) {
        match input.u32() {
            WALK_TOKEN => {
                let token = Token {
                    rank: input.u32(),
                    time: input.u64(),
                    cause_op: Some(input.u32()).filter(|&op| op != u32::MAX),
                    steps_left: input.u64() as usize,
                };
                self.holding = Some((token, input.u64()));
            }
            WALK_ENDED => self.ended = true,
            _ => {}
        }
    }
}

/// The backward replay and the critical-path walk of this process's ranks together with the
/// other processes, in the same rounds of all-to-all: the delay costs and splits of its ranks,
/// and the segments of the critical path on them, each with its place in the walk.
pub fn replay(
    local: &LocalForward,
    exchange: &impl Exchange,
) -> Result<(Delays, Vec<(u64, Segment)>), AnalysisError> {
    let processes = exchange.processes();
    let (caused, gates) = register(local, exchange);
    let mut backward = Backward::new(local, &caused, gates);
    let mut walk = Walk::new(local, exchange);
    loop {
        // Each buffer: the sender's programs left and sides sent (everyone adds them up), the
        // walk, then the sides.
        let mut outgoing: Vec<Out> = (0..processes).map(|_| Out::default()).collect();
        walk.run(local, &mut outgoing);
        let headers: Vec<Out> = outgoing;
        let sides = backward.run((0..processes).map(|_| Out::default()).collect());
        let sent = std::mem::take(&mut backward.peers.sent);
        let buffers = (headers.into_iter().zip(sides))
            .map(|(walk, sides)| {
                let mut out = Out::default();
                out.u64(backward.remaining).u64(sent);
                out.0.extend_from_slice(&walk.0);
                out.0.extend_from_slice(&sides.0);
                out.0
            })
            .collect();
        let (mut left, mut moved) = (0, 0);
        for bytes in exchange.all_to_all(buffers) {
            let mut input = In { bytes: &bytes };
            left += input.u64();
            moved += input.u64();
            walk.receive(&mut input);
            backward.receive(input.bytes);
        }
        if left > 0 && moved == 0 {
            // Nothing moved anywhere: the programs left wait for each other.
            let mut out = Out::default();
            backward.stuck().for_each(|rank| {
                out.u32(rank);
            });
            let mut stuck = Vec::new();
            for bytes in all_gather(exchange, out.0) {
                let mut input = In { bytes: &bytes };
                while input.more() {
                    stuck.push(input.u32());
                }
            }
            return Err(AnalysisError::ReplayStalled { stuck });
        }
        if left == 0 && walk.ended {
            return Ok((backward.finish(local, exchange), walk.segments));
        }
    }
}

fn put_metrics(out: &mut Out, m: &Metrics) {
    let scalars = [
        m.time,
        m.delay_short_term,
        m.delay_long_term,
        m.direct_waiting,
        m.indirect_waiting,
        m.propagating_waiting,
        m.terminal_waiting,
        m.critical,
        m.intra_partition_cost,
        m.inter_partition_cost,
    ];
    for value in m.waiting.iter().chain(&scalars) {
        out.f64(*value);
    }
}

fn take_metrics(input: &mut In<'_>) -> Metrics {
    let mut waiting = [0.0; 6];
    for w in &mut waiting {
        *w = input.f64();
    }
    Metrics {
        waiting,
        time: input.f64(),
        delay_short_term: input.f64(),
        delay_long_term: input.f64(),
        direct_waiting: input.f64(),
        indirect_waiting: input.f64(),
        propagating_waiting: input.f64(),
        terminal_waiting: input.f64(),
        critical: input.f64(),
        intra_partition_cost: input.f64(),
        inter_partition_cost: input.f64(),
    }
}

/// The passes after the forward replay, together with the other processes; process 0 returns
/// the analysis (the same as [`crate::analysis::summarise`] of the one-process passes), the
/// others `None`.
pub fn analyze(
    local: &LocalForward,
    exchange: &impl Exchange,
) -> Result<Option<Analysis>, AnalysisError> {
    let (delays, walked) = replay(local, exchange)?;
    let first = local.blocks.first(local.process);
    let mut segments_of: Vec<Vec<(u64, Segment)>> = vec![Vec::new(); local.timelines.len()];
    for &(sequence, segment) in &walked {
        segments_of[(segment.rank - first) as usize].push((sequence, segment));
    }
    let mut out = Out::default();
    let timelines: &[RankTimeline] = &local.timelines;
    let waits: &[Vec<WaitState>] = &local.waits;
    out.u64(timelines.iter().map(|t| t.events as u64).sum())
        .u64(waits.iter().flatten().map(|w| w.wait).sum())
        .u32(timelines.len() as u32)
        .u64(timelines.iter().map(|t| t.start).min().unwrap_or(0))
        .u64(timelines.iter().map(|t| t.end).max().unwrap_or(0))
        .u32(walked.len() as u32);
    for &(sequence, segment) in &walked {
        out.u64(sequence)
            .u32(segment.rank)
            .u64(segment.start)
            .u64(segment.end);
    }
    for (local_rank, segments) in segments_of.iter_mut().enumerate() {
        let segments: Vec<Segment> = in_time_order({
            segments.sort_unstable_by_key(|&(sequence, _)| sequence);
            segments.iter().map(|&(_, s)| s).collect()
        });
        let results = RankResults {
            timeline: &timelines[local_rank],
            waits: &waits[local_rank],
            splits: &delays.splits[local_rank],
            costs: &delays.costs[local_rank],
            segments: &segments,
        };
        let cells = rank_metrics(&results, local.tree.nodes.len());
        out.u32(cells.len() as u32);
        for (callpath, metrics) in &cells {
            out.u32(*callpath);
            put_metrics(&mut out, metrics);
        }
    }
    let mut outgoing = vec![Vec::new(); exchange.processes()];
    outgoing[0] = out.0;
    let incoming = exchange.all_to_all(outgoing);
    if local.process != 0 {
        return Ok(None);
    }
    let (mut events, mut total_waiting) = (0usize, 0 as Ticks);
    let (mut start, mut end): (Option<Ticks>, Option<Ticks>) = (None, None);
    let mut walked: Vec<(u64, Segment)> = Vec::new();
    let mut per_rank: Vec<RankCells> = Vec::new();
    for bytes in &incoming {
        let mut input = In { bytes };
        events += input.u64() as usize;
        total_waiting += input.u64();
        let ranks = input.u32();
        let (first_start, last_end) = (input.u64(), input.u64());
        if ranks > 0 {
            start = Some(start.map_or(first_start, |s| s.min(first_start)));
            end = Some(end.map_or(last_end, |e| e.max(last_end)));
        }
        for _ in 0..input.u32() {
            let sequence = input.u64();
            let segment = Segment {
                rank: input.u32(),
                start: input.u64(),
                end: input.u64(),
            };
            walked.push((sequence, segment));
        }
        for _ in 0..ranks {
            let cells = (0..input.u32())
                .map(|_| (input.u32(), take_metrics(&mut input)))
                .collect();
            per_rank.push(cells);
        }
    }
    walked.sort_unstable_by_key(|&(sequence, _)| sequence);
    let whole = Whole {
        definitions: &local.definitions,
        tree: &local.tree,
        events,
        start: start.unwrap_or(0),
        end: end.unwrap_or(0),
        total_waiting,
        critical_path: in_time_order(walked.into_iter().map(|(_, s)| s).collect()),
        problems: local.problems.clone(),
    };
    Ok(Some(summarise_ranks(whole, per_rank)))
}

/// The distributed analysis of `dir` on `processes` threads; process 0's analysis.
pub fn analysis_on_threads(dir: &Path, processes: usize) -> Result<Analysis, AnalyzeDirError> {
    let mut results = ThreadExchange::run(processes, |exchange| {
        let (local, _) = forward_on_dir(dir, exchange)?;
        Ok(analyze(&local, exchange)?)
    });
    results
        .swap_remove(0)
        .map(|r| r.expect("process 0 reports"))
}
