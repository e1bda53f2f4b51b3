//! The rows the store hands out and takes: plain structs, no driver type.

use mpistat_record::model::IndexImbalance;
use mpistat_record::wire::{self, DecodedJob};
use mpistat_record::{AnalysisRecord, IndexedJob, JobIndex, JobRecord, Problem};
use rusqlite::types::Value;

/// What a reader did with a job whose stored record is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quarantined {
    /// Moved to the rejected entries as `corrupt` (`detail`: which job, and why).
    Moved { detail: String },
    /// Only skipped: the database could not be written (`error`).
    Skipped { detail: String, error: String },
    /// Only skipped, by a reader (which never writes): the write side moves it
    /// (`mpistat db migrate`).
    Left { detail: String },
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
            Quarantined::Left { detail } => write!(
                f,
                "{detail}; skipped (a reader changes nothing: `mpistat db migrate` moves it to \
                 the rejected entries)"
            ),
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

/// Totals of the jobs of an interval (from the rollups' columns, [`crate::ReadStore::totals_of_spans`]).
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
    /// The job's user.
    pub user: String,
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

/// A job's stored record: deflated JSON (BLOB) or plain JSON (TEXT), read within the
/// record's limits ([`wire::stored_record`]): a row with more is not usable.
fn stored_record(stored: Value) -> Result<JobRecord, String> {
    match stored {
        Value::Blob(deflated) => inflated_record(&deflated).map_err(|e| e.to_string()),
        Value::Text(json) => wire::stored_json_record(json.as_bytes()).map_err(|e| e.to_string()),
        other => Err(format!("unexpected {:?}", other.data_type())),
    }
}

/// A record from its raw-DEFLATE JSON (as stored, and as [`JobRow::deflated`]), within the
/// record's limits ([`wire::stored_record`]).
pub fn inflated_record(deflated: &[u8]) -> crate::Result<JobRecord> {
    Ok(wire::stored_record(deflated)?)
}

/// `record` as stored (its JSON, raw-DEFLATE compressed), made here rather than sent: see
/// [`crate::partials`].
pub fn deflated_record(record: &JobRecord) -> Vec<u8> {
    use std::io::Write;
    let json = serde_json::to_vec(record).expect("a JobRecord always serialises");
    let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&json).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// `stored` as the record of `filed`, or why it is not usable.
pub(crate) fn checked_record(filed: &FiledJob, stored: Value) -> Result<JobRecord, String> {
    let record =
        stored_record(stored).map_err(|e| format!("the stored record is not readable: {e}"))?;
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
pub(crate) const INDEX_COLUMNS: &str =
    "jobs.id, key, model_version, job_id, uid, \"user\", exe, host, pid, \
     ranks, start_ms, end_ms, wall_ns_sum, wall_ns_max, mpi_ns_sum, partial, critical_path_ns, \
     work_sum_ns, traced, app";

/// How many [`INDEX_COLUMNS`] there are (the next column of a query is at this index).
pub(crate) const INDEX_COLUMN_COUNT: usize = 20;

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
    pub(crate) fn from_row(row: &crate::db::Row<'_>) -> crate::Result<FiledJob> {
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
                app: row.get::<Option<String>>(19)?.unwrap_or_default(),
                host: row.get::<Option<String>>(7)?.unwrap_or_default(),
                pid: row.get::<Option<u32>>(8)?.unwrap_or_default(),
                ranks: row.get(9)?,
                start_unix_ms: row.get(10)?,
                end_unix_ms: row.get(11)?,
                wall_ns_sum: row.get(12)?,
                wall_ns_max: row.get::<Option<u64>>(13)?.unwrap_or_default(),
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
    /// It meets the escalation rule: counted per hour of its end (`escalation_rule_hours`, for
    /// the metrics) when it is stored.
    pub meets_rule: bool,
    /// Its record was read (and is the one filed) and counted in the rollups of its batch
    /// (the digest's `rollup`), which are saved as they are if every counted job of the batch is
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
            meets_rule: false,
            counted: false,
            unusable: Some(Box::new(problem)),
        }
    }

    /// A job whose record was read (and is the one its index says), counted by the caller in
    /// the rollups of its batch.
    pub fn decoded(job: DecodedJob) -> JobRow {
        let index = JobIndex::of(&job.record);
        JobRow {
            key: index.key(),
            origin: None,
            source: "".into(),
            index,
            deflated: job.deflated,
            look: false,
            meets_rule: false,
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

/// What [`crate::WriteTx::insert_job`] did.
#[derive(Debug)]
pub enum Inserted {
    New,
    /// The same record was stored before (a line read again, a record sent twice).
    Again,
    /// Another record of the same key and end was stored before: this one is rejected so.
    Collision(Rejected),
}

/// A job on the critical list, as `critical_jobs` keeps it (the rollups choose it and word its
/// reasons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriticalEntry {
    pub end_ms: u64,
    pub key: String,
    pub user: String,
    pub wall_ns: u64,
    pub reasons: String,
}

/// The order of a list of jobs (a user's, the critical list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOrder {
    /// By end time (then key).
    End,
    /// Most CPU time first (then key; a user's jobs: then end time).
    Cpu,
    /// Biggest share of MPI time first.
    MpiShare,
    /// Most ranks first.
    Ranks,
}
