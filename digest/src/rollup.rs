//! Figures kept as the data arrives: the sums the admin pages show, per UTC day (site-wide:
//! `rollup_days`), per day and user (`rollup_users`), per calendar month and user (the totals
//! alone: `rollup_user_months`, so that a month's users list, a user's page and the search add
//! up one row per user, not one per day and user) and per day and application (`rollup_apps`:
//! the search by application), per UTC hour (`rollup_hours`, site-wide, and
//! `rollup_hour_groups`, per application, Slurm account and partition: the metrics' windows,
//! [`crate::metrics`]), plus the critical jobs (`critical_jobs`), kept by ingest in the
//! same transaction as the jobs (see
//! [`crate::ingest::writer`]), so that a week's or a month's pages add up a few thousand rows
//! and never read every job. [`rebuild`] (`mpistat rebuild-rollups`) makes them again exactly
//! from the stored jobs, in committed steps beside the live ones while ingest goes on, and swaps
//! them in at the end ([`rebuild_in_steps`]); a database that has jobs but no rollups yet (upgraded from a schema
//! before them), or whose critical jobs were chosen with other `[site_report]` thresholds, is
//! rebuilt when a command opens it ([`ensure_built`]).
//!
//! Each row holds a [`DayRollup`] or a user's [`UserWeek`] as JSON (the user's [`Totals`]
//! apart, with its job count and times as columns, so that the users list and the trend need
//! no routine table). Adding two rollups ([`DayRollup::merge`], [`UserWeek::merge`]) gives the
//! rollup of both sets of jobs; a job is counted once, when ingest stores it as new, and only
//! if its record is readable and the one its index was filed for (ingest decodes it once for
//! this, and rejects a job whose record is not as `corrupt` instead of storing it). Ingest's
//! decoder threads count each record in the rollups of the jobs they were handed and drop it;
//! the reading thread adds those up per batch ([`Rollups::merge`]), and the writer saves them
//! when they count exactly the batch's new jobs, or makes them again from the new jobs'
//! records when not (some were stored before, or rejected: [`crate::ingest::writer`]).
//!
//! An interval's sums are added in time order: its days before its first whole month, its
//! whole months, its days after them ([`Spans`]).

use crate::db::Database;
use crate::mail::content::{RoutineSums, Totals, UserWeek};
use crate::site_report::summary::{
    add_histogram, imbalance_percent, job_cpu_class, routine_group, size_class, JOB_CPU_CLASSES,
};
use mpistat_record::{Binding, JobRecord};
use mpistat_site::SiteReportConfig;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// A day in milliseconds: rollups are per UTC day (`end_ms / DAY_MS`).
pub const DAY_MS: u64 = 86_400_000;

/// An hour in milliseconds: the metrics' rollups are per UTC hour (`end_ms / HOUR_MS`).
pub const HOUR_MS: u64 = 3_600_000;

/// Points of the imbalance scatter chart kept per day: the jobs with the most CPU time.
pub const POINTS_PER_DAY: usize = 200;

/// The index of `language` in the per-language arrays (Fortran, C).
pub fn language_index(binding: Binding) -> usize {
    match binding {
        Binding::Fortran => 0,
        Binding::C => 1,
    }
}

/// The Slurm jobs of one account or partition.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct SlurmSums {
    pub totals: Totals,
    /// Imbalance percent × CPU time, and that CPU time, over the jobs with the figures.
    pub imbalance_weighted: f64,
    pub imbalance_wall: f64,
    /// Critical jobs among them.
    pub critical: usize,
}

impl SlurmSums {
    fn merge(&mut self, other: &SlurmSums) {
        self.totals.merge(&other.totals);
        self.imbalance_weighted += other.imbalance_weighted;
        self.imbalance_wall += other.imbalance_wall;
        self.critical += other.critical;
    }
}

/// A job in the imbalance chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImbalancePoint {
    pub end_ms: u64,
    pub key: String,
    pub wall_ns: u64,
    pub ranks: u32,
    /// Critical-path imbalance, percent of wall time.
    pub imbalance: f64,
    pub label: String,
}

/// The site-wide sums of one day (or of several, merged).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct DayRollup {
    pub total: Totals,
    /// By size class (lowest rank count of the class): label and totals.
    pub by_size: BTreeMap<u32, (String, Totals)>,
    /// Fortran, C.
    pub by_language: [Totals; 2],
    /// Per language: ranks summed over jobs, and ranks × CPU time.
    pub language_ranks: [(u64, f64); 2],
    /// By [`JOB_CPU_CLASSES`], then language.
    pub by_job_cpu: Vec<[Totals; 2]>,
    pub histogram: Vec<u64>,
    pub measured_sync_ns: u64,
    pub jobs_with_imbalance: usize,
    /// Routine group: jobs using it, and their CPU time.
    pub groups: BTreeMap<String, (usize, u64)>,
    /// Routine sums per language, then size class.
    pub routines: [BTreeMap<u32, RoutineSums>; 2],
    pub by_account: BTreeMap<String, SlurmSums>,
    pub by_partition: BTreeMap<String, SlurmSums>,
    /// The imbalance chart's jobs: the [`POINTS_PER_DAY`] biggest of each day.
    pub points: Vec<ImbalancePoint>,
}

