//! Facts about the job (who, what, where) and the assembly of its [`JobRecord`].

use crate::generated::routines::{N_ROUTINES, ROUTINES};
use crate::tally::{JobValue, Reduced};
use mpistat_record::app::{classify, Application};
use mpistat_record::hostlist::compress;
use mpistat_record::model::{
    Binding, JobRecord, NodeBytes, RanksPerNode, RoutineStats, HOST_LIST_MAX, MODEL_VERSION,
};
use mpistat_site::ProfilerConfig;
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::OnceLock;

/// What `MPI_Init` established.
#[derive(Clone, Debug)]
pub struct InitFacts {
    pub rank: u32,
    pub ranks: u32,
    pub binding: Binding,
    /// `MPI_THREAD_*` provided.
    pub thread_level: c_int,
    pub start_unix_ms: u64,
    pub pid: u32,
}

/// Milliseconds since the Unix epoch (`clock_gettime` itself: `SystemTime::now` is std code
/// elsewhere in the library, which the end of `MPI_Init` would map, see footprint.rs).
#[inline]
pub fn unix_ms_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 || ts.tv_sec < 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

pub fn thread_level_name(level: c_int) -> &'static str {
    match level {
        0 => "single",
        1 => "funneled",
        2 => "serialized",
        3 => "multiple",
        _ => "unknown",
    }
}

/// The batch system's job id, or one made from the start time and pid.
pub fn job_id(start_unix_ms: u64, pid: u32) -> String {
    for var in ["SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"] {
        if let Ok(id) = std::env::var(var) {
            if !id.is_empty() {
                return match (var, std::env::var("SLURM_STEP_ID")) {
                    ("SLURM_JOB_ID", Ok(step)) if !step.is_empty() => format!("{id}.{step}"),
                    _ => id,
                };
            }
        }
    }
    format!("local-{start_unix_ms}-{pid}")
}

fn user_name(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r with a buffer we own; the result points into it while we read it.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return uid.to_string();
    }
    // SAFETY: pw_name is a NUL-terminated string inside buf.
    unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }
        .to_string_lossy()
        .into_owned()
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The command line from `/proc/self/cmdline` (Fortran programs pass no argv to `MPI_Init`).
fn argv() -> Vec<String> {
    let bytes = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|c| *c == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn exe() -> String {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What this process runs.
pub struct Program {
    pub exe: String,
    pub argv0: String,
    /// The executable, or an interpreter's script ([`classify`]).
    pub application: Application,
}

/// This process's [`Program`]: worked out once, at its first use (`MPI_Init`'s trace decision),
/// so that the escalation list is matched against the same application the record names even if
/// the program changes directory later.
pub fn program() -> &'static Program {
    static PROGRAM: OnceLock<Program> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let (exe, argv) = (exe(), argv());
        let cwd = std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        Program {
            application: classify(&exe, &argv, &cwd),
            argv0: argv.into_iter().next().unwrap_or_default(),
            exe,
        }
    })
}

fn whitelisted_env(config: &ProfilerConfig) -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| {
            let k = k.to_string_lossy().into_owned();
            config.env_whitelisted(&k).then(|| {
                let v: String = v
                    .to_string_lossy()
                    .chars()
                    .take(config.env_value_max)
                    .collect();
                (k, v)
            })
        })
        .collect()
}

// The lists a record has as many entries of as the profiler's tables are within what decoders
// take (`mpistat_record::limits`; the encoder cuts the texts a user controls).
const _: () = assert!(N_ROUTINES <= mpistat_record::limits::ROUTINES_MAX);
const _: () = assert!(crate::superstep::SERIES_POINTS <= mpistat_record::limits::SERIES_MAX);
const _: () = assert!(crate::superstep::MAX_PARTITIONS <= mpistat_record::limits::PARTITIONS_MAX);

/// Assemble the record of the job from `init`, the reduced numbers and what the writing rank knows.
pub fn build_record(
    init: &InitFacts,
    reduced: &Reduced,
    config: &ProfilerConfig,
    mpi_library: String,
    partial: Option<String>,
) -> JobRecord {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let placed = crate::places::known();
    let routines = reduced
        .routines
        .iter()
        .filter_map(|r| {
            let [calls, time_ns, count, bytes] = r.stats;
            if calls.sum == 0 {
                return None;
            }
            let (on_node, off_node) = r.node_bytes;
            Some(RoutineStats {
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
            })
        })
        .collect();
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
        uid,
        user: user_name(uid),
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
