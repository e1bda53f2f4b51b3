//! One job, not two, when `MPI_Abort` ran on another node than rank 0: the aborting rank writes
//! a partial record ("MPI_Abort ... on rank R") and rank 0, stopped by its launcher, one of its
//! own ("SIGTERM from the launcher ..."), under different keys (and outside Slurm different job
//! ids). Counted, the job would be two; rollups cannot take a job back, so the two are made one
//! before either is stored. The writer holds every such record of a job on several nodes in
//! `partial_inbox` ([`sort_out`]), noting when (`held_ms`, by the ingest run's clock), and, in
//! the same transaction, looks for its other half there: when it is held there, the two are
//! stored as one job, rank 0's record with the abort's reason ([`merged`]), whichever came
//! first. A half held for the site's `ingest.partial_grace_seconds` and still alone is stored as
//! it is at the end of an ingest run ([`lone`]). The grace counts from the hold, not from the
//! job's end: an ingest running late (a syslog backlog, a stopped daemon, `mpistat ingest` of
//! an old file) reads both halves long after the job ended, possibly in two runs, and they
//! still meet. (Rows held by a schema before `held_ms` wait from their end, as they did.)
//!
//! A half whose other half was stored alone before it came (its run came more than the grace
//! after the twin's) is *late*: it is not stored (the twin already counts the job, in the jobs
//! and the rollups, which cannot take a job back) and its row stays in `partial_inbox` as
//! `late`, the record as it came, so nothing is lost. The stored job stays as it was stored:
//! the aborting rank's record (its key, figures and reason, "MPI_Abort ... on rank R", without
//! the host) when the abort came first, rank 0's ("SIGTERM from the launcher ...") when rank
//! 0's did; no job row nor rollup is rewritten, and the late half's escalation flag is not
//! looked at (the stored half's was). A held twin is preferred to a stored one. A stored half
//! may take several late ones (two ranks that aborted on two nodes).
//!
//! Held rows stay, marked `merged`, `stored` or `late`, so that reading a record again stores
//! nothing.

use mpistat_record::{JobIndex, JobRecord};
use mpistat_store::partials::{HalfState, HeldHalf};
use mpistat_store::{deflated_record, inflated_record, JobRow, Rejected, WriteTx};

/// The two halves of a job whose rank `R > 0` called `MPI_Abort` on another node than rank 0's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    /// The aborting rank's record.
    Abort,
    /// Rank 0's, stopped by its launcher.
    Stopped,
}

impl Half {
    fn name(self) -> &'static str {
        match self {
            Half::Abort => "abort",
            Half::Stopped => "stopped",
        }
    }

    fn other(self) -> Half {
        match self {
            Half::Abort => Half::Stopped,
            Half::Stopped => Half::Abort,
        }
    }
}

/// Which half of a job the partial record `partial` may be (the profiler's reasons, see
/// `profiler/src/hooks.rs`).
fn half_of(partial: &str) -> Option<Half> {
    if partial.starts_with("SIGTERM from the launcher") {
        return Some(Half::Stopped);
    }
    let (_, rank) = partial
        .strip_prefix("MPI_Abort ")?
        .rsplit_once(" on rank ")?;
    (rank.parse::<u32>().ok()? > 0).then_some(Half::Abort)
}

/// Longest time between the two halves' starts.
const START_MS: u64 = 60_000;
/// How long before the abort's end rank 0's may end (clocks of two nodes) ...
const STOPPED_BEFORE_MS: u64 = 5_000;
/// ... and after it (the launcher stops rank 0 when it learns of the abort).
const STOPPED_AFTER_MS: u64 = 120_000;

