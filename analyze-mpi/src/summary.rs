//! The summary `mpistat-analyze --send` sends (digest's `analyze::Summary`, the record
//! `mpistat analyze --send` sends), from what the distributed analysis computes so far: the
//! forward replay's wait states. Each process sums its ranks' waiting per call path and pattern
//! and its time span; process 0 gathers these small parts (never the wait states themselves) and
//! builds the summary. Delay costs (root causes) and the critical path are not distributed yet:
//! the causes name where the ranks waited, and a note says what is missing.

use crate::mpi::World;
use mpistat_analysis::distributed::{numbered_waits, Exchange, LocalForward};
use mpistat_digest::analyze::Summary;
use std::collections::BTreeMap;

/// One process's part: (first start, last end, (call path, pattern, waiting) sums, reading
/// problems).
type Part = (
    Option<u64>,
    Option<u64>,
    Vec<(u32, String, u64)>,
    Vec<String>,
);

/// What the parallel form leaves out, said in every summary it sends.
pub const PARTIAL: &str = "analysed in parallel (mpistat-analyze): wait states only so far; \
                           delay costs (root causes) and the critical path are not computed";

fn part(local: &LocalForward, read_problems: &[String]) -> Part {
    let mut sums: BTreeMap<(u32, &'static str), u64> = BTreeMap::new();
    let first = local.blocks.first(local.process);
    for (_, callpath, wait) in numbered_waits(first, &local.timelines, &local.waits) {
        *sums.entry((callpath, wait.pattern.name())).or_default() += wait.wait;
    }
    (
        local.timelines.iter().map(|t| t.start).min(),
        local.timelines.iter().map(|t| t.end).max(),
        sums.into_iter()
            .map(|((callpath, pattern), wait)| (callpath, pattern.to_string(), wait))
            .collect(),
        read_problems.to_vec(),
    )
}

/// Gathers every process's part on process 0, which returns the summary; the others `None`.
pub fn gather(local: &LocalForward, read_problems: &[String], world: &World) -> Option<Summary> {
    let mine = serde_json::to_vec(&part(local, read_problems)).expect("plain data");
    let mut outgoing = vec![Vec::new(); world.processes()];
    outgoing[0] = mine;
    let incoming = world.all_to_all(outgoing);
    if world.process() != 0 {
        return None;
    }
    let parts: Vec<Part> = incoming
        .iter()
        .map(|bytes| serde_json::from_slice(bytes).expect("a part this program encoded"))
        .collect();
    Some(summarise(local, parts))
}

fn summarise(local: &LocalForward, parts: Vec<Part>) -> Summary {
    let start = parts.iter().filter_map(|p| p.0).min().unwrap_or(0);
    let end = parts.iter().filter_map(|p| p.1).max().unwrap_or(0);
    let seconds = |ticks: u64| ticks as f64 / local.definitions.ticks_per_second.max(1) as f64;
    // Per call path: its waiting, and its waiting per pattern.
    let mut callpaths: BTreeMap<u32, (u64, BTreeMap<String, u64>)> = BTreeMap::new();
    let mut notes = Vec::new();
    for (_, _, sums, problems) in parts {
        for (callpath, pattern, wait) in sums {
            let entry = callpaths.entry(callpath).or_default();
            entry.0 += wait;
            *entry.1.entry(pattern).or_default() += wait;
        }
        notes.extend(problems);
    }
    notes.extend(local.problems.iter().cloned());
    notes.push(PARTIAL.into());
    let total: u64 = callpaths.values().map(|(wait, _)| wait).sum();
    let wall = end - start;
    let allocation = wall as f64 * f64::from(local.blocks.ranks);
    let percent = |part: f64, whole: f64| {
        if whole > 0.0 {
            100.0 * part / whole
        } else {
            0.0
        }
    };
    let mut ranked: Vec<_> = callpaths.into_iter().filter(|(_, (w, _))| *w > 0).collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    let causes = ranked
        .into_iter()
        .take(3)
        .map(|(callpath, (wait, patterns))| {
            let (pattern, _) = patterns
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .expect("a call path with waiting has a pattern");
            format!(
                "{}: ranks waited {:.6} s there ({:.1} % of all waiting), mostly {pattern}.",
                local.tree.label(callpath, &local.definitions.regions),
                seconds(wait),
                percent(wait as f64, total as f64),
            )
        })
        .collect();
    Summary {
        wall_s: seconds(wall),
        waiting_percent: percent(total as f64, allocation),
        critical_imbalance_percent: 0.0,
        causes,
        notes,
    }
}
