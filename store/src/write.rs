//! The write handle: creating and migrating the database, ingest's transactions, the
//! escalation's and the mails' bookkeeping, and the quarantine of unusable records.

use crate::db::{Begin, Db, Dialect};
use crate::read::{schema_version, CACHE_KIB};
use crate::rows::INDEX_COLUMNS;
use crate::{
    postgresql, Error, FiledJob, Inserted, JobRow, Location, Position, Quarantined, ReadStore,
    Received, Rejected, Result, MIGRATIONS,
};
use mpistat_record::model::stored_key;
use mpistat_record::{AnalysisRecord, JobIndex};
use postgres::types::Type;
use rusqlite::{params, Connection, OpenFlags};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};

/// Page size of a new database (an existing one keeps its own).
const PAGE_SIZE: u32 = 65_536;

/// SQLite's default `wal_autocheckpoint` (pages), which the write handle has outside bulk
/// writes ([`WriteStore::start_bulk`]).
const DEFAULT_AUTOCHECKPOINT: u32 = 1000;

/// A database opened to write (ingest, escalation, mails, rollup rebuilds, `mpistat db
/// migrate`). Its reads are [`ReadStore`]'s (it derefs to one), which here move a job whose
/// stored record is not usable to the rejected entries.
pub struct WriteStore {
    reader: ReadStore,
    /// The `cache_size` before [`WriteStore::start_bulk`].
    cache_before_bulk: Option<i64>,
}

impl std::ops::Deref for WriteStore {
    type Target = ReadStore;

    fn deref(&self) -> &ReadStore {
        &self.reader
    }
}

/// How long an SQLite writer waits for another's transaction. Writers of several log hosts take
/// turns a batch at a time (up to ingest's `BATCH_LINES` jobs: over a minute under load at site
/// scale), so a waiter may wait for more than one; as PostgreSQL's writers wait on their advisory
/// lock, this wait ends only for a writer that hangs (readers keep `read::BUSY_TIMEOUT`). With
/// 30 s, three ingests of 10 million jobs at load 14 stopped with "database is locked" after a
/// million.
const WRITERS_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

