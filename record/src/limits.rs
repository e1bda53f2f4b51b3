//! How large a record, its index and an analysis record may be, field by field.
//!
//! Everything a record carries is the sender's to choose: a 55 kB record can inflate to a
//! histogram of 20 million buckets or a 60 MB environment value, which every page, mail and
//! report that shows it would then carry too. So a decoder takes a record only when every field
//! is within the limits below ([`check_record`], [`check_index`], [`check_analysis`]) and its
//! JSON within [`RECORD_JSON_MAX`] bytes, and reports anything larger as
//! [`crate::Problem::Oversized`] (ingest rejects it as `oversized`, saying which field and how
//! large). The encoder cuts every record to these limits before it writes it ([`fit_record`]:
//! a text cut ends in `...`, environment variables beyond the limits are replaced by one entry
//! [`ENV_MORE_KEY`] saying how many), so a record that exceeds them was not written by
//! mpistat's profiler, and rejecting it loses nothing a job sent. Each limit is above what a
//! real job produces (see `docs/limits.md` for the measurements and what each one is for).

use crate::analysis::AnalysisRecord;
use crate::model::{JobIndex, JobRecord, HIST_BUCKETS, HOST_LIST_MAX};
use std::collections::BTreeMap;
use std::fmt;

/// Names and identifiers: user, host, job ids and Slurm's names, thread level, trace reason,
/// environment variable names. (Login names are at most 32 bytes, host names 64, Slurm's ids
/// are numbers.)
pub const NAME_MAX: usize = 256;

/// Why `name` cannot be a login name the mails and pages may go by, if it cannot: empty,
/// with space around it, or with a control character (none of which a password database
/// gives; a mail to such a name could reach someone else).
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("an empty name")
    } else if name.trim() != name {
        Some("a name with surrounding space")
    } else if name.chars().any(char::is_control) {
        Some("a name with a control character")
    } else {
        None
    }
}

/// Paths: the executable, `argv[0]`, the application (an interpreter's script), the
/// interpreter, the trace directory, Slurm's node list. Linux's `PATH_MAX`: `/proc/self/exe`
/// is never longer.
pub const PATH_MAX: usize = 4096;

/// Free texts the profiler writes: the MPI library's version line, why a record is partial,
/// why counters or estimates are unavailable, where tracing stopped, Slurm's CPUs per node.
pub const TEXT_MAX: usize = 1024;

/// Environment variables recorded (the site's whitelist; Open MPI's own are ignored).
pub const ENV_ENTRIES_MAX: usize = 128;
/// Bytes of one recorded environment value (the site's `env_value_max`, 128 characters by
/// default, is cut to this too).
pub const ENV_VALUE_MAX: usize = 1024;
/// Bytes of all recorded names and values together.
pub const ENV_BYTES_MAX: usize = 32 * 1024;
/// The entry that stands for the variables the limits left out (`N more not recorded`).
pub const ENV_MORE_KEY: &str = "+more";

/// Routines in a record: a job lists the routines it called, at most every routine of its
/// MPI's table (613 for MPICH 4.0, 383 for Open MPI 4.1; the profiler asserts it at build
/// time).
pub const ROUTINES_MAX: usize = 1024;
/// Bytes of a routine's name and class, and of a performance-counter event's name.
pub const ROUTINE_NAME_MAX: usize = 64;
/// Buckets of a routine's message-size histogram: the profiler's own count.
pub const HIST_MAX: usize = HIST_BUCKETS;
/// Performance-counter events of a job, and per routine.
pub const COUNTER_EVENTS_MAX: usize = 16;
/// Points of the per-superstep imbalance series (the profiler keeps 60).
pub const SERIES_MAX: usize = 60;
/// MPMD partitions with figures of their own (the profiler gives at most 16).
pub const PARTITIONS_MAX: usize = 16;

/// Bytes of a record's JSON (inflated). A real 1,024-rank job calling 150 routines writes
/// about 110 kB; a record with every field at its limit and every routine of MPICH's table
/// called, every figure at its widest, about 1.5 MB (`record/tests/limits.rs` measures both).
pub const RECORD_JSON_MAX: usize = 2 << 20;

/// Bytes of a record's index (wire version 2 sends it as JSON before the record).
pub const INDEX_JSON_MAX: usize = 64 * 1024;

/// Bytes of an analysis record's JSON (inflated), and of its summary (the JSON of the
/// [`crate::analysis::Summary`]: three causes and the trace reader's notes).
pub const ANALYSIS_JSON_MAX: usize = 256 * 1024;
pub const ANALYSIS_SUMMARY_MAX: usize = 128 * 1024;

