//! The whole analysis, and its result: metrics by call path and rank.

use crate::backward::{self, DelayCost, Delays, WaitSplit};
use crate::callpath::{CallTree, CallpathId};
use crate::critical::{critical_path, Segment};
use crate::error::{AnalysisError, AnalyzeDirError};
use crate::forward::{self, Forward, WaitState};
use crate::matching::{self, Matching};
use crate::patterns::Pattern;
use crate::replay::parallel_for_each_mut;
use crate::source::{Built, TraceDir, TraceSource};
use crate::timeline::{self, RankTimeline};
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{Definitions, Rank, Ticks, Trace};
use mpistat_trace::parallel::parallel_map;
use serde::Serialize;
use std::path::Path;

/// Metrics of one call path on one rank. Times are in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Time without waiting time.
    pub time: f64,
    /// Waiting time per pattern, in the order of [`Pattern::ALL`].
    pub waiting: [f64; 6],
    pub delay_short_term: f64,
    pub delay_long_term: f64,
    /// Waiting time caused by excess processing / by propagated waiting.
    pub direct_waiting: f64,
    pub indirect_waiting: f64,
    /// Waiting time of wait states that caused / did not cause further waiting.
    pub propagating_waiting: f64,
    pub terminal_waiting: f64,
    /// Time on the critical path.
    pub critical: f64,
    /// Imbalance costs (performance impact, IPDPS 2012 Sec. II-D).
    pub intra_partition_cost: f64,
    pub inter_partition_cost: f64,
}

impl Metrics {
    pub fn total_waiting(&self) -> f64 {
        self.waiting.iter().sum()
    }

    fn add(&mut self, other: &Metrics) {
        self.time += other.time;
        for (a, b) in self.waiting.iter_mut().zip(other.waiting) {
            *a += b;
        }
        self.delay_short_term += other.delay_short_term;
        self.delay_long_term += other.delay_long_term;
        self.direct_waiting += other.direct_waiting;
        self.indirect_waiting += other.indirect_waiting;
        self.propagating_waiting += other.propagating_waiting;
        self.terminal_waiting += other.terminal_waiting;
        self.critical += other.critical;
        self.intra_partition_cost += other.intra_partition_cost;
        self.inter_partition_cost += other.inter_partition_cost;
    }
}

/// A call path with its metrics summed over ranks and its critical-path indicators.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallpathSummary {
    pub id: CallpathId,
    pub label: String,
    pub total: Metrics,
    /// Average and maximum time over all ranks.
    pub average_time: f64,
    pub max_time: f64,
    /// Critical-path imbalance ι = max(critical - average, 0) (IPDPS 2012 Sec. II-C).
    pub critical_imbalance: f64,
}

/// Metrics of one (call path, rank).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub callpath: CallpathId,
    pub rank: Rank,
    pub metrics: Metrics,
}

/// The result of [`analyze`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub ranks: u32,
    pub events: usize,
    pub ticks_per_second: u64,
    pub start: Ticks,
    pub end: Ticks,
    /// Waiting time at synchronisation points, over all ranks.
    pub total_waiting: f64,
    pub callpaths: Vec<CallpathSummary>,
    /// Non-zero cells, by call path then rank.
    pub cells: Vec<Cell>,
    pub critical_path: Vec<Segment>,
    pub partitions: Option<Vec<u32>>,
    /// Cartesian topology: dimensions and per-rank coordinates.
    pub cartesian: Option<(Vec<u32>, Vec<Vec<u32>>)>,
    pub problems: Vec<String>,
}

impl Analysis {
    /// The wall time from the first to the last event.
    pub fn wall(&self) -> Ticks {
        self.end - self.start
    }

    /// The metrics of a call path on a rank (zero when absent).
    pub fn cell(&self, callpath: CallpathId, rank: Rank) -> Metrics {
        self.cells
            .binary_search_by_key(&(callpath, rank), |c| (c.callpath, c.rank))
            .map_or_else(|_| Metrics::default(), |i| self.cells[i].metrics)
    }

    /// The summary of the call path with this label.
    pub fn callpath(&self, label: &str) -> Option<&CallpathSummary> {
        self.callpaths.iter().find(|c| c.label == label)
    }

    /// Sum of metrics over everything.
    pub fn totals(&self) -> Metrics {
        let mut total = Metrics::default();
        for callpath in &self.callpaths {
            total.add(&callpath.total);
        }
        total
    }
}

/// Intermediate results of the passes, for callers that want more than the metrics.
pub struct Passes {
    pub definitions: Definitions,
    /// Trace events over all ranks.
    pub events: usize,
    pub timelines: Vec<RankTimeline>,
    pub tree: CallTree,
    pub matching: Matching,
    pub forward: Forward,
    pub delays: Delays,
    pub critical_path: Vec<Segment>,
}

