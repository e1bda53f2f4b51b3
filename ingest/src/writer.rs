//! The database side of an ingest run, on a thread of its own: every batch the reading thread
//! makes (jobs, analyses, rejected entries, the position of every file, and the rollups of its
//! jobs) is committed in one transaction, in the order the batches were made, while the next
//! batch is being read. Nothing else about the crash-safety design changes: a batch is
//! committed whole or not at all. The two partial records of a job whose `MPI_Abort` ran on
//! another node than rank 0 are stored as one job ([`partials`]).

use crate::partials;
use mpistat_figures::rollup::{count_in_rebuild, Rollups};
use mpistat_site::SiteReportConfig;
use mpistat_store::rollups::Tables;
use mpistat_store::{
    inflated_record, Inserted, JobRow, Position, Received, Rejected, WriteStore, WriteTx,
};
use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What one transaction writes.
pub struct Batch {
    pub jobs: Vec<JobRow>,
    /// The rollups of the jobs whose records were read ([`JobRow::counted`]), made by the
    /// reading side as they came, so that a batch holds no decoded record.
    pub rollups: Rollups,
    /// `rollups` count a job that is not in `jobs` (rejected on the reading side): they are to
    /// be made again from the jobs.
    pub recount: bool,
    /// Analysis records whose sender may have sent them.
    pub analyses: Vec<Received>,
    pub rejected: Vec<Rejected>,
    /// Every file read in this run (by its number in the run), its position and name.
    pub positions: Vec<(usize, Position, String)>,
    /// The time of the last line read whose time is rsyslog's, if any (unix ms).
    pub newest_line_ms: Option<u64>,
}

/// What the writer did: jobs stored for the first time, and records rejected here (another
/// record of their job was stored before, [`JobRow::collision`]; or a half of a job that came
/// after its twin was stored alone, [`partials`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub new_jobs: u64,
    pub rejected: u64,
}

/// Commit the batches from `inbox` until it is closed; returns what it did ([`Written`]). Jobs
/// marked for the escalation rules ([`JobRow::look`]) are queued for them if they are new.
/// `incomplete` is the set of keys the database reports as incomplete: inserting one of those
/// jobs withdraws the report (a lookup here rather than a delete statement for every job).
/// The halves of a job whose `MPI_Abort` ran on another node than rank 0 are held and stored
/// as one job ([`partials::sort_out`]); after the last batch, the halves held alone for
/// `partial_grace` or longer (since they were held, by this clock) are stored as they are
/// ([`partials::lone`]). The jobs are stored and
/// counted by [`store`].
pub fn write(
    db: &mut WriteStore,
    inbox: Receiver<Batch>,
    mut incomplete: HashSet<String>,
    mut checkpoints: Option<Checkpoints>,
    critical: &SiteReportConfig,
    partial_grace: Duration,
) -> Result<Written, crate::Error> {
    let mut written = Written::default();
    // Position rows made in this run, by file number.
    let mut ids: HashMap<usize, i64> = HashMap::new();
    for batch in inbox {
        if let Some(checkpoints) = &mut checkpoints {
            checkpoints.before_transaction();
        }
        let tx = db.transaction()?;
        for rejected in &batch.rejected {
            tx.insert_rejected(rejected)?;
            if rejected.kind == "incomplete" {
                incomplete.insert(rejected.reference.clone());
            }
        }
        for analysis in &batch.analyses {
            tx.insert_analysis(analysis)?;
        }
        for job in &batch.jobs {
            // Mostly empty: then no job's key need be hashed.
            if !incomplete.is_empty() && incomplete.remove(&job.wire_key()) {
                tx.clear_incomplete(&job.wire_key())?;
            }
        }
        let (jobs, sorted, late) = partials::sort_out(&tx, batch.jobs, now_ms())?;
        let rollups = (!batch.recount && !sorted).then_some(batch.rollups);
        written.rejected += late;
        store(&tx, &jobs, rollups, critical, &mut written)?;
        for (file, mut position, path) in batch.positions {
            if let Some(id) = ids.get(&file) {
                position.id = *id;
            }
            ids.insert(file, tx.save_position(&position, &path)?);
        }
        if let Some(line_ms) = batch.newest_line_ms {
            tx.note_newest_line(line_ms)?;
        }
        tx.commit()?;
        if let Some(checkpoints) = &mut checkpoints {
            checkpoints.committed();
        }
    }
    let tx = db.transaction()?;
    let held_to_ms = now_ms().saturating_sub(partial_grace.as_millis() as u64);
    let lone = partials::lone(&tx, held_to_ms)?;
    if !lone.is_empty() {
        store(&tx, &lone, None, critical, &mut written)?;
        tx.commit()?;
    }
    Ok(written)
}

