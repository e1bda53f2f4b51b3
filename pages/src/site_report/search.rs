//! The search of the live pages (`mpistat serve`, `search.html?q=`): users of the interval whose
//! login contains the text, jobs whose id is the text (any interval), and applications whose
//! name contains it with their jobs of the interval. Each part reads an index or the rollups
//! (users: [`rollup::users_of_period`]; applications: `rollup_apps`), never every job.

use super::listing::PAGE_ROWS;
use mpistat_figures::period::Period;
use mpistat_figures::rollup;
use mpistat_figures::sums::Totals;
use mpistat_record::JobRecord;
use mpistat_store::ReadStore;

/// Applications listed (each with its jobs of the interval).
const APPLICATIONS: usize = 20;

/// What a search found.
#[derive(Debug, Default)]
pub struct Found {
    pub text: String,
    /// Users of the interval whose login contains the text, with their totals.
    pub users: Vec<(String, Totals)>,
    /// Jobs whose id is the text (the last [`PAGE_ROWS`] to end).
    pub jobs: Vec<JobRecord>,
    /// Applications whose name contains the text, their jobs in the interval, and the last
    /// of those jobs (up to [`PAGE_ROWS`] over all applications).
    pub applications: Vec<(String, usize)>,
    pub application_jobs: Vec<JobRecord>,
}

/// Look for `text` (case-insensitively in names) in `period`.
pub fn search(db: &ReadStore, period: &Period, text: &str) -> Result<Found, crate::Error> {
    let mut found = Found {
        text: text.to_string(),
        ..Found::default()
    };
    if text.is_empty() {
        return Ok(found);
    }
    let lower = text.to_lowercase();
    found.users = rollup::users_of_period(db, period.from_ms, period.to_ms)?
        .into_iter()
        .filter(|(user, _)| user.to_lowercase().contains(&lower))
        .take(PAGE_ROWS)
        .collect();
    found.jobs = db.jobs_ended_at(&db.jobs_with_id(text, PAGE_ROWS)?)?;
    // The applications of the interval (with their jobs) from the rollups, in name order.
    found.applications = db.applications_containing(
        (
            period.from_ms / rollup::DAY_MS,
            period.to_ms.div_ceil(rollup::DAY_MS),
        ),
        &lower,
        APPLICATIONS,
    )?;
    for (name, _) in &found.applications {
        if found.application_jobs.len() >= PAGE_ROWS {
            break;
        }
        let keys = db.jobs_of_application(name, period.from_ms, period.to_ms, PAGE_ROWS)?;
        let room = PAGE_ROWS - found.application_jobs.len();
        found
            .application_jobs
            .extend(db.jobs_ended_at(&keys)?.into_iter().take(room));
    }
    Ok(found)
}
