//! The HTML part of the mail: the same content as the text part, in tables, critical values in
//! bold red, and two charts ([`super::chart`]) as `cid:` images: [`MPI_SHARE_CID`] under the
//! level-1 table, [`ROUTINES_CID`] under the routine table. It is at most 600 px wide (the
//! usual width of a mail's content): every table fits that; on a narrower screen (a phone) a
//! table scrolls in its own box ([`TABLE_BOX`]) and the page does not.

use super::chart::{MAX_ROUTINES, PART_COLOURS};
use mpistat_figures::sums::application_label;
use mpistat_record::units::{count, rate};
use mpistat_render::html::{routine_table, traced_job, TABLE, TABLE_BOX};
use mpistat_render::user::{UserDigest, FURTHER, NOT_SPLIT};
use mpistat_site::html::escape;
use std::fmt::Write;

/// Content id of the MPI-share strip.
pub const MPI_SHARE_CID: &str = "mpi-share";
/// Content id of the per-routine bars.
pub const ROUTINES_CID: &str = "routines";

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
        let _ = writeln!(
            out,
            "<p>{}</p>",
            escape(mpistat_render::user::SLURM_CLAIMED)
        );
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
    let _ = writeln!(out, "<p>{}</p>", escape(mpistat_render::user::OTF2_EXPORT));
}
