//! The analysis's reports: the readable text, a self-contained HTML page, JSON, and the few facts
//! the weekly mail tells ([`Summary`]). Rendering is pure; `mpistat analyze` ([`crate::run`])
//! and `mpistat-analyze` (the analysis as an MPI program) print the same bytes from it.
//!
//! The report leads with the top root causes in plain language (call paths whose delays cost the
//! most waiting time), then wait states by pattern and call path, the critical-path profile with
//! its imbalance, imbalance costs, and a per-rank heat map of waiting time when the trace has a
//! Cartesian topology.

use mpistat_analysis::analysis::CallpathSummary;
use mpistat_analysis::patterns::Pattern;
use mpistat_analysis::Analysis;
use mpistat_site::html::escape;
use std::fmt::Write as _;

/// The JSON report (`--format json`); `mpistat-analyze` (the analysis as an MPI program) prints
/// it too, as it prints [`text`] and [`html`].
pub fn json(analysis: &Analysis) -> serde_json::Result<String> {
    serde_json::to_string_pretty(analysis).map(|json| json + "\n")
}

fn seconds(analysis: &Analysis, ticks: f64) -> f64 {
    ticks / analysis.ticks_per_second as f64
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// Call paths by a metric, largest first, zero left out.
fn ranked(
    analysis: &Analysis,
    metric: impl Fn(&CallpathSummary) -> f64,
) -> Vec<(&CallpathSummary, f64)> {
    let mut ranked: Vec<_> = analysis
        .callpaths
        .iter()
        .map(|c| (c, metric(c)))
        .filter(|&(_, v)| v > 1e-12)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.label.cmp(&b.0.label)));
    ranked
}

