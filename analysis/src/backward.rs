//! Backward replay: delay costs (Algorithm 1 of Böhme et al., "Identifying the root causes of wait
//! states", ACM TOPC 2016) and the classification of waiting time.
//!
//! Each rank walks its operations from the last to the first. At a wait state, the waiting rank
//! hands on its processing-time profile of the synchronisation interval and the wait's short-term
//! (its own waiting time) and long-term (waiting time it caused later) costs to the rank that
//! caused it. That rank compares profiles: the call paths where it spent more time, and its own
//! wait states inside the interval (which propagated), share the costs in proportion. Its wait
//! states' long-term costs grow, and travel further back when their turn comes.
//!
//! The per-rank program ([`DelayProgram`]) meets the other ranks through [`Peers`]. In shared
//! memory the waiter's profile depends only on its (read-only) timeline, so the cause computes it
//! itself; only the long-term cost, final once the waiter reaches the wait state, is handed on,
//! through a per-wait slot and the instance's gate ([`crate::replay::Gates`]). The distributed
//! analysis (`distributed_replay.rs`) runs the same programs and sends the profile with the
//! costs.
//!
//! Who gets the costs: the sender for a Late Sender, the receiver for a Late Receiver, the last
//! rank to enter for N×N collectives and barriers, the root for 1×N, the last non-root for N×1.

use crate::callpath::CallpathId;
use crate::forward::{Forward, WaitState};
use crate::matching::InstanceId;
use crate::replay::{self, Gates, Progress, RankProgram};
use crate::timeline::RankTimeline;
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{Rank, Ticks};
use std::sync::atomic::{AtomicU64, Ordering};

/// Delay costs of one call path on one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DelayCost {
    pub short_term: f64,
    pub long_term: f64,
}

/// How one wait state's time splits up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WaitSplit {
    /// Caused by excess processing on the cause's side (the rest is indirect: propagated waiting).
    pub direct: f64,
    pub indirect: f64,
    /// Waiting time this wait state caused later on; > 0 makes it a propagating wait state.
    pub long_term_cost: f64,
}

/// Results of the delay analysis.
#[derive(Debug, Clone, Default)]
pub struct Delays {
    /// Per rank, delay costs by call path.
    pub costs: Vec<FastMap<CallpathId, DelayCost>>,
    /// Per rank, parallel to `Forward::waits`.
    pub splits: Vec<Vec<WaitSplit>>,
}

/// Processing time per call path, sorted by call path.
pub(crate) type Profile = Vec<(CallpathId, f64)>;

/// Per rank and wait state, its long-term cost (`f64` bits), published by the waiting rank when
/// it reaches the wait state; the cause reads it once the wait's gate is open.
type LongTerm = Vec<Vec<AtomicU64>>;

/// Reused buffers of the profile comparison.
#[derive(Default)]
struct Scratch {
    waiter: Profile,
    local: Profile,
    /// Own wait states inside the interval: (index into the rank's waits, waiting time inside).
    waits: Vec<(usize, f64)>,
    excess: Vec<(CallpathId, f64)>,
}

/// What the cause of a wait state learns from its waiter (with the waiter's interval profile).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaiterSide {
    pub rank: Rank,
    /// Index into the waiter's wait states.
    pub wait: u32,
    pub short_term: f64,
    pub long_term: f64,
    pub window_start: Ticks,
}

/// Where a rank's program meets the others: in one process the instances' gates and the
/// published long-term costs; in the distributed analysis the contributions that crossed
/// processes (`distributed_replay.rs`).
pub(crate) trait Peers {
    /// Whether every waiter at `instance` has handed over its side.
    fn open(&self, instance: InstanceId) -> bool;
    /// How many waiters an open `instance` has.
    fn waiter_count(&self, instance: InstanceId) -> usize;
    /// The `n`-th waiter at an open `instance`, in rank order; its interval profile into `profile`.
    fn waiter(&self, instance: InstanceId, n: usize, profile: &mut Profile) -> WaiterSide;
    /// The cause has taken every waiter's side at `instance`.
    fn taken(&mut self, instance: InstanceId);
    /// Rank `rank` reached its wait state `index` (at `instance`): its long-term cost is final.
    /// Ranks this makes ready go into `woken`.
    fn arrive(
        &mut self,
        rank: Rank,
        index: usize,
        instance: InstanceId,
        long_term: f64,
        woken: &mut Vec<Rank>,
    );
}

