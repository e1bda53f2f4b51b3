//! The JSON view of a record: one object per job, for scripts. Field names are an interface:
//! `job_id uid user exe ranks wall_s mpi_s binding partial routines.<name>.{calls,time_s,bytes}`
//! must stay; fields may be added. `app` is the application (an interpreter's script or module,
//! else `exe`), `interpreter` the interpreter when there is one. Imbalance estimates: `imbalance.{critical_path_s, profile_s,
//! load_balance, comm_efficiency, parallel_efficiency, merge_factor}` and `routines.<name>.sync_s`;
//! counters: `counters.<event>.{app,mpi}` and `routines.<name>.counters.<event>`. Where the job
//! ran (version 3 records): `host_list`, `ranks_per_node.{min,max}`, `node_bytes.{on_node,off_node}`
//! and `routines.<name>.node_bytes.{on_node,off_node}`. Slurm's facts (`slurm.*`: every field of
//! the record's, and `job_step`, `cpus_allocated`, `time_limit_reached`, ...) and the trace
//! (`trace.*`). Every value `mpistat show` prints is here (a test walks the text view for them).

use mpistat_record::model::{NodeBytes, RanksPerNode, SlurmFacts, Stat, TraceInfo};
use mpistat_record::units::{secs, utc};
use mpistat_record::JobRecord;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
pub struct JobJson<'a> {
    pub job_id: &'a str,
    pub key: String,
    pub uid: u32,
    pub user: &'a str,
    pub exe: &'a str,
    pub app: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<&'a str>,
    pub argv0: &'a str,
    pub host: &'a str,
    pub pid: u32,
    pub ranks: u32,
    pub nodes: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub host_list: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks_per_node: Option<RanksPerNode>,
    /// The routines' bytes on and off node, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_bytes: Option<NodeBytesJson>,
    pub start_utc: String,
    pub end_utc: String,
    /// The slowest rank's wall time.
    pub wall_s: f64,
    /// The fastest rank's wall time.
    pub wall_min_s: f64,
    /// MPI time summed over ranks.
    pub mpi_s: f64,
    /// `mpi_s` over wall time summed over ranks, in percent.
    pub mpi_percent: f64,
    /// The most MPI time of a rank, and which rank that was.
    pub mpi_max_s: f64,
    pub mpi_max_rank: u32,
    pub binding: &'static str,
    pub thread_level: &'a str,
    pub mpi_library: &'a str,
    /// The MPI family (ABI) of `mpi_library` (`Open MPI`, `MPICH`), if known.
    pub mpi_family: Option<&'static str>,
    pub user_pmpi_tool: bool,
    /// Profiler overhead summed over ranks.
    pub overhead_s: f64,
    /// `overhead_s` over wall time summed over ranks, in percent.
    pub overhead_percent: f64,
    pub partial: bool,
    pub partial_reason: Option<&'a str>,
    pub env: &'a BTreeMap<String, String>,
    pub routines: BTreeMap<&'a str, RoutineJson<'a>>,
    /// Imbalance estimates from supersteps (absent in partial and older records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imbalance: Option<ImbalanceJson>,
    /// How the counters were read (see `CounterSet::mode`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters_mode: Option<&'a str>,
    /// `counters.<event>.{app,mpi}`: events outside and inside MPI, summed over ranks.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<&'a str, CounterJson>,
    /// The Slurm job and step (absent outside Slurm).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmJson<'a>>,
    /// The job's trace (absent when it was not traced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceJson<'a>>,
}

/// Bytes that stayed on a node and that crossed nodes.
#[derive(Serialize)]
pub struct NodeBytesJson {
    pub on_node: u64,
    pub off_node: u64,
    pub total: u64,
    /// `on_node` of `total`, in percent (absent when nothing was sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_node_percent: Option<f64>,
}

impl From<NodeBytes> for NodeBytesJson {
    fn from(b: NodeBytes) -> Self {
        NodeBytesJson {
            on_node: b.on_node,
            off_node: b.off_node,
            total: b.on_node.saturating_add(b.off_node),
            on_node_percent: b.on_node_share().map(|share| 100.0 * share),
        }
    }
}

