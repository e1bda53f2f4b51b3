//! The assembly of the job's [`JobRecord`] from the facts about the job ([`crate::facts`]) and
//! its reduced numbers.

use crate::facts::{
    host_name, job_id, program, thread_level_name, unix_ms_now, Account, InitFacts,
};
use crate::generated::routines::{N_ROUTINES, ROUTINES};
use crate::tally::{JobValue, Reduced};
use mpistat_record::hostlist::compress;
use mpistat_record::model::{
    JobRecord, NodeBytes, RanksPerNode, RoutineStats, HOST_LIST_MAX, MODEL_VERSION,
};
use mpistat_site::ProfilerConfig;
use std::collections::BTreeMap;

// Plain loops rather than `collect()` here: each collect was a generic instance of its own on
// rank 0's `MPI_Finalize` path (docs/footprint.md, "finrec").

fn whitelisted_env(config: &ProfilerConfig) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (k, v) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if config.env_whitelisted(&k) {
            let v = v.to_string_lossy();
            // The first `env_value_max` characters.
            let end = v
                .char_indices()
                .nth(config.env_value_max)
                .map_or(v.len(), |(at, _)| at);
            env.insert(k, v[..end].to_string());
        }
    }
    env
}

// The lists a record has as many entries of as the profiler's tables are within what decoders
// take (`mpistat_record::limits`; the encoder cuts the texts a user controls).
const _: () = assert!(N_ROUTINES <= mpistat_record::limits::ROUTINES_MAX);
const _: () = assert!(crate::superstep::SERIES_POINTS <= mpistat_record::limits::SERIES_MAX);
const _: () = assert!(crate::superstep::MAX_PARTITIONS <= mpistat_record::limits::PARTITIONS_MAX);

/// Assemble the record of the job from `init`, the reduced numbers and what the writing rank knows
/// (its `account`: looked up by the caller, whose finalize drops libc's code between the two).
pub fn build_record(
    init: &InitFacts,
    reduced: &Reduced,
    config: &ProfilerConfig,
    mpi_library: String,
    partial: Option<String>,
    account: Account,
) -> JobRecord {
    let placed = crate::places::known();
    let mut routines = Vec::with_capacity(reduced.routines.len());
    for r in &reduced.routines {
        let [calls, time_ns, count, bytes] = r.stats;
        if calls.sum == 0 {
            continue;
        }
        let (on_node, off_node) = r.node_bytes;
        routines.push(RoutineStats {
            node_bytes: (placed && bytes.sum > 0).then_some(NodeBytes { on_node, off_node }),
            name: ROUTINES[r.id].name().to_string(),
            class: ROUTINES[r.id].class.as_str().to_string(),
            calls,
            time_ns,
            count,
            bytes,
            hist: r.hist.clone(),
            sync_ns: None,
            counters: BTreeMap::new(),
        });
    }
    let program = program();
    let hosts = crate::peers::node_list();
    let nodes = hosts.as_ref().map_or(reduced.nodes, |h| h.len() as u32);
    // Every rank gave its node's count; a record of one rank's own knows only its node's.
    let on_node = reduced.job(JobValue::RanksOnNode);
    let ranks_per_node =
        (on_node.min > 0 && (partial.is_none() || nodes == 1)).then_some(RanksPerNode {
            min: on_node.min as u32,
            max: on_node.max as u32,
        });
    JobRecord {
        version: MODEL_VERSION,
        job_id: job_id(init.start_unix_ms, init.pid),
        uid: account.uid,
        user: account.name,
        exe: program.exe.clone(),
        argv0: program.argv0.clone(),
        app: program.application.name.clone(),
        interpreter: program.application.interpreter.clone(),
        host: host_name(),
        pid: init.pid,
        ranks: init.ranks,
        nodes,
        host_list: hosts.map_or_else(String::new, |h| compress(&h, HOST_LIST_MAX)),
        ranks_per_node,
        start_unix_ms: init.start_unix_ms,
        end_unix_ms: unix_ms_now(),
        wall_ns: reduced.job(JobValue::WallNs),
        mpi_ns: reduced.job(JobValue::MpiNs),
        binding: init.binding,
        thread_level: thread_level_name(init.thread_level).to_string(),
        mpi_library,
        env: whitelisted_env(config),
        user_pmpi_tool: reduced.user_pmpi_tool,
        overhead_ns: reduced.job(JobValue::OverheadNs),
        partial,
        routines,
        imbalance: None,
        counters: None,
        trace: None,
        slurm: crate::slurm::facts(|name| std::env::var(name).ok()),
    }
}
