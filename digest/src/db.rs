//! The SQLite database `mpistat ingest` fills and `mpistat digest` reads.
//!
//! The schema is created and upgraded by [`MIGRATIONS`], applied in order; SQLite's
//! `user_version` counts how many ran. Tables:
//!
//! * `jobs`: one row per job record, in the order ingest stored them, unique by end time and
//!   [`JobRecord::key`] (index `jobs_by_end`, which new rows append to; a unique index of the
//!   key alone, a hash, took a random page for every insert); the record itself as JSON, raw-DEFLATE compressed (a BLOB: as it came
//!   over the wire; a TEXT value is read as plain JSON), plus its [`JobIndex`] as columns: what
//!   the digest selects on and the escalation rule looks at. Ingest files a job by the index the
//!   sender wrote next to the record (wire version 2), and decodes the record (for the rollups):
//!   one that is not the index's is rejected there. A stored record may still have changed
//!   since (or predate that check): every reader here checks it against the
//!   row's index ([`JobIndex::differences`]), and a record that disagrees, or cannot be read, is
//!   moved to `rejected` as `corrupt` ([`Database::quarantine`]) and skipped, never used. (Rows
//!   stored before schema 4 have only some of the index's columns, the rest NULL: ingest made
//!   them from the decoded record; they are checked on the columns they have. Schema 1 kept the
//!   rows in key order, which made every insert of a big ingest touch a random page of the
//!   whole table.) New databases have 64 KiB pages (rows are a few kB).
//! * `rejected`: everything ingest did not store as a job (forged, incomplete, corrupt,
//!   unsupported, duplicate and conflicting lines), keyed by kind and a reference (a job key, or
//!   `<file id>:<byte offset>` of a line), so that reading the same input again adds nothing.
//! * `positions`: how far each input file has been read. A file is identified by its first bytes
//!   (`head_len`, `head_crc`), which survive renaming and compression by logrotate; `offset` is
//!   where reading resumes (in the uncompressed text).
//! * `mails`: one row per (user, week) mail: sent, or failed with the error and the number of
//!   attempts.
//! * `escalation_queue`: jobs the escalation rules are still to look at (traced, or meeting the
//!   rule, queued by ingest with the job: by row id, with uid, application and whether traced,
//!   so a job of a listed (uid, application) is passed over without reading its row);
//!   `analyses`: the trace analyses of traced jobs, from the analysis records their users sent
//!   (`analysis_inbox`: filed by ingest, waiting to be matched to their jobs).
//! * `partial_inbox`: the partial records of a job on several nodes that ingest holds until
//!   their other half comes, with when it held them (`held_ms`), and keeps afterwards (stored
//!   as one job with their twin, alone, or not at all: their twin was stored alone before they
//!   came) ([`crate::ingest::partials`]).

use crate::pool::OrderedPool;
use crate::rollup::Rollups;
use anyhow::Context;
use mpistat_record::model::{stored_key, IndexImbalance};
use mpistat_record::wire::{self, DecodedJob};
use mpistat_record::{AnalysisRecord, IndexedJob, JobIndex, JobRecord, Problem};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

/// Schema versions, oldest first. Never edit a published entry: add a new one.
pub const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE jobs (
        key TEXT PRIMARY KEY,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        ranks INTEGER NOT NULL,
        start_ms INTEGER NOT NULL,
        end_ms INTEGER NOT NULL,
        wall_ns_sum INTEGER NOT NULL,
        mpi_ns_sum INTEGER NOT NULL,
        partial TEXT,
        record TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX jobs_by_end ON jobs (end_ms);
    CREATE TABLE rejected (
        kind TEXT NOT NULL,
        ref TEXT NOT NULL,
        source TEXT NOT NULL,
        detail TEXT NOT NULL,
        line TEXT,
        PRIMARY KEY (kind, ref)
    ) WITHOUT ROWID;
    CREATE TABLE positions (
        id INTEGER PRIMARY KEY,
        head_len INTEGER NOT NULL,
        head_crc INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        path TEXT NOT NULL,
        stat TEXT
    );
    CREATE TABLE mails (
        user TEXT NOT NULL,
        week TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('sent', 'failed')),
        attempts INTEGER NOT NULL,
        error TEXT,
        recipient TEXT NOT NULL,
        PRIMARY KEY (user, week)
    ) WITHOUT ROWID;
",
    "
    CREATE TABLE jobs_in_arrival_order (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        ranks INTEGER NOT NULL,
        start_ms INTEGER NOT NULL,
        end_ms INTEGER NOT NULL,
        wall_ns_sum INTEGER NOT NULL,
        mpi_ns_sum INTEGER NOT NULL,
        partial TEXT,
        record BLOB NOT NULL
    );
    INSERT INTO jobs_in_arrival_order (key, uid, user, job_id, exe, ranks, start_ms, end_ms,
            wall_ns_sum, mpi_ns_sum, partial, record)
        SELECT key, uid, user, job_id, exe, ranks, start_ms, end_ms, wall_ns_sum, mpi_ns_sum,
            partial, record
        FROM jobs ORDER BY end_ms, key;
    DROP TABLE jobs;
    ALTER TABLE jobs_in_arrival_order RENAME TO jobs;
    CREATE INDEX jobs_by_end ON jobs (end_ms);
",
    "
    -- Jobs the escalation rules have looked at (the jobs stored before this version count as
    -- looked at: upgrading must not escalate old jobs).
    CREATE TABLE considered (key TEXT PRIMARY KEY) WITHOUT ROWID;
    INSERT INTO considered SELECT key FROM jobs;
    -- The analysis of a traced job's trace (summary: JSON of analyze::Summary).
    CREATE TABLE analyses (
        key TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        end_ms INTEGER NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        dir TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
        summary TEXT,
        error TEXT
    ) WITHOUT ROWID;
    CREATE INDEX analyses_by_user ON analyses (user, end_ms);
",
    "
    -- The rest of each job's index (mpistat_record::JobIndex), so that ingest files a job and
    -- the escalation rule looks at it without inflating the record, and whoever reads the
    -- record checks it is the one filed. NULL in the rows stored before (`model_version` NULL:
    -- their other columns were made from the decoded record).
    ALTER TABLE jobs ADD COLUMN model_version INTEGER;
    ALTER TABLE jobs ADD COLUMN host TEXT;
    ALTER TABLE jobs ADD COLUMN pid INTEGER;
    ALTER TABLE jobs ADD COLUMN wall_ns_max INTEGER;
    ALTER TABLE jobs ADD COLUMN critical_path_ns INTEGER;
    ALTER TABLE jobs ADD COLUMN work_sum_ns INTEGER;
    ALTER TABLE jobs ADD COLUMN traced TEXT;
    -- Jobs the escalation rules are to look at: ingest queues a job that is traced or meets the
    -- rule (judged on its index) with the job itself, and the look after the run takes it off.
    -- Replaces `considered`, which had to list every job: the jobs not in it are queued.
    -- `id` is the job's, `uid` and `exe` are its; `traced` 1 if it was traced, 0 if not, NULL
    -- if not known (stored before this version: its record tells).
    CREATE TABLE escalation_queue (
        id INTEGER PRIMARY KEY,
        uid INTEGER NOT NULL,
        exe TEXT NOT NULL,
        traced INTEGER
    );
    INSERT INTO escalation_queue (id, uid, exe, traced)
        SELECT id, uid, exe, NULL FROM jobs WHERE key NOT IN (SELECT key FROM considered);
    DROP TABLE considered;
