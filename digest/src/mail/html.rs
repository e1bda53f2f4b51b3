//! The HTML part of the mail: the same content as the text part, in tables, critical values in
//! bold red, and two charts ([`super::chart`]) as `cid:` images: [`MPI_SHARE_CID`] under the
//! level-1 table, [`ROUTINES_CID`] under the routine table. It is at most 600 px wide (the
//! usual width of a mail's content): every table fits that; on a narrower screen (a phone) a
//! table scrolls in its own box ([`TABLE_BOX`]) and the page does not.

use super::chart::{MAX_ROUTINES, PART_COLOURS};
use super::content::{
    application_label, estimate, RoutineRow, TracedJob, UserDigest, FURTHER, MODEL_DOES_NOT_FIT,
    NOT_SPLIT,
};
use crate::html::escape;
use mpistat_record::units::{bytes, count, duration, rate};
use std::fmt::Write;

/// Content id of the MPI-share strip.
pub const MPI_SHARE_CID: &str = "mpi-share";
/// Content id of the per-routine bars.
pub const ROUTINES_CID: &str = "routines";

/// Opens the box every table is in: it scrolls sideways when the screen is narrower than the
/// table (closed with `</div>`).
pub const TABLE_BOX: &str = "<div style=\"overflow-x: auto; max-width: 100%\">";
/// A table's opening tag (small type, so that the widest fits 600 px).
const TABLE: &str =
    "<table cellpadding=\"3\" border=\"1\" style=\"border-collapse: collapse; font-size: 13px\">";
/// Images never wider than the screen.
const IMAGE_STYLE: &str = "max-width: 100%; height: auto";

