//! What the admin pages say about an interval, computed from its job records (seed 003 Sec. VI-VII,
//! Fig. 5-14): the overview figures, CPU time by job size class and language, users, routines
//! (with the latency/transfer/sync estimates of the weekly mail, [`routine_rows`]), routine groups,
//! message sizes, imbalance, critical jobs and the trend. The page renderers only lay it out.

use super::period::Period;
use crate::db::{Database, PeriodTotals};
use crate::mail::content::{percent, routine_rows, RoutineRow, Totals};
use mpistat_record::model::SlurmFacts;
use mpistat_record::{Binding, JobRecord};
use mpistat_site::SiteConfig;
use std::collections::{BTreeMap, BTreeSet};

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
pub struct CriticalJob<'a> {
    pub job: &'a JobRecord,
    pub reasons: Vec<String>,
}

/// One routine group (seed 003 Fig. 11): in how many jobs, and in how much CPU time.
#[derive(Debug, Clone)]
pub struct GroupRow {
    pub name: &'static str,
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

/// Everything the pages of one interval show.
pub struct Summary<'a> {
    pub period: Period,
    pub jobs: &'a [JobRecord],
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
    pub users: Vec<UserRow>,
    /// (Fortran, C) totals.
    pub by_language: [(Binding, Totals); 2],
    pub by_size: Vec<(String, Totals)>,
    /// Jobs by their CPU time (seed 003 Fig. 6-7): the class, and Fortran and C totals in it.
    pub by_job_cpu: Vec<(&'static str, [Totals; 2])>,
    pub groups: Vec<GroupRow>,
    /// Message-size histogram over every routine of every job (entry b: 2^(b-1)..2^b-1 bytes).
    pub histogram: Vec<u64>,
    pub critical: Vec<CriticalJob<'a>>,
    /// Jobs that ran in Slurm, by account and by partition (most CPU time first).
    pub by_account: Vec<SlurmGroup>,
    pub by_partition: Vec<SlurmGroup>,
    /// This interval and the ones before it, oldest first.
    pub trend: Vec<(String, PeriodTotals)>,
}

impl Summary<'_> {
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
        self.jobs
            .iter()
            .filter(|j| binding.is_none_or(|b| j.binding == b))
            .flat_map(|j| j.routines.iter().map(|r| r.name.as_str()))
            .collect::<BTreeSet<_>>()
            .len()
    }
}

/// The size class of a job with `ranks` ranks: powers of two, `1`, `2-3`, `4-7`, ...
pub fn size_class(ranks: u32) -> (u32, String) {
    let low = if ranks <= 1 {
        1
    } else {
        1u32 << (31 - ranks.leading_zeros())
    };
    let label = if low == 1 {
        "1".to_string()
    } else {
        format!("{low}-{}", low.saturating_mul(2) - 1)
    };
    (low, label)
}

/// Add a message-size histogram to a sum of them.
pub fn add_histogram(sum: &mut Vec<u64>, hist: &[u64]) {
    if sum.len() < hist.len() {
        sum.resize(hist.len(), 0);
    }
    for (total, n) in sum.iter_mut().zip(hist) {
        *total += n;
    }
}

/// Classes of a job's CPU time (rank-hours), from: test runs to production jobs.
pub const JOB_CPU_CLASSES: [(f64, &str); 5] = [
    (0.0, "< 1 CPU h"),
    (1.0, "1-10 CPU h"),
    (10.0, "10-100 CPU h"),
    (100.0, "100-1000 CPU h"),
    (1000.0, ">= 1000 CPU h"),
];

/// Index of a job's class in [`JOB_CPU_CLASSES`].
fn job_cpu_class(job: &JobRecord) -> usize {
    let hours = job.wall_ns.sum as f64 / 3.6e12;
    JOB_CPU_CLASSES
        .iter()
        .rposition(|(from, _)| hours >= *from)
        .unwrap_or(0)
}

/// Critical-path imbalance of a job in percent of its wall time, where it was estimated.
pub fn imbalance_percent(job: &JobRecord) -> Option<f64> {
    let imbalance = job.imbalance.as_ref()?;
    if imbalance.unavailable.is_some() || job.wall_ns.max == 0 {
        return None;
    }
    Some(percent(
        imbalance.critical_path_ns as f64,
        job.wall_ns.max as f64,
    ))
}

/// The routine group of seed 003 Fig. 11 a routine belongs to (`None`: Init, Finalize,
/// Comm_size and Comm_rank, which every job calls).
pub fn routine_group(name: &str, class: &str) -> Option<&'static str> {
    if matches!(
        name,
        "MPI_Init" | "MPI_Init_thread" | "MPI_Finalize" | "MPI_Comm_size" | "MPI_Comm_rank"
    ) {
        return None;
    }
    Some(match class {
        "p2p" if name.ends_with("_init") || name.starts_with("MPI_Start") => "persistent pt-to-pt",
        "p2p"
            if name.starts_with("MPI_I")
                || name.starts_with("MPI_Wait")
                || name.starts_with("MPI_Test") =>
        {
            "nonblocking pt-to-pt"
        }
        "p2p" => "blocking pt-to-pt",
        "collective" => "collective",
        "one-sided" => "one-sided",
        "io" => "I/O",
        "datatype" if name.contains("ack") => "pack and unpack",
        "datatype" => "derived datatype",
        "comm" => "group and communicator",
        "topology" => "topology",
        _ if name.starts_with("MPI_Wtime") || name.starts_with("MPI_Wtick") => "wtime",
        _ => "other",
    })
}

