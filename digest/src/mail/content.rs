//! What one user's weekly mail says, computed from the week's job records: the level-1 lines with
//! the site's reference values (including the counter rates and the imbalance figures),
//! recommendations, the level-2 routine table (seed 003 Fig. 4) with latency/transfer/
//! synchronisation estimates, the counters of the application vs MPI, and the top jobs. The text
//! and HTML renderers only lay this out.

use mpistat_record::units::rate;
use mpistat_record::JobRecord;
use mpistat_site::{DigestConfig, LinkCost};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const NS_PER_HOUR: f64 = 3600e9;

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
    /// Latency, transfer and synchronisation estimates (ns, never negative: latency and
    /// transfer are capped at the time measured, sync is what is left of it).
    pub latency_ns: Option<f64>,
    pub transfer_ns: Option<f64>,
    pub sync_ns: Option<f64>,
    /// Whether the benchmark's figures fit: latency and transfer estimated from them are not
    /// more than the time measured (non-blocking calls return before their message is sent, so
    /// the model rarely fits them). False only when there are estimates.
    pub fits: bool,
}

/// One counter event of the level-2 table, summed over the user's jobs that counted it.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterRow {
    pub name: String,
    /// Whether a job split it into outside and inside MPI; the four numbers below are of
    /// those jobs (zero when none did).
    pub split: bool,
    /// Events outside and inside MPI.
    pub app: u64,
    pub mpi: u64,
    /// Events per rank and second outside MPI, and inside MPI.
    pub app_per_s: f64,
    pub mpi_per_s: f64,
    /// Events of the jobs that read it in the totals mode (at `MPI_Init` and `MPI_Finalize`
    /// only): not split.
    pub unsplit: u64,
    /// Why no job of the user counted it (then the numbers are zero).
    pub unavailable: Option<String>,
}

/// A job's application for people: with the interpreter's file name after a script or module
/// (`/home/alice/run.py (python3.11)`); `short` keeps only the application's file name.
pub fn application_label(app: &str, interpreter: Option<&str>, short: bool) -> String {
    let file_name = |path: &'_ str| path.rsplit('/').next().unwrap_or(path).to_string();
    let app = if short {
        file_name(app)
    } else {
        app.to_string()
    };
    match interpreter {
        Some(interpreter) => format!("{app} ({})", file_name(interpreter)),
        None => app,
    }
}

/// One of the user's biggest jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopJob {
    /// As the user finds it in `sacct` when the job ran in Slurm (`4711_3.0`), else the record's.
    pub job_id: String,
    /// [`JobRecord::application`] and its interpreter, if any.
    pub app: String,
    pub interpreter: Option<String>,
    /// The Slurm job name, if any.
    pub job_name: Option<String>,
    pub ranks: u32,
    pub cpu_hours: f64,
    pub mpi_percent: f64,
    pub load_balance: f64,
    /// Critical-path imbalance, percent of wall time (when the record has the figures).
    pub imbalance_percent: Option<f64>,
    /// `job_id` and `job_name` are Slurm's as the job's environment claimed them (not verified).
    #[serde(default)]
    pub slurm: bool,
}

/// What the mail says of Slurm facts: the job's environment gave them, nothing verified them.
pub const SLURM_CLAIMED: &str =
    "Slurm job ids, names and allocations are as the jobs' environment claimed them, not verified.";

/// Everything one user's mail says.
#[derive(Debug, Clone, PartialEq)]
pub struct UserDigest {
    pub user: String,
    pub week: String,
    pub jobs: usize,
    pub figures: Vec<Figure>,
    /// What the level-1 figures mean and where they come from, one sentence each.
    pub notes: Vec<String>,
    pub recommendations: Vec<String>,
    pub routines: Vec<RoutineRow>,
    /// How the counters were read, and the level-2 counter table (empty: none chosen).
    pub counters_mode: String,
    pub counters: Vec<CounterRow>,
    pub top_jobs: Vec<TopJob>,
    /// The user's MPI share of wall time (percent), and every user's of the week: one list
    /// shared by every user's digest (a copy each was quadratic in the users: 800 MB for 10,000).
    pub mpi_percent: f64,
    pub site_mpi_percents: Arc<[f64]>,
    /// Level 6: the user's traced jobs of the week and what their traces' analyses found.
    pub traced: Vec<TracedJob>,
}

/// A traced job's analysis, for the mail's level-6 section.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedJob {
    pub job_id: String,
    /// [`JobRecord::application`].
    pub app: String,
    /// The trace directory (the full report: `mpistat analyze DIR`).
    pub dir: String,
    /// The analysis' summary, or why there is none.
    pub summary: Result<crate::analyze::Summary, String>,
}

