//! The admin pages as HTML strings, shared by the static site (`mpistat site-report`) and the
//! server (`mpistat serve`). Every page is self-contained (inline CSS, inline SVG, no scripts)
//! and links only relatively, so that the same pages work from a directory and from the server:
//! `index.html`, `charts.html`, `tables.html`, `critical.html`, `users.html`,
//! `users/<slug>.html` and `jobs/<key>.html` (and, live only, `search.html`).
//!
//! Long lists (users, critical jobs, a user's jobs) show [`PAGE_ROWS`] rows: the server pages
//! and sorts them by query parameters (`sort=`, `from=`, see [`Listing`]); the static site
//! holds the first page of each, and job pages only for the jobs it lists (critical and traced
//! jobs): other jobs link to the live server (`[site_report] live_url`) or not at all.

use super::listing::{Listing, CRITICAL_SORTS, JOB_SORTS, PAGE_ROWS, USER_SORTS};
use super::search::Found;
use super::summary::{CriticalJob, SlurmGroup, Summary};
use super::svg::{self, series, Bar, Point};
use mpistat_figures::classes::{add_histogram, imbalance_percent};
use mpistat_figures::sums::{application_label, percent, RoutineRow, NS_PER_HOUR};
use mpistat_figures::traced::TracedJob;
use mpistat_record::units::{bytes, count, duration, utc};
use mpistat_record::JobRecord;
use mpistat_render::html::routine_table;
use mpistat_render::user::UserDigest;
use mpistat_site::html::escape;
use mpistat_site::SiteConfig;
use std::collections::HashSet;
use std::fmt::Write;

/// Routines drawn in the routine chart (the tables list them all); the rest are "other".
const CHART_ROUTINES: usize = 20;

/// Users drawn in the users' charts (the biggest; the users page lists them all).
const CHART_USERS: usize = 100;

/// What a static site holds of the jobs: pages of these (by key); other jobs link to
/// `live_url` (the server's base URL, ending in `/`) or, when empty, not at all.
#[derive(Debug, Clone, Default)]
pub struct StaticJobs {
    pub keys: HashSet<String>,
    pub live_url: String,
}

const STYLE: &str = "body{font-family:sans-serif;margin:0 1.5em 2em;color:#222;max-width:70em}\
nav{background:#234;padding:.5em 1em;margin:0 -1.5em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}\
table{border-collapse:collapse;margin:.5em 0}th,td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}\
td.n{text-align:right}.crit{color:#c00;font-weight:bold}svg.chart{display:block;margin:1em 0}\
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:12px}h1{font-size:1.5em}";

/// Where a page sits: `root` leads back to the site's top directory (`""` or `"../"`), `query`
/// is appended to links of interval pages (`mpistat serve` names the interval there).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub root: &'a str,
    pub query: &'a str,
    /// `None`: live (every job has a page; lists are paged); else the static site's jobs.
    pub site: Option<&'a StaticJobs>,
}

impl Place<'_> {
    fn link(&self, page: &str) -> String {
        format!("{}{page}{}", self.root, self.query)
    }

    fn user(&self, user: &str) -> String {
        format!("{}users/{}.html{}", self.root, user_slug(user), self.query)
    }

    /// The link to a job's page, if there is one. A live page's link names the job's end time
    /// (`?end=`), which leads `mpistat serve` to its row by the unique index of end and key.
    fn job(&self, job: &JobRecord) -> Option<String> {
        let key = job.key();
        let end = job.end_unix_ms;
        match self.site {
            None => Some(format!("{}jobs/{key}.html?end={end}", self.root)),
            Some(site) if site.keys.contains(&key) => Some(format!("{}jobs/{key}.html", self.root)),
            Some(site) if !site.live_url.is_empty() => {
                Some(format!("{}jobs/{key}.html?end={end}", site.live_url))
            }
            Some(_) => None,
        }
    }

    /// A page of a list (`page` at this place) sorted by `sort` from row `from` (live only).
    fn listed(&self, page: &str, sort: &str, from: usize) -> String {
        let joint = if self.query.is_empty() { '?' } else { '&' };
        let mut link = format!("{}{page}{}{joint}sort={sort}", self.root, self.query);
        if from > 0 {
            let _ = write!(link, "&from={from}");
        }
        link
    }
}

