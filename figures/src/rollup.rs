//! Figures kept as the data arrives: the sums the admin pages show, per UTC day (site-wide:
//! `rollup_days`), per day and user (`rollup_users`), per calendar month and per ISO week and
//! user (the totals alone: `rollup_user_months` and `rollup_user_weeks`, so that a month's or a
//! week's users list, a user's page and the search add up one row per user, not one per day and
//! user) and per day and application (`rollup_apps`:
//! the search by application), per UTC hour (`rollup_hours`, site-wide, and
//! `rollup_hour_groups`, per application, Slurm account and partition: the metrics' windows,
//! `mpistat_pages::metrics`), plus the critical jobs (`critical_jobs`), kept by ingest in the
//! same transaction as the jobs (see
//! `mpistat_ingest::writer`), so that a week's or a month's pages add up a few thousand rows
//! and never read every job. [`rebuild`] (`mpistat rebuild-rollups`) makes them again exactly
//! from the stored jobs, in committed steps beside the live ones while ingest goes on, and swaps
//! them in at the end ([`rebuild_in_steps`]); a database that has jobs but no rollups yet (upgraded from a schema
//! before them), or whose critical jobs were chosen with other `[site_report]` thresholds, is
//! rebuilt by the write side's explicit step (ingest's start, `mpistat db migrate`:
//! [`ensure_built`]); readers read them as they are and say so ([`out_of_date`]). The tables
//! and their statements are the store's (`mpistat_store::rollups`): it keeps the rows, this
//! module makes and adds up the figures.
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
//! records when not (some were stored before, or rejected: `mpistat_ingest::writer`).
//!
//! An interval's sums are added in time order: its days before its first whole week, its whole
//! weeks before its first whole month, its whole months, and as many whole weeks and then days
//! after them ([`spans`]).

use crate::classes::{
    add_histogram, imbalance_percent, job_cpu_class, routine_group, size_class, JOB_CPU_CLASSES,
};
use crate::stored;
use crate::sums::{RoutineSums, Totals, UserWeek};
use crate::{Error, Result};
use mpistat_record::{Binding, JobRecord};
use mpistat_site::SiteReportConfig;
use mpistat_store::rollups::{Span, Tables, UserRow};
use mpistat_store::{CriticalEntry, PeriodTotals, ReadStore, WriteStore, WriteTx};
use serde::{Deserialize, Serialize};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// A day in milliseconds: rollups are per UTC day (`end_ms / DAY_MS`).
pub const DAY_MS: u64 = 86_400_000;

/// An hour in milliseconds: the metrics' rollups are per UTC hour (`end_ms / HOUR_MS`).
pub use mpistat_store::rollups::HOUR_MS;

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
/// `rollup_hours` keeps them for the metrics (`mpistat_pages::metrics`): jobs; CPU time (wall time
/// summed over ranks) and MPI time in nanoseconds; the jobs with critical-path imbalance figures
/// ([`imbalance_percent`]): how many, their imbalance percent × CPU time, and their CPU time;
/// and the jobs traced because the escalation rule put them on the escalation list. The row is
/// the store's; the sums are made here ([`Sums`]).
pub use mpistat_store::rollups::HourRow as HourSums;

/// The jobs of one application, account or partition in an hour (or several, merged): jobs,
/// CPU time and MPI time in nanoseconds, as `rollup_hour_groups` keeps them ([`Sums`]).
pub use mpistat_store::rollups::GroupRow as GroupSums;

/// The arithmetic of the hourly sums.
pub trait Sums {
    /// Count `job` in them.
    fn add(&mut self, job: &JobRecord);
    /// Add `other`'s.
    fn merge(&mut self, other: &Self);
}

impl Sums for HourSums {
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