",
    "
    -- A job is unique by (end time, key) instead of by key: keys are hashes, so every insert
    -- went to a random page of the key index, and every commit of a big ingest rewrote most of
    -- that index (the bulk of what ingest wrote besides the records). End times grow as records
    -- arrive, so the new index is appended to and also serves the digest's selection by end
    -- time, in place of jobs_by_end. A job's records all end at the same time; the key already
    -- stands for the job's id, host, pid and start. Row ids are kept (the escalation queue
    -- refers to them). SQLite cannot drop a column's UNIQUE: the table is made again.
    CREATE TABLE jobs_unique_by_end (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        job_id TEXT NOT NULL,
        exe TEXT NOT NULL,
        ranks INTEGER NOT NULL,
        start_ms INTEGER NOT NULL,
        end_ms INTEGER NOT NULL,
        wall_ns_sum INTEGER NOT NULL,
        mpi_ns_sum INTEGER NOT NULL,
        partial TEXT,
        record BLOB NOT NULL,
        model_version INTEGER,
        host TEXT,
        pid INTEGER,
        wall_ns_max INTEGER,
        critical_path_ns INTEGER,
        work_sum_ns INTEGER,
        traced TEXT
    );
    INSERT INTO jobs_unique_by_end (id, key, uid, user, job_id, exe, ranks, start_ms, end_ms,
            wall_ns_sum, mpi_ns_sum, partial, record, model_version, host, pid, wall_ns_max,
            critical_path_ns, work_sum_ns, traced)
        SELECT id, key, uid, user, job_id, exe, ranks, start_ms, end_ms, wall_ns_sum,
            mpi_ns_sum, partial, record, model_version, host, pid, wall_ns_max,
            critical_path_ns, work_sum_ns, traced
        FROM jobs ORDER BY id;
    DROP TABLE jobs;
    ALTER TABLE jobs_unique_by_end RENAME TO jobs;
    CREATE UNIQUE INDEX jobs_by_end ON jobs (end_ms, key);
",
    "
    -- The application (record model 2: an interpreter's script or module; NULL in older rows
    -- and for records without one, whose application is `exe`), which the escalation queue and
    -- rule key on instead of the executable, and analyses name.
    ALTER TABLE jobs ADD COLUMN app TEXT;
    ALTER TABLE escalation_queue RENAME COLUMN exe TO app;
    ALTER TABLE analyses RENAME COLUMN exe TO app;
",
    "
    -- Analysis records (mpistat analyze --send, run by the job's user where the trace is) that
    -- ingest filed: their attested sender is the uid they claim. After the run each is matched
    -- to its job: stored in `analyses` if the job is traced and has that uid, else rejected as
    -- forged; one whose job never came is rejected as an orphan after a while. The digest never
    -- reads a trace itself any more. `key` is the analysis record's (one per job), with `uid`
    -- the row's key: another user's claim to the same job cannot keep the owner's out.
    -- `received_ms` is when ingest filed it; `looked_to` the last job row (`jobs.id`) its job
    -- was looked for in, so that one waiting for its job is looked for among new rows only.
    CREATE TABLE analysis_inbox (
        key TEXT NOT NULL,
        job_key TEXT NOT NULL,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        host TEXT NOT NULL,
        dir TEXT NOT NULL,
        summary TEXT,
        error TEXT,
        analysed_ms INTEGER NOT NULL,
        received_ms INTEGER NOT NULL,
        source TEXT NOT NULL,
        looked_to INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key, uid)
    ) WITHOUT ROWID;
",
    "
    -- Rollups (crate::rollup): the admin pages' sums per UTC day (`day` = end_ms / 86400000),
    -- site-wide and per user, and the critical jobs, kept by ingest with the jobs. A database
    -- with jobs is marked `stale`: the first command that opens it with the site configuration
    -- builds them from the jobs (that needs the records, which SQL cannot read).
    CREATE TABLE rollup_days (day INTEGER PRIMARY KEY, data TEXT NOT NULL);
    CREATE TABLE rollup_users (
        day INTEGER NOT NULL,
        user TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        wall_ns INTEGER NOT NULL,
        mpi_ns INTEGER NOT NULL,
        totals TEXT NOT NULL,
        detail TEXT NOT NULL,
        PRIMARY KEY (day, user)
    ) WITHOUT ROWID;
    CREATE INDEX rollup_users_by_user ON rollup_users (user, day);
    CREATE TABLE critical_jobs (
        end_ms INTEGER NOT NULL,
        key TEXT NOT NULL,
        user TEXT NOT NULL,
        wall_ns INTEGER NOT NULL,
        reasons TEXT NOT NULL,
        PRIMARY KEY (end_ms, key)
    ) WITHOUT ROWID;
    CREATE TABLE rollup_state (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    INSERT INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
    -- A user's jobs of an interval, listed and sorted without reading their rows.
    CREATE INDEX jobs_by_user ON jobs (user, end_ms, key, wall_ns_sum, mpi_ns_sum, ranks);
    -- The search of the live pages: by job id, and by application.
    CREATE INDEX jobs_by_job_id ON jobs (job_id);
    CREATE INDEX jobs_by_app ON jobs (coalesce(app, exe), end_ms, key);
",
    "
    -- More rollups (crate::rollup): each user's totals per calendar month (`month`: the day
    -- number of its first day), which a month's users list and user pages add up instead of a
    -- row per day and user; the jobs per day and application, which the search by application
    -- reads instead of every job's application in `jobs_by_app`. Made from the records by the
    -- first command that opens a database with jobs (`stale`), like the first rollups.
    CREATE TABLE rollup_user_months (
        month INTEGER NOT NULL,
        user TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        wall_ns INTEGER NOT NULL,
        mpi_ns INTEGER NOT NULL,
        totals TEXT NOT NULL,
        PRIMARY KEY (month, user)
    ) WITHOUT ROWID;
    CREATE TABLE rollup_apps (
        day INTEGER NOT NULL,
        app TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        PRIMARY KEY (day, app)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
",
    "
    -- Partial records of a job on several nodes that may be one half of two (the aborting
    -- rank's `MPI_Abort ... on rank R`, R > 0, and rank 0's `SIGTERM from the launcher`):
    -- ingest holds them here instead of storing them, stores the two halves of a job as one job
    -- when both are here, and a half still alone after the site's grace period as it is
    -- (crate::ingest::partials). Rows stay (`state` merged or stored) so that reading a record
    -- again stores nothing. `half` is 'abort' or 'stopped'; `record` the deflated record.
    CREATE TABLE partial_inbox (
        end_ms INTEGER NOT NULL,
        key TEXT NOT NULL,
        half TEXT NOT NULL CHECK (half IN ('abort', 'stopped')),
        uid INTEGER NOT NULL,
        look INTEGER NOT NULL,
        record BLOB NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('held', 'merged', 'stored')),
        PRIMARY KEY (end_ms, key)
    ) WITHOUT ROWID;
    CREATE INDEX partial_inbox_held ON partial_inbox (state, uid, end_ms);