/// The header row of a sortable list: each column's label, with its sort key if it sorts
/// (live only, and not for a list that does not sort, `page` empty: a link to the list sorted by
/// it; the current one is marked).
fn sortable_header(
    out: &mut String,
    place: Place,
    page: &str,
    sort: &str,
    columns: &[(&str, Option<&str>)],
) {
    out.push_str("<tr>");
    for (label, key) in columns {
        match key.filter(|_| place.site.is_none() && !page.is_empty()) {
            Some(key) if key == sort => {
                let _ = write!(out, "<th>{label} ▾</th>");
            }
            Some(key) => {
                let _ = write!(
                    out,
                    "<th><a href=\"{}\">{label}</a></th>",
                    escape(&place.listed(page, key, 0))
                );
            }
            None => {
                let _ = write!(out, "<th>{label}</th>");
            }
        }
    }
    out.push_str("</tr>\n");
}

/// Where a page of a list is: rows shown of how many, and links to the pages before and after
/// (live), or how to see the rest (static site). Nothing when the list fits on one page.
fn pager(out: &mut String, place: Place, page: &str, sort: &str, from: usize, total: usize) {
    if total <= PAGE_ROWS && from == 0 {
        return;
    }
    let to = (from + PAGE_ROWS).min(total);
    let _ = write!(out, "<p>Rows {}-{to} of {total}.", (from + 1).min(total));
    match place.site {
        None => {
            if from > 0 {
                let _ = write!(
                    out,
                    " <a href=\"{}\">previous</a>",
                    escape(&place.listed(page, sort, from.saturating_sub(PAGE_ROWS)))
                );
            }
            if to < total {
                let _ = write!(
                    out,
                    " <a href=\"{}\">next</a>",
                    escape(&place.listed(page, sort, to))
                );
            }
        }
        Some(_) => out.push_str(
            " The whole list, sortable, is on the live pages (<code>mpistat serve</code>).",
        ),
    }
    out.push_str("</p>\n");
}

/// The file name (without `.html`) of a user's page: the login name when it is plain
/// (`[A-Za-z0-9_-]`, as login names are, and not starting with `-`, as no login name does), else
/// `-` and the name's bytes in hex, so that no name can leave the directory or need quoting in a
/// link. The two forms cannot meet (only the second starts with `-`): a user whose plain name
/// spelled another's hex form would otherwise have been shown that user's page (`serve` lets a
/// user see the page whose slug is their own).
pub fn user_slug(user: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if !user.is_empty() && !user.starts_with('-') && user.bytes().all(plain) {
        user.to_string()
    } else {
        let hex: String = user.bytes().map(|b| format!("{b:02x}")).collect();
        format!("-{hex}")
    }
}

fn page(place: Place, title: &str, body: &str) -> String {
    let nav: String = [
        ("index.html", "Overview"),
        ("charts.html", "Charts"),
        ("tables.html", "Tables"),
        ("critical.html", "Critical jobs"),
        ("users.html", "Users"),
    ]
    .iter()
    .map(|(file, name)| format!("<a href=\"{}\">{name}</a>", place.link(file)))
    .collect::<String>()
        + &search_form(place);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>mpistat: {t}</title>\
         <style>{STYLE}</style></head>\n<body>\n<nav>{nav}</nav>\n<h1>{t}</h1>\n{body}</body></html>\n",
        t = escape(title)
    )
}

/// The search box of the live pages (users, job ids, applications; see `mpistat serve`).
fn search_form(place: Place) -> String {
    if place.site.is_some() {
        return String::new();
    }
    let period = place
        .query
        .strip_prefix("?period=")
        .map(|p| {
            format!(
                "<input type=\"hidden\" name=\"period\" value=\"{}\">",
                escape(p)
            )
        })
        .unwrap_or_default();
    format!(
        "<form action=\"{}search.html\" style=\"display:inline\">{period}\
         <input name=\"q\" placeholder=\"user, job id or application\" size=\"28\"></form>",
        place.root
    )
}

fn hours(ns: f64) -> String {
    format!("{:.1} h", ns / NS_PER_HOUR)
}

fn row(out: &mut String, name: &str, value: &str, note: &str) {
    let _ = writeln!(
        out,
        "<tr><th>{}</th><td class=\"n\">{}</td><td>{}</td></tr>",
        escape(name),
        escape(value),
        escape(note)
    );
}

