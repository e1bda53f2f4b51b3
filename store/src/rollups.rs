//! The rollup tables (the digest's `rollup` makes and reads their figures; these are its
//! statements): the site's sums per UTC day (`rollup_days`: JSON), each user's per day
//! (`rollup_users`: totals and detail as JSON, the job count and times as columns) and per
//! calendar month (`rollup_user_months`: by the day number of the month's first day) and per ISO
//! week (`rollup_user_weeks`: by the day number of its Monday), the jobs
//! per day and application (`rollup_apps`), the critical jobs (`critical_jobs`, and how many
//! ended in each UTC hour: `rollup_hour_criticals`) and the rebuild's state (`rollup_state`). A rebuild fills tables of the same shape named
//! `rebuilt_<table>` and swaps them in ([`WriteTx::swap_in_rebuilt`]).

use crate::db::{Db, Dialect};
use crate::{CriticalEntry, JobOrder, PeriodTotals, ReadStore, Result, WriteTx};
use rusqlite::params;
use std::collections::{BTreeSet, HashMap};

/// The rollup tables.
const TABLES: [&str; 9] = [
    "rollup_days",
    "rollup_users",
    "rollup_user_months",
    "rollup_user_weeks",
    "rollup_apps",
    "critical_jobs",
    "rollup_hours",
    "rollup_hour_groups",
    "rollup_hour_criticals",
];

/// An hour in milliseconds: the hourly tables are per UTC hour (`end_ms / HOUR_MS`).
pub const HOUR_MS: u64 = 3_600_000;

/// The site's sums of the jobs that ended in one UTC hour, as `rollup_hours` keeps them (the
/// digest's `rollup` makes them).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct HourRow {
    pub jobs: u64,
    pub wall_ns: f64,
    pub mpi_ns: f64,
    pub imbalance_jobs: u64,
    pub imbalance_weighted: f64,
    pub imbalance_wall_ns: f64,
    pub escalated_traces: u64,
}

/// The jobs of one application, account or partition in an hour, as `rollup_hour_groups`
/// keeps them.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct GroupRow {
    pub jobs: u64,
    pub wall_ns: f64,
    pub mpi_ns: f64,
}

/// Which rollup tables a write goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// The ones the pages read.
    Live,
    /// The ones a rebuild is making.
    Rebuilt,
}

impl Tables {
    fn name(self, table: &str) -> String {
        match self {
            Tables::Live => table.to_string(),
            Tables::Rebuilt => format!("rebuilt_{table}"),
        }
    }
}

/// What a row of a user's rollups spans: a UTC day (`rollup_users`), an ISO week
/// (`rollup_user_weeks`, by the day number of its Monday) or a calendar month
/// (`rollup_user_months`, by the day number of its first day).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    Day,
    Week,
    Month,
}

impl Span {
    /// Its table and the column of the day number its rows start on.
    fn table(self) -> (&'static str, &'static str) {
        match self {
            Span::Day => ("rollup_users", "day"),
            Span::Week => ("rollup_user_weeks", "week"),
            Span::Month => ("rollup_user_months", "month"),
        }
    }
}

/// A user's rollup of a day (or of a week or month: `detail` unused) as stored: the totals' job count and
/// times as columns, the totals and the rest as their owner's JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct UserRow<'a> {
    pub jobs: u64,
    pub wall_ns: u64,
    pub mpi_ns: u64,
    pub totals: &'a str,
    pub detail: &'a str,
}

/// A sum of rank-nanoseconds as SQLite stores it in the rollups' sortable columns: a real
/// number, since SQLite's integers end at `i64::MAX` ns (292 rank-years), which one heavy user's
/// month passes at a large centre (about 3,500 cores busy all month); the exact sum is in the
/// row's JSON. Readers add these columns with `total()`, a real number too.
fn sql_ns(ns: u64) -> f64 {
    ns as f64
}

/// `numbers` as PostgreSQL's BIGINTs, for a statement of many rows
/// ([`crate::db::Postgres::query_arrays`]): `None` on SQLite, or when one is past BIGINT (then
/// the statements of one row each refuse it, as before).
fn pg_bigints(db: &Db, numbers: impl Iterator<Item = u64>) -> Option<Vec<i64>> {
    match db {
        Db::Postgres(_) => numbers.map(|n| i64::try_from(n).ok()).collect(),
        Db::Sqlite(_) => None,
    }
}

/// An hour's new sums (`excluded`) added to those stored (`t`) in `rollup_hours`.
const HOUR_SUMS_ADDED: &str = "ON CONFLICT (hour) DO UPDATE SET jobs = t.jobs + excluded.jobs,
         wall_ns = t.wall_ns + excluded.wall_ns, mpi_ns = t.mpi_ns + excluded.mpi_ns,
         imbalance_jobs = t.imbalance_jobs + excluded.imbalance_jobs,
         imbalance_weighted = t.imbalance_weighted + excluded.imbalance_weighted,
         imbalance_wall_ns = t.imbalance_wall_ns + excluded.imbalance_wall_ns,
         escalated_traces = t.escalated_traces + excluded.escalated_traces";

/// A group's new sums (`excluded`) added to those stored (`t`) in `rollup_hour_groups`.
const GROUP_SUMS_ADDED: &str =
    "ON CONFLICT (dimension, hour, name) DO UPDATE SET jobs = t.jobs + excluded.jobs,
         wall_ns = t.wall_ns + excluded.wall_ns, mpi_ns = t.mpi_ns + excluded.mpi_ns";

/// Up to this many critical jobs in an interval are sorted by CPU time as read; more are read
/// in the order of `critical_jobs_by_cpu`, skipping those of other intervals.
const CRITICAL_SORTED_AS_READ: usize = 10_000;

