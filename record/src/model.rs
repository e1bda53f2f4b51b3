//! The job record's data model, shared by the profiler (which fills it) and the digest (which reads it).
//!
//! Times are integer nanoseconds so that sums over ranks are exact; views convert to seconds.
//! Every per-rank quantity is a [`Stat`]: its sum, min and max over ranks and the rank of the max.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the record's data model; the wire format carries it, decoders up-convert older ones.
/// 2: `app` and `interpreter` (version 1 records have neither: their application is `exe`).
/// 3: `host_list`, `ranks_per_node` and the routines' `node_bytes` (older records have none:
/// they read as unknown).
pub const MODEL_VERSION: u32 = 3;

/// Which language binding the job used for MPI.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Binding {
    #[default]
    C,
    Fortran,
}

impl Binding {
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::C => "C",
            Binding::Fortran => "Fortran",
        }
    }
}

/// A quantity measured on every rank, reduced over ranks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stat {
    pub sum: u64,
    pub min: u64,
    pub max: u64,
    /// The (lowest) rank that holds `max`.
    pub max_rank: u32,
}

impl Stat {
    /// A stat over a single rank's value.
    pub fn single(value: u64, rank: u32) -> Stat {
        Stat {
            sum: value,
            min: value,
            max: value,
            max_rank: rank,
        }
    }

    pub fn avg(&self, ranks: u32) -> f64 {
        if ranks == 0 {
            0.0
        } else {
            self.sum as f64 / ranks as f64
        }
    }
}

/// Everything counted for one MPI routine, over all ranks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct RoutineStats {
    /// The C name, e.g. `MPI_Send`.
    pub name: String,
    /// The routine's class from the spec table: p2p, collective, one-sided, io, datatype, comm,
    /// topology, misc.
    pub class: String,
    pub calls: Stat,
    pub time_ns: Stat,
    /// Sum of the routine's count arguments (elements, as passed).
    pub count: Stat,
    /// Bytes transferred: count × type size; receives use the actual size from the status.
    pub bytes: Stat,
    /// Message-size histogram summed over ranks: entry 0 counts empty messages, entry b (b ≥ 1)
    /// messages of 2^(b-1) ..= 2^b - 1 bytes. Trailing zero buckets are omitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hist: Vec<u64>,
    /// Estimated synchronisation (waiting) time summed over ranks, for global synchronising
    /// collectives: in each superstep this routine ended, rank p waited about
    /// max_q d_q - d_p (see [`Imbalance`]). `None` for other routines and older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_ns: Option<u64>,
    /// Performance-counter events inside this routine, summed over ranks and threads, by event
    /// name (only in the per-call mode; see [`CounterSet`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
    /// Of `bytes` (summed over ranks), what went between ranks on the same node and what crossed
    /// nodes. Absent when the profiler could not tell which ranks share a node, and in records
    /// older than version 3. Bytes it could not place (a wildcard receive posted without a
    /// status, one-sided and file I/O) are in neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_bytes: Option<NodeBytes>,
}

/// Bytes that stayed on a node and bytes that crossed nodes, summed over ranks.
///
/// Point-to-point data by its peer's node; a collective's data by whether its communicator
/// spans nodes (all of it off-node when it does, even the part MPI moved within a node).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodeBytes {
    pub on_node: u64,
    pub off_node: u64,
}

impl NodeBytes {
    /// The share of the placed bytes that stayed on a node (0..=1), if any were placed.
    pub fn on_node_share(&self) -> Option<f64> {
        let total = self.on_node + self.off_node;
        (total > 0).then(|| self.on_node as f64 / total as f64)
    }
}

/// The fewest and the most ranks of the job on one node.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RanksPerNode {
    pub min: u32,
    pub max: u32,
}

/// Longest host list a record carries ([`crate::hostlist::compress`] caps it with a marker).
pub const HOST_LIST_MAX: usize = 1024;