/// The ingest run's clock, in milliseconds since the epoch: when the partial inbox held a row,
/// and the latest a line's time may be.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Store `jobs` and count the new ones in the rollups, adding to `written` how many were new
/// and how many were rejected (another record of the job stored before: [`JobRow::collision`],
/// with a rejected entry; the same record stored before is neither). `rollups`
/// count every job of `jobs` whose record was read ([`JobRow::counted`]); they are added to the
/// stored ones when those jobs are all new (the usual case). Otherwise (some counted job was
/// stored before: a file read again, a job sent twice; or none given) the rollups of the new
/// ones are made again from their deflated records (`critical`: the thresholds of the critical
/// list). A rebuild of the rollups under way (or interrupted) gets the new jobs that ended
/// before where it has got to ([`count_in_rebuild`]).
fn store(
    tx: &WriteTx<'_>,
    jobs: &[JobRow],
    rollups: Option<Rollups>,
    critical: &SiteReportConfig,
    written: &mut Written,
) -> Result<(), crate::Error> {
    // Whether each job was new.
    let mut new = Vec::with_capacity(jobs.len());
    for inserted in tx.insert_jobs(jobs)? {
        if let Inserted::Collision(rejected) = &inserted {
            tx.insert_rejected(rejected)?;
            written.rejected += 1;
        }
        new.push(matches!(inserted, Inserted::New));
    }
    // The counted jobs, and whether each was new.
    let counted = || jobs.iter().zip(&new).filter(|(job, _)| job.counted);
    match rollups {
        Some(rollups) if counted().all(|(_, new)| *new) => rollups.save(tx, Tables::Live)?,
        _ => {
            let mut rollups = Rollups::new(critical);
            for (job, _) in counted().filter(|(_, new)| **new) {
                rollups.add(&inflated_record(&job.deflated)?);
            }
            rollups.save(tx, Tables::Live)?;
        }
    }
    count_in_rebuild(
        tx,
        counted().filter(|(_, new)| **new).map(|(job, _)| job),
        critical,
    )?;
    written.new_jobs += new.iter().filter(|new| **new).count() as u64;
    Ok(())
}

/// Commits between two waits for the checkpointer (see [`Checkpoints::before_transaction`]).
const COMMITS_PER_WAL: usize = 4;

/// The writer's side of the checkpointer thread ([`mpistat_store::Checkpointer`]).
pub struct Checkpoints {
    /// To the checkpointer: a commit happened (at most one waiting: they add up).
    requests: SyncSender<()>,
    /// From the checkpointer: a checkpoint is done.
    done: Receiver<()>,
    /// Requests whose checkpoint is not done yet.
    outstanding: usize,
    commits: usize,
}

impl Checkpoints {
    pub fn new(requests: SyncSender<()>, done: Receiver<()>) -> Checkpoints {
        Checkpoints {
            requests,
            done,
            outstanding: 0,
            commits: 0,
        }
    }

    fn committed(&mut self) {
        self.commits += 1;
        // Full: the checkpointer has not started on the last request, and will see this commit.
        if self.requests.try_send(()).is_ok() {
            self.outstanding += 1;
        }
    }

    /// A transaction that starts when the checkpointer has copied everything starts the WAL
    /// again from its beginning. Without that the WAL only grows while commits follow each
    /// other, to the size of everything ingested: so after [`COMMITS_PER_WAL`] commits without
    /// such a moment, wait for one.
    fn before_transaction(&mut self) {
        while self.outstanding > 0 && self.done.try_recv().is_ok() {
            self.outstanding -= 1;
        }
        if self.outstanding > 0 && self.commits >= COMMITS_PER_WAL {
            while self.outstanding > 0 && self.done.recv().is_ok() {
                self.outstanding -= 1;
            }
        }
        if self.outstanding == 0 {
            self.commits = 0;
        }
    }
}