/// The statement of [`ReadStore::critical_page`] (parameters: the interval's bounds, the
/// page's size and offset). SQLite is told which index to read (PostgreSQL has no such clause).
fn critical_query(dialect: Dialect, order: JobOrder, count: usize) -> String {
    let (index, order) = match (order, dialect) {
        (JobOrder::End, _) => ("", "end_ms, key"),
        (_, Dialect::Postgres) => ("", "wall_ns DESC, key"),
        _ if count <= CRITICAL_SORTED_AS_READ => ("", "wall_ns DESC, key"),
        _ => ("INDEXED BY critical_jobs_by_cpu", "wall_ns DESC, key"),
    };
    format!(
        r#"SELECT end_ms, key, "user", wall_ns, reasons FROM critical_jobs {index}
         WHERE end_ms >= ?1 AND end_ms < ?2 ORDER BY {order} LIMIT ?3 OFFSET ?4"#
    )
}

/// A value of `rollup_state`.
fn state(db: &Db, name: &str) -> Result<Option<String>> {
    db.query_opt(
        "SELECT value FROM rollup_state WHERE name = ?1",
        &[&name],
        |row| row.get(0),
    )
}

/// The end of a step of a rebuild that starts at `from`: the end time of the `step_jobs`-th
/// job from there, or just after the newest job.
fn step_end(db: &Db, from: u64, step_jobs: u64) -> Result<u64> {
    let nth: Option<u64> = db.query_opt(
        "SELECT end_ms FROM jobs WHERE end_ms >= ?1 ORDER BY end_ms LIMIT 1 OFFSET ?2",
        params![from, step_jobs],
        |row| row.get(0),
    )?;
    let end = match nth {
        Some(end) => end,
        None => db
            .query_one("SELECT max(end_ms) FROM jobs", &[], |row| {
                row.get::<Option<u64>>(0)
            })?
            .map_or(from, |newest| newest + 1),
    };
    Ok(end.max(from + 1))
}

/// Drop the rollup tables named `<prefix>_<table>` that exist.
fn drop_tables(db: &Db, prefix: &str) -> Result<()> {
    for table in TABLES {
        db.batch(&format!("DROP TABLE IF EXISTS {prefix}_{table}"))?;
    }
    Ok(())
}

/// The sum of a column as a real number (its `wall_ns` and `mpi_ns` may pass `i64::MAX`):
/// SQLite's `total`, PostgreSQL's `sum` (a NUMERIC) taken to DOUBLE PRECISION.
fn total(dialect: Dialect, column: &str) -> String {
    match dialect {
        Dialect::Sqlite => format!("total({column})"),
        Dialect::Postgres => format!("coalesce(sum({column}), 0)::DOUBLE PRECISION"),
    }
}

impl ReadStore {
    /// A value of `rollup_state` (`stale`, `critical`, `rebuild_to`, `rebuild_critical`).
    pub fn rollup_state(&self, name: &str) -> Result<Option<String>> {
        state(&self.db, name)
    }

    /// Each stored site rollup (JSON) of the days `[from, to)` (day numbers), in day order.
    pub fn each_day_rollup(
        &self,
        (from, to): (u64, u64),
        mut each: impl FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        self.db.each(
            "SELECT data FROM rollup_days WHERE day >= ?1 AND day < ?2 ORDER BY day",
            &[&from, &to],
            |row| each(&row.get::<String>(0)?).map(|()| false),
        )
    }

    /// Each user's totals (user, JSON) of each day of `[from, to)`, in day order.
    pub fn each_user_day_totals(
        &self,
        days: (u64, u64),
        each: impl FnMut(&str, &str) -> Result<()>,
    ) -> Result<()> {
        self.each_user_totals(
            r#"SELECT "user", totals FROM rollup_users WHERE day >= ?1 AND day < ?2 ORDER BY day"#,
            days,
            each,
        )
    }

    /// Each user's totals (user, JSON) of each week or month (`span`) of `[from, to)` (by the
    /// day numbers of their first days), in time order.
    pub fn each_user_span_totals(
        &self,
        span: Span,
        (from, to): (u64, u64),
        each: impl FnMut(&str, &str) -> Result<()>,
    ) -> Result<()> {
        let (table, column) = span.table();
        self.each_user_totals(
            &format!(
                r#"SELECT "user", totals FROM {table} WHERE {column} >= ?1 AND {column} < ?2
                 ORDER BY {column}"#
            ),
            (from, to),
            each,
        )
    }

    fn each_user_totals(
        &self,
        sql: &str,
        (from, to): (u64, u64),
        mut each: impl FnMut(&str, &str) -> Result<()>,
    ) -> Result<()> {
        self.db.each(sql, &[&from, &to], |row| {
            each(&row.get::<String>(0)?, &row.get::<String>(1)?).map(|()| false)
        })
    }

    /// `user`'s rollups (totals and detail, JSON) of each day of `[from, to)`, in day order.
    pub fn each_user_day_rollup(
        &self,
        user: &str,
        (from, to): (u64, u64),
        mut each: impl FnMut(&str, &str) -> Result<()>,
    ) -> Result<()> {
        self.db.each(
            r#"SELECT totals, detail FROM rollup_users WHERE "user" = ?1 AND day >= ?2 AND day < ?3
             ORDER BY day"#,
            params![user, from, to],
            |row| each(&row.get::<String>(0)?, &row.get::<String>(1)?).map(|()| false),
        )
    }