/// Whether `abort` and `stopped` are the two halves of one job: the same user, application and
/// size, on different hosts, started within [`START_MS`], rank 0's end from
/// [`STOPPED_BEFORE_MS`] before the abort's to [`STOPPED_AFTER_MS`] after, and the same Slurm
/// job when both know theirs.
fn pair(abort: &JobRecord, stopped: &JobRecord) -> bool {
    let slurm_job = |r: &JobRecord| r.slurm.as_ref().map(|s| s.job_id.clone());
    abort.uid == stopped.uid
        && abort.user == stopped.user
        && abort.application() == stopped.application()
        && abort.ranks == stopped.ranks
        && abort.host != stopped.host
        && abort.start_unix_ms.abs_diff(stopped.start_unix_ms) <= START_MS
        && stopped.end_unix_ms + STOPPED_BEFORE_MS >= abort.end_unix_ms
        && stopped.end_unix_ms <= abort.end_unix_ms + STOPPED_AFTER_MS
        && match (slurm_job(abort), slurm_job(stopped)) {
            (Some(a), Some(s)) => a == s,
            _ => true,
        }
}

/// The one job of two halves: rank 0's record (key, end, figures) whose reason is the abort's,
/// with the aborting rank's host; the host list, ranks per node and Slurm facts of whichever
/// has them. `look`: either half is to be looked at by the escalation rules.
fn merged(abort: &JobRecord, stopped: &JobRecord, look: bool) -> JobRow {
    let mut job = stopped.clone();
    job.partial = abort
        .partial
        .as_ref()
        .map(|reason| format!("{reason} on {}", abort.host));
    job.nodes = job.nodes.max(abort.nodes);
    if job.host_list.is_empty() {
        job.host_list.clone_from(&abort.host_list);
    }
    if job.ranks_per_node.is_none() {
        job.ranks_per_node = abort.ranks_per_node;
    }
    if job.slurm.is_none() {
        job.slurm.clone_from(&abort.slurm);
    }
    JobRow {
        key: job.key(),
        origin: None,
        source: "partial_inbox".into(),
        index: JobIndex::of(&job),
        deflated: deflated_record(&job),
        look,
        // A partial record never meets the rule.
        meets_rule: false,
        counted: true,
        unusable: None,
    }
}

/// The jobs of a batch to store now, in their order: every job that is no half of a job on
/// several nodes as it is, and for a half whose other half is held, the two as one; the other
/// halves are held (a half read before is dropped, a late one kept unstored). Also whether any
/// job was held or merged (then the batch's rollups do not count what is stored). Every job
/// here was decoded (its record is the one filed).
///
/// A held row notes `now_ms` (the ingest run's clock) as when it was held; a half whose other
/// half was stored alone is kept as `late` instead (module doc), and a rejected entry says so.
/// A half held before under the same key and end that is not this record is rejected as a
/// collision ([`JobRow::collision`]). Also returns how many records were rejected so.
pub fn sort_out(
    tx: &WriteTx<'_>,
    jobs: Vec<JobRow>,
    now_ms: u64,
) -> Result<(Vec<JobRow>, bool, u64), crate::Error> {
    let mut store = Vec::with_capacity(jobs.len());
    let mut sorted = false;
    let mut rejected = 0;
    for job in jobs {
        let Some(half) = job.index.partial.as_deref().and_then(half_of) else {
            store.push(job);
            continue;
        };
        let record = inflated_record(&job.deflated)?;
        if record.nodes < 2 {
            store.push(job);
            continue;
        }
        sorted = true;
        let holding = HeldHalf {
            end_ms: record.end_unix_ms,
            key: job.key.clone(),
            deflated: job.deflated.clone(),
            look: job.look,
        };
        if !tx.hold_half(&holding, half.name(), record.uid, now_ms)? {
            // Read before, or another record under its key and end.
            let stored = tx.held_record(record.end_unix_ms, &job.key)?;
            if let Some(collision) = job.collision((stored, job.origin.clone())) {
                tx.insert_rejected(&collision)?;
                rejected += 1;
            }
            continue;
        }
        if let Some((end_ms, key, other, look)) = other_half(tx, half, &record, HalfState::Held)? {
            for (end_ms, key) in [(record.end_unix_ms, &job.key), (end_ms, &key)] {
                tx.mark_half(end_ms, key, HalfState::Merged)?;
            }
            let look = look || job.look;
            store.push(match half {
                Half::Abort => merged(&record, &other, look),
                Half::Stopped => merged(&other, &record, look),
            });
        } else if let Some((_, twin, ..)) = other_half(tx, half, &record, HalfState::Stored)? {
            tx.mark_half(record.end_unix_ms, &job.key, HalfState::Late)?;
            let late = Rejected {
                kind: "late",
                reference: job.key.clone(),
                source: job.source.to_string(),
                detail: format!(
                    "job {} of uid {} ({}): a half of a job whose MPI_Abort ran on another \
                     node, which came after its other half ({twin}) was stored alone; that one \
                     counts the job, this one is kept in partial_inbox",
                    record.job_id, record.uid, record.user
                ),
                line: None,
            };
            tx.insert_rejected(&late)?;
            rejected += 1;
        }
    }
    Ok((store, sorted, rejected))
}