/// `slurm.*`: the record's Slurm facts as they are, and what follows from them.
#[derive(Serialize)]
pub struct SlurmJson<'a> {
    #[serde(flatten)]
    pub facts: &'a SlurmFacts,
    /// How `sacct` names the job: `<array job>_<task>` or the job id, `.<step>` for a step.
    pub job_step: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus_allocated: Option<u64>,
    /// Ranks over the CPUs allocated, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus_used_percent: Option<f64>,
    /// Whether the job ended at (or past) its time limit, and how many seconds before it (or,
    /// when reached, after it) it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_reached: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_margin_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_wait_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_utc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_utc: Option<String>,
}

impl<'a> SlurmJson<'a> {
    fn new(facts: &'a SlurmFacts, r: &JobRecord) -> Self {
        let cpus_allocated = facts.cpus_allocated().filter(|&cpus| cpus > 0);
        let deadline = facts
            .start_unix_s
            .zip(facts.time_limit_s)
            .map(|(start, limit)| start.saturating_add(limit));
        let end_s = r.end_unix_ms / 1000;
        let reached = facts.reached_time_limit(r.end_unix_ms);
        SlurmJson {
            facts,
            job_step: facts.job_step(),
            cpus_allocated,
            cpus_used_percent: cpus_allocated.map(|cpus| 100.0 * f64::from(r.ranks) / cpus as f64),
            time_limit_reached: deadline.map(|_| reached),
            time_limit_margin_s: deadline.map(|deadline| deadline.abs_diff(end_s)),
            queue_wait_s: facts.queue_wait_s(),
            submit_utc: facts.submit_unix_s.map(|s| utc(s.saturating_mul(1000))),
            start_utc: facts.start_unix_s.map(|s| utc(s.saturating_mul(1000))),
        }
    }
}

/// `trace.*`: where the job's trace is and what it holds.
#[derive(Serialize)]
pub struct TraceJson<'a> {
    pub dir: &'a str,
    /// Who asked for it: `user`, `site` or `escalation`.
    pub reason: &'a str,
    pub events: u64,
    pub ranks_written: u32,
    /// Where and why recording stopped before the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<&'a str>,
    /// Time the tracing added, summed over ranks.
    pub overhead_s: f64,
}

impl<'a> From<&'a TraceInfo> for TraceJson<'a> {
    fn from(t: &'a TraceInfo) -> Self {
        TraceJson {
            dir: &t.dir,
            reason: &t.reason,
            events: t.events,
            ranks_written: t.ranks_written,
            stopped: t.stopped.as_deref(),
            overhead_s: secs(t.overhead_ns),
        }
    }
}

