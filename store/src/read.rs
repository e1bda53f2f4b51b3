//! The read handle, and the reads both handles share.

use crate::db::{Begin, Db, Dialect};
use crate::pool::OrderedPool;
use crate::rows::{checked_record, INDEX_COLUMNS, INDEX_COLUMN_COUNT};
use crate::{
    Error, FiledJob, Location, MailStatus, Position, Quarantined, QueuedJob, Received, Result,
    StoredAnalysis, MIGRATIONS,
};
use mpistat_record::JobRecord;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, ToSql};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How long opening and writing wait for another process's transaction.
pub(crate) const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Pages kept in memory by a connection (KiB, as SQLite's negative `cache_size`): readers (digest,
/// site report) go through a week's rows and their records, and 64 MiB keep a good part of a
/// busy week's pages.
pub(crate) const CACHE_KIB: i64 = 65_536;

/// A database opened to read: read-only (SQLite: `SQLITE_OPEN_READ_ONLY` and `query_only`;
/// PostgreSQL: a read-only session), its schema this mpistat's (else it is refused: only the
/// write side migrates). Its reads are also the write handle's ([`crate::WriteStore`] derefs to
/// one); there, a job whose stored record is not usable is quarantined, here it is only skipped
/// ([`Quarantined::Left`]).
pub struct ReadStore {
    pub(crate) db: Db,
    /// The write handle's reader: moves unusable records to the rejected entries.
    pub(crate) writable: bool,
    /// Read as a snapshot (SQLite's `immutable`): neither the database's directory nor a `-shm`
    /// file could be written and no writer had it open. The file's modification time then, to
    /// open it again when a writer came since ([`ReadStore::refresh`]).
    snapshot: Option<(PathBuf, Option<SystemTime>)>,
    /// What readers quarantined or skipped and nobody has taken yet
    /// ([`ReadStore::take_quarantined`]): the command says so where it reports.
    quarantined: RefCell<Vec<Quarantined>>,
    /// The log host whose files' read positions this handle reads (and its write handle saves):
    /// this machine's name unless set ([`crate::WriteStore::set_position_host`]).
    pub(crate) position_host: String,
}

/// This machine's name (empty if it cannot be read): the log host of the files ingest reads.
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

impl ReadStore {
    pub(crate) fn of(db: Db, writable: bool) -> ReadStore {
        ReadStore {
            db,
            writable,
            snapshot: None,
            quarantined: RefCell::new(Vec::new()),
            position_host: this_host(),
        }
    }

    /// Open the database at `location` to read ([`ReadStore::open`] for a SQLite file; a
    /// PostgreSQL database in a read-only session).
    pub fn open_at(location: &Location) -> Result<ReadStore> {
        match location {
            Location::Sqlite(path) => ReadStore::open(path),
            Location::Postgres(url) => Ok(ReadStore::of(
                Db::postgres(url.clone(), crate::postgresql::connect_to_read(url)?),
                false,
            )),
        }
    }

    /// Open the database at `path` to read. It must exist and have this mpistat's schema.
    ///
    /// SQLite reads a database in WAL mode through its `-shm` file, which a reader that may not
    /// write the database's directory cannot make when no writer has the database open: then
    /// it is read as a snapshot (`immutable`; no writer is there to change it), and opened
    /// again by [`ReadStore::refresh`] once a writer has come.
    pub fn open(path: &Path) -> Result<ReadStore> {
        let opened = |reason: rusqlite::Error| Error::Open {
            location: Location::Sqlite(path.to_path_buf()),
            reason: reason.to_string(),
        };
        let conn = read_only(path, false).map_err(opened)?;
        let (conn, snapshot) = match schema_version(&conn) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen
                ) && !wal_of(path).exists() =>
            {
                drop(conn);
                let conn = read_only(path, true).map_err(opened)?;
                (conn, Some((path.to_path_buf(), modified(path))))
            }
            _ => (conn, None),
        };
        let found = schema_version(&conn).map_err(opened)?;
        // After the first read: setting it reads the schema, which needs the `-shm`.
        conn.pragma_update(None, "cache_size", -CACHE_KIB)
            .map_err(opened)?;
        Error::unless_current(found, MIGRATIONS.len(), || {
            Location::Sqlite(path.to_path_buf())
        })?;
        Ok(ReadStore {
            snapshot,
            ..ReadStore::of(Db::sqlite(conn), false)
        })
    }

    /// A read handle read as a snapshot ([`ReadStore::open`]) is opened again if a writer has
    /// come since (a `-wal` file, or another modification time): a long-lived reader
    /// (`serve`'s workers) calls this before each request. A PostgreSQL reader whose session
    /// the server closed (a restart, an administrator) connects again (asking the server
    /// costs a round trip).
    pub fn refresh(&mut self) -> Result<()> {
        if let Db::Postgres(pg) = &self.db {
            if !self.writable && pg.is_closed() {
                *self = ReadStore::open_at(&Location::Postgres(pg.url.clone()))?;
            }
            return Ok(());
        }
        if let Some((path, then)) = &self.snapshot {
            if wal_of(path).exists() || modified(path) != *then {
                let path = path.clone();
                *self = ReadStore::open(&path)?;
            }
        }
        Ok(())
    }

    /// The database's file (`None`: in memory, or PostgreSQL).
    pub fn path(&self) -> Option<PathBuf> {
        match &self.db {
            Db::Sqlite(conn) => conn.path().filter(|p| !p.is_empty()).map(PathBuf::from),
            Db::Postgres(_) => None,
        }
    }

    /// Where another handle opens this database ([`ReadStore::open_at`]; `None`: a SQLite
    /// database in memory, which only this handle reaches).
    pub fn location(&self) -> Option<Location> {
        match &self.db {
            Db::Sqlite(_) => self.path().map(Location::Sqlite),
            Db::Postgres(postgres) => Some(Location::Postgres(postgres.url.clone())),
        }
    }

    /// The read positions of this handle's log host's files ([`ReadStore::position_host`]),
    /// and those kept before positions had a host.
    pub fn positions(&self) -> Result<Vec<Position>> {
        self.db.query(
            r#"SELECT p.id, p.head_len, p.head_crc, p."offset", p.stat
             FROM positions p LEFT JOIN position_hosts h ON h.id = p.id
             WHERE h.host = ?1 OR h.host IS NULL ORDER BY p.id"#,
            &[&self.position_host],
            |row| {
                Ok(Position {
                    id: row.get(0)?,
                    head_len: row.get(1)?,
                    head_crc: row.get(2)?,
                    offset: row.get(3)?,
                    stat: row.get(4)?,
                })
            },
        )
    }

    /// The log host whose files' read positions [`ReadStore::positions`] gives.
    pub fn position_host(&self) -> &str {
        &self.position_host
    }

    /// Every file's last name and read position (of every log host).
    pub fn position_paths(&self) -> Result<Vec<(String, u64)>> {
        self.db.query(
            r#"SELECT path, "offset" FROM positions ORDER BY id"#,
            &[],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    pub fn job_count(&self) -> Result<u64> {
        self.db
            .query_one("SELECT count(*) FROM jobs", &[], |row| row.get(0))
    }

    /// Rejected entries (kind, reference, source, detail), by kind then reference.
    pub fn rejected(&self) -> Result<Vec<(String, String, String, String)>> {
        self.db.query(
            "SELECT kind, ref, source, detail FROM rejected ORDER BY kind, ref",
            &[],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
    }

    /// Records of jobs that ended in `[from_ms, to_ms)`, in end order (all in memory: the
    /// weekly digest takes them one by one with [`ReadStore::each_job_ended_between`]).
    pub fn jobs_ended_between(&self, from_ms: u64, to_ms: u64) -> Result<Vec<JobRecord>> {
        let mut records = Vec::new();
        self.each_job_ended_between(from_ms, to_ms, |record| records.push(record))?;
        Ok(records)
    }

    /// Give `each` the record of every job that ended in `[from_ms, to_ms)`, in end order. The
    /// records are decoded (and checked against their rows, see [`FiledJob::differences`]) on
    /// other threads meanwhile (see [`OrderedPool`]); those that are not usable are skipped (and
    /// quarantined by the write handle) at the end (see [`ReadStore::take_quarantined`]).
    pub fn each_job_ended_between(
        &self,
        from_ms: u64,
        to_ms: u64,
        mut each: impl FnMut(JobRecord),
    ) -> Result<()> {
        self.each_filed_job_ended_between(from_ms, to_ms, |_, record| each(record))
    }

    /// [`ReadStore::each_job_ended_between`], with each record's row as filed.
    pub fn each_filed_job_ended_between(
        &self,
        from_ms: u64,
        to_ms: u64,
        each: impl FnMut(&FiledJob, JobRecord),
    ) -> Result<()> {
        self.each_filed_job(
            &format!(
                "SELECT {INDEX_COLUMNS}, record FROM jobs WHERE end_ms >= ?1 AND end_ms < ?2
                 ORDER BY end_ms, key"
            ),
            &[&from_ms, &to_ms],
            each,
        )
    }

    /// The jobs of the rows `ids` (those that are stored), in end order, as
    /// [`ReadStore::each_filed_job_ended_between`].
    pub fn each_filed_job_of_rows(
        &self,
        ids: &[i64],
        each: impl FnMut(&FiledJob, JobRecord),
    ) -> Result<()> {
        // The ids go as one JSON array, whose elements each dialect lists its own way.
        let elements = match self.db.dialect() {
            Dialect::Sqlite => "SELECT value FROM json_each(?1)",
            Dialect::Postgres => {
                "SELECT jsonb_array_elements_text(CAST(?1 AS TEXT)::JSONB)::BIGINT"
            }
        };
        self.each_filed_job(
            &format!(
                "SELECT {INDEX_COLUMNS}, record FROM jobs WHERE id IN ({elements})
                 ORDER BY end_ms, key"
            ),
            &[&serde_json::to_string(ids)?],
            each,
        )
    }

    /// Each usable record that `sql` (index columns, then the record) selects, decoded in
    /// parallel and handed over in order; the unusable ones are quarantined (or skipped) after.
    fn each_filed_job(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        mut each: impl FnMut(&FiledJob, JobRecord),
    ) -> Result<()> {
        let mut unusable = Vec::new();
        {
            let mut decoders = OrderedPool::new(|(filed, stored): (FiledJob, Value)| {
                let record = checked_record(&filed, stored);
                (filed, record)
            });
            let mut take = |(filed, record): (FiledJob, Result<JobRecord, String>)| match record {
                Ok(record) => each(&filed, record),
                Err(detail) => unusable.push((filed, detail)),
            };
            self.db.stream(sql, params, |row| {
                decoders.send((FiledJob::from_row(row)?, row.get(INDEX_COLUMN_COUNT)?));
                while let Some(decoded) = decoders.next(false) {
                    take(decoded);
                }
                Ok(false)
            })?;
            while let Some(decoded) = decoders.next(true) {
                take(decoded);
            }
        }
        for (filed, detail) in unusable {
            self.unusable(&filed, &detail);
        }
        Ok(())
    }

    /// The stored record of the job with key `key` (`None`: no such job, or its record is not
    /// usable). No index leads to a key alone (see `MIGRATIONS[4]`): this reads the entries of
    /// `jobs_by_key_digit` whose first digit is the key's (a sixteenth of the jobs, end time
    /// and key), never the rows, which suits a web page of one job reached by a link without
    /// its end time. Should records of one key end at different times, the one that ended last
    /// is taken.
    pub fn job(&self, key: &str) -> Result<Option<JobRecord>> {
        let end_ms: Option<u64> = self
            .db
            .query_opt(&self.job_by_key_query(), &[&key], |row| row.get(0))?;
        match end_ms {
            Some(end_ms) => self.job_ended_at(end_ms, key),
            None => Ok(None),
        }
    }

    /// The end time of the job of key `?1` that ended last ([`ReadStore::job`]).
    fn job_by_key_query(&self) -> String {
        format!(
            "SELECT end_ms FROM jobs {} WHERE substr(key, 1, 1) = substr(?1, 1, 1) AND key = ?1
             ORDER BY end_ms DESC LIMIT 1",
            self.indexed_by("jobs_by_key_digit")
        )
    }

    /// The stored record of the job that ended at `end_ms` with key `key` (by the unique index:
    /// a few page reads), if it is there and usable.
    pub fn job_ended_at(&self, end_ms: u64, key: &str) -> Result<Option<JobRecord>> {
        let found = self.db.query_opt(
            &format!("SELECT {INDEX_COLUMNS}, record FROM jobs WHERE end_ms = ?1 AND key = ?2"),
            &[&end_ms, &key],
            |row| Ok((FiledJob::from_row(row)?, row.get(INDEX_COLUMN_COUNT)?)),
        )?;
        Ok(found.and_then(|(filed, stored)| self.usable(&filed, stored)))
    }

    /// The records of the jobs `keys` (end time and key) that are there and usable, in that
    /// order.
    pub fn jobs_ended_at(&self, keys: &[(u64, String)]) -> Result<Vec<JobRecord>> {
        let mut jobs = Vec::with_capacity(keys.len());
        for (end_ms, key) in keys {
            jobs.extend(self.job_ended_at(*end_ms, key)?);
        }
        Ok(jobs)
    }

    /// The record of a job as filed, if it is usable.
    pub fn filed_record(&self, filed: &FiledJob) -> Result<Option<JobRecord>> {
        let stored: Option<Value> = self.db.query_opt(
            "SELECT record FROM jobs WHERE id = ?1",
            &[&filed.id],
            |row| row.get(0),
        )?;
        Ok(stored.and_then(|stored| self.usable(filed, stored)))
    }

    /// `stored` as the record of `filed` if it is that, else `None` (and the job quarantined or
    /// skipped).
    fn usable(&self, filed: &FiledJob, stored: Value) -> Option<JobRecord> {
        match checked_record(filed, stored) {
            Ok(record) => Some(record),
            Err(detail) => {
                self.unusable(filed, &detail);
                None
            }
        }
    }

    /// A job whose stored record is not usable (`detail`: why): moved to the rejected entries
    /// by the write handle, skipped by the read handle; noted for
    /// [`ReadStore::take_quarantined`].
    fn unusable(&self, filed: &FiledJob, detail: &str) {
        let index = &filed.index;
        let detail = format!(
            "job {} filed for uid {} ({}): {detail}",
            index.job_id, index.uid, index.user
        );
        let done = if self.writable {
            crate::write::quarantine(&self.db, filed, detail)
        } else {
            Quarantined::Left { detail }
        };
        self.quarantined.borrow_mut().push(done);
    }

    /// What the readers quarantined or skipped since last asked, oldest first.
    pub fn take_quarantined(&self) -> Vec<Quarantined> {
        std::mem::take(&mut self.quarantined.borrow_mut())
    }

    /// Say on `err` what the readers quarantined or skipped since last asked. Nothing is
    /// printed where it happens: a command may hold the stderr lock while another thread reads,
    /// as ingest does.
    pub fn report_quarantined(&self, err: &mut impl std::io::Write) -> std::io::Result<()> {
        for done in self.take_quarantined() {
            writeln!(err, "mpistat: {done}")?;
        }
        Ok(())
    }

    /// Jobs queued for the escalation rules, in arrival order (from the queue alone).
    pub fn queued_jobs(&self) -> Result<Vec<QueuedJob>> {
        self.db.query(
            "SELECT id, uid, app, traced FROM escalation_queue ORDER BY id",
            &[],
            |row| {
                Ok(QueuedJob {
                    id: row.get(0)?,
                    uid: row.get(1)?,
                    app: row.get(2)?,
                    traced: row.get(3)?,
                })
            },
        )
    }

    /// A job as filed (no record is read), if it is still there.
    pub fn filed_job(&self, id: i64) -> Result<Option<FiledJob>> {
        self.db.query_opt(
            &format!("SELECT {INDEX_COLUMNS} FROM jobs WHERE id = ?1"),
            &[&id],
            FiledJob::from_row,
        )
    }

    /// Keys of the jobs reported incomplete.
    pub fn incomplete_keys(&self) -> Result<std::collections::HashSet<String>> {
        Ok(self
            .db
            .query(
                "SELECT ref FROM rejected WHERE kind = 'incomplete'",
                &[],
                |row| row.get(0),
            )?
            .into_iter()
            .collect())
    }

    /// Analyses filed by ingest, not yet matched to their jobs (oldest first).
    pub fn analysis_inbox(&self) -> Result<Vec<Received>> {
        self.db.query(
            r#"SELECT key, job_key, uid, "user", host, dir, summary, error, analysed_ms,
                 received_ms, source, looked_to FROM analysis_inbox ORDER BY received_ms, key"#,
            &[],
            |row| {
                Ok(Received {
                    analysis: mpistat_record::AnalysisRecord {
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
            },
        )
    }

    /// Every stored analysis by job key (few: only traced jobs have one).
    pub fn analyses_by_key(&self) -> Result<HashMap<String, StoredAnalysis>> {
        let rows = self.db.query(
            r#"SELECT key, job_id, app, dir, summary, error, "user" FROM analyses"#,
            &[],
            |row| {
                Ok((
                    row.get(0)?,
                    StoredAnalysis {
                        job_id: row.get(1)?,
                        app: row.get(2)?,
                        dir: row.get(3)?,
                        summary: row.get(4)?,
                        error: row.get(5)?,
                        user: row.get(6)?,
                    },
                ))
            },
        )?;
        Ok(rows.into_iter().collect())
    }

    /// The analyses of `user`'s jobs that ended in `[from_ms, to_ms)`, in end order.
    pub fn analyses_between(
        &self,
        user: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<StoredAnalysis>> {
        self.db.query(
            r#"SELECT job_id, app, dir, summary, error FROM analyses
             WHERE "user" = ?1 AND end_ms >= ?2 AND end_ms < ?3 ORDER BY end_ms, key"#,
            &[&user, &from_ms, &to_ms],
            |row| {
                Ok(StoredAnalysis {
                    user: user.to_string(),
                    job_id: row.get(0)?,
                    app: row.get(1)?,
                    dir: row.get(2)?,
                    summary: row.get(3)?,
                    error: row.get(4)?,
                })
            },
        )
    }

    /// The traced jobs (analyses) that ended in `[from_ms, to_ms)`: how many, and the end time
    /// and key of the first `limit`, in end order.
    pub fn traced_between(
        &self,
        from_ms: u64,
        to_ms: u64,
        limit: usize,
    ) -> Result<(usize, Vec<(u64, String)>)> {
        let count: usize = self.db.query_one(
            "SELECT count(*) FROM analyses WHERE end_ms >= ?1 AND end_ms < ?2",
            &[&from_ms, &to_ms],
            |row| row.get(0),
        )?;
        let keys = self.db.query(
            "SELECT end_ms, key FROM analyses WHERE end_ms >= ?1 AND end_ms < ?2
             ORDER BY end_ms, key LIMIT ?3",
            &[&from_ms, &to_ms, &limit],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        Ok((count, keys))
    }

    /// The end time and key of the last `limit` jobs (to end) whose job id is `job_id`.
    pub fn jobs_with_id(&self, job_id: &str, limit: usize) -> Result<Vec<(u64, String)>> {
        let sql = format!(
            "SELECT end_ms, key FROM jobs {} WHERE job_id = ?1 ORDER BY end_ms DESC LIMIT ?2",
            self.indexed_by("jobs_by_job_id")
        );
        self.db.query(&sql, &[&job_id, &limit], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
    }

    /// The end time and key of the last `limit` jobs (to end) of application `app` that ended
    /// in `[from_ms, to_ms)`.
    pub fn jobs_of_application(
        &self,
        app: &str,
        from_ms: u64,
        to_ms: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>> {
        let sql = format!(
            "SELECT end_ms, key FROM jobs {}
             WHERE coalesce(app, exe) = ?1 AND end_ms >= ?2 AND end_ms < ?3
             ORDER BY end_ms DESC LIMIT ?4",
            self.indexed_by("jobs_by_app")
        );
        self.db
            .query(&sql, &[&app, &from_ms, &to_ms, &limit], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
    }

    /// The end time and key of `user`'s jobs that ended in `[from_ms, to_ms)`, in `order`,
    /// `limit` of them from the `offset`-th: from an index of a user's jobs in that order, read
    /// from its start and stopped at the page's last row (the period's entries of a user are
    /// not all read and sorted: 400,000 for a busy user's month at 10 M jobs), reading no row.
    /// A period holding few of the user's jobs skips the others' entries.
    pub fn jobs_of_user(
        &self,
        user: &str,
        (from_ms, to_ms): (u64, u64),
        order: crate::JobOrder,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<(u64, String)>> {
        let sql = self.jobs_of_user_query(order);
        self.db
            .query(&sql, &[&user, &from_ms, &to_ms, &limit, &offset], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
    }

    /// [`ReadStore::jobs_of_user`]'s statement: the index of `order` (schema: task `pages10m`)
    /// and its order, spelt as the index is (an expression's index serves only that expression).
    pub(crate) fn jobs_of_user_query(&self, order: crate::JobOrder) -> String {
        let (index, order) = match (order, self.db.dialect()) {
            (crate::JobOrder::Cpu, _) => ("jobs_of_user_by_cpu", "wall_ns_sum DESC, end_ms, key"),
            (crate::JobOrder::MpiShare, Dialect::Sqlite) => (
                "jobs_of_user_by_mpi_share",
                "CAST(mpi_ns_sum AS REAL) / max(wall_ns_sum, 1) DESC, end_ms, key",
            ),
            (crate::JobOrder::MpiShare, Dialect::Postgres) => (
                "jobs_of_user_by_mpi_share",
                "CAST(mpi_ns_sum AS DOUBLE PRECISION) / greatest(wall_ns_sum, 1) DESC, end_ms, key",
            ),
            (crate::JobOrder::Ranks, _) => ("jobs_of_user_by_ranks", "ranks DESC, end_ms, key"),
            (crate::JobOrder::End, _) => ("jobs_by_user", "end_ms, key"),
        };
        format!(
            r#"SELECT end_ms, key FROM jobs {}
             WHERE "user" = ?1 AND end_ms >= ?2 AND end_ms < ?3 ORDER BY {order} LIMIT ?4 OFFSET ?5"#,
            self.indexed_by(index)
        )
    }

    /// SQLite's `INDEXED BY index` (its planner, left alone, walked the table for these reads);
    /// nothing on PostgreSQL, which has no such clause.
    pub(crate) fn indexed_by(&self, index: &str) -> String {
        match self.db.dialect() {
            Dialect::Sqlite => format!("INDEXED BY {index}"),
            Dialect::Postgres => String::new(),
        }
    }

    /// Run `reads` in one read transaction: what they read is one snapshot of the database
    /// (the metrics' figures of several tables).
    pub fn in_snapshot<T, E: From<Error>>(
        &self,
        reads: impl FnOnce(&ReadStore) -> Result<T, E>,
    ) -> Result<T, E> {
        self.db.begin(Begin::Snapshot)?;
        let done = reads(self);
        let ended = match &done {
            Ok(_) => self.db.commit(),
            Err(_) => self.db.rollback(),
        };
        let done = done?;
        ended?;
        Ok(done)
    }

    /// The rejected entries made in the hours `[from_hour, to_hour)` (hour: unix ms / 3,600,000)
    /// per hour and kind, from the counts the table's triggers keep (`rejected_hours`; entries
    /// withdrawn since are not counted): (hour, kind, entries).
    pub fn rejected_per_hour(
        &self,
        from_hour: u64,
        to_hour: u64,
    ) -> Result<Vec<(u64, String, u64)>> {
        self.db.query(
            "SELECT hour, kind, entries FROM rejected_hours
             WHERE hour >= ?1 AND hour < ?2 AND entries > 0",
            &[&from_hour, &to_hour],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
    }

    /// The jobs that met the escalation rule per hour of their end in `[from_hour, to_hour)`,
    /// as ingest judged them when it stored them: (hour, jobs).
    pub fn rule_jobs_per_hour(&self, from_hour: u64, to_hour: u64) -> Result<Vec<(u64, u64)>> {
        self.db.query(
            "SELECT hour, jobs FROM escalation_rule_hours WHERE hour >= ?1 AND hour < ?2",
            &[&from_hour, &to_hour],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    /// The stored analyses of jobs traced by escalation, per hour of the job's end in
    /// `[from_hour, to_hour)` and whether the analysis succeeded: (hour, ok, analyses).
    pub fn escalated_analyses_per_hour(
        &self,
        from_hour: u64,
        to_hour: u64,
    ) -> Result<Vec<(u64, bool, u64)>> {
        // SQLite's CROSS JOIN: from the few analyses to their jobs. Its planner went the other
        // way, through every job of the interval (their rows, for `traced`: 0.15 s a scrape at
        // 1M jobs). PostgreSQL takes no ON after CROSS JOIN, and orders joins by its statistics.
        let join = match self.db.dialect() {
            Dialect::Sqlite => "CROSS JOIN",
            Dialect::Postgres => "JOIN",
        };
        let hour_ms = crate::rollups::HOUR_MS;
        self.db.query(
            &format!(
                "SELECT a.end_ms / 3600000, a.status = 'ok', count(*)
                 FROM analyses a {join} jobs j ON j.end_ms = a.end_ms AND j.key = a.key
                 WHERE a.end_ms >= ?1 AND a.end_ms < ?2 AND j.traced = 'escalation'
                 GROUP BY 1, 2"
            ),
            &[&(from_hour * hour_ms), &to_hour.saturating_mul(hour_ms)],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
    }

    /// The time (unix ms) of the newest syslog line ingest has read, if it read one it trusts
    /// with a time ([`crate::WriteTx::note_newest_line`]).
    pub fn newest_line_ms(&self) -> Result<Option<u64>> {
        self.db.query_opt(
            "SELECT newest_line_ms FROM ingest_clock WHERE id = 0",
            &[],
            |row| row.get(0),
        )
    }

    pub fn mail_status(&self, user: &str, week: &str) -> Result<Option<MailStatus>> {
        self.db.query_opt(
            r#"SELECT status, attempts, error FROM mails WHERE "user" = ?1 AND week = ?2"#,
            &[&user, &week],
            |row| {
                let status: String = row.get(0)?;
                Ok(if status == "sent" {
                    MailStatus::Sent
                } else {
                    MailStatus::Failed {
                        attempts: row.get(1)?,
                        error: row.get::<Option<String>>(2)?.unwrap_or_default(),
                    }
                })
            },
        )
    }

    /// Weeks with mails that failed and are still to be sent.
    pub fn failed_mail_weeks(&self) -> Result<Vec<String>> {
        self.db.query(
            "SELECT DISTINCT week FROM mails WHERE status = 'failed' ORDER BY week",
            &[],
            |row| row.get(0),
        )
    }
}

/// A read-only connection to `path`; `snapshot`: as an immutable file (see [`ReadStore::open`]).
fn read_only(path: &Path, snapshot: bool) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if snapshot {
        Connection::open_with_flags(
            format!("file:{}?mode=ro&immutable=1", uri_path(path)),
            flags | OpenFlags::SQLITE_OPEN_URI,
        )?
    } else {
        Connection::open_with_flags(path, flags)?
    };
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// The schema version of the database on `conn` (how many [`MIGRATIONS`] ran).
pub(crate) fn schema_version(conn: &Connection) -> rusqlite::Result<usize> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

/// The `-wal` file of the database at `path`.
fn wal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// `path` as the path of a `file:` URI (percent-encoded but for unreserved characters and `/`).
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::new();
    for &byte in absolute.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

#[cfg(test)]
impl ReadStore {
    /// The steps of SQLite's plan for `sql` (its `detail` column).
    pub(crate) fn query_plan(&self, sql: &str, params: &[&dyn rusqlite::ToSql]) -> Vec<String> {
        let mut stmt = self
            .db
            .sqlite_conn()
            .unwrap()
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let rows = stmt.query_map(params, |row| row.get(3)).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job by its key alone (a link without its end time) searches the sixteenth of an
    /// index its key's first digit leads to, not every job's entry.
    #[test]
    fn a_job_by_its_key_alone_searches_a_sixteenth_of_an_index() {
        let db = crate::WriteStore::in_memory().unwrap();
        let plan = db.query_plan(&db.job_by_key_query(), &[&"0123456789abcdef"]);
        assert!(
            plan.iter()
                .any(|step| step.starts_with("SEARCH") && step.contains("jobs_by_key_digit"))
                && !plan.iter().any(|step| step.starts_with("SCAN")),
            "{plan:?}"
        );
    }

    /// A user's jobs in each order the user page offers are read from an index in that order
    /// (stopped at the page's last row), never all the period's entries sorted (a temporary
    /// B-tree for ORDER BY).
    #[test]
    fn a_users_jobs_in_each_order_are_read_in_that_order() {
        let db = crate::WriteStore::in_memory().unwrap();
        for order in [
            crate::JobOrder::End,
            crate::JobOrder::Cpu,
            crate::JobOrder::MpiShare,
            crate::JobOrder::Ranks,
        ] {
            let plan = db.query_plan(
                &db.jobs_of_user_query(order),
                &[&"alice", &0, &1_000_000, &150, &100],
            );
            assert!(
                plan.iter()
                    .any(|step| step.starts_with("SEARCH") && step.contains("INDEX jobs_"))
                    && !plan.iter().any(|step| step.contains("TEMP B-TREE")),
                "{order:?}: {plan:?}"
            );
        }
    }

    #[test]
    fn paths_become_uri_paths() {
        assert_eq!(uri_path(Path::new("/a b/c?d#e%f")), "/a%20b/c%3Fd%23e%25f");
    }
}
