//! Backward replay: delay costs (Algorithm 1 of Böhme et al., "Identifying the root causes of wait
//! states", ACM TOPC 2016) and the classification of waiting time.
//!
//! Each rank walks its operations from the last to the first. At a wait state, the waiting rank
//! sends its processing-time profile of the synchronisation interval and the wait's short-term
//! (its own waiting time) and long-term (waiting time it caused later) costs to the rank that
//! caused it. That rank compares profiles: the call paths where it spent more time, and its own
//! wait states inside the interval (which propagated), share the costs in proportion. Its wait
//! states' long-term costs grow, and travel further back when their turn comes.
//!
//! Who gets the costs: the sender for a Late Sender, the receiver for a Late Receiver, the last
//! rank to enter for N×N collectives and barriers, the root for 1×N, the last non-root for N×1.

use crate::callpath::CallpathId;
use crate::forward::{Forward, WaitState};
use crate::hash::FastMap;
use crate::matching::Matching;
use crate::model::{Rank, Ticks};
use crate::replay::{self, PostOffice, Progress, RankProgram};
use crate::timeline::RankTimeline;

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
type Profile = Vec<(CallpathId, f64)>;

/// What a synchronisation interval holds on one rank.
struct Interval {
    profile: Profile,
    /// Wait states inside it: (index into the rank's waits, waiting time inside the interval).
    waits: Vec<(usize, f64)>,
}

/// What a waiting rank sends to the rank that caused its wait.
pub struct CostMessage {
    profile: Profile,
    short_term: f64,
    long_term: f64,
    window_start: Ticks,
    waiter: (Rank, u32),
}

/// Per rank state of the backward replay.
struct DelayProgram<'a> {
    rank: Rank,
    timeline: &'a RankTimeline,
    waits: &'a [WaitState],
    matching: &'a Matching,
    forward: &'a Forward,
    /// Operations still to visit: `0..cursor`.
    cursor: usize,
    /// Wait states still to visit: `0..wait_cursor`.
    wait_cursor: usize,
    /// Points of operation `cursor - 1` already handled as the cause.
    point_cursor: Option<u32>,
    long_term: Vec<f64>,
    costs: FastMap<CallpathId, DelayCost>,
    /// (waiter rank, index into its waits, direct, indirect) for wait states this rank caused.
    splits: Vec<(Rank, u32, f64, f64)>,
}

/// Runs the delay analysis over all ranks.
pub fn replay(
    timelines: &[RankTimeline],
    matching: &Matching,
    forward: &Forward,
) -> Result<Delays, Vec<Rank>> {
    let mut programs: Vec<DelayProgram> = timelines
        .iter()
        .enumerate()
        .map(|(rank, timeline)| DelayProgram {
            rank: rank as Rank,
            timeline,
            waits: &forward.waits[rank],
            matching,
            forward,
            cursor: timeline.ops.len(),
            wait_cursor: forward.waits[rank].len(),
            point_cursor: None,
            long_term: vec![0.0; forward.waits[rank].len()],
            costs: FastMap::default(),
            splits: Vec::new(),
        })
        .collect();
    replay::run(&mut programs, &forward.waiters)?;
    let mut delays = Delays {
        costs: Vec::with_capacity(programs.len()),
        splits: forward
            .waits
            .iter()
            .map(|w| vec![WaitSplit::default(); w.len()])
            .collect(),
    };
    for program in programs {
        for (rank, wait, direct, indirect) in program.splits {
            let split = &mut delays.splits[rank as usize][wait as usize];
            split.direct += direct;
            split.indirect += indirect;
        }
        for (index, long_term) in program.long_term.iter().enumerate() {
            delays.splits[program.rank as usize][index].long_term_cost = *long_term;
        }
        delays.costs.push(program.costs);
    }
    Ok(delays)
}