/// One counter event.
#[derive(Serialize)]
pub struct CounterJson {
    pub app: u64,
    pub mpi: u64,
    /// Events per second of application (non-MPI) time, and of MPI time, over all ranks.
    pub app_per_s: f64,
    pub mpi_per_s: f64,
    /// "unavailable: <reason>" when the event was not counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

fn counters_json(r: &JobRecord) -> BTreeMap<&str, CounterJson> {
    let Some(set) = &r.counters else {
        return BTreeMap::new();
    };
    let app_s = secs(r.wall_ns.sum.saturating_sub(r.mpi_ns.sum));
    let mpi_s = secs(r.mpi_ns.sum);
    let rate = |v: u64, s: f64| if s > 0.0 { v as f64 / s } else { 0.0 };
    set.events
        .iter()
        .map(|e| {
            (
                e.name.as_str(),
                CounterJson {
                    app: e.app,
                    mpi: e.mpi,
                    app_per_s: rate(e.app, app_s),
                    mpi_per_s: rate(e.mpi, mpi_s),
                    unavailable: e.unavailable.as_ref().map(|u| format!("unavailable: {u}")),
                },
            )
        })
        .collect()
}

/// `imbalance.*`: seconds are wall-clock seconds (per rank), efficiencies 0..1.
#[derive(Serialize)]
pub struct ImbalanceJson {
    /// Critical-path imbalance iota = sum over supersteps of (max - avg over ranks).
    pub critical_path_s: f64,
    pub critical_path_percent_of_wall: f64,
    /// iota over the average per-rank work (time between the global collectives).
    pub critical_path_percent_of_work: f64,
    /// max - avg over ranks of the per-rank work.
    pub profile_s: f64,
    pub profile_percent_of_work: f64,
    /// (critical_path - profile) / critical_path.
    pub dynamic_share: f64,
    pub work_avg_s: f64,
    pub load_balance: f64,
    pub comm_efficiency: f64,
    pub parallel_efficiency: f64,
    pub supersteps: u64,
    /// Supersteps merged per kept slot: above 1, critical_path_s is a lower bound.
    pub merge_factor: u64,
    pub lower_bound: bool,
    /// MPMD: the part of critical_path_s due to imbalance between partitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inter_partition_s: Option<f64>,
    /// Per-superstep imbalance (max - avg over ranks), summed over groups of `series_factor`
    /// supersteps.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series_s: Vec<f64>,
    pub series_factor: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// One MPMD partition (`MPI_APPNUM`).
#[derive(Serialize)]
pub struct PartitionJson {
    pub appnum: u32,
    pub ranks: u32,
    pub critical_path_s: f64,
    pub profile_s: f64,
    pub work_avg_s: f64,
    pub load_balance: f64,
}

fn percent_of(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        100.0 * part / whole
    }
}

impl ImbalanceJson {
    pub fn new(r: &JobRecord) -> Option<Self> {
        let i = r.imbalance.as_ref()?;
        let work_avg = i.work_avg_ns(r.ranks) * 1e-9;
        let iota = secs(i.critical_path_ns);
        let profile = secs(i.profile_ns);
        Some(ImbalanceJson {
            critical_path_s: iota,
            critical_path_percent_of_wall: percent_of(iota, r.wall_s()),
            critical_path_percent_of_work: percent_of(iota, work_avg),
            profile_s: profile,
            profile_percent_of_work: percent_of(profile, work_avg),
            dynamic_share: i.dynamic_share(),
            work_avg_s: work_avg,
            load_balance: i.load_balance(r.ranks),
            comm_efficiency: i.comm_efficiency(r.wall_ns.max),
            parallel_efficiency: i.parallel_efficiency(r.ranks, r.wall_ns.max),
            supersteps: i.supersteps,
            merge_factor: i.merge_factor,
            lower_bound: i.merge_factor > 1,
            inter_partition_s: (!i.partitions.is_empty()).then(|| secs(i.inter_partition_ns)),
            series_s: i.series_ns.iter().copied().map(secs).collect(),
            series_factor: i.series_factor.max(1),
            partitions: i
                .partitions
                .iter()
                .map(|p| PartitionJson {
                    appnum: p.appnum,
                    ranks: p.ranks,
                    critical_path_s: secs(p.critical_path_ns),
                    profile_s: secs(p.profile_ns),
                    work_avg_s: if p.ranks == 0 {
                        0.0
                    } else {
                        secs(p.work_sum_ns) / p.ranks as f64
                    },
                    load_balance: p.load_balance(),
                })
                .collect(),
            unavailable: i.unavailable.clone(),
        })
    }
}

/// One routine, summed over ranks.
#[derive(Serialize)]
pub struct RoutineJson<'a> {
    pub class: &'a str,
    pub calls: u64,
    pub time_s: f64,
    /// `time_s` of the job's MPI time, in percent.
    pub percent_of_mpi: f64,
    /// Time per rank: average, least, most, and the rank with the most.
    pub time_avg_s: f64,
    pub time_min_s: f64,
    pub time_max_s: f64,
    pub time_max_rank: u32,
    pub bytes: u64,
    pub bytes_per_call: f64,
    pub count: u64,
    /// Message-size histogram: entry 0 counts empty messages, entry b ≥ 1 messages of
    /// 2^(b-1) ..= 2^b - 1 bytes.
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    pub hist: &'a [u64],
    /// Global synchronising collectives: estimated waiting time summed over ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_s: Option<f64>,
    /// `sync_s` of the routine's time, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_percent: Option<f64>,
    /// Counter events inside this routine, by event name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: &'a BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_bytes: Option<NodeBytesJson>,
}