    fn merge(&mut self, other: &HourSums) {
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

impl Sums for GroupSums {
    fn add(&mut self, job: &JobRecord) {
        self.jobs += 1;
        self.wall_ns += job.wall_ns.sum as f64;
        self.mpi_ns += job.mpi_ns.sum as f64;
    }

    fn merge(&mut self, other: &GroupSums) {
        self.jobs += other.jobs;
        self.wall_ns += other.wall_ns;
        self.mpi_ns += other.mpi_ns;
    }
}

/// Take `taken`'s jobs out of `sums` again (counted in them before).
pub fn take_out(sums: &mut GroupSums, taken: &GroupSums) {
    sums.jobs = sums.jobs.saturating_sub(taken.jobs);
    sums.wall_ns -= taken.wall_ns;
    sums.mpi_ns -= taken.mpi_ns;
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
    critical: Vec<CriticalEntry>,
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
            self.critical.push(CriticalEntry {
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
    pub fn save(self, tx: &WriteTx<'_>, tables: Tables) -> Result<()> {
        for (day, new) in self.days {
            let data = match tx.rollup_day(tables, day)? {
                Some(json) => {
                    let mut stored = stored::day_of_json(&json)?;
                    stored.merge(&new, true);
                    stored
                }
                None => new,
            };
            tx.put_rollup_day(tables, day, &stored::day_json(&data)?)?;
        }
        // The new totals by week and by month and user, added in day order.
        let (mut weeks, mut months): (BTreeMap<(u64, String), Totals>, BTreeMap<_, _>) =
            Default::default();
        for ((day, user), new) in &self.users {
            for (spans, first) in [(&mut weeks, week_of(*day)), (&mut months, month_of(*day).0)] {
                spans
                    .entry((first, user.clone()))
                    .or_default()
                    .merge(&new.totals);
            }
        }
        save_user_rows(tx, tables, Span::Day, self.users, |stored, new| {
            let week = match stored {
                Some((totals, detail)) => {
                    let mut stored = stored::user_of_json(&totals, &detail)?;
                    stored.merge(&new);
                    stored
                }
                None => new,
            };
            OwnedUserRow::of(&week.totals, stored::detail_json(&week)?)
        })?;
        for (span, new) in [(Span::Week, weeks), (Span::Month, months)] {
            save_user_rows(tx, tables, span, new, |stored, new| {
                let totals = match stored {
                    Some((json, _)) => {
                        let mut stored = stored::totals_of_json(&json)?;
                        stored.merge(&new);
                        stored
                    }
                    None => new,
                };
                OwnedUserRow::of(&totals, String::new())
            })?;
        }
        let apps: Vec<_> = self
            .apps
            .iter()
            .map(|((day, app), jobs)| (*day, app.as_str(), *jobs))
            .collect();
        tx.add_applications(tables, &apps)?;
        tx.put_criticals(tables, &self.critical)?;
        let hours: Vec<_> = self.hours.into_iter().collect();
        tx.add_rollup_hours(tables, &hours)?;
        let groups: Vec<_> = self
            .groups
            .iter()
            .map(|((dimension, hour, name), g)| (dimension.name(), *hour, name.as_str(), *g))
            .collect();
        tx.add_rollup_hour_groups(tables, &groups)?;
        Ok(())
    }
}

/// Add `new` (a user's rollups of `span` by the day number their rows start on, and the user)
/// to the stored ones in `tables`: `merge` adds each to its stored row (totals and detail JSON,
/// if there is one) and makes the row to store. One read and one write for all of them.
fn save_user_rows<T>(
    tx: &WriteTx<'_>,
    tables: Tables,
    span: Span,
    new: BTreeMap<(u64, String), T>,
    merge: impl Fn(Option<(String, String)>, T) -> Result<OwnedUserRow>,
) -> Result<()> {
    let keys: Vec<(u64, &str)> = new
        .keys()
        .map(|(first, user)| (*first, user.as_str()))
        .collect();
    let mut stored = tx.rollup_user_rows(tables, span, &keys)?;
    let mut rows = Vec::with_capacity(new.len());
    for ((first, user), new) in new {
        let row = merge(stored.remove(&(first, user.clone())), new)?;
        rows.push((first, user, row));
    }
    let rows: Vec<(u64, &str, UserRow<'_>)> = rows
        .iter()
        .map(|(first, user, row)| (*first, user.as_str(), row.as_row()))
        .collect();
    tx.put_rollup_user_rows(tables, span, &rows)?;
    Ok(())
}

/// A user's row to store, its JSON made ([`UserRow`] borrows it).
struct OwnedUserRow {
    jobs: u64,
    wall_ns: u64,
    mpi_ns: u64,
    totals: String,
    detail: String,
}

impl OwnedUserRow {
    fn of(totals: &Totals, detail: String) -> Result<OwnedUserRow> {
        Ok(OwnedUserRow {
            jobs: totals.jobs as u64,
            wall_ns: totals.wall_ns,
            mpi_ns: totals.mpi_ns,
            totals: stored::totals_json(totals)?,
            detail,
        })
    }

    fn as_row(&self) -> UserRow<'_> {
        UserRow {
            jobs: self.jobs,
            wall_ns: self.wall_ns,
            mpi_ns: self.mpi_ns,
            totals: &self.totals,
            detail: &self.detail,
        }
    }
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
pub fn rebuild(db: &WriteStore, thresholds: &SiteReportConfig) -> Result<u64> {
    let rebuilt = rebuild_in_steps(db, thresholds, REBUILD_STEP_JOBS, |_| {
        std::ops::ControlFlow::Continue(())
    })?;
    rebuilt.ok_or(Error::RebuildStopped)
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
    db: &WriteStore,
    thresholds: &SiteReportConfig,
    step_jobs: u64,
    mut progress: impl FnMut(Progress) -> std::ops::ControlFlow<()>,
) -> Result<Option<u64>> {
    let key = thresholds_key(thresholds);
    db.in_transaction(|tx| start_rebuild(tx, &key))?;
    loop {
        let Some(from) = rebuilt_to(db.rollup_state("rebuild_to")?) else {
            return Err(Error::RebuildTakenOver);
        };
        let to = db.rebuild_step_end(from, step_jobs)?;
        let (mut rollups, read) = read_step(db, thresholds, from, to)?;
        if progress(Progress::Read { from, to }).is_break() {
            return Ok(None);
        }
        let finished = db.in_transaction(|tx| -> Result<Option<bool>> {
            if rebuilt_to(tx.rollup_state("rebuild_to")?) != Some(from)
                || tx.rollup_state("rebuild_critical")? != Some(key.clone())
            {
                // Another rebuild moved on meanwhile: look again.
                return Ok(None);
            }
            // Jobs that came late, into the step's interval, after it was read: only those are
            // read here, under the write lock (all of the step again only if one went away).
            match added_rows(&read, &tx.job_ids_ended_between(from, to)?) {
                Some(added) if added.is_empty() => {}
                Some(added) => db.each_filed_job_of_rows(&added, |_, job| rollups.add(&job))?,
                None => rollups = read_step(db, thresholds, from, to)?.0,
            }
            rollups.save(tx, Tables::Rebuilt)?;
            tx.set_rollup_state("rebuild_to", &to.to_string())?;
            if tx.has_jobs_from(to)? {
                return Ok(Some(false));
            }
            tx.swap_in_rebuilt(&key)?;
            Ok(Some(true))
        })?;
        match finished {
            Some(true) => {
                db.drop_retired_rollups()?;
                return Ok(Some(db.jobs_in_rollups()?));
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

/// Where a rebuild has got to (`rebuild_to` of `rollup_state`): the rebuilt rollups count every
/// job that ended before it (`None`: no rebuild is under way or interrupted).
fn rebuilt_to(state: Option<String>) -> Option<u64> {
    state.and_then(|to| to.parse().ok())
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
/// start one: empty rebuilt tables, and `rebuild_to` at the beginning of time.
fn start_rebuild(tx: &WriteTx<'_>, key: &str) -> Result<()> {
    if rebuilt_to(tx.rollup_state("rebuild_to")?).is_some()
        && tx.rollup_state("rebuild_critical")?.as_deref() == Some(key)
    {
        return Ok(());
    }
    tx.create_rebuilt_rollups()?;
    tx.set_rollup_state("rebuild_to", "0")?;
    tx.set_rollup_state("rebuild_critical", key)?;
    Ok(())
}

/// The rollups of the jobs that ended in `[from, to)`, and their row ids (sorted).
fn read_step(
    db: &ReadStore,
    thresholds: &SiteReportConfig,
    from: u64,
    to: u64,
) -> Result<(Rollups, Vec<i64>)> {
    let mut rollups = Rollups::new(thresholds);
    let mut ids = Vec::new();
    db.each_filed_job_ended_between(from, to, |filed, job| {
        rollups.add(&job);
        ids.push(filed.id);
    })?;
    ids.sort_unstable();
    Ok((rollups, ids))
}

/// Count the jobs ingest stores as new (`jobs`: their rows) in the rollups a rebuild is making,
/// if one is under way or was interrupted: those that ended before where it has got to (it
/// reads the others itself). In the transaction that stores them (see [`rebuild_in_steps`]).
/// Its critical list takes the rebuild's thresholds, not ingest's (`thresholds`, the rest of
/// the settings): an ingest daemon started before the site changed them keeps the old ones.
pub fn count_in_rebuild<'a>(
    tx: &WriteTx<'_>,
    jobs: impl Iterator<Item = &'a mpistat_store::JobRow>,
    thresholds: &SiteReportConfig,
) -> Result<()> {
    let Some(to) = rebuilt_to(tx.rollup_state("rebuild_to")?) else {
        return Ok(());
    };
    let rebuilds = tx
        .rollup_state("rebuild_critical")?
        .and_then(|key| thresholds_of_key(&key, thresholds));
    let mut rollups = Rollups::new(rebuilds.as_ref().unwrap_or(thresholds));
    for job in jobs.filter(|job| job.index.end_unix_ms < to) {
        rollups.add(&mpistat_store::inflated_record(&job.deflated)?);
    }
    if rollups.is_empty() {
        return Ok(());
    }
    rollups.save(tx, Tables::Rebuilt)
}

/// Why the rollups of `db` are not those of `thresholds` (`None`: they are): the database has
/// jobs stored before the rollups, or the critical list was made with other thresholds.
pub fn out_of_date(db: &ReadStore, thresholds: &SiteReportConfig) -> Result<Option<&'static str>> {
    if db.rollup_state("stale")?.is_some() {
        return Ok(Some("the database has jobs stored before the rollups"));
    }
    Ok(match db.rollup_state("critical")? {
        Some(made) if made != thresholds_key(thresholds) => {
            Some("the critical-job thresholds ([site_report]) changed")
        }
        _ => None,
    })
}

/// Rebuild the rollups if the database has none yet for its jobs (upgraded from before them)
/// or its critical list was made with other thresholds than `thresholds` (says so on stderr):
/// by the write side only (ingest at its start, `mpistat db migrate`).
pub fn ensure_built(db: &WriteStore, thresholds: &SiteReportConfig) -> Result<()> {
    let Some(why) = out_of_date(db, thresholds)? else {
        // Never rebuilt: made as the jobs came, with the thresholds of the time.
        db.note_rollup_critical(&thresholds_key(thresholds))?;
        return Ok(());
    };
    let start = std::time::Instant::now();
    let counted = rebuild(db, thresholds)?;
    eprintln!(
        "mpistat: {why}: rollups rebuilt from {counted} jobs ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The stored rollups of the days in `[from_ms, to_ms)` (whole UTC days).
pub struct PeriodRollups {
    pub site: DayRollup,
    /// Every user's totals.
    pub users: BTreeMap<String, Totals>,
}

/// Add up the stored rollups of `[from_ms, to_ms)`.
pub fn of_period(db: &ReadStore, from_ms: u64, to_ms: u64) -> Result<PeriodRollups> {
    let mut site = DayRollup::default();
    db.each_day_rollup((from_ms / DAY_MS, to_ms.div_ceil(DAY_MS)), |json| {
        let day = stored::day_of_json(json)?;
        site.merge(&day, false);
        Ok(())
    })?;
    site.points
        .sort_by(|a, b| a.end_ms.cmp(&b.end_ms).then_with(|| a.key.cmp(&b.key)));
    let users = users_of_period(db, from_ms, to_ms)?;
    Ok(PeriodRollups { site, users })
}

/// The days (numbers) of `[from_ms, to_ms)` as the users' rollups keep them, in time order:
/// its whole calendar months (by their first days), the whole ISO weeks (by their Mondays)
/// before and after them, and the days before and after those; each a half-open range, none
/// empty.
fn spans(from_ms: u64, to_ms: u64) -> Vec<(Span, (u64, u64))> {
    let (from, to) = (from_ms / DAY_MS, to_ms.div_ceil(DAY_MS));
    let (month, next) = month_of(from);
    let first = if month == from { from } else { next };
    let last = month_of(to).0;
    let mut spans = Vec::new();
    if first < last && to > from {
        weeks_and_days(&mut spans, (from, first));
        spans.push((Span::Month, (first, last)));
        weeks_and_days(&mut spans, (last, to));
    } else {
        weeks_and_days(&mut spans, (from, to));
    }
    spans
}

/// Add the days `[from, to)` to `spans` as their whole ISO weeks and the days around them.
fn weeks_and_days(spans: &mut Vec<(Span, (u64, u64))>, (from, to): (u64, u64)) {
    let first = week_of(from + 6).max(from);
    let last = week_of(to);
    let (days_before, weeks, days_after) = if first < last {
        ((from, first), (first, last), (last, to))
    } else {
        ((from, to), (to, to), (to, to))
    };
    for (span, (a, b)) in [
        (Span::Day, days_before),
        (Span::Week, weeks),
        (Span::Day, days_after),
    ] {
        if a < b {
            spans.push((span, (a, b)));
        }
    }
}

/// The Monday (day number) of the ISO week of `day` (1970-01-01, day 0, was a Thursday; its
/// first four days make a row of day 0, which no interval reads as a whole week).
fn week_of(day: u64) -> u64 {
    ((day + 3) / 7 * 7).saturating_sub(3)
}

/// The first day of the calendar month (UTC) of `day`, and of the next month (day numbers).
fn month_of(day: u64) -> (u64, u64) {
    use crate::week::{date_of_day, days_since_epoch};
    use chrono::{Datelike, Months};
    let date = date_of_day(i64::try_from(day).unwrap_or(i64::MAX));
    let first = date.with_day(1).unwrap_or(date);
    let next = first.checked_add_months(Months::new(1)).unwrap_or(first);
    let number = |d| u64::try_from(days_since_epoch(d)).unwrap_or_default();
    (number(first), number(next))
}

/// Every user's totals over `[from_ms, to_ms)`, from a row per user and month for its whole
/// months, one per user and week for its whole weeks, and one per user and day for the rest.
pub fn users_of_period(
    db: &ReadStore,
    from_ms: u64,
    to_ms: u64,
) -> Result<BTreeMap<String, Totals>> {
    let mut users: BTreeMap<String, Totals> = BTreeMap::new();
    let mut add = |user: &str, json: &str| -> mpistat_store::Result<()> {
        let totals = stored::totals_of_json(json)?;
        match users.get_mut(user) {
            Some(sum) => sum.merge(&totals),
            None => {
                users.insert(user.to_string(), totals);
            }
        }
        Ok(())
    };
    for (span, days) in spans(from_ms, to_ms) {
        match span {
            Span::Day => db.each_user_day_totals(days, &mut add)?,
            Span::Week | Span::Month => db.each_user_span_totals(span, days, &mut add)?,
        }
    }
    Ok(users)
}

/// One user's whole rollup (routines and biggest jobs too) over `[from_ms, to_ms)`.
pub fn user_of_period(
    db: &ReadStore,
    user: &str,
    from_ms: u64,
    to_ms: u64,
) -> Result<Option<UserWeek>> {
    let mut sum: Option<UserWeek> = None;
    db.each_user_day_rollup(
        user,
        (from_ms / DAY_MS, to_ms.div_ceil(DAY_MS)),
        |totals, detail| {
            let week = stored::user_of_json(totals, detail)?;
            match &mut sum {
                Some(sum) => sum.merge(&week),
                None => sum = Some(week),
            }
            Ok(())
        },
    )?;
    Ok(sum)
}

/// Jobs, CPU time, MPI time and users of `[from_ms, to_ms)` from the rollups' columns.
pub fn totals_of_period(db: &ReadStore, from_ms: u64, to_ms: u64) -> Result<PeriodTotals> {
    Ok(db.totals_of_spans(&spans(from_ms, to_ms))?)
}

/// Call `f` with each stored sum of `dimension` in the hours `[from_hour, to_hour)`: its hour,
/// name and sums.
pub fn each_hour_group(
    db: &ReadStore,
    dimension: Dimension,
    from_hour: u64,
    to_hour: u64,
    mut f: impl FnMut(u64, &str, GroupSums),
) -> Result<()> {
    db.each_hour_group(dimension.name(), (from_hour, to_hour), |hour, name, row| {
        f(hour, name, row)
    })?;
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
        crate::week::days_since_epoch(date) as u64
    }

    fn spans_of(from: &str, to: &str) -> Vec<(Span, (u64, u64))> {
        spans(day(from) * DAY_MS, day(to) * DAY_MS)
    }

    #[test]
    fn a_month_is_one_span_of_months() {
        assert_eq!(
            spans_of("2026-11-01", "2026-12-01"),
            [(Span::Month, (day("2026-11-01"), day("2026-12-01")))]
        );
    }

    #[test]
    fn weeks_and_days_around_whole_months() {
        // Friday 2026-10-30 to Sunday 2027-01-03: the weekend before November, November and
        // December, then Friday to Sunday; 2026-10-26..11-02 is no whole week of the interval.
        assert_eq!(
            spans_of("2026-10-30", "2027-01-03"),
            [
                (Span::Day, (day("2026-10-30"), day("2026-11-01"))),
                (Span::Month, (day("2026-11-01"), day("2027-01-01"))),
                (Span::Day, (day("2027-01-01"), day("2027-01-03"))),
            ]
        );
        // Tuesday 2026-09-15 to Wednesday 2027-01-20.
        assert_eq!(
            spans_of("2026-09-15", "2027-01-20"),
            [
                (Span::Day, (day("2026-09-15"), day("2026-09-21"))),
                (Span::Week, (day("2026-09-21"), day("2026-09-28"))),
                (Span::Day, (day("2026-09-28"), day("2026-10-01"))),
                (Span::Month, (day("2026-10-01"), day("2027-01-01"))),
                (Span::Day, (day("2027-01-01"), day("2027-01-04"))),
                (Span::Week, (day("2027-01-04"), day("2027-01-18"))),
                (Span::Day, (day("2027-01-18"), day("2027-01-20"))),
            ]
        );
    }

    #[test]
    fn an_iso_week_is_one_span_of_a_week() {
        // W47, and W48 across the end of November.
        for (from, to) in [("2026-11-16", "2026-11-23"), ("2026-11-30", "2026-12-07")] {
            assert_eq!(spans_of(from, to), [(Span::Week, (day(from), day(to)))]);
        }
        // Saturday to Saturday: days only.
        assert_eq!(
            spans_of("2026-11-28", "2026-12-05"),
            [(Span::Day, (day("2026-11-28"), day("2026-12-05")))]
        );
    }

    #[test]
    fn the_monday_of_a_day() {
        assert_eq!(week_of(0), 0);
        assert_eq!(week_of(4), day("1970-01-05"));
        for date in ["2026-11-16", "2026-11-19", "2026-11-22"] {
            assert_eq!(week_of(day(date)), day("2026-11-16"), "{date}");
        }
        assert_eq!(week_of(day("2026-11-23")), day("2026-11-23"));
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
