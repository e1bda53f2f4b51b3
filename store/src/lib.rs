//! The database `mpistat ingest` fills and the digest, the pages and `serve` read: the only
//! code that speaks SQL, and the only one that depends on a database driver (SQLite, through
//! rusqlite; PostgreSQL, through `postgres`). No driver type crosses this crate's API; its
//! errors are [`Error`]. Both handles run on either backend, with one list of statements
//! (`db.rs` names where the dialects differ); [`Location`] says which.
//!
//! Two handles:
//! * [`WriteStore`] (ingest, escalation, mail bookkeeping, `rebuild-rollups`, `db migrate`):
//!   creates the database, brings its schema up to date ([`WriteStore::migrate`], the only
//!   place migrations run), writes, and moves a job whose stored record is not usable to the
//!   rejected entries ([`ReadStore::take_quarantined`]).
//! * [`ReadStore`] (digest figures, site report, serve, show): opened read-only
//!   (`SQLITE_OPEN_READ_ONLY`, `query_only`; a read-only PostgreSQL session); it never migrates, quarantines, rebuilds or
//!   deletes. A database whose schema is not this mpistat's is refused (run `mpistat db
//!   migrate`); a stored record that is not usable is skipped and said, left for the write side.
//!
//! Stored records are read only through `mpistat_record::wire` (its limits and version checks).
//! The store keeps rows; it does not compute figures: the rollups are stored as the JSON their
//! owner (the digest's `rollup`) gives and returned as such ([`rollups`]).
//!
//! Tables:
//!
//! * `jobs`: one row per job record, in the order ingest stored them, unique by end time and
//!   key (index `jobs_by_end`, which new rows append to; a unique index of the key alone, a
//!   hash, took a random page for every insert); the record itself as JSON, raw-DEFLATE
//!   compressed (a BLOB: as it came over the wire; a TEXT value is read as plain JSON), plus its
//!   [`JobIndex`](mpistat_record::JobIndex) as columns: what the digest selects on and the
//!   escalation rule looks at. Ingest files a job by the index the sender wrote next to the
//!   record (wire version 2), and decodes the record (for the rollups): one that is not the
//!   index's is rejected there. A stored record may still have changed since (or predate that
//!   check): every reader here checks it against the row's index ([`FiledJob::differences`]),
//!   and a record that disagrees, or cannot be read, is never used: the write handle moves it
//!   to `rejected` as `corrupt` ([`WriteStore::quarantine`]), the read handle skips it. (Rows
//!   stored before schema 4 have only some of the index's columns, the rest NULL: ingest made
//!   them from the decoded record; they are checked on the columns they have. Schema 1 kept the
//!   rows in key order, which made every insert of a big ingest touch a random page of the
//!   whole table.) New databases have 64 KiB pages (rows are a few kB).
//! * `rejected`: everything ingest did not store as a job (forged, incomplete, corrupt,
//!   unsupported, duplicate and conflicting lines), keyed by kind and a reference (a job key, or
//!   `<file id>:<byte offset>` of a line), so that reading the same input again adds nothing.
//! * `positions`: how far each input file has been read. A file is identified by its first bytes
//!   (`head_len`, `head_crc`), which survive renaming and compression by logrotate; `offset` is
//!   where reading resumes (in the uncompressed text). `position_hosts`: the log host whose file
//!   each position is ([`WriteStore::set_position_host`], by default this machine's name), so
//!   that several ingests, one per log host, into one database each resume their own files; a
//!   position without one is from before, taken over by the first host that saves it.
//! * `mails`: one row per (user, week) mail: sent, or failed with the error and the number of
//!   attempts.
//! * `escalation_queue`: jobs the escalation rules are still to look at (traced, or meeting the
//!   rule, queued by ingest with the job: by row id, with uid, application and whether traced,
//!   so a job of a listed (uid, application) is passed over without reading its row);
//!   `analyses`: the trace analyses of traced jobs, from the analysis records their users sent
//!   (`analysis_inbox`: filed by ingest, waiting to be matched to their jobs).
//! * For the metrics of `mpistat serve` (the digest's `metrics`), counts per hour that are no
//!   rollups of the jobs: `escalation_rule_hours` (jobs that met the escalation rule, as ingest
//!   judged them when it stored them), `rejected_hours` (rejected entries made per hour and kind,
//!   kept by triggers on `rejected`, which also stamp each entry's `rejected_ms`), and
//!   `ingest_clock` (the time of the newest syslog line ingest read).
//! * `partial_inbox`: the partial records of a job on several nodes that ingest holds until
//!   their other half comes, with when it held them (`held_ms`), and keeps afterwards (stored
//!   as one job with their twin, alone, or not at all: their twin was stored alone before they
//!   came) ([`partials`]).
//! * `rollup_*` (also per hour: `rollup_hours`, `rollup_hour_groups`), `critical_jobs`,
//!   `rollup_state`: the digest's rollups ([`rollups`]).

#[cfg(test)]
mod backends;
mod copy;
mod db;
mod location;
pub mod partials;
pub mod pool;
pub mod postgresql;
mod read;
pub mod rollups;
mod rows;
mod schema;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
mod write;

pub use copy::{copy, Copied};
pub use location::{Location, PostgresUrl};
pub use read::ReadStore;
pub use rows::{
    deflated_record, inflated_record, CriticalEntry, FiledJob, Inserted, JobOrder, JobRow,
    MailStatus, PeriodTotals, Position, Quarantined, QueuedJob, Received, Rejected, StoredAnalysis,
};
pub use schema::MIGRATIONS;
pub use write::{Checkpointer, WriteStore, WriteTx};

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open database {location}: {reason}")]
    Open { location: Location, reason: String },
    /// `[database]` or `--database` names no database this mpistat can open.
    #[error("not a database location: {location}: {reason}")]
    Location { location: String, reason: String },
    #[error("schema version {found} is newer than this mpistat ({known})")]
    NewerSchema { found: usize, known: usize },
    #[error(
        "database {location} has schema version {found}, this mpistat needs {known}: run \
         `mpistat db migrate` (or mpistat ingest) as the database's owner first"
    )]
    NotMigrated {
        location: Location,
        found: usize,
        known: usize,
    },
    #[error("cannot upgrade the schema of {location}: {reason}")]
    Migration { location: Location, reason: String },
    /// A statement failed (the driver's message).
    #[error("{0}")]
    Sql(String),
    /// Stored data (JSON of a column) is not what it should be.
    #[error("stored data: {0}")]
    Data(String),
    /// A record could not be read (`mpistat_record::wire::stored_record`).
    #[error("{0}")]
    Record(#[from] mpistat_record::wire::Unreadable),
}

impl Error {
    /// A reader's check of a database's schema version `found` against the `known` one: a
    /// newer or an older one is refused (only the write side migrates).
    pub(crate) fn unless_current(
        found: usize,
        known: usize,
        location: impl FnOnce() -> Location,
    ) -> Result<()> {
        match found.cmp(&known) {
            std::cmp::Ordering::Greater => Err(Error::NewerSchema { found, known }),
            std::cmp::Ordering::Less => Err(Error::NotMigrated {
                location: location(),
                found,
                known,
            }),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Error {
        Error::Sql(e.to_string())
    }
}

impl From<rusqlite::types::FromSqlError> for Error {
    fn from(e: rusqlite::types::FromSqlError) -> Error {
        Error::Sql(e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::Data(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
