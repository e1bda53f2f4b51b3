//! `mpistat site-report`: the admin web pages of a week or a month (seed 003 Sec. VI-VII) as a
//! static site, and the pages `mpistat serve` ([`crate::serve`]) renders live.
//!
//! `period` is the interval, `summary` computes what the pages say (reusing the weekly mail's
//! [`crate::mail::content`]), `pages` lays out each page as HTML, `svg` draws the charts.

pub mod pages;
pub mod period;
pub mod summary;
pub mod svg;

use crate::cli::SiteReportArgs;
use crate::db::Database;
use crate::mail::content::digests_over;
use anyhow::Context;
use mpistat_record::JobRecord;
use mpistat_site::SiteConfig;
use pages::{user_slug, Place};
use period::Period;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

/// What a static site holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub pages: usize,
    pub jobs: usize,
    pub users: usize,
}

/// The jobs of `period` grouped by user, in end order.
pub fn jobs_by_user(jobs: &[JobRecord]) -> BTreeMap<&str, Vec<&JobRecord>> {
    let mut by_user: BTreeMap<&str, Vec<&JobRecord>> = BTreeMap::new();
    for job in jobs {
        by_user.entry(job.user.as_str()).or_default().push(job);
    }
    by_user
}

/// Write the pages of `period` to `out` (created if needed; pages already there are replaced).
pub fn write_site(
    db: &Database,
    config: &SiteConfig,
    period: &Period,
    out: &Path,
) -> anyhow::Result<Written> {
    let jobs = db.jobs_ended_between(period.from_ms, period.to_ms)?;
    let summary = summary::summarise(db, &jobs, period, config)?;
    for dir in [out.to_path_buf(), out.join("users"), out.join("jobs")] {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let write = |path: &Path, html: String| {
        std::fs::write(path, html).with_context(|| format!("cannot write {}", path.display()))
    };
    let top = Place {
        root: "",
        query: "",
    };
    let below = Place {
        root: "../",
        query: "",
    };
    write(&out.join("index.html"), pages::overview(&summary, config, top))?;
    write(&out.join("charts.html"), pages::charts(&summary, top))?;
    write(&out.join("tables.html"), pages::tables(&summary, config, top))?;
    write(&out.join("critical.html"), pages::critical(&summary, config, top))?;
    write(&out.join("users.html"), pages::users(&summary, top))?;
    let by_user = jobs_by_user(&jobs);
    let digests = digests_over(&jobs, &period.label, period.hours(), &config.digest);
    for digest in &digests {
        let path = out.join(format!("users/{}.html", user_slug(&digest.user)));
        let html = pages::user(digest, &by_user[digest.user.as_str()], &period.label, below);
        write(&path, html)?;
    }
    for job in &jobs {
        write(
            &out.join(format!("jobs/{}.html", job.key())),
            pages::job(job, below),
        )?;
    }
    Ok(Written {
        pages: 5 + digests.len() + jobs.len(),
        jobs: jobs.len(),
        users: digests.len(),
    })
}

/// `mpistat site-report --week W | --month M --out DIR`.
pub fn command(args: &SiteReportArgs) -> anyhow::Result<ExitCode> {
    let (config, db) = crate::site::load(&args.db)?;
    let period = match (&args.week, &args.month) {
        (Some(week), None) => Period::parse(week).map_err(anyhow::Error::msg)?,
        (None, Some(month)) => Period::month(month).map_err(anyhow::Error::msg)?,
        _ => anyhow::bail!("give --week or --month"),
    };
    let start = std::time::Instant::now();
    let written = write_site(&db, &config, &period, &args.out)?;
    eprintln!(
        "{}: {} pages ({} users, {} jobs) in {} ({:.2} s)",
        period.label,
        written.pages,
        written.users,
        written.jobs,
        args.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