/// Per rank state of the backward replay.
pub(crate) struct DelayProgram<'a> {
    rank: Rank,
    timeline: &'a RankTimeline,
    /// This rank's wait states and the instances where it caused waiting (`Forward`'s rows).
    waits: &'a [WaitState],
    caused: &'a [(u32, InstanceId)],
    /// Per own wait state, its long-term cost so far (final once the walk reaches it).
    long_term: Vec<f64>,
    /// Entries of `caused` still to visit: `0..cause_cursor`.
    cause_cursor: usize,
    /// Wait states still to visit: `0..wait_cursor`.
    wait_cursor: usize,
    /// Delay costs by call path (dense: no hashing per share; a rank's costs are a row of the
    /// (call path, rank) cells the analysis reports anyway), and which call paths got any.
    costs: Vec<(DelayCost, bool)>,
    /// (waiter rank, index into its waits, direct, indirect) for wait states this rank caused.
    splits: Vec<(Rank, u32, f64, f64)>,
    scratch: Scratch,
}

/// What a finished [`DelayProgram`] found: its delay costs, its wait states' long-term costs,
/// and the (waiter rank, wait index, direct, indirect) split of each wait state it caused.
pub(crate) type DelayResult = (
    FastMap<CallpathId, DelayCost>,
    Vec<f64>,
    Vec<(Rank, u32, f64, f64)>,
);

/// The one-process [`Peers`]: the whole trace is at hand.
struct SharedPeers<'a, 'g> {
    gates: &'g Gates<'g>,
    timelines: &'a [RankTimeline],
    forward: &'a Forward,
    long_term: &'a LongTerm,
}

impl Peers for SharedPeers<'_, '_> {
    fn open(&self, instance: InstanceId) -> bool {
        self.gates.open(instance)
    }

    fn waiter_count(&self, instance: InstanceId) -> usize {
        self.forward.waiters_of(instance).len()
    }

    fn waiter(&self, instance: InstanceId, n: usize, profile: &mut Profile) -> WaiterSide {
        let (rank, wait) = self.forward.waiters_of(instance)[n];
        let waits = &self.forward.waits[rank as usize];
        let state = waits[wait as usize];
        // The waiter's profile depends only on its read-only timeline: computed here, not sent.
        interval(
            &self.timelines[rank as usize],
            (waits, wait as usize),
            state.window_start,
            state.op as usize,
            profile,
            None,
        );
        let long_term = &self.long_term[rank as usize][wait as usize];
        WaiterSide {
            rank,
            wait,
            short_term: state.wait as f64,
            long_term: f64::from_bits(long_term.load(Ordering::Relaxed)),
            window_start: state.window_start,
        }
    }

    fn taken(&mut self, _: InstanceId) {}

    fn arrive(
        &mut self,
        rank: Rank,
        index: usize,
        instance: InstanceId,
        long_term: f64,
        woken: &mut Vec<Rank>,
    ) {
        self.long_term[rank as usize][index].store(long_term.to_bits(), Ordering::Relaxed);
        woken.extend(self.gates.arrive(instance));
    }
}

/// A [`DelayProgram`] of the one-process replay, with the shared state its peers are read from.
struct SharedProgram<'a> {
    program: DelayProgram<'a>,
    timelines: &'a [RankTimeline],
    forward: &'a Forward,
    long_term: &'a LongTerm,
}

impl RankProgram for SharedProgram<'_> {
    fn resume(&mut self, gates: &Gates<'_>, woken: &mut Vec<Rank>) -> Progress {
        let mut peers = SharedPeers {
            gates,
            timelines: self.timelines,
            forward: self.forward,
            long_term: self.long_term,
        };
        self.program.resume(&mut peers, woken)
    }
}