/// The instruction rate of a user's jobs (see [`UserRow::instruction_rate`]).
fn instruction_rate(jobs: &[&JobRecord]) -> Option<f64> {
    let mut instructions = 0u64;
    let mut app_ns = 0u64;
    for job in jobs {
        let counted = job.counters.as_ref().and_then(|c| {
            c.events
                .iter()
                .find(|e| e.name == "instructions" && e.unavailable.is_none())
        });
        if let Some(event) = counted {
            instructions += event.app;
            app_ns += job.wall_ns.sum.saturating_sub(job.mpi_ns.sum);
        }
    }
    (app_ns > 0).then(|| instructions as f64 / (app_ns as f64 * 1e-9))
}

/// The summary of `jobs` (the records of `period`); the trend comes from `db`.
pub fn summarise<'a>(
    db: &Database,
    jobs: &'a [JobRecord],
    period: &Period,
    config: &SiteConfig,
) -> anyhow::Result<Summary<'a>> {
    let all: Vec<&JobRecord> = jobs.iter().collect();
    let mut total = Totals::default();
    let mut by_user: BTreeMap<&str, Vec<&JobRecord>> = BTreeMap::new();
    let mut by_size: BTreeMap<u32, (String, Totals)> = BTreeMap::new();
    let mut fortran = Totals::default();
    let mut c = Totals::default();
    let mut by_job_cpu: Vec<[Totals; 2]> = vec![Default::default(); JOB_CPU_CLASSES.len()];
    let mut ranks_weighted = 0.0;
    let mut ranks_sum = 0u64;
    let mut histogram: Vec<u64> = Vec::new();
    let mut measured_sync_ns = 0;
    let mut jobs_with_imbalance = 0;
    let mut group_jobs: BTreeMap<&'static str, (usize, u64)> = BTreeMap::new();
    for job in jobs {
        total.add(job);
        by_user.entry(job.user.as_str()).or_default().push(job);
        let (low, label) = size_class(job.ranks);
        by_size
            .entry(low)
            .or_insert((label, Totals::default()))
            .1
            .add(job);
        let language = match job.binding {
            Binding::Fortran => {
                fortran.add(job);
                0
            }
            Binding::C => {
                c.add(job);
                1
            }
        };
        by_job_cpu[job_cpu_class(job)][language].add(job);
        ranks_sum += u64::from(job.ranks);
        ranks_weighted += f64::from(job.ranks) * job.wall_ns.sum as f64;
        let mut groups = BTreeSet::new();
        for r in &job.routines {
            add_histogram(&mut histogram, &r.hist);
            measured_sync_ns += r.sync_ns.unwrap_or(0);
            groups.extend(routine_group(&r.name, &r.class));
        }
        for group in groups {
            let entry = group_jobs.entry(group).or_default();
            entry.0 += 1;
            entry.1 += job.wall_ns.sum;
        }
        if imbalance_percent(job).is_some() {
            jobs_with_imbalance += 1;
        }
    }
    let routines = routine_rows(&all, &config.digest);
    let latency_ns = routines.iter().filter_map(|r| r.latency_ns).sum();
    let transfer_ns = routines.iter().filter_map(|r| r.transfer_ns).sum();
    let sync_ns = total.mpi_ns as f64 - latency_ns - transfer_ns;
    let mut users: Vec<UserRow> = by_user
        .iter()
        .map(|(user, jobs)| {
            let mut totals = Totals::default();
            jobs.iter().for_each(|j| totals.add(j));
            UserRow {
                user: user.to_string(),
                totals,
                instruction_rate: instruction_rate(jobs),
            }
        })
        .collect();
    users.sort_by(|a, b| {
        b.totals
            .wall_ns
            .cmp(&a.totals.wall_ns)
            .then_with(|| a.user.cmp(&b.user))
    });
    let groups = group_jobs
        .into_iter()
        .map(|(name, (count, wall))| GroupRow {
            name,
            jobs_percent: percent(count as f64, jobs.len() as f64),
            cpu_percent: percent(wall as f64, total.wall_ns as f64),
        })
        .collect();
    let thresholds = &config.site_report;
    let mut critical: Vec<CriticalJob> = jobs
        .iter()
        .filter(|j| j.wall_ns.sum as f64 / 3.6e12 >= thresholds.critical_min_cpu_hours)
        .filter_map(|job| {
            let mut reasons = Vec::new();
            let mpi = 100.0 * job.mpi_fraction();
            if mpi >= thresholds.critical_mpi_percent {
                reasons.push(format!("MPI {mpi:.1} %"));
            }
            if let Some(imbalance) =
                imbalance_percent(job).filter(|i| *i >= thresholds.critical_imbalance_percent)
            {
                reasons.push(format!("imbalance {imbalance:.1} %"));
            }
            (!reasons.is_empty()).then_some(CriticalJob { job, reasons })
        })
        .collect();
    critical.sort_by(|a, b| {
        b.job
            .wall_ns
            .sum
            .cmp(&a.job.wall_ns.sum)
            .then_with(|| a.job.key().cmp(&b.job.key()))
    });
    let by_account = slurm_groups(jobs, &critical, |s| s.account.as_deref());
    let by_partition = slurm_groups(jobs, &critical, |s| s.partition.as_deref());
    let mut trend = Vec::new();
    let mut at = Some(period.clone());
    while let Some(p) = at.filter(|_| trend.len() <= TREND_INTERVALS) {
        trend.push((p.label.clone(), db.totals_between(p.from_ms, p.to_ms)?));
        at = p.previous();
    }
    trend.reverse();
    let count = jobs.len().max(1) as f64;
    Ok(Summary {
        period: period.clone(),
        jobs,
        capacity_hours: config.digest.capacity_cores as f64 * period.hours(),
        routines,
        latency_ns,
        transfer_ns,
        sync_ns,
        measured_sync_ns,
        jobs_with_imbalance,
        ranks_mean: ranks_sum as f64 / count,
        ranks_cpu_weighted: if total.wall_ns == 0 {
            0.0
        } else {
            ranks_weighted / total.wall_ns as f64
        },
        total,
        users,
        by_language: [(Binding::Fortran, fortran), (Binding::C, c)],
        by_size: by_size.into_values().collect(),
        by_job_cpu: JOB_CPU_CLASSES
            .iter()
            .map(|(_, label)| *label)
            .zip(by_job_cpu)
            .collect(),
        groups,
        histogram,
        critical,
        by_account,
        by_partition,
        trend,
    })
}