/// Rabenseifner, "Automatic MPI Counter Profiling", Fig. 5: the interval's figures, and the trend
/// over the intervals before it.
pub fn overview(s: &Summary, config: &SiteConfig, place: Place) -> String {
    let mut b = String::new();
    let p = &s.period;
    let analysed = s.total.wall_ns as f64;
    let of_analysed = |ns: f64| format!("{:.1} % of analysed", percent(ns, analysed));
    b.push_str("<table class=\"overview\">\n");
    row(
        &mut b,
        "interval",
        &format!("{} to {}", utc(p.from_ms), utc(p.to_ms)),
        &format!("{:.1} days", p.hours() / 24.0),
    );
    row(
        &mut b,
        "capacity",
        &format!("{:.0} h", s.capacity_hours),
        &format!("{} cores", config.digest.capacity_cores),
    );
    row(
        &mut b,
        "analysed CPU time",
        &hours(analysed),
        &format!(
            "{:.1} % of capacity",
            percent(s.cpu_hours(), s.capacity_hours)
        ),
    );
    row(
        &mut b,
        "MPI time",
        &hours(s.total.mpi_ns as f64),
        &of_analysed(s.total.mpi_ns as f64),
    );
    row(
        &mut b,
        "– latency (estimated)",
        &hours(s.latency_ns),
        &of_analysed(s.latency_ns),
    );
    row(
        &mut b,
        "– transfer (estimated)",
        &hours(s.transfer_ns),
        &of_analysed(s.transfer_ns),
    );
    row(
        &mut b,
        "– synchronisation (estimated)",
        &hours(s.sync_ns),
        &of_analysed(s.sync_ns),
    );
    row(
        &mut b,
        "– waiting in global collectives (measured)",
        &hours(s.measured_sync_ns as f64),
        &format!(
            "{} in {} jobs with imbalance estimates",
            of_analysed(s.measured_sync_ns as f64),
            s.jobs_with_imbalance
        ),
    );
    row(&mut b, "analysed jobs", &s.total.jobs.to_string(), "");
    row(
        &mut b,
        "ranks per job",
        &format!("{:.1}", s.ranks_mean),
        &format!("{:.1} weighted by CPU time", s.ranks_cpu_weighted),
    );
    row(
        &mut b,
        "MPI routines used",
        &s.routines_used(None).to_string(),
        "",
    );
    row(&mut b, "users", &s.users.len().to_string(), "");
    for n in &config.site_report.top_users {
        row(
            &mut b,
            &format!("top {n} users"),
            &format!("{:.1} %", s.top_users_percent(*n)),
            "of the analysed CPU time",
        );
    }
    for ((binding, t), (ranks, weighted)) in s.by_language.iter().zip(s.language_ranks) {
        let name = binding.as_str();
        row(
            &mut b,
            &format!("{name} jobs"),
            &t.jobs.to_string(),
            &format!(
                "{:.1} % of jobs, {:.1} % of analysed time, {:.1} ranks per job ({:.1} weighted), {} routines used",
                percent(t.jobs as f64, s.total.jobs as f64),
                percent(t.wall_ns as f64, analysed),
                ranks,
                weighted,
                s.routines_used(Some(*binding))
            ),
        );
    }
    b.push_str("</table>\n<h2>Trend</h2>\n");
    if let Some(((_, now), before)) = s.trend.split_last().filter(|(_, b)| !b.is_empty()) {
        let n = before.len() as f64;
        let cpu_before = before.iter().map(|(_, t)| t.wall_ns as f64).sum::<f64>() / n;
        let mpi_before = before
            .iter()
            .map(|(_, t)| percent(t.mpi_ns as f64, t.wall_ns as f64))
            .sum::<f64>()
            / n;
        let _ = writeln!(
            b,
            "<p>Against the mean of the {} intervals before: CPU time {}, MPI share {:+.1} points.</p>",
            before.len(),
            if cpu_before > 0.0 {
                format!("{:+.1} %", percent(now.wall_ns as f64 - cpu_before, cpu_before))
            } else {
                "new".to_string()
            },
            percent(now.mpi_ns as f64, now.wall_ns as f64) - mpi_before
        );
    }
    b.push_str("<table>\n<tr><th>interval</th><th>jobs</th><th>users</th><th>CPU time</th><th>MPI %</th></tr>\n");
    for (label, t) in &s.trend {
        let _ = writeln!(
            b,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td></tr>",
            escape(label),
            t.jobs,
            t.users,
            hours(t.wall_ns as f64),
            percent(t.mpi_ns as f64, t.wall_ns as f64)
        );
    }
    b.push_str("</table>\n");
    let labels: Vec<String> = s.trend.iter().map(|(l, _)| l.clone()).collect();
    let cpu: Vec<Vec<f64>> = s
        .trend
        .iter()
        .map(|(_, t)| {
            vec![
                t.wall_ns.saturating_sub(t.mpi_ns) as f64 / NS_PER_HOUR,
                t.mpi_ns as f64 / NS_PER_HOUR,
            ]
        })
        .collect();
    b.push_str(&svg::columns(
        "CPU hours per interval: application and MPI",
        &series(&["application", "MPI"]),
        &labels,
        &cpu,
    ));
    page(place, &format!("MPI jobs in {}", p.label), &b)
}