",
    "
    -- The critical list by CPU time, read in that order: its first page was a sort of every
    -- critical job of the interval (1.7 s a request at 10M jobs a month). The order's ties are
    -- broken by key as before; the primary key's end_ms completes the entry.
    CREATE INDEX critical_jobs_by_cpu ON critical_jobs (wall_ns DESC, key);
",
    "
    -- A held partial record waits for its other half from when ingest held it (`held_ms`, by
    -- the ingest run's clock), no longer from its job's end: an ingest running late (a syslog
    -- backlog, a stopped daemon, an old file) stored every half alone at the end of the run
    -- that held it, though its twin came in the next. Rows held before wait from their end, as
    -- they did. A half whose twin was stored alone before it came is kept as `late`: not stored
    -- (the twin counts the job), not lost (crate::ingest::partials). SQLite cannot change a
    -- CHECK: the table is made again.
    CREATE TABLE partial_inbox_held_ms (
        end_ms INTEGER NOT NULL,
        key TEXT NOT NULL,
        half TEXT NOT NULL CHECK (half IN ('abort', 'stopped')),
        uid INTEGER NOT NULL,
        look INTEGER NOT NULL,
        record BLOB NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('held', 'merged', 'stored', 'late')),
        held_ms INTEGER NOT NULL,
        PRIMARY KEY (end_ms, key)
    ) WITHOUT ROWID;
    INSERT INTO partial_inbox_held_ms (end_ms, key, half, uid, look, record, state, held_ms)
        SELECT end_ms, key, half, uid, look, record, state, end_ms FROM partial_inbox;
    DROP TABLE partial_inbox;
    ALTER TABLE partial_inbox_held_ms RENAME TO partial_inbox;
    CREATE INDEX partial_inbox_held ON partial_inbox (state, uid, end_ms);
",
    "
    -- A job's key is the key of its syslog lines and its uid, `<wire key>-<uid>`
    -- (mpistat_record::model::stored_key): the wire key is a hash of what the sender claims (job
    -- id, host, pid, start), which another user could copy, taking or sharing the job's key, its
    -- page and its analysis. Rows, analyses, critical jobs and held partial records are keyed
    -- anew (the analyses and critical jobs by their job's row, found by end and key); the
    -- rollups, which name jobs by key inside their JSON, are made again from the jobs by the
    -- first command that opens the database (`stale`). `origin` is where a job's lines came
    -- from: the host rsyslog named, after ` via ` the relay that delivered them (NULL: stored
    -- before, or no host in the line).
    ALTER TABLE jobs ADD COLUMN origin TEXT;
    UPDATE analyses SET key = key || '-' || (SELECT jobs.uid FROM jobs
            WHERE jobs.end_ms = analyses.end_ms AND jobs.key = analyses.key)
        WHERE EXISTS (SELECT 1 FROM jobs
            WHERE jobs.end_ms = analyses.end_ms AND jobs.key = analyses.key);
    UPDATE critical_jobs SET key = key || '-' || (SELECT jobs.uid FROM jobs
            WHERE jobs.end_ms = critical_jobs.end_ms AND jobs.key = critical_jobs.key)
        WHERE EXISTS (SELECT 1 FROM jobs
            WHERE jobs.end_ms = critical_jobs.end_ms AND jobs.key = critical_jobs.key);
    UPDATE partial_inbox SET key = key || '-' || uid;
    UPDATE jobs SET key = key || '-' || uid;
    INSERT OR IGNORE INTO rollup_state SELECT 'stale', '' WHERE EXISTS (SELECT 1 FROM jobs);
",
];

/// Page size of a new database (an existing one keeps its own).
const PAGE_SIZE: u32 = 65_536;

/// How long opening and writing wait for another process's transaction.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// An open database with the current schema.
pub struct Database {
    pub conn: Connection,
    /// What readers quarantined ([`Database::quarantine`]) and nobody has taken yet
    /// ([`Database::take_quarantined`]): the command says so where it reports.
    quarantined: RefCell<Vec<Quarantined>>,
}

/// What [`Database::quarantine`] did with a job whose stored record is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quarantined {
    /// Moved to the rejected entries as `corrupt` (`detail`: which job, and why).
    Moved { detail: String },
    /// Only skipped: the database could not be written (`error`).
    Skipped { detail: String, error: String },
}

impl std::fmt::Display for Quarantined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Quarantined::Moved { detail } => write!(
                f,
                "{detail}; moved to the rejected entries (mpistat ingest --report)"
            ),
            Quarantined::Skipped { detail, error } => {
                write!(f, "{detail}; skipped (cannot move it to rejected: {error})")
            }
        }
    }
}

/// How far one input file has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub id: i64,
    pub head_len: u64,
    pub head_crc: u32,
    pub offset: u64,
    /// `dev:ino:size:mtime` of the file when it was last read to its end with nothing pending:
    /// the same stat again means nothing new to read.
    pub stat: Option<String>,
}

/// Something ingest did not store as a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// `forged`, `incomplete`, `corrupt`, `unsupported`, `duplicate`, `conflicting` or
    /// `orphan` (an analysis whose job never came).
    pub kind: &'static str,
    /// A job key, a job key with the attested uid (`forged`), or `<file id>:<offset>` of a line.
    pub reference: String,
    /// The file (as named when read) the problem was found in.
    pub source: String,
    pub detail: String,
    /// The offending line, for line-level problems.
    pub line: Option<String>,
}

/// Totals of the jobs of an interval (from the rollups' columns, [`crate::rollup::totals_of_period`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeriodTotals {
    pub jobs: u64,
    pub wall_ns: u64,
    pub mpi_ns: u64,
    pub users: u64,
}

/// A traced job's analysis as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnalysis {
    pub job_id: String,
    /// The job's application ([`JobRecord::application`]).
    pub app: String,
    pub dir: String,
    /// JSON of `analyze::Summary` when the analysis succeeded.
    pub summary: Option<String>,
    pub error: Option<String>,
}

