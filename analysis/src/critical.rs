//! The critical path (Böhme et al., IPDPS 2012, Sec. III-B), found by a backward walk.
//!
//! The path ends on the rank whose trace ends last. Walking backwards, it stays on a rank until
//! it meets a wait state; there it moves to the rank that caused the wait, at the moment that
//! rank entered the synchronisation. It thus holds no waiting time, and its length is the wall
//! time. Here one thread follows it, touching only the operations on the path; the distributed
//! analysis (`distributed_replay.rs`) hands the walk's [`Token`] between processes.

use crate::forward::{Forward, WaitState};
use crate::timeline::RankTimeline;
use mpistat_trace::model::{Rank, Ticks};

/// A stretch `[start, end)` of the critical path on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    pub rank: Rank,
    pub start: Ticks,
    pub end: Ticks,
}

/// Where the backward walk stands: on `rank` at `time`, having arrived through a wait state
/// caused by operation `cause_op` (none at the end of the run), with `steps_left` moves allowed
/// (a bound against clocks that disagree: one per wait state, plus one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub rank: Rank,
    pub time: Ticks,
    pub cause_op: Option<u32>,
    pub steps_left: usize,
}

/// The ranks one walker holds, from rank `first` on: their timelines and wait states, and per
/// rank the bound below which its wait states are still ahead (backwards) of the walk.
pub struct Ranks<'a> {
    pub first: Rank,
    pub timelines: &'a [RankTimeline],
    pub waits: &'a [Vec<WaitState>],
    pub bounds: Vec<usize>,
}

impl<'a> Ranks<'a> {
    pub fn new(first: Rank, timelines: &'a [RankTimeline], waits: &'a [Vec<WaitState>]) -> Self {
        Ranks {
            first,
            timelines,
            waits,
            bounds: waits.iter().map(Vec::len).collect(),
        }
    }

    fn holds(&self, rank: Rank) -> bool {
        (self.first..self.first + self.timelines.len() as Rank).contains(&rank)
    }

    /// Walks on from `token` while the path stays on these ranks, pushing its segments (from the
    /// end of the run backwards, empty ones included). Returns the token where the path moves to
    /// a rank held elsewhere, `None` where it ends.
    pub fn walk(&mut self, mut token: Token, segments: &mut Vec<Segment>) -> Option<Token> {
        while self.holds(token.rank) {
            let local = (token.rank - self.first) as usize;
            let (timeline, waits) = (&self.timelines[local], &self.waits[local]);
            let bound = &mut self.bounds[local];
            // The walk goes back in time, so the bounds only fall: moving them is linear over
            // the whole walk.
            if let Some(op) = token.cause_op {
                if *bound < waits.len() && waits[*bound].op < op {
                    // Clocks that disagree can send the walk forward: search.
                    *bound = waits.partition_point(|w| w.op < op);
                }
                while *bound > 0 && waits[*bound - 1].op >= op {
                    *bound -= 1;
                }
            }
            let time = token.time;
            let next = waits[..*bound]
                .iter()
                .rev()
                .find(|w| w.enter + w.wait <= time);
            match next {
                Some(wait) if token.steps_left > 0 => {
                    segments.push(Segment {
                        rank: token.rank,
                        start: wait.enter + wait.wait,
                        end: time,
                    });
                    token = Token {
                        rank: wait.cause.rank,
                        time: wait.cause_enter,
                        cause_op: Some(wait.cause.op),
                        steps_left: token.steps_left - 1,
                    };
                }
                _ => {
                    segments.push(Segment {
                        rank: token.rank,
                        start: timeline.start.min(time),
                        end: time,
                    });
                    return None;
                }
            }
        }
        Some(token)
    }
}

/// Where the walk starts: the rank whose trace ends last (the lowest of those), at its end.
pub fn start(ends: impl Iterator<Item = (Rank, Ticks)>, waits: usize) -> Option<Token> {
    let (rank, time) = ends.max_by_key(|&(rank, end)| (end, std::cmp::Reverse(rank)))?;
    Some(Token {
        rank,
        time,
        cause_op: None,
        steps_left: waits + 1,
    })
}

/// The walk's segments in time order, empty ones left out.
pub fn in_time_order(mut segments: Vec<Segment>) -> Vec<Segment> {
    segments.retain(|s| s.end > s.start);
    segments.reverse();
    segments
}

/// The critical path's segments, from the start of the execution to its end.
pub fn critical_path(timelines: &[RankTimeline], forward: &Forward) -> Vec<Segment> {
    let ends = (0..).zip(timelines.iter().map(|t| t.end));
    let Some(token) = start(ends, forward.waits.iter().map(Vec::len).sum()) else {
        return Vec::new();
    };
    let mut segments = Vec::new();
    Ranks::new(0, timelines, &forward.waits).walk(token, &mut segments);
    in_time_order(segments)
}