/// Rabenseifner, Fig. 6-11 and 14, message sizes and imbalance.
pub fn charts(s: &Summary, place: Place) -> String {
    let mut b = String::new();
    let analysed = s.total.wall_ns as f64;
    let jobs = s.total.jobs as f64;
    let size_rows: Vec<Bar> = s
        .by_size
        .iter()
        .map(|(label, t)| Bar {
            label: format!("{label} ranks"),
            values: vec![
                percent(t.wall_ns as f64, analysed),
                percent(t.jobs as f64, jobs),
                t.mpi_percent(),
            ],
            note: format!("{:.1} CPU h, {} jobs", t.cpu_hours(), t.jobs),
        })
        .collect();
    b.push_str(&svg::hbars(
        "CPU time by job size (% of analysed), jobs (% of all) and MPI % of each class",
        &series(&["CPU time %", "jobs %", "MPI %"]),
        &size_rows,
        false,
    ));
    let job_cpu_rows: Vec<Bar> = s
        .by_job_cpu
        .iter()
        .map(|(label, [fortran, c])| Bar {
            label: label.to_string(),
            values: vec![
                percent(fortran.wall_ns as f64, analysed),
                percent(c.wall_ns as f64, analysed),
                percent(fortran.jobs as f64, jobs),
                percent(c.jobs as f64, jobs),
            ],
            note: format!("{} jobs", fortran.jobs + c.jobs),
        })
        .collect();
    b.push_str(&svg::hbars(
        "Jobs by their CPU time: share of CPU time and of jobs, Fortran and C",
        &series(&["Fortran CPU %", "C CPU %", "Fortran jobs %", "C jobs %"]),
        &job_cpu_rows,
        false,
    ));
    let language_rows: Vec<Bar> = s
        .by_language
        .iter()
        .map(|(binding, t)| Bar {
            label: binding.as_str().to_string(),
            values: vec![
                t.wall_ns.saturating_sub(t.mpi_ns) as f64 / NS_PER_HOUR,
                t.mpi_ns as f64 / NS_PER_HOUR,
            ],
            note: format!(
                "{:.1} % of CPU time, {} jobs",
                percent(t.wall_ns as f64, analysed),
                t.jobs
            ),
        })
        .collect();
    b.push_str(&svg::hbars(
        "CPU hours by language: application and MPI",
        &series(&["application", "MPI"]),
        &language_rows,
        true,
    ));
    let user_rows: Vec<Bar> = s
        .users
        .iter()
        .take(CHART_USERS)
        .map(|u| Bar {
            label: u.user.clone(),
            values: vec![
                percent(
                    u.totals.wall_ns.saturating_sub(u.totals.mpi_ns) as f64 / NS_PER_HOUR,
                    s.capacity_hours,
                ),
                percent(u.totals.mpi_ns as f64 / NS_PER_HOUR, s.capacity_hours),
            ],
            note: format!("MPI {:.1} %", u.totals.mpi_percent()),
        })
        .collect();
    let users_title = if s.users.len() > CHART_USERS {
        format!(
            "The {CHART_USERS} biggest of {} users by share of the machine (%): application and MPI",
            s.users.len()
        )
    } else {
        "Users by share of the machine (%): application and MPI".to_string()
    };
    b.push_str(&svg::hbars(
        &users_title,
        &series(&["application", "MPI"]),
        &user_rows,
        true,
    ));
    let mut rated: Vec<_> = s
        .users
        .iter()
        .filter_map(|u| u.instruction_rate.map(|r| (u, r)))
        .collect();
    rated.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.user.cmp(&b.0.user)));
    let rate_rows: Vec<Bar> = rated
        .iter()
        .take(CHART_USERS)
        .map(|(u, rate)| Bar {
            label: u.user.clone(),
            values: vec![rate / 1e6],
            note: format!("MPI {:.1} %", u.totals.mpi_percent()),
        })
        .collect();
    b.push_str(&svg::hbars(
        "Users by instruction rate outside MPI (million instructions per second and rank)",
        &series(&["Minstr/s"]),
        &rate_rows,
        true,
    ));
    b.push_str(&routine_chart(&s.routines, s.total.mpi_ns));
    let group_rows: Vec<Bar> = s
        .groups
        .iter()
        .map(|g| Bar {
            label: g.name.to_string(),
            values: vec![g.jobs_percent, g.cpu_percent],
            note: format!("{:.1} % / {:.1} %", g.jobs_percent, g.cpu_percent),
        })
        .collect();
    b.push_str(&svg::hbars(
        "Routine groups: share of jobs using them, and of CPU time (jobs weighted by CPU time)",
        &series(&["% of jobs", "% of CPU time"]),
        &group_rows,
        false,
    ));
    b.push_str(&histogram_chart(&s.histogram));
    let points: Vec<Point> = s
        .points
        .iter()
        .map(|p| Point {
            x: f64::from(p.ranks),
            y: p.imbalance,
            label: p.label.clone(),
        })
        .collect();
    b.push_str(&svg::scatter(
        "Critical-path imbalance vs job size",
        "ranks",
        "imbalance, % of wall time",
        &points,
    ));
    page(place, &format!("Charts of {}", s.period.label), &b)
}

