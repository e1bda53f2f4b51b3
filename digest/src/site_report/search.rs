//! The search of the live pages (`mpistat serve`, `search.html?q=`): users of the interval whose
//! login contains the text, jobs whose id is the text (any interval), and applications whose
//! name contains it with their jobs of the interval. Each part reads an index or the rollups
//! (users: [`rollup::users_of_period`]; applications: `rollup_apps`), never every job.

use super::pages::PAGE_ROWS;
use super::period::Period;
use crate::db::Database;
use crate::mail::content::Totals;
use crate::rollup;
use mpistat_record::JobRecord;
use rusqlite::params;

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
pub fn search(db: &Database, period: &Period, text: &str) -> anyhow::Result<Found> {
    let mut found = Found {
        text: text.to_string(),
        ..Found::default()
    };
    if text.is_empty() {
        return Ok(found);
    }
    let lower = text.to_lowercase();
    found.users = rollup::users_of_period(&db.conn, period.from_ms, period.to_ms)?
        .into_iter()
        .filter(|(user, _)| user.to_lowercase().contains(&lower))
        .take(PAGE_ROWS)
        .collect();
    let keys = |sql: &str, text: &str, bounds: bool| -> anyhow::Result<Vec<(u64, String)>> {
        let mut stmt = db.conn.prepare(sql)?;
        let rows = if bounds {
            stmt.query_map(
                params![text, period.from_ms, period.to_ms, PAGE_ROWS],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
            .collect::<Result<_, _>>()?
        } else {
            stmt.query_map(params![text, PAGE_ROWS], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<Result<_, _>>()?
        };
        Ok(rows)
    };
    let read = |keys: Vec<(u64, String)>| -> anyhow::Result<Vec<JobRecord>> {
        let mut jobs = Vec::new();
        for (end_ms, key) in keys {
            jobs.extend(db.job_ended_at(end_ms, &key)?);
        }
        Ok(jobs)
    };
    found.jobs = read(keys(
        "SELECT end_ms, key FROM jobs INDEXED BY jobs_by_job_id WHERE job_id = ?1
         ORDER BY end_ms DESC LIMIT ?2",
        text,
        false,
    )?)?;
    // The applications of the interval (with their jobs) from the rollups, in name order.
    let mut stmt = db.conn.prepare(
        "SELECT app, sum(jobs) FROM rollup_apps
         WHERE day >= ?1 AND day < ?2 AND instr(lower(app), ?3) > 0
         GROUP BY app ORDER BY app LIMIT ?4",
    )?;
    found.applications = stmt
        .query_map(
            params![
                period.from_ms / rollup::DAY_MS,
                period.to_ms.div_ceil(rollup::DAY_MS),
                lower,
                APPLICATIONS
            ],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .collect::<Result<_, _>>()?;
    for (name, _) in &found.applications {
        if found.application_jobs.len() >= PAGE_ROWS {
            break;
        }
        let more = read(keys(
            "SELECT end_ms, key FROM jobs INDEXED BY jobs_by_app
             WHERE coalesce(app, exe) = ?1 AND end_ms >= ?2 AND end_ms < ?3
             ORDER BY end_ms DESC LIMIT ?4",
            name,
            true,
        )?)?;
        let room = PAGE_ROWS - found.application_jobs.len();
        found.application_jobs.extend(more.into_iter().take(room));
    }
    Ok(found)
}