/// One record per job.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct JobRecord {
    pub version: u32,
    /// The batch system's job id (`SLURM_JOB_ID`, `PBS_JOBID`, `LSB_JOBID`) or a generated one.
    pub job_id: String,
    pub uid: u32,
    pub user: String,
    /// Absolute path of the executable (`/proc/self/exe`).
    pub exe: String,
    pub argv0: String,
    /// The application ([`crate::app::classify`]): `exe`, or for an interpreter the script
    /// (`/home/alice/run.py`) or module (`python -m pkg`). Empty in version 1 records: read it
    /// with [`JobRecord::application`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app: String,
    /// The interpreter (`exe`) when `app` is a script or module it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<String>,
    /// Host and pid of rank 0: with `job_id` and `start_unix_ms` they make the record's key unique.
    pub host: String,
    pub pid: u32,
    pub ranks: u32,
    pub nodes: u32,
    /// The job's hosts in Slurm's compressed form (`node[001-004,007]`, [`crate::hostlist`]), at
    /// most [`HOST_LIST_MAX`] bytes (then ending `+N more`). Empty when unknown (no PMIx node
    /// list) and in records older than version 3.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_list: String,
    /// The fewest and most ranks on one node (absent when unknown, and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks_per_node: Option<RanksPerNode>,
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    /// Wall time from entering `MPI_Init` to entering `MPI_Finalize`, per rank (so that `mpi_ns`,
    /// which includes `MPI_Init`, is a part of it).
    pub wall_ns: Stat,
    /// Time spent inside MPI routines, per rank.
    pub mpi_ns: Stat,
    pub binding: Binding,
    /// Thread level provided: single, funneled, serialized or multiple.
    pub thread_level: String,
    /// `MPI_Get_library_version`, first line.
    pub mpi_library: String,
    /// Environment switches whitelisted by the site (e.g. `OMPI_MCA_*`).
    pub env: BTreeMap<String, String>,
    /// A user's own PMPI tool was detected (its `MPI_X` wrapper called our `PMPI_X`).
    pub user_pmpi_tool: bool,
    /// Profiler overhead summed over ranks: calls × calibrated per-call cost + finalize time.
    pub overhead_ns: Stat,
    /// Set when the job did not reach `MPI_Finalize` (e.g. "MPI_Abort", "exit without MPI_Finalize"):
    /// the record then holds what the writing rank had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// Only routines called at least once, in spec-table order.
    pub routines: Vec<RoutineStats>,
    /// Imbalance estimates from supersteps (absent in partial and older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imbalance: Option<Imbalance>,
    /// Performance counters split into application and MPI parts (absent when none were chosen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CounterSet>,
    /// The job was traced (trace-capture mode): where the trace is and what it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceInfo>,
    /// The Slurm job and step the job ran in (absent outside Slurm and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmFacts>,
}

/// What Slurm told the job's rank 0 about its job and step: the environment Slurm gives every task
/// (`SLURM_JOB_ID`, `SLURM_STEP_ID`, ...) and what mpistat's TaskProlog adds from slurmctld (time
/// limit, submit and start times, QOS: Slurm 22.05 puts none of them in the environment).
/// Every field but `job_id` may be unknown.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct SlurmFacts {
    /// `SLURM_JOB_ID` (for an array task its own id, not the array's).
    pub job_id: String,
    /// `SLURM_STEP_ID`; none for the batch script (and what it runs, e.g. `mpirun`'s local ranks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// `SLURM_ARRAY_JOB_ID` and `SLURM_ARRAY_TASK_ID` of an array task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    /// `SLURM_JOB_NODELIST`, Slurm's compressed form (`node[01-04]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_list: Option<String>,
    /// `SLURM_JOB_NUM_NODES`: nodes allocated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// `SLURM_JOB_CPUS_PER_NODE`, Slurm's form: `4(x2),2` is 4 CPUs on each of 2 nodes, then 2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus_per_node: Option<String>,
    /// The time limit in seconds; none when unlimited or unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<u64>,
    /// When the job was submitted and when it started (seconds since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_unix_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_unix_s: Option<u64>,
}

/// Slurm's compressed per-node counts (`SLURM_JOB_CPUS_PER_NODE`, `SLURM_TASKS_PER_NODE`): `4(x2),2`
/// is 4 on each of 2 nodes, then 2 on one, as `[(4, 2), (2, 1)]`; none if not in that form.
pub fn slurm_counts(list: &str) -> Option<Vec<(u32, u32)>> {
    list.split(',')
        .map(|item| {
            let (n, times) = match item.split_once("(x") {
                Some((n, rest)) => (n, rest.strip_suffix(')')?.parse().ok()?),
                None => (item, 1),
            };
            Some((n.trim().parse().ok()?, times))
        })
        .collect()
}

impl SlurmFacts {
    /// How the job is named in `sacct`/`squeue`: `<array job>_<task>` for an array task, else the
    /// job id; with `.<step>` when the record is of a step.
    pub fn job_step(&self) -> String {
        let job = match (&self.array_job_id, &self.array_task_id) {
            (Some(a), Some(t)) => format!("{a}_{t}"),
            _ => self.job_id.clone(),
        };
        match &self.step_id {
            Some(step) => format!("{job}.{step}"),
            None => job,
        }
    }