/// A field over its limit: which (`what`), how large, and the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversize {
    /// The field, e.g. `MPI_Send's histogram`, `exe`, `record JSON`.
    pub what: String,
    /// Its size, when known (a JSON cut off at the limit has none).
    pub size: Option<u64>,
    pub max: u64,
    /// What is counted: `bytes`, `buckets`, `routines`, ...
    pub unit: &'static str,
}

impl fmt::Display for Oversize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Oversize {
            what,
            size,
            max,
            unit,
        } = self;
        match size {
            Some(size) => write!(f, "{what} of {size} {unit} > {max}"),
            None => write!(f, "{what} of more than {max} {unit}"),
        }
    }
}

impl std::error::Error for Oversize {}

impl Oversize {
    /// `what` (bytes) was cut off at `max`: how much more there was is not known.
    pub fn cut_off(what: &str, max: usize) -> Oversize {
        Oversize {
            what: what.into(),
            size: None,
            max: max as u64,
            unit: "bytes",
        }
    }
}

/// The first field of `record` over its limit, if any. (Mutable only because it shares its
/// walk with [`fit_record`]: it changes nothing.)
pub fn check_record(record: &mut JobRecord) -> Result<(), Oversize> {
    let mut check = Check(None);
    walk_record(record, &mut check);
    check.into_result()
}

/// `record` cut to the limits (what the encoder sends): texts cut ending in `...`, lists
/// shortened (a histogram's tail added to its last bucket, environment variables beyond the
/// limits replaced by one entry [`ENV_MORE_KEY`]).
pub fn fit_record(record: &mut JobRecord) {
    walk_record(record, &mut Fit);
}

/// The first field of `index` over its limit (the same limits as the record's fields).
pub fn check_index(index: &mut JobIndex) -> Result<(), Oversize> {
    let mut check = Check(None);
    let JobIndex {
        job_id,
        user,
        exe,
        app,
        host,
        partial,
        traced,
        ..
    } = index;
    check.cut(&|| "job id".into(), job_id, NAME_MAX);
    check.cut(&|| "user".into(), user, NAME_MAX);
    check.cut(&|| "exe".into(), exe, PATH_MAX);
    check.cut(&|| "app".into(), app, PATH_MAX);
    check.cut(&|| "host".into(), host, NAME_MAX);
    check.cut_some(&|| "partial".into(), partial, TEXT_MAX);
    check.cut_some(&|| "trace reason".into(), traced, NAME_MAX);
    check.into_result()
}

/// The first field of `analysis` over its limit (mutable as in [`check_record`]).
pub fn check_analysis(analysis: &mut AnalysisRecord) -> Result<(), Oversize> {
    let mut check = Check(None);
    walk_analysis(analysis, &mut check);
    check.into_result()
}

/// `analysis` cut to the limits (what the encoder sends).
pub fn fit_analysis(analysis: &mut AnalysisRecord) {
    walk_analysis(analysis, &mut Fit);
}

fn walk_analysis(a: &mut AnalysisRecord, limits: &mut impl Limits) {
    limits.cut(&|| "job key".into(), &mut a.job_key, NAME_MAX);
    limits.cut(&|| "user".into(), &mut a.user, NAME_MAX);
    limits.cut(&|| "host".into(), &mut a.host, NAME_MAX);
    limits.cut(&|| "trace directory".into(), &mut a.dir, PATH_MAX);
    limits.cut_some(&|| "summary".into(), &mut a.summary, ANALYSIS_SUMMARY_MAX);
    limits.cut_some(&|| "error".into(), &mut a.error, PATH_MAX);
}

/// A field's name for a reason, made only when a limit is exceeded.
type What<'a> = &'a dyn Fn() -> String;

/// What is done with each field: looked at ([`Check`]) or cut to its limit ([`Fit`]).
trait Limits {
    /// A text of at most `max` bytes: cut to it, or looked at.
    fn cut(&mut self, what: What<'_>, value: &mut String, max: usize);
    /// A list of `len` items (`unit`), at most `max`: how many of them to keep.
    fn count(&mut self, what: What<'_>, len: usize, max: usize, unit: &'static str) -> usize;

    /// [`Limits::cut`] of a text that may be absent.
    fn cut_some(&mut self, what: What<'_>, value: &mut Option<String>, max: usize) {
        if let Some(value) = value {
            self.cut(what, value, max);
        }
    }
}

/// Looks, remembering the first field over its limit.
struct Check(Option<Oversize>);

impl Check {
    fn into_result(self) -> Result<(), Oversize> {
        self.0.map_or(Ok(()), Err)
    }
}

impl Limits for Check {
    fn cut(&mut self, what: What<'_>, value: &mut String, max: usize) {
        self.count(what, value.len(), max, "bytes");
    }