    /// Jobs, CPU time, MPI time and users from the users' rollup columns of `spans`: each a
    /// kind of row and a half-open range of day numbers (of the first days of weeks or months).
    pub fn totals_of_spans(&self, spans: &[(Span, (u64, u64))]) -> Result<PeriodTotals> {
        let dialect = self.db.dialect();
        let selects: Vec<String> = spans
            .iter()
            .enumerate()
            .map(|(i, (span, _))| {
                let (table, column) = span.table();
                format!(
                    r#"SELECT "user", jobs, wall_ns, mpi_ns FROM {table}
                     WHERE {column} >= ?{} AND {column} < ?{}"#,
                    2 * i + 1,
                    2 * i + 2
                )
            })
            .collect();
        if selects.is_empty() {
            return Ok(PeriodTotals::default());
        }
        let sql = format!(
            r#"SELECT {}, {}, {}, count(DISTINCT "user") FROM ({}) AS spans"#,
            total(dialect, "jobs"),
            total(dialect, "wall_ns"),
            total(dialect, "mpi_ns"),
            selects.join(" UNION ALL ")
        );
        let bounds: Vec<u64> = spans
            .iter()
            .flat_map(|(_, (from, to))| [*from, *to])
            .collect();
        let params: Vec<&dyn rusqlite::ToSql> =
            bounds.iter().map(|b| b as &dyn rusqlite::ToSql).collect();
        self.db.query_one(&sql, &params, |row| {
            Ok(PeriodTotals {
                jobs: row.get::<f64>(0)? as u64,
                wall_ns: row.get::<f64>(1)? as u64,
                mpi_ns: row.get::<f64>(2)? as u64,
                users: row.get(3)?,
            })
        })
    }

    /// The jobs counted in the users' monthly rollups (all of them).
    pub fn jobs_in_rollups(&self) -> Result<u64> {
        let sql = format!(
            "SELECT {} FROM rollup_user_months",
            total(self.db.dialect(), "jobs")
        );
        let counted: f64 = self.db.query_one(&sql, &[], |row| row.get(0))?;
        Ok(counted as u64)
    }

    /// The applications of the days `[from, to)` whose names contain `lower` (lower case), with
    /// their jobs there, in name order, at most `limit`.
    pub fn applications_containing(
        &self,
        (from, to): (u64, u64),
        lower: &str,
        limit: usize,
    ) -> Result<Vec<(String, usize)>> {
        // Where a text is in another: SQLite's `instr`, PostgreSQL's `strpos`.
        let position = match self.db.dialect() {
            Dialect::Sqlite => "instr",
            Dialect::Postgres => "strpos",
        };
        self.db.query(
            &format!(
                "SELECT app, CAST(sum(jobs) AS BIGINT) FROM rollup_apps
                 WHERE day >= ?1 AND day < ?2 AND {position}(lower(app), ?3) > 0
                 GROUP BY app ORDER BY app LIMIT ?4"
            ),
            params![from, to, lower, limit],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    /// How many critical jobs ended in `[from_ms, to_ms)`: the whole hours' counts from
    /// `rollup_hour_criticals` (a month is 744 rows, where `critical_jobs` holds every critical
    /// job: 4 M rows at 4.8 M jobs), the part-hours at its ends from `critical_jobs`.
    pub fn critical_count(&self, from_ms: u64, to_ms: u64) -> Result<usize> {
        let (first_hour, end_hour) = (from_ms.div_ceil(HOUR_MS), to_ms / HOUR_MS);
        // The whole hours, and the part-hours before and after them; with no whole hour, all
        // of it is the part before.
        let (first_hour, end_hour, head_end, tail_start) = if first_hour < end_hour {
            (
                first_hour,
                end_hour,
                first_hour * HOUR_MS,
                end_hour * HOUR_MS,
            )
        } else {
            (0, 0, to_ms, to_ms)
        };
        self.db.query_one(
            "SELECT (SELECT CAST(coalesce(sum(jobs), 0) AS BIGINT) FROM rollup_hour_criticals
                     WHERE hour >= ?3 AND hour < ?4)
                 + (SELECT count(*) FROM critical_jobs WHERE end_ms >= ?1 AND end_ms < ?5)
                 + (SELECT count(*) FROM critical_jobs WHERE end_ms >= ?6 AND end_ms < ?2)",
            params![from_ms, to_ms, first_hour, end_hour, head_end, tail_start],
            |row| row.get(0),
        )
    }

    /// The critical jobs that ended in `[from_ms, to_ms)` (`count` of them), by end time or
    /// most CPU time first (`order`; any other than [`JobOrder::End`] is by CPU time), `limit`
    /// from the `offset`-th. By CPU time, an interval with many critical jobs reads the CPU
    /// index from the top (among all intervals' jobs: it stops at the page's last row, after
    /// about page end × all / the interval's jobs entries), one with few sorts its own (a few
    /// entries, where the index could be read to its end for them).
    pub fn critical_page(
        &self,
        (from_ms, to_ms): (u64, u64),
        order: JobOrder,
        count: usize,
        (limit, offset): (usize, usize),
    ) -> Result<Vec<CriticalEntry>> {
        self.db.query(
            &critical_query(self.db.dialect(), order, count),
            params![from_ms, to_ms, limit, offset],
            |row| {
                Ok(CriticalEntry {
                    end_ms: row.get(0)?,
                    key: row.get(1)?,
                    user: row.get(2)?,
                    wall_ns: row.get(3)?,
                    reasons: row.get(4)?,
                })
            },
        )
    }

    /// The end of the next step of a rollup rebuild that starts at `from`: the end time of the
    /// `step_jobs`-th job from there, or just after the newest job.
    pub fn rebuild_step_end(&self, from: u64, step_jobs: u64) -> Result<u64> {
        step_end(&self.db, from, step_jobs)
    }
}

impl ReadStore {
    /// The site's sums of each hour in `[from_hour, to_hour)` that has jobs, in hour order.
    pub fn hours_between(&self, from_hour: u64, to_hour: u64) -> Result<Vec<(u64, HourRow)>> {
        self.db.query(
            "SELECT hour, jobs, wall_ns, mpi_ns, imbalance_jobs, imbalance_weighted,
                 imbalance_wall_ns, escalated_traces
             FROM rollup_hours WHERE hour >= ?1 AND hour < ?2 ORDER BY hour",
            params![from_hour, to_hour],
            |row| {
                Ok((
                    row.get(0)?,
                    HourRow {
                        jobs: row.get(1)?,
                        wall_ns: row.get(2)?,
                        mpi_ns: row.get(3)?,
                        imbalance_jobs: row.get(4)?,
                        imbalance_weighted: row.get(5)?,
                        imbalance_wall_ns: row.get(6)?,
                        escalated_traces: row.get(7)?,
                    },
                ))
            },
        )
    }