/// The rank with the largest value of a metric for a call path.
fn worst_rank(
    analysis: &Analysis,
    callpath: u32,
    metric: impl Fn(&mpistat_analysis::analysis::Metrics) -> f64,
) -> Option<(u32, f64)> {
    analysis
        .cells
        .iter()
        .filter(|c| c.callpath == callpath)
        .map(|c| (c.rank, metric(&c.metrics)))
        .filter(|&(_, v)| v > 1e-12)
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// The few facts of an analysis that the weekly mail tells: they travel in the analysis record.
pub use mpistat_record::analysis::Summary;

/// The root cause at `callpath` in plain language.
fn cause_sentence(analysis: &Analysis, callpath: &CallpathSummary, cost: f64) -> String {
    let secs = |t: f64| seconds(analysis, t);
    let worst = worst_rank(analysis, callpath.id, |m| {
        m.delay_short_term + m.delay_long_term
    });
    let place = worst.map_or(String::new(), |(rank, _)| format!(", most on rank {rank}"));
    format!(
        "{}{place}: made other ranks wait {:.6} s ({:.1} % of all waiting), {:.6} s directly and {:.6} s by waiting that propagated.",
        callpath.label,
        secs(cost),
        percent(cost, analysis.total_waiting),
        secs(callpath.total.delay_short_term),
        secs(callpath.total.delay_long_term)
    )
}

/// The call paths whose delays cost the most waiting, largest first.
fn root_causes(analysis: &Analysis) -> Vec<(&CallpathSummary, f64)> {
    ranked(analysis, |c| {
        c.total.delay_short_term + c.total.delay_long_term
    })
}

/// The mail's summary of an analysis (top three causes).
pub fn summary(analysis: &Analysis, problems: &[String]) -> Summary {
    let wall = analysis.wall() as f64;
    let imbalance: f64 = analysis
        .callpaths
        .iter()
        .map(|c| c.critical_imbalance)
        .sum();
    Summary {
        wall_s: seconds(analysis, wall),
        waiting_percent: percent(analysis.total_waiting, wall * f64::from(analysis.ranks)),
        critical_imbalance_percent: percent(imbalance, wall),
        causes: root_causes(analysis)
            .into_iter()
            .take(3)
            .map(|(c, cost)| cause_sentence(analysis, c, cost))
            .collect(),
        notes: problems.iter().chain(&analysis.problems).cloned().collect(),
    }
}

/// The readable report.
pub fn text(analysis: &Analysis) -> String {
    let mut s = String::new();
    let wall = analysis.wall() as f64;
    let allocation = wall * f64::from(analysis.ranks);
    let secs = |t: f64| seconds(analysis, t);
    let _ = writeln!(
        s,
        "Trace analysis: {} ranks, {} events",
        analysis.ranks, analysis.events
    );
    let _ = writeln!(s, "  wall time          {:>12.6} s", secs(wall));
    let _ = writeln!(
        s,
        "  waiting time       {:>12.6} s  ({:.1} % of the allocation, ranks x wall time)",
        secs(analysis.total_waiting),
        percent(analysis.total_waiting, allocation)
    );
    let critical: f64 = analysis
        .critical_path
        .iter()
        .map(|s| (s.end - s.start) as f64)
        .sum();
    let _ = writeln!(
        s,
        "  critical path      {:>12.6} s  (in {} stretches over ranks)",
        secs(critical),
        analysis.critical_path.len()
    );

    let _ = writeln!(s, "\nTop root causes of waiting (delay costs):");
    let causes = root_causes(analysis);
    if causes.is_empty() {
        let _ = writeln!(s, "  none: no rank waited for another.");
    }
    for (index, (callpath, cost)) in causes.iter().take(5).enumerate() {
        let _ = writeln!(
            s,
            "  {}. {}",
            index + 1,
            cause_sentence(analysis, callpath, *cost)
        );
    }

    let _ = writeln!(s, "\nWait states by pattern and call path:");
    let _ = writeln!(
        s,
        "  {:<16} {:>12} {:>12} {:>12} {:>12}  {:<10} call path",
        "pattern", "waiting s", "direct s", "propagat. s", "terminal s", "worst rank"
    );
    let mut any = false;
    for (index, pattern) in Pattern::ALL.iter().enumerate() {
        for (callpath, waiting) in ranked(analysis, |c| c.total.waiting[index]) {
            any = true;
            let worst = worst_rank(analysis, callpath.id, |m| m.waiting[index])
                .map_or("-".to_string(), |(r, _)| r.to_string());
            let t = &callpath.total;
            let _ = writeln!(
                s,
                "  {:<16} {:>12.6} {:>12.6} {:>12.6} {:>12.6}  {:<10} {}",
                pattern.name(),
                secs(waiting),
                secs(t.direct_waiting * waiting / t.total_waiting()),
                secs(t.propagating_waiting * waiting / t.total_waiting()),
                secs(t.terminal_waiting * waiting / t.total_waiting()),
                worst,
                callpath.label
            );
        }
    }
    if !any {
        let _ = writeln!(s, "  none");
    }

    let _ = writeln!(
        s,
        "\nCritical path by call path (imbalance = time on the path - average time per rank):"
    );
    let _ = writeln!(
        s,
        "  {:>12} {:>12} {:>12} {:>7}  call path",
        "on path s", "average s", "imbalance s", "imb. %"
    );
    for (callpath, on_path) in ranked(analysis, |c| c.total.critical) {
        let _ = writeln!(
            s,
            "  {:>12.6} {:>12.6} {:>12.6} {:>7.1}  {}",
            secs(on_path),
            secs(callpath.average_time),
            secs(callpath.critical_imbalance),
            percent(callpath.critical_imbalance, callpath.average_time),
            callpath.label
        );
    }

    let costs = ranked(analysis, |c| {
        c.total.intra_partition_cost + c.total.inter_partition_cost
    });
    if !costs.is_empty() {
        let _ = writeln!(
            s,
            "\nImbalance costs (allocation time lost waiting for critical activities):"
        );
        let _ = writeln!(
            s,
            "  {:>13} {:>13}  call path",
            "intra-part. s", "inter-part. s"
        );
        for (callpath, _) in costs {
            let _ = writeln!(
                s,
                "  {:>13.6} {:>13.6}  {}",
                secs(callpath.total.intra_partition_cost),
                secs(callpath.total.inter_partition_cost),
                callpath.label
            );
        }
    }

    if let Some(map) = heat_map(analysis) {
        let _ = writeln!(
            s,
            "\nWaiting time per rank on the process grid (' ' none ... '@' most):"
        );
        s += &map;
    }
    if !analysis.problems.is_empty() {
        let _ = writeln!(s, "\nProblems:");
        for problem in &analysis.problems {
            let _ = writeln!(s, "  {problem}");
        }
    }
    s
}

/// Waiting time per rank of a 1-D or 2-D Cartesian topology as a character grid.
fn waiting_grid(analysis: &Analysis) -> Option<Vec<Vec<Option<f64>>>> {
    let (dims, coords) = analysis.cartesian.as_ref()?;
    let (rows, columns) = match dims.as_slice() {
        [n] => (1, *n as usize),
        [r, c] => (*r as usize, *c as usize),
        _ => return None,
    };
    let mut waiting = vec![0.0; analysis.ranks as usize];
    for cell in &analysis.cells {
        waiting[cell.rank as usize] += cell.metrics.total_waiting();
    }
    let mut grid = vec![vec![None; columns]; rows];
    for (rank, coord) in coords.iter().enumerate().take(waiting.len()) {
        let (row, column) = match coord.as_slice() {
            [c] => (0, *c as usize),
            [r, c] => (*r as usize, *c as usize),
            _ => continue,
        };
        if let Some(slot) = grid.get_mut(row).and_then(|r| r.get_mut(column)) {
            *slot = Some(waiting[rank]);
        }
    }
    Some(grid)
}

fn heat_map(analysis: &Analysis) -> Option<String> {
    const SHADES: &[u8] = b" .:-=+*#%@";
    let grid = waiting_grid(analysis)?;
    let max = grid.iter().flatten().flatten().copied().fold(0.0, f64::max);
    let mut s = String::new();
    for row in grid {
        s += "  |";
        for cell in row {
            s.push(match cell {
                None => '?',
                Some(_) if max <= 0.0 => SHADES[0] as char,
                Some(w) => SHADES[((w / max) * (SHADES.len() - 1) as f64).round() as usize] as char,
            });
        }
        s += "|\n";
    }
    Some(s)
}

/// A self-contained HTML page: the report, and the heat map as a coloured table.
pub fn html(analysis: &Analysis) -> String {
    let mut s = String::from("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>mpistat trace analysis</title>\n<style>body{font-family:sans-serif} pre{font-size:13px} td{width:18px;height:18px}</style></head><body>\n<h1>mpistat trace analysis</h1>\n");
    if let Some(grid) = waiting_grid(analysis) {
        let max = grid.iter().flatten().flatten().copied().fold(0.0, f64::max);
        s += "<h2>Waiting time per rank</h2>\n<table>\n";
        for row in grid {
            s += "<tr>";
            for cell in row {
                let share = cell.map_or(0.0, |w| if max > 0.0 { w / max } else { 0.0 });
                let light = 100.0 - 50.0 * share;
                let _ = write!(
                    s,
                    "<td style=\"background:hsl(0,80%,{light:.0}%)\" title=\"{:.6} s\"></td>",
                    seconds(analysis, cell.unwrap_or(0.0))
                );
            }
            s += "</tr>\n";
        }
        s += "</table>\n";
    }
    let _ = write!(
        s,
        "<pre>{}</pre>\n</body></html>\n",
        escape(&text(analysis))
    );
    s
}