impl DayRollup {
    /// Add one job (`critical`: it is on the critical list).
    pub fn add(&mut self, job: &JobRecord, critical: bool) {
        self.total.add(job);
        let (low, label) = size_class(job.ranks);
        self.by_size
            .entry(low)
            .or_insert((label, Totals::default()))
            .1
            .add(job);
        let language = language_index(job.binding);
        self.by_language[language].add(job);
        let ranks = &mut self.language_ranks[language];
        ranks.0 += u64::from(job.ranks);
        ranks.1 += f64::from(job.ranks) * job.wall_ns.sum as f64;
        if self.by_job_cpu.is_empty() {
            self.by_job_cpu = vec![Default::default(); JOB_CPU_CLASSES.len()];
        }
        self.by_job_cpu[job_cpu_class(job)][language].add(job);
        let mut groups = std::collections::BTreeSet::new();
        for r in &job.routines {
            add_histogram(&mut self.histogram, &r.hist);
            self.measured_sync_ns += r.sync_ns.unwrap_or(0);
            groups.extend(routine_group(&r.name, &r.class));
        }
        for group in groups {
            let entry = self.groups.entry(group.to_string()).or_default();
            entry.0 += 1;
            entry.1 = entry.1.saturating_add(job.wall_ns.sum);
        }
        self.routines[language].entry(low).or_default().add(job);
        let imbalance = imbalance_percent(job);
        if let Some(slurm) = &job.slurm {
            for (groups, name) in [
                (&mut self.by_account, slurm.account.as_deref()),
                (&mut self.by_partition, slurm.partition.as_deref()),
            ] {
                let group = groups
                    .entry(name.unwrap_or("(none)").to_string())
                    .or_default();
                group.totals.add(job);
                if let Some(i) = imbalance {
                    group.imbalance_weighted += i * job.wall_ns.sum as f64;
                    group.imbalance_wall += job.wall_ns.sum as f64;
                }
                group.critical += usize::from(critical);
            }
        }
        if let Some(y) = imbalance {
            self.jobs_with_imbalance += 1;
            self.keep_points(vec![ImbalancePoint {
                end_ms: job.end_unix_ms,
                key: job.key(),
                wall_ns: job.wall_ns.sum,
                ranks: job.ranks,
                imbalance: y,
                label: format!("{} job {}: {y:.1} %", job.user, job.job_id),
            }]);
        }
    }

    /// Keep the biggest jobs of the points and `more` (per day: merged days keep all).
    fn keep_points(&mut self, more: Vec<ImbalancePoint>) {
        self.points.extend(more);
        self.points.sort_by(|a, b| {
            b.wall_ns
                .cmp(&a.wall_ns)
                .then_with(|| a.key.cmp(&b.key))
                .then_with(|| a.end_ms.cmp(&b.end_ms))
        });
        self.points.truncate(POINTS_PER_DAY);
    }

    /// Add the sums of other jobs of the same day (`same_day`), or of another day.
    pub fn merge(&mut self, other: &DayRollup, same_day: bool) {
        self.total.merge(&other.total);
        for (low, (label, totals)) in &other.by_size {
            self.by_size
                .entry(*low)
                .or_insert((label.clone(), Totals::default()))
                .1
                .merge(totals);
        }
        for language in 0..2 {
            self.by_language[language].merge(&other.by_language[language]);
            self.language_ranks[language].0 += other.language_ranks[language].0;
            self.language_ranks[language].1 += other.language_ranks[language].1;
            for (low, sums) in &other.routines[language] {
                self.routines[language].entry(*low).or_default().merge(sums);
            }
        }
        if self.by_job_cpu.is_empty() {
            self.by_job_cpu = vec![Default::default(); JOB_CPU_CLASSES.len()];
        }
        for (mine, theirs) in self.by_job_cpu.iter_mut().zip(&other.by_job_cpu) {
            mine[0].merge(&theirs[0]);
            mine[1].merge(&theirs[1]);
        }
        add_histogram(&mut self.histogram, &other.histogram);
        self.measured_sync_ns += other.measured_sync_ns;
        self.jobs_with_imbalance += other.jobs_with_imbalance;
        for (group, (jobs, wall)) in &other.groups {
            let entry = self.groups.entry(group.clone()).or_default();
            entry.0 += jobs;
            entry.1 += wall;
        }
        for (mine, theirs) in [
            (&mut self.by_account, &other.by_account),
            (&mut self.by_partition, &other.by_partition),
        ] {
            for (name, sums) in theirs {
                mine.entry(name.clone()).or_default().merge(sums);
            }
        }
        if same_day {
            self.keep_points(other.points.clone());
        } else {
            self.points.extend(other.points.iter().cloned());
        }
    }
}

/// The site's sums of the jobs that ended in one UTC hour (or several, merged), as
/// `rollup_hours` keeps them for the metrics ([`crate::metrics`]).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct HourSums {
    pub jobs: u64,
    /// CPU time (wall time summed over ranks) and MPI time, in nanoseconds.
    pub wall_ns: f64,
    pub mpi_ns: f64,
    /// The jobs with critical-path imbalance figures ([`imbalance_percent`]): how many, their
    /// imbalance percent × CPU time, and their CPU time.
    pub imbalance_jobs: u64,
    pub imbalance_weighted: f64,
    pub imbalance_wall_ns: f64,
    /// Jobs traced because the escalation rule put them on the escalation list.
    pub escalated_traces: u64,
}

impl HourSums {
    fn add(&mut self, job: &JobRecord) {
        let wall = job.wall_ns.sum as f64;
        self.jobs += 1;
        self.wall_ns += wall;
        self.mpi_ns += job.mpi_ns.sum as f64;
        if let Some(imbalance) = imbalance_percent(job) {
            self.imbalance_jobs += 1;
            self.imbalance_weighted += imbalance * wall;
            self.imbalance_wall_ns += wall;
        }
        let escalated = job.trace.as_ref().is_some_and(|t| t.reason == "escalation");
        self.escalated_traces += u64::from(escalated);
    }

    pub fn merge(&mut self, other: &HourSums) {
        self.jobs += other.jobs;
        self.wall_ns += other.wall_ns;
        self.mpi_ns += other.mpi_ns;
        self.imbalance_jobs += other.imbalance_jobs;
        self.imbalance_weighted += other.imbalance_weighted;
        self.imbalance_wall_ns += other.imbalance_wall_ns;
        self.escalated_traces += other.escalated_traces;
    }
}

/// What the metrics name the biggest of, per hour ([`GroupSums`] in `rollup_hour_groups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    /// [`JobRecord::application`]: an interpreter's script or module, else the executable.
    Application,
    /// The Slurm account and partition of a Slurm job.
    Account,
    Partition,
}

impl Dimension {
    pub const ALL: [Dimension; 3] = [
        Dimension::Application,
        Dimension::Account,
        Dimension::Partition,
    ];

    /// Its name, in the table and in the metrics' names and labels.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Application => "application",
            Dimension::Account => "account",
            Dimension::Partition => "partition",
        }
    }

    /// What `job` is of this dimension, if it is of one (a job without Slurm facts has no
    /// account or partition; an empty name is none).
    fn of(self, job: &JobRecord) -> Option<&str> {
        let slurm = job.slurm.as_ref();
        match self {
            Dimension::Application => Some(job.application()),
            Dimension::Account => slurm.and_then(|s| s.account.as_deref()),
            Dimension::Partition => slurm.and_then(|s| s.partition.as_deref()),
        }
        .filter(|name| !name.is_empty())
    }
}

