//! What one user's weekly mail says, computed from the week's job records: the level-1 lines with
//! the site's reference values, recommendations, the level-2 routine table (seed 003 Fig. 4) with
//! latency/transfer/synchronisation estimates, and the top jobs. The text and HTML renderers only
//! lay this out.

use mpistat_record::JobRecord;
use mpistat_site::{DigestConfig, LinkCost};
use std::collections::BTreeMap;

pub const NS_PER_HOUR: f64 = 3600e9;
const HOURS_PER_WEEK: f64 = 168.0;

/// One level-1 figure of a user, with the site's reference values for the week.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: &'static str,
    pub value: String,
    /// `min / median / max` over all users of the week.
    pub reference: String,
    pub critical: bool,
}

/// One row of the per-routine table, summed over the user's jobs (and their ranks).
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineRow {
    pub name: String,
    pub calls: u64,
    pub calls_per_rank: f64,
    pub time_ns: u64,
    pub count: u64,
    pub bytes: u64,
    /// Share of the user's MPI time, 0..1.
    pub share: f64,
    pub cost: Option<LinkCost>,
    /// Latency, transfer and synchronisation estimates (ns; sync may be negative).
    pub latency_ns: Option<f64>,
    pub transfer_ns: Option<f64>,
    pub sync_ns: Option<f64>,
}

/// One of the user's biggest jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct TopJob {
    pub job_id: String,
    pub exe: String,
    pub ranks: u32,
    pub cpu_hours: f64,
    pub mpi_percent: f64,
    pub load_balance: f64,
}

/// Everything one user's mail says.
#[derive(Debug, Clone, PartialEq)]
pub struct UserDigest {
    pub user: String,
    pub week: String,
    pub jobs: usize,
    pub figures: Vec<Figure>,
    pub recommendations: Vec<String>,
    pub routines: Vec<RoutineRow>,
    pub top_jobs: Vec<TopJob>,
    /// The user's MPI share of wall time (percent), and every user's of the week.
    pub mpi_percent: f64,
    pub site_mpi_percents: Vec<f64>,
    /// Level 6: the user's traced jobs of the week and what their traces' analyses found.
    pub traced: Vec<TracedJob>,
}

/// A traced job's analysis, for the mail's level-6 section.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedJob {
    pub job_id: String,
    pub exe: String,
    /// The trace directory (the full report: `mpistat analyze DIR`).
    pub dir: String,
    /// The analysis' summary, or why there is none.
    pub summary: Result<crate::analyze::Summary, String>,
}

impl TracedJob {
    /// From a stored analysis (a summary that no longer parses is told as such).
    pub fn from_stored(stored: crate::db::StoredAnalysis) -> TracedJob {
        let summary = match (&stored.summary, &stored.error) {
            (Some(json), _) => serde_json::from_str(json)
                .map_err(|e| format!("the stored summary is not readable: {e}")),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Err("no result".into()),
        };
        TracedJob {
            job_id: stored.job_id,
            exe: stored.exe,
            dir: stored.dir,
            summary,
        }
    }
}

/// Totals of a set of jobs (a user's, a size class's): behind the level-1 figures of the mail
/// and the admin pages.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    pub jobs: usize,
    pub ranks_min: u32,
    pub ranks_max: u32,
    /// Rank-nanoseconds (CPU time) and the part of it in MPI.
    pub wall_ns: u64,
    pub mpi_ns: u64,
    /// CPU-time-weighted sum of load-balance efficiencies.
    balance_weighted: f64,
}

impl Totals {
    pub fn add(&mut self, job: &JobRecord) {
        self.ranks_min = if self.jobs == 0 {
            job.ranks
        } else {
            self.ranks_min.min(job.ranks)
        };
        self.ranks_max = self.ranks_max.max(job.ranks);
        self.jobs += 1;
        self.wall_ns += job.wall_ns.sum;
        self.mpi_ns += job.mpi_ns.sum;
        self.balance_weighted += load_balance(job) * job.wall_ns.sum as f64;
    }

    pub fn cpu_hours(&self) -> f64 {
        self.wall_ns as f64 / NS_PER_HOUR
    }

    pub fn mpi_percent(&self) -> f64 {
        percent(self.mpi_ns as f64, self.wall_ns as f64)
    }

    pub fn load_balance(&self) -> f64 {
        if self.wall_ns == 0 {
            1.0
        } else {
            self.balance_weighted / self.wall_ns as f64
        }
    }
}

pub fn percent(part: f64, whole: f64) -> f64 {
    if whole == 0.0 {
        0.0
    } else {
        100.0 * part / whole
    }
}

/// Load-balance efficiency of a job, estimated from its per-rank times: the average rank's
/// computing time (outside MPI) over the busiest rank's (wall time minus the least MPI time).
pub fn load_balance(job: &JobRecord) -> f64 {
    let ranks = f64::from(job.ranks.max(1));
    let average = (job.wall_ns.sum.saturating_sub(job.mpi_ns.sum)) as f64 / ranks;
    let busiest = job.wall_ns.max.saturating_sub(job.mpi_ns.min) as f64;
    if busiest <= 0.0 {
        1.0
    } else {
        (average / busiest).min(1.0)
    }
}