    /// Call `each` with every row of `rollup_hour_groups` of `dimension` (its name) in the hours
    /// `[from_hour, to_hour)`: its hour, name and sums.
    pub fn each_hour_group(
        &self,
        dimension: &str,
        (from_hour, to_hour): (u64, u64),
        mut each: impl FnMut(u64, &str, GroupRow),
    ) -> Result<()> {
        self.db.each(
            "SELECT hour, name, jobs, wall_ns, mpi_ns FROM rollup_hour_groups
             WHERE dimension = ?1 AND hour >= ?2 AND hour < ?3",
            params![dimension, from_hour, to_hour],
            |row| {
                let sums = GroupRow {
                    jobs: row.get(2)?,
                    wall_ns: row.get(3)?,
                    mpi_ns: row.get(4)?,
                };
                each(row.get(0)?, &row.get::<String>(1)?, sums);
                Ok(false)
            },
        )
    }
}

impl crate::WriteStore {
    /// Note the thresholds of the critical list (`critical`) if none are noted.
    pub fn note_rollup_critical(&self, key: &str) -> Result<()> {
        self.db.execute(
            "INSERT INTO rollup_state (name, value) VALUES ('critical', ?1)
             ON CONFLICT DO NOTHING",
            &[&key],
        )?;
        Ok(())
    }

    /// Drop the tables a finished rebuild retired.
    pub fn drop_retired_rollups(&self) -> Result<()> {
        drop_tables(&self.db, "retired")
    }
}

impl WriteTx<'_> {
    /// A value of `rollup_state`.
    pub fn rollup_state(&self, name: &str) -> Result<Option<String>> {
        state(self.db, name)
    }

    pub fn set_rollup_state(&self, name: &str, value: &str) -> Result<()> {
        self.db.execute(
            "INSERT INTO rollup_state (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            &[&name, &value],
        )?;
        Ok(())
    }

    /// The stored site rollup (JSON) of `day` in `tables`.
    pub fn rollup_day(&self, tables: Tables, day: u64) -> Result<Option<String>> {
        let days = tables.name("rollup_days");
        self.db.query_opt(
            &format!("SELECT data FROM {days} WHERE day = ?1"),
            &[&day],
            |row| row.get(0),
        )
    }

    pub fn put_rollup_day(&self, tables: Tables, day: u64, data: &str) -> Result<()> {
        let days = tables.name("rollup_days");
        self.db.execute(
            &format!(
                "INSERT INTO {days} (day, data) VALUES (?1, ?2)
                 ON CONFLICT (day) DO UPDATE SET data = excluded.data"
            ),
            params![day, data],
        )?;
        Ok(())
    }