    /// CPUs allocated over all nodes, from `cpus_per_node` (`4(x2),2` = 10); none if unknown or
    /// not in Slurm's form.
    pub fn cpus_allocated(&self) -> Option<u64> {
        slurm_counts(self.cpus_per_node.as_deref()?)?
            .iter()
            .try_fold(0u64, |total, &(n, times)| {
                total.checked_add(u64::from(n) * u64::from(times))
            })
    }

    /// Seconds the job waited in the queue (start - submit), when both are known.
    pub fn queue_wait_s(&self) -> Option<u64> {
        Some(self.start_unix_s?.saturating_sub(self.submit_unix_s?))
    }

    /// Whether a job that ended at `end_unix_ms` had reached its time limit (Slurm's clock checks
    /// limits about every 30 s, so any end at or after the limit counts).
    pub fn reached_time_limit(&self, end_unix_ms: u64) -> bool {
        match (self.start_unix_s, self.time_limit_s) {
            (Some(start), Some(limit)) => end_unix_ms / 1000 >= start.saturating_add(limit),
            _ => false,
        }
    }
}

/// A job's event trace (trace-capture mode), for `mpistat analyze`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct TraceInfo {
    /// The trace directory (on the file system the ranks wrote to).
    pub dir: String,
    /// Why the job was traced: "user" (`MPISTAT_TRACE=1`), "site" (every job), "escalation".
    pub reason: String,
    /// Events recorded, over all ranks.
    pub events: u64,
    /// Ranks whose trace file was written.
    pub ranks_written: u32,
    /// Set when recording stopped before the end (budget or window): where and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Time the tracing added, summed over ranks (event recording and writing the files).
    pub overhead_ns: u64,
}

/// Performance counters of the job, summed over ranks and threads.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct CounterSet {
    /// How they were read: "per-call read" (split around every outermost MPI call) or "totals
    /// (read at MPI_Init and MPI_Finalize)" (everything in `app`, no split).
    pub mode: String,
    pub events: Vec<CounterEvent>,
}

impl CounterSet {
    /// Whether the events are split into outside and inside MPI: not in the "totals" mode,
    /// whose `mpi` is a zero nobody measured.
    pub fn split(&self) -> bool {
        !self.mode.starts_with("totals")
    }
}

/// One counter event.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct CounterEvent {
    /// mpistat's name of the event, e.g. `instructions`, `task-clock` (ns).
    pub name: String,
    /// Events outside MPI (from the end of `MPI_Init` to the start of `MPI_Finalize`).
    pub app: u64,
    /// Events inside outermost MPI calls.
    pub mpi: u64,
    /// Why the event was not counted ("unavailable: <reason>" in views).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Imbalance estimates made without extra communication during the run.
///
/// A superstep k is the interval between two consecutive global synchronising collectives (on a
/// communicator spanning `MPI_COMM_WORLD`), from `MPI_Init` to `MPI_Finalize`; d_p(k) is rank p's
/// time from leaving collective k-1 to entering collective k (outside MPI or in other MPI calls).
/// When the profiler's buffer filled up, adjacent supersteps were merged `merge_factor` at a time:
/// then `critical_path_ns` (and the per-routine `sync_ns`) are lower bounds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct Imbalance {
    /// Supersteps seen (global synchronising collectives + 1 for the last one, ended by Finalize).
    pub supersteps: u64,
    /// Supersteps per kept slot (1: nothing merged).
    pub merge_factor: u64,
    /// Critical-path imbalance iota = sum_k (max_p d_p(k) - avg_p d_p(k)).
    pub critical_path_ns: u64,
    /// Profile-based imbalance: max_p sum_k d_p(k) - avg_p sum_k d_p(k).
    pub profile_ns: u64,
    /// sum_k d_p(k): its max over ranks and its sum over ranks (the "work" of the estimates).
    pub work_max_ns: u64,
    pub work_sum_ns: u64,
    /// Useful (non-MPI) time per rank, wall - MPI: max and sum over ranks (POP metrics).
    pub useful_max_ns: u64,
    pub useful_sum_ns: u64,
    /// Part of sum_p sum_k d_p(k) spent in MPI calls other than the global collectives.
    pub other_mpi_ns: u64,
    /// MPMD: the part of iota due to imbalance between partitions,
    /// avg_p sum_k (max_q d_q(k) - max_{q in partition(p)} d_q(k)).
    pub inter_partition_ns: u64,
    /// Per-superstep imbalance max_p d_p - avg_p d_p, summed over groups of `series_factor`
    /// supersteps so that at most 60 points remain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series_ns: Vec<u64>,
    pub series_factor: u64,
    /// MPMD jobs (`MPI_APPNUM`): the same figures within each partition.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionImbalance>,
    /// Why there are no estimates (e.g. ranks saw different numbers of collectives).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// The imbalance figures within one MPMD partition (ranks with the same `MPI_APPNUM`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct PartitionImbalance {
    pub appnum: u32,
    pub ranks: u32,
    /// Intra-partition critical-path imbalance: sum_k (max - avg over the partition's ranks).
    pub critical_path_ns: u64,
    pub profile_ns: u64,
    pub work_max_ns: u64,
    pub work_sum_ns: u64,
    pub useful_max_ns: u64,
    pub useful_sum_ns: u64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b <= 0.0 {
        0.0
    } else {
        a / b
    }
}

