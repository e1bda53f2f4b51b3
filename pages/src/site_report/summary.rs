//! What the admin pages say about an interval (Rabenseifner, "Automatic MPI Counter Profiling",
//! Sec. VI-VII, Fig. 5-14), added up from the rollups of its days ([`mpistat_figures::rollup`]):
//! the overview figures, CPU time by job size class and language, users, routines (with the
//! latency/transfer/sync estimates of the weekly mail, [`RoutineSums::rows`]), routine groups,
//! message sizes, imbalance, critical jobs and the trend; and the per-job rules the rollups apply
//! (size class, CPU class, routine group, imbalance). The page renderers only lay it out.

use super::listing::{Listing, CRITICAL_SORTS, JOB_SORTS, PAGE_ROWS};
use mpistat_figures::classes::JOB_CPU_CLASSES;
use mpistat_figures::period::Period;
use mpistat_figures::rollup::{self, language_index, ImbalancePoint, PeriodRollups, SlurmSums};
use mpistat_figures::sums::{percent, RoutineRow, RoutineSums, Totals, INSTRUCTIONS};
use mpistat_record::{Binding, JobRecord};
use mpistat_site::SiteConfig;
use mpistat_store::{JobOrder, PeriodTotals, ReadStore};
use std::collections::BTreeMap;

/// How many intervals before this one the trend shows.
pub const TREND_INTERVALS: usize = 4;

/// One user's line.
#[derive(Debug, Clone)]
pub struct UserRow {
    pub user: String,
    pub totals: Totals,
    /// Instructions per second of application time (outside MPI) per rank, where counted.
    pub instruction_rate: Option<f64>,
}

/// A job flagged as critical, with why.
#[derive(Debug, Clone)]
pub struct CriticalJob {
    pub job: JobRecord,
    pub reasons: Vec<String>,
}

/// One routine group (Rabenseifner, Fig. 11): in how many jobs, and in how much CPU time.
#[derive(Debug, Clone)]
pub struct GroupRow {
    pub name: String,
    pub jobs_percent: f64,
    pub cpu_percent: f64,
}

/// The interval's Slurm jobs of one account or partition.
#[derive(Debug, Clone)]
pub struct SlurmGroup {
    /// The account or partition; `(none)` when Slurm gave the job none.
    pub name: String,
    pub totals: Totals,
    /// Critical-path imbalance, percent of wall time, weighted by CPU time over the jobs with
    /// the figures.
    pub imbalance_percent: Option<f64>,
    /// Jobs on the critical page.
    pub critical: usize,
}

/// One routine table of the tables page (Rabenseifner, Fig. 12-13).
#[derive(Debug, Clone)]
pub struct RoutineTable {
    pub id: String,
    pub title: String,
    pub jobs: usize,
    pub rows: Vec<RoutineRow>,
}

/// Everything the pages of one interval show, added up from the rollups ([`mpistat_figures::rollup`]).
pub struct Summary {
    pub period: Period,
    pub capacity_hours: f64,
    pub total: Totals,
    pub routines: Vec<RoutineRow>,
    /// Estimated MPI time parts (rank-ns): latency, transfer, synchronisation (the rest).
    pub latency_ns: f64,
    pub transfer_ns: f64,
    pub sync_ns: f64,
    /// Waiting time in global collectives measured by the superstep estimates, and in how many
    /// jobs they ran.
    pub measured_sync_ns: u64,
    pub jobs_with_imbalance: usize,
    pub ranks_mean: f64,
    pub ranks_cpu_weighted: f64,
    /// Every user, most CPU time first.
    pub users: Vec<UserRow>,
    /// (Fortran, C) totals.
    pub by_language: [(Binding, Totals); 2],
    /// Per language: ranks per job, and weighted by CPU time.
    pub language_ranks: [(f64, f64); 2],
    /// Distinct routines called in all jobs, Fortran jobs, C jobs.
    pub routines_used: [usize; 3],
    pub by_size: Vec<(String, Totals)>,
    /// Jobs by their CPU time (Rabenseifner, Fig. 6-7): the class, and Fortran and C totals in it.
    pub by_job_cpu: Vec<(&'static str, [Totals; 2])>,
    pub groups: Vec<GroupRow>,
    /// Message-size histogram over every routine of every job (entry b: 2^(b-1)..2^b-1 bytes).
    pub histogram: Vec<u64>,
    /// The routine tables: all jobs, Fortran, C, each size class.
    pub tables: Vec<RoutineTable>,
    /// The imbalance chart's jobs (the biggest of each day), in end order.
    pub points: Vec<ImbalancePoint>,
    /// Jobs on the critical list.
    pub critical_jobs: usize,
    /// Jobs that ran in Slurm, by account and by partition (most CPU time first).
    pub by_account: Vec<SlurmGroup>,
    pub by_partition: Vec<SlurmGroup>,
    /// This interval and the ones before it, oldest first.
    pub trend: Vec<(String, PeriodTotals)>,
}

impl Summary {
    pub fn cpu_hours(&self) -> f64 {
        self.total.cpu_hours()
    }

