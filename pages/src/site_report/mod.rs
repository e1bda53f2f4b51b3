//! `mpistat site-report`: the admin web pages of a week or a month (Rabenseifner, "Automatic MPI
//! Counter Profiling", Sec. VI-VII) as a static site, and the pages `mpistat serve`
//! ([`crate::serve`]) renders live.
//!
//! The interval is `mpistat_figures::period`; `summary` computes what the pages say (a user's
//! page tells what their mail tells: [`mpistat_render::user`]), `pages` lays out each page as
//! HTML, `svg` draws the charts.

pub mod listing;
pub mod pages;
pub mod search;
pub mod summary;
pub mod svg;

use crate::Error;
use listing::Listing;
use mpistat_figures::period::Period;
use mpistat_figures::traced::TracedJob;
use mpistat_figures::week::IsoWeek;
use mpistat_record::JobRecord;
use mpistat_render::user::UserDigest;
use mpistat_service::private::{self, Group};
use mpistat_site::SiteConfig;
use mpistat_store::ReadStore;
use pages::{user_slug, Place, StaticJobs};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a static site holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub pages: usize,
    /// Jobs of the interval, and those with a page of their own (critical and traced jobs
    /// listed on the site).
    pub jobs: usize,
    pub job_pages: usize,
    pub users: usize,
}

/// Write the pages of `period` to `out` (created if needed; pages already there are replaced):
/// the summary pages, a page per user (with the first page of their jobs), and a page per job
/// the site lists (the first page of critical jobs, traced jobs) and of the jobs `also` names
/// (by key). Pages are mode 0640 and directories 0750, given to `[site_report] group`, whatever
/// the umask ([`private`]).
pub fn write_site(
    db: &ReadStore,
    config: &SiteConfig,
    period: &Period,
    out: &Path,
    also: &[String],
) -> Result<Written, Error> {
    let summary = summary::summarise(db, period, config)?;
    // Every user's jobs are in them: the service's and the web server's only.
    let group = Group::named(&config.site_report.group).map_err(|source| Error::Group {
        setting: "[site_report] group",
        source,
    })?;
    for dir in [out.to_path_buf(), out.join("users"), out.join("jobs")] {
        private::create_dir_all(&dir, group.as_ref())?;
    }
    let write = |path: &Path, html: String| -> Result<(), Error> {
        Ok(private::write(path, html.as_bytes(), group.as_ref())?)
    };
    let first = Listing::default();
    let critical = summary::critical_page(db, period, &first, summary.critical_jobs)?;
    let (traced, traced_count) = summary::traced_jobs(db, period)?;
    let mut asked = Vec::new();
    for key in also {
        asked.push(db.job(key)?.ok_or_else(|| Error::NoJob(key.clone()))?);
    }
    let listed: Vec<&JobRecord> = critical
        .iter()
        .map(|c| &c.job)
        .chain(&traced)
        .chain(&asked)
        .collect();
    let site = StaticJobs {
        keys: listed.iter().map(|j| j.key()).collect(),
        live_url: config.site_report.live_url.clone(),
    };
    let top = Place {
        root: "",
        query: "",
        site: Some(&site),
    };
    let below = Place { root: "../", ..top };
    write(
        &out.join("index.html"),
        pages::overview(&summary, config, top),
    )?;
    write(&out.join("charts.html"), pages::charts(&summary, top))?;
    write(&out.join("tables.html"), pages::tables(&summary, top))?;
    write(
        &out.join("critical.html"),
        pages::critical(
            &summary,
            config,
            &critical,
            (&traced, traced_count),
            &first,
            top,
        ),
    )?;
    write(&out.join("users.html"), pages::users(&summary, &first, top))?;
    let mpi_ns: BTreeMap<&str, (u64, usize)> = summary
        .users
        .iter()
        .map(|u| (u.user.as_str(), (u.totals.mpi_ns, u.totals.jobs)))
        .collect();
    let digests = mpistat_render::user::user_digests(db, period, config, None)?;
    let user_pages = |db: &ReadStore, digests: &[UserDigest]| {
        digests.iter().try_for_each(|digest| {
            let path = out.join(format!("users/{}.html", user_slug(&digest.user)));
            let jobs = summary::user_jobs(db, &digest.user, period, &first)?;
            let (mpi_ns, count) = mpi_ns
                .get(digest.user.as_str())
                .copied()
                .unwrap_or_default();
            write(
                &path,
                pages::user(digest, mpi_ns, &jobs, count, &first, &period.label, below),
            )
        })
    };
    // Users' pages read their jobs' records (most of the work): on all cores, each with a
    // connection of its own (a database in memory has only the one).
    match db.location() {
        Some(location) => {
            let location = &location;
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            std::thread::scope(|scope| {
                let workers: Vec<_> = digests
                    .chunks(digests.len().div_ceil(threads).max(1))
                    .map(|chunk| {
                        scope.spawn(move || user_pages(&ReadStore::open_at(location)?, chunk))
                    })
                    .collect();
                workers
                    .into_iter()
                    .try_for_each(|w| w.join().map_err(|_| Error::UserPagePanicked)?)
            })?;
        }
        None => user_pages(db, &digests)?,
    }
    let analyses = db.analyses_by_key()?;
    for job in listed {
        let key = job.key();
        let traced = analyses.get(&key).cloned().map(TracedJob::from_stored);
        let html = pages::job(job, traced.as_ref(), below);
        write(&out.join(format!("jobs/{key}.html")), html)?;
    }
    Ok(Written {
        pages: 5 + digests.len() + site.keys.len(),
        jobs: summary.total.jobs,
        job_pages: site.keys.len(),
        users: digests.len(),
    })
}