impl Imbalance {
    /// Average over ranks of sum_k d_p(k).
    pub fn work_avg_ns(&self, ranks: u32) -> f64 {
        ratio(self.work_sum_ns as f64, ranks as f64)
    }

    /// (iota - profile) / iota: the share of the imbalance that moves between ranks over time.
    pub fn dynamic_share(&self) -> f64 {
        ratio(
            self.critical_path_ns.saturating_sub(self.profile_ns) as f64,
            self.critical_path_ns as f64,
        )
    }

    /// POP load-balance efficiency: avg / max of per-rank useful time.
    pub fn load_balance(&self, ranks: u32) -> f64 {
        ratio(
            ratio(self.useful_sum_ns as f64, ranks as f64),
            self.useful_max_ns as f64,
        )
    }

    /// POP communication efficiency: max useful time / wall time.
    pub fn comm_efficiency(&self, wall_max_ns: u64) -> f64 {
        ratio(self.useful_max_ns as f64, wall_max_ns as f64)
    }

    /// POP parallel efficiency: load balance × communication efficiency.
    pub fn parallel_efficiency(&self, ranks: u32, wall_max_ns: u64) -> f64 {
        self.load_balance(ranks) * self.comm_efficiency(wall_max_ns)
    }
}

impl PartitionImbalance {
    pub fn load_balance(&self) -> f64 {
        ratio(
            ratio(self.useful_sum_ns as f64, self.ranks as f64),
            self.useful_max_ns as f64,
        )
    }
}

impl JobRecord {
    /// Fraction of the job's rank-seconds spent in MPI (0..=1).
    pub fn mpi_fraction(&self) -> f64 {
        if self.wall_ns.sum == 0 {
            0.0
        } else {
            self.mpi_ns.sum as f64 / self.wall_ns.sum as f64
        }
    }

    /// Wall time of the job in seconds (the slowest rank).
    pub fn wall_s(&self) -> f64 {
        self.wall_ns.max as f64 * 1e-9
    }

    /// The key a store files this job under and pages name it by: its [`JobRecord::wire_key`]
    /// and its uid ([`stored_key`]). Ingest stores a record only when its uid is the one the
    /// kernel attested and its host the one its lines came from, so no user's record can have
    /// another user's key, whatever job id, host, pid and start it claims.
    pub fn key(&self) -> String {
        stored_key(&self.wire_key(), self.uid)
    }

    /// The key that identifies this job's lines in syslog (and the profiler's `job-key` file):
    /// stable for the same job, distinct for different jobs even with the same batch id (job
    /// steps, requeues). Made of what the sender says: it tells a sender's records apart, never
    /// one sender's from another's (that is [`JobRecord::key`]).
    pub fn wire_key(&self) -> String {
        job_key(&self.job_id, &self.host, self.pid, self.start_unix_ms)
    }

    /// What the job runs: [`JobRecord::app`], or `exe` in a record without one.
    pub fn application(&self) -> &str {
        application(&self.app, &self.exe)
    }

    pub fn routine(&self, name: &str) -> Option<&RoutineStats> {
        self.routines.iter().find(|r| r.name == name)
    }

    /// The routines' [`NodeBytes`] summed, if the record has them.
    pub fn node_bytes(&self) -> Option<NodeBytes> {
        self.routines
            .iter()
            .filter_map(|r| r.node_bytes)
            .reduce(|a, b| NodeBytes {
                on_node: a.on_node + b.on_node,
                off_node: a.off_node + b.off_node,
            })
    }
}