/// Rabenseifner, Fig. 12-13: the routine table of all jobs, Fortran jobs, C jobs and each size
/// class.
pub fn tables(s: &Summary, place: Place) -> String {
    let mut b = String::from("<p>Sections: <a href=\"#all\">all jobs</a>, <a href=\"#fortran\">Fortran</a>, <a href=\"#c\">C</a>");
    for (label, _) in &s.by_size {
        let _ = write!(b, ", <a href=\"#ranks-{label}\">{label} ranks</a>");
    }
    b.push_str("</p>\n");
    for table in &s.tables {
        let _ = writeln!(
            b,
            "<h2 id=\"{}\">{} ({} jobs)</h2>",
            table.id,
            escape(&table.title),
            table.jobs
        );
        routine_table(&mut b, &table.rows);
    }
    page(place, &format!("Routine tables of {}", s.period.label), &b)
}

/// The routines by total time (hours) with their latency, transfer and synchronisation
/// estimates (Rabenseifner, Fig. 10): the first [`CHART_ROUTINES`], then the rest as one bar.
fn routine_chart(routines: &[RoutineRow], mpi_ns: u64) -> String {
    let mut bars: Vec<Bar> = routines
        .iter()
        .take(CHART_ROUTINES)
        .map(|r| {
            let parts = match (r.latency_ns, r.transfer_ns, r.sync_ns) {
                (Some(l), Some(t), Some(y)) => vec![l, t, y.max(0.0), 0.0],
                _ => vec![0.0, 0.0, 0.0, r.time_ns as f64],
            };
            Bar {
                label: r.name.clone(),
                values: parts.iter().map(|ns| ns / NS_PER_HOUR).collect(),
                note: format!("{:.1} % of MPI", 100.0 * r.share),
            }
        })
        .collect();
    let rest = &routines[routines.len().min(CHART_ROUTINES)..];
    if !rest.is_empty() {
        let time: u64 = rest.iter().map(|r| r.time_ns).sum();
        bars.push(Bar {
            label: format!("{} others", rest.len()),
            values: vec![0.0, 0.0, 0.0, time as f64 / NS_PER_HOUR],
            note: format!("{:.1} % of MPI", percent(time as f64, mpi_ns as f64)),
        });
    }
    svg::hbars(
        "MPI routines by total time (hours): latency, transfer and synchronisation estimates",
        &series(&["latency", "transfer", "synchronisation", "no estimate"]),
        &bars,
        true,
    )
}

/// Message counts by size bucket (see [`mpistat_record::RoutineStats::hist`]) as columns.
fn histogram_chart(histogram: &[u64]) -> String {
    let labels: Vec<String> = (0..histogram.len())
        .map(|b| {
            if b == 0 {
                "0".into()
            } else {
                bytes((1u64 << (b - 1).min(63)) as f64)
            }
        })
        .collect();
    let values: Vec<Vec<f64>> = histogram.iter().map(|n| vec![*n as f64]).collect();
    svg::columns(
        "Messages by size (bytes, from)",
        &series(&["messages"]),
        &labels,
        &values,
    )
}

/// A table of jobs (`note`: why each is listed), its header sortable on `page` (`sort`).
fn job_rows(out: &mut String, jobs: &[(&JobRecord, String)], place: Place, page: &str, sort: &str) {
    out.push_str("<table>\n");
    sortable_header(
        out,
        place,
        page,
        sort,
        &[
            ("job", None),
            ("user", None),
            ("end (UTC)", Some("end")),
            ("ranks", Some("ranks")),
            ("CPU h", Some("cpu")),
            ("MPI %", Some("mpi")),
            ("imbalance %", None),
            ("application", None),
            ("", None),
        ],
    );
    for (job, note) in jobs {
        let id = match place.job(job) {
            Some(link) => format!("<a href=\"{}\">{}</a>", escape(&link), escape(&job.job_id)),
            None => escape(&job.job_id),
        };
        let _ = writeln!(
            out,
            "<tr><td>{id}</td><td><a href=\"{}\">{}</a></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}</td><td class=\"n\">{:.1}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            place.user(&job.user),
            escape(&job.user),
            &utc(job.end_unix_ms)[..19],
            job.ranks,
            job.wall_ns.sum as f64 / NS_PER_HOUR,
            100.0 * job.mpi_fraction(),
            imbalance_percent(job).map_or(String::new(), |i| format!("{i:.1}")),
            escape(&application_label(
                job.application(),
                job.interpreter.as_deref(),
                false
            )),
            escape(note)
        );
    }
    out.push_str("</table>\n");
}