/// The other half of `record` (a `half`) among the rows in `state` (`held`, or `stored`
/// alone): its end, key, record and whether it is to be looked at; the first to end of those
/// that [`pair`] with it.
fn other_half(
    tx: &WriteTx<'_>,
    half: Half,
    record: &JobRecord,
    state: HalfState,
) -> Result<Option<(u64, String, JobRecord, bool)>, crate::Error> {
    let end = record.end_unix_ms;
    let (from, to) = match half {
        Half::Abort => (
            end.saturating_sub(STOPPED_BEFORE_MS),
            end + STOPPED_AFTER_MS,
        ),
        Half::Stopped => (
            end.saturating_sub(STOPPED_AFTER_MS),
            end + STOPPED_BEFORE_MS,
        ),
    };
    let mut found = None;
    tx.find_half(
        (record.uid, half.other().name()),
        (from, to),
        state,
        |candidate| {
            let other = inflated_record(&candidate.deflated)?;
            let paired = match half {
                Half::Abort => pair(record, &other),
                Half::Stopped => pair(&other, record),
            };
            if paired {
                found = Some((candidate.end_ms, candidate.key, other, candidate.look));
            }
            Ok(paired)
        },
    )?;
    Ok(found)
}

/// The held halves that were held at `held_to_ms` or before (still alone after the grace
/// period), marked stored, as jobs to store alone.
pub fn lone(tx: &WriteTx<'_>, held_to_ms: u64) -> Result<Vec<JobRow>, crate::Error> {
    let mut jobs = Vec::new();
    for half in tx.take_lone_halves(held_to_ms)? {
        let record = inflated_record(&half.deflated)?;
        jobs.push(JobRow {
            key: half.key,
            origin: None,
            source: "partial_inbox".into(),
            index: JobIndex::of(&record),
            deflated: half.deflated,
            look: half.look,
            meets_rule: false,
            counted: true,
            unusable: None,
        });
    }
    // They come in no order: store them in the order they ended.
    jobs.sort_by(|a, b| (a.index.end_unix_ms, &a.key).cmp(&(b.index.end_unix_ms, &b.key)));
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn halves_are_known_by_their_reasons() {
        assert_eq!(
            half_of("MPI_Abort (errorcode 3) on rank 1"),
            Some(Half::Abort)
        );
        assert_eq!(half_of("MPI_Abort (errorcode 3) on rank 0"), None);
        assert_eq!(
            half_of("SIGTERM from the launcher: another rank ended early"),
            Some(Half::Stopped)
        );
        assert_eq!(half_of("exit without MPI_Finalize"), None);
        // A merged job's reason is no half.
        assert_eq!(half_of("MPI_Abort (errorcode 3) on rank 1 on nodeb"), None);
    }
}