impl RankProgram for DelayProgram<'_> {
    type Message = CostMessage;

    fn resume(&mut self, post: &PostOffice<'_, CostMessage>) -> Progress {
        while self.cursor > 0 {
            let op_index = self.cursor - 1;
            let op = &self.timeline.ops[op_index];
            let mut point = self.point_cursor.unwrap_or(op.points.start);
            while point < op.points.end {
                let instance = self.matching.point_instance[self.rank as usize][point as usize];
                if self.forward.causes.get(instance as usize) == Some(&self.rank) {
                    let Some(messages) = post.take(instance, self.rank) else {
                        self.point_cursor = Some(point);
                        return Progress::Blocked(instance);
                    };
                    for message in messages {
                        self.account(op_index, message);
                    }
                }
                point += 1;
            }
            self.point_cursor = None;
            if self.wait_cursor > 0 && self.waits[self.wait_cursor - 1].op as usize == op_index {
                self.wait_cursor -= 1;
                let wait = self.waits[self.wait_cursor];
                let profile = self.interval(wait.window_start, op_index).profile;
                post.deliver(
                    wait.instance,
                    CostMessage {
                        profile,
                        short_term: wait.wait as f64,
                        long_term: self.long_term[self.wait_cursor],
                        window_start: wait.window_start,
                        waiter: (self.rank, self.wait_cursor as u32),
                    },
                );
            }
            self.cursor -= 1;
        }
        Progress::Done
    }
}

impl DelayProgram<'_> {
    /// The synchronisation interval `[from, enter of op)`.
    fn interval(&self, from: Ticks, op_index: usize) -> Interval {
        let op = &self.timeline.ops[op_index];
        let mut profile: Profile = Vec::new();
        self.timeline.for_each_piece_in(
            from,
            op.enter,
            op.first_piece as usize,
            |callpath, time| add_time(&mut profile, callpath, time as f64),
        );
        let mut waits = Vec::new();
        let first_wait = self.waits.partition_point(|w| (w.op as usize) < op_index);
        for index in (0..first_wait).rev() {
            let wait = self.waits[index];
            let waited = &self.timeline.ops[wait.op as usize];
            let clipped = (waited.enter + wait.wait)
                .min(op.enter)
                .saturating_sub(waited.enter.max(from));
            if waited.exit <= from {
                break;
            }
            if clipped > 0 {
                add_time(&mut profile, waited.callpath, -(clipped as f64));
                waits.push((index, clipped as f64));
            }
        }
        let mut profile: Profile = profile.into_iter().filter(|&(_, t)| t > 0.0).collect();
        profile.sort_unstable_by_key(|&(callpath, _)| callpath);
        Interval { profile, waits }
    }

    /// Lines 16-29 of Algorithm 1: share one waiter's costs among this rank's delays and
    /// propagating wait states in the synchronisation interval.
    fn account(&mut self, op_index: usize, message: CostMessage) {
        let Interval {
            profile: local,
            waits,
        } = self.interval(message.window_start, op_index);
        let excess: Vec<(CallpathId, f64)> = local
            .into_iter()
            .map(|(callpath, time)| {
                (
                    callpath,
                    (time - time_of(&message.profile, callpath)).max(0.0),
                )
            })
            .filter(|&(_, delta)| delta > 0.0)
            .collect();
        let excess_sum: f64 = excess.iter().map(|&(_, d)| d).sum();
        let waiting_sum: f64 = waits.iter().map(|&(_, w)| w).sum();
        let (waiter_rank, waiter_wait) = message.waiter;
        if excess_sum + waiting_sum <= 0.0 {
            // Nothing in the interval explains the wait (the delay lies before it): the
            // operation that arrived late carries the costs.
            let cost = self
                .costs
                .entry(self.timeline.ops[op_index].callpath)
                .or_default();
            cost.short_term += message.short_term;
            cost.long_term += message.long_term;
            self.splits
                .push((waiter_rank, waiter_wait, message.short_term, 0.0));
            return;
        }
        let scale = 1.0 / (excess_sum + waiting_sum);
        for (callpath, delta) in excess {
            let cost = self.costs.entry(callpath).or_default();
            cost.short_term += message.short_term * scale * delta;
            cost.long_term += message.long_term * scale * delta;
        }
        for (index, waited) in waits {
            self.long_term[index] += (message.short_term + message.long_term) * scale * waited;
        }
        self.splits.push((
            waiter_rank,
            waiter_wait,
            message.short_term * scale * excess_sum,
            message.short_term * scale * waiting_sum,
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