impl TracedJob {
    /// From a stored analysis (a summary that no longer parses is told as such).
    pub fn from_stored(stored: mpistat_store::StoredAnalysis) -> TracedJob {
        let summary = match (&stored.summary, &stored.error) {
            (Some(json), _) => serde_json::from_str(json)
                .map_err(|e| format!("the stored summary is not readable: {e}")),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Err("no result".into()),
        };
        TracedJob {
            job_id: stored.job_id,
            app: stored.app,
            dir: stored.dir,
            summary,
        }
    }
}

/// Counter event names behind the level-1 rates: instructions, floating-point operations and
/// last-level cache misses.
pub const INSTRUCTIONS: &str = "instructions";
const FP_OPS: &str = "fp-ops";
const CACHE_MISSES: &str = "llc-misses";

/// One counter event summed over a user's jobs that counted it.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct CounterTotal {
    /// Events outside and inside MPI of the jobs that split them.
    app: u64,
    mpi: u64,
    /// Rank-time outside and inside MPI of those jobs.
    app_ns: u64,
    mpi_ns: u64,
    /// Events of the jobs that read them in the totals mode, and those jobs' rank-time outside
    /// MPI (their events, MPI's included, stand for the computation in the level-1 rates: the
    /// best there is; their MPI part is no zero to average in).
    unsplit: u64,
    unsplit_app_ns: u64,
    counted: bool,
    /// Whether a job split it.
    split: bool,
    /// Why a job did not count it (the first reason seen).
    unavailable: Option<String>,
}

/// Events per second of `ns` rank-nanoseconds (0 without time).
fn per_s(events: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        events as f64 / (ns as f64 * 1e-9)
    }
}

impl CounterTotal {
    /// Events per rank and second outside MPI, if any job counted the event.
    fn app_rate(&self) -> Option<f64> {
        let ns = self.app_ns + self.unsplit_app_ns;
        (self.counted && ns > 0).then(|| per_s(self.app + self.unsplit, ns))
    }
}

/// Totals of a set of jobs (a user's, a size class's): behind the level-1 figures of the mail
/// and the admin pages. Kept in the rollups ([`crate::rollup`]): [`Totals::merge`] adds two.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Totals {
    pub jobs: usize,
    pub ranks_min: u32,
    pub ranks_max: u32,
    /// Rank-nanoseconds (CPU time) and the part of it in MPI.
    pub wall_ns: u64,
    pub mpi_ns: u64,
    /// CPU-time-weighted sum of load-balance efficiencies.
    balance_weighted: f64,
    /// Jobs whose load balance is only estimated (no superstep figures).
    balance_estimated: usize,
    /// CPU-time-weighted sum of critical-path imbalance percentages, and the weight (CPU time of
    /// the jobs with the figures).
    imbalance_weighted: f64,
    imbalance_weight: f64,
    /// Counter events by name; the mode of the first job that chose counters.
    counters: BTreeMap<String, CounterTotal>,
    counters_mode: String,
    /// Over the jobs that know their Slurm allocation: allocated CPUs and ranks, each times the
    /// job's wall time (slowest rank); and the job that used the least of its allocation (share,
    /// Slurm job, ranks, CPUs).
    allocated_cpu_ns: f64,
    allocated_rank_ns: f64,
    least_used: Option<(f64, String, u32, u64)>,
    /// Bytes on and off node of the jobs on several nodes that say so (version 3 records).
    node_bytes: mpistat_record::model::NodeBytes,
}

/// Jobs in the "biggest jobs" table.
const TOP_JOBS: usize = 5;

/// One routine summed over a set of jobs (and their ranks).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct RoutineSum {
    /// The routine's class (`p2p`, `collective`, ...), which its cost model depends on.
    pub class: String,
    pub calls: u64,
    pub time_ns: u64,
    pub count: u64,
    pub bytes: u64,
}

/// The routine table's sums over a set of jobs, by routine (the estimates are made from them
/// with the site's network model when the table is made, [`RoutineSums::rows`]).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct RoutineSums {
    pub routines: BTreeMap<String, RoutineSum>,
    /// Ranks and MPI time of all the jobs.
    pub total_ranks: u64,
    pub mpi_ns: u64,
}