/// The interval of `--week` / `--month` (`last`: the last complete one) at `now_ms`.
pub fn period_of(week: Option<&str>, month: Option<&str>, now_ms: u64) -> Result<Period, Error> {
    let this_month = || Period::month(&mpistat_record::units::utc(now_ms)[..7]);
    Ok(match (week, month) {
        (Some("last"), None) => Period::week(IsoWeek::last_complete(now_ms)),
        (Some(week), None) => Period::week(IsoWeek::parse(week).map_err(Error::Period)?),
        (None, Some("last")) => this_month()
            .map_err(Error::Period)?
            .previous()
            .ok_or_else(|| Error::Period("no month before 1970".into()))?,
        (None, Some(month)) => Period::month(month).map_err(Error::Period)?,
        _ => return Err(Error::Period("give --week or --month".into())),
    })
}

/// What `mpistat site-report` writes: the week or the month, where, and which jobs' pages.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub db: mpistat_service::DatabaseOptions,
    /// The ISO week (`2026-W47`) or the month (`2026-11`).
    pub week: Option<String>,
    pub month: Option<String>,
    /// The directory (`{period}` in it is the period's label).
    pub out: PathBuf,
    /// Also write the pages of these jobs (keys).
    pub jobs: Vec<String>,
}

/// `mpistat site-report --week W | --month M --out DIR`: what was written is said on `err`.
pub fn command(args: &Options, err: &mut impl Write) -> Result<Written, Error> {
    let (config, db) = mpistat_service::load(&args.db, err)?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    let period = period_of(args.week.as_deref(), args.month.as_deref(), now_ms)?;
    let out = PathBuf::from(
        args.out
            .to_string_lossy()
            .replace("{period}", &period.label),
    );
    let start = std::time::Instant::now();
    let written = write_site(&db, &config, &period, &out, &args.jobs)?;
    writeln!(
        err,
        "{}: {} pages ({} users, {} jobs) in {} ({:.2} s)",
        period.label,
        written.pages,
        written.users,
        written.jobs,
        out.display(),
        start.elapsed().as_secs_f64()
    )?;
    db.report_quarantined(err)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_week_and_month() {
        // Monday 2026-11-23 09:00 UTC.
        let now = 1_795_424_400_000;
        assert_eq!(
            period_of(Some("last"), None, now).unwrap().label,
            "2026-W47"
        );
        assert_eq!(period_of(None, Some("last"), now).unwrap().label, "2026-10");
        assert_eq!(
            period_of(None, Some("2026-11"), now).unwrap().label,
            "2026-11"
        );
        assert!(period_of(None, None, now).is_err());
        assert!(
            period_of(Some("2026-11"), None, now).is_err(),
            "a month is not a week"
        );
    }
}