/// `min / median / max` of `values`, formatted by `show`.
fn reference(mut values: Vec<f64>, show: impl Fn(f64) -> String) -> String {
    values.sort_by(f64::total_cmp);
    let Some(&max) = values.last() else {
        return String::new();
    };
    let mid = values.len() / 2;
    let median = if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    };
    format!("{} / {} / {}", show(values[0]), show(median), show(max))
}

/// Benchmark figures of a routine: by its name, else by its class.
fn cost_of(config: &DigestConfig, name: &str, class: &str) -> Option<LinkCost> {
    config
        .network
        .get(name)
        .or_else(|| config.network.get(class))
        .copied()
}

/// The mail of every user with jobs in `jobs` (one week's records), by user name.
pub fn digests(jobs: &[JobRecord], week: &str, config: &DigestConfig) -> Vec<UserDigest> {
    digests_over(jobs, week, HOURS_PER_WEEK, config)
}

/// The figures of every user with jobs in `jobs`, records of an interval (`label`) of `hours`
/// hours (the machine's capacity in that interval is `capacity_cores` × `hours`).
pub fn digests_over(
    jobs: &[JobRecord],
    week: &str,
    hours: f64,
    config: &DigestConfig,
) -> Vec<UserDigest> {
    let mut by_user: BTreeMap<&str, Vec<&JobRecord>> = BTreeMap::new();
    for job in jobs {
        by_user.entry(job.user.as_str()).or_default().push(job);
    }
    let totals: BTreeMap<&str, Totals> = by_user
        .iter()
        .map(|(user, jobs)| {
            let mut t = Totals::default();
            jobs.iter().for_each(|job| t.add(job));
            (*user, t)
        })
        .collect();
    let capacity_hours = config.capacity_cores as f64 * hours;
    let site_mpi_percents: Vec<f64> = totals.values().map(Totals::mpi_percent).collect();
    let site = |f: &dyn Fn(&Totals) -> f64| totals.values().map(f).collect::<Vec<f64>>();
    let share = |t: &Totals| percent(t.cpu_hours(), capacity_hours);
    let references = [
        reference(site(&|t| t.jobs as f64), |v| format!("{v:.0}")),
        reference(site(&|t| t.cpu_hours()), |v| format!("{v:.1}")),
        reference(site(&share), |v| format!("{v:.3} %")),
        reference(site(&|t| t.mpi_percent()), |v| format!("{v:.1} %")),
        reference(site(&|t| t.load_balance()), |v| format!("{v:.2}")),
    ];
    by_user
        .iter()
        .map(|(user, jobs)| {
            let t = &totals[user];
            let mpi_critical = t.mpi_percent() >= config.critical_mpi_percent;
            let balance_critical = t.load_balance() < config.critical_load_balance;
            let ranks = if t.ranks_min == t.ranks_max {
                format!("{}", t.ranks_max)
            } else {
                format!("{}-{}", t.ranks_min, t.ranks_max)
            };
            let figures = vec![
                figure(
                    "jobs",
                    format!("{} ({ranks} ranks)", t.jobs),
                    &references[0],
                    false,
                ),
                figure(
                    "CPU hours",
                    format!("{:.1}", t.cpu_hours()),
                    &references[1],
                    false,
                ),
                figure(
                    "machine share",
                    format!("{:.3} %", share(t)),
                    &references[2],
                    false,
                ),
                figure(
                    "MPI time",
                    format!("{:.1} %", t.mpi_percent()),
                    &references[3],
                    mpi_critical,
                ),
                figure(
                    "load balance",
                    format!("{:.2}", t.load_balance()),
                    &references[4],
                    balance_critical,
                ),
            ];
            let routines = routine_rows(jobs, config);
            let recommendations = recommendations(t, &routines, mpi_critical, balance_critical);
            UserDigest {
                user: user.to_string(),
                week: week.to_string(),
                jobs: t.jobs,
                figures,
                recommendations,
                routines,
                top_jobs: top_jobs(jobs),
                mpi_percent: t.mpi_percent(),
                site_mpi_percents: site_mpi_percents.clone(),
                traced: Vec::new(),
            }
        })
        .collect()
}

fn figure(name: &'static str, value: String, reference: &str, critical: bool) -> Figure {
    Figure {
        name,
        value,
        reference: reference.to_string(),
        critical,
    }
}