/// What a user's mail needs of their week, built one job at a time (also kept per day in the
/// rollups, [`crate::rollup`], and added up with [`UserWeek::merge`]).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct UserWeek {
    /// Stored apart in the rollups (the users list needs only these).
    #[serde(skip)]
    pub totals: Totals,
    pub routines: RoutineSums,
    /// The biggest jobs so far, by CPU time (then key), with their CPU time and key.
    top: Vec<(u64, String, TopJob)>,
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
        if let Some(b) = job.node_bytes().filter(|_| job.nodes > 1) {
            self.node_bytes.on_node += b.on_node;
            self.node_bytes.off_node += b.off_node;
        }
        // Saturating: a site-wide sum of rank-ns can pass u64 (584 rank-years).
        self.wall_ns = self.wall_ns.saturating_add(job.wall_ns.sum);
        self.mpi_ns = self.mpi_ns.saturating_add(job.mpi_ns.sum);
        let weight = job.wall_ns.sum as f64;
        self.balance_weighted += load_balance(job) * weight;
        if superstep_figures(job).is_none() {
            self.balance_estimated += 1;
        }
        if let Some(percent) = imbalance_percent(job) {
            self.imbalance_weighted += percent * weight;
            self.imbalance_weight += weight;
        }
        if let Some((slurm, cpus)) = job
            .slurm
            .as_ref()
            .and_then(|s| Some((s, s.cpus_allocated().filter(|c| *c > 0)?)))
        {
            let wall = job.wall_ns.max as f64;
            self.allocated_cpu_ns += cpus as f64 * wall;
            self.allocated_rank_ns += f64::from(job.ranks) * wall;
            let share = f64::from(job.ranks) / cpus as f64;
            if self.least_used.as_ref().is_none_or(|l| share < l.0) {
                let mut name = slurm.job_step();
                if let Some(n) = &slurm.job_name {
                    name.push_str(&format!(" \"{n}\""));
                }
                self.least_used = Some((share, name, job.ranks, cpus));
            }
        }
        if let Some(set) = &job.counters {
            if self.counters_mode.is_empty() {
                self.counters_mode = set.mode.clone();
            } else if !self.counters_mode.contains(&set.mode) {
                self.counters_mode.push_str(", ");
                self.counters_mode.push_str(&set.mode);
            }
            let app_ns = job.wall_ns.sum.saturating_sub(job.mpi_ns.sum);
            for event in &set.events {
                let total = self.counters.entry(event.name.clone()).or_default();
                match &event.unavailable {
                    Some(reason) => {
                        total.unavailable.get_or_insert_with(|| reason.clone());
                    }
                    None if !set.split() => {
                        total.counted = true;
                        total.unsplit += event.app + event.mpi;
                        total.unsplit_app_ns += app_ns;
                    }
                    None => {
                        total.counted = true;
                        total.split = true;
                        total.app += event.app;
                        total.mpi += event.mpi;
                        total.app_ns += app_ns;
                        total.mpi_ns += job.mpi_ns.sum;
                    }
                }
            }
        }
    }

    /// Add the totals of other jobs. What `add` takes from the first job that has it (the
    /// counters' mode, why a counter was unavailable, the least used allocation on a tie) is
    /// taken from `self` when both have it.
    pub fn merge(&mut self, other: &Totals) {
        if other.jobs == 0 {
            return;
        }
        self.ranks_min = if self.jobs == 0 {
            other.ranks_min
        } else {
            self.ranks_min.min(other.ranks_min)
        };
        self.ranks_max = self.ranks_max.max(other.ranks_max);
        self.jobs += other.jobs;
        self.wall_ns = self.wall_ns.saturating_add(other.wall_ns);
        self.mpi_ns = self.mpi_ns.saturating_add(other.mpi_ns);
        self.balance_weighted += other.balance_weighted;
        self.balance_estimated += other.balance_estimated;
        self.imbalance_weighted += other.imbalance_weighted;
        self.imbalance_weight += other.imbalance_weight;
        self.allocated_cpu_ns += other.allocated_cpu_ns;
        self.allocated_rank_ns += other.allocated_rank_ns;
        if let Some(least) = &other.least_used {
            if self.least_used.as_ref().is_none_or(|l| least.0 < l.0) {
                self.least_used = Some(least.clone());
            }
        }
        if self.counters_mode.is_empty() {
            self.counters_mode = other.counters_mode.clone();
        }
        for (name, theirs) in &other.counters {
            let total = self.counters.entry(name.clone()).or_default();
            if let Some(reason) = &theirs.unavailable {
                total.unavailable.get_or_insert_with(|| reason.clone());
            }
            total.counted |= theirs.counted;
            total.split |= theirs.split;
            total.app += theirs.app;
            total.mpi += theirs.mpi;
            total.app_ns += theirs.app_ns;
            total.mpi_ns += theirs.mpi_ns;
            total.unsplit += theirs.unsplit;
            total.unsplit_app_ns += theirs.unsplit_app_ns;
        }
    }

    /// Percent of the allocated CPU time that ran ranks, over the jobs that know their Slurm
    /// allocation.
    fn allocation_used_percent(&self) -> Option<f64> {
        (self.allocated_cpu_ns > 0.0)
            .then(|| percent(self.allocated_rank_ns, self.allocated_cpu_ns))
    }

    /// CPU-time-weighted critical-path imbalance of the jobs with the figures, percent of wall.
    fn imbalance_percent(&self) -> Option<f64> {
        (self.imbalance_weight > 0.0).then(|| self.imbalance_weighted / self.imbalance_weight)
    }

    /// Events of `name` per rank and second outside MPI.
    pub fn rate(&self, name: &str) -> Option<f64> {
        self.counters.get(name).and_then(CounterTotal::app_rate)
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

/// The job's superstep figures, if it has usable ones.
fn superstep_figures(job: &JobRecord) -> Option<&mpistat_record::model::Imbalance> {
    job.imbalance
        .as_ref()
        .filter(|i| i.unavailable.is_none() && i.useful_max_ns > 0)
}

/// Critical-path imbalance of a job as a percentage of its wall time (the slowest rank's), when
/// the record has superstep figures.
pub fn imbalance_percent(job: &JobRecord) -> Option<f64> {
    superstep_figures(job).map(|i| percent(i.critical_path_ns as f64, job.wall_ns.max as f64))
}

/// Load-balance efficiency of a job: the POP figure of its record (average over maximum useful
/// time per rank), else estimated from its per-rank times: the average rank's computing time
/// (outside MPI) over the busiest rank's (wall time minus the least MPI time).
pub fn load_balance(job: &JobRecord) -> f64 {
    if let Some(figures) = superstep_figures(job) {
        return figures.load_balance(job.ranks);
    }
    let ranks = f64::from(job.ranks.max(1));
    let average = (job.wall_ns.sum.saturating_sub(job.mpi_ns.sum)) as f64 / ranks;
    let busiest = job.wall_ns.max.saturating_sub(job.mpi_ns.min) as f64;
    if busiest <= 0.0 {
        1.0
    } else {
        (average / busiest).min(1.0)
    }
}

/// `min / median / max` of `values`, formatted by `show` (`-` when no user has a value).
fn reference(mut values: Vec<f64>, show: impl Fn(f64) -> String) -> String {
    values.sort_by(f64::total_cmp);
    let Some(&max) = values.last() else {
        return "-".to_string();
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

/// A week's mails (or an interval's figures), from each user's sums over it ([`UserWeek`], added
/// up from the rollups): a week may hold millions of jobs.
pub struct Week<'c> {
    config: &'c DigestConfig,
    /// Length of the interval: the machine's capacity in it is `capacity_cores` × `hours`.
    hours: f64,
    users: BTreeMap<String, UserWeek>,
}

impl<'c> Week<'c> {
    /// An interval of `hours` hours whose users' sums are made (from the rollups).
    pub fn of_users(
        config: &'c DigestConfig,
        hours: f64,
        users: BTreeMap<String, UserWeek>,
    ) -> Week<'c> {
        Week {
            config,
            hours,
            users,
        }
    }

    /// The mail of every user with jobs, by user name (`week` names the interval).
    pub fn digests(&self, week: &str) -> Vec<UserDigest> {
        digests(&self.users, week, self.hours, self.config)
    }
}

fn digests(
    users: &BTreeMap<String, UserWeek>,
    week: &str,
    hours: f64,
    config: &DigestConfig,
) -> Vec<UserDigest> {
    let totals: BTreeMap<&str, &Totals> = users
        .iter()
        .map(|(user, u)| (user.as_str(), &u.totals))
        .collect();
    let capacity_hours = config.capacity_cores as f64 * hours;
    let site_mpi_percents: Arc<[f64]> = totals.values().map(|t| t.mpi_percent()).collect();
    let site = |f: &dyn Fn(&Totals) -> f64| totals.values().map(|t| f(t)).collect::<Vec<f64>>();
    let site_some =
        |f: &dyn Fn(&Totals) -> Option<f64>| totals.values().filter_map(|t| f(t)).collect();
    let share = |t: &Totals| percent(t.cpu_hours(), capacity_hours);
    let show_percent = |v: f64| format!("{v:.1} %");
    let references = [
        reference(site(&|t| t.jobs as f64), |v| format!("{v:.0}")),
        reference(site(&|t| t.cpu_hours()), |v| format!("{v:.1}")),
        reference(site(&share), |v| format!("{v:.3} %")),
        reference(site(&|t| t.mpi_percent()), show_percent),
        reference(site(&|t| t.load_balance()), |v| format!("{v:.2}")),
        reference(site_some(&|t| t.rate(INSTRUCTIONS)), rate),
        reference(site_some(&|t| t.rate(FP_OPS)), rate),
        reference(site_some(&|t| t.rate(CACHE_MISSES)), rate),
        reference(site_some(&Totals::imbalance_percent), show_percent),
    ];
    users
        .iter()
        .map(|(user, u)| {
            let t = &u.totals;
            let flags = Flags {
                mpi: t.mpi_percent() >= config.critical_mpi_percent,
                balance: t.load_balance() < config.critical_load_balance,
                imbalance: t
                    .imbalance_percent()
                    .is_some_and(|p| p >= config.critical_imbalance_percent),
                instructions: t
                    .rate(INSTRUCTIONS)
                    .is_some_and(|r| r < config.critical_instructions_per_s),
                cache_misses: t
                    .rate(CACHE_MISSES)
                    .is_some_and(|r| r >= config.critical_cache_misses_per_s),
            };
            let ranks = if t.ranks_min == t.ranks_max {
                format!("{}", t.ranks_max)
            } else {
                format!("{}-{}", t.ranks_min, t.ranks_max)
            };
            let unavailable = "unavailable".to_string();
            let counter_figure = |name, event, reference: &str, critical| {
                let value = t.rate(event).map_or(unavailable.clone(), rate);
                figure(name, value, reference, critical)
            };
            let mut figures = vec![
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
                    flags.mpi,
                ),
                counter_figure(
                    "instruction rate",
                    INSTRUCTIONS,
                    &references[5],
                    flags.instructions,
                ),
                counter_figure("FP rate", FP_OPS, &references[6], false),
                counter_figure(
                    "cache-miss rate",
                    CACHE_MISSES,
                    &references[7],
                    flags.cache_misses,
                ),
            ];
            if let Some(imbalance) = t.imbalance_percent() {
                figures.push(figure(
                    "imbalance",
                    format!("{imbalance:.1} %"),
                    &references[8],
                    flags.imbalance,
                ));
            }
            figures.push(figure(
                "load balance",
                format!("{:.2}", t.load_balance()),
                &references[4],
                flags.balance,
            ));
            let routines = u.routines.rows(config);
            let worth = Worth {
                cpu_ns: t.wall_ns as f64,
                min_percent: config.recommend_min_percent,
                min_ns: config.recommend_min_cpu_hours * NS_PER_HOUR,
            };
            let recommendations = recommendations(t, &routines, &flags, &worth);
            UserDigest {
                user: user.to_string(),
                week: week.to_string(),
                jobs: t.jobs,
                figures,
                notes: notes(t),
                recommendations,
                routines,
                counters_mode: t.counters_mode.clone(),
                counters: counter_rows(t),
                top_jobs: u.top.iter().map(|(_, _, job)| job.clone()).collect(),
                mpi_percent: t.mpi_percent(),
                site_mpi_percents: Arc::clone(&site_mpi_percents),
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

/// The per-routine table over `jobs`, by time, with the estimates of seed 003 Fig. 4 (see
/// [`RoutineSums::rows`]).
pub fn routine_rows(jobs: &[&JobRecord], config: &DigestConfig) -> Vec<RoutineRow> {
    let mut sums = RoutineSums::default();
    jobs.iter().for_each(|job| sums.add(job));
    sums.rows(config)
}

impl RoutineSums {
    /// Add the job's routines.
    pub fn add(&mut self, job: &JobRecord) {
        self.total_ranks += u64::from(job.ranks);
        self.mpi_ns += job.mpi_ns.sum;
        for r in &job.routines {
            if !self.routines.contains_key(&r.name) {
                let sum = RoutineSum {
                    class: r.class.clone(),
                    ..RoutineSum::default()
                };
                self.routines.insert(r.name.clone(), sum);
            }
            let sum = self.routines.get_mut(&r.name).expect("inserted");
            sum.calls += r.calls.sum;
            sum.time_ns += r.time_ns.sum;
            sum.count += r.count.sum;
            sum.bytes += r.bytes.sum;
        }
    }

    /// Add the sums of other jobs.
    pub fn merge(&mut self, other: &RoutineSums) {
        self.total_ranks += other.total_ranks;
        self.mpi_ns += other.mpi_ns;
        for (name, theirs) in &other.routines {
            let sum = self
                .routines
                .entry(name.clone())
                .or_insert_with(|| RoutineSum {
                    class: theirs.class.clone(),
                    ..RoutineSum::default()
                });
            sum.calls += theirs.calls;
            sum.time_ns += theirs.time_ns;
            sum.count += theirs.count;
            sum.bytes += theirs.bytes;
        }
    }

    /// The table, by time, with the estimates of seed 003 Fig. 4: latency = calls × latency,
    /// transfer = bytes / bandwidth, synchronisation = time − both. When the first two exceed
    /// the time measured the model does not fit ([`RoutineRow::fits`]): they are capped at it
    /// (latency first) and sync is zero, so no estimate is negative.
    pub fn rows(&self, config: &DigestConfig) -> Vec<RoutineRow> {
        let mut rows: Vec<RoutineRow> = self
            .routines
            .iter()
            .map(|(name, sum)| {
                let cost = cost_of(config, name, &sum.class);
                let mut row = RoutineRow {
                    name: name.clone(),
                    calls: sum.calls,
                    calls_per_rank: sum.calls as f64 / self.total_ranks.max(1) as f64,
                    time_ns: sum.time_ns,
                    count: sum.count,
                    bytes: sum.bytes,
                    share: sum.time_ns as f64 / self.mpi_ns.max(1) as f64,
                    cost,
                    latency_ns: None,
                    transfer_ns: None,
                    sync_ns: None,
                    fits: true,
                };
                if let Some(cost) = cost {
                    let time = row.time_ns as f64;
                    let latency = row.calls as f64 * cost.latency_us * 1e3;
                    let transfer = row.bytes as f64 / (cost.bandwidth_mb_s * 1e6) * 1e9;
                    row.fits = latency + transfer <= time;
                    let latency = latency.min(time);
                    let transfer = transfer.min(time - latency);
                    row.latency_ns = Some(latency);
                    row.transfer_ns = Some(transfer);
                    row.sync_ns = Some(time - latency - transfer);
                }
                row
            })
            .collect();
        rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then_with(|| a.name.cmp(&b.name)));
        rows
    }
}

impl UserWeek {
    /// Only the totals of a user (enough for the site's reference values).
    pub fn of_totals(totals: Totals) -> UserWeek {
        UserWeek {
            totals,
            ..UserWeek::default()
        }
    }

    /// Add one job of the user.
    pub fn add(&mut self, job: &JobRecord) {
        self.totals.add(job);
        self.routines.add(job);
        self.add_top(job);
    }

    /// Add the sums of other jobs of the user.
    pub fn merge(&mut self, other: &UserWeek) {
        self.totals.merge(&other.totals);
        self.routines.merge(&other.routines);
        for (wall, key, top) in &other.top {
            self.keep_top(*wall, key.clone(), || top.clone());
        }
    }

    /// Keep the job if it is among the biggest by CPU time (ties: by key).
    fn add_top(&mut self, job: &JobRecord) {
        self.keep_top(job.wall_ns.sum, job.key(), || TopJob {
            job_id: job
                .slurm
                .as_ref()
                .map_or_else(|| job.job_id.clone(), |s| s.job_step()),
            job_name: job.slurm.as_ref().and_then(|s| s.job_name.clone()),
            app: job.application().to_string(),
            interpreter: job.interpreter.clone(),
            ranks: job.ranks,
            cpu_hours: job.wall_ns.sum as f64 / NS_PER_HOUR,
            mpi_percent: 100.0 * job.mpi_fraction(),
            load_balance: load_balance(job),
            imbalance_percent: imbalance_percent(job),
            slurm: job.slurm.is_some(),
        });
    }

    /// Keep a job of CPU time `wall` and key `key` (`top` makes its line) if it is among the
    /// biggest.
    fn keep_top(&mut self, wall: u64, key: String, top: impl FnOnce() -> TopJob) {
        let rank = (std::cmp::Reverse(wall), &key);
        let at = self
            .top
            .partition_point(|(wall, k, _)| (std::cmp::Reverse(*wall), k) < rank);
        if at >= TOP_JOBS {
            return;
        }
        self.top.insert(at, (wall, key, top()));
        self.top.truncate(TOP_JOBS);
    }
}

/// Which level-1 values are critical.
struct Flags {
    mpi: bool,
    balance: bool,
    imbalance: bool,
    instructions: bool,
    cache_misses: bool,
}

/// What the level-1 figures mean, only for those the user has, and why counters are missing.
fn notes(t: &Totals) -> Vec<String> {
    let mut notes = Vec::new();
    let rates = [INSTRUCTIONS, FP_OPS, CACHE_MISSES];
    if rates.iter().any(|name| t.rate(name).is_some()) {
        notes.push("Rates are per rank and second of computing time outside MPI.".to_string());
    }
    let missing: Vec<&str> = rates
        .into_iter()
        .filter(|name| t.rate(name).is_none())
        .collect();
    if t.counters.is_empty() {
        notes.push("No hardware counters ran in your jobs.".to_string());
    } else if let Some(reason) = missing
        .iter()
        .find_map(|name| t.counters.get(*name)?.unavailable.as_deref())
    {
        notes.push(format!("Unavailable counters: {reason}."));
    }
    if t.imbalance_percent().is_some() {
        notes.push(
            "Imbalance: time the slowest rank adds between global collectives (critical path), \
             share of wall time."
                .to_string(),
        );
    }
    if let Some(share) = t.node_bytes.on_node_share() {
        notes.push(format!(
            "{:.0} % of the bytes your jobs on several nodes moved stayed on a node (the rest \
             crossed the network).",
            100.0 * share
        ));
    }
    if t.balance_estimated > 0 {
        notes.push(format!(
            "Load balance of {} of your {} jobs is estimated from per-rank MPI times.",
            t.balance_estimated, t.jobs
        ));
    }
    notes
}

/// The counter events of the user's jobs, in name order.
fn counter_rows(t: &Totals) -> Vec<CounterRow> {
    t.counters
        .iter()
        .map(|(name, total)| CounterRow {
            name: name.clone(),
            split: total.split,
            app: total.app,
            mpi: total.mpi,
            app_per_s: per_s(total.app, total.app_ns),
            mpi_per_s: per_s(total.mpi, total.mpi_ns),
            unsplit: total.unsplit,
            unavailable: (!total.counted).then(|| total.unavailable.clone().unwrap_or_default()),
        })
        .collect()
}

/// What is worth a user's time: a recommendation about `ns` rank-nanoseconds is made only when
/// they are at least `min_percent` of the user's CPU time and at least `min_ns`
/// (`[digest] recommend_min_percent`, `recommend_min_cpu_hours`).
struct Worth {
    cpu_ns: f64,
    min_percent: f64,
    min_ns: f64,
}

impl Worth {
    fn of(&self, ns: f64) -> bool {
        ns >= self.min_ns && percent(ns, self.cpu_ns) >= self.min_percent && ns > 0.0
    }
}

/// At most three plain-language suggestions from the numbers, each about time worth the user's
/// while ([`Worth`]); none rather than a trivial one.
fn recommendations(
    t: &Totals,
    routines: &[RoutineRow],
    flags: &Flags,
    worth: &Worth,
) -> Vec<String> {
    let mut said = Vec::new();
    // Idle allocated cores cost more than anything below: said first.
    if let (Some(used), Some((_, job, ranks, cpus))) = (t.allocation_used_percent(), &t.least_used)
    {
        if used < 50.0 && worth.of(t.allocated_cpu_ns - t.allocated_rank_ns) {
            said.push(format!(
                "Your Slurm jobs ran ranks on only {used:.0} % of the CPUs allocated to them, as \
                 their environment claimed the allocation (job {job}: {ranks} ranks on {cpus} \
                 CPUs): ask for fewer nodes or CPUs, or run more ranks per node, unless your \
                 ranks run threads on the others."
            ));
        }
    }
    // Start-up and shutdown are not something to send fewer messages in.
    let communicating = |r: &&RoutineRow| {
        !matches!(
            r.name.as_str(),
            "MPI_Init" | "MPI_Init_thread" | "MPI_Finalize"
        )
    };
    if let Some(top) = routines
        .iter()
        .find(communicating)
        .filter(|r| flags.mpi && worth.of(r.time_ns as f64))
    {
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
    let imbalance = t
        .imbalance_percent()
        .filter(|p| flags.imbalance && worth.of(p / 100.0 * t.wall_ns as f64));
    if let Some(imbalance) = imbalance {
        said.push(format!(
            "{imbalance:.0} % of your run time is imbalance on the critical path: in each step \
             between global collectives the slowest rank makes all others wait; give the ranks \
             equal work per step."
        ));
    } else if flags.balance && worth.of((1.0 - t.load_balance()) * t.wall_ns as f64) {
        said.push(format!(
            "Your busiest ranks compute about {:.0} % longer than the average rank: distribute \
             the work more evenly.",
            100.0 * (1.0 / t.load_balance().max(0.01) - 1.0)
        ));
    }
    let computing = worth.of(t.wall_ns.saturating_sub(t.mpi_ns) as f64);
    if let Some(misses) = t
        .rate(CACHE_MISSES)
        .filter(|_| flags.cache_misses && computing)
    {
        said.push(format!(
            "Your computation misses the last-level cache {} per rank: reorder loops or block \
             the data so that what is in cache is reused.",
            rate(misses).replace("/s", " times a second")
        ));
    } else if let Some(instructions) = t
        .rate(INSTRUCTIONS)
        .filter(|_| flags.instructions && computing)
    {
        said.push(format!(
            "Your computation runs only {} instructions per rank: check compiler optimisation \
             and vectorisation.",
            rate(instructions)
        ));
    }
    let latency: f64 = routines.iter().filter_map(|r| r.latency_ns).sum();
    if latency > 0.2 * t.mpi_ns as f64 && worth.of(latency) {
        said.push(format!(
            "About {:.0} % of your MPI time is message latency: combine small messages.",
            percent(latency, t.mpi_ns as f64)
        ));
    }
    said.truncate(3);
    said
}

/// A latency, transfer or synchronisation estimate (ns) as a duration; empty without one.
pub fn estimate(ns: Option<f64>) -> String {
    ns.map_or(String::new(), |ns| {
        mpistat_record::units::duration(ns.max(0.0).round() as u64)
    })
}

/// What the mail says of counters read in the totals mode (at `MPI_Init` and `MPI_Finalize`).
pub const NOT_SPLIT: &str = "not split (totals mode)";

/// The footnote of a routine whose benchmark model does not fit ([`RoutineRow::fits`]).
pub const MODEL_DOES_NOT_FIT: &str = "The benchmark's latency and bandwidth make more than the \
     time measured: the model does not fit this routine (e.g. a non-blocking call, which returns \
     before its message is sent); its estimates are capped at the time measured.";

/// "How to go further": one paragraph per level 3-6, title and text.
/// What the level-6 section says after the traced jobs: their traces open in the tools of the
/// field, too.
pub const OTF2_EXPORT: &str = "To look at a trace in Vampir, Scalasca or other OTF2 tools: \
    mpistat analyze --otf2 OUT DIR writes it as an OTF2 archive (OUT/traces.otf2), with the \
    times the analysis used.";

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
        "When the numbers point at a problem you want to see in time, trace one run with \
         mpistat itself: MPISTAT_TRACE=1 mpirun ... (every rank records its MPI calls into \
         $HOME/.mpistat/traces/JOB), then mpistat analyze $HOME/.mpistat/traces/JOB shows where \
         the ranks waited, which code caused it and the critical path (--format html > \
         report.html for a page, --perfetto trace.json for a timeline, --otf2 DIR for an OTF2 \
         archive that Vampir, Scalasca and other OTF2 tools open). Jobs that meet the \
         site's rule are traced on their next run by themselves (escalation), and what their \
         traces show comes in this mail.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use mpistat_record::model::SlurmFacts;
    use mpistat_record::Stat;

    /// Every user's digest shows the site's MPI shares from one list: a copy for each user was
    /// users² numbers (800 MB and most of a user's page's second at 10,000 users).
    #[test]
    fn the_site_mpi_shares_are_one_list_for_every_digest() {
        let users: BTreeMap<String, UserWeek> = (0..3)
            .map(|n| {
                let totals = Totals {
                    jobs: 1 + n,
                    ..Totals::default()
                };
                (format!("user{n}"), UserWeek::of_totals(totals))
            })
            .collect();
        let config = DigestConfig::default();
        let digests = Week::of_users(&config, 168.0, users).digests("2026-W47");
        assert_eq!(digests.len(), 3);
        assert_eq!(digests[0].site_mpi_percents.len(), 3);
        for digest in &digests[1..] {
            assert!(Arc::ptr_eq(
                &digests[0].site_mpi_percents,
                &digest.site_mpi_percents
            ));
        }
    }

    /// The site's default thresholds for `t`.
    fn worth(t: &Totals) -> Worth {
        let config = DigestConfig::default();
        Worth {
            cpu_ns: t.wall_ns as f64,
            min_percent: config.recommend_min_percent,
            min_ns: config.recommend_min_cpu_hours * NS_PER_HOUR,
        }
    }

    #[test]
    fn multi_node_jobs_say_how_much_stayed_on_a_node() {
        let job = |nodes: u32, on_node: u64, off_node: u64| JobRecord {
            ranks: 4,
            nodes,
            routines: vec![mpistat_record::RoutineStats {
                name: "MPI_Send".into(),
                node_bytes: Some(mpistat_record::model::NodeBytes { on_node, off_node }),
                ..Default::default()
            }],
            ..JobRecord::default()
        };
        let mut t = Totals::default();
        t.add(&job(2, 800, 100));
        t.add(&job(3, 40, 60));
        // One node: all of it stayed there, and it says nothing about the network.
        t.add(&job(1, 1000, 0));
        assert!(
            notes(&t).contains(
                &"84 % of the bytes your jobs on several nodes moved stayed on a node \
                 (the rest crossed the network)."
                    .to_string()
            ),
            "{:?}",
            notes(&t)
        );
        assert!(!notes(&Totals::default())
            .iter()
            .any(|n| n.contains("stayed on a node")));
    }

    #[test]
    fn idle_allocated_cpus_are_the_first_recommendation() {
        let job = |ranks: u32, cpus_per_node: &str| JobRecord {
            ranks,
            wall_ns: Stat::single(3_600_000_000_000, 0),
            slurm: Some(SlurmFacts {
                job_id: "7".into(),
                job_name: Some("wide".into()),
                cpus_per_node: Some(cpus_per_node.into()),
                ..SlurmFacts::default()
            }),
            ..JobRecord::default()
        };
        let flags = Flags {
            mpi: false,
            balance: false,
            imbalance: false,
            instructions: false,
            cache_misses: false,
        };
        let mut t = Totals::default();
        t.add(&job(8, "32(x4)"));
        assert_eq!(t.allocation_used_percent(), Some(6.25));
        let said = recommendations(&t, &[], &flags, &worth(&t));
        assert_eq!(
            said[0],
            "Your Slurm jobs ran ranks on only 6 % of the CPUs allocated to them, as their \
             environment claimed the allocation (job 7 \"wide\": 8 ranks on 128 CPUs): ask for \
             fewer nodes or CPUs, or run more ranks per node, \
             unless your ranks run threads on the others."
        );
        let mut full = Totals::default();
        full.add(&job(64, "32(x2)"));
        assert!(recommendations(&full, &[], &flags, &worth(&full)).is_empty());
        let mut outside = Totals::default();
        outside.add(&JobRecord::default());
        assert_eq!(outside.allocation_used_percent(), None);
    }
}