/// Runs all passes over `trace`.
pub fn run_passes(trace: &Trace) -> Result<Passes, AnalysisError> {
    run_passes_observed(trace, &mut |_| {})
}

/// [`run_passes`], calling `finished(pass)` as each pass ends (benchmarks time the passes).
pub fn run_passes_observed(
    trace: &Trace,
    finished: &mut dyn FnMut(&'static str),
) -> Result<Passes, AnalysisError> {
    let defs = &trace.definitions;
    let built = parallel_map(trace.ranks.len(), |rank| {
        let events = &trace.ranks[rank];
        Some(timeline::build(
            rank as Rank,
            events.iter().copied(),
            events.len(),
            defs,
        ))
    });
    finished("timeline");
    finish_passes(defs.clone(), built, finished)
}

/// Reads a trace directory and runs all passes, calling `finished(pass)` as each pass ends.
/// Each rank file is decoded straight into its timeline (the events are never all in memory).
/// Returns the passes and the problems of the reading (see
/// [`read_dir_with`](mpistat_trace::tracefile::read_dir_with)).
pub fn run_passes_on_dir(
    dir: &Path,
    finished: &mut dyn FnMut(&'static str),
) -> Result<(Passes, Vec<String>), AnalyzeDirError> {
    run_passes_on(&TraceDir(dir.to_path_buf()), finished)
}

/// [`run_passes_on_dir`] for any [`TraceSource`] (an OTF2 archive, say).
pub fn run_passes_on(
    source: &dyn TraceSource,
    finished: &mut dyn FnMut(&'static str),
) -> Result<(Passes, Vec<String>), AnalyzeDirError> {
    let (defs, built, problems) = source.read_timelines(&|_| true)?;
    finished("read + timeline");
    let passes = finish_passes(defs, built, finished)?;
    Ok((passes, problems))
}

/// Renumbers a rank's call paths from its own tree's ids to the merged tree's (`remap`).
pub fn remap_callpaths(timeline: &mut RankTimeline, remap: &[CallpathId]) {
    // Ranks that met their call paths in the same order as the ranks before keep their ids.
    if remap
        .iter()
        .enumerate()
        .all(|(local, &id)| id as usize == local)
    {
        return;
    }
    for piece in &mut timeline.pieces {
        piece.callpath = remap[piece.callpath as usize];
    }
    for op in &mut timeline.ops {
        op.callpath = remap[op.callpath as usize];
    }
}

/// The passes after the timelines.
fn finish_passes(
    definitions: Definitions,
    built: Vec<Option<Built>>,
    finished: &mut dyn FnMut(&'static str),
) -> Result<Passes, AnalysisError> {
    if built.is_empty() {
        return Err(AnalysisError::Empty);
    }
    let defs = &definitions;
    let mut tree = CallTree::default();
    let mut timelines = Vec::with_capacity(built.len());
    let mut remaps = Vec::with_capacity(built.len());
    for result in built.into_iter().flatten() {
        let (timeline, local_tree) = result?;
        remaps.push(tree.merge(&local_tree));
        timelines.push(timeline);
    }
    parallel_for_each_mut(&mut timelines, |rank, timeline| {
        remap_callpaths(timeline, &remaps[rank])
    });
    finished("call paths");
    let matching = matching::match_all(&timelines, defs);
    finished("matching");
    let forward = forward::replay(&timelines, &matching, defs);
    finished("forward replay");
    let delays = backward::replay(&timelines, &forward)
        .map_err(|stuck| AnalysisError::ReplayStalled { stuck })?;
    finished("backward replay");
    let critical_path = critical_path(&timelines, &forward);
    finished("critical path");
    Ok(Passes {
        events: timelines.iter().map(|t| t.events).sum(),
        definitions,
        timelines,
        tree,
        matching,
        forward,
        delays,
        critical_path,
    })
}

/// Analyses a trace: wait states, delay costs, critical path and its indicators.
pub fn analyze(trace: &Trace) -> Result<Analysis, AnalysisError> {
    let passes = run_passes(trace)?;
    Ok(summarise(&passes))
}

/// The metrics of one rank by call path while they are summed (dense: the loops over pieces and
/// wait states run without hashing), and which call paths got any.
struct DenseCells {
    metrics: Vec<Metrics>,
    touched: Vec<bool>,
}

impl DenseCells {
    fn new(callpaths: usize) -> Self {
        DenseCells {
            metrics: vec![Metrics::default(); callpaths],
            touched: vec![false; callpaths],
        }
    }

    fn cell(&mut self, callpath: CallpathId) -> &mut Metrics {
        self.touched[callpath as usize] = true;
        &mut self.metrics[callpath as usize]
    }

    fn into_cells(self) -> RankCells {
        (self.metrics.into_iter().zip(self.touched).enumerate())
            .filter(|(_, (_, touched))| *touched)
            .map(|(callpath, (metrics, _))| (callpath as CallpathId, metrics))
            .collect()
    }
}

/// One rank's results of the passes: what its metrics come from.
pub struct RankResults<'a> {
    pub timeline: &'a RankTimeline,
    pub waits: &'a [WaitState],
    /// Parallel to `waits`.
    pub splits: &'a [WaitSplit],
    pub costs: &'a FastMap<CallpathId, DelayCost>,
    /// The rank's stretches of the critical path, in time order.
    pub segments: &'a [Segment],
}

/// A rank's metrics by call path, sorted by call path, before the imbalance costs.
pub type RankCells = Vec<(CallpathId, Metrics)>;

/// The metrics of one rank; `callpaths`: how many call paths the trace has.
pub fn rank_metrics(results: &RankResults<'_>, callpaths: usize) -> RankCells {
    let timeline = results.timeline;
    let mut cells = DenseCells::new(callpaths);
    let mut start = timeline.start;
    for piece in &timeline.pieces {
        cells.cell(piece.callpath).time += (piece.end - start) as f64;
        start = piece.end;
    }
    // Pieces and segments both run forwards in time: one merge.
    let mut piece = 0;
    for segment in results.segments {
        while piece < timeline.pieces.len() && timeline.pieces[piece].end <= segment.start {
            piece += 1;
        }
        let mut index = piece;
        while index < timeline.pieces.len() {
            let (piece_start, piece_end) =
                (timeline.piece_start(index), timeline.pieces[index].end);
            if piece_start >= segment.end {
                break;
            }
            let clipped = piece_end.min(segment.end) - piece_start.max(segment.start);
            if clipped > 0 {
                cells.cell(timeline.pieces[index].callpath).critical += clipped as f64;
            }
            index += 1;
        }
    }
    for (wait, split) in results.waits.iter().zip(results.splits) {
        let cell = cells.cell(timeline.ops[wait.op as usize].callpath);
        let waited = wait.wait as f64;
        cell.time -= waited;
        let pattern = Pattern::ALL
            .iter()
            .position(|&p| p == wait.pattern)
            .unwrap_or(0);
        cell.waiting[pattern] += waited;
        cell.direct_waiting += split.direct;
        cell.indirect_waiting += split.indirect;
        if split.long_term_cost > 0.0 {
            cell.propagating_waiting += waited;
        } else {
            cell.terminal_waiting += waited;
        }
    }
    for (&callpath, cost) in results.costs {
        let cell = cells.cell(callpath);
        cell.delay_short_term += cost.short_term;
        cell.delay_long_term += cost.long_term;
    }
    cells.into_cells()
}

/// The metrics of a finished run of the passes.
pub fn summarise(passes: &Passes) -> Analysis {
    let ranks = passes.timelines.len();
    let mut segments_of: Vec<Vec<Segment>> = vec![Vec::new(); ranks];
    for segment in &passes.critical_path {
        segments_of[segment.rank as usize].push(*segment);
    }
    let per_rank = parallel_map(ranks, |rank| {
        let results = RankResults {
            timeline: &passes.timelines[rank],
            waits: &passes.forward.waits[rank],
            splits: &passes.delays.splits[rank],
            costs: &passes.delays.costs[rank],
            segments: &segments_of[rank],
        };
        rank_metrics(&results, passes.tree.nodes.len())
    });
    let whole = Whole {
        definitions: &passes.definitions,
        tree: &passes.tree,
        events: passes.events,
        start: passes.timelines.iter().map(|t| t.start).min().unwrap_or(0),
        end: passes.timelines.iter().map(|t| t.end).max().unwrap_or(0),
        total_waiting: passes.forward.total_waiting(),
        critical_path: passes.critical_path.clone(),
        problems: passes.matching.problems.clone(),
    };
    summarise_ranks(whole, per_rank)
}

/// What the summary takes from the whole trace besides the per-rank metrics.
pub struct Whole<'a> {
    pub definitions: &'a Definitions,
    pub tree: &'a CallTree,
    pub events: usize,
    /// The first and the last event's time over all ranks.
    pub start: Ticks,
    pub end: Ticks,
    pub total_waiting: Ticks,
    pub critical_path: Vec<Segment>,
    /// What did not match.
    pub problems: Vec<String>,
}

/// The analysis from every rank's metrics (by rank): sums over ranks, critical-path imbalance,
/// imbalance costs. The one-process and the distributed analysis (on process 0) share it.
pub fn summarise_ranks(whole: Whole<'_>, mut per_rank: Vec<RankCells>) -> Analysis {
    let defs = whole.definitions;
    let ranks = per_rank.len();
    let (start, end) = (whole.start, whole.end);
    let callpath_count = whole.tree.nodes.len();
    let mut totals = vec![Metrics::default(); callpath_count];
    let mut max_time = vec![0.0f64; callpath_count];
    for cells in &per_rank {
        for (callpath, metrics) in cells {
            totals[*callpath as usize].add(metrics);
            max_time[*callpath as usize] = max_time[*callpath as usize].max(metrics.time);
        }
    }
    add_imbalance_costs(&mut per_rank, &totals, (end - start) as f64);
    let mut cells: Vec<Cell> = per_rank
        .into_iter()
        .enumerate()
        .flat_map(|(rank, cells)| {
            cells.into_iter().map(move |(callpath, metrics)| Cell {
                callpath,
                rank: rank as Rank,
                metrics,
            })
        })
        .collect();
    cells.sort_unstable_by_key(|c| (c.callpath, c.rank));
    let mut totals = vec![Metrics::default(); callpath_count];
    for cell in &cells {
        totals[cell.callpath as usize].add(&cell.metrics);
    }
    let regions = &defs.regions;
    let callpaths = totals
        .iter()
        .enumerate()
        .map(|(id, total)| {
            let average_time = total.time / ranks as f64;
            CallpathSummary {
                id: id as CallpathId,
                label: whole.tree.label(id as CallpathId, regions),
                total: *total,
                average_time,
                max_time: max_time[id],
                critical_imbalance: (total.critical - average_time).max(0.0),
            }
        })
        .collect();
    let mut problems = whole.problems;
    let critical_length: Ticks = whole.critical_path.iter().map(|s| s.end - s.start).sum();
    if critical_length != end - start {
        problems.push(format!(
            "the critical path ({critical_length} ticks) is not as long as the run ({} ticks): clocks may disagree",
            end - start
        ));
    }
    Analysis {
        ranks: ranks as u32,
        events: whole.events,
        ticks_per_second: defs.ticks_per_second,
        start,
        end,
        total_waiting: whole.total_waiting as f64,
        callpaths,
        cells,
        critical_path: whole.critical_path,
        partitions: defs.partitions.clone(),
        cartesian: defs
            .cartesian
            .as_ref()
            .map(|c| (c.dims.clone(), c.coords.clone())),
        problems,
    }
}

/// Imbalance costs (IPDPS 2012 Sec. II-D): each rank's headroom (wall time minus its own time)
/// goes to the critical-path call paths that take less time on the rank than on the critical
/// path, in proportion to the difference; intra-partition when the rank runs the call path at
/// all, inter-partition when it does not.
fn add_imbalance_costs(per_rank: &mut [RankCells], totals: &[Metrics], wall: f64) {
    let critical: Vec<(CallpathId, f64)> = totals
        .iter()
        .enumerate()
        .filter(|(_, m)| m.critical > 0.0)
        .map(|(id, m)| (id as CallpathId, m.critical))
        .collect();
    for cells in per_rank.iter_mut() {
        let busy: f64 = cells.iter().map(|(_, m)| m.time).sum();
        let headroom = (wall - busy).max(0.0);
        let find = |cells: &RankCells, callpath: CallpathId| {
            cells.binary_search_by_key(&callpath, |&(c, _)| c)
        };
        let excess: Vec<(CallpathId, f64, bool)> = critical
            .iter()
            .map(|&(callpath, on_path)| {
                let local = find(cells, callpath).map_or(0.0, |i| cells[i].1.time);
                (callpath, (on_path - local).max(0.0), local > 0.0)
            })
            .filter(|&(_, excess, _)| excess > 0.0)
            .collect();
        let sum: f64 = excess.iter().map(|&(_, e, _)| e).sum();
        if sum <= 0.0 || headroom <= 0.0 {
            continue;
        }
        for (callpath, excess, runs_here) in excess {
            let index = find(cells, callpath).unwrap_or_else(|i| {
                cells.insert(i, (callpath, Metrics::default()));
                i
            });
            let cell = &mut cells[index].1;
            let cost = headroom * excess / sum;
            if runs_here {
                cell.intra_partition_cost += cost;
            } else {
                cell.inter_partition_cost += cost;
            }
        }
    }
}