/// The per-routine table over `jobs`, by time, with the estimates of seed 003 Fig. 4: latency =
/// calls × latency, transfer = bytes / bandwidth, synchronisation = time − both.
pub fn routine_rows(jobs: &[&JobRecord], config: &DigestConfig) -> Vec<RoutineRow> {
    let total_ranks: u64 = jobs.iter().map(|j| u64::from(j.ranks)).sum();
    let mpi_ns: u64 = jobs.iter().map(|j| j.mpi_ns.sum).sum();
    let mut rows: BTreeMap<&str, RoutineRow> = BTreeMap::new();
    for job in jobs {
        for r in &job.routines {
            let row = rows.entry(r.name.as_str()).or_insert_with(|| RoutineRow {
                name: r.name.clone(),
                calls: 0,
                calls_per_rank: 0.0,
                time_ns: 0,
                count: 0,
                bytes: 0,
                share: 0.0,
                cost: cost_of(config, &r.name, &r.class),
                latency_ns: None,
                transfer_ns: None,
                sync_ns: None,
            });
            row.calls += r.calls.sum;
            row.time_ns += r.time_ns.sum;
            row.count += r.count.sum;
            row.bytes += r.bytes.sum;
        }
    }
    let mut rows: Vec<RoutineRow> = rows.into_values().collect();
    for row in &mut rows {
        row.calls_per_rank = row.calls as f64 / total_ranks.max(1) as f64;
        row.share = row.time_ns as f64 / mpi_ns.max(1) as f64;
        if let Some(cost) = row.cost {
            let latency = row.calls as f64 * cost.latency_us * 1e3;
            let transfer = row.bytes as f64 / (cost.bandwidth_mb_s * 1e6) * 1e9;
            row.latency_ns = Some(latency);
            row.transfer_ns = Some(transfer);
            row.sync_ns = Some(row.time_ns as f64 - latency - transfer);
        }
    }
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// At most three plain-language suggestions from the numbers.
fn recommendations(
    t: &Totals,
    routines: &[RoutineRow],
    mpi_critical: bool,
    balance_critical: bool,
) -> Vec<String> {
    let mut said = Vec::new();
    if let Some(top) = routines.first().filter(|_| mpi_critical) {
        let waiting = top.sync_ns.unwrap_or(0.0) / top.time_ns.max(1) as f64;
        said.push(if waiting > 0.5 {
            format!(
                "{:.0} % of your MPI time is spent in {}, mostly waiting: the work before it is \
                 unbalanced across ranks.",
                100.0 * top.share,
                top.name
            )
        } else {
            format!(
                "{:.0} % of your MPI time is spent in {}: send fewer, larger messages or overlap \
                 communication with computation.",
                100.0 * top.share,
                top.name
            )
        });
    }
    if balance_critical {
        said.push(format!(
            "Your busiest ranks compute about {:.0} % longer than the average rank: distribute \
             the work more evenly.",
            100.0 * (1.0 / t.load_balance().max(0.01) - 1.0)
        ));
    }
    let latency: f64 = routines.iter().filter_map(|r| r.latency_ns).sum();
    if latency > 0.2 * t.mpi_ns as f64 && t.mpi_ns > 0 {
        said.push(format!(
            "About {:.0} % of your MPI time is message latency: combine small messages.",
            percent(latency, t.mpi_ns as f64)
        ));
    }
    said.truncate(3);
    said
}

/// The user's five biggest jobs by CPU time.
fn top_jobs(jobs: &[&JobRecord]) -> Vec<TopJob> {
    let mut top: Vec<&&JobRecord> = jobs.iter().collect();
    top.sort_by(|a, b| {
        b.wall_ns
            .sum
            .cmp(&a.wall_ns.sum)
            .then_with(|| a.key().cmp(&b.key()))
    });
    top.into_iter()
        .take(5)
        .map(|job| TopJob {
            job_id: job.job_id.clone(),
            exe: job.exe.clone(),
            ranks: job.ranks,
            cpu_hours: job.wall_ns.sum as f64 / NS_PER_HOUR,
            mpi_percent: 100.0 * job.mpi_fraction(),
            load_balance: load_balance(job),
        })
        .collect()
}

/// "How to go further": one paragraph per level 3-6, title and text.
pub const FURTHER: [(&str, &str); 4] = [
    (
        "Level 3, one job in detail",
        "Set MPISTAT_DETAIL=stderr (or stdout, or a file name) before mpirun: at the end of the \
         job you get this table for that job alone, with per-rank minimum and maximum and message \
         sizes.",
    ),
    (
        "Level 4, parts of a program",
        "Call MPI_Pcontrol(2) in your code to print the counts so far of one rank, and \
         MPI_Pcontrol(0) / MPI_Pcontrol(1) to pause and resume counting around a phase.",
    ),
    (
        "Level 5, hardware counters",
        "Set MPISTAT_COUNTERS=instructions,fp-ops,llc-misses (or other counters your site allows) \
         to count them in your program and in MPI separately.",
    ),
    (
        "Level 6, traces",
        "When the numbers point at a problem you want to see in time, record a trace of one run \
         with a tracing tool (e.g. Score-P with Vampir) and look at the routines named above.",
    ),
];