/// The jobs over the site's thresholds, biggest first: `jobs` is the page of them `listing`
/// says.
pub fn critical(
    s: &Summary,
    config: &SiteConfig,
    jobs: &[CriticalJob],
    (traced, traced_count): (&[JobRecord], usize),
    listing: &Listing,
    place: Place,
) -> String {
    let t = &config.site_report;
    let mut b = format!(
        "<p>Jobs of at least {} CPU hours with an MPI share of at least {} % or a critical-path \
         imbalance of at least {} % of their wall time (<code>[site_report]</code> in site.toml): \
         {} of {} jobs.</p>\n",
        t.critical_min_cpu_hours,
        t.critical_mpi_percent,
        t.critical_imbalance_percent,
        s.critical_jobs,
        s.total.jobs
    );
    let sort = listing.sort_among(&CRITICAL_SORTS);
    pager(
        &mut b,
        place,
        "critical.html",
        sort,
        listing.from,
        s.critical_jobs,
    );
    let rows: Vec<(&JobRecord, String)> = jobs
        .iter()
        .map(|c| (&c.job, c.reasons.join(", ")))
        .collect();
    job_rows(&mut b, &rows, place, "critical.html", sort);
    if traced_count > 0 {
        let _ = writeln!(
            b,
            "<h2 id=\"traced\">Traced jobs ({traced_count}{})</h2>",
            if traced_count > traced.len() {
                format!(", the first {}", traced.len())
            } else {
                String::new()
            }
        );
        let rows: Vec<(&JobRecord, String)> =
            traced.iter().map(|j| (j, "traced".to_string())).collect();
        job_rows(&mut b, &rows, place, "critical.html", sort);
    }
    page(place, &format!("Critical jobs of {}", s.period.label), &b)
}

/// Every user, by CPU time (or as `listing` says), a page of them.
pub fn users(s: &Summary, listing: &Listing, place: Place) -> String {
    let sort = listing.sort_among(&USER_SORTS);
    let mut users: Vec<_> = s.users.iter().collect();
    match sort {
        "user" => users.sort_by(|a, b| a.user.cmp(&b.user)),
        "jobs" => users.sort_by_key(|u| std::cmp::Reverse(u.totals.jobs)),
        "mpi" => users.sort_by(|a, b| b.totals.mpi_percent().total_cmp(&a.totals.mpi_percent())),
        "balance" => {
            users.sort_by(|a, b| a.totals.load_balance().total_cmp(&b.totals.load_balance()))
        }
        _ => {}
    }
    let mut b = String::new();
    pager(&mut b, place, "users.html", sort, listing.from, users.len());
    b.push_str("<table>\n");
    sortable_header(
        &mut b,
        place,
        "users.html",
        sort,
        &[
            ("user", Some("user")),
            ("jobs", Some("jobs")),
            ("CPU h", Some("cpu")),
            ("share of machine", None),
            ("MPI %", Some("mpi")),
            ("load balance", Some("balance")),
        ],
    );
    for u in users.iter().skip(listing.from).take(PAGE_ROWS) {
        let _ = writeln!(
            b,
            "<tr><td><a href=\"{}\">{}</a></td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.3} %</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.2}</td></tr>",
            place.user(&u.user),
            escape(&u.user),
            u.totals.jobs,
            u.totals.cpu_hours(),
            percent(u.totals.cpu_hours(), s.capacity_hours),
            u.totals.mpi_percent(),
            u.totals.load_balance()
        );
    }
    b.push_str("</table>\n");
    for (title, groups) in [
        ("Slurm accounts", &s.by_account),
        ("Slurm partitions", &s.by_partition),
    ] {
        slurm_groups(&mut b, title, groups, s.capacity_hours);
    }
    page(place, &format!("Users of {}", s.period.label), &b)
}

/// A table of the Slurm jobs by account or partition (nothing when no job ran in Slurm).
fn slurm_groups(out: &mut String, title: &str, groups: &[SlurmGroup], capacity_hours: f64) {
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>{title}</h2>");
    // The names come from the jobs' environment; the figures are mpistat's own.
    let _ = writeln!(
        out,
        "<p>As the jobs' environment claimed them, not verified (docs/identity.md); CPU hours \
         are ranks × wall time as measured.</p>"
    );
    out.push_str("<table>\n<tr><th>name</th><th>jobs</th><th>CPU h</th><th>share of machine</th><th>MPI %</th><th>load balance</th><th>imbalance %</th><th>critical jobs</th></tr>\n");
    for g in groups {
        let imbalance = g
            .imbalance_percent
            .map_or("-".to_string(), |p| format!("{p:.1}"));
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.3} %</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.2}</td><td class=\"n\">{imbalance}</td><td class=\"n\">{}</td></tr>",
            escape(&g.name),
            g.totals.jobs,
            g.totals.cpu_hours(),
            percent(g.totals.cpu_hours(), capacity_hours),
            g.totals.mpi_percent(),
            g.totals.load_balance(),
            g.critical
        );
    }
    out.push_str("</table>\n");
}

