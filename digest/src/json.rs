//! The JSON view of a record: one object per job, for scripts. Field names are an interface:
//! `job_id uid user exe ranks wall_s mpi_s binding partial routines.<name>.{calls,time_s,bytes}`
//! must stay; fields may be added.

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
    pub argv0: &'a str,
    pub host: &'a str,
    pub pid: u32,
    pub ranks: u32,
    pub nodes: u32,
    pub start_utc: String,
    pub end_utc: String,
    /// The slowest rank's wall time.
    pub wall_s: f64,
    /// MPI time summed over ranks.
    pub mpi_s: f64,
    /// `mpi_s` over wall time summed over ranks, in percent.
    pub mpi_percent: f64,
    pub binding: &'static str,
    pub thread_level: &'a str,
    pub mpi_library: &'a str,
    pub user_pmpi_tool: bool,
    /// Profiler overhead summed over ranks.
    pub overhead_s: f64,
    pub partial: bool,
    pub partial_reason: Option<&'a str>,
    pub env: &'a BTreeMap<String, String>,
    pub routines: BTreeMap<&'a str, RoutineJson<'a>>,
}

/// One routine, summed over ranks.
#[derive(Serialize)]
pub struct RoutineJson<'a> {
    pub class: &'a str,
    pub calls: u64,
    pub time_s: f64,
    pub bytes: u64,
    pub count: u64,
    /// Message-size histogram: entry 0 counts empty messages, entry b ≥ 1 messages of
    /// 2^(b-1) ..= 2^b - 1 bytes.
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    pub hist: &'a [u64],
}

impl<'a> JobJson<'a> {
    pub fn new(r: &'a JobRecord) -> Self {
        JobJson {
            job_id: &r.job_id,
            key: r.key(),
            uid: r.uid,
            user: &r.user,
            exe: &r.exe,
            argv0: &r.argv0,
            host: &r.host,
            pid: r.pid,
            ranks: r.ranks,
            nodes: r.nodes,
            start_utc: utc(r.start_unix_ms),
            end_utc: utc(r.end_unix_ms),
            wall_s: r.wall_s(),
            mpi_s: secs(r.mpi_ns.sum),
            mpi_percent: 100.0 * r.mpi_fraction(),
            binding: r.binding.as_str(),
            thread_level: &r.thread_level,
            mpi_library: &r.mpi_library,
            user_pmpi_tool: r.user_pmpi_tool,
            overhead_s: secs(r.overhead_ns.sum),
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
                        bytes: s.bytes.sum,
                        count: s.count.sum,
                        hist: &s.hist,
                    };
                    (s.name.as_str(), routine)
                })
                .collect(),
        }
    }
}

/// The record as one line of JSON.
pub fn render(record: &JobRecord) -> String {
    serde_json::to_string(&JobJson::new(record)).expect("a job's JSON view always serialises")
}