impl WriteStore {
    /// Open the database at `path` (created if missing and `create`), without touching its
    /// schema (the caller makes the file private before, see the digest's `private`).
    fn open_unmigrated(path: &Path, create: bool) -> Result<WriteStore> {
        let opened = |e: rusqlite::Error| Error::Open {
            location: Location::Sqlite(path.to_path_buf()),
            reason: e.to_string(),
        };
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(path, flags).map_err(opened)?;
        // First, so that even switching to WAL waits for another process's transaction.
        conn.busy_timeout(WRITERS_WAIT).map_err(opened)?;
        // Before the database exists (no effect after): 64 KiB pages suit rows of a few kB
        // (records) and ingest's bulk appends: fewer pages to write, look up and sync.
        conn.pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(opened)?;
        // WAL: readers (digest) do not block the ingest; synchronous=NORMAL in WAL mode still
        // never corrupts the database, a crash loses at most the last commits (which ingest
        // redoes, as their positions are lost with them).
        // Switching a new database to WAL needs a moment alone with it, and SQLite answers
        // "busy" there without asking the busy handler: wait here as the handler would.
        let waited_since = std::time::Instant::now();
        loop {
            match conn.pragma_update(None, "journal_mode", "WAL") {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && waited_since.elapsed() < WRITERS_WAIT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                result => break result.map_err(opened)?,
            }
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(opened)?;
        conn.pragma_update(None, "cache_size", -CACHE_KIB)
            .map_err(opened)?;
        Ok(WriteStore::of(Db::sqlite(conn)))
    }

    fn of(db: Db) -> WriteStore {
        WriteStore {
            reader: ReadStore::of(db, true),
            cache_before_bulk: None,
        }
    }

    /// Open the database at `location` and bring its schema up to date: [`WriteStore::open`]
    /// for a SQLite file; a PostgreSQL database is migrated ([`postgresql::migrate`]) first.
    pub fn open_at(location: &Location) -> Result<WriteStore> {
        match location {
            Location::Sqlite(path) => WriteStore::open(path),
            Location::Postgres(url) => {
                postgresql::migrate(url)?;
                WriteStore::open_current_at(location)
            }
        }
    }

    /// Open the database at `location`, which must have this mpistat's schema
    /// ([`WriteStore::open_current`]).
    pub fn open_current_at(location: &Location) -> Result<WriteStore> {
        match location {
            Location::Sqlite(path) => WriteStore::open_current(path),
            Location::Postgres(url) => Ok(WriteStore::of(Db::postgres(
                url.clone(),
                postgresql::connect_current(url)?,
            ))),
        }
    }

    /// Open (creating if needed) the database at `path` and bring its schema up to date
    /// ([`WriteStore::migrate`]).
    pub fn open(path: &Path) -> Result<WriteStore> {
        let mut store = WriteStore::open_unmigrated(path, true)?;
        store.migrate()?;
        Ok(store)
    }

    /// Open the database at `path`, which must exist and have this mpistat's schema (a command
    /// that writes but does not upgrade: the mails' bookkeeping, `rebuild-rollups`).
    pub fn open_current(path: &Path) -> Result<WriteStore> {
        let store = WriteStore::open_unmigrated(path, false)?;
        let found = schema_version(store.db.sqlite_conn()?)?;
        Error::unless_current(found, MIGRATIONS.len(), || {
            Location::Sqlite(path.to_path_buf())
        })?;
        Ok(store)
    }

    /// A database in memory with the current schema.
    #[cfg(test)]
    pub(crate) fn in_memory() -> Result<WriteStore> {
        WriteStore::open(Path::new(":memory:"))
    }

    /// Apply the migrations this database has not had yet; returns how many ran. The only
    /// place the schema changes.
    pub fn migrate(&mut self) -> Result<usize> {
        let conn = match &self.reader.db {
            Db::Sqlite(conn) => conn,
            Db::Postgres(pg) => return postgresql::migrate(&pg.url),
        };
        let path = self.path().unwrap_or_else(|| PathBuf::from(":memory:"));
        let failed = |e: rusqlite::Error| Error::Migration {
            location: Location::Sqlite(path.clone()),
            reason: e.to_string(),
        };
        // Up to date: write nothing, so opening never competes for the write lock.
        if schema_version(conn).map_err(failed)? == MIGRATIONS.len() {
            return Ok(0);
        }
        // Immediate: take the write lock first (waiting up to the busy timeout). A deferred
        // transaction that reads and then writes fails at once if another process wrote in
        // between (WAL snapshot conflict), which made two processes opening one new database
        // at the same moment fail.
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
                .map_err(failed)?;
        let done = schema_version(&tx).map_err(failed)?;
        if done > MIGRATIONS.len() {
            return Err(Error::NewerSchema {
                found: done,
                known: MIGRATIONS.len(),
            });
        }
        for migration in &MIGRATIONS[done..] {
            tx.execute_batch(migration).map_err(failed)?;
        }
        tx.pragma_update(None, "user_version", MIGRATIONS.len())
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
        Ok(MIGRATIONS.len() - done)
    }

    /// A transaction that holds the write lock from its start (waiting for it up to the busy
    /// timeout): a batch may read before it writes (the partial inbox, a rebuild's progress),
    /// and a deferred transaction that read fails at once, without waiting, when another
    /// process (a rollup rebuild's step) committed in between (WAL snapshot conflict).
    /// Committed by [`WriteTx::commit`], rolled back if dropped.
    pub fn transaction(&mut self) -> Result<WriteTx<'_>> {
        WriteTx::begin(&self.reader)
    }