fn application<'a>(app: &'a str, exe: &'a str) -> &'a str {
    if app.is_empty() {
        exe
    } else {
        app
    }
}

/// [`JobRecord::key`] of the job of uid `uid` whose lines have key `wire_key`:
/// `<wire key>-<uid>`. Injective: two uids never share a key, however the wire keys were made
/// (they are short hashes of what the sender claims, which a sender can make collide).
pub fn stored_key(wire_key: &str, uid: u32) -> String {
    format!("{wire_key}-{uid}")
}

/// [`JobRecord::wire_key`] of a job with these facts (16 lowercase hex digits).
pub fn job_key(job_id: &str, host: &str, pid: u32, start_unix_ms: u64) -> String {
    // FNV-1a: tiny, dependency-free, stable across versions.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let id = format!("{job_id}\0{host}\0{pid}\0{start_unix_ms}");
    for b in id.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What a store needs to know of a job without reading its whole record: the columns the digest
/// selects on, the key's ingredients, and the figures the escalation rule looks at. Made from a
/// record by [`JobIndex::of`] only (wire version 2 sends it next to the compressed record, so
/// `mpistat ingest` stores a job without inflating it; a decoder checks that the two agree).
/// Integers only, so that it survives JSON exactly and two indexes compare with `==`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct JobIndex {
    /// The record's data-model version ([`JobRecord::version`]).
    pub version: u32,
    pub job_id: String,
    pub uid: u32,
    pub user: String,
    pub exe: String,
    /// [`JobRecord::app`] (absent in version 1 records and in their indexes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app: String,
    pub host: String,
    pub pid: u32,
    pub ranks: u32,
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    pub wall_ns_sum: u64,
    pub wall_ns_max: u64,
    pub mpi_ns_sum: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// Critical-path imbalance and the work it is relative to (when the record has estimates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imbalance: Option<IndexImbalance>,
    /// Why the job was traced ([`TraceInfo::reason`]), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced: Option<String>,
}

/// The part of [`Imbalance`] in a [`JobIndex`].
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IndexImbalance {
    pub critical_path_ns: u64,
    pub work_sum_ns: u64,
}

impl JobIndex {
    /// The index of `record`: the one definition of what an index says.
    pub fn of(record: &JobRecord) -> JobIndex {
        JobIndex {
            version: record.version,
            job_id: record.job_id.clone(),
            uid: record.uid,
            user: record.user.clone(),
            exe: record.exe.clone(),
            app: record.app.clone(),
            host: record.host.clone(),
            pid: record.pid,
            ranks: record.ranks,
            start_unix_ms: record.start_unix_ms,
            end_unix_ms: record.end_unix_ms,
            wall_ns_sum: record.wall_ns.sum,
            wall_ns_max: record.wall_ns.max,
            mpi_ns_sum: record.mpi_ns.sum,
            partial: record.partial.clone(),
            imbalance: record.imbalance.as_ref().map(|i| IndexImbalance {
                critical_path_ns: i.critical_path_ns,
                work_sum_ns: i.work_sum_ns,
            }),
            traced: record.trace.as_ref().map(|t| t.reason.clone()),
        }
    }

    /// [`JobRecord::application`] of the record this is the index of.
    pub fn application(&self) -> &str {
        application(&self.app, &self.exe)
    }

    /// [`JobRecord::key`] of the record this is the index of.
    pub fn key(&self) -> String {
        stored_key(&self.wire_key(), self.uid)
    }

    /// [`JobRecord::wire_key`] of the record this is the index of.
    pub fn wire_key(&self) -> String {
        job_key(&self.job_id, &self.host, self.pid, self.start_unix_ms)
    }

    /// Critical-path imbalance in % of the average work per rank (0 without work), when the
    /// record has imbalance estimates.
    pub fn critical_path_imbalance_percent(&self) -> Option<f64> {
        let imbalance = self.imbalance?;
        let work = ratio(imbalance.work_sum_ns as f64, self.ranks as f64);
        Some(if work > 0.0 {
            100.0 * imbalance.critical_path_ns as f64 / work
        } else {
            0.0
        })
    }

