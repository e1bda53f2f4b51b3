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

use crate::db::{deflated_record, inflated_record, JobRow, Rejected};
use mpistat_record::{JobIndex, JobRecord};
use rusqlite::{params, Transaction};

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
    tx: &Transaction,
    jobs: Vec<JobRow>,
    now_ms: u64,
) -> anyhow::Result<(Vec<JobRow>, bool, u64)> {
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
        let held = tx.execute(
            "INSERT OR IGNORE INTO partial_inbox
                 (end_ms, key, half, uid, look, record, state, held_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'held', ?7)",
            params![
                record.end_unix_ms,
                job.key,
                half.name(),
                record.uid,
                job.look,
                job.deflated,
                now_ms
            ],
        )?;
        if held == 0 {
            // Read before, or another record under its key and end.
            let stored: Vec<u8> = tx
                .prepare_cached("SELECT record FROM partial_inbox WHERE end_ms = ?1 AND key = ?2")?
                .query_row(params![record.end_unix_ms, job.key], |row| row.get(0))?;
            if let Some(collision) = job.collision((stored, job.origin.clone())) {
                reject(tx, &collision)?;
                rejected += 1;
            }
            continue;
        }
        if let Some((end_ms, key, other, look)) = other_half(tx, half, &record, "held")? {
            for (end_ms, key) in [(record.end_unix_ms, &job.key), (end_ms, &key)] {
                mark(tx, end_ms, key, "merged")?;
            }
            let look = look || job.look;
            store.push(match half {
                Half::Abort => merged(&record, &other, look),
                Half::Stopped => merged(&other, &record, look),
            });
        } else if let Some((_, twin, ..)) = other_half(tx, half, &record, "stored")? {
            mark(tx, record.end_unix_ms, &job.key, "late")?;
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
            reject(tx, &late)?;
            rejected += 1;
        }
    }
    Ok((store, sorted, rejected))
}

/// Add `rejected` to the rejected entries (once: the same entry again is ignored).
fn reject(tx: &Transaction, rejected: &Rejected) -> anyhow::Result<()> {
    crate::db::insert_rejected(tx, rejected)
}

/// Mark the row (`end_ms`, `key`) of `partial_inbox` as in `state`.
fn mark(tx: &Transaction, end_ms: u64, key: &str, state: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE partial_inbox SET state = ?3 WHERE end_ms = ?1 AND key = ?2")?
        .execute(params![end_ms, key, state])?;
    Ok(())
}

/// [`other_half`]'s statement (by the index `partial_inbox_held`, in its order).
const OTHER_HALF: &str = "SELECT end_ms, key, record, look FROM partial_inbox
     WHERE state = ?5 AND uid = ?1 AND half = ?2 AND end_ms BETWEEN ?3 AND ?4
     ORDER BY end_ms, key";

/// The other half of `record` (a `half`) among the rows in `state` (`held`, or `stored`
/// alone): its end, key, record and whether it is to be looked at; the first to end of those
/// that [`pair`] with it.
fn other_half(
    tx: &Transaction,
    half: Half,
    record: &JobRecord,
    state: &str,
) -> anyhow::Result<Option<(u64, String, JobRecord, bool)>> {
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
    let mut stmt = tx.prepare_cached(OTHER_HALF)?;
    let mut rows = stmt.query(params![record.uid, half.other().name(), from, to, state])?;
    while let Some(row) = rows.next()? {
        let deflated: Vec<u8> = row.get(2)?;
        let other = inflated_record(&deflated)?;
        let paired = match half {
            Half::Abort => pair(record, &other),
            Half::Stopped => pair(&other, record),
        };
        if paired {
            return Ok(Some((row.get(0)?, row.get(1)?, other, row.get(3)?)));
        }
    }
    Ok(None)
}

/// [`lone`]'s statement: the held rows only (by the index `partial_inbox_held`: the other
/// states are kept for good, and only grow).
const LONE: &str =
    "UPDATE partial_inbox SET state = 'stored' WHERE state = 'held' AND held_ms <= ?1
     RETURNING key, record, look";

/// The held halves that were held at `held_to_ms` or before (still alone after the grace
/// period), marked stored, as jobs to store alone.
pub fn lone(tx: &Transaction, held_to_ms: u64) -> anyhow::Result<Vec<JobRow>> {
    let mut stmt = tx.prepare(LONE)?;
    let rows = stmt.query_map([held_to_ms], |row| {
        Ok((row.get::<_, String>(0)?, row.get(1)?, row.get(2)?))
    })?;
    let mut jobs = Vec::new();
    for row in rows {
        let (key, deflated, look): (String, Vec<u8>, bool) = row?;
        let record = inflated_record(&deflated)?;
        jobs.push(JobRow {
            key,
            origin: None,
            source: "partial_inbox".into(),
            index: JobIndex::of(&record),
            deflated,
            look,
            counted: true,
            unusable: None,
        });
    }
    // RETURNING gives no order: store them in the order they ended.
    jobs.sort_by(|a, b| (a.index.end_unix_ms, &a.key).cmp(&(b.index.end_unix_ms, &b.key)));
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Database;

    /// The inbox is looked up by its index `partial_inbox_held`, never read whole (its merged,
    /// stored and late rows are kept for good), and a half's candidates come in the index's
    /// order.
    #[test]
    fn the_inbox_is_read_by_its_index() {
        let db = Database::open(std::path::Path::new(":memory:")).unwrap();
        let plan = |query: &str, params: &[&dyn rusqlite::ToSql]| -> Vec<String> {
            let mut stmt = db
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {query}"))
                .unwrap();
            let rows = stmt.query_map(params, |row| row.get(3)).unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        let lone = plan(LONE, &[&0]);
        assert!(
            lone.iter()
                .any(|step| step.contains("USING INDEX partial_inbox_held (state=?)")),
            "{lone:?}"
        );
        let other = plan(OTHER_HALF, &[&0, &"abort", &0, &0, &"stored"]);
        assert!(
            other.iter().any(|step| step.contains(
                "USING INDEX partial_inbox_held (state=? AND uid=? AND end_ms>? AND end_ms<?)"
            )) && !other.iter().any(|step| step.contains("TEMP B-TREE")),
            "{other:?}"
        );
    }

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