    fn count(&mut self, what: What<'_>, len: usize, max: usize, unit: &'static str) -> usize {
        if len > max && self.0.is_none() {
            self.0 = Some(Oversize {
                what: what(),
                size: Some(len as u64),
                max: max as u64,
                unit,
            });
        }
        len
    }
}

/// Cuts every field to its limit.
struct Fit;

impl Limits for Fit {
    fn cut(&mut self, _: What<'_>, value: &mut String, max: usize) {
        cut(value, max);
    }

    fn count(&mut self, _: What<'_>, len: usize, max: usize, _: &'static str) -> usize {
        len.min(max)
    }
}

/// `value` cut to at most `max` bytes (on a character boundary), ending in `...` when cut.
/// Not inlined: a record has ~40 texts, and one copy of this each was most of `fit_record`'s
/// 19 kB on rank 0's `MPI_Finalize` path (docs/footprint.md, "finrec").
#[inline(never)]
fn cut(value: &mut String, max: usize) {
    if value.len() <= max {
        return;
    }
    let mut end = max.saturating_sub(3);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value.truncate(end);
    value.push_str(&"..."[..max.min(3)]);
}

/// The name of a text in a reason: its first bytes, escaped as Rust shows strings.
fn shown(text: &str) -> String {
    let mut end = text.len().min(48);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let ellipsis = if end < text.len() { "..." } else { "" };
    format!("{:?}{ellipsis}", &text[..end])
}

/// The one list of what is limited in a record, for looking and for cutting alike.
fn walk_record(r: &mut JobRecord, limits: &mut impl Limits) {
    limits.cut(&|| "job id".into(), &mut r.job_id, NAME_MAX);
    limits.cut(&|| "user".into(), &mut r.user, NAME_MAX);
    limits.cut(&|| "exe".into(), &mut r.exe, PATH_MAX);
    limits.cut(&|| "argv0".into(), &mut r.argv0, PATH_MAX);
    limits.cut(&|| "app".into(), &mut r.app, PATH_MAX);
    limits.cut_some(&|| "interpreter".into(), &mut r.interpreter, PATH_MAX);
    limits.cut(&|| "host".into(), &mut r.host, NAME_MAX);
    limits.cut(&|| "host list".into(), &mut r.host_list, HOST_LIST_MAX);
    limits.cut(&|| "thread level".into(), &mut r.thread_level, NAME_MAX);
    limits.cut(&|| "MPI library".into(), &mut r.mpi_library, TEXT_MAX);
    limits.cut_some(&|| "partial".into(), &mut r.partial, TEXT_MAX);
    walk_env(&mut r.env, limits);
    let keep = limits.count(
        &|| "routines".into(),
        r.routines.len(),
        ROUTINES_MAX,
        "routines",
    );
    r.routines.truncate(keep);
    for routine in &mut r.routines {
        limits.cut(
            &|| "a routine's name".into(),
            &mut routine.name,
            ROUTINE_NAME_MAX,
        );
        // Shown only in a reason (`Check`): cutting makes none.
        let name = &routine.name;
        limits.cut(
            &|| format!("{}'s class", shown(name)),
            &mut routine.class,
            ROUTINE_NAME_MAX,
        );
        let hist = &mut routine.hist;
        let keep = limits.count(
            &|| format!("{}'s histogram", shown(name)),
            hist.len(),
            HIST_MAX,
            "buckets",
        );
        if keep < hist.len() {
            // Larger messages go in the last bucket, as the profiler counts them.
            let tail = hist[keep..]
                .iter()
                .fold(0u64, |sum, &n| sum.saturating_add(n));
            hist.truncate(keep);
            if let Some(last) = hist.last_mut() {
                *last = last.saturating_add(tail);
            }
        }
        let counters = &mut routine.counters;
        let keep = limits.count(
            &|| format!("{}'s counters", shown(name)),
            counters.len(),
            COUNTER_EVENTS_MAX,
            "events",
        );
        walk_keys(
            counters,
            keep,
            limits,
            &|| format!("{}'s counter name", shown(name)),
            ROUTINE_NAME_MAX,
        );
    }
    if let Some(counters) = &mut r.counters {
        limits.cut(&|| "counter mode".into(), &mut counters.mode, NAME_MAX);
        let events = &mut counters.events;
        let keep = limits.count(
            &|| "counter events".into(),
            events.len(),
            COUNTER_EVENTS_MAX,
            "events",
        );
        events.truncate(keep);
        for event in events {
            limits.cut(
                &|| "a counter event's name".into(),
                &mut event.name,
                ROUTINE_NAME_MAX,
            );
            limits.cut_some(
                &|| "why a counter is unavailable".into(),
                &mut event.unavailable,
                TEXT_MAX,
            );
        }
    }
    if let Some(imbalance) = &mut r.imbalance {
        let series = &mut imbalance.series_ns;
        let keep = limits.count(
            &|| "imbalance series".into(),
            series.len(),
            SERIES_MAX,
            "points",
        );
        series.truncate(keep);
        let partitions = &mut imbalance.partitions;
        let keep = limits.count(
            &|| "MPMD partitions".into(),
            partitions.len(),
            PARTITIONS_MAX,
            "partitions",
        );
        partitions.truncate(keep);
        limits.cut_some(
            &|| "why estimates are unavailable".into(),
            &mut imbalance.unavailable,
            TEXT_MAX,
        );
    }
    if let Some(trace) = &mut r.trace {
        limits.cut(&|| "trace directory".into(), &mut trace.dir, PATH_MAX);
        limits.cut(&|| "trace reason".into(), &mut trace.reason, NAME_MAX);
        limits.cut_some(
            &|| "where tracing stopped".into(),
            &mut trace.stopped,
            TEXT_MAX,
        );
    }
    if let Some(slurm) = &mut r.slurm {
        limits.cut(&|| "Slurm job id".into(), &mut slurm.job_id, NAME_MAX);
        for (what, value) in [
            ("Slurm step id", &mut slurm.step_id),
            ("Slurm array job id", &mut slurm.array_job_id),
            ("Slurm array task id", &mut slurm.array_task_id),
            ("Slurm job name", &mut slurm.job_name),
            ("Slurm cluster", &mut slurm.cluster),
            ("Slurm account", &mut slurm.account),
            ("Slurm partition", &mut slurm.partition),
            ("Slurm QOS", &mut slurm.qos),
        ] {
            limits.cut_some(&|| what.into(), value, NAME_MAX);
        }
        limits.cut_some(&|| "Slurm node list".into(), &mut slurm.node_list, PATH_MAX);
        limits.cut_some(
            &|| "Slurm CPUs per node".into(),
            &mut slurm.cpus_per_node,
            TEXT_MAX,
        );
    }
}

/// The first `keep` entries of `map`, each key cut to `max` (the map is made again only when
/// something changes).
fn walk_keys<V>(
    map: &mut BTreeMap<String, V>,
    keep: usize,
    limits: &mut impl Limits,
    what: What<'_>,
    max: usize,
) {
    if keep == map.len() && map.keys().all(|key| key.len() <= max) {
        return;
    }
    // A loop, not a collect: that was generic code of its own in the profiler (keys equal once
    // cut keep the last value, as a collect into a map does).
    let mut kept = BTreeMap::new();
    for (mut key, value) in std::mem::take(map).into_iter().take(keep) {
        limits.cut(what, &mut key, max);
        kept.insert(key, value);
    }
    *map = kept;
}

/// The environment's limits: each name and value, how many, and how many bytes in all. Cut,
/// the variables that do not fit are left out (the first ones by name are kept) and counted in
/// one entry [`ENV_MORE_KEY`].
fn walk_env(env: &mut BTreeMap<String, String>, limits: &mut impl Limits) {
    let what = || "an environment variable's name".to_string();
    walk_keys(env, env.len(), limits, &what, NAME_MAX);
    for (name, value) in env.iter_mut() {
        limits.cut(
            &|| format!("environment value {}", shown(name)),
            value,
            ENV_VALUE_MAX,
        );
    }
    let bytes = env
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    let keep = limits.count(
        &|| "environment".into(),
        env.len(),
        ENV_ENTRIES_MAX,
        "variables",
    );
    let keep_bytes = limits.count(&|| "environment".into(), bytes, ENV_BYTES_MAX, "bytes");
    if keep == env.len() && keep_bytes == bytes {
        return;
    }
    // Room for the entry that counts the others (its value is at most 32 bytes).
    let room = ENV_BYTES_MAX - ENV_MORE_KEY.len() - 32;
    let mut kept = BTreeMap::new();
    let mut used = 0;
    let mut left_out = 0;
    for (name, value) in std::mem::take(env) {
        let size = name.len() + value.len();
        if kept.len() + 1 < ENV_ENTRIES_MAX && used + size <= room {
            used += size;
            kept.insert(name, value);
        } else {
            left_out += 1;
        }
    }
    kept.insert(
        ENV_MORE_KEY.to_string(),
        format!("{left_out} more not recorded"),
    );
    *env = kept;
}