    /// Run `work` in a write transaction ([`WriteStore::transaction`]) on a shared handle:
    /// committed if it returns `Ok`, rolled back if not.
    pub fn in_transaction<T, E: From<Error>>(
        &self,
        work: impl FnOnce(&WriteTx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let tx = WriteTx::begin(&self.reader)?;
        let done = work(&tx)?;
        tx.commit()?;
        Ok(done)
    }

    /// Read and save the read positions of log host `host`'s files (by default this machine's
    /// name): several ingests into one database, one per log host, each resume their own.
    pub fn set_position_host(&mut self, host: &str) {
        self.reader.position_host = host.to_owned();
    }

    /// Bulk writes (an ingest run) from here to [`WriteStore::end_bulk`]: a bigger page cache
    /// (`cache_kib`), and a file database is checkpointed by the returned [`Checkpointer`] on a
    /// thread of the caller's instead of by the commits themselves. Nothing on PostgreSQL
    /// (the server has its own cache and checkpoints).
    pub fn start_bulk(&mut self, cache_kib: i64) -> Result<Option<Checkpointer>> {
        let Db::Sqlite(conn) = &self.reader.db else {
            return Ok(None);
        };
        let cache: i64 = conn.query_row("PRAGMA cache_size", [], |row| row.get(0))?;
        self.cache_before_bulk = Some(cache);
        conn.pragma_update(None, "cache_size", -cache_kib)?;
        let path = self.reader.path();
        if path.is_some() {
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        }
        Ok(path.map(|path| Checkpointer { path }))
    }

    /// The end of bulk writes ([`WriteStore::start_bulk`]).
    pub fn end_bulk(&mut self) -> Result<()> {
        let Db::Sqlite(conn) = &self.reader.db else {
            return Ok(());
        };
        if self.reader.path().is_some() {
            conn.pragma_update(None, "wal_autocheckpoint", DEFAULT_AUTOCHECKPOINT)?;
        }
        if let Some(cache) = self.cache_before_bulk.take() {
            conn.pragma_update(None, "cache_size", cache)?;
        }
        Ok(())
    }

    /// Read every stored record: those that are not usable are moved to the rejected entries
    /// ([`ReadStore::take_quarantined`] says which). Returns how many records were read.
    pub fn quarantine_unusable(&self) -> Result<u64> {
        let mut read = 0;
        self.each_filed_job_ended_between(0, i64::MAX as u64, |_, _| read += 1)?;
        Ok(read)
    }

    /// Move a job whose stored record is not usable (`detail` says why) out of `jobs` into
    /// `rejected` as `corrupt` (so `mpistat ingest --report` shows it): its record is never
    /// used, and nobody is credited with the job.
    pub fn quarantine(&self, filed: &FiledJob, detail: &str) -> Quarantined {
        let index = &filed.index;
        quarantine(
            &self.reader.db,
            filed,
            format!(
                "job {} filed for uid {} ({}): {detail}",
                index.job_id, index.uid, index.user
            ),
        )
    }

    /// The escalation rules have looked at these jobs (and their traces are analysed, if any).
    /// On PostgreSQL in one statement (a busy site's run queues tens of thousands).
    pub fn unqueue(&self, ids: impl IntoIterator<Item = i64>) -> Result<()> {
        let db = &self.reader.db;
        if let Db::Postgres(pg) = db {
            let ids: Vec<i64> = ids.into_iter().collect();
            pg.query_arrays(
                "DELETE FROM escalation_queue WHERE id = ANY(?1::BIGINT[])",
                &[&ids],
            )?;
            return Ok(());
        }
        db.atomically(|| {
            for id in ids {
                db.execute("DELETE FROM escalation_queue WHERE id = ?1", &[&id])?;
            }
            Ok(())
        })
    }

    /// The job of `received` as filed (the last stored, should there be several): the job of
    /// the analysis' (attested) uid whose lines had the key its trace directory named
    /// ([`stored_key`]); only when that uid has none, another uid's job of that wire key (which
    /// the caller rejects: not the sender's). No record read, looked for only among the rows
    /// stored since it was last looked for (no index leads to a key, see [`ReadStore::job`]:
    /// this reads those rows). When there is none, the rows up to the last one now are marked
    /// as looked at.
    pub fn job_of_analysis(&self, received: &Received) -> Result<Option<FiledJob>> {
        let db = &self.reader.db;
        let last: i64 = db.query_one("SELECT coalesce(max(id), 0) FROM jobs", &[], |row| {
            row.get(0)
        })?;
        let found = db.query_opt(
            &format!(
                "SELECT {INDEX_COLUMNS} FROM jobs WHERE id > ?1 AND id <= ?2
                     AND key >= CAST(?3 AS TEXT) || '-' AND key < CAST(?3 AS TEXT) || '.'
                 ORDER BY key = ?4 DESC, jobs.id DESC LIMIT 1"
            ),
            params![
                received.looked_to,
                last,
                received.analysis.job_key,
                stored_key(&received.analysis.job_key, received.analysis.uid)
            ],
            FiledJob::from_row,
        )?;
        if found.is_none() {
            db.execute(
                "UPDATE analysis_inbox SET looked_to = ?1 WHERE key = ?2 AND uid = ?3",
                params![last, received.key, received.analysis.uid],
            )?;
        }
        Ok(found)
    }

    /// Store `analysis` as the analysis of the job filed as `job` (its summary, or why it
    /// failed), taking it out of the inbox.
    pub fn store_analysis(&self, job: &JobIndex, analysis: &AnalysisRecord) -> Result<()> {
        let status = if analysis.summary.is_some() {
            "ok"
        } else {
            "failed"
        };
        let db = &self.reader.db;
        db.atomically(|| {
            db.execute(
                r#"INSERT INTO analyses (key, "user", end_ms, job_id, app, dir, status, summary,
                 error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (key) DO UPDATE SET "user" = excluded."user",
                 end_ms = excluded.end_ms, job_id = excluded.job_id, app = excluded.app,
                 dir = excluded.dir, status = excluded.status, summary = excluded.summary,
                 error = excluded.error"#,
                params![
                    job.key(),
                    job.user,
                    job.end_unix_ms,
                    job.job_id,
                    job.application(),
                    analysis.dir,
                    status,
                    analysis.summary,
                    analysis
                        .error
                        .as_deref()
                        .or(analysis.summary.is_none().then_some("no summary"))
                ],
            )?;
            db.execute(
                "DELETE FROM analysis_inbox WHERE key = ?1 AND uid = ?2",
                params![analysis.key(), analysis.uid],
            )?;
            Ok(())
        })
    }

    /// Move `received` out of the inbox into `rejected` (`kind`, e.g. `forged`, and why).
    pub fn reject_analysis(&self, received: &Received, kind: &str, detail: &str) -> Result<()> {
        let db = &self.reader.db;
        db.atomically(|| {
            db.execute(
                "INSERT INTO rejected (kind, ref, source, detail, line)
             VALUES (?1, ?2, ?3, ?4, NULL) ON CONFLICT DO NOTHING",
                params![
                    kind,
                    format!("{}/uid {}", received.key, received.analysis.uid),
                    received.source,
                    format!(
                        "analysis of job {} sent by uid {}: {detail}",
                        received.analysis.job_key, received.analysis.uid
                    )
                ],
            )?;
            db.execute(
                "DELETE FROM analysis_inbox WHERE key = ?1 AND uid = ?2",
                params![received.key, received.analysis.uid],
            )?;
            Ok(())
        })
    }

    /// Record the outcome of one attempt to send (user, week)'s mail to `recipient`.
    pub fn record_mail(
        &self,
        user: &str,
        week: &str,
        recipient: &str,
        outcome: Result<(), &str>,
    ) -> Result<()> {
        let (status, error) = match outcome {
            Ok(()) => ("sent", None),
            Err(e) => ("failed", Some(e)),
        };
        self.reader.db.execute(
            r#"INSERT INTO mails ("user", week, status, attempts, error, recipient)
             VALUES (?1, ?2, ?3, 1, ?4, ?5)
             ON CONFLICT ("user", week) DO UPDATE SET status = excluded.status,
                 attempts = mails.attempts + 1, error = excluded.error,
                 recipient = excluded.recipient"#,
            params![user, week, status, error, recipient],
        )?;
        Ok(())
    }
}

/// Move the job `filed` out of `jobs` into `rejected` as `corrupt` (`detail`: which job and
/// why). All or nothing, also inside a caller's transaction (a rollup rebuild reads every job).
/// Returns what it did, for the caller to report.
pub(crate) fn quarantine(db: &Db, filed: &FiledJob, detail: String) -> Quarantined {
    let moved = db.atomically(|| {
        db.execute(
            "INSERT INTO rejected (kind, ref, source, detail, line)
             VALUES ('corrupt', ?1, 'database', ?2, NULL)
             ON CONFLICT (kind, ref) DO UPDATE SET source = excluded.source,
                 detail = excluded.detail, line = NULL",
            params![filed.key, detail],
        )?;
        db.execute("DELETE FROM jobs WHERE id = ?1", &[&filed.id])?;
        db.execute("DELETE FROM escalation_queue WHERE id = ?1", &[&filed.id])?;
        Ok(())
    });
    match moved {
        Ok(()) => Quarantined::Moved { detail },
        Err(e) => Quarantined::Skipped {
            detail,
            error: e.to_string(),
        },
    }
}

/// Checkpoints a database during bulk writes ([`WriteStore::start_bulk`]).
pub struct Checkpointer {
    path: PathBuf,
}

impl Checkpointer {
    /// Checkpoint the database (copy the WAL's pages into the database file, and sync both)
    /// after every commit signalled on `commits`, and once more when they end, from a
    /// connection of its own: the writer does not checkpoint (nor wait for the disk) itself,
    /// its commits go on while the pages of the earlier ones are copied and synced. Passive: it
    /// never waits for readers or the writer. A failure only leaves the work to the next
    /// checkpoint.
    pub fn run(self, commits: Receiver<()>, done: Sender<()>) {
        let conn = Connection::open(&self.path).ok();
        let checkpoint = || {
            if let Some(conn) = &conn {
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        };
        for () in commits {
            checkpoint();
            let _ = done.send(());
        }
        checkpoint();
    }
}

/// Store a job unless one of its end and key is there ([`WriteTx::insert_job`]).
macro_rules! insert_job {
    () => {
        r#"INSERT INTO jobs (key, uid, "user", job_id, exe, ranks, start_ms, end_ms,
             wall_ns_sum, mpi_ns_sum, partial, record, model_version, host, pid,
             wall_ns_max, critical_path_ns, work_sum_ns, traced, app, origin)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
             ?17, ?18, ?19, ?20, ?21)
         ON CONFLICT DO NOTHING"#
    };
}
const INSERT_JOB: &str = insert_job!();
const INSERT_JOB_RETURNING_ID: &str = concat!(insert_job!(), " RETURNING id");

