//! The job record's data model, shared by the profiler (which fills it) and the digest (which reads it).
//!
//! Times are integer nanoseconds so that sums over ranks are exact; views convert to seconds.
//! Every per-rank quantity is a [`Stat`]: its sum, min and max over ranks and the rank of the max.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the record's data model; the wire format carries it, decoders up-convert older ones.
pub const MODEL_VERSION: u32 = 1;

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
}

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
    /// Host and pid of rank 0: with `job_id` and `start_unix_ms` they make the record's key unique.
    pub host: String,
    pub pid: u32,
    pub ranks: u32,
    pub nodes: u32,
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

    /// The key that identifies this job's lines in syslog: stable for the same job, distinct for
    /// different jobs even with the same batch id (job steps, requeues).
    pub fn key(&self) -> String {
        // FNV-1a: tiny, dependency-free, stable across versions.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let id = format!(
            "{}\0{}\0{}\0{}",
            self.job_id, self.host, self.pid, self.start_unix_ms
        );
        for b in id.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }

    pub fn routine(&self, name: &str) -> Option<&RoutineStats> {
        self.routines.iter().find(|r| r.name == name)
    }
}

/// Bucket index of a message of `bytes` bytes in [`RoutineStats::hist`].
pub fn hist_bucket(bytes: u64) -> usize {
    (u64::BITS - bytes.leading_zeros()) as usize
}

/// Number of histogram buckets kept per routine (messages up to 2^47 bytes; larger ones go in the last).
pub const HIST_BUCKETS: usize = 48;