/// The jobs of one application, account or partition in an hour (or several, merged).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct GroupSums {
    pub jobs: u64,
    /// CPU time and MPI time, in nanoseconds.
    pub wall_ns: f64,
    pub mpi_ns: f64,
}

impl GroupSums {
    fn add(&mut self, job: &JobRecord) {
        self.jobs += 1;
        self.wall_ns += job.wall_ns.sum as f64;
        self.mpi_ns += job.mpi_ns.sum as f64;
    }

    pub fn merge(&mut self, other: &GroupSums) {
        self.jobs += other.jobs;
        self.wall_ns += other.wall_ns;
        self.mpi_ns += other.mpi_ns;
    }

    /// Take `other`'s jobs out again (counted in these sums before).
    pub fn remove(&mut self, other: &GroupSums) {
        self.jobs = self.jobs.saturating_sub(other.jobs);
        self.wall_ns -= other.wall_ns;
        self.mpi_ns -= other.mpi_ns;
    }
}

/// A job on the critical list, as `critical_jobs` keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct CriticalRow {
    pub end_ms: u64,
    pub key: String,
    pub user: String,
    pub wall_ns: u64,
    pub reasons: String,
}

/// Why `job` is critical under `thresholds` (empty: it is not).
pub fn critical_reasons(job: &JobRecord, thresholds: &SiteReportConfig) -> Vec<String> {
    let mut reasons = Vec::new();
    if (job.wall_ns.sum as f64 / 3.6e12) < thresholds.critical_min_cpu_hours {
        return reasons;
    }
    let mpi = 100.0 * job.mpi_fraction();
    if mpi >= thresholds.critical_mpi_percent {
        reasons.push(format!("MPI {mpi:.1} %"));
    }
    if let Some(imbalance) =
        imbalance_percent(job).filter(|i| *i >= thresholds.critical_imbalance_percent)
    {
        reasons.push(format!("imbalance {imbalance:.1} %"));
    }
    reasons
}

/// Rollups of some jobs, made in memory (in parts, [`Rollups::merge`]) and then added to the
/// stored ones ([`Rollups::save`]).
pub struct Rollups {
    thresholds: SiteReportConfig,
    days: BTreeMap<u64, DayRollup>,
    users: BTreeMap<(u64, String), UserWeek>,
    /// Jobs per day and application.
    apps: BTreeMap<(u64, String), u64>,
    critical: Vec<CriticalRow>,
    hours: BTreeMap<u64, HourSums>,
    /// Per hour, application, account and partition.
    groups: BTreeMap<(Dimension, u64, String), GroupSums>,
}

impl Rollups {
    pub fn new(thresholds: &SiteReportConfig) -> Rollups {
        Rollups {
            thresholds: thresholds.clone(),
            days: BTreeMap::new(),
            users: BTreeMap::new(),
            apps: BTreeMap::new(),
            critical: Vec::new(),
            hours: BTreeMap::new(),
            groups: BTreeMap::new(),
        }
    }

    /// Count a job newly stored.
    pub fn add(&mut self, job: &JobRecord) {
        let day = job.end_unix_ms / DAY_MS;
        let reasons = critical_reasons(job, &self.thresholds);
        if !reasons.is_empty() {
            self.critical.push(CriticalRow {
                end_ms: job.end_unix_ms,
                key: job.key(),
                user: job.user.clone(),
                wall_ns: job.wall_ns.sum,
                reasons: reasons.join(", "),
            });
        }
        self.days
            .entry(day)
            .or_default()
            .add(job, !reasons.is_empty());
        self.users
            .entry((day, job.user.clone()))
            .or_default()
            .add(job);
        *self
            .apps
            .entry((day, job.application().to_string()))
            .or_default() += 1;
        let hour = job.end_unix_ms / HOUR_MS;
        self.hours.entry(hour).or_default().add(job);
        for dimension in Dimension::ALL {
            if let Some(name) = dimension.of(job) {
                self.groups
                    .entry((dimension, hour, name.to_string()))
                    .or_default()
                    .add(job);
            }
        }
    }

    /// Add the rollups of other jobs (made with the same thresholds).
    pub fn merge(&mut self, other: Rollups) {
        for (day, new) in other.days {
            match self.days.entry(day) {
                Entry::Occupied(mut mine) => mine.get_mut().merge(&new, true),
                Entry::Vacant(slot) => {
                    slot.insert(new);
                }
            }
        }
        for (day_user, new) in other.users {
            match self.users.entry(day_user) {
                Entry::Occupied(mut mine) => mine.get_mut().merge(&new),
                Entry::Vacant(slot) => {
                    slot.insert(new);
                }
            }
        }
        for (day_app, jobs) in other.apps {
            *self.apps.entry(day_app).or_default() += jobs;
        }
        self.critical.extend(other.critical);
        for (hour, new) in other.hours {
            self.hours.entry(hour).or_default().merge(&new);
        }
        for (group, new) in other.groups {
            self.groups.entry(group).or_default().merge(&new);
        }
    }

    /// Whether they count no job.
    pub fn is_empty(&self) -> bool {
        self.days.is_empty()
    }