/// Which of a batch's jobs (their ends and keys, in arrays) are stored already: their
/// positions in the batch (from 1). Each looked up in `jobs_by_end` (the `LIMIT` keeps the
/// planner from reading the whole table into a hash for a big batch).
const STORED_OF_BATCH: &str = "SELECT k.n FROM unnest(?1::BIGINT[], ?2::TEXT[])
         WITH ORDINALITY AS k (end_ms, key, n),
     LATERAL (SELECT 1 FROM jobs WHERE jobs.end_ms = k.end_ms AND jobs.key = k.key LIMIT 1) AS s";

/// The ids of `?1` new jobs, in arrival order, from the sequence of `jobs.id`'s identity (as
/// an insert takes them; PostgreSQL names it `jobs_id_seq`). Named, not looked up with
/// `pg_get_serial_sequence` per row: ten times faster.
const NEXT_JOB_IDS: &str =
    "SELECT nextval('jobs_id_seq'::regclass) FROM generate_series(1, ?1::BIGINT)";

/// PostgreSQL's [`INSERT_JOB`] of many new jobs, each a row of [`JobColumns::row`] with the id
/// [`NEXT_JOB_IDS`] gave it.
const COPY_JOBS: &str = r#"COPY jobs (id, key, uid, "user", job_id, exe, ranks, start_ms, end_ms,
         wall_ns_sum, mpi_ns_sum, partial, record, model_version, host, pid, wall_ns_max,
         critical_path_ns, work_sum_ns, traced, app, origin)
     FROM STDIN (FORMAT binary)"#;