/// Runs the delay analysis over all ranks.
pub fn replay(timelines: &[RankTimeline], forward: &Forward) -> Result<Delays, Vec<Rank>> {
    let long_term: LongTerm = forward
        .waits
        .iter()
        .map(|w| w.iter().map(|_| AtomicU64::new(0)).collect())
        .collect();
    let mut programs: Vec<SharedProgram> = (0..timelines.len())
        .map(|rank| SharedProgram {
            program: DelayProgram::new(
                rank as Rank,
                &timelines[rank],
                &forward.waits[rank],
                &forward.caused[rank],
            ),
            timelines,
            forward,
            long_term: &long_term,
        })
        .collect();
    replay::run(&mut programs, &forward.waiters)?;
    let mut delays = Delays::default();
    let mut splits = Vec::new();
    for program in programs {
        let (costs, long_term, caused) = program.program.finish();
        delays.costs.push(costs);
        delays.splits.push(unsplit(&long_term));
        splits.push(caused);
    }
    for (rank, wait, direct, indirect) in splits.into_iter().flatten() {
        delays.splits[rank as usize][wait as usize].add(direct, indirect);
    }
    Ok(delays)
}

/// A rank's wait states with their long-term costs, not yet split into direct and indirect.
pub(crate) fn unsplit(long_term: &[f64]) -> Vec<WaitSplit> {
    long_term
        .iter()
        .map(|&long_term_cost| WaitSplit {
            long_term_cost,
            ..WaitSplit::default()
        })
        .collect()
}

impl WaitSplit {
    /// Adds the split its cause computed.
    pub(crate) fn add(&mut self, direct: f64, indirect: f64) {
        self.direct += direct;
        self.indirect += indirect;
    }
}

