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
//! * Critical path: the one-process walk ([`crate::critical::Ranks::walk`]) on each process's
//!   ranks; where the path moves to a rank held elsewhere, the walk's [`Token`] goes there in the
//!   next round.
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
use crate::hash::FastMap;
use crate::matching::InstanceId;
use crate::model::{Rank, Ticks};
use crate::replay::Progress;
use crate::timeline::RankTimeline;
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

/// The backward replay of this process's ranks together with the other processes: their delay
/// costs and wait-state splits, indexed by this process's ranks.
pub fn backward(local: &LocalForward, exchange: &impl Exchange) -> Result<Delays, AnalysisError> {
    let processes = exchange.processes();
    let first = local.blocks.first(local.process);
    let (caused, gates) = register(local, exchange);
    let mut programs: Vec<(DelayProgram, bool)> = (local.timelines.iter())
        .zip(&local.waits)
        .zip(&caused)
        .enumerate()
        .map(|(index, ((timeline, waits), caused))| {
            let program = DelayProgram::new(first + index as Rank, timeline, waits, caused);
            (program, false)
        })
        .collect();
    let mut peers = ProcessPeers {
        local,
        first,
        gates,
        outgoing: Vec::new(),
        sent: 0,
        profile: Profile::new(),
    };
    let mut ready: Vec<Rank> = (first..first + programs.len() as Rank).rev().collect();
    let mut remaining = programs.len() as u64;
    let mut woken = Vec::new();
    loop {
        peers.outgoing = (0..processes).map(|_| Out::default()).collect();
        while let Some(rank) = ready.pop() {
            let (program, done) = &mut programs[(rank - first) as usize];
            match program.resume(&mut peers, &mut woken) {
                Progress::Done => {
                    *done = true;
                    remaining -= 1;
                }
                Progress::Blocked(instance) => {
                    if let Some(gate) = peers.gates.get_mut(&instance) {
                        gate.parked = Some(rank);
                    }
                }
            }
            ready.append(&mut woken);
        }
        let outgoing = std::mem::take(&mut peers.outgoing);
        for bytes in exchange.all_to_all(outgoing.into_iter().map(|o| o.0).collect()) {
            peers.receive(&bytes, &mut woken);
            ready.append(&mut woken);
        }
        let counts = Out::default().u64(remaining).u64(peers.sent).0.clone();
        peers.sent = 0;
        let (mut left, mut sent) = (0, 0);
        for bytes in all_gather(exchange, counts) {
            let mut input = In { bytes: &bytes };
            left += input.u64();
            sent += input.u64();
        }
        if left == 0 {
            break;
        }
        if sent == 0 {
            // Nothing moved anywhere: the programs left wait for each other.
            let mut out = Out::default();
            for (index, _) in programs.iter().enumerate().filter(|(_, p)| !p.1) {
                out.u32(first + index as Rank);
            }
            let mut stuck = Vec::new();
            for bytes in all_gather(exchange, out.0) {
                let mut input = In { bytes: &bytes };
                while input.more() {
                    stuck.push(input.u32());
                }
            }
            return Err(AnalysisError::ReplayStalled { stuck });
        }
    }
    // Each cause split its waiters' waiting time: back to the waiters.
    let mut delays = Delays::default();
    let mut outgoing: Vec<Out> = (0..processes).map(|_| Out::default()).collect();
    for (program, _) in programs {
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
            let (rank, wait, direct, indirect) =
                (input.u32(), input.u32(), input.f64(), input.f64());
            delays.splits[(rank - first) as usize][wait as usize].add(direct, indirect);
        }
    }
    Ok(delays)
}

fn put_token(out: &mut Out, token: Token, sequence: u64) {
    out.u32(token.rank)
        .u64(token.time)
        .u32(token.cause_op.unwrap_or(u32::MAX))
        .u64(token.steps_left as u64)
        .u64(sequence);
}

fn take_token(input: &mut In<'_>) -> (Token, u64) {
    let token = Token {
        rank: input.u32(),
        time: input.u64(),
        cause_op: Some(input.u32()).filter(|&op| op != u32::MAX),
        steps_left: input.u64() as usize,
    };
    (token, input.u64())
}

/// The critical path's segments on this process's ranks, each with its place in the walk (from
/// the end of the run backwards; empty segments included).
pub fn critical_path(local: &LocalForward, exchange: &impl Exchange) -> Vec<(u64, Segment)> {
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
    let Some(token) = start(ends.into_iter(), waits) else {
        return Vec::new();
    };
    let mut ranks = Ranks::new(first, &local.timelines, &local.waits);
    let mut holding = (local.blocks.owner(token.rank) == local.process).then_some((token, 0u64));
    let mut segments = Vec::new();
    let mut walked = Vec::new();
    loop {
        let mut outgoing = vec![Vec::new(); exchange.processes()];
        if let Some((token, mut sequence)) = holding.take() {
            let next = ranks.walk(token, &mut walked);
            for segment in walked.drain(..) {
                segments.push((sequence, segment));
                sequence += 1;
            }
            match next {
                Some(token) => {
                    let mut out = Out::default();
                    out.u32(1);
                    put_token(&mut out, token, sequence);
                    outgoing[local.blocks.owner(token.rank)] = out.0;
                }
                None => outgoing
                    .iter_mut()
                    .for_each(|o| *o = Out::default().u32(0).0.clone()),
            }
        }
        let mut ended = false;
        for bytes in exchange.all_to_all(outgoing) {
            let mut input = In { bytes: &bytes };
            if !input.more() {
                continue;
            }
            match input.u32() {
                0 => ended = true,
                _ => holding = Some(take_token(&mut input)),
            }
        }
        if ended {
            return segments;
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
    let delays = backward(local, exchange)?;
    let walked = critical_path(local, exchange);
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