/// The types of [`COPY_JOBS`]' columns.
const COPY_JOBS_TYPES: [Type; 22] = [
    Type::INT8,
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
    Type::BYTEA,
    Type::INT8,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
];

/// Jobs meeting the escalation rule, counted per hour, as [`WriteTx::count_rule_job`] counts
/// one: the hours and their counts in arrays.
const RULE_HOURS_UNNEST: &str = "INSERT INTO escalation_rule_hours AS t (hour, jobs)
     SELECT * FROM unnest(?1::BIGINT[], ?2::BIGINT[])
     ON CONFLICT (hour) DO UPDATE SET jobs = t.jobs + excluded.jobs";

/// PostgreSQL's escalation queue entries of many new jobs, as [`EscalationColumns::params`].
const QUEUE_UNNEST: &str = "INSERT INTO escalation_queue (id, uid, app, traced)
     SELECT * FROM unnest(?1::BIGINT[], ?2::BIGINT[], ?3::TEXT[], ?4::BIGINT[])
     ON CONFLICT DO NOTHING";

/// Jobs' columns: [`JobColumns::row`] as [`COPY_JOBS`] takes it.
struct JobColumns<'a> {
    key: Vec<&'a str>,
    uid: Vec<i64>,
    user: Vec<&'a str>,
    job_id: Vec<&'a str>,
    exe: Vec<&'a str>,
    ranks: Vec<i64>,
    start_ms: Vec<i64>,
    end_ms: Vec<i64>,
    wall_ns_sum: Vec<i64>,
    mpi_ns_sum: Vec<i64>,
    partial: Vec<Option<&'a str>>,
    record: Vec<&'a [u8]>,
    model_version: Vec<i64>,
    host: Vec<&'a str>,
    pid: Vec<i64>,
    wall_ns_max: Vec<i64>,
    critical_path_ns: Vec<Option<i64>>,
    work_sum_ns: Vec<Option<i64>>,
    traced: Vec<Option<&'a str>>,
    app: Vec<Option<&'a str>>,
    origin: Vec<Option<&'a str>>,
}

