//! HTML pieces the weekly mail and the admin pages both show: the per-routine table and a traced
//! job's analysis, in the boxed tables of the mail's layout (at most 600 px wide).

use crate::user::{estimate, MODEL_DOES_NOT_FIT};
use mpistat_figures::sums::RoutineRow;
use mpistat_figures::traced::TracedJob;
use mpistat_record::units::{bytes, count, duration};
use mpistat_site::html::escape;
use std::fmt::Write;

/// Opens the box every table is in: it scrolls sideways when the screen is narrower than the
/// table (closed with `</div>`).
pub const TABLE_BOX: &str = "<div style=\"overflow-x: auto; max-width: 100%\">";
/// A table's opening tag (small type, so that the widest fits 600 px).
pub const TABLE: &str =
    "<table cellpadding=\"3\" border=\"1\" style=\"border-collapse: collapse; font-size: 13px\">";

/// What the analysis of one traced job found, and where the full report is (the mail's level
/// 6 and the job's web page).
pub fn traced_job(out: &mut String, t: &TracedJob) {
    let _ = writeln!(
        out,
        "<p>Job <b>{}</b> ({}) was traced.</p>",
        escape(&t.job_id),
        escape(&t.app)
    );
    match &t.summary {
        Ok(s) => {
            let _ = writeln!(
                out,
                "<p>Ranks waited {:.1} % of the time; the critical path's imbalance is {:.1} % of the run ({:.3} s).</p>\n<ol>",
                s.waiting_percent, s.critical_imbalance_percent, s.wall_s
            );
            for cause in &s.causes {
                let _ = writeln!(out, "<li>{}</li>", escape(cause));
            }
            out.push_str("</ol>\n");
            for note in &s.notes {
                let _ = writeln!(out, "<p><small>Note: {}</small></p>", escape(note));
            }
        }
        Err(e) => {
            let _ = writeln!(out, "<p>Its analysis failed: {}</p>", escape(e));
        }
    }
    let _ = writeln!(
        out,
        "<p>Full report: <code style=\"word-break: break-all\">mpistat analyze {}</code></p>",
        escape(&t.dir)
    );
}

/// The per-routine table (Fig. 4 and 12-13 of Rabenseifner's "Automatic MPI Counter
/// Profiling"), then the latency, transfer and synchronisation estimates in a table of their own
/// (of the routines that have them), so that each fits 600 px.
pub fn routine_table(out: &mut String, routines: &[RoutineRow]) {
    let _ = writeln!(out, "{TABLE_BOX}{TABLE}");
    out.push_str("<tr><th>routine</th><th>calls</th><th>/rank</th><th>time</th><th>/call</th><th>count</th><th>bytes</th><th>/call</th><th>% MPI</th></tr>\n");
    for r in routines {
        let per_call = |v: u64| v as f64 / r.calls.max(1) as f64;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td align=\"right\">{}</td><td align=\"right\">{:.1}</td><td align=\"right\">{}</td><td align=\"right\">{}</td><td align=\"right\">{}</td><td align=\"right\">{}</td><td align=\"right\">{}</td><td align=\"right\">{:.1}</td></tr>",
            escape(&r.name),
            count(r.calls),
            r.calls_per_rank,
            duration(r.time_ns),
            duration(per_call(r.time_ns).round() as u64),
            count(r.count),
            bytes(r.bytes as f64),
            bytes(per_call(r.bytes)),
            100.0 * r.share,
        );
    }
    out.push_str("</table></div>\n");
    let estimated: Vec<&RoutineRow> = routines.iter().filter(|r| r.cost.is_some()).collect();
    if estimated.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<p>Where the time goes (estimates from the site's benchmarks):</p>\n{TABLE_BOX}{TABLE}"
    );
    out.push_str("<tr><th>routine</th><th>latency &micro;s</th><th>MB/s</th><th>est. latency</th><th>est. transfer</th><th>est. sync</th></tr>\n");
    for r in &estimated {
        let cost = r.cost.expect("filtered");
        let _ = writeln!(
            out,
            "<tr><td>{}{}</td><td align=\"right\">{:.1}</td><td align=\"right\">{:.0}</td><td align=\"right\">{}</td><td align=\"right\">{}</td><td align=\"right\">{}</td></tr>",
            escape(&r.name),
            if r.fits { "" } else { " *" },
            cost.latency_us,
            cost.bandwidth_mb_s,
            estimate(r.latency_ns),
            estimate(r.transfer_ns),
            estimate(r.sync_ns),
        );
    }
    out.push_str("</table></div>\n");
    if estimated.iter().any(|r| !r.fits) {
        let _ = writeln!(
            out,
            "<p><small>* {}</small></p>",
            escape(MODEL_DOES_NOT_FIT)
        );
    }
}