/// The jobs with Slurm facts grouped by `key` (account or partition), most CPU time first.
fn slurm_groups(
    jobs: &[JobRecord],
    critical: &[CriticalJob],
    key: impl Fn(&SlurmFacts) -> Option<&str>,
) -> Vec<SlurmGroup> {
    let name = |job: &JobRecord| {
        job.slurm
            .as_ref()
            .map(|s| key(s).unwrap_or("(none)").to_string())
    };
    // Totals, imbalance percent × CPU time and that CPU time, critical jobs.
    let mut groups: BTreeMap<String, (Totals, f64, f64, usize)> = BTreeMap::new();
    for job in jobs {
        let Some(name) = name(job) else { continue };
        let group = groups.entry(name).or_default();
        group.0.add(job);
        if let Some(i) = imbalance_percent(job) {
            group.1 += i * job.wall_ns.sum as f64;
            group.2 += job.wall_ns.sum as f64;
        }
    }
    for c in critical {
        if let Some(group) = name(c.job).and_then(|n| groups.get_mut(&n)) {
            group.3 += 1;
        }
    }
    let mut rows: Vec<SlurmGroup> = groups
        .into_iter()
        .map(|(name, (totals, weighted, wall, critical))| SlurmGroup {
            name,
            totals,
            imbalance_percent: (wall > 0.0).then(|| weighted / wall),
            critical,
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
        let critical = [CriticalJob {
            job: &jobs[1],
            reasons: vec![],
        }];
        let accounts = slurm_groups(&jobs, &critical, |s| s.account.as_deref());
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
        let partitions = slurm_groups(&jobs, &critical, |s| s.partition.as_deref());
        let names: Vec<(&str, usize, usize)> = partitions
            .iter()
            .map(|g| (g.name.as_str(), g.totals.jobs, g.critical))
            .collect();
        assert_eq!(names, [("big", 2, 1), ("debug", 1, 0)]);
        assert!(slurm_groups(&jobs[3..], &[], |s| s.account.as_deref()).is_empty());
    }

    #[test]
    fn size_classes_are_powers_of_two() {
        assert_eq!(size_class(1).1, "1");
        assert_eq!(size_class(2).1, "2-3");
        assert_eq!(size_class(7).1, "4-7");
        assert_eq!(size_class(64), (64, "64-127".to_string()));
    }

    #[test]
    fn groups_follow_seed_003() {
        assert_eq!(routine_group("MPI_Init", "misc"), None);
        assert_eq!(
            routine_group("MPI_Isend", "p2p"),
            Some("nonblocking pt-to-pt")
        );
        assert_eq!(
            routine_group("MPI_Send_init", "p2p"),
            Some("persistent pt-to-pt")
        );
        assert_eq!(routine_group("MPI_Send", "p2p"), Some("blocking pt-to-pt"));
        assert_eq!(
            routine_group("MPI_Allreduce", "collective"),
            Some("collective")
        );
    }
}