impl<'a> JobJson<'a> {
    pub fn new(r: &'a JobRecord) -> Self {
        JobJson {
            job_id: &r.job_id,
            key: r.key(),
            uid: r.uid,
            user: &r.user,
            exe: &r.exe,
            app: r.application(),
            interpreter: r.interpreter.as_deref(),
            argv0: &r.argv0,
            host: &r.host,
            pid: r.pid,
            ranks: r.ranks,
            nodes: r.nodes,
            host_list: &r.host_list,
            ranks_per_node: r.ranks_per_node,
            node_bytes: r.node_bytes().map(NodeBytesJson::from),
            start_utc: utc(r.start_unix_ms),
            end_utc: utc(r.end_unix_ms),
            wall_s: r.wall_s(),
            wall_min_s: secs(r.wall_ns.min),
            mpi_s: secs(r.mpi_ns.sum),
            mpi_percent: 100.0 * r.mpi_fraction(),
            mpi_max_s: secs(r.mpi_ns.max),
            mpi_max_rank: r.mpi_ns.max_rank,
            binding: r.binding.as_str(),
            thread_level: &r.thread_level,
            mpi_library: &r.mpi_library,
            mpi_family: mpistat_record::family::Family::of_library(&r.mpi_library)
                .map(|f| f.name()),
            user_pmpi_tool: r.user_pmpi_tool,
            overhead_s: secs(r.overhead_ns.sum),
            overhead_percent: percent_of(secs(r.overhead_ns.sum), secs(r.wall_ns.sum)),
            partial: r.partial.is_some(),
            partial_reason: r.partial.as_deref(),
            env: &r.env,
            routines: r
                .routines
                .iter()
                .map(|s| {
                    let routine = RoutineJson {
                        class: &s.class,
                        calls: s.calls.sum,
                        time_s: secs(s.time_ns.sum),
                        percent_of_mpi: percent_of(secs(s.time_ns.sum), secs(r.mpi_ns.sum)),
                        time_avg_s: s.time_ns.avg(r.ranks.max(1)) * 1e-9,
                        time_min_s: secs(s.time_ns.min),
                        time_max_s: secs(s.time_ns.max),
                        time_max_rank: s.time_ns.max_rank,
                        bytes: s.bytes.sum,
                        bytes_per_call: per_call(&s.bytes, &s.calls),
                        count: s.count.sum,
                        hist: &s.hist,
                        sync_s: s.sync_ns.map(secs),
                        sync_percent: s.sync_ns.map(|sync| {
                            percent_of(secs(sync.min(s.time_ns.sum)), secs(s.time_ns.sum))
                        }),
                        counters: &s.counters,
                        node_bytes: s.node_bytes.map(NodeBytesJson::from),
                    };
                    (s.name.as_str(), routine)
                })
                .collect(),
            imbalance: ImbalanceJson::new(r),
            counters_mode: r.counters.as_ref().map(|c| c.mode.as_str()),
            counters: counters_json(r),
            slurm: r.slurm.as_ref().map(|facts| SlurmJson::new(facts, r)),
            trace: r.trace.as_ref().map(TraceJson::from),
        }
    }
}

/// `total` per call (0 without calls).
fn per_call(total: &Stat, calls: &Stat) -> f64 {
    if calls.sum == 0 {
        0.0
    } else {
        total.sum as f64 / calls.sum as f64
    }
}

/// The record as one line of JSON.
pub fn render(record: &JobRecord) -> String {
    serde_json::to_string(&JobJson::new(record)).expect("a job's JSON view always serialises")
}