    /// The fields in which `other` differs from `self`, as `name: <self's> vs <other's>` in JSON
    /// (`none` for an absent one); empty when the two are equal.
    pub fn differences(&self, other: &JobIndex) -> Vec<String> {
        let fields = |index: &JobIndex| match serde_json::to_value(index) {
            Ok(serde_json::Value::Object(fields)) => fields,
            _ => unreachable!("an index serialises as an object"),
        };
        let (mine, theirs) = (fields(self), fields(other));
        let shown =
            |value: Option<&serde_json::Value>| value.map_or("none".into(), |v| v.to_string());
        let mut names: Vec<&String> = mine.keys().chain(theirs.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter(|name| mine.get(*name) != theirs.get(*name))
            .map(|name| {
                format!(
                    "{name}: {} vs {}",
                    shown(mine.get(name)),
                    shown(theirs.get(name))
                )
            })
            .collect()
    }
}

/// Bucket index of a message of `bytes` bytes in [`RoutineStats::hist`].
#[inline]
pub fn hist_bucket(bytes: u64) -> usize {
    (u64::BITS - bytes.leading_zeros()) as usize
}

/// Number of histogram buckets kept per routine (messages up to 2^47 bytes; larger ones go in the last).
pub const HIST_BUCKETS: usize = 48;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_without_the_newer_fields_still_decode() {
        let old = r#"{"version":1,"job_id":"1","uid":0,"user":"u","exe":"e","argv0":"a","host":"h",
            "pid":1,"ranks":2,"nodes":1,"start_unix_ms":0,"end_unix_ms":0,
            "wall_ns":{"sum":0,"min":0,"max":0,"max_rank":0},
            "mpi_ns":{"sum":0,"min":0,"max":0,"max_rank":0},"binding":"C","thread_level":"single",
            "mpi_library":"","env":{},"user_pmpi_tool":false,
            "overhead_ns":{"sum":0,"min":0,"max":0,"max_rank":0},
            "routines":[{"name":"MPI_Barrier","class":"collective",
              "calls":{"sum":2,"min":1,"max":1,"max_rank":0},
              "time_ns":{"sum":0,"min":0,"max":0,"max_rank":0},
              "count":{"sum":0,"min":0,"max":0,"max_rank":0},
              "bytes":{"sum":0,"min":0,"max":0,"max_rank":0}}]}"#;
        let r: JobRecord = serde_json::from_str(old).unwrap();
        assert_eq!(r.imbalance, None);
        assert_eq!(r.routines[0].sync_ns, None);
        assert_eq!((r.application(), r.interpreter.as_deref()), ("e", None));
        assert_eq!(JobIndex::of(&r).application(), "e");
        assert_eq!(r.slurm, None);
        assert_eq!((r.host_list.as_str(), r.ranks_per_node), ("", None));
        assert_eq!((r.routines[0].node_bytes, r.node_bytes()), (None, None));
    }

    #[test]
    fn slurm_cpus_allocated_reads_slurms_form() {
        let with = |s: &str| SlurmFacts {
            cpus_per_node: Some(s.to_string()),
            ..SlurmFacts::default()
        };
        assert_eq!(with("2").cpus_allocated(), Some(2));
        assert_eq!(with("4(x2),2").cpus_allocated(), Some(10));
        assert_eq!(with("72(x3)").cpus_allocated(), Some(216));
        for bad in ["", "x", "4(x2", "4(xa)", "4,,2"] {
            assert_eq!(with(bad).cpus_allocated(), None, "{bad:?}");
        }
        assert_eq!(SlurmFacts::default().cpus_allocated(), None);
    }

    #[test]
    fn slurm_job_step_names_the_job_as_sacct_does() {
        let mut f = SlurmFacts {
            job_id: "17".into(),
            ..SlurmFacts::default()
        };
        assert_eq!(f.job_step(), "17");
        f.step_id = Some("0".into());
        assert_eq!(f.job_step(), "17.0");
        f.array_job_id = Some("15".into());
        f.array_task_id = Some("2".into());
        assert_eq!(f.job_step(), "15_2.0");
    }

    #[test]
    fn slurm_time_limit_and_queue_wait() {
        let f = SlurmFacts {
            time_limit_s: Some(60),
            submit_unix_s: Some(1000),
            start_unix_s: Some(1010),
            ..SlurmFacts::default()
        };
        assert_eq!(f.queue_wait_s(), Some(10));
        assert!(!f.reached_time_limit(1_069_999));
        assert!(f.reached_time_limit(1_070_000));
        let unlimited = SlurmFacts {
            time_limit_s: None,
            ..f.clone()
        };
        assert!(!unlimited.reached_time_limit(u64::MAX));
    }
}