/// What the search of the live pages found (see [`super::search`]).
pub fn search(found: &Found, period: &str, place: Place) -> String {
    let mut b = String::new();
    if found.text.is_empty() {
        b.push_str("<p>Type a user's login, a job id or (part of) an application's name.</p>\n");
        return page(place, "Search", &b);
    }
    let _ = writeln!(b, "<h2>Users of {period} ({})</h2>", found.users.len());
    if !found.users.is_empty() {
        b.push_str("<table>\n<tr><th>user</th><th>jobs</th><th>CPU h</th><th>MPI %</th></tr>\n");
        for (user, t) in &found.users {
            let _ = writeln!(
                b,
                "<tr><td><a href=\"{}\">{}</a></td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.1}</td></tr>",
                place.user(user),
                escape(user),
                t.jobs,
                t.cpu_hours(),
                t.mpi_percent()
            );
        }
        b.push_str("</table>\n");
    }
    let _ = writeln!(b, "<h2>Jobs with this id ({})</h2>", found.jobs.len());
    if !found.jobs.is_empty() {
        let rows: Vec<(&JobRecord, String)> =
            found.jobs.iter().map(|j| (j, String::new())).collect();
        job_rows(&mut b, &rows, place, "", "");
    }
    let _ = writeln!(b, "<h2>Applications ({})</h2>", found.applications.len());
    if !found.applications.is_empty() {
        b.push_str("<table>\n<tr><th>application</th><th>jobs in the interval</th></tr>\n");
        for (name, jobs) in &found.applications {
            let _ = writeln!(
                b,
                "<tr><td>{}</td><td class=\"n\">{jobs}</td></tr>",
                escape(name)
            );
        }
        b.push_str("</table>\n");
        let _ = writeln!(
            b,
            "<h3>Their last jobs ({})</h3>",
            found.application_jobs.len()
        );
        let rows: Vec<(&JobRecord, String)> = found
            .application_jobs
            .iter()
            .map(|j| (j, String::new()))
            .collect();
        job_rows(&mut b, &rows, place, "", "");
    }
    page(place, &format!("Search: {}", found.text), &b)
}

/// One user's figures against the site's reference values, their routines and a page of
/// their jobs (`jobs`, of `job_count`, as `listing` says).
pub fn user(
    d: &UserDigest,
    mpi_ns: u64,
    jobs: &[JobRecord],
    job_count: usize,
    listing: &Listing,
    period: &str,
    place: Place,
) -> String {
    let mut b = String::from(
        "<table>\n<tr><th></th><th>this user</th><th>all users: min / median / max</th></tr>\n",
    );
    for f in &d.figures {
        let _ = writeln!(
            b,
            "<tr><th>{}</th><td class=\"n{}\">{}</td><td>{}</td></tr>",
            escape(f.name),
            if f.critical { " crit" } else { "" },
            escape(&f.value),
            escape(&f.reference)
        );
    }
    b.push_str("</table>\n");
    if !d.recommendations.is_empty() {
        b.push_str("<ul>\n");
        for r in &d.recommendations {
            let _ = writeln!(b, "<li>{}</li>", escape(r));
        }
        b.push_str("</ul>\n");
    }
    b.push_str("<h2>MPI routines</h2>\n");
    b.push_str(&routine_chart(&d.routines, mpi_ns));
    routine_table(&mut b, &d.routines);
    let _ = writeln!(b, "<h2>Jobs ({job_count})</h2>");
    let sort = listing.sort_among(&JOB_SORTS);
    let slug = format!("users/{}.html", user_slug(&d.user));
    pager(&mut b, place, &slug, sort, listing.from, job_count);
    let rows: Vec<(&JobRecord, String)> = jobs.iter().map(|j| (j, String::new())).collect();
    job_rows(&mut b, &rows, place, &slug, sort);
    page(place, &format!("{} in {period}", d.user), &b)
}