    /// The stored rollup (totals and detail, JSON) of `user` on `day` in `tables`.
    pub fn rollup_user_day(
        &self,
        tables: Tables,
        day: u64,
        user: &str,
    ) -> Result<Option<(String, String)>> {
        let users = tables.name("rollup_users");
        self.db.query_opt(
            &format!(r#"SELECT totals, detail FROM {users} WHERE day = ?1 AND "user" = ?2"#),
            params![day, user],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    pub fn put_rollup_user_day(
        &self,
        tables: Tables,
        day: u64,
        user: &str,
        row: &UserRow<'_>,
    ) -> Result<()> {
        let users = tables.name("rollup_users");
        self.db.execute(
            &format!(
                r#"INSERT INTO {users} (day, "user", jobs, wall_ns, mpi_ns, totals, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (day, "user") DO UPDATE SET jobs = excluded.jobs,
                     wall_ns = excluded.wall_ns, mpi_ns = excluded.mpi_ns,
                     totals = excluded.totals, detail = excluded.detail"#
            ),
            params![
                day,
                user,
                row.jobs,
                sql_ns(row.wall_ns),
                sql_ns(row.mpi_ns),
                row.totals,
                row.detail
            ],
        )?;
        Ok(())
    }

    /// The stored totals (JSON) of `user` in the week or month (`span`, not [`Span::Day`])
    /// starting on day `first` in `tables`.
    pub fn rollup_user_span(
        &self,
        tables: Tables,
        span: Span,
        first: u64,
        user: &str,
    ) -> Result<Option<String>> {
        let (table, column) = span.table();
        let table = tables.name(table);
        self.db.query_opt(
            &format!(r#"SELECT totals FROM {table} WHERE {column} = ?1 AND "user" = ?2"#),
            params![first, user],
            |row| row.get(0),
        )
    }

    /// Store `user`'s totals of a week or month (`span`, not [`Span::Day`]; `row.detail` is
    /// not kept).
    pub fn put_rollup_user_span(
        &self,
        tables: Tables,
        span: Span,
        first: u64,
        user: &str,
        row: &UserRow<'_>,
    ) -> Result<()> {
        let (table, column) = span.table();
        let table = tables.name(table);
        self.db.execute(
            &format!(
                r#"INSERT INTO {table} ({column}, "user", jobs, wall_ns, mpi_ns, totals)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT ({column}, "user") DO UPDATE SET jobs = excluded.jobs,
                     wall_ns = excluded.wall_ns, mpi_ns = excluded.mpi_ns,
                     totals = excluded.totals"#
            ),
            params![
                first,
                user,
                row.jobs,
                sql_ns(row.wall_ns),
                sql_ns(row.mpi_ns),
                row.totals
            ],
        )?;
        Ok(())
    }

    /// The stored rollups of `span` in `tables` of each of `keys` (the day number its row starts
    /// on, and the user) that has one: totals and detail (JSON; no detail for weeks and
    /// months). On PostgreSQL in one round trip.
    pub fn rollup_user_rows(
        &self,
        tables: Tables,
        span: Span,
        keys: &[(u64, &str)],
    ) -> Result<HashMap<(u64, String), (String, String)>> {
        let Some(firsts) = pg_bigints(self.db, keys.iter().map(|(first, _)| *first)) else {
            let mut rows = HashMap::new();
            for &(first, user) in keys {
                let row = match span {
                    Span::Day => self.rollup_user_day(tables, first, user)?,
                    Span::Week | Span::Month => self
                        .rollup_user_span(tables, span, first, user)?
                        .map(|totals| (totals, String::new())),
                };
                if let Some(row) = row {
                    rows.insert((first, user.to_string()), row);
                }
            }
            return Ok(rows);
        };
        let (table, column) = span.table();
        let table = tables.name(table);
        let detail = if span == Span::Day { "t.detail" } else { "''" };
        let users: Vec<&str> = keys.iter().map(|(_, user)| *user).collect();
        let sql = format!(
            r#"SELECT t.{column}, t."user", t.totals, {detail} FROM {table} AS t
             JOIN unnest(?1::BIGINT[], ?2::TEXT[]) AS k (first, "user")
             ON t.{column} = k.first AND t."user" = k."user""#
        );
        let mut rows = HashMap::new();
        let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&firsts, &users];
        for row in self.db.pg_session()?.query_arrays(&sql, &params)? {
            let first: i64 = row.get(0);
            rows.insert((first as u64, row.get(1)), (row.get(2), row.get(3)));
        }
        Ok(rows)
    }

    /// Store users' rollups of `span` in `tables` (the day number each row starts on, the user,
    /// the row; `detail` is kept for days only; each key once). On PostgreSQL in one round trip.
    pub fn put_rollup_user_rows(
        &self,
        tables: Tables,
        span: Span,
        rows: &[(u64, &str, UserRow<'_>)],
    ) -> Result<()> {
        let (firsts, jobs) = match (
            pg_bigints(self.db, rows.iter().map(|(first, _, _)| *first)),
            pg_bigints(self.db, rows.iter().map(|(_, _, row)| row.jobs)),
        ) {
            (Some(firsts), Some(jobs)) => (firsts, jobs),
            _ => {
                for (first, user, row) in rows {
                    match span {
                        Span::Day => self.put_rollup_user_day(tables, *first, user, row)?,
                        Span::Week | Span::Month => {
                            self.put_rollup_user_span(tables, span, *first, user, row)?
                        }
                    }
                }
                return Ok(());
            }
        };
        let (table, column) = span.table();
        let table = tables.name(table);
        let (detail_column, detail_param, detail_set) = if span == Span::Day {
            (", detail", ", ?7::TEXT[]", ", detail = excluded.detail")
        } else {
            ("", "", "")
        };
        let sql = format!(
            r#"INSERT INTO {table} ({column}, "user", jobs, wall_ns, mpi_ns, totals{detail_column})
             SELECT * FROM unnest(?1::BIGINT[], ?2::TEXT[], ?3::BIGINT[],
                 ?4::DOUBLE PRECISION[], ?5::DOUBLE PRECISION[], ?6::TEXT[]{detail_param})
             ON CONFLICT ({column}, "user") DO UPDATE SET jobs = excluded.jobs,
                 wall_ns = excluded.wall_ns, mpi_ns = excluded.mpi_ns,
                 totals = excluded.totals{detail_set}"#
        );
        let users: Vec<&str> = rows.iter().map(|(_, user, _)| *user).collect();
        let wall: Vec<f64> = rows.iter().map(|(_, _, row)| sql_ns(row.wall_ns)).collect();
        let mpi: Vec<f64> = rows.iter().map(|(_, _, row)| sql_ns(row.mpi_ns)).collect();
        let totals: Vec<&str> = rows.iter().map(|(_, _, row)| row.totals).collect();
        let details: Vec<&str> = rows.iter().map(|(_, _, row)| row.detail).collect();
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> =
            vec![&firsts, &users, &jobs, &wall, &mpi, &totals];
        if span == Span::Day {
            params.push(&details);
        }
        self.db.pg_session()?.query_arrays(&sql, &params)?;
        Ok(())
    }

    /// Add to each application's jobs on a day (`apps`: the day, the application and its new
    /// jobs; each day and application once); on PostgreSQL in one round trip.
    pub fn add_applications(&self, tables: Tables, apps: &[(u64, &str, u64)]) -> Result<()> {
        let (Some(days), Some(jobs)) = (
            pg_bigints(self.db, apps.iter().map(|(day, _, _)| *day)),
            pg_bigints(self.db, apps.iter().map(|(_, _, jobs)| *jobs)),
        ) else {
            return apps.iter().try_for_each(|&(day, app, jobs)| {
                self.add_application_jobs(tables, day, app, jobs)
            });
        };
        let names: Vec<&str> = apps.iter().map(|(_, app, _)| *app).collect();
        let sql = format!(
            "INSERT INTO {} AS t (day, app, jobs)
             SELECT * FROM unnest(?1::BIGINT[], ?2::TEXT[], ?3::BIGINT[])
             ON CONFLICT (day, app) DO UPDATE SET jobs = t.jobs + excluded.jobs",
            tables.name("rollup_apps")
        );
        self.db
            .pg_session()?
            .query_arrays(&sql, &[&days, &names, &jobs])?;
        Ok(())
    }

    /// Add `jobs` jobs of application `app` on `day`.
    fn add_application_jobs(&self, tables: Tables, day: u64, app: &str, jobs: u64) -> Result<()> {
        let apps = tables.name("rollup_apps");
        self.db.execute(
            &format!(
                "INSERT INTO {apps} AS t (day, app, jobs) VALUES (?1, ?2, ?3)
                 ON CONFLICT (day, app) DO UPDATE SET jobs = t.jobs + excluded.jobs"
            ),
            params![day, app, jobs],
        )?;
        Ok(())
    }

    /// Add each of `hours` (an hour and its sums; each hour once) to the site's sums of that
    /// hour in `tables`; on PostgreSQL in one round trip.
    pub fn add_rollup_hours(&self, tables: Tables, hours: &[(u64, HourRow)]) -> Result<()> {
        let (Some(numbers), Some(jobs), Some(imbalance_jobs), Some(traces)) = (
            pg_bigints(self.db, hours.iter().map(|(hour, _)| *hour)),
            pg_bigints(self.db, hours.iter().map(|(_, h)| h.jobs)),
            pg_bigints(self.db, hours.iter().map(|(_, h)| h.imbalance_jobs)),
            pg_bigints(self.db, hours.iter().map(|(_, h)| h.escalated_traces)),
        ) else {
            return hours
                .iter()
                .try_for_each(|(hour, sums)| self.add_rollup_hour(tables, *hour, sums));
        };
        let reals =
            |of: fn(&HourRow) -> f64| -> Vec<f64> { hours.iter().map(|(_, h)| of(h)).collect() };
        let sql = format!(
            "INSERT INTO {} AS t (hour, jobs, wall_ns, mpi_ns, imbalance_jobs,
                 imbalance_weighted, imbalance_wall_ns, escalated_traces)
             SELECT * FROM unnest(?1::BIGINT[], ?2::BIGINT[], ?3::DOUBLE PRECISION[],
                 ?4::DOUBLE PRECISION[], ?5::BIGINT[], ?6::DOUBLE PRECISION[],
                 ?7::DOUBLE PRECISION[], ?8::BIGINT[])
             {HOUR_SUMS_ADDED}",
            tables.name("rollup_hours")
        );
        self.db.pg_session()?.query_arrays(
            &sql,
            &[
                &numbers,
                &jobs,
                &reals(|h| h.wall_ns),
                &reals(|h| h.mpi_ns),
                &imbalance_jobs,
                &reals(|h| h.imbalance_weighted),
                &reals(|h| h.imbalance_wall_ns),
                &traces,
            ],
        )?;
        Ok(())
    }

    /// Add `sums` to the site's sums of `hour` in `tables`.
    fn add_rollup_hour(&self, tables: Tables, hour: u64, sums: &HourRow) -> Result<()> {
        let hours = tables.name("rollup_hours");
        self.db.execute(
            &format!(
                "INSERT INTO {hours} AS t (hour, jobs, wall_ns, mpi_ns, imbalance_jobs,
                     imbalance_weighted, imbalance_wall_ns, escalated_traces)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 {HOUR_SUMS_ADDED}"
            ),
            params![
                hour,
                sums.jobs,
                sums.wall_ns,
                sums.mpi_ns,
                sums.imbalance_jobs,
                sums.imbalance_weighted,
                sums.imbalance_wall_ns,
                sums.escalated_traces
            ],
        )?;
        Ok(())
    }

    /// Add each of `groups` (a dimension's name, an hour, a name of that dimension and its
    /// sums; each dimension, hour and name once) to the sums of that name in `tables`; on
    /// PostgreSQL in one round trip.
    pub fn add_rollup_hour_groups(
        &self,
        tables: Tables,
        groups: &[(&str, u64, &str, GroupRow)],
    ) -> Result<()> {
        let (Some(hours), Some(jobs)) = (
            pg_bigints(self.db, groups.iter().map(|(_, hour, _, _)| *hour)),
            pg_bigints(self.db, groups.iter().map(|(_, _, _, g)| g.jobs)),
        ) else {
            return groups.iter().try_for_each(|(dimension, hour, name, sums)| {
                self.add_rollup_hour_group(tables, dimension, *hour, name, sums)
            });
        };
        let dimensions: Vec<&str> = groups.iter().map(|(dimension, ..)| *dimension).collect();
        let names: Vec<&str> = groups.iter().map(|(_, _, name, _)| *name).collect();
        let wall: Vec<f64> = groups.iter().map(|(.., g)| g.wall_ns).collect();
        let mpi: Vec<f64> = groups.iter().map(|(.., g)| g.mpi_ns).collect();
        let sql = format!(
            "INSERT INTO {} AS t (dimension, hour, name, jobs, wall_ns, mpi_ns)
             SELECT * FROM unnest(?1::TEXT[], ?2::BIGINT[], ?3::TEXT[], ?4::BIGINT[],
                 ?5::DOUBLE PRECISION[], ?6::DOUBLE PRECISION[])
             {GROUP_SUMS_ADDED}",
            tables.name("rollup_hour_groups")
        );
        self.db
            .pg_session()?
            .query_arrays(&sql, &[&dimensions, &hours, &names, &jobs, &wall, &mpi])?;
        Ok(())
    }

    /// Add `sums` to those of `name` of `dimension` (its name) in `hour` in `tables`.
    fn add_rollup_hour_group(
        &self,
        tables: Tables,
        dimension: &str,
        hour: u64,
        name: &str,
        sums: &GroupRow,
    ) -> Result<()> {
        let groups = tables.name("rollup_hour_groups");
        self.db.execute(
            &format!(
                "INSERT INTO {groups} AS t (dimension, hour, name, jobs, wall_ns, mpi_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 {GROUP_SUMS_ADDED}"
            ),
            params![dimension, hour, name, sums.jobs, sums.wall_ns, sums.mpi_ns],
        )?;
        Ok(())
    }

    /// Put each of `entries` on the critical list of `tables` (of a job there twice, the last;
    /// on PostgreSQL in one round trip), and count again the critical jobs of their hours.
    pub fn put_criticals(&self, tables: Tables, entries: &[CriticalEntry]) -> Result<()> {
        self.insert_criticals(tables, entries)?;
        let hours: BTreeSet<u64> = entries.iter().map(|c| c.end_ms / HOUR_MS).collect();
        self.recount_critical_hours(tables, &hours)
    }

    /// Put `c` on the critical list of `tables` ([`WriteTx::put_criticals`] of one).
    pub fn put_critical(&self, tables: Tables, c: &CriticalEntry) -> Result<()> {
        self.put_criticals(tables, std::slice::from_ref(c))
    }

    /// Set the count of critical jobs of each of `hours` in `tables` (`rollup_hour_criticals`)
    /// to the rows of `critical_jobs` in that hour. Counted again rather than added to, so that
    /// a job put twice (a duplicate record, a step of a rebuild read again) counts once; the
    /// write lock ([`crate::WriteStore::in_transaction`]) keeps other writers' rows out of the
    /// count until they commit. An hour's rows are a range of the primary key: a few thousand
    /// at 5 M jobs a month, for the few hours an ingest batch or a rebuild step touches.
    fn recount_critical_hours(&self, tables: Tables, hours: &BTreeSet<u64>) -> Result<()> {
        let (counts, critical) = (
            tables.name("rollup_hour_criticals"),
            tables.name("critical_jobs"),
        );
        let sql = format!(
            "INSERT INTO {counts} (hour, jobs)
             SELECT CAST(?1 AS BIGINT), count(*) FROM {critical} WHERE end_ms >= ?2 AND end_ms < ?3
             ON CONFLICT (hour) DO UPDATE SET jobs = excluded.jobs"
        );
        for &hour in hours {
            self.db
                .execute(&sql, params![hour, hour * HOUR_MS, (hour + 1) * HOUR_MS])?;
        }
        Ok(())
    }

    /// Insert or replace `entries` in `critical_jobs` of `tables`.
    fn insert_criticals(&self, tables: Tables, entries: &[CriticalEntry]) -> Result<()> {
        let (Some(ends), Some(walls)) = (
            pg_bigints(self.db, entries.iter().map(|c| c.end_ms)),
            pg_bigints(self.db, entries.iter().map(|c| c.wall_ns)),
        ) else {
            return entries
                .iter()
                .try_for_each(|c| self.insert_critical(tables, c));
        };
        // One row a job: a statement's upsert may not change a row twice.
        let mut last: HashMap<(i64, &str), usize> = HashMap::new();
        for (i, c) in entries.iter().enumerate() {
            last.insert((ends[i], c.key.as_str()), i);
        }
        let mut kept: Vec<usize> = last.into_values().collect();
        kept.sort_unstable();
        let critical = tables.name("critical_jobs");
        let sql = format!(
            r#"INSERT INTO {critical} (end_ms, key, "user", wall_ns, reasons)
             SELECT * FROM unnest(?1::BIGINT[], ?2::TEXT[], ?3::TEXT[], ?4::BIGINT[], ?5::TEXT[])
             ON CONFLICT (end_ms, key) DO UPDATE SET "user" = excluded."user",
                 wall_ns = excluded.wall_ns, reasons = excluded.reasons"#
        );
        let ends: Vec<i64> = kept.iter().map(|&i| ends[i]).collect();
        let keys: Vec<&str> = kept.iter().map(|&i| entries[i].key.as_str()).collect();
        let users: Vec<&str> = kept.iter().map(|&i| entries[i].user.as_str()).collect();
        let walls: Vec<i64> = kept.iter().map(|&i| walls[i]).collect();
        let reasons: Vec<&str> = kept.iter().map(|&i| entries[i].reasons.as_str()).collect();
        let params: [&(dyn postgres::types::ToSql + Sync); 5] =
            [&ends, &keys, &users, &walls, &reasons];
        self.db.pg_session()?.query_arrays(&sql, &params)?;
        Ok(())
    }

    fn insert_critical(&self, tables: Tables, c: &CriticalEntry) -> Result<()> {
        let critical = tables.name("critical_jobs");
        self.db.execute(
            &format!(
                r#"INSERT INTO {critical} (end_ms, key, "user", wall_ns, reasons)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (end_ms, key) DO UPDATE SET "user" = excluded."user",
                     wall_ns = excluded.wall_ns, reasons = excluded.reasons"#
            ),
            params![c.end_ms, c.key, c.user, c.wall_ns, c.reasons],
        )?;
        Ok(())
    }

    /// Empty rebuilt tables, made as the live ones are (without their secondary indexes, made
    /// when swapped in); any earlier rebuilt or retired ones are dropped.
    pub fn create_rebuilt_rollups(&self) -> Result<()> {
        drop_tables(self.db, "rebuilt")?;
        drop_tables(self.db, "retired")?;
        for table in TABLES {
            let rebuilt = Tables::Rebuilt.name(table);
            match self.db {
                Db::Sqlite(conn) => {
                    let sql: String = conn.query_row(
                        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
                        [table],
                        |row| row.get(0),
                    )?;
                    conn.execute_batch(&sql.replacen(table, &rebuilt, 1))?;
                }
                Db::Postgres(_) => {
                    // The columns as they are; the primary key under a name of the rebuilt
                    // table's, which the swap gives the live one's.
                    let key: String = self.db.query_one(
                        "SELECT pg_get_constraintdef(oid) FROM pg_constraint
                         WHERE conrelid = to_regclass(?1) AND contype = 'p'",
                        &[&table],
                        |row| row.get(0),
                    )?;
                    self.db.batch(&format!(
                        "CREATE TABLE {rebuilt} (LIKE {table} INCLUDING ALL EXCLUDING INDEXES);
                         ALTER TABLE {rebuilt} ADD CONSTRAINT {rebuilt}_pkey {key};"
                    ))?;
                }
            }
        }
        Ok(())
    }

    /// The row ids of the jobs that ended in `[from, to)` (sorted).
    pub fn job_ids_ended_between(&self, from: u64, to: u64) -> Result<Vec<i64>> {
        self.db.query(
            "SELECT id FROM jobs WHERE end_ms >= ?1 AND end_ms < ?2 ORDER BY id",
            params![from, to],
            |row| row.get(0),
        )
    }

    /// Whether a job ended at `end_ms` or later.
    pub fn has_jobs_from(&self, end_ms: u64) -> Result<bool> {
        self.db.query_one(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE end_ms >= ?1)",
            &[&end_ms],
            |row| row.get(0),
        )
    }

    /// Put the rebuilt rollups in the place of the live ones: the live tables are renamed
    /// `retired_<table>` (dropped after the commit, [`crate::WriteStore::drop_retired_rollups`]),
    /// the rebuilt ones take their names, and the live tables' secondary indexes are made again
    /// on them. `critical` is noted as the thresholds of the critical list, and the rebuild's
    /// state and staleness are cleared.
    pub fn swap_in_rebuilt(&self, critical: &str) -> Result<()> {
        // Each live table's secondary indexes: their names and the statements that make them.
        let index_sql = match self.db.dialect() {
            Dialect::Sqlite => {
                "SELECT name, sql FROM sqlite_master
                 WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL"
            }
            Dialect::Postgres => {
                "SELECT c.relname::TEXT, pg_get_indexdef(c.oid) FROM pg_index i
                 JOIN pg_class c ON c.oid = i.indexrelid
                 WHERE i.indrelid = to_regclass(?1) AND NOT i.indisprimary"
            }
        };
        let mut indexes: Vec<(String, String)> = Vec::new();
        for table in TABLES {
            indexes.extend(
                self.db
                    .query(index_sql, &[&table], |row| Ok((row.get(0)?, row.get(1)?)))?,
            );
        }
        for (name, _) in &indexes {
            self.db.batch(&format!("DROP INDEX \"{name}\""))?;
        }
        for table in TABLES {
            let rebuilt = Tables::Rebuilt.name(table);
            self.db.batch(&format!(
                "ALTER TABLE {table} RENAME TO retired_{table};
                 ALTER TABLE {rebuilt} RENAME TO {table};"
            ))?;
            if self.db.dialect() == Dialect::Postgres {
                // A primary key's index is named in the schema: the live one's name goes with
                // the live table.
                self.db.batch(&format!(
                    "ALTER TABLE retired_{table} RENAME CONSTRAINT {table}_pkey
                         TO retired_{table}_pkey;
                     ALTER TABLE {table} RENAME CONSTRAINT {rebuilt}_pkey TO {table}_pkey;"
                ))?;
            }
        }
        for (_, sql) in indexes {
            self.db.batch(&sql)?;
        }
        self.set_rollup_state("critical", critical)?;
        self.db.execute(
            "DELETE FROM rollup_state WHERE name IN ('stale', 'rebuild_to', 'rebuild_critical')",
            &[],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WriteStore;

    /// Both ways of reading the critical list by CPU time give the same pages, and the index
    /// way sorts nothing.
    #[test]
    fn the_critical_list_by_cpu_reads_the_same_rows_from_its_index() {
        const PAGE_ROWS: usize = 100;
        let mut db = WriteStore::in_memory().unwrap();
        let (november, october) = (
            (1_000_000_000_000, 1_002_592_000_000),
            (997_408_000_000, 1_000_000_000_000),
        );
        let mut wanted = Vec::new();
        let tx = db.transaction().unwrap();
        for n in 0..CRITICAL_SORTED_AS_READ as u64 + 500 {
            // Ties on CPU time (n % 997) are broken by key; October's rows are read past.
            for (period, month) in [(november, "nov"), (october, "oct")] {
                let entry = CriticalEntry {
                    end_ms: period.0 + n * 7_919 % 2_000_000_000,
                    key: format!("{month}{:05}", n * 31 % 10_007),
                    user: "u".into(),
                    wall_ns: n % 997,
                    reasons: "r".into(),
                };
                tx.put_critical(Tables::Live, &entry).unwrap();
                if month == "nov" {
                    wanted.push(entry);
                }
            }
        }
        tx.commit().unwrap();
        wanted.sort_by(|a, b| b.wall_ns.cmp(&a.wall_ns).then_with(|| a.key.cmp(&b.key)));
        for from in [0, 50, CRITICAL_SORTED_AS_READ + 470] {
            let page: Vec<CriticalEntry> =
                wanted.iter().skip(from).take(PAGE_ROWS).cloned().collect();
            for count in [wanted.len(), 1] {
                let rows = db
                    .critical_page(november, JobOrder::Cpu, count, (PAGE_ROWS, from))
                    .unwrap();
                assert_eq!(rows, page, "from {from}, count {count}");
            }
        }
        // Many critical jobs: the page is read in the index's order, nothing sorted.
        let query = critical_query(Dialect::Sqlite, JobOrder::Cpu, CRITICAL_SORTED_AS_READ + 1);
        let plan = db.query_plan(&query, &[&0, &9, &PAGE_ROWS, &0]);
        assert!(
            plan.iter()
                .any(|step| step.contains("critical_jobs_by_cpu"))
                && !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }
}