impl<'a> JobColumns<'a> {
    /// The columns of `jobs`, unless a number is past BIGINT.
    fn of(jobs: &'a [JobRow]) -> Option<JobColumns<'a>> {
        let big = |n: u64| i64::try_from(n).ok();
        let mut c = JobColumns {
            key: Vec::with_capacity(jobs.len()),
            uid: Vec::with_capacity(jobs.len()),
            user: Vec::with_capacity(jobs.len()),
            job_id: Vec::with_capacity(jobs.len()),
            exe: Vec::with_capacity(jobs.len()),
            ranks: Vec::with_capacity(jobs.len()),
            start_ms: Vec::with_capacity(jobs.len()),
            end_ms: Vec::with_capacity(jobs.len()),
            wall_ns_sum: Vec::with_capacity(jobs.len()),
            mpi_ns_sum: Vec::with_capacity(jobs.len()),
            partial: Vec::with_capacity(jobs.len()),
            record: Vec::with_capacity(jobs.len()),
            model_version: Vec::with_capacity(jobs.len()),
            host: Vec::with_capacity(jobs.len()),
            pid: Vec::with_capacity(jobs.len()),
            wall_ns_max: Vec::with_capacity(jobs.len()),
            critical_path_ns: Vec::with_capacity(jobs.len()),
            work_sum_ns: Vec::with_capacity(jobs.len()),
            traced: Vec::with_capacity(jobs.len()),
            app: Vec::with_capacity(jobs.len()),
            origin: Vec::with_capacity(jobs.len()),
        };
        for job in jobs {
            let index = &job.index;
            let imbalance = index.imbalance.as_ref();
            c.key.push(&job.key);
            c.uid.push(index.uid.into());
            c.user.push(&index.user);
            c.job_id.push(&index.job_id);
            c.exe.push(&index.exe);
            c.ranks.push(index.ranks.into());
            c.start_ms.push(big(index.start_unix_ms)?);
            c.end_ms.push(big(index.end_unix_ms)?);
            c.wall_ns_sum.push(big(index.wall_ns_sum)?);
            c.mpi_ns_sum.push(big(index.mpi_ns_sum)?);
            c.partial.push(index.partial.as_deref());
            c.record.push(&job.deflated);
            c.model_version.push(index.version.into());
            c.host.push(&index.host);
            c.pid.push(index.pid.into());
            c.wall_ns_max.push(big(index.wall_ns_max)?);
            let (critical_path_ns, work_sum_ns) = match imbalance {
                Some(i) => (Some(big(i.critical_path_ns)?), Some(big(i.work_sum_ns)?)),
                None => (None, None),
            };
            c.critical_path_ns.push(critical_path_ns);
            c.work_sum_ns.push(work_sum_ns);
            c.traced.push(index.traced.as_deref());
            c.app
                .push((!index.app.is_empty()).then_some(index.app.as_str()));
            c.origin.push(job.origin.as_deref());
        }
        Some(c)
    }

    /// Job `i`'s row for [`COPY_JOBS`], with its `id`.
    fn row<'r>(&'r self, i: usize, id: &'r i64) -> [&'r (dyn postgres::types::ToSql + Sync); 22] {
        [
            id,
            &self.key[i],
            &self.uid[i],
            &self.user[i],
            &self.job_id[i],
            &self.exe[i],
            &self.ranks[i],
            &self.start_ms[i],
            &self.end_ms[i],
            &self.wall_ns_sum[i],
            &self.mpi_ns_sum[i],
            &self.partial[i],
            &self.record[i],
            &self.model_version[i],
            &self.host[i],
            &self.pid[i],
            &self.wall_ns_max[i],
            &self.critical_path_ns[i],
            &self.work_sum_ns[i],
            &self.traced[i],
            &self.app[i],
            &self.origin[i],
        ]
    }
}

/// New jobs' escalation queue entries as [`QUEUE_UNNEST`] takes them.
#[derive(Default)]
struct EscalationColumns<'a> {
    ids: Vec<i64>,
    uid: Vec<i64>,
    app: Vec<&'a str>,
    traced: Vec<i64>,
}

impl<'a> EscalationColumns<'a> {
    fn push(&mut self, id: i64, index: &'a JobIndex) {
        self.ids.push(id);
        self.uid.push(index.uid.into());
        self.app.push(index.application());
        self.traced.push(index.traced.is_some().into());
    }

    fn params(&self) -> [&(dyn postgres::types::ToSql + Sync); 4] {
        [&self.ids, &self.uid, &self.app, &self.traced]
    }
}

/// One write transaction ([`WriteStore::transaction`]): ingest's batches, the partial inbox
/// ([`crate::partials`]) and the rollups ([`crate::rollups`]).
pub struct WriteTx<'conn> {
    pub(crate) db: &'conn Db,
    /// The log host whose read positions it saves.
    position_host: &'conn str,
    /// Committed: nothing to roll back when dropped.
    committed: bool,
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let _ = self.db.rollback();
        }
    }
}