    /// Percent of the CPU time consumed by the top `n` users.
    pub fn top_users_percent(&self, n: usize) -> f64 {
        let top: u64 = self.users.iter().take(n).map(|u| u.totals.wall_ns).sum();
        percent(top as f64, self.total.wall_ns as f64)
    }

    /// Distinct routines called in jobs of `binding` (all jobs for `None`).
    pub fn routines_used(&self, binding: Option<Binding>) -> usize {
        self.routines_used[binding.map_or(0, |b| 1 + language_index(b))]
    }
}

/// The summary of `period` from the rollups; the trend too.
pub fn summarise(
    db: &ReadStore,
    period: &Period,
    config: &SiteConfig,
) -> Result<Summary, crate::Error> {
    let PeriodRollups { site, users } = rollup::of_period(db, period.from_ms, period.to_ms)?;
    let total = site.total.clone();
    let all_routines = |languages: &[usize]| {
        let mut sums = RoutineSums::default();
        for language in languages {
            site.routines[*language]
                .values()
                .for_each(|s| sums.merge(s));
        }
        sums
    };
    let all = all_routines(&[0, 1]);
    let routines = all.rows(&config.digest);
    let latency_ns = routines.iter().filter_map(|r| r.latency_ns).sum();
    let transfer_ns = routines.iter().filter_map(|r| r.transfer_ns).sum();
    let sync_ns = total.mpi_ns as f64 - latency_ns - transfer_ns;
    let mut tables = vec![RoutineTable {
        id: "all".into(),
        title: "All jobs".into(),
        jobs: total.jobs,
        rows: routines.clone(),
    }];
    let mut routines_used = [all.routines.len(), 0, 0];
    for (binding, id) in [(Binding::Fortran, "fortran"), (Binding::C, "c")] {
        let language = language_index(binding);
        let sums = all_routines(&[language]);
        routines_used[1 + language] = sums.routines.len();
        tables.push(RoutineTable {
            id: id.into(),
            title: format!("{} jobs", binding.as_str()),
            jobs: site.by_language[language].jobs,
            rows: sums.rows(&config.digest),
        });
    }
    for (low, (label, totals)) in &site.by_size {
        let mut sums = RoutineSums::default();
        for language in 0..2 {
            if let Some(s) = site.routines[language].get(low) {
                sums.merge(s);
            }
        }
        tables.push(RoutineTable {
            id: format!("ranks-{label}"),
            title: format!("Jobs with {label} ranks"),
            jobs: totals.jobs,
            rows: sums.rows(&config.digest),
        });
    }
    let mut users: Vec<UserRow> = users
        .into_iter()
        .map(|(user, totals)| UserRow {
            instruction_rate: totals.rate(INSTRUCTIONS),
            user,
            totals,
        })
        .collect();
    users.sort_by(|a, b| {
        b.totals
            .wall_ns
            .cmp(&a.totals.wall_ns)
            .then_with(|| a.user.cmp(&b.user))
    });
    let groups = site
        .groups
        .iter()
        .map(|(name, (count, wall))| GroupRow {
            name: name.clone(),
            jobs_percent: percent(*count as f64, total.jobs as f64),
            cpu_percent: percent(*wall as f64, total.wall_ns as f64),
        })
        .collect();
    let mut trend = Vec::new();
    let mut at = Some(period.clone());
    while let Some(p) = at.filter(|_| trend.len() <= TREND_INTERVALS) {
        trend.push((
            p.label.clone(),
            rollup::totals_of_period(db, p.from_ms, p.to_ms)?,
        ));
        at = p.previous();
    }
    trend.reverse();
    let count = total.jobs.max(1) as f64;
    let ranks_sum = site.language_ranks[0].0 + site.language_ranks[1].0;
    let ranks_weighted = site.language_ranks[0].1 + site.language_ranks[1].1;
    let language_ranks = [0, 1].map(|language| {
        let (ranks, weighted) = site.language_ranks[language];
        let t = &site.by_language[language];
        (
            ranks as f64 / t.jobs.max(1) as f64,
            if t.wall_ns == 0 {
                0.0
            } else {
                weighted / t.wall_ns as f64
            },
        )
    });
    Ok(Summary {
        period: period.clone(),
        capacity_hours: config.digest.capacity_cores as f64 * period.hours(),
        routines,
        latency_ns,
        transfer_ns,
        sync_ns,
        measured_sync_ns: site.measured_sync_ns,
        jobs_with_imbalance: site.jobs_with_imbalance,
        ranks_mean: ranks_sum as f64 / count,
        ranks_cpu_weighted: if total.wall_ns == 0 {
            0.0
        } else {
            ranks_weighted / total.wall_ns as f64
        },
        users,
        by_language: [
            (Binding::Fortran, site.by_language[0].clone()),
            (Binding::C, site.by_language[1].clone()),
        ],
        language_ranks,
        routines_used,
        by_size: site.by_size.values().cloned().collect(),
        by_job_cpu: JOB_CPU_CLASSES
            .iter()
            .map(|(_, label)| *label)
            .zip(
                site.by_job_cpu
                    .iter()
                    .cloned()
                    .chain(std::iter::repeat(Default::default())),
            )
            .collect(),
        groups,
        histogram: site.histogram.clone(),
        tables,
        points: site.points.clone(),
        critical_jobs: critical_count(db, period)?,
        by_account: slurm_groups(&site.by_account),
        by_partition: slurm_groups(&site.by_partition),
        trend,
        total,
    })
}

/// The page of the critical list of `period` that `listing` says (by CPU time, or by end);
/// `count`: how many critical jobs `period` has.
pub fn critical_page(
    db: &ReadStore,
    period: &Period,
    listing: &Listing,
    count: usize,
) -> Result<Vec<CriticalJob>, crate::Error> {
    let order = match listing.sort_among(&CRITICAL_SORTS) {
        "end" => JobOrder::End,
        _ => JobOrder::Cpu,
    };
    let rows = db.critical_page(
        (period.from_ms, period.to_ms),
        order,
        count,
        (PAGE_ROWS, listing.from),
    )?;
    let mut jobs = Vec::new();
    for row in rows {
        if let Some(job) = db.job_ended_at(row.end_ms, &row.key)? {
            jobs.push(CriticalJob {
                job,
                reasons: row.reasons.split(", ").map(str::to_string).collect(),
            });
        }
    }
    Ok(jobs)
}

/// The traced jobs of `period` (the first [`PAGE_ROWS`], in end order) and how many there are.
pub fn traced_jobs(
    db: &ReadStore,
    period: &Period,
) -> Result<(Vec<JobRecord>, usize), crate::Error> {
    let (count, keys) = db.traced_between(period.from_ms, period.to_ms, PAGE_ROWS)?;
    Ok((db.jobs_ended_at(&keys)?, count))
}

/// The page of `user`'s jobs of `period` that `listing` says (see [`JOB_SORTS`]): from the
/// index of a user's jobs, reading only the rows shown.
pub fn user_jobs(
    db: &ReadStore,
    user: &str,
    period: &Period,
    listing: &Listing,
) -> Result<Vec<JobRecord>, crate::Error> {
    let order = match listing.sort_among(&JOB_SORTS) {
        "cpu" => JobOrder::Cpu,
        "mpi" => JobOrder::MpiShare,
        "ranks" => JobOrder::Ranks,
        _ => JobOrder::End,
    };
    let keys = db.jobs_of_user(
        user,
        (period.from_ms, period.to_ms),
        order,
        PAGE_ROWS,
        listing.from,
    )?;
    Ok(db.jobs_ended_at(&keys)?)
}

/// How many jobs of `period` are on the critical list.
fn critical_count(db: &ReadStore, period: &Period) -> Result<usize, crate::Error> {
    Ok(db.critical_count(period.from_ms, period.to_ms)?)
}

/// The Slurm groups (accounts or partitions), most CPU time first.
fn slurm_groups(groups: &BTreeMap<String, SlurmSums>) -> Vec<SlurmGroup> {
    let mut rows: Vec<SlurmGroup> = groups
        .iter()
        .map(|(name, g)| SlurmGroup {
            name: name.clone(),
            totals: g.totals.clone(),
            imbalance_percent: (g.imbalance_wall > 0.0)
                .then(|| g.imbalance_weighted / g.imbalance_wall),
            critical: g.critical,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.totals
            .wall_ns
            .cmp(&a.totals.wall_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpistat_record::model::SlurmFacts;

    #[test]
    fn slurm_jobs_group_by_account_and_partition() {
        let job = |hours: u64, slurm: Option<(&str, Option<&str>)>| JobRecord {
            job_id: format!("{hours}"),
            ranks: 1,
            wall_ns: mpistat_record::Stat::single(hours * 3_600_000_000_000, 0),
            slurm: slurm.map(|(partition, account)| SlurmFacts {
                job_id: format!("{hours}"),
                partition: Some(partition.into()),
                account: account.map(str::to_string),
                ..SlurmFacts::default()
            }),
            ..JobRecord::default()
        };
        let jobs = [
            job(1, Some(("debug", Some("physics")))),
            job(4, Some(("big", Some("physics")))),
            job(2, Some(("big", None))),
            job(8, None),
        ];
        let mut day = rollup::DayRollup::default();
        for (n, job) in jobs.iter().enumerate() {
            day.add(job, n == 1);
        }
        let accounts = slurm_groups(&day.by_account);
        let names: Vec<(&str, usize, f64, usize)> = accounts
            .iter()
            .map(|g| {
                (
                    g.name.as_str(),
                    g.totals.jobs,
                    g.totals.cpu_hours(),
                    g.critical,
                )
            })
            .collect();
        assert_eq!(names, [("physics", 2, 5.0, 1), ("(none)", 1, 2.0, 0)]);
        let partitions = slurm_groups(&day.by_partition);
        let names: Vec<(&str, usize, usize)> = partitions
            .iter()
            .map(|g| (g.name.as_str(), g.totals.jobs, g.critical))
            .collect();
        assert_eq!(names, [("big", 2, 1), ("debug", 1, 0)]);
        let mut outside = rollup::DayRollup::default();
        outside.add(&jobs[3], false);
        assert!(slurm_groups(&outside.by_account).is_empty());
    }
}