    /// Add these rollups to the stored ones in `tables` (in the caller's transaction).
    pub fn save(self, conn: &Connection, tables: Tables) -> anyhow::Result<()> {
        let [days, users, user_months, apps, critical, hours, groups] =
            TABLES.map(|table| tables.name(table));
        let mut get_day =
            conn.prepare_cached(&format!("SELECT data FROM {days} WHERE day = ?1"))?;
        let mut put_day = conn.prepare_cached(&format!(
            "INSERT OR REPLACE INTO {days} (day, data) VALUES (?1, ?2)"
        ))?;
        for (day, new) in self.days {
            let stored: Option<String> = get_day.query_row([day], |row| row.get(0)).optional()?;
            let data = match stored {
                Some(json) => {
                    let mut stored: DayRollup = serde_json::from_str(&json)?;
                    stored.merge(&new, true);
                    stored
                }
                None => new,
            };
            put_day.execute(params![day, serde_json::to_string(&data)?])?;
        }
        let mut get_user = conn.prepare_cached(&format!(
            "SELECT totals, detail FROM {users} WHERE day = ?1 AND user = ?2"
        ))?;
        let mut put_user = conn.prepare_cached(&format!(
            "INSERT OR REPLACE INTO {users} (day, user, jobs, wall_ns, mpi_ns, totals, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ))?;
        // The new totals by month and user, added in day order.
        let mut months: BTreeMap<(u64, String), Totals> = BTreeMap::new();
        for ((day, user), new) in &self.users {
            months
                .entry((month_of(*day).0, user.clone()))
                .or_default()
                .merge(&new.totals);
        }
        for ((day, user), new) in self.users {
            let stored: Option<(String, String)> = get_user
                .query_row(params![day, user], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()?;
            let week = match stored {
                Some((totals, detail)) => {
                    let mut stored = user_week(&totals, &detail)?;
                    stored.merge(&new);
                    stored
                }
                None => new,
            };
            put_user.execute(params![
                day,
                user,
                week.totals.jobs as u64,
                sql_ns(week.totals.wall_ns),
                sql_ns(week.totals.mpi_ns),
                serde_json::to_string(&week.totals)?,
                serde_json::to_string(&week)?
            ])?;
        }
        let mut get_month = conn.prepare_cached(&format!(
            "SELECT totals FROM {user_months} WHERE month = ?1 AND user = ?2"
        ))?;
        let mut put_month = conn.prepare_cached(&format!(
            "INSERT OR REPLACE INTO {user_months} (month, user, jobs, wall_ns, mpi_ns, totals)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        ))?;
        for ((month, user), new) in months {
            let stored: Option<String> = get_month
                .query_row(params![month, user], |row| row.get(0))
                .optional()?;
            let totals = match stored {
                Some(json) => {
                    let mut stored: Totals = serde_json::from_str(&json)?;
                    stored.merge(&new);
                    stored
                }
                None => new,
            };
            put_month.execute(params![
                month,
                user,
                totals.jobs as u64,
                sql_ns(totals.wall_ns),
                sql_ns(totals.mpi_ns),
                serde_json::to_string(&totals)?
            ])?;
        }
        let mut put_app = conn.prepare_cached(&format!(
            "INSERT INTO {apps} (day, app, jobs) VALUES (?1, ?2, ?3)
             ON CONFLICT (day, app) DO UPDATE SET jobs = jobs + excluded.jobs"
        ))?;
        for ((day, app), jobs) in self.apps {
            put_app.execute(params![day, app, jobs])?;
        }
        let mut put_critical = conn.prepare_cached(&format!(
            "INSERT OR REPLACE INTO {critical} (end_ms, key, user, wall_ns, reasons)
             VALUES (?1, ?2, ?3, ?4, ?5)"
        ))?;
        for c in self.critical {
            put_critical.execute(params![c.end_ms, c.key, c.user, c.wall_ns, c.reasons])?;
        }
        let mut put_hour = conn.prepare_cached(&format!(
            "INSERT INTO {hours} (hour, jobs, wall_ns, mpi_ns, imbalance_jobs,
                 imbalance_weighted, imbalance_wall_ns, escalated_traces)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (hour) DO UPDATE SET jobs = jobs + excluded.jobs,
                 wall_ns = wall_ns + excluded.wall_ns, mpi_ns = mpi_ns + excluded.mpi_ns,
                 imbalance_jobs = imbalance_jobs + excluded.imbalance_jobs,
                 imbalance_weighted = imbalance_weighted + excluded.imbalance_weighted,
                 imbalance_wall_ns = imbalance_wall_ns + excluded.imbalance_wall_ns,
                 escalated_traces = escalated_traces + excluded.escalated_traces"
        ))?;
        for (hour, h) in self.hours {
            put_hour.execute(params![
                hour,
                h.jobs,
                h.wall_ns,
                h.mpi_ns,
                h.imbalance_jobs,
                h.imbalance_weighted,
                h.imbalance_wall_ns,
                h.escalated_traces
            ])?;
        }
        let mut put_group = conn.prepare_cached(&format!(
            "INSERT INTO {groups} (dimension, hour, name, jobs, wall_ns, mpi_ns)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (dimension, hour, name) DO UPDATE SET jobs = jobs + excluded.jobs,
                 wall_ns = wall_ns + excluded.wall_ns, mpi_ns = mpi_ns + excluded.mpi_ns"
        ))?;
        for ((dimension, hour, name), g) in self.groups {
            put_group.execute(params![
                dimension.name(),
                hour,
                name,
                g.jobs,
                g.wall_ns,
                g.mpi_ns
            ])?;
        }
        Ok(())
    }
}

/// A user's stored rollup: totals and the rest (see [`UserWeek`]'s serialisation).
fn user_week(totals: &str, detail: &str) -> anyhow::Result<UserWeek> {
    let mut week: UserWeek = serde_json::from_str(detail)?;
    week.totals = serde_json::from_str(totals)?;
    Ok(week)
}

/// The thresholds the stored critical list was made with (JSON), in `rollup_state`.
fn thresholds_key(thresholds: &SiteReportConfig) -> String {
    format!(
        "{} {} {}",
        thresholds.critical_mpi_percent,
        thresholds.critical_imbalance_percent,
        thresholds.critical_min_cpu_hours
    )
}

/// Make the rollups again from every stored job, in steps of about `REBUILD_STEP_JOBS` jobs
/// each committed on its own ([`rebuild_in_steps`]). Returns how many jobs the new rollups count.
pub fn rebuild(db: &Database, thresholds: &SiteReportConfig) -> anyhow::Result<u64> {
    let rebuilt = rebuild_in_steps(db, thresholds, REBUILD_STEP_JOBS, |_| {
        std::ops::ControlFlow::Continue(())
    })?;
    rebuilt.ok_or_else(|| anyhow::anyhow!("the rebuild of the rollups was stopped"))
}

/// Make the rollups again from every stored job, exactly, without holding the write lock for
/// long: into tables of their own (`rebuilt_<table>`, [`Tables::Rebuilt`]), in end order, a
/// step of `step_jobs` jobs at a time. Each step reads its jobs' records (ended in
/// `[from, to)`, `from` being where the last step ended) with no lock, then in one short write
/// transaction checks that the step's jobs are still those it read (else reads there the jobs
/// that came into the step late, or the whole step again if one went away), adds their
/// rollups to the rebuilt tables and moves
/// `rebuild_to` (in `rollup_state`) to `to`. Meanwhile ingest adds every new job to the live
/// rollups and, if it ended before `rebuild_to`, to the rebuilt ones too ([`count_in_rebuild`]),
/// so each job is counted there exactly once: by the step that reads it or by ingest, whichever
/// commits last. The step that reaches the newest job swaps the rebuilt tables in, in the same
/// transaction (renames and the secondary indexes made again: the pages see either all the old rollups
/// or all the new ones), and the old ones are dropped after.
///
/// An interrupted rebuild leaves the live rollups as they were, kept by ingest, and the
/// rebuilt ones as far as they got (also kept by ingest): the next rebuild with the same
/// thresholds goes on from there, one with others starts again. `after_step` is called after
/// each step's reading, before its write transaction ([`Progress::Read`]), and after each
/// committed step that did not finish ([`Progress::Committed`]); `Break` stops the rebuild there
/// as an interruption would. Returns how many jobs the new rollups count, `None` if stopped.
pub fn rebuild_in_steps(
    db: &Database,
    thresholds: &SiteReportConfig,
    step_jobs: u64,
    mut progress: impl FnMut(Progress) -> std::ops::ControlFlow<()>,
) -> anyhow::Result<Option<u64>> {
    let key = thresholds_key(thresholds);
    in_write_transaction(&db.conn, |conn| start_rebuild(conn, &key))?;
    loop {
        let Some(from) = rebuilt_to(&db.conn)? else {
            anyhow::bail!("another rebuild of the rollups finished this one");
        };
        let to = step_end(&db.conn, from, step_jobs)?;
        let (mut rollups, read) = read_step(db, thresholds, from, to)?;
        if progress(Progress::Read { from, to }).is_break() {
            return Ok(None);
        }
        let finished = in_write_transaction(&db.conn, |conn| -> anyhow::Result<Option<bool>> {
            if rebuilt_to(conn)? != Some(from)
                || state(conn, "rebuild_critical")? != Some(key.clone())
            {
                // Another rebuild moved on meanwhile: look again.
                return Ok(None);
            }
            // Jobs that came late, into the step's interval, after it was read: only those are
            // read here, under the write lock (all of the step again only if one went away).
            match added_rows(&read, &step_ids(conn, from, to)?) {
                Some(added) if added.is_empty() => {}
                Some(added) => db.each_filed_job_of_rows(&added, |_, job| rollups.add(&job))?,
                None => rollups = read_step(db, thresholds, from, to)?.0,
            }
            rollups.save(conn, Tables::Rebuilt)?;
            set_state(conn, "rebuild_to", &to.to_string())?;
            let newer: bool = conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM jobs WHERE end_ms >= ?1)",
                [to],
                |row| row.get(0),
            )?;
            if newer {
                return Ok(Some(false));
            }
            swap_in_rebuilt(conn, &key)?;
            Ok(Some(true))
        })?;
        match finished {
            Some(true) => {
                drop_tables(&db.conn, "retired")?;
                let counted: f64 =
                    db.conn
                        .query_row("SELECT total(jobs) FROM rollup_user_months", [], |row| {
                            row.get(0)
                        })?;
                return Ok(Some(counted as u64));
            }
            Some(false) if progress(Progress::Committed { to }).is_break() => return Ok(None),
            Some(false) | None => {}
        }
    }
}

/// Where a rebuild in steps is ([`rebuild_in_steps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A step read the jobs that ended in `[from, to)`, outside any transaction; its write
    /// transaction comes next.
    Read { from: u64, to: u64 },
    /// A step was committed: the rebuilt rollups count every job that ended before `to`.
    Committed { to: u64 },
}

/// The rows in `now` that are not in `read` (both sorted), or `None` if a row of `read` is no
/// longer in `now`.
fn added_rows(read: &[i64], now: &[i64]) -> Option<Vec<i64>> {
    let mut added = Vec::new();
    let mut read = read.iter().peekable();
    for &id in now {
        match read.peek() {
            Some(&&r) if r == id => {
                read.next();
            }
            Some(&&r) if r < id => return None,
            _ => added.push(id),
        }
    }
    read.peek().is_none().then_some(added)
}

/// Jobs read in one step of a rebuild ([`rebuild_in_steps`]): about 2-3 s of reading, and one
/// short write transaction.
const REBUILD_STEP_JOBS: u64 = 50_000;

/// A sum of rank-nanoseconds as SQLite stores it in the rollups' sortable columns: a real
/// number, since SQLite's integers end at `i64::MAX` ns (292 rank-years), which one heavy user's
/// month passes at a large centre (about 3,500 cores busy all month); the exact sum is in the
/// row's JSON. Readers add these columns with `total()`, a real number too.
fn sql_ns(ns: u64) -> f64 {
    ns as f64
}

/// The rollup tables, in the order [`Rollups::save`] names them.
const TABLES: [&str; 7] = [
    "rollup_days",
    "rollup_users",
    "rollup_user_months",
    "rollup_apps",
    "critical_jobs",
    "rollup_hours",
    "rollup_hour_groups",
];

/// Which rollup tables [`Rollups::save`] adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// The ones the pages read.
    Live,
    /// The ones a rebuild is making ([`rebuild_in_steps`]).
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

/// Run `work` in a transaction that takes the write lock first (ingest's writer waits for it,
/// up to its busy timeout): committed if it returns `Ok`, rolled back if not.
fn in_write_transaction<T>(
    conn: &Connection,
    work: impl FnOnce(&Connection) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match work(conn) {
        Ok(done) => {
            conn.execute_batch("COMMIT")?;
            Ok(done)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// A value of `rollup_state`.
fn state(conn: &Connection, name: &str) -> anyhow::Result<Option<String>> {
    Ok(conn
        .query_row(
            "SELECT value FROM rollup_state WHERE name = ?1",
            [name],
            |row| row.get(0),
        )
        .optional()?)
}

fn set_state(conn: &Connection, name: &str, value: &str) -> anyhow::Result<()> {
    conn.execute(
        "INSERT OR REPLACE INTO rollup_state (name, value) VALUES (?1, ?2)",
        [name, value],
    )?;
    Ok(())
}

/// Where a rebuild has got to: the rebuilt rollups count every job that ended before it
/// (`None`: no rebuild is under way or interrupted).
fn rebuilt_to(conn: &Connection) -> anyhow::Result<Option<u64>> {
    Ok(state(conn, "rebuild_to")?.and_then(|to| to.parse().ok()))
}

/// `base` with the critical-job thresholds of `key` ([`thresholds_key`]'s text), if it is one.
fn thresholds_of_key(key: &str, base: &SiteReportConfig) -> Option<SiteReportConfig> {
    let mut numbers = key.split(' ').map(|n| n.parse::<f64>().ok());
    let (Some(Some(mpi)), Some(Some(imbalance)), Some(Some(cpu_hours)), None) = (
        numbers.next(),
        numbers.next(),
        numbers.next(),
        numbers.next(),
    ) else {
        return None;
    };
    Some(SiteReportConfig {
        critical_mpi_percent: mpi,
        critical_imbalance_percent: imbalance,
        critical_min_cpu_hours: cpu_hours,
        ..base.clone()
    })
}

/// Go on with the rebuild under way if it was started with the same thresholds (`key`), else
/// start one: empty `rebuilt_` tables made as the live ones are (without their secondary
/// indexes, made when swapped in), and `rebuild_to` at the beginning of time.
fn start_rebuild(conn: &Connection, key: &str) -> anyhow::Result<()> {
    if rebuilt_to(conn)?.is_some() && state(conn, "rebuild_critical")?.as_deref() == Some(key) {
        return Ok(());
    }
    drop_tables(conn, "rebuilt")?;
    drop_tables(conn, "retired")?;
    for table in TABLES {
        let sql: String = conn.query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |row| row.get(0),
        )?;
        conn.execute_batch(&sql.replacen(table, &Tables::Rebuilt.name(table), 1))?;
    }
    set_state(conn, "rebuild_to", "0")?;
    set_state(conn, "rebuild_critical", key)
}

/// Drop the rollup tables named `<prefix>_<table>` that exist.
fn drop_tables(conn: &Connection, prefix: &str) -> anyhow::Result<()> {
    for table in TABLES {
        conn.execute_batch(&format!("DROP TABLE IF EXISTS {prefix}_{table}"))?;
    }
    Ok(())
}

/// The end of the step of a rebuild that starts at `from`: the end time of the
/// `step_jobs`-th job from there, or just after the newest job.
fn step_end(conn: &Connection, from: u64, step_jobs: u64) -> anyhow::Result<u64> {
    let nth: Option<u64> = conn
        .query_row(
            "SELECT end_ms FROM jobs WHERE end_ms >= ?1 ORDER BY end_ms LIMIT 1 OFFSET ?2",
            params![from, step_jobs],
            |row| row.get(0),
        )
        .optional()?;
    let end = match nth {
        Some(end) => end,
        None => conn
            .query_row("SELECT max(end_ms) FROM jobs", [], |row| {
                row.get::<_, Option<u64>>(0)
            })?
            .map_or(from, |newest| newest + 1),
    };
    Ok(end.max(from + 1))
}

/// The rollups of the jobs that ended in `[from, to)`, and their row ids (sorted).
fn read_step(
    db: &Database,
    thresholds: &SiteReportConfig,
    from: u64,
    to: u64,
) -> anyhow::Result<(Rollups, Vec<i64>)> {
    let mut rollups = Rollups::new(thresholds);
    let mut ids = Vec::new();
    db.each_filed_job_ended_between(from, to, |filed, job| {
        rollups.add(&job);
        ids.push(filed.id);
    })?;
    ids.sort_unstable();
    Ok((rollups, ids))
}

/// The row ids of the jobs that ended in `[from, to)` (sorted).
fn step_ids(conn: &Connection, from: u64, to: u64) -> anyhow::Result<Vec<i64>> {
    let mut stmt =
        conn.prepare_cached("SELECT id FROM jobs WHERE end_ms >= ?1 AND end_ms < ?2 ORDER BY id")?;
    let ids = stmt.query_map(params![from, to], |row| row.get(0))?;
    Ok(ids.collect::<Result<_, _>>()?)
}

/// Put the rebuilt rollups in the place of the live ones (in the caller's transaction): the
/// live tables are renamed `retired_<table>` (dropped after the commit), the rebuilt ones take
/// their names, and the live tables' secondary indexes are made again on them.
fn swap_in_rebuilt(conn: &Connection, key: &str) -> anyhow::Result<()> {
    let mut indexes: Vec<(String, String)> = Vec::new();
    for table in TABLES {
        let mut stmt = conn.prepare(
            "SELECT name, sql FROM sqlite_master
             WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL",
        )?;
        let rows = stmt.query_map([table], |row| Ok((row.get(0)?, row.get(1)?)))?;
        for index in rows {
            indexes.push(index?);
        }
    }
    for (name, _) in &indexes {
        conn.execute_batch(&format!("DROP INDEX \"{name}\""))?;
    }
    for table in TABLES {
        conn.execute_batch(&format!(
            "ALTER TABLE {table} RENAME TO retired_{table};
             ALTER TABLE {} RENAME TO {table};",
            Tables::Rebuilt.name(table)
        ))?;
    }
    for (_, sql) in indexes {
        conn.execute_batch(&sql)?;
    }
    set_state(conn, "critical", key)?;
    conn.execute(
        "DELETE FROM rollup_state WHERE name IN ('stale', 'rebuild_to', 'rebuild_critical')",
        [],
    )?;
    Ok(())
}

/// Count the jobs ingest stores as new (`jobs`: their rows) in the rollups a rebuild is making,
/// if one is under way or was interrupted: those that ended before where it has got to (it
/// reads the others itself). In the transaction that stores them (see [`rebuild_in_steps`]).
/// Its critical list takes the rebuild's thresholds, not ingest's (`thresholds`, the rest of
/// the settings): an ingest daemon started before the site changed them keeps the old ones.
pub fn count_in_rebuild<'a>(
    conn: &Connection,
    jobs: impl Iterator<Item = &'a crate::db::JobRow>,
    thresholds: &SiteReportConfig,
) -> anyhow::Result<()> {
    let Some(to) = rebuilt_to(conn)? else {
        return Ok(());
    };
    let rebuilds =
        state(conn, "rebuild_critical")?.and_then(|key| thresholds_of_key(&key, thresholds));
    let mut rollups = Rollups::new(rebuilds.as_ref().unwrap_or(thresholds));
    for job in jobs.filter(|job| job.index.end_unix_ms < to) {
        rollups.add(&crate::db::inflated_record(&job.deflated)?);
    }
    if rollups.is_empty() {
        return Ok(());
    }
    rollups.save(conn, Tables::Rebuilt)
}

/// Rebuild the rollups if the database has none yet for its jobs (upgraded from before them)
/// or its critical list was made with other thresholds than `thresholds` (says so on stderr).
pub fn ensure_built(db: &Database, thresholds: &SiteReportConfig) -> anyhow::Result<()> {
    let state = |name: &str| self::state(&db.conn, name);
    let why = if state("stale")?.is_some() {
        "the database has jobs stored before the rollups"
    } else {
        match state("critical")? {
            Some(made) if made != thresholds_key(thresholds) => {
                "the critical-job thresholds ([site_report]) changed"
            }
            Some(_) => return Ok(()),
            // Never rebuilt: made as the jobs came, with the thresholds of the time.
            None => {
                db.conn.execute(
                    "INSERT OR IGNORE INTO rollup_state (name, value) VALUES ('critical', ?1)",
                    [thresholds_key(thresholds)],
                )?;
                return Ok(());
            }
        }
    };
    let start = std::time::Instant::now();
    let counted = rebuild(db, thresholds)?;
    eprintln!(
        "mpistat: {why}: rollups rebuilt from {counted} jobs ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `mpistat rebuild-rollups`.
pub fn command(args: &crate::cli::DatabaseArgs) -> anyhow::Result<std::process::ExitCode> {
    let (config, db) = crate::site::load_without_rollups(args)?;
    let start = std::time::Instant::now();
    let counted = rebuild(&db, &config.site_report)?;
    db.report_quarantined(&mut std::io::stderr())?;
    eprintln!(
        "rollups rebuilt from {counted} jobs ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(std::process::ExitCode::SUCCESS)
}

/// The stored rollups of the days in `[from_ms, to_ms)` (whole UTC days).
pub struct PeriodRollups {
    pub site: DayRollup,
    /// Every user's totals.
    pub users: BTreeMap<String, Totals>,
}

/// Add up the stored rollups of `[from_ms, to_ms)`.
pub fn of_period(conn: &Connection, from_ms: u64, to_ms: u64) -> anyhow::Result<PeriodRollups> {
    let (from, to) = (from_ms / DAY_MS, to_ms.div_ceil(DAY_MS));
    let mut site = DayRollup::default();
    let mut stmt = conn
        .prepare_cached("SELECT data FROM rollup_days WHERE day >= ?1 AND day < ?2 ORDER BY day")?;
    let mut rows = stmt.query(params![from, to])?;
    while let Some(row) = rows.next()? {
        let day: DayRollup = serde_json::from_str(row.get_ref(0)?.as_str()?)?;
        site.merge(&day, false);
    }
    site.points
        .sort_by(|a, b| a.end_ms.cmp(&b.end_ms).then_with(|| a.key.cmp(&b.key)));
    let users = users_of_period(conn, from_ms, to_ms)?;
    Ok(PeriodRollups { site, users })
}

/// The days (numbers) of `[from_ms, to_ms)` as the rollups keep them, in time order: the days
/// before its first whole calendar month, its whole months (by their first days), and the days
/// after them; each a half-open range, empty when there are none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spans {
    days_before: (u64, u64),
    months: (u64, u64),
    days_after: (u64, u64),
}

impl Spans {
    fn of(from_ms: u64, to_ms: u64) -> Spans {
        let (from, to) = (from_ms / DAY_MS, to_ms.div_ceil(DAY_MS));
        let (month, next) = month_of(from);
        let first = if month == from { from } else { next };
        let last = month_of(to).0;
        if first < last && to > from {
            Spans {
                days_before: (from, first),
                months: (first, last),
                days_after: (last, to),
            }
        } else {
            Spans {
                days_before: (from, to),
                months: (to, to),
                days_after: (to, to),
            }
        }
    }
}

/// The first day of the calendar month (UTC) of `day`, and of the next month (day numbers).
fn month_of(day: u64) -> (u64, u64) {
    use crate::mail::week::{date_of_day, days_since_epoch};
    use chrono::{Datelike, Months};
    let date = date_of_day(i64::try_from(day).unwrap_or(i64::MAX));
    let first = date.with_day(1).unwrap_or(date);
    let next = first.checked_add_months(Months::new(1)).unwrap_or(first);
    let number = |d| u64::try_from(days_since_epoch(d)).unwrap_or_default();
    (number(first), number(next))
}

/// Every user's totals over `[from_ms, to_ms)`, from a row per user and month for its whole
/// months and a row per user and day for the rest.
pub fn users_of_period(
    conn: &Connection,
    from_ms: u64,
    to_ms: u64,
) -> anyhow::Result<BTreeMap<String, Totals>> {
    let spans = Spans::of(from_ms, to_ms);
    let days = "SELECT user, totals FROM rollup_users WHERE day >= ?1 AND day < ?2 ORDER BY day";
    let months = "SELECT user, totals FROM rollup_user_months WHERE month >= ?1 AND month < ?2
         ORDER BY month";
    let mut users: BTreeMap<String, Totals> = BTreeMap::new();
    for (sql, (from, to)) in [
        (days, spans.days_before),
        (months, spans.months),
        (days, spans.days_after),
    ] {
        if from >= to {
            continue;
        }
        let mut stmt = conn.prepare_cached(sql)?;
        let mut rows = stmt.query(params![from, to])?;
        while let Some(row) = rows.next()? {
            let user = row.get_ref(0)?.as_str()?;
            let totals: Totals = serde_json::from_str(row.get_ref(1)?.as_str()?)?;
            match users.get_mut(user) {
                Some(sum) => sum.merge(&totals),
                None => {
                    users.insert(user.to_string(), totals);
                }
            }
        }
    }
    Ok(users)
}

/// One user's whole rollup (routines and biggest jobs too) over `[from_ms, to_ms)`.
pub fn user_of_period(
    conn: &Connection,
    user: &str,
    from_ms: u64,
    to_ms: u64,
) -> anyhow::Result<Option<UserWeek>> {
    let (from, to) = (from_ms / DAY_MS, to_ms.div_ceil(DAY_MS));
    let mut stmt = conn.prepare_cached(
        "SELECT totals, detail FROM rollup_users WHERE user = ?1 AND day >= ?2 AND day < ?3
         ORDER BY day",
    )?;
    let mut rows = stmt.query(params![user, from, to])?;
    let mut sum: Option<UserWeek> = None;
    while let Some(row) = rows.next()? {
        let week = user_week(row.get_ref(0)?.as_str()?, row.get_ref(1)?.as_str()?)?;
        match &mut sum {
            Some(sum) => sum.merge(&week),
            None => sum = Some(week),
        }
    }
    Ok(sum)
}

/// Jobs, CPU time, MPI time and users of `[from_ms, to_ms)` from the rollups' columns.
pub fn totals_of_period(
    conn: &Connection,
    from_ms: u64,
    to_ms: u64,
) -> anyhow::Result<crate::db::PeriodTotals> {
    let spans = Spans::of(from_ms, to_ms);
    Ok(conn.query_row(
        "SELECT total(jobs), total(wall_ns), total(mpi_ns), count(DISTINCT user) FROM (
             SELECT user, jobs, wall_ns, mpi_ns FROM rollup_users WHERE day >= ?1 AND day < ?2
             UNION ALL
             SELECT user, jobs, wall_ns, mpi_ns FROM rollup_user_months
             WHERE month >= ?3 AND month < ?4
             UNION ALL
             SELECT user, jobs, wall_ns, mpi_ns FROM rollup_users WHERE day >= ?5 AND day < ?6)",
        params![
            spans.days_before.0,
            spans.days_before.1,
            spans.months.0,
            spans.months.1,
            spans.days_after.0,
            spans.days_after.1
        ],
        |row| {
            Ok(crate::db::PeriodTotals {
                jobs: row.get::<_, f64>(0)? as u64,
                wall_ns: row.get::<_, f64>(1)? as u64,
                mpi_ns: row.get::<_, f64>(2)? as u64,
                users: row.get(3)?,
            })
        },
    )?)
}

/// The site's sums of each hour in `[from_hour, to_hour)` that has jobs, in hour order.
pub fn hours_between(
    conn: &Connection,
    from_hour: u64,
    to_hour: u64,
) -> anyhow::Result<Vec<(u64, HourSums)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT hour, jobs, wall_ns, mpi_ns, imbalance_jobs, imbalance_weighted,
             imbalance_wall_ns, escalated_traces
         FROM rollup_hours WHERE hour >= ?1 AND hour < ?2 ORDER BY hour",
    )?;
    let rows = stmt.query_map(params![from_hour, to_hour], |row| {
        Ok((
            row.get(0)?,
            HourSums {
                jobs: row.get(1)?,
                wall_ns: row.get(2)?,
                mpi_ns: row.get(3)?,
                imbalance_jobs: row.get(4)?,
                imbalance_weighted: row.get(5)?,
                imbalance_wall_ns: row.get(6)?,
                escalated_traces: row.get(7)?,
            },
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Call `f` with each row of `rollup_hour_groups` of `dimension` in the hours
/// `[from_hour, to_hour)`: its hour, name and sums.
pub fn each_hour_group(
    conn: &Connection,
    dimension: Dimension,
    from_hour: u64,
    to_hour: u64,
    mut f: impl FnMut(u64, &str, GroupSums),
) -> anyhow::Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT hour, name, jobs, wall_ns, mpi_ns FROM rollup_hour_groups
         WHERE dimension = ?1 AND hour >= ?2 AND hour < ?3",
    )?;
    let mut rows = stmt.query(params![dimension.name(), from_hour, to_hour])?;
    while let Some(row) = rows.next()? {
        let sums = GroupSums {
            jobs: row.get(2)?,
            wall_ns: row.get(3)?,
            mpi_ns: row.get(4)?,
        };
        f(row.get(0)?, row.get_ref(1)?.as_str()?, sums);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_come_back_from_their_key() {
        let base = SiteReportConfig::default();
        let other = SiteReportConfig {
            critical_mpi_percent: 33.3,
            critical_imbalance_percent: 0.1 + 0.2,
            critical_min_cpu_hours: 1e-3,
            ..base.clone()
        };
        for t in [&base, &other] {
            assert_eq!(
                thresholds_of_key(&thresholds_key(t), &base).as_ref(),
                Some(t)
            );
        }
        assert_eq!(thresholds_of_key("1 2", &base), None);
        assert_eq!(thresholds_of_key("1 2 3 4", &base), None);
        assert_eq!(thresholds_of_key("1 x 3", &base), None);
    }

    #[test]
    fn rows_added_to_a_step_after_it_was_read() {
        assert_eq!(added_rows(&[1, 3, 5], &[1, 3, 5]), Some(vec![]));
        assert_eq!(
            added_rows(&[1, 3, 5], &[0, 1, 2, 3, 5, 9]),
            Some(vec![0, 2, 9])
        );
        assert_eq!(added_rows(&[], &[4]), Some(vec![4]));
        // A row read is gone (quarantined meanwhile): the step is read again.
        assert_eq!(added_rows(&[1, 3, 5], &[1, 5, 7]), None);
        assert_eq!(added_rows(&[1, 3, 5], &[1, 3]), None);
    }

    /// Day number of a date.
    fn day(text: &str) -> u64 {
        let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap();
        crate::mail::week::days_since_epoch(date) as u64
    }

    fn spans(from: &str, to: &str) -> Spans {
        Spans::of(day(from) * DAY_MS, day(to) * DAY_MS)
    }

    #[test]
    fn a_month_is_one_span_of_months() {
        assert_eq!(
            spans("2026-11-01", "2026-12-01"),
            Spans {
                days_before: (day("2026-11-01"), day("2026-11-01")),
                months: (day("2026-11-01"), day("2026-12-01")),
                days_after: (day("2026-12-01"), day("2026-12-01")),
            }
        );
    }

    #[test]
    fn days_around_whole_months_are_days() {
        assert_eq!(
            spans("2026-10-30", "2027-01-03"),
            Spans {
                days_before: (day("2026-10-30"), day("2026-11-01")),
                months: (day("2026-11-01"), day("2027-01-01")),
                days_after: (day("2027-01-01"), day("2027-01-03")),
            }
        );
    }

    #[test]
    fn a_week_is_days() {
        for (from, to) in [("2026-11-16", "2026-11-23"), ("2026-11-28", "2026-12-05")] {
            let s = spans(from, to);
            assert_eq!(s.days_before, (day(from), day(to)));
            assert_eq!(s.months.0, s.months.1);
            assert_eq!(s.days_after.0, s.days_after.1);
        }
    }

    #[test]
    fn month_of_a_day() {
        assert_eq!(
            month_of(day("2028-02-29")),
            (day("2028-02-01"), day("2028-03-01"))
        );
        assert_eq!(month_of(0), (0, day("1970-02-01")));
    }
}