impl<'conn> WriteTx<'conn> {
    /// Begin a write transaction on `store`'s database, holding SQLite's write lock from the
    /// start.
    fn begin(store: &'conn ReadStore) -> Result<WriteTx<'conn>> {
        store.db.begin(Begin::Immediate)?;
        Ok(WriteTx {
            db: &store.db,
            position_host: &store.position_host,
            committed: false,
        })
    }

    pub fn commit(mut self) -> Result<()> {
        self.committed = true;
        self.db.commit()
    }

    /// The job with key `key` came whole after the database reported it incomplete: the
    /// report is withdrawn.
    pub fn clear_incomplete(&self, key: &str) -> Result<()> {
        self.db.execute(
            "DELETE FROM rejected WHERE kind = 'incomplete' AND ref = ?1",
            &[&key],
        )?;
        Ok(())
    }

    /// Store a job (once: a job already there is left alone) with its index and deflated
    /// record, queued for the escalation rules if it is new and [`JobRow::look`], counted in
    /// its hour's jobs meeting the rule if new and [`JobRow::meets_rule`]. Returns
    /// whether it was new, and if not, whether the stored one is another record
    /// ([`JobRow::collision`]: then it is to be rejected).
    pub fn insert_job(&self, job: &JobRow) -> Result<Inserted> {
        if self.insert_new_job(job)? {
            return Ok(Inserted::New);
        }
        let stored = self.db.query_one(
            "SELECT record, origin FROM jobs WHERE end_ms = ?1 AND key = ?2",
            params![job.index.end_unix_ms, job.key],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        Ok(match job.collision(stored) {
            Some(rejected) => Inserted::Collision(rejected),
            None => Inserted::Again,
        })
    }

    /// Store jobs as [`WriteTx::insert_job`] stores each, in order (of a job there twice, the
    /// first is the new one). On PostgreSQL, in a few round trips for all of them instead of one
    /// or two each (ingest's batches are tens of thousands of jobs): which are stored already
    /// ([`STORED_OF_BATCH`]), the new ones' ids ([`NEXT_JOB_IDS`]), the new ones themselves
    /// ([`COPY_JOBS`]), their escalation queue entries and their hours' rule counts; only those
    /// not new are looked at one by one. The write transaction's lock
    /// ([`crate::db::Begin::Immediate`]) keeps another writer from storing one of them in
    /// between. A value past PostgreSQL's BIGINT takes the way of one job at a time, which
    /// refuses it.
    pub fn insert_jobs(&self, jobs: &[JobRow]) -> Result<Vec<Inserted>> {
        let (Db::Postgres(pg), Some(columns)) = (self.db, JobColumns::of(jobs)) else {
            return jobs.iter().map(|job| self.insert_job(job)).collect();
        };
        let mut new = vec![true; jobs.len()];
        let stored = pg.query_arrays(STORED_OF_BATCH, &[&columns.end_ms, &columns.key])?;
        for row in stored {
            new[usize::try_from(row.get::<_, i64>(0) - 1).expect("a position in the batch")] =
                false;
        }
        let mut first: HashSet<(i64, &str)> = HashSet::with_capacity(jobs.len());
        for (i, new) in new.iter_mut().enumerate() {
            *new = *new && first.insert((columns.end_ms[i], columns.key[i]));
        }
        let count = new.iter().filter(|new| **new).count() as i64;
        let ids: Vec<i64> = pg
            .query_arrays(NEXT_JOB_IDS, &[&count])?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let mut ids = ids.into_iter();
        let mut queued = EscalationColumns::default();
        let mut rule_hours: BTreeMap<i64, i64> = BTreeMap::new();
        let mut new_rows = Vec::with_capacity(ids.len());
        for (i, job) in jobs.iter().enumerate() {
            if !new[i] {
                continue;
            }
            let id = ids.next().expect("an id for every new job");
            new_rows.push((i, id));
            if job.look {
                queued.push(id, &job.index);
            }
            if job.meets_rule {
                *rule_hours
                    .entry(columns.end_ms[i] / crate::rollups::HOUR_MS as i64)
                    .or_default() += 1;
            }
        }
        pg.copy_in(COPY_JOBS, &COPY_JOBS_TYPES, |writer| {
            new_rows
                .iter()
                .try_for_each(|(i, id)| writer.write(&columns.row(*i, id)))
        })?;
        if !queued.ids.is_empty() {
            pg.query_arrays(QUEUE_UNNEST, &queued.params())?;
        }
        if !rule_hours.is_empty() {
            let (hours, counts): (Vec<i64>, Vec<i64>) = rule_hours.into_iter().unzip();
            pg.query_arrays(RULE_HOURS_UNNEST, &[&hours, &counts])?;
        }
        jobs.iter()
            .zip(new)
            .map(|(job, new)| match new {
                true => Ok(Inserted::New),
                false => self.insert_job(job),
            })
            .collect()
    }

    /// Count a job meeting the escalation rule in its hour.
    fn count_rule_job(&self, index: &JobIndex) -> Result<()> {
        self.db.execute(
            "INSERT INTO escalation_rule_hours (hour, jobs) VALUES (?1, 1)
             ON CONFLICT (hour) DO UPDATE SET jobs = escalation_rule_hours.jobs + 1",
            &[&(index.end_unix_ms / crate::rollups::HOUR_MS)],
        )?;
        Ok(())
    }

    fn insert_new_job(&self, job: &JobRow) -> Result<bool> {
        let index = &job.index;
        let imbalance = index.imbalance.as_ref();
        let values = params![
            job.key,
            index.uid,
            index.user,
            index.job_id,
            index.exe,
            index.ranks,
            index.start_unix_ms,
            index.end_unix_ms,
            index.wall_ns_sum,
            index.mpi_ns_sum,
            index.partial,
            job.deflated,
            index.version,
            index.host,
            index.pid,
            index.wall_ns_max,
            imbalance.map(|i| i.critical_path_ns),
            imbalance.map(|i| i.work_sum_ns),
            index.traced,
            (!index.app.is_empty()).then_some(&index.app),
            job.origin,
        ];
        // The new row's id: SQLite's `last_insert_rowid()` (a RETURNING clause made its
        // inserts four times slower), PostgreSQL's `RETURNING id`.
        let inserted: Option<i64> = match &self.db {
            Db::Sqlite(conn) => {
                (self.db.execute(INSERT_JOB, values)? == 1).then(|| conn.last_insert_rowid())
            }
            Db::Postgres(_) => self
                .db
                .query_opt(INSERT_JOB_RETURNING_ID, values, |row| row.get(0))?,
        };
        let Some(id) = inserted else {
            return Ok(false);
        };
        if job.look {
            self.db.execute(
                "INSERT INTO escalation_queue (id, uid, app, traced) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT DO NOTHING",
                params![id, index.uid, index.application(), index.traced.is_some()],
            )?;
        }
        if job.meets_rule {
            self.count_rule_job(index)?;
        }
        Ok(true)
    }

    /// Ingest read a line of time `line_ms` (unix ms): the newest line read is the later of it
    /// and the one noted before ([`ReadStore::newest_line_ms`]).
    pub fn note_newest_line(&self, line_ms: u64) -> Result<()> {
        // The later of two: SQLite's two-argument `max`, PostgreSQL's `greatest`.
        let sql = match self.db.dialect() {
            Dialect::Sqlite => {
                "INSERT INTO ingest_clock (id, newest_line_ms) VALUES (0, ?1)
                 ON CONFLICT (id) DO UPDATE SET
                     newest_line_ms = max(ingest_clock.newest_line_ms, excluded.newest_line_ms)"
            }
            Dialect::Postgres => {
                "INSERT INTO ingest_clock (id, newest_line_ms) VALUES (0, ?1)
                 ON CONFLICT (id) DO UPDATE SET newest_line_ms =
                     greatest(ingest_clock.newest_line_ms, excluded.newest_line_ms)"
            }
        };
        self.db.execute(sql, &[&line_ms])?;
        Ok(())
    }

    /// File an analysis record whose sender may have sent it (once: a repeat is ignored), for
    /// the escalation to match to its job after the run.
    pub fn insert_analysis(&self, received: &Received) -> Result<()> {
        let a = &received.analysis;
        self.db.execute(
            r#"INSERT INTO analysis_inbox (key, job_key, uid, "user", host, dir, summary, error,
                 analysed_ms, received_ms, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT DO NOTHING"#,
            params![
                received.key,
                a.job_key,
                a.uid,
                a.user,
                a.host,
                a.dir,
                a.summary,
                a.error,
                a.analysed_unix_ms,
                received.received_ms,
                received.source
            ],
        )?;
        Ok(())
    }

    /// Add `rejected` to the rejected entries (once: the same kind and reference again is
    /// ignored).
    pub fn insert_rejected(&self, rejected: &Rejected) -> Result<()> {
        self.db.execute(
            "INSERT INTO rejected (kind, ref, source, detail, line) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT DO NOTHING",
            params![
                rejected.kind,
                rejected.reference,
                rejected.source,
                rejected.detail,
                rejected.line
            ],
        )?;
        Ok(())
    }

    /// Create or update the position row of a file of the handle's log host (a new one when
    /// its id is 0; a row kept before positions had a host becomes the host's); returns its id.
    pub fn save_position(&self, position: &Position, path: &str) -> Result<i64> {
        let values = params![
            position.head_len,
            position.head_crc,
            position.offset,
            path,
            position.stat
        ];
        let id = if position.id <= 0 {
            self.db.query_one(
                r#"INSERT INTO positions (head_len, head_crc, "offset", path, stat)
                 VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id"#,
                values,
                |row| row.get(0),
            )?
        } else {
            let mut with_id: Vec<&dyn rusqlite::ToSql> = values.to_vec();
            with_id.push(&position.id);
            self.db.execute(
                r#"INSERT INTO positions (head_len, head_crc, "offset", path, stat, id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET head_len = excluded.head_len,
                     head_crc = excluded.head_crc, "offset" = excluded."offset",
                     path = excluded.path, stat = excluded.stat"#,
                &with_id,
            )?;
            position.id
        };
        self.db.execute(
            "INSERT INTO position_hosts (id, host) VALUES (?1, ?2)
             ON CONFLICT (id) DO UPDATE SET host = excluded.host",
            params![id, self.position_host],
        )?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::{WriteStore, WRITERS_WAIT};

    /// A writer waits out other writers' batches (minutes at site scale), not the readers' 30 s.
    #[test]
    fn an_sqlite_writer_waits_for_other_writers_as_long_as_a_hung_one_needs() {
        let dir = std::env::temp_dir().join(format!("mpistat-writers-wait-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = WriteStore::open(&dir.join("db.sqlite")).unwrap();
        let waits_ms: u64 = store
            .reader
            .db
            .sqlite_conn()
            .unwrap()
            .query_row("PRAGMA busy_timeout", [], |row| row.get(0))
            .unwrap();
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(waits_ms, WRITERS_WAIT.as_millis() as u64);
        assert!(
            WRITERS_WAIT >= std::time::Duration::from_secs(600),
            "{WRITERS_WAIT:?}"
        );
    }
}