/// Everything in one job's record: facts, the readable report, the imbalance time series and
/// message sizes as charts, the analysis of its trace when it was traced, and the record itself
/// as JSON.
pub fn job(job: &JobRecord, traced: Option<&TracedJob>, place: Place) -> String {
    let mut b = String::from("<table>\n");
    let executable = match &job.interpreter {
        Some(_) => format!("{} (the interpreter)", job.exe),
        None => job.exe.clone(),
    };
    let mut facts: Vec<(&str, String)> = vec![
        ("job id", job.job_id.clone()),
        ("user", format!("{} (uid {})", job.user, job.uid)),
        ("application", job.application().to_string()),
        ("executable", executable),
        ("argv[0]", job.argv0.clone()),
        ("host, pid of rank 0", format!("{}, {}", job.host, job.pid)),
        ("ranks, nodes", format!("{}, {}", job.ranks, job.nodes)),
        ("start (UTC)", utc(job.start_unix_ms)),
        ("end (UTC)", utc(job.end_unix_ms)),
        ("wall time", duration(job.wall_ns.max)),
        (
            "CPU time",
            format!("{:.2} h", job.wall_ns.sum as f64 / NS_PER_HOUR),
        ),
        (
            "MPI time",
            format!(
                "{} ({:.1} %)",
                duration(job.mpi_ns.sum),
                100.0 * job.mpi_fraction()
            ),
        ),
        ("language binding", job.binding.as_str().to_string()),
        ("thread level", job.thread_level.clone()),
        (
            "MPI library",
            mpistat_record::family::describe_library(&job.mpi_library),
        ),
        ("profiler overhead", duration(job.overhead_ns.sum)),
        (
            "user PMPI tool",
            if job.user_pmpi_tool { "yes" } else { "no" }.into(),
        ),
        (
            "partial",
            job.partial.clone().unwrap_or_else(|| "no".into()),
        ),
        ("key", job.key()),
    ];
    if let Some(p) = job.ranks_per_node {
        facts.push(("ranks per node", format!("{} to {}", p.min, p.max)));
    }
    if !job.host_list.is_empty() {
        facts.push(("hosts", job.host_list.clone()));
    }
    if let Some(line) = mpistat_record::report::node_bytes_line(job) {
        facts.push(("bytes on/off node", line));
    }
    if let Some(slurm) = &job.slurm {
        facts.extend(mpistat_record::report::slurm_lines(
            slurm,
            job.ranks,
            job.end_unix_ms,
        ));
    }
    for (name, value) in &facts {
        let _ = writeln!(
            b,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(name),
            escape(value)
        );
    }
    for (name, value) in &job.env {
        let _ = writeln!(
            b,
            "<tr><th>env {}</th><td>{}</td></tr>",
            escape(name),
            escape(value)
        );
    }
    let _ = writeln!(
        b,
        "</table>\n<p><a href=\"{}\">all jobs of {}</a></p>",
        place.user(&job.user),
        escape(&job.user)
    );
    if let Some(t) = traced {
        b.push_str("<h2 id=\"trace-analysis\">Trace analysis (level 6)</h2>\n");
        mpistat_render::html::traced_job(&mut b, t);
    }
    match &job.imbalance {
        Some(i) if !i.series_ns.is_empty() => {
            let labels: Vec<String> = (0..i.series_ns.len())
                .map(|k| format!("{}", k as u64 * i.series_factor.max(1)))
                .collect();
            let values: Vec<Vec<f64>> = i
                .series_ns
                .iter()
                .map(|ns| vec![*ns as f64 / 1e6])
                .collect();
            b.push_str(&svg::columns(
                &format!(
                    "Imbalance per superstep (max - mean over ranks, ms), {} supersteps per column",
                    i.series_factor.max(1)
                ),
                &series(&["imbalance ms"]),
                &labels,
                &values,
            ));
        }
        Some(i) if i.unavailable.is_some() => {
            let _ = writeln!(
                b,
                "<p>No imbalance estimates: {}</p>",
                escape(i.unavailable.as_deref().unwrap_or_default())
            );
        }
        _ => b.push_str("<p>No imbalance time series in this record.</p>\n"),
    }
    let mut histogram = Vec::new();
    for r in &job.routines {
        add_histogram(&mut histogram, &r.hist);
    }
    if !histogram.is_empty() {
        b.push_str(&histogram_chart(&histogram));
    }
    let _ = writeln!(
        b,
        "<h2>Report</h2>\n<pre>{}</pre>\n<details><summary>The record as JSON ({} routines, {} calls)</summary><pre>{}</pre></details>",
        escape(&mpistat_record::report::render(job)),
        job.routines.len(),
        count(job.routines.iter().map(|r| r.calls.sum).sum()),
        escape(&serde_json::to_string(job).unwrap_or_default())
    );
    page(place, &format!("Job {} of {}", job.job_id, job.user), &b)
}
