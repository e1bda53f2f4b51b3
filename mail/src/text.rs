//! The plain-text part of the mail: at most 80 columns, reads well in mutt. Critical values are
//! marked with `!`.

use mpistat_figures::sums::application_label;
use mpistat_record::units::{bytes, count, duration, rate};
use mpistat_render::user::{estimate, UserDigest, FURTHER, NOT_SPLIT, OTF2_EXPORT};
use std::fmt::Write;

/// Width paragraphs are wrapped to.
const WIDTH: usize = 78;

/// `text` wrapped at [`WIDTH`], every line starting with `indent`.
pub fn wrap(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(indent);
    for word in text.split_whitespace() {
        if line.len() > indent.len() && line.len() + 1 + word.len() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from(indent);
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// The whole plain-text mail.
pub fn render(d: &UserDigest) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "mpistat: your MPI jobs in week {}", d.week);
    let _ = writeln!(out);
    let _ = writeln!(out, "  {:<16}{:>18}   site: min / median / max", "", "you");
    for f in &d.figures {
        let mark = if f.critical { "!" } else { " " };
        let _ = writeln!(
            out,
            "{mark} {:<16}{:>18}   {}",
            f.name, f.value, f.reference
        );
    }
    if !d.notes.is_empty() {
        out.push_str(&wrap(&format!("({})", d.notes.join(" ")), "  "));
    }
    if !d.recommendations.is_empty() {
        let _ = writeln!(out);
        for r in &d.recommendations {
            let wrapped = wrap(r, "  ");
            out.push('*');
            out.push_str(&wrapped[1..]);
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "MPI routines (all your jobs, summed over ranks)");
    let _ = writeln!(
        out,
        "{:<16}{:>8}{:>8}{:>9}{:>8}{:>8}{:>8}{:>8}{:>5}",
        "routine", "calls", "/rank", "time", "/call", "count", "bytes", "/call", "%MPI"
    );
    for r in &d.routines {
        let per_call = |v: u64| v as f64 / r.calls.max(1) as f64;
        let _ = writeln!(
            out,
            "{:<16}{:>8}{:>8.1}{:>9}{:>8}{:>8}{:>8}{:>8}{:>5.1}",
            r.name,
            count(r.calls),
            r.calls_per_rank,
            duration(r.time_ns),
            duration(per_call(r.time_ns).round() as u64),
            count(r.count),
            bytes(r.bytes as f64),
            bytes(per_call(r.bytes)),
            100.0 * r.share
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Where the time goes (estimates from the site's benchmarks)"
    );
    let _ = writeln!(
        out,
        "{:<16}{:>9}{:>10}{:>10}{:>10}{:>10}",
        "routine", "lat us", "MB/s", "latency", "transfer", "sync"
    );
    for r in d.routines.iter().filter(|r| r.cost.is_some()) {
        let cost = r.cost.expect("filtered");
        let _ = writeln!(
            out,
            "{:<16}{:>9.1}{:>10.0}{:>10}{:>10}{:>10}{}",
            r.name,
            cost.latency_us,
            cost.bandwidth_mb_s,
            estimate(r.latency_ns),
            estimate(r.transfer_ns),
            estimate(r.sync_ns),
            if r.fits { "" } else { " *" }
        );
    }
    if d.routines.iter().any(|r| !r.fits) {
        out.push_str(&wrap(
            &format!("* {}", mpistat_render::user::MODEL_DOES_NOT_FIT),
            "  ",
        ));
    }
    if !d.counters.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Counters, your program vs MPI (all your jobs, summed over ranks)"
        );
        let _ = writeln!(
            out,
            "{:<18}{:>12}{:>10}{:>12}{:>10}",
            "event", "program", "/rank/s", "MPI", "/rank/s"
        );
        for c in &d.counters {
            match &c.unavailable {
                Some(reason) => {
                    // The reason wrapped under itself, the event's name in front.
                    let column = " ".repeat(18);
                    let reason = wrap(&format!("unavailable: {reason}"), &column);
                    let _ = write!(out, "{:<17} {}", c.name, &reason[column.len()..]);
                }
                None if !c.split => {
                    let _ = writeln!(
                        out,
                        "{:<18}{:>12}  in all, {NOT_SPLIT}",
                        c.name,
                        count(c.unsplit)
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "{:<18}{:>12}{:>10}{:>12}{:>10}",
                        c.name,
                        count(c.app),
                        rate(c.app_per_s),
                        count(c.mpi),
                        rate(c.mpi_per_s)
                    );
                    if c.unsplit > 0 {
                        let _ =
                            writeln!(out, "{:<18}{:>12}  more, {NOT_SPLIT}", "", count(c.unsplit));
                    }
                }
            }
        }
        let _ = writeln!(out, "(how counted: {})", d.counters_mode);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Your biggest jobs");
    let _ = writeln!(
        out,
        "{:<12}{:>6}{:>9}{:>7}{:>6}{:>7}  application",
        "job", "ranks", "CPU h", "MPI %", "LB", "imb %"
    );
    for j in &d.top_jobs {
        let app = application_label(&j.app, j.interpreter.as_deref(), true);
        let imbalance = j
            .imbalance_percent
            .map_or("-".to_string(), |p| format!("{p:.1}"));
        let name = j
            .job_name
            .as_ref()
            .map_or(String::new(), |n| format!(" (job \"{n}\")"));
        let _ = writeln!(
            out,
            "{:<12}{:>6}{:>9.2}{:>7.1}{:>6.2}{imbalance:>7}  {}{name}",
            j.job_id, j.ranks, j.cpu_hours, j.mpi_percent, j.load_balance, app
        );
    }
    if d.top_jobs.iter().any(|j| j.slurm) {
        let _ = writeln!(out, "({})", mpistat_render::user::SLURM_CLAIMED);
    }
    if !d.traced.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Level 6: where your traced jobs waited");
        for t in &d.traced {
            let app = application_label(&t.app, None, true);
            let _ = writeln!(out);
            let _ = writeln!(out, "Job {} ({app}) was traced.", t.job_id);
            match &t.summary {
                Ok(s) => {
                    out.push_str(&wrap(
                        &format!(
                            "Ranks waited {:.1} % of the time; the critical path's imbalance is {:.1} % of the run ({:.3} s).",
                            s.waiting_percent, s.critical_imbalance_percent, s.wall_s
                        ),
                        "",
                    ));
                    for (i, cause) in s.causes.iter().enumerate() {
                        out.push_str(&wrap(&format!("{}. {cause}", i + 1), "   "));
                    }
                    for note in &s.notes {
                        out.push_str(&wrap(&format!("Note: {note}"), ""));
                    }
                }
                Err(e) => out.push_str(&wrap(&format!("Its analysis failed: {e}"), "")),
            }
            // Unwrapped: a path must stay in one piece to be copied.
            let _ = writeln!(out, "Full report: mpistat analyze {}", t.dir);
        }
        let _ = writeln!(out);
        out.push_str(&wrap(OTF2_EXPORT, ""));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "How to go further");
    for (title, text) in FURTHER {
        let _ = writeln!(out);
        out.push_str(&wrap(&format!("{title}: {text}"), ""));
    }
    out
}
