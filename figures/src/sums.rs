//! Sums of jobs: a set of jobs' totals ([`Totals`]: behind the level-1 figures of the mail and
//! the pages), its routines ([`RoutineSums`], and the routine table's rows with the
//! latency/transfer/synchronisation estimates of Fig. 4 of Rolf Rabenseifner's "Automatic MPI
//! Counter Profiling" (HLRS)), a user's
//! biggest jobs ([`UserWeek`]), and the per-job figures they are made of. No wording: the mail
//! and the pages say what these mean.

use mpistat_record::JobRecord;
use mpistat_site::{DigestConfig, LinkCost};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const NS_PER_HOUR: f64 = 3600e9;

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

/// Counter event names behind the level-1 rates: instructions, floating-point operations and
/// last-level cache misses.
pub const INSTRUCTIONS: &str = "instructions";
pub const FP_OPS: &str = "fp-ops";
pub const CACHE_MISSES: &str = "llc-misses";

/// One counter event summed over a user's jobs that counted it.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct CounterTotal {
    /// Events outside and inside MPI of the jobs that split them.
    pub app: u64,
    pub mpi: u64,
    /// Rank-time outside and inside MPI of those jobs.
    pub app_ns: u64,
    pub mpi_ns: u64,
    /// Events of the jobs that read them in the totals mode, and those jobs' rank-time outside
    /// MPI (their events, MPI's included, stand for the computation in the level-1 rates: the
    /// best there is; their MPI part is no zero to average in).
    pub unsplit: u64,
    pub unsplit_app_ns: u64,
    pub counted: bool,
    /// Whether a job split it.
    pub split: bool,
    /// Why a job did not count it (the first reason seen).
    pub unavailable: Option<String>,
}

/// Events per second of `ns` rank-nanoseconds (0 without time).
pub fn per_s(events: u64, ns: u64) -> f64 {
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
    pub balance_weighted: f64,
    /// Jobs whose load balance is only estimated (no superstep figures).
    pub balance_estimated: usize,
    /// CPU-time-weighted sum of critical-path imbalance percentages, and the weight (CPU time of
    /// the jobs with the figures).
    pub imbalance_weighted: f64,
    pub imbalance_weight: f64,
    /// Counter events by name; the mode of the first job that chose counters.
    pub counters: BTreeMap<String, CounterTotal>,
    pub counters_mode: String,
    /// Over the jobs that know their Slurm allocation: allocated CPUs and ranks, each times the
    /// job's wall time (slowest rank); and the job that used the least of its allocation (share,
    /// Slurm job, ranks, CPUs).
    pub allocated_cpu_ns: f64,
    pub allocated_rank_ns: f64,
    pub least_used: Option<(f64, String, u32, u64)>,
    /// Bytes on and off node of the jobs on several nodes that say so (version 3 records).
    pub node_bytes: mpistat_record::model::NodeBytes,
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
    pub fn allocation_used_percent(&self) -> Option<f64> {
        (self.allocated_cpu_ns > 0.0)
            .then(|| percent(self.allocated_rank_ns, self.allocated_cpu_ns))
    }

    /// CPU-time-weighted critical-path imbalance of the jobs with the figures, percent of wall.
    pub fn imbalance_percent(&self) -> Option<f64> {
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

/// Benchmark figures of a routine: by its name, else by its class.
fn cost_of(config: &DigestConfig, name: &str, class: &str) -> Option<LinkCost> {
    config
        .network
        .get(name)
        .or_else(|| config.network.get(class))
        .copied()
}

/// The per-routine table over `jobs`, by time, with the estimates of Fig. 4 of Rabenseifner's paper
/// (see [`RoutineSums::rows`]).
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
            let theirs = RoutineSum {
                class: String::new(),
                calls: r.calls.sum,
                time_ns: r.time_ns.sum,
                count: r.count.sum,
                bytes: r.bytes.sum,
            };
            self.add_sum(&r.name, &r.class, &theirs);
        }
    }

    /// Add the sums of other jobs.
    pub fn merge(&mut self, other: &RoutineSums) {
        self.total_ranks += other.total_ranks;
        self.mpi_ns += other.mpi_ns;
        for (name, theirs) in &other.routines {
            self.add_sum(name, &theirs.class, theirs);
        }
    }

    /// Add `theirs` to routine `name`'s sum, made (of class `class`) if it has none: its
    /// name and class are copied only then (ingest adds routine after routine, a job at a time).
    fn add_sum(&mut self, name: &str, class: &str, theirs: &RoutineSum) {
        let sum = match self.routines.get_mut(name) {
            Some(sum) => sum,
            None => self
                .routines
                .entry(name.to_string())
                .or_insert_with(|| RoutineSum {
                    class: class.to_string(),
                    ..RoutineSum::default()
                }),
        };
        sum.calls += theirs.calls;
        sum.time_ns += theirs.time_ns;
        sum.count += theirs.count;
        sum.bytes += theirs.bytes;
    }

    /// The table, by time, with the estimates of Fig. 4 of Rabenseifner's paper: latency = calls × latency,
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

    /// The biggest jobs, by CPU time (then key).
    pub fn top_jobs(&self) -> impl Iterator<Item = &TopJob> {
        self.top.iter().map(|(_, _, job)| job)
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

impl Totals {
    /// The counter events of the jobs, in name order.
    pub fn counter_rows(&self) -> Vec<CounterRow> {
        self.counters
            .iter()
            .map(|(name, total)| CounterRow {
                name: name.clone(),
                split: total.split,
                app: total.app,
                mpi: total.mpi,
                app_per_s: per_s(total.app, total.app_ns),
                mpi_per_s: per_s(total.mpi, total.mpi_ns),
                unsplit: total.unsplit,
                unavailable: (!total.counted)
                    .then(|| total.unavailable.clone().unwrap_or_default()),
            })
            .collect()
    }
}