/// The whole HTML mail.
pub fn render(d: &UserDigest) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>mpistat {week}</title></head>\n\
         <body style=\"font-family: sans-serif; margin: 8px\">\n<div style=\"max-width: 600px\">\n\
         <h2>Your MPI jobs in week {week}</h2>",
        week = escape(&d.week)
    );
    let _ = writeln!(
        out,
        "{TABLE_BOX}{TABLE}\n<tr><th></th><th>you</th><th>site: min / median / max</th></tr>"
    );
    for f in &d.figures {
        let value = if f.critical {
            format!("<b style=\"color:#c00\">{}</b>", escape(&f.value))
        } else {
            escape(&f.value)
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td align=\"right\">{value}</td><td>{}</td></tr>",
            escape(f.name),
            escape(&f.reference)
        );
    }
    let _ = writeln!(
        out,
        "</table></div>\n<p><img src=\"cid:{MPI_SHARE_CID}\" alt=\"your MPI share among all users\" style=\"{IMAGE_STYLE}\"><br>\
         <small>MPI share of wall time, 0 to 100 %: you (black) and every user of the week (grey).</small></p>"
    );
    if !d.notes.is_empty() {
        let _ = writeln!(out, "<p><small>{}</small></p>", escape(&d.notes.join(" ")));
    }
    if !d.recommendations.is_empty() {
        out.push_str("<ul>\n");
        for r in &d.recommendations {
            let _ = writeln!(out, "<li>{}</li>", escape(r));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h3>MPI routines</h3>\n");
    routine_table(&mut out, &d.routines);
    let shown: Vec<String> = d
        .routines
        .iter()
        .take(MAX_ROUTINES)
        .map(|r| escape(&r.name))
        .collect();
    let legend: Vec<String> = PART_COLOURS
        .iter()
        .map(|(name, [r, g, b])| {
            format!("<span style=\"color:#{r:02x}{g:02x}{b:02x}\">&#9632;</span> {name}")
        })
        .collect();
    let _ = writeln!(
        out,
        "<p><img src=\"cid:{ROUTINES_CID}\" alt=\"MPI time by routine\" style=\"{IMAGE_STYLE}\"><br>\
         <small>Time by routine, top to bottom: {}. {}</small></p>",
        shown.join(", "),
        legend.join(" ")
    );
    if !d.counters.is_empty() {
        let _ = writeln!(
            out,
            "<h3>Counters, your program vs MPI</h3>\n<p><small>All your jobs, summed over ranks; how counted: {}.</small></p>\n\
             {TABLE_BOX}{TABLE}\n\
             <tr><th>event</th><th>program</th><th>per rank and s</th><th>MPI</th><th>per rank and s</th></tr>",
            escape(&d.counters_mode)
        );
        for c in &d.counters {
            match &c.unavailable {
                Some(reason) => {
                    let _ = writeln!(
                        out,
                        "<tr><td>{}</td><td colspan=\"4\">unavailable: {}</td></tr>",
                        escape(&c.name),
                        escape(reason)
                    );
                }
                None if !c.split => {
                    let _ = writeln!(
                        out,
                        "<tr><td>{}</td><td align=\"right\">{}</td><td colspan=\"3\">in all, {NOT_SPLIT}</td></tr>",
                        escape(&c.name),
                        count(c.unsplit)
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "<tr><td>{}</td><td align=\"right\">{}</td><td align=\"right\">{}</td><td align=\"right\">{}</td><td align=\"right\">{}</td></tr>",
                        escape(&c.name),
                        count(c.app),
                        rate(c.app_per_s),
                        count(c.mpi),
                        rate(c.mpi_per_s)
                    );
                    if c.unsplit > 0 {
                        let _ = writeln!(
                            out,
                            "<tr><td></td><td align=\"right\">{}</td><td colspan=\"3\">more, {NOT_SPLIT}</td></tr>",
                            count(c.unsplit)
                        );
                    }
                }
            }
        }
        out.push_str("</table></div>\n");
    }
    let _ = writeln!(
        out,
        "<h3>Your biggest jobs</h3>\n{TABLE_BOX}{TABLE}\n<tr><th>job</th><th>ranks</th><th>CPU h</th><th>MPI %</th><th>load balance</th><th>imbalance %</th><th>application</th></tr>"
    );
    for j in &d.top_jobs {
        let imbalance = j
            .imbalance_percent
            .map_or("-".to_string(), |p| format!("{p:.1}"));
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td align=\"right\">{}</td><td align=\"right\">{:.2}</td><td align=\"right\">{:.1}</td><td align=\"right\">{:.2}</td><td align=\"right\">{imbalance}</td><td style=\"word-break: break-all\">{}</td></tr>",
            escape(&j.job_id),
            j.ranks,
            j.cpu_hours,
            j.mpi_percent,
            j.load_balance,
            escape(&format!(
                "{}{}",
                application_label(&j.app, j.interpreter.as_deref(), false),
                j.job_name
                    .as_ref()
                    .map_or(String::new(), |n| format!(" (job \"{n}\")"))
            ))
        );
    }
    out.push_str("</table></div>\n");
    if d.top_jobs.iter().any(|j| j.slurm) {
        let _ = writeln!(out, "<p>{}</p>", escape(super::content::SLURM_CLAIMED));
    }
    level6(&mut out, d);
    out.push_str("<h3>How to go further</h3>\n");
    for (title, text) in FURTHER {
        let _ = writeln!(out, "<p><b>{}.</b> {}</p>", escape(title), escape(text));
    }
    out.push_str("</div></body></html>\n");
    out
}

/// Level 6: the user's traced jobs and what their analyses found (nothing without traced jobs).
fn level6(out: &mut String, d: &UserDigest) {
    if d.traced.is_empty() {
        return;
    }
    out.push_str("<h3>Level 6: where your traced jobs waited</h3>\n");
    for t in &d.traced {
        traced_job(out, t);
    }
    let _ = writeln!(out, "<p>{}</p>", escape(super::content::OTF2_EXPORT));
}

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

/// The per-routine table (Rabenseifner, "Automatic MPI Counter Profiling", Fig. 4 and 12-13), then
/// the latency, transfer and synchronisation estimates in a table of their own (of the routines
/// that have them), so that each fits 600 px.
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