impl<'a> DelayProgram<'a> {
    pub(crate) fn new(
        rank: Rank,
        timeline: &'a RankTimeline,
        waits: &'a [WaitState],
        caused: &'a [(u32, InstanceId)],
    ) -> Self {
        DelayProgram {
            rank,
            timeline,
            waits,
            caused,
            long_term: vec![0.0; waits.len()],
            cause_cursor: caused.len(),
            wait_cursor: waits.len(),
            costs: Vec::new(),
            splits: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// Runs until done or until an instance's waiters have not all handed over their side.
    pub(crate) fn resume(&mut self, peers: &mut impl Peers, woken: &mut Vec<Rank>) -> Progress {
        // Backwards over the operations where this rank caused waiting or waited; in one
        // operation, the waiting it caused first (its own wait state may have propagated it).
        loop {
            let cause_op = self.cause_cursor.checked_sub(1).map(|c| self.caused[c].0);
            let wait_op = self.wait_cursor.checked_sub(1).map(|w| self.waits[w].op);
            match (cause_op, wait_op) {
                (None, None) => return Progress::Done,
                (Some(op), wait) if wait.is_none_or(|w| op >= w) => {
                    let instance = self.caused[self.cause_cursor - 1].1;
                    if !peers.open(instance) {
                        return Progress::Blocked(instance);
                    }
                    for n in 0..peers.waiter_count(instance) {
                        let side = peers.waiter(instance, n, &mut self.scratch.waiter);
                        self.account(op as usize, side);
                    }
                    peers.taken(instance);
                    self.cause_cursor -= 1;
                }
                _ => {
                    self.wait_cursor -= 1;
                    // Its long-term cost is final: every later wait it could have caused is done.
                    let index = self.wait_cursor;
                    let instance = self.waits[index].instance;
                    peers.arrive(self.rank, index, instance, self.long_term[index], woken);
                }
            }
        }
    }

    /// The delay costs by call path, the long-term costs of the own wait states, and the splits
    /// of the wait states this rank caused.
    pub(crate) fn finish(self) -> DelayResult {
        let costs = (self.costs.iter().enumerate())
            .filter(|(_, (_, touched))| *touched)
            .map(|(callpath, &(cost, _))| (callpath as CallpathId, cost))
            .collect();
        (costs, self.long_term, self.splits)
    }
}

/// The profile of the synchronisation interval `[from, enter of op)` on one rank: processing
/// time per call path (waiting time taken out), positive entries only, sorted by call path; with
/// `inside`, the wait states in the interval and their waiting time in it. `waits[..first_wait]`
/// are the rank's wait states before the operation.
pub(crate) fn interval(
    timeline: &RankTimeline,
    (waits, first_wait): (&[WaitState], usize),
    from: Ticks,
    op_index: usize,
    profile: &mut Profile,
    mut inside: Option<&mut Vec<(usize, f64)>>,
) {
    let op = &timeline.ops[op_index];
    profile.clear();
    timeline.for_each_piece_in(from, op.enter, op.first_piece as usize, |callpath, time| {
        add_time(profile, callpath, time as f64)
    });
    if let Some(inside) = inside.as_deref_mut() {
        inside.clear();
    }
    for index in (0..first_wait).rev() {
        let wait = waits[index];
        let waited = &timeline.ops[wait.op as usize];
        let clipped = (waited.enter + wait.wait)
            .min(op.enter)
            .saturating_sub(waited.enter.max(from));
        if waited.exit <= from {
            break;
        }
        if clipped > 0 {
            add_time(profile, waited.callpath, -(clipped as f64));
            if let Some(inside) = inside.as_deref_mut() {
                inside.push((index, clipped as f64));
            }
        }
    }
    profile.retain(|&(_, t)| t > 0.0);
    profile.sort_unstable_by_key(|&(callpath, _)| callpath);
}

/// The delay cost of `callpath` in a rank's dense costs, marked as touched.
fn cost_of(costs: &mut Vec<(DelayCost, bool)>, callpath: CallpathId) -> &mut DelayCost {
    let index = callpath as usize;
    if index >= costs.len() {
        costs.resize(index + 1, (DelayCost::default(), false));
    }
    costs[index].1 = true;
    &mut costs[index].0
}

impl DelayProgram<'_> {
    /// Lines 16-29 of Algorithm 1: share the costs of the waiter's wait state (its profile is in
    /// `scratch.waiter`) among this rank's delays and propagating wait states in the
    /// synchronisation interval.
    fn account(&mut self, op_index: usize, side: WaiterSide) {
        let (short_term, long_term) = (side.short_term, side.long_term);
        let scratch = &mut self.scratch;
        // The wait states not visited yet are before this operation, or in it.
        let own_waits = self.waits;
        let mut first_wait = self.wait_cursor;
        if first_wait > 0 && own_waits[first_wait - 1].op as usize == op_index {
            first_wait -= 1;
        }
        interval(
            self.timeline,
            (own_waits, first_wait),
            side.window_start,
            op_index,
            &mut scratch.local,
            Some(&mut scratch.waits),
        );
        scratch.excess.clear();
        scratch.excess.extend(
            scratch
                .local
                .iter()
                .map(|&(callpath, time)| {
                    (
                        callpath,
                        (time - time_of(&scratch.waiter, callpath)).max(0.0),
                    )
                })
                .filter(|&(_, delta)| delta > 0.0),
        );
        let excess_sum: f64 = scratch.excess.iter().map(|&(_, d)| d).sum();
        let waiting_sum: f64 = scratch.waits.iter().map(|&(_, w)| w).sum();
        if excess_sum + waiting_sum <= 0.0 {
            // Nothing in the interval explains the wait (the delay lies before it): the
            // operation that arrived late carries the costs.
            let callpath = self.timeline.ops[op_index].callpath;
            let cost = cost_of(&mut self.costs, callpath);
            cost.short_term += short_term;
            cost.long_term += long_term;
            self.splits.push((side.rank, side.wait, short_term, 0.0));
            return;
        }
        let scale = 1.0 / (excess_sum + waiting_sum);
        for &(callpath, delta) in &scratch.excess {
            let cost = cost_of(&mut self.costs, callpath);
            cost.short_term += short_term * scale * delta;
            cost.long_term += long_term * scale * delta;
        }
        for &(index, waited) in &scratch.waits {
            self.long_term[index] += (short_term + long_term) * scale * waited;
        }
        self.splits.push((
            side.rank,
            side.wait,
            short_term * scale * excess_sum,
            short_term * scale * waiting_sum,
        ));
    }
}

/// Adds `time` to `callpath` in a short profile (intervals hold few call paths).
fn add_time(profile: &mut Profile, callpath: CallpathId, time: f64) {
    match profile.iter_mut().find(|(c, _)| *c == callpath) {
        Some((_, total)) => *total += time,
        None => profile.push((callpath, time)),
    }
}

/// The time of `callpath` in a sorted profile.
fn time_of(profile: &[(CallpathId, f64)], callpath: CallpathId) -> f64 {
    profile
        .binary_search_by_key(&callpath, |&(c, _)| c)
        .map_or(0.0, |i| profile[i].1)
}
