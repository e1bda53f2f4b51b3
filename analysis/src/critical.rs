//! The critical path (Böhme et al., IPDPS 2012, Sec. III-B), found by a backward walk.
//!
//! The path ends on the rank whose trace ends last. Walking backwards, it stays on a rank until
//! it meets a wait state; there it moves to the rank that caused the wait, at the moment that
//! rank entered the synchronisation. It thus holds no waiting time, and its length is the wall
//! time. In an MPI version of the analysis the walk is a token passed backwards along the replayed
//! messages; here one thread follows it, touching only the operations on the path.

use crate::forward::Forward;
use crate::model::{Rank, Ticks};
use crate::timeline::RankTimeline;

/// A stretch `[start, end)` of the critical path on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    pub rank: Rank,
    pub start: Ticks,
    pub end: Ticks,
}

/// The critical path's segments, from the start of the execution to its end.
pub fn critical_path(timelines: &[RankTimeline], forward: &Forward) -> Vec<Segment> {
    let Some(last) = (0..timelines.len()).max_by_key(|&r| (timelines[r].end, std::cmp::Reverse(r)))
    else {
        return Vec::new();
    };
    let mut segments = Vec::new();
    let mut rank = last;
    let mut time = timelines[rank].end;
    // Per rank, its wait states before this index are still ahead (backwards) of the walk. The
    // walk goes back in time, so the bounds only fall: moving them is linear over the whole walk.
    let mut bounds: Vec<usize> = forward.waits.iter().map(Vec::len).collect();
    let mut steps_left = forward.waits.iter().map(Vec::len).sum::<usize>() + 1;
    loop {
        let timeline = &timelines[rank];
        let waits = &forward.waits[rank];
        let next = waits[..bounds[rank]]
            .iter()
            .rev()
            .find(|w| w.enter + w.wait <= time);
        match next {
            Some(wait) if steps_left > 0 => {
                steps_left -= 1;
                let resume = wait.enter + wait.wait;
                segments.push(Segment {
                    rank: rank as Rank,
                    start: resume,
                    end: time,
                });
                rank = wait.cause.rank as usize;
                time = wait.cause_enter;
                let (waits, bound) = (&forward.waits[rank], &mut bounds[rank]);
                if *bound < waits.len() && waits[*bound].op < wait.cause.op {
                    // Clocks that disagree can send the walk forward: search.
                    *bound = waits.partition_point(|w| w.op < wait.cause.op);
                }
                while *bound > 0 && waits[*bound - 1].op >= wait.cause.op {
                    *bound -= 1;
                }
            }
            _ => {
                segments.push(Segment {
                    rank: rank as Rank,
                    start: timeline.start.min(time),
                    end: time,
                });
                break;
            }
        }
    }
    segments.retain(|s| s.end > s.start);
    segments.reverse();
    segments
}