/// Outcome of a mail attempt for (user, week).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailStatus {
    Sent,
    Failed { attempts: u32, error: String },
}

impl Database {
    /// Open (creating if needed) the database at `path` and bring its schema up to date. It and
    /// its `-wal` and `-shm` are made (or, when an older mpistat left them open, kept) mode 0600.
    pub fn open(path: &Path) -> anyhow::Result<Database> {
        // The service's alone, whatever the umask (every user's jobs are in it).
        crate::private::owner_only_database(path)?;
        let conn = Connection::open(path)
            .with_context(|| format!("cannot open database {}", path.display()))?;
        // First, so that even switching to WAL waits for another process's transaction.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Before the database exists (no effect after): 64 KiB pages suit rows of a few kB
        // (records) and ingest's bulk appends: fewer pages to write, look up and sync.
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
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
                        && waited_since.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                result => break result?,
            }
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Readers (digest, site report) go through a week's rows and their records: 64 MiB
        // keep a good part of a busy week's pages in memory.
        conn.pragma_update(None, "cache_size", -65_536)?;
        let mut db = Database {
            conn,
            quarantined: RefCell::new(Vec::new()),
        };
        db.migrate()
            .with_context(|| format!("cannot upgrade the schema of {}", path.display()))?;
        Ok(db)
    }

    fn migrate(&mut self) -> anyhow::Result<()> {
        let version = |conn: &Connection| -> rusqlite::Result<usize> {
            conn.query_row("PRAGMA user_version", [], |row| row.get(0))
        };
        // Up to date: write nothing, so opening never competes for the write lock.
        if version(&self.conn)? == MIGRATIONS.len() {
            return Ok(());
        }
        // Immediate: take the write lock first (waiting up to the busy timeout). A deferred
        // transaction that reads and then writes fails at once if another process wrote in
        // between (WAL snapshot conflict), which made two processes opening one new database
        // at the same moment fail.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let done = version(&tx)?;
        anyhow::ensure!(
            done <= MIGRATIONS.len(),
            "schema version {done} is newer than this mpistat ({})",
            MIGRATIONS.len()
        );
        for migration in &MIGRATIONS[done..] {
            tx.execute_batch(migration)?;
        }
        tx.pragma_update(None, "user_version", MIGRATIONS.len())?;
        tx.commit()?;
        Ok(())
    }

    pub fn positions(&self) -> anyhow::Result<Vec<Position>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, head_len, head_crc, offset, stat FROM positions ORDER BY id")?;
        let rows = stmt.query_map([], |row| {
            Ok(Position {
                id: row.get(0)?,
                head_len: row.get(1)?,
                head_crc: row.get(2)?,
                offset: row.get(3)?,
                stat: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every file's last name and read position.
    pub fn position_paths(&self) -> anyhow::Result<Vec<(String, u64)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, offset FROM positions ORDER BY id")?;
        let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn job_count(&self) -> anyhow::Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM jobs", [], |row| row.get(0))?)
    }

    /// Rejected entries, by kind then reference.
    pub fn rejected(&self) -> anyhow::Result<Vec<(String, String, String, String)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT kind, ref, source, detail FROM rejected ORDER BY kind, ref")?;
        let rows = stmt.query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records of jobs that ended in `[from_ms, to_ms)`, in end order (all in memory: the
    /// weekly digest takes them one by one with [`Database::each_job_ended_between`]).
    pub fn jobs_ended_between(&self, from_ms: u64, to_ms: u64) -> anyhow::Result<Vec<JobRecord>> {
        let mut records = Vec::new();
        self.each_job_ended_between(from_ms, to_ms, |record| records.push(record))?;
        Ok(records)
    }

    /// Give `each` the record of every job that ended in `[from_ms, to_ms)`, in end order. The
    /// records are decoded (and checked against their rows, see [`FiledJob::differences`]) on
    /// other threads meanwhile (see [`OrderedPool`]); those that are not usable are skipped and
    /// quarantined ([`Database::quarantine`]) at the end (see [`Database::take_quarantined`]).
    pub fn each_job_ended_between(
        &self,
        from_ms: u64,
        to_ms: u64,
        mut each: impl FnMut(JobRecord),
    ) -> anyhow::Result<()> {
        self.each_filed_job_ended_between(from_ms, to_ms, |_, record| each(record))
    }

    /// [`Database::each_job_ended_between`], with each record's row as filed.
    pub fn each_filed_job_ended_between(
        &self,
        from_ms: u64,
        to_ms: u64,
        each: impl FnMut(&FiledJob, JobRecord),
    ) -> anyhow::Result<()> {
        self.each_filed_job(
            &format!(
                "SELECT {INDEX_COLUMNS}, record FROM jobs WHERE end_ms >= ?1 AND end_ms < ?2
                 ORDER BY end_ms, key"
            ),
            params![from_ms, to_ms],
            each,
        )
    }

    /// The jobs of the rows `ids` (those that are stored), in end order, as
    /// [`Database::each_filed_job_ended_between`].
    pub fn each_filed_job_of_rows(
        &self,
        ids: &[i64],
        each: impl FnMut(&FiledJob, JobRecord),
    ) -> anyhow::Result<()> {
        self.each_filed_job(
            &format!(
                "SELECT {INDEX_COLUMNS}, record FROM jobs
                 WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY end_ms, key"
            ),
            params![serde_json::to_string(ids)?],
            each,
        )
    }

    /// Each usable record that `sql` (index columns, then the record) selects, decoded in
    /// parallel and handed over in order; the unusable ones are quarantined after.
    fn each_filed_job(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        mut each: impl FnMut(&FiledJob, JobRecord),
    ) -> anyhow::Result<()> {
        let mut unusable = Vec::new();
        {
            let mut stmt = self.conn.prepare(sql)?;
            let mut rows = stmt.query(params)?;
            let mut decoders = OrderedPool::new(|(filed, stored): (FiledJob, Value)| {
                let record = checked_record(&filed, stored);
                (filed, record)
            });
            let mut take = |(filed, record): (FiledJob, Result<JobRecord, String>)| match record {
                Ok(record) => each(&filed, record),
                Err(detail) => unusable.push((filed, detail)),
            };
            while let Some(row) = rows.next()? {
                decoders.send((FiledJob::from_row(row)?, row.get(INDEX_COLUMN_COUNT)?));
                while let Some(decoded) = decoders.next(false) {
                    take(decoded);
                }
            }
            while let Some(decoded) = decoders.next(true) {
                take(decoded);
            }
        }
        for (filed, detail) in unusable {
            let done = self.quarantine(&filed, &detail);
            self.quarantined.borrow_mut().push(done);
        }
        Ok(())
    }

    /// The stored record of the job with key `key` (`None`: no such job, or its record is not
    /// usable and was quarantined). No index leads to a key alone (see `MIGRATIONS[4]`): this
    /// reads the entries of `jobs_by_end` (end time and key, ~50 bytes a job), never the rows,
    /// which suits a web page of one job reached by a link without its end time. Should
    /// records of one key end at different times, the one that ended last is taken.
    pub fn job(&self, key: &str) -> anyhow::Result<Option<JobRecord>> {
        // Without INDEXED BY the planner may walk the table itself (every record) for the key.
        let end_ms: Option<u64> = self
            .conn
            .query_row(
                "SELECT end_ms FROM jobs INDEXED BY jobs_by_end WHERE key = ?1
                 ORDER BY end_ms DESC LIMIT 1",
                [key],
                |row| row.get(0),
            )
            .optional()?;
        match end_ms {
            Some(end_ms) => self.job_ended_at(end_ms, key),
            None => Ok(None),
        }
    }

    /// The stored record of the job that ended at `end_ms` with key `key` (by the unique index:
    /// a few page reads), if it is there and usable (else it is quarantined).
    pub fn job_ended_at(&self, end_ms: u64, key: &str) -> anyhow::Result<Option<JobRecord>> {
        let found = self
            .conn
            .query_row(
                &format!("SELECT {INDEX_COLUMNS}, record FROM jobs WHERE end_ms = ?1 AND key = ?2"),
                params![end_ms, key],
                |row| Ok((FiledJob::from_row(row)?, row.get(INDEX_COLUMN_COUNT)?)),
            )
            .optional()?;
        Ok(found.and_then(|(filed, stored)| self.usable(&filed, stored)))
    }

    /// The record of a job as filed, if it is usable (else it is quarantined).
    pub fn filed_record(&self, filed: &FiledJob) -> anyhow::Result<Option<JobRecord>> {
        let stored: Option<Value> = self
            .conn
            .query_row("SELECT record FROM jobs WHERE id = ?1", [filed.id], |row| {
                row.get(0)
            })
            .optional()?;
        Ok(stored.and_then(|stored| self.usable(filed, stored)))
    }

    /// `stored` as the record of `filed` if it is that, else `None` (and the job quarantined).
    fn usable(&self, filed: &FiledJob, stored: Value) -> Option<JobRecord> {
        match checked_record(filed, stored) {
            Ok(record) => Some(record),
            Err(detail) => {
                let done = self.quarantine(filed, &detail);
                self.quarantined.borrow_mut().push(done);
                None
            }
        }
    }

    /// Move a job whose stored record is not usable (`detail` says why) out of `jobs` into
    /// `rejected` as `corrupt` (so `mpistat ingest --report` shows it): its record is never
    /// used, and nobody is credited with the job. A reader that cannot write the database only
    /// skips it. Returns what it did, for the caller to report: nothing is printed here (a
    /// command may hold the stderr lock while another thread reads, as ingest does).
    pub fn quarantine(&self, filed: &FiledJob, detail: &str) -> Quarantined {
        let index = &filed.index;
        let detail = format!(
            "job {} filed for uid {} ({}): {detail}",
            index.job_id, index.uid, index.user
        );
        // A savepoint: also inside a caller's transaction (`rollup::rebuild` reads every job).
        let moved = (|| -> rusqlite::Result<()> {
            self.conn.execute_batch("SAVEPOINT quarantine")?;
            let changed = (|| -> rusqlite::Result<()> {
                self.conn.execute(
                    "INSERT OR REPLACE INTO rejected (kind, ref, source, detail, line)
                     VALUES ('corrupt', ?1, 'database', ?2, NULL)",
                    params![filed.key, detail],
                )?;
                self.conn
                    .execute("DELETE FROM jobs WHERE id = ?1", [filed.id])?;
                self.conn
                    .execute("DELETE FROM escalation_queue WHERE id = ?1", [filed.id])?;
                Ok(())
            })();
            match changed {
                Ok(()) => self.conn.execute_batch("RELEASE quarantine"),
                Err(e) => {
                    let _ = self
                        .conn
                        .execute_batch("ROLLBACK TO quarantine; RELEASE quarantine");
                    Err(e)
                }
            }
        })();
        match moved {
            Ok(()) => Quarantined::Moved { detail },
            Err(e) => Quarantined::Skipped {
                detail,
                error: e.to_string(),
            },
        }
    }

    /// What the readers quarantined since last asked ([`Database::quarantine`]), oldest first.
    pub fn take_quarantined(&self) -> Vec<Quarantined> {
        std::mem::take(&mut self.quarantined.borrow_mut())
    }

    /// Say on `err` what the readers quarantined since last asked.
    pub fn report_quarantined(&self, err: &mut impl std::io::Write) -> std::io::Result<()> {
        for done in self.take_quarantined() {
            writeln!(err, "mpistat: {done}")?;
        }
        Ok(())
    }

    /// Jobs queued for the escalation rules, in arrival order (from the queue alone).
    pub fn queued_jobs(&self) -> anyhow::Result<Vec<QueuedJob>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, uid, app, traced FROM escalation_queue ORDER BY id")?;
        let rows = stmt.query_map([], |row| {
            Ok(QueuedJob {
                id: row.get(0)?,
                uid: row.get(1)?,
                app: row.get(2)?,
                traced: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A job as filed (no record is read), if it is still there.
    pub fn filed_job(&self, id: i64) -> anyhow::Result<Option<FiledJob>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {INDEX_COLUMNS} FROM jobs WHERE id = ?1"),
                [id],
                FiledJob::from_row,
            )
            .optional()?)
    }

    /// The escalation rules have looked at these jobs (and their traces are analysed, if any).
    pub fn unqueue(&self, ids: impl IntoIterator<Item = i64>) -> anyhow::Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut delete = tx.prepare("DELETE FROM escalation_queue WHERE id = ?1")?;
            for id in ids {
                delete.execute([id])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Keys of the jobs reported incomplete.
    pub fn incomplete_keys(&self) -> anyhow::Result<std::collections::HashSet<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT ref FROM rejected WHERE kind = 'incomplete'")?;
        let rows = stmt.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Analyses filed by ingest, not yet matched to their jobs (oldest first).
    pub fn analysis_inbox(&self) -> anyhow::Result<Vec<Received>> {
        let mut stmt = self.conn.prepare(
            "SELECT key, job_key, uid, user, host, dir, summary, error, analysed_ms, received_ms,
                 source, looked_to FROM analysis_inbox ORDER BY received_ms, key",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok(Received {
                analysis: AnalysisRecord {
                    version: mpistat_record::analysis::ANALYSIS_MODEL_VERSION,
                    job_key: row.get(1)?,
                    uid: row.get(2)?,
                    user: row.get(3)?,
                    host: row.get(4)?,
                    dir: row.get(5)?,
                    summary: row.get(6)?,
                    error: row.get(7)?,
                    analysed_unix_ms: row.get(8)?,
                },
                key: row.get(0)?,
                received_ms: row.get(9)?,
                source: row.get(10)?,
                looked_to: row.get(11)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The job of `received` as filed (the last stored, should there be several): the job of
    /// the analysis' (attested) uid whose lines had the key its trace directory named
    /// ([`stored_key`]); only when that uid has none, another uid's job of that wire key (which
    /// the caller rejects: not the sender's). No record
    /// read, looked for only among the rows stored since it was last looked for (no index
    /// leads to a key, see [`Database::job`]: this reads those rows). When there is none, the
    /// rows up to the last one now are marked as looked at.
    pub fn job_of_analysis(&self, received: &Received) -> anyhow::Result<Option<FiledJob>> {
        let last: i64 =
            self.conn
                .query_row("SELECT coalesce(max(id), 0) FROM jobs", [], |row| {
                    row.get(0)
                })?;
        let found = self
            .conn
            .query_row(
                &format!(
                    "SELECT {INDEX_COLUMNS} FROM jobs WHERE id > ?1 AND id <= ?2
                         AND key >= ?3 || '-' AND key < ?3 || '.'
                     ORDER BY key = ?4 DESC, jobs.id DESC LIMIT 1"
                ),
                params![
                    received.looked_to,
                    last,
                    received.analysis.job_key,
                    stored_key(&received.analysis.job_key, received.analysis.uid)
                ],
                FiledJob::from_row,
            )
            .optional()?;
        if found.is_none() {
            self.conn.execute(
                "UPDATE analysis_inbox SET looked_to = ?1 WHERE key = ?2 AND uid = ?3",
                params![last, received.key, received.analysis.uid],
            )?;
        }
        Ok(found)
    }

    /// Store `analysis` as the analysis of the job filed as `job` (its summary, or why it
    /// failed), taking it out of the inbox.
    pub fn store_analysis(&self, job: &JobIndex, analysis: &AnalysisRecord) -> anyhow::Result<()> {
        let status = if analysis.summary.is_some() {
            "ok"
        } else {
            "failed"
        };
        let tx = self.conn.unchecked_transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO analyses (key, user, end_ms, job_id, app, dir, status, summary,
                 error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        tx.execute(
            "DELETE FROM analysis_inbox WHERE key = ?1 AND uid = ?2",
            params![analysis.key(), analysis.uid],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Move `received` out of the inbox into `rejected` (`kind`, e.g. `forged`, and why).
    pub fn reject_analysis(
        &self,
        received: &Received,
        kind: &str,
        detail: &str,
    ) -> anyhow::Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        tx.execute(
            "INSERT OR IGNORE INTO rejected (kind, ref, source, detail, line)
             VALUES (?1, ?2, ?3, ?4, NULL)",
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
        tx.execute(
            "DELETE FROM analysis_inbox WHERE key = ?1 AND uid = ?2",
            params![received.key, received.analysis.uid],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Every stored analysis by job key (few: only traced jobs have one).
    pub fn analyses_by_key(&self) -> anyhow::Result<HashMap<String, StoredAnalysis>> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, job_id, app, dir, summary, error FROM analyses")?;
        let rows = stmt.query_map([], |row| {
            Ok((
                row.get(0)?,
                StoredAnalysis {
                    job_id: row.get(1)?,
                    app: row.get(2)?,
                    dir: row.get(3)?,
                    summary: row.get(4)?,
                    error: row.get(5)?,
                },
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The analyses of `user`'s jobs that ended in `[from_ms, to_ms)`, in end order.
    pub fn analyses_between(
        &self,
        user: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> anyhow::Result<Vec<StoredAnalysis>> {
        let mut stmt = self.conn.prepare(
            "SELECT job_id, app, dir, summary, error FROM analyses
             WHERE user = ?1 AND end_ms >= ?2 AND end_ms < ?3 ORDER BY end_ms, key",
        )?;
        let rows = stmt.query_map(params![user, from_ms, to_ms], |row| {
            Ok(StoredAnalysis {
                job_id: row.get(0)?,
                app: row.get(1)?,
                dir: row.get(2)?,
                summary: row.get(3)?,
                error: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn mail_status(&self, user: &str, week: &str) -> anyhow::Result<Option<MailStatus>> {
        Ok(self
            .conn
            .query_row(
                "SELECT status, attempts, error FROM mails WHERE user = ?1 AND week = ?2",
                params![user, week],
                |row| {
                    let status: String = row.get(0)?;
                    Ok(if status == "sent" {
                        MailStatus::Sent
                    } else {
                        MailStatus::Failed {
                            attempts: row.get(1)?,
                            error: row.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        }
                    })
                },
            )
            .optional()?)
    }

    /// Weeks with mails that failed and are still to be sent.
    pub fn failed_mail_weeks(&self) -> anyhow::Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT week FROM mails WHERE status = 'failed' ORDER BY week")?;
        let rows = stmt.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Record the outcome of one attempt to send (user, week)'s mail to `recipient`.
    pub fn record_mail(
        &self,
        user: &str,
        week: &str,
        recipient: &str,
        outcome: Result<(), &str>,
    ) -> anyhow::Result<()> {
        let (status, error) = match outcome {
            Ok(()) => ("sent", None),
            Err(e) => ("failed", Some(e)),
        };
        self.conn.execute(
            "INSERT INTO mails (user, week, status, attempts, error, recipient)
             VALUES (?1, ?2, ?3, 1, ?4, ?5)
             ON CONFLICT (user, week) DO UPDATE SET status = ?3, attempts = attempts + 1,
                 error = ?4, recipient = ?5",
            params![user, week, status, error, recipient],
        )?;
        Ok(())
    }
}

/// A job's stored record: deflated JSON (BLOB) or plain JSON (TEXT), read within the
/// record's limits ([`wire::stored_record`]): a row with more is not usable.
fn stored_record(stored: Value) -> anyhow::Result<JobRecord> {
    match stored {
        Value::Blob(deflated) => inflated_record(&deflated),
        Value::Text(json) => Ok(wire::stored_json_record(json.as_bytes())?),
        other => anyhow::bail!("unexpected {:?}", other.data_type()),
    }
}

/// A record from its raw-DEFLATE JSON (as stored, and as [`JobRow::deflated`]), within the
/// record's limits ([`wire::stored_record`]).
pub fn inflated_record(deflated: &[u8]) -> anyhow::Result<JobRecord> {
    Ok(wire::stored_record(deflated)?)
}

/// `record` as stored (its JSON, raw-DEFLATE compressed), made here rather than sent: see
/// [`crate::ingest::partials`].
pub fn deflated_record(record: &JobRecord) -> Vec<u8> {
    use std::io::Write;
    let json = serde_json::to_vec(record).expect("a JobRecord always serialises");
    let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&json).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// `stored` as the record of `filed`, or why it is not usable.
fn checked_record(filed: &FiledJob, stored: Value) -> Result<JobRecord, String> {
    let record =
        stored_record(stored).map_err(|e| format!("the stored record is not readable: {e:#}"))?;
    let differences = filed.differences(&record);
    if differences.is_empty() {
        Ok(record)
    } else {
        Err(format!(
            "the stored record is not the one filed (filed vs record: {})",
            differences.join("; ")
        ))
    }
}

/// The columns of `jobs` that hold a job's key and index, as [`FiledJob::from_row`] reads them.
const INDEX_COLUMNS: &str = "jobs.id, key, model_version, job_id, uid, user, exe, host, pid, \
     ranks, start_ms, end_ms, wall_ns_sum, wall_ns_max, mpi_ns_sum, partial, critical_path_ns, \
     work_sum_ns, traced, app";

/// How many [`INDEX_COLUMNS`] there are (the next column of a query is at this index).
const INDEX_COLUMN_COUNT: usize = 20;

/// A job as a row of `jobs` files it: its key and index, without its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiledJob {
    /// The row's id (arrival order).
    pub id: i64,
    pub key: String,
    /// The index as filed; in a row stored before schema 4 (`complete` false) the fields it has
    /// no column for are defaults.
    pub index: JobIndex,
    /// The row has the whole index (stored by schema 4 or later).
    pub complete: bool,
}

impl FiledJob {
    /// From a row whose first columns are [`INDEX_COLUMNS`].
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<FiledJob> {
        let version: Option<u32> = row.get(2)?;
        let critical_path_ns: Option<u64> = row.get(16)?;
        let work_sum_ns: Option<u64> = row.get(17)?;
        Ok(FiledJob {
            id: row.get(0)?,
            key: row.get(1)?,
            complete: version.is_some(),
            index: JobIndex {
                version: version.unwrap_or_default(),
                job_id: row.get(3)?,
                uid: row.get(4)?,
                user: row.get(5)?,
                exe: row.get(6)?,
                app: row.get::<_, Option<String>>(19)?.unwrap_or_default(),
                host: row.get::<_, Option<String>>(7)?.unwrap_or_default(),
                pid: row.get::<_, Option<u32>>(8)?.unwrap_or_default(),
                ranks: row.get(9)?,
                start_unix_ms: row.get(10)?,
                end_unix_ms: row.get(11)?,
                wall_ns_sum: row.get(12)?,
                wall_ns_max: row.get::<_, Option<u64>>(13)?.unwrap_or_default(),
                mpi_ns_sum: row.get(14)?,
                partial: row.get(15)?,
                imbalance: critical_path_ns.zip(work_sum_ns).map(
                    |(critical_path_ns, work_sum_ns)| IndexImbalance {
                        critical_path_ns,
                        work_sum_ns,
                    },
                ),
                traced: row.get(18)?,
            },
        })
    }

    /// How `record` differs from what was filed, as in [`JobIndex::differences`] (filed value
    /// first); empty when it is the filed record. A row stored before schema 4 is compared on
    /// the columns it has.
    pub fn differences(&self, record: &JobRecord) -> Vec<String> {
        let own = JobIndex::of(record);
        let filed = if self.complete {
            self.index.clone()
        } else {
            JobIndex {
                version: own.version,
                host: own.host.clone(),
                pid: own.pid,
                wall_ns_max: own.wall_ns_max,
                imbalance: own.imbalance,
                traced: own.traced.clone(),
                ..self.index.clone()
            }
        };
        let mut differences = if filed == own {
            Vec::new()
        } else {
            filed.differences(&own)
        };
        if record.key() != self.key {
            differences.push(format!("key: {} vs {}", self.key, record.key()));
        }
        differences
    }
}

/// An analysis record as filed by ingest (table `analysis_inbox`), waiting for its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The analysis record's key ([`AnalysisRecord::key`]).
    pub key: String,
    pub analysis: AnalysisRecord,
    /// When ingest filed it (ms since the epoch).
    pub received_ms: u64,
    /// The file it came from.
    pub source: String,
    /// The last job row its job was looked for in (0: not yet).
    pub looked_to: i64,
}

/// A job queued for the escalation rules (table `escalation_queue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedJob {
    /// The job's row (`jobs.id`).
    pub id: i64,
    pub uid: u32,
    /// [`JobIndex::application`].
    pub app: String,
    /// Whether it was traced; `None` for jobs stored before the index had columns.
    pub traced: Option<bool>,
}

/// What the `jobs` table keeps of a job: its key, its index (as columns) and the record as the
/// deflated JSON it came in.
#[derive(Debug, Clone)]
pub struct JobRow {
    /// [`JobIndex::key`]: its wire key and uid.
    pub key: String,
    /// Where its lines came from (`jobs.origin`), if they named it.
    pub origin: Option<String>,
    /// The file it was read from (for a rejected entry).
    pub source: std::sync::Arc<str>,
    pub index: JobIndex,
    pub deflated: Vec<u8>,
    /// Queue it for the escalation rules (table `escalation_queue`) when it is stored.
    pub look: bool,
    /// Its record was read (and is the one filed) and counted in the rollups of its batch
    /// ([`crate::rollup`]), which are saved as they are if every counted job of the batch is
    /// new when stored.
    pub counted: bool,
    /// Why the record is not usable (unreadable, or not the one its index says), when it is
    /// not: ingest rejects the job (as `corrupt`) once its sender is known to be the index's.
    pub unusable: Option<Box<Problem>>,
}

impl JobRow {
    /// A job known by its index alone: its record is not usable (`problem` says why).
    pub fn unusable(job: IndexedJob, problem: Problem) -> JobRow {
        JobRow {
            key: job.index.key(),
            origin: None,
            source: "".into(),
            index: job.index,
            deflated: job.deflated,
            look: false,
            counted: false,
            unusable: Some(Box::new(problem)),
        }
    }

    /// A job whose record was read (and is the one its index says), counted in `rollups`.
    pub fn decoded(job: DecodedJob, rollups: &mut Rollups) -> JobRow {
        rollups.add(&job.record);
        let index = JobIndex::of(&job.record);
        JobRow {
            key: index.key(),
            origin: None,
            source: "".into(),
            index,
            deflated: job.deflated,
            look: false,
            counted: true,
            unusable: None,
        }
    }

    /// The key of its syslog lines ([`JobIndex::wire_key`]), which rejected entries name.
    pub fn wire_key(&self) -> String {
        self.index.wire_key()
    }

    /// The rejected entry of this job when another record of it (same key and end) is stored
    /// already and is not this one (`stored`: that record, deflated, and where it came from),
    /// from `source`; none when it is this one (a line read again, a record sent twice).
    pub fn collision(&self, stored: (Vec<u8>, Option<String>)) -> Option<Rejected> {
        let (record, origin) = stored;
        // Rows stored before schema 13 do not say where they came from.
        if record == self.deflated && (origin.is_none() || origin == self.origin) {
            return None;
        }
        let index = &self.index;
        let from = |origin: &Option<String>| origin.clone().unwrap_or_else(|| "-".into());
        Some(Rejected {
            kind: "collision",
            reference: format!("{}/end {}", self.key, index.end_unix_ms),
            source: self.source.to_string(),
            detail: format!(
                "job {} of uid {} ({}), from {}: uid {} sent another record of this job (same \
                 job id, host, pid, start and end), from {}, stored before; this one differs",
                index.job_id,
                index.uid,
                index.user,
                from(&self.origin),
                index.uid,
                from(&origin)
            ),
            line: None,
        })
    }
}

/// What [`IngestBatch::insert_job`] did.
#[derive(Debug)]
pub enum Inserted {
    New,
    /// The same record was stored before (a line read again, a record sent twice).
    Again,
    /// Another record of the same key and end was stored before: this one is rejected so.
    Collision(Rejected),
}

/// Statements of one ingest transaction, prepared once.
pub struct IngestBatch<'conn> {
    conn: &'conn Connection,
    insert_job: rusqlite::Statement<'conn>,
    stored_job: rusqlite::Statement<'conn>,
    clear_incomplete: rusqlite::Statement<'conn>,
    insert_rejected: rusqlite::Statement<'conn>,
    queue: rusqlite::Statement<'conn>,
    insert_analysis: rusqlite::Statement<'conn>,
}

impl<'conn> IngestBatch<'conn> {
    pub fn new(tx: &'conn rusqlite::Transaction<'conn>) -> anyhow::Result<Self> {
        Ok(IngestBatch {
            conn: tx,
            insert_job: tx.prepare(
                "INSERT OR IGNORE INTO jobs (key, uid, user, job_id, exe, ranks, start_ms, end_ms,
                     wall_ns_sum, mpi_ns_sum, partial, record, model_version, host, pid,
                     wall_ns_max, critical_path_ns, work_sum_ns, traced, app, origin)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                     ?17, ?18, ?19, ?20, ?21)",
            )?,
            stored_job: tx
                .prepare("SELECT record, origin FROM jobs WHERE end_ms = ?1 AND key = ?2")?,
            clear_incomplete: tx
                .prepare("DELETE FROM rejected WHERE kind = 'incomplete' AND ref = ?1")?,
            insert_rejected: tx.prepare(INSERT_REJECTED)?,
            queue: tx.prepare(
                "INSERT OR IGNORE INTO escalation_queue (id, uid, app, traced)
                 VALUES (?1, ?2, ?3, ?4)",
            )?,
            insert_analysis: tx.prepare(
                "INSERT OR IGNORE INTO analysis_inbox (key, job_key, uid, user, host, dir,
                     summary, error, analysed_ms, received_ms, source)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?,
        })
    }

    /// The job with key `key` came whole after the database reported it incomplete: the
    /// report is withdrawn.
    pub fn clear_incomplete(&mut self, key: &str) -> anyhow::Result<()> {
        self.clear_incomplete.execute(params![key])?;
        Ok(())
    }

    /// Store a job (once: a job already there is left alone) with its index and deflated
    /// record, queued for the escalation rules if it is new and [`JobRow::look`]. Returns
    /// whether it was new, and if not, whether the stored one is another record
    /// ([`JobRow::collision`]: then it is to be rejected).
    pub fn insert_job(&mut self, job: &JobRow) -> anyhow::Result<Inserted> {
        if self.insert_new_job(job)? {
            return Ok(Inserted::New);
        }
        let stored = self
            .stored_job
            .query_row(params![job.index.end_unix_ms, job.key], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
        Ok(match job.collision(stored) {
            Some(rejected) => Inserted::Collision(rejected),
            None => Inserted::Again,
        })
    }

    fn insert_new_job(&mut self, job: &JobRow) -> anyhow::Result<bool> {
        let index = &job.index;
        let imbalance = index.imbalance.as_ref();
        let inserted = self.insert_job.execute(params![
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
        ])?;
        if inserted == 1 && job.look {
            self.queue.execute(params![
                self.conn.last_insert_rowid(),
                index.uid,
                index.application(),
                index.traced.is_some()
            ])?;
        }
        Ok(inserted == 1)
    }

    /// File an analysis record whose sender may have sent it (once: a repeat is ignored), for
    /// [`crate::escalate::after_ingest`] to match to its job.
    pub fn insert_analysis(&mut self, received: &Received) -> anyhow::Result<()> {
        let a = &received.analysis;
        self.insert_analysis.execute(params![
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
        ])?;
        Ok(())
    }

    pub fn insert_rejected(&mut self, rejected: &Rejected) -> anyhow::Result<()> {
        insert_rejected_with(&mut self.insert_rejected, rejected)
    }
}

/// The statement of [`insert_rejected`].
const INSERT_REJECTED: &str = "INSERT OR IGNORE INTO rejected (kind, ref, source, detail, line)
     VALUES (?1, ?2, ?3, ?4, ?5)";

/// Add `rejected` to the rejected entries in `tx` (once: the same kind and reference again is
/// ignored).
pub fn insert_rejected(tx: &rusqlite::Transaction<'_>, rejected: &Rejected) -> anyhow::Result<()> {
    insert_rejected_with(&mut *tx.prepare_cached(INSERT_REJECTED)?, rejected)
}

fn insert_rejected_with(
    statement: &mut rusqlite::Statement<'_>,
    rejected: &Rejected,
) -> anyhow::Result<()> {
    statement.execute(params![
        rejected.kind,
        rejected.reference,
        rejected.source,
        rejected.detail,
        rejected.line
    ])?;
    Ok(())
}

/// Create or update the position row of a file; returns its id.
pub fn save_position(
    tx: &rusqlite::Transaction<'_>,
    position: &Position,
    path: &str,
) -> anyhow::Result<i64> {
    if position.id > 0 {
        tx.execute(
            "UPDATE positions SET head_len = ?2, head_crc = ?3, offset = ?4, path = ?5, stat = ?6
             WHERE id = ?1",
            params![
                position.id,
                position.head_len,
                position.head_crc,
                position.offset,
                path,
                position.stat
            ],
        )?;
        Ok(position.id)
    } else {
        tx.execute(
            "INSERT INTO positions (head_len, head_crc, offset, path, stat)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                position.head_len,
                position.head_crc,
                position.offset,
                path,
                position.stat
            ],
        )?;
        Ok(tx.last_insert_rowid())
    }
}
