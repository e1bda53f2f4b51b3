//! Wire format: a [`JobRecord`] as syslog messages, and syslog lines back into records.
//!
//! # Format (wire version 2)
//!
//! A record is sent as `n` messages (`2 <= n <= MAX_PARTS`), each at most [`MAX_MESSAGE`] bytes
//! of printable ASCII (`0x20..=0x7e`: no newline, NUL or other byte syslog might mangle; the
//! only `%` is the one after the MPI percentage). Every message has six space-separated fields:
//!
//! ```text
//! MPISTAT2 <key> <i>/<n> <record crc> <line crc> <data>
//! ```
//!
//! * `MPISTAT2` — the marker; the digits after `MPISTAT` are the wire version. Decoders look for
//!   the first `MPISTAT<digits> ` anywhere in a syslog line (whatever syslog put in front is
//!   ignored); lines without a marker are not ours. Versions other than `1` and `2` are reported.
//! * `<key>` — [`JobRecord::key`]: 16 lowercase hex digits, the same on all parts of a job.
//! * `<i>/<n>` — part `i` (decimal, `0 <= i < n`) of `n` parts.
//! * `<record crc>` — CRC-32 (IEEE 802.3, as in zlib) of the payload bytes (below, before
//!   base64), 8 lowercase hex digits, the same on all parts.
//! * `<line crc>` — CRC-32 of the message with this field and the space after it removed, i.e. of
//!   `MPISTAT2 <key> <i>/<n> <record crc> <data>`; 8 lowercase hex digits. It tells the decoder
//!   *which* line is corrupt.
//! * `<data>` — part 0: a human-readable summary, `name=value` pairs separated by single spaces
//!   (`user= uid= exe= host= ranks= nodes= wall=<s>s mpi=<percent>% job=` and `partial=` for
//!   partial records). In values every byte outside `!`..=`~` and every `\` and `%` is written
//!   as `\xHH` (lowercase hex) and long values are cut, ending in `...`. The summary is for
//!   people reading syslog; decoders need not parse it.
//!   Parts `1..n`: consecutive chunks of the payload, encoded as URL-safe base64 without padding
//!   (RFC 4648 §5). The payload is
//!
//!   ```text
//!   <index JSON> \n <raw DEFLATE of the record JSON>
//!   ```
//!
//!   the record's [`JobIndex`] (made by [`JobIndex::of`]; serde field names, compact JSON, so it
//!   holds no newline), a newline byte, and the record serialised as JSON (serde field names of
//!   [`JobRecord`], carrying the model `version`) compressed with raw DEFLATE (RFC 1951, no zlib
//!   header). Concatenate the chunks in part order, base64-decode, check the record crc, split
//!   at the first newline. The index is what a store needs to file the job (uid, user, times,
//!   sizes, the escalation rule's figures): `mpistat ingest` stores a job from it without
//!   inflating the record. A full decode also inflates and parses the record and checks that
//!   `JobIndex::of(record)` equals the index sent: a record whose index says something else
//!   (e.g. another uid) is a [`Problem::IndexMismatch`], never a record.
//!
//! # Wire version 1 (still read)
//!
//! The same lines with marker `MPISTAT1`, whose payload is only the raw-DEFLATE record JSON and
//! whose record crc is the CRC-32 of the record's JSON text (checked after inflating). Profilers
//! of earlier releases write it; decoders read both, so nodes can be upgraded one at a time.
//!
//! # Analysis records (marker `MPISTATA1`)
//!
//! An [`AnalysisRecord`] (what `mpistat analyze --send` found in a job's trace, sent by the
//! job's user) uses the same lines with marker `MPISTATA` and its own version (1): key
//! [`AnalysisRecord::key`], part 0 a summary (`analysis job=<job key> uid= user= status=`), the
//! payload the raw-DEFLATE JSON of the record, the record crc that of the payload. Decoders of
//! job records alone see no `MPISTAT<digits> ` in them and pass them over; the [`Assembler`]
//! reassembles both kinds ([`CompleteJob::kind`]).
//!
//! A decoder groups parts by key; the lines of many jobs may be interleaved, repeated and
//! reordered. A record is complete when parts `1..n` are there (part 0 is only the summary; a
//! record without it is returned and the missing summary reported). All parts of a job carry
//! the same wire version, part count and record crc.
//!
//! # Decoding
//!
//! [`Assembler`] takes lines one at a time (bytes: only our printable-ASCII messages need to be
//! text) and never fails: everything wrong is a [`Problem`] next to the records that could be
//! decoded ([`Decoded`]). Records complete as soon as their last part arrives and can be taken
//! early with [`Assembler::take_decoded`] (for following a live log); [`Assembler::finish`]
//! returns the rest and reports what stayed incomplete. Callers that decode on other threads
//! take the complete jobs undecoded ([`Assembler::take_complete`]) and either decode them fully
//! ([`CompleteJob::decode`]: the record and the checked deflated JSON to store as it is) or, to
//! file them without reading the record, take their index ([`CompleteJob::indexed`]: for wire
//! version 2 only base64 and the record crc, no inflating; version 1 has no index, so there it
//! decodes). Whoever later reads a record filed by its index must check the two agree (see
//! [`JobIndex::differences`]): until then the index is only what the sender claimed.
//!
//! # Limits
//!
//! Every byte of a record is the sender's to choose, so decoding is bounded throughout: a
//! line's data is at most [`MAX_MESSAGE`] bytes and its part count at most [`MAX_PARTS`]; an
//! [`Assembler`] holds at most [`PendingLimits`] of records whose parts are still arriving
//! (giving up the oldest beyond: [`Problem::Evicted`]) and a record's payload at most
//! [`PAYLOAD_MAX`] bytes; an index is at most [`INDEX_JSON_MAX`] bytes of JSON, a record
//! inflates to at most [`RECORD_JSON_MAX`], an analysis to [`ANALYSIS_JSON_MAX`], and every
//! field of them is within [`crate::limits`]. Anything larger is [`Problem::Oversized`],
//! never a record. The encoder cuts records to the limits, so no record it writes is refused.

use crate::analysis::{AnalysisRecord, ANALYSIS_MODEL_VERSION};
use crate::limits::{self, Oversize, ANALYSIS_JSON_MAX, INDEX_JSON_MAX, RECORD_JSON_MAX};
use crate::model::{JobIndex, JobRecord, MODEL_VERSION};
// SIMD: ingest decodes every record's base64 (about 3 GB per million jobs).
use base64_simd::URL_SAFE_NO_PAD;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;

/// Longest message (after the syslog header) that `encode` produces, in bytes. rsyslog's default
/// `maxMessageSize` is 8096 bytes including the header; this leaves 416 bytes for a header
/// (priority, timestamp, a host name of up to 255 bytes when forwarded, tag and pid), so parts
/// pass rsyslog's defaults locally and forwarded. (Earlier profilers cut parts at 900 bytes;
/// decoders take parts of any size up to this.)
pub const MAX_MESSAGE: usize = 7680;

/// The wire version this module writes.
pub const WIRE_VERSION: u32 = 2;

/// The wire versions this module reads.
pub const READ_VERSIONS: [u32; 2] = [1, 2];

/// Most base64 payload bytes a record may have: its index and its deflated JSON at their
/// limits ([`INDEX_JSON_MAX`], [`RECORD_JSON_MAX`]; raw DEFLATE adds at most 5 bytes to every
/// 65,535 it cannot compress). A job whose parts carry more is [`Problem::Oversized`].
pub const PAYLOAD_MAX: usize =
    (INDEX_JSON_MAX + 1 + RECORD_JSON_MAX + RECORD_JSON_MAX.div_ceil(65_535) * 5 + 64).div_ceil(3)
        * 4;

/// The fewest payload bytes a part other than the last carries: this encoder fills parts to
/// [`MAX_MESSAGE`], earlier profilers cut messages at 900 bytes (about 850 of data).
const PART_DATA_MIN: usize = 512;

/// Most parts a record may have: [`PAYLOAD_MAX`] in parts of `PART_DATA_MIN` bytes, and the
/// summary. Lines claiming more are corrupt, so that a forged line cannot make the decoder
/// expect more than a record can be.
pub const MAX_PARTS: u32 = (PAYLOAD_MAX.div_ceil(PART_DATA_MIN) + 1) as u32;

/// Records an [`Assembler`] holds while their parts arrive, by default; one more and the
/// oldest is given up ([`Problem::Evicted`]). A record's parts are written in one burst by one
/// process, so a sender seldom has more than a few waiting.
pub const PENDING_JOBS_MAX: usize = 256;

/// Bytes an [`Assembler`] holds for records whose parts are still arriving, by default (about
/// five records of [`PAYLOAD_MAX`]); more and the oldest are given up.
pub const PENDING_BYTES_MAX: usize = 16 << 20;

const MARKER: &[u8] = b"MPISTAT";

/// The wire version of analysis records this module writes and reads.
pub const ANALYSIS_WIRE_VERSION: u32 = 1;

/// What a set of lines carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A [`JobRecord`] (marker `MPISTAT<version>`).
    Job,
    /// An [`AnalysisRecord`] (marker `MPISTATA<version>`).
    Analysis,
}

impl Kind {
    /// The marker before the version digits.
    fn marker(self) -> &'static [u8] {
        match self {
            Kind::Job => MARKER,
            Kind::Analysis => b"MPISTATA",
        }
    }

    fn reads(self, version: u32) -> bool {
        match self {
            Kind::Job => READ_VERSIONS.contains(&version),
            Kind::Analysis => version == ANALYSIS_WIRE_VERSION,
        }
    }
}

/// Where a line came from: the source name given to [`Assembler::begin_source`] (if any) and the
/// line number within it, counted from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRef {
    pub source: Option<String>,
    pub line: u64,
}

impl fmt::Display for LineRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{source}:{}", self.line),
            None => write!(f, "line {}", self.line),
        }
    }
}

/// Part numbers as compact ranges, e.g. `0, 3-5`: as many ranges as there are gaps, so a
/// record that claims thousands of parts and sent one costs two ranges, not thousands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartList(Vec<(u32, u32)>);

impl PartList {
    /// The list of `parts` (in increasing order).
    pub fn of(parts: impl IntoIterator<Item = u32>) -> PartList {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for part in parts {
            match ranges.last_mut() {
                Some((_, end)) if end.checked_add(1) == Some(part) => *end = part,
                _ => ranges.push((part, part)),
            }
        }
        PartList(ranges)
    }

    /// The parts, in increasing order.
    pub fn parts(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().flat_map(|&(start, end)| start..=end)
    }
}

impl fmt::Display for PartList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(start, end)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

/// Something wrong with the input, reported instead of failing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// Parts of a job never arrived. Without part 0 (the summary) the record is still decoded;
    /// without any other part it is not. `summary` is part 0's text if it arrived.
    #[error("job {key}: missing part(s) {missing} of {parts}{}", summary_suffix(.summary))]
    MissingParts {
        key: String,
        missing: PartList,
        parts: u32,
        summary: Option<String>,
    },
    /// The same part arrived again with identical content; the repeat was ignored.
    #[error("{at}: job {key}: duplicate of part {part} (ignored)")]
    DuplicatePart { key: String, part: u32, at: LineRef },
    /// A part arrived again with different content (or a different wire version, part count or
    /// record crc than the job's first line); the first one seen was kept.
    #[error("{at}: job {key}: part {part} conflicts with an earlier line (ignored)")]
    ConflictingPart { key: String, part: u32, at: LineRef },
    /// A line with our marker that is damaged or malformed.
    #[error("{at}: corrupt mpistat line: {reason}")]
    CorruptLine { at: LineRef, reason: String },
    /// A line written in a wire version this decoder does not know.
    #[error("{at}: unsupported mpistat wire version {version}")]
    UnsupportedWireVersion { at: LineRef, version: String },
    /// All parts arrived with good line checksums but the reassembled record's crc is wrong.
    #[error("job {key}: record checksum mismatch")]
    ChecksumMismatch { key: String },
    /// The reassembled payload is not a record (bad base64, index, deflate or JSON, wrong key).
    #[error("job {key}: bad payload: {reason}")]
    BadPayload { key: String, reason: String },
    /// The record's data-model version is newer than this decoder.
    #[error(
        "job {key}: unsupported record model version {version} (newest known: {MODEL_VERSION})"
    )]
    UnsupportedModelVersion { key: String, version: u64 },
    /// A field of the record (or its index, or its payload) is over its limit
    /// ([`crate::limits`]): no profiler wrote it, and nothing reads it.
    #[error("job {key}: oversized: {oversize}")]
    Oversized { key: String, oversize: Oversize },
    /// A job still waiting for parts was given up to keep the memory of incomplete records
    /// bounded (`reason`: whose records were too many or too large, see
    /// [`Assembler::with_limits`]).
    #[error("job {key}: missing part(s) {missing} of {parts}, given up: {reason}{}", summary_suffix(.summary))]
    Evicted {
        key: String,
        missing: PartList,
        parts: u32,
        summary: Option<String>,
        reason: String,
    },
    /// Wire version 2: the index sent with the record is not the record's (a damaged or forged
    /// record: e.g. an index naming the sender's uid on a record claiming another). `differences`
    /// as in [`JobIndex::differences`], the index's value first.
    #[error("job {key}: the index disagrees with the record (index vs record: {})", .differences.join("; "))]
    IndexMismatch {
        key: String,
        differences: Vec<String>,
    },
}

fn summary_suffix(summary: &Option<String>) -> String {
    match summary {
        Some(summary) => format!(" ({summary})"),
        None => String::new(),
    }
}

/// Records decoded from lines, plus everything that was wrong with them.
#[derive(Debug, Default)]
pub struct Decoded {
    pub records: Vec<JobRecord>,
    /// Analysis records found among the lines.
    pub analyses: Vec<AnalysisRecord>,
    pub problems: Vec<Problem>,
}

/// A job whose payload parts have all arrived, not yet decoded (see
/// [`Assembler::take_complete`]): decoding is the costly step, and independent per job.
#[derive(Debug, Clone)]
pub struct CompleteJob {
    pub key: String,
    kind: Kind,
    wire_version: u32,
    record_crc: u32,
    /// The base64 payload, parts in order (printable ASCII).
    payload: Vec<u8>,
}

/// A decoded record and the raw-DEFLATE JSON it came from (checked against the record crc), which
/// a store can keep as it is instead of serialising and compressing the record again.
#[derive(Debug, Clone)]
pub struct DecodedJob {
    pub record: JobRecord,
    pub deflated: Vec<u8>,
}

/// A job's index and its record as raw-DEFLATE JSON, not inflated (see [`CompleteJob::indexed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedJob {
    pub index: JobIndex,
    pub deflated: Vec<u8>,
}

impl CompleteJob {
    /// The wire version its lines were written in.
    pub fn wire_version(&self) -> u32 {
        self.wire_version
    }

    /// Whether the lines carry a job record or an analysis record.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The analysis record (base64 → record crc → inflate → JSON), checking its model version
    /// and that the key is its own.
    pub fn analysis(&self) -> Result<AnalysisRecord, Problem> {
        let key = &self.key;
        if self.kind != Kind::Analysis {
            return Err(bad_payload(key, "a job record, not an analysis".into()));
        }
        let deflated = URL_SAFE_NO_PAD
            .decode_to_vec(&self.payload)
            .map_err(|e| bad_payload(key, format!("base64: {e}")))?;
        if crc32fast::hash(&deflated) != self.record_crc {
            return Err(Problem::ChecksumMismatch { key: key.clone() });
        }
        inflate(&deflated, ANALYSIS_JSON_MAX, "analysis JSON", |json| {
            analysis_of_json(key, json)
        })
        .map_err(|e| e.of_job(key))?
    }

    /// The whole record: base64 → record crc → (version 2: index) → inflate → JSON → record,
    /// checking versions, the key, and (version 2) that the index is the record's.
    pub fn decode(&self) -> Result<DecodedJob, Problem> {
        if self.kind != Kind::Job {
            return Err(bad_payload(
                &self.key,
                "an analysis, not a job record".into(),
            ));
        }
        if self.wire_version == 1 {
            return decode_v1(&self.key, &self.payload, self.record_crc);
        }
        let IndexedJob { index, deflated } = self.split_v2()?;
        let record = inflate_record(&self.key, &deflated)?;
        let own = JobIndex::of(&record);
        if own != index {
            return Err(Problem::IndexMismatch {
                key: self.key.clone(),
                differences: index.differences(&own),
            });
        }
        Ok(DecodedJob { record, deflated })
    }

    /// The job's index and deflated record JSON, for filing the job without reading its record.
    /// Version 2: base64 → record crc → index (its model version and key checked); the record
    /// is not inflated, so the index is only what the sender claims until someone decodes the
    /// record (and compares, see [`JobIndex::differences`]). Version 1 has no index: the record
    /// is decoded and the index made from it.
    pub fn indexed(&self) -> Result<IndexedJob, Problem> {
        if self.kind != Kind::Job {
            return Err(bad_payload(
                &self.key,
                "an analysis, not a job record".into(),
            ));
        }
        if self.wire_version == 1 {
            let DecodedJob { record, deflated } = self.decode()?;
            return Ok(IndexedJob {
                index: JobIndex::of(&record),
                deflated,
            });
        }
        self.split_v2()
    }

    /// Version 2's payload: crc checked, split into the parsed index and the deflated record.
    fn split_v2(&self) -> Result<IndexedJob, Problem> {
        let key = &self.key;
        let mut bytes = URL_SAFE_NO_PAD
            .decode_to_vec(&self.payload)
            .map_err(|e| bad_payload(key, format!("base64: {e}")))?;
        if crc32fast::hash(&bytes) != self.record_crc {
            return Err(Problem::ChecksumMismatch { key: key.clone() });
        }
        let newline = match bytes
            .iter()
            .take(INDEX_JSON_MAX + 1)
            .position(|&b| b == b'\n')
        {
            Some(newline) => newline,
            None if bytes.len() > INDEX_JSON_MAX => {
                return Err(oversized(
                    key,
                    Oversize::cut_off("index JSON", INDEX_JSON_MAX),
                ))
            }
            None => return Err(bad_payload(key, "no newline after the index".into())),
        };
        let mut index: JobIndex = parse_versioned(key, &bytes[..newline], "index")?;
        limits::check_index(&mut index).map_err(|oversize| oversized(key, oversize))?;
        if index.wire_key() != *key {
            return Err(bad_payload(
                key,
                format!("the index's own key is {}", index.wire_key()),
            ));
        }
        bytes.drain(..=newline);
        Ok(IndexedJob {
            index,
            deflated: bytes,
        })
    }
}

/// The analysis record in `json` (inflated), checking its model version, limits and key.
fn analysis_of_json(key: &str, json: &[u8]) -> Result<AnalysisRecord, Problem> {
    let mut record: AnalysisRecord = parse_versioned(key, json, "analysis")?;
    limits::check_analysis(&mut record).map_err(|oversize| oversized(key, oversize))?;
    if record.key() != key {
        return Err(bad_payload(
            key,
            format!("the analysis' own key is {}", record.key()),
        ));
    }
    Ok(record)
}

fn bad_payload(key: &str, reason: String) -> Problem {
    Problem::BadPayload {
        key: key.to_string(),
        reason,
    }
}

fn oversized(key: &str, oversize: Oversize) -> Problem {
    Problem::Oversized {
        key: key.to_string(),
        oversize,
    }
}

/// Bytes of every message before `<i>/<n>` but the marker, and of the separators and crcs
/// after it (one version digit).
const HEADER_FIXED: usize = 1 + 1 + 16 + 1 + 1 + 8 + 1 + 8 + 1;

/// Encode a record as syslog messages (without syslog header), in the current wire version,
/// cut to the limits first ([`limits::fit_record`]): what decoders take whole.
pub fn encode(record: &JobRecord) -> Vec<String> {
    encode_fitting(&mut record.clone())
}

/// [`encode`] of `record` after cutting it to the limits in place (what the profiler does: the
/// record it keeps is then the one it sent, and no copy of it is made).
pub fn encode_fitting(record: &mut JobRecord) -> Vec<String> {
    encode_fitting_in_steps(record, &mut || {})
}

/// [`encode_fitting`], calling `between` once: after the record is cut and serialised (its JSON
/// and its index's), before that JSON is compressed and the lines are made. The profiler drops
/// the serialiser's code there, so that the two halves' code is never mapped at once
/// (docs/footprint.md, "finsplit").
pub fn encode_fitting_in_steps(record: &mut JobRecord, between: &mut dyn FnMut()) -> Vec<String> {
    limits::fit_record(record);
    let record = &*record;
    let json = serde_json::to_vec(record).expect("a JobRecord always serialises");
    let mut payload = serde_json::to_vec(&JobIndex::of(record)).expect("an index serialises");
    debug_assert!(!payload.contains(&b'\n'), "compact JSON has no newline");
    payload.push(b'\n');
    between();
    payload.extend(crate::deflate::compress(&json));
    let record_crc = crate::crc32::hash(&payload);
    let payload = crate::base64url::encode(&payload);
    let summary = summary(record);
    messages(
        Kind::Job,
        &record.wire_key(),
        &summary,
        &payload,
        record_crc,
    )
}

/// The messages of one record: part 0 `summary`, then `payload` (base64) in chunks.
fn messages(kind: Kind, key: &str, summary: &str, payload: &str, record_crc: u32) -> Vec<String> {
    let chunk_len = chunk_len_for(kind, payload.len());
    let parts = payload.len().div_ceil(chunk_len) as u32 + 1;
    // A plain loop: the profiler runs this once a job, and iterator adapters here were generic
    // code of their own on rank 0's `MPI_Finalize` path (docs/footprint.md, "finrec").
    let mut lines = Vec::with_capacity(parts as usize);
    lines.push(message(kind, key, 0, parts, record_crc, summary));
    let mut from = 0;
    while from < payload.len() {
        // Base64 is ASCII, so any byte offset is a character boundary.
        let to = payload.len().min(from + chunk_len);
        lines.push(message(
            kind,
            key,
            lines.len() as u32,
            parts,
            record_crc,
            &payload[from..to],
        ));
        from = to;
    }
    lines
}

/// Encode an analysis record as syslog messages (without syslog header), cut to the limits
/// first ([`limits::fit_analysis`]).
pub fn encode_analysis(analysis: &AnalysisRecord) -> Vec<String> {
    let mut fitted = analysis.clone();
    limits::fit_analysis(&mut fitted);
    let analysis = &fitted;
    let json = serde_json::to_vec(analysis).expect("an AnalysisRecord always serialises");
    let deflated = crate::deflate::compress(&json);
    let record_crc = crate::crc32::hash(&deflated);
    let status = if analysis.summary.is_some() {
        "ok"
    } else {
        "failed"
    };
    let summary = format!(
        "analysis job={} uid={} user={} status={status}",
        escape(&analysis.job_key, 64),
        analysis.uid,
        escape(&analysis.user, 64),
    );
    let payload = crate::base64url::encode(&deflated);
    messages(
        Kind::Analysis,
        &analysis.key(),
        &summary,
        &payload,
        record_crc,
    )
}

/// Payload bytes per part such that every message fits in [`MAX_MESSAGE`].
fn chunk_len_for(kind: Kind, payload_len: usize) -> usize {
    let mut digits = 1;
    loop {
        let chunk_len = MAX_MESSAGE - kind.marker().len() - HEADER_FIXED - (2 * digits + 1);
        let parts = payload_len.div_ceil(chunk_len) + 1;
        if parts.to_string().len() <= digits {
            return chunk_len;
        }
        digits += 1;
    }
}

fn message(kind: Kind, key: &str, part: u32, parts: u32, record_crc: u32, data: &str) -> String {
    let marker = std::str::from_utf8(kind.marker()).expect("ASCII");
    let version = match kind {
        Kind::Job => WIRE_VERSION,
        Kind::Analysis => ANALYSIS_WIRE_VERSION,
    };
    let head = format!("{marker}{version} {key} {part}/{parts} {record_crc:08x} ");
    let mut hasher = crate::crc32::Crc32::new();
    hasher.update(head.as_bytes());
    hasher.update(data.as_bytes());
    let line_crc = hasher.finish();
    format!("{head}{line_crc:08x} {data}")
}

/// Part 0's text: who ran what, how big and how long, readable in syslog.
fn summary(record: &JobRecord) -> String {
    let mut text = format!(
        "user={} uid={} exe={} host={} ranks={} nodes={} wall={:.1}s mpi={:.1}% job={}",
        escape(&record.user, 64),
        record.uid,
        escape(&record.exe, 400),
        escape(&record.host, 64),
        record.ranks,
        record.nodes,
        record.wall_s(),
        record.mpi_fraction() * 100.0,
        escape(&record.job_id, 64),
    );
    if let Some(reason) = &record.partial {
        text.push_str(" partial=");
        text.push_str(&escape(reason, 64));
    }
    text
}

/// `value` with every byte outside `!`..=`~`, and `\` and `%`, as `\xHH`; at most `max` bytes,
/// ending in `...` when cut.
fn escape(value: &str, max: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(value.len().min(max));
    // The longest output so far, ending between two bytes' pieces, that leaves room for "...".
    let mut room_for_dots = 0;
    for b in value.bytes() {
        if matches!(b, b'!'..=b'~') && b != b'\\' && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str("\\x");
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        }
        if out.len() > max {
            out.truncate(room_for_dots);
            out.push_str("...");
            return out;
        }
        if out.len() + 3 <= max {
            room_for_dots = out.len();
        }
    }
    out
}

/// One of our messages, parsed and with a good line checksum.
struct Part<'a> {
    kind: Kind,
    wire_version: u32,
    key: u64,
    part: u32,
    parts: u32,
    record_crc: u32,
    line_crc: u32,
    /// Printable ASCII.
    data: &'a [u8],
}

/// What a syslog line is to us.
enum Line<'a> {
    NotOurs,
    Part(Part<'a>),
    Bad(LineProblem),
}

/// Why a line with our marker cannot be used; the caller adds where the line was.
enum LineProblem {
    Corrupt(String),
    UnsupportedVersion(String),
}

/// The first `MPISTAT<digits> ` or `MPISTATA<digits> ` in `line`: what it carries, its digits
/// (the wire version) and the bytes after it.
fn find_marker(line: &[u8]) -> Option<(Kind, &[u8], &[u8])> {
    let mut from = 0;
    while from + MARKER.len() <= line.len() {
        let at = from + memchr::memchr(MARKER[0], &line[from..])?;
        if line[at..].starts_with(MARKER) {
            let mut after = &line[at + MARKER.len()..];
            let kind = match after.first() {
                Some(b'A') => {
                    after = &after[1..];
                    Kind::Analysis
                }
                _ => Kind::Job,
            };
            let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
            if digits > 0 && after.get(digits) == Some(&b' ') {
                return Some((kind, &after[..digits], &after[digits + 1..]));
            }
        }
        from = at + 1;
    }
    None
}

fn parse_line(line: &[u8]) -> Line<'_> {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    let Some((kind, version, rest)) = find_marker(&line[..end]) else {
        return Line::NotOurs;
    };
    // ASCII digits, so valid UTF-8.
    let version_text = std::str::from_utf8(version).unwrap_or_default();
    let Some(wire_version) = version_text.parse().ok().filter(|&v| kind.reads(v)) else {
        let prefix = if kind == Kind::Analysis { "A" } else { "" };
        return Line::Bad(LineProblem::UnsupportedVersion(format!(
            "{prefix}{version_text}"
        )));
    };
    match parse_fields(kind, wire_version, version, rest) {
        Ok(part) => Line::Part(part),
        Err(reason) => Line::Bad(LineProblem::Corrupt(reason)),
    }
}

fn parse_fields<'a>(
    kind: Kind,
    wire_version: u32,
    version: &[u8],
    rest: &'a [u8],
) -> Result<Part<'a>, String> {
    let mut fields: [&[u8]; 5] = [b""; 5];
    let mut found = 0;
    for (slot, field) in fields.iter_mut().zip(rest.splitn(5, |&b| b == b' ')) {
        *slot = field;
        found += 1;
    }
    if found < fields.len() {
        return Err(format!("{found} fields instead of 5 after the marker"));
    }
    let [key, part_of, record_crc, line_crc, data] = fields;
    let line_crc = parse_hex32(line_crc).ok_or("line checksum is not 8 lowercase hex digits")?;
    // The message up to the line crc field is the part of `rest` before it, after the marker.
    let head_len = key.len() + part_of.len() + record_crc.len() + 3;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(kind.marker());
    hasher.update(version);
    hasher.update(b" ");
    hasher.update(&rest[..head_len]);
    hasher.update(data);
    if hasher.finalize() != line_crc {
        return Err("line checksum mismatch".into());
    }
    // The line checksum is good: what follows only fails for lines written wrongly.
    let text = |field: &[u8]| String::from_utf8_lossy(field).into_owned();
    let key = parse_key(key)
        .ok_or_else(|| format!("job key {:?} is not 16 lowercase hex digits", text(key)))?;
    let number = |digits: &[u8]| -> Option<u32> { std::str::from_utf8(digits).ok()?.parse().ok() };
    let mut i_of_n = part_of.splitn(2, |&b| b == b'/');
    let (part, parts) = i_of_n
        .next()
        .zip(i_of_n.next())
        .and_then(|(i, n)| Some((number(i)?, number(n)?)))
        .ok_or_else(|| format!("part {:?} is not <i>/<n>", text(part_of)))?;
    if !(2..=MAX_PARTS).contains(&parts) || part >= parts {
        return Err(format!(
            "part {part}/{parts} out of range (at most {MAX_PARTS} parts)"
        ));
    }
    if data.len() > MAX_MESSAGE {
        return Err(format!(
            "{} bytes of data (a message is at most {MAX_MESSAGE})",
            data.len()
        ));
    }
    let record_crc =
        parse_hex32(record_crc).ok_or("record checksum is not 8 lowercase hex digits")?;
    if data.is_empty() {
        return Err("no data".into());
    }
    if !is_printable_ascii(data) {
        return Err("data is not printable ASCII".into());
    }
    Ok(Part {
        kind,
        wire_version,
        key,
        part,
        parts,
        record_crc,
        line_crc,
        data,
    })
}

/// Whether every byte is in `0x20..=0x7e` (a maximum over the bytes, so that it vectorises).
fn is_printable_ascii(data: &[u8]) -> bool {
    data.iter()
        .fold(0u8, |max, &b| max.max(b.wrapping_sub(0x20)))
        <= 0x7e - 0x20
}

/// Exactly `digits` lowercase hex digits, as a number.
fn parse_hex(text: &[u8], digits: usize) -> Option<u64> {
    if text.len() != digits {
        return None;
    }
    text.iter().try_fold(0u64, |n, &b| {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some(n << 4 | u64::from(digit))
    })
}

fn parse_hex32(text: &[u8]) -> Option<u32> {
    parse_hex(text, 8).map(|n| n as u32)
}

fn parse_key(text: &[u8]) -> Option<u64> {
    parse_hex(text, 16)
}

fn key_text(key: u64) -> String {
    format!("{key:016x}")
}

/// A job whose parts are still arriving.
struct PendingJob {
    /// Global arrival index of the job's first line: records come out in first-seen order.
    first_seen: u64,
    kind: Kind,
    wire_version: u32,
    parts: u32,
    record_crc: u32,
    /// The data of the payload parts that arrived, back to back in arrival order (printable
    /// ASCII).
    buffer: Vec<u8>,
    /// Part 0's data (the summary), if it arrived.
    summary: Vec<u8>,
    /// Line crc and where its data is (in `summary` for part 0, else in `buffer`) of every part
    /// that arrived, by part number.
    arrived: BTreeMap<u32, (u32, Range<usize>)>,
}

/// Bytes counted for a pending job besides its data, and for each part that arrived (the
/// entry of `arrived`): an estimate of the allocator's, so that many tiny parts count too.
const PENDING_JOB_OVERHEAD: usize = 256;
const ARRIVED_ENTRY_BYTES: usize = 64;

impl PendingJob {
    /// The memory it holds, as counted against [`PendingLimits::bytes`].
    fn size(&self) -> usize {
        PENDING_JOB_OVERHEAD
            + self.buffer.capacity()
            + self.summary.capacity()
            + self.arrived.len() * ARRIVED_ENTRY_BYTES
    }

    /// The parts that did not arrive (the gaps between those that did: no list of them all).
    fn missing(&self) -> PartList {
        let mut ranges = Vec::new();
        let mut next = 0;
        for &part in self.arrived.keys() {
            if part > next {
                ranges.push((next, part - 1));
            }
            next = part + 1;
        }
        if next < self.parts {
            ranges.push((next, self.parts - 1));
        }
        PartList(ranges)
    }

    fn has_all_payload(&self) -> bool {
        (1..self.parts).all(|part| self.arrived.contains_key(&part))
    }

    fn data(&self, part: u32) -> Option<&[u8]> {
        let (_, range) = self.arrived.get(&part)?;
        let data = if part == 0 {
            &self.summary
        } else {
            &self.buffer
        };
        Some(&data[range.clone()])
    }

    /// Add a part's data (not there yet).
    fn add(&mut self, part: u32, line_crc: u32, data: &[u8]) {
        let buffer = if part == 0 {
            &mut self.summary
        } else {
            &mut self.buffer
        };
        if buffer.capacity() == 0 && part != 0 {
            // Room for the usual few parts; a line's part count is not to be trusted, and its
            // data length is at most a message.
            buffer.reserve_exact(data.len() * (self.parts as usize - 1).min(8));
        }
        let start = buffer.len();
        buffer.extend_from_slice(data);
        self.arrived.insert(part, (line_crc, start..buffer.len()));
    }

    /// Part 0's text, if it arrived.
    fn summary(&self) -> Option<String> {
        self.data(0)
            .map(|data| String::from_utf8_lossy(data).into_owned())
    }

    /// The payload: the data of parts `1..n` in part order (those that arrived).
    fn into_payload(self) -> Vec<u8> {
        let mut ranges = self.arrived.range(1..).map(|(_, (_, range))| range);
        // The usual case: the parts arrived in order, so `buffer` is the payload.
        let mut end = 0;
        if ranges.all(|range| {
            let next = range.start == end;
            end = range.end;
            next
        }) {
            let mut payload = self.buffer;
            payload.truncate(end);
            return payload;
        }
        self.arrived
            .range(1..)
            .flat_map(|(_, (_, range))| &self.buffer[range.clone()])
            .copied()
            .collect()
    }
}

/// What stays of a job after its record was decoded, to recognise later repeats of its lines.
struct FinishedJob {
    kind: Kind,
    wire_version: u32,
    parts: u32,
    record_crc: u32,
    /// Line crc of every part, by part number (`None`: never arrived).
    line_crcs: Box<[Option<u32>]>,
}

/// How many incomplete records, and how many bytes of them, an [`Assembler`] holds at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingLimits {
    pub jobs: usize,
    pub bytes: usize,
}

impl Default for PendingLimits {
    /// [`PENDING_JOBS_MAX`] and [`PENDING_BYTES_MAX`].
    fn default() -> Self {
        PendingLimits {
            jobs: PENDING_JOBS_MAX,
            bytes: PENDING_BYTES_MAX,
        }
    }
}

/// Collects lines of many jobs, in any order, and reassembles records.
///
/// Memory: the data of incomplete jobs, at most [`PendingLimits`] (beyond, the oldest are
/// given up: [`Problem::Evicted`]; a job's payload beyond [`PAYLOAD_MAX`] is
/// [`Problem::Oversized`]), plus a few bytes per part of every finished job (to report
/// repeated lines as duplicates rather than as new jobs), which grows with the lines pushed.
#[derive(Default)]
pub struct Assembler {
    source: Option<String>,
    line: u64,
    lines_seen: u64,
    limits: PendingLimits,
    pending: HashMap<u64, PendingJob>,
    /// The [`PendingJob::size`] of all pending jobs.
    pending_bytes: usize,
    /// The job the line pushed last began, if it did.
    began: Option<u64>,
    finished: HashMap<u64, FinishedJob>,
    /// Jobs with all payload parts, not yet handed out, with their first-seen index.
    complete: Vec<(u64, CompleteJob)>,
    problems: Vec<Problem>,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// One that holds at most `limits` of incomplete records.
    pub fn with_limits(limits: PendingLimits) -> Self {
        Assembler {
            limits,
            ..Self::default()
        }
    }

    /// Lines pushed from now on come from `name` (e.g. a file path): line numbers in problems
    /// restart at 1 and name it. Jobs may still span sources (e.g. rotated logs).
    pub fn begin_source(&mut self, name: &str) {
        self.source = Some(name.to_string());
        self.line = 0;
    }

    /// Feed one line (a whole syslog line: anything before the mpistat marker is ignored, and
    /// need not be text).
    pub fn push(&mut self, line: impl AsRef<[u8]>) {
        self.line += 1;
        self.lines_seen += 1;
        self.began = None;
        match parse_line(line.as_ref()) {
            Line::NotOurs => {}
            Line::Bad(LineProblem::Corrupt(reason)) => {
                let at = self.here();
                self.problems.push(Problem::CorruptLine { at, reason })
            }
            Line::Bad(LineProblem::UnsupportedVersion(version)) => {
                let at = self.here();
                self.problems
                    .push(Problem::UnsupportedWireVersion { at, version })
            }
            Line::Part(part) => self.add_part(part),
        }
    }

    /// Where the line just pushed is.
    fn here(&self) -> LineRef {
        LineRef {
            source: self.source.clone(),
            line: self.line,
        }
    }

    /// A repeat of a part (`conflicting`: with other content) as a problem.
    fn repeat(&self, key: u64, part: u32, conflicting: bool) -> Problem {
        let (key, at) = (key_text(key), self.here());
        if conflicting {
            Problem::ConflictingPart { key, part, at }
        } else {
            Problem::DuplicatePart { key, part, at }
        }
    }

    fn add_part(&mut self, part: Part<'_>) {
        let key = part.key;
        if let Some(done) = self.finished.get(&key) {
            let same = done.kind == part.kind
                && done.wire_version == part.wire_version
                && done.parts == part.parts
                && done.record_crc == part.record_crc
                && done.line_crcs.get(part.part as usize).copied().flatten() == Some(part.line_crc);
            let problem = self.repeat(key, part.part, !same);
            self.problems.push(problem);
            return;
        }
        let lines_seen = self.lines_seen;
        if !self.pending.contains_key(&key) {
            self.began = Some(key);
        }
        let job = self.pending.entry(key).or_insert_with(|| PendingJob {
            first_seen: lines_seen,
            kind: part.kind,
            wire_version: part.wire_version,
            parts: part.parts,
            record_crc: part.record_crc,
            buffer: Vec::new(),
            summary: Vec::new(),
            arrived: BTreeMap::new(),
        });
        let size_before = if job.arrived.is_empty() {
            0
        } else {
            job.size()
        };
        let conflict = if job.kind != part.kind
            || job.wire_version != part.wire_version
            || job.parts != part.parts
            || job.record_crc != part.record_crc
        {
            Some(true)
        } else {
            job.data(part.part).map(|earlier| earlier != part.data)
        };
        if let Some(conflicting) = conflict {
            let problem = self.repeat(key, part.part, conflicting);
            self.problems.push(problem);
            return;
        }
        job.add(part.part, part.line_crc, part.data);
        self.pending_bytes = self.pending_bytes - size_before + job.size();
        if job.buffer.len() > PAYLOAD_MAX {
            let job = self.remove_pending(key).expect("job is pending");
            let oversize = Oversize {
                what: "payload".into(),
                size: Some(job.buffer.len() as u64),
                max: PAYLOAD_MAX as u64,
                unit: "bytes",
            };
            self.problems.push(oversized(&key_text(key), oversize));
        } else if job.arrived.len() == job.parts as usize {
            let job = self.remove_pending(key).expect("job is pending");
            self.complete(key, job);
        }
        self.keep_within_limits();
    }

    /// Take a pending job out (and its bytes out of the count).
    fn remove_pending(&mut self, key: u64) -> Option<PendingJob> {
        let job = self.pending.remove(&key)?;
        self.pending_bytes -= job.size();
        Some(job)
    }

    /// Give up the oldest pending jobs while there are more than the limits allow.
    fn keep_within_limits(&mut self) {
        let PendingLimits { jobs, bytes } = self.limits;
        while self.pending.len() > jobs || self.pending_bytes > bytes {
            let reason = if self.pending.len() > jobs {
                format!("more than {jobs} records of this sender were waiting for parts")
            } else {
                format!("this sender's records waiting for parts held more than {bytes} bytes")
            };
            self.evict_oldest(&reason);
        }
    }

    /// Give up the pending job whose first line came first, reporting it as
    /// [`Problem::Evicted`] for `reason`; false when no job is pending. (A caller that bounds
    /// the memory of several assemblers evicts from the one holding most.)
    pub fn evict_oldest(&mut self, reason: &str) -> bool {
        let oldest = self.pending.iter().min_by_key(|(_, job)| job.first_seen);
        let Some(key) = oldest.map(|(key, _)| *key) else {
            return false;
        };
        let job = self.remove_pending(key).expect("job is pending");
        self.problems.push(Problem::Evicted {
            key: key_text(key),
            missing: job.missing(),
            parts: job.parts,
            summary: job.summary(),
            reason: reason.to_string(),
        });
        true
    }

    /// Bytes held for jobs whose parts are still arriving (as counted against the limits).
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Queue a job whose payload parts are all there for decoding, and remember it as finished.
    fn complete(&mut self, key: u64, job: PendingJob) {
        let mut line_crcs = vec![None; job.parts as usize].into_boxed_slice();
        for (&part, (line_crc, _)) in &job.arrived {
            line_crcs[part as usize] = Some(*line_crc);
        }
        let finished = FinishedJob {
            kind: job.kind,
            wire_version: job.wire_version,
            parts: job.parts,
            record_crc: job.record_crc,
            line_crcs,
        };
        let first_seen = job.first_seen;
        let complete = CompleteJob {
            key: key_text(key),
            kind: job.kind,
            wire_version: job.wire_version,
            record_crc: job.record_crc,
            payload: job.into_payload(),
        };
        self.complete.push((first_seen, complete));
        self.finished.insert(key, finished);
    }

    /// Records completed so far (in first-seen order) and problems found so far; both are
    /// handed out once. Jobs still missing parts stay pending: they are not problems yet.
    pub fn take_decoded(&mut self) -> Decoded {
        let mut decoded = Decoded {
            problems: std::mem::take(&mut self.problems),
            ..Decoded::default()
        };
        for job in self.take_complete() {
            let outcome = match job.kind() {
                Kind::Job => job.decode().map(|job| decoded.records.push(job.record)),
                Kind::Analysis => job.analysis().map(|a| decoded.analyses.push(a)),
            };
            if let Err(problem) = outcome {
                decoded.problems.push(problem);
            }
        }
        decoded
    }

    /// Like [`Assembler::take_decoded`], for callers that decode themselves (e.g. on other
    /// threads): the jobs completed so far, undecoded, in first-seen order. Problems found in
    /// lines stay for the next `take_decoded` or [`Assembler::take_problems`].
    pub fn take_complete(&mut self) -> Vec<CompleteJob> {
        if self.complete.is_empty() {
            return Vec::new();
        }
        self.complete.sort_by_key(|(first_seen, _)| *first_seen);
        self.complete.drain(..).map(|(_, job)| job).collect()
    }

    /// Problems found in lines so far (handed out once).
    pub fn take_problems(&mut self) -> Vec<Problem> {
        std::mem::take(&mut self.problems)
    }

    /// Jobs whose parts are still arriving.
    pub fn pending_jobs(&self) -> usize {
        self.pending.len()
    }

    /// Whether the line pushed last began a job that is still waiting for parts (its first
    /// line, as [`Assembler::pending_first_lines`] counts).
    pub fn began_a_job(&self) -> bool {
        self.began
            .is_some_and(|key| self.pending.contains_key(&key))
    }

    /// Every job whose parts are still arriving: its key and the arrival number of its first
    /// line, i.e. the count of lines pushed into this assembler up to and including that line. A
    /// caller that counts its pushes the same way can tell where in its input an unfinished job
    /// began (e.g. to resume reading there after a restart).
    pub fn pending_first_lines(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.pending
            .iter()
            .map(|(key, job)| (key_text(*key), job.first_seen))
    }

    /// All remaining records and problems, reporting every job that is still incomplete. Jobs
    /// that only miss their summary (part 0) are decoded.
    pub fn finish(mut self) -> Decoded {
        self.give_up_waiting();
        self.take_decoded()
    }

    /// What [`Assembler::finish`] does before decoding: every job still waiting for parts is
    /// reported as a problem, and those that only miss their summary are queued as complete.
    pub fn give_up_waiting(&mut self) {
        let mut pending: Vec<(u64, u64)> = self
            .pending
            .iter()
            .map(|(key, job)| (job.first_seen, *key))
            .collect();
        pending.sort_unstable();
        for (_, key) in pending {
            self.give_up_job(key);
        }
    }

    /// [`Assembler::give_up_waiting`] for the job with key `key` alone (if it is pending), e.g.
    /// when its parts are overdue while others may still come.
    pub fn give_up(&mut self, key: &str) {
        if let Some(key) = parse_key(key.as_bytes()) {
            self.give_up_job(key);
        }
    }

    fn give_up_job(&mut self, key: u64) {
        let Some(job) = self.remove_pending(key) else {
            return;
        };
        self.problems.push(Problem::MissingParts {
            key: key_text(key),
            missing: job.missing(),
            parts: job.parts,
            summary: job.summary(),
        });
        if job.has_all_payload() {
            self.complete(key, job);
        }
    }
}

/// Version 1: base64 → inflate → crc check of the JSON → record, checking versions and the key.
fn decode_v1(key: &str, payload: &[u8], record_crc: u32) -> Result<DecodedJob, Problem> {
    let deflated = URL_SAFE_NO_PAD
        .decode_to_vec(payload)
        .map_err(|e| bad_payload(key, format!("base64: {e}")))?;
    let record = inflate(&deflated, RECORD_JSON_MAX, "record JSON", |json| {
        if crc32fast::hash(json) != record_crc {
            return Err(Problem::ChecksumMismatch {
                key: key.to_string(),
            });
        }
        record_of_json(key, json)
    })
    .map_err(|e| e.of_job(key))??;
    Ok(DecodedJob { record, deflated })
}

/// Why bytes are not a record (see [`stored_record`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("deflate: {0}")]
    Deflate(String),
    #[error("JSON: {0}")]
    Json(String),
    #[error("oversized: {0}")]
    Oversized(Oversize),
}

impl Unreadable {
    /// As the problem of the job with key `key`.
    fn of_job(self, key: &str) -> Problem {
        match self {
            Unreadable::Deflate(reason) => bad_payload(key, format!("deflate: {reason}")),
            Unreadable::Json(reason) => bad_payload(key, format!("record: {reason}")),
            Unreadable::Oversized(oversize) => oversized(key, oversize),
        }
    }
}

/// Raw DEFLATE `deflated` inflated, if that is at most `max` bytes (`what`: for the reason),
/// handed to `read` (which must not inflate: it runs with the thread's [`Inflater`]).
fn inflate<R>(
    deflated: &[u8],
    max: usize,
    what: &str,
    read: impl FnOnce(&[u8]) -> R,
) -> Result<R, Unreadable> {
    INFLATER.with_borrow_mut(|inflater| inflater.inflate(deflated, max, what).map(read))
}

thread_local! {
    static INFLATER: std::cell::RefCell<Inflater> = std::cell::RefCell::default();
}

/// A thread's DEFLATE decompressor and output buffer, used for record after record: a fresh
/// one each time (`miniz_oxide::inflate::decompress_to_vec_with_limit`) allocated and zeroed
/// 11 kB of state and grew its output from twice the input by copies, a tenth of ingest's CPU.
/// It gives what that gives (`record/tests/wire_props.rs` compares them), as a borrowed slice.
#[derive(Default)]
struct Inflater {
    state: Box<miniz_oxide::inflate::core::DecompressorOxide>,
    /// Initialised bytes (its length): output is written over, never zeroed again.
    output: Vec<u8>,
}

/// Output kept between records: larger buffers (of records near [`RECORD_JSON_MAX`]) are
/// given back, so that an idle thread holds no more than this.
const INFLATE_KEPT_MAX: usize = 256 * 1024;

impl Inflater {
    fn inflate(&mut self, mut input: &[u8], max: usize, what: &str) -> Result<&[u8], Unreadable> {
        use miniz_oxide::inflate::core::{decompress, inflate_flags};
        use miniz_oxide::inflate::{DecompressError, TINFLStatus};
        if self.output.len() > INFLATE_KEPT_MAX {
            self.output = Vec::new();
        }
        // As decompress_to_vec_with_limit: at least twice the input, grown by doubling up to
        // `max`; the whole buffer is the window that matches reach back into.
        let mut window = max.min(input.len().saturating_mul(2).max(self.output.len()));
        self.output.resize(self.output.len().max(window), 0);
        self.state.init();
        let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        let mut end = 0;
        loop {
            let (status, consumed, written) = decompress(
                &mut self.state,
                input,
                &mut self.output[..window],
                end,
                flags,
            );
            end += written;
            match status {
                TINFLStatus::Done => return Ok(&self.output[..end]),
                TINFLStatus::HasMoreOutput if window < max && consumed <= input.len() => {
                    input = &input[consumed..];
                    window = window.saturating_mul(2).clamp(1, max);
                    self.output.resize(self.output.len().max(window), 0);
                }
                TINFLStatus::HasMoreOutput => {
                    return Err(Unreadable::Oversized(Oversize::cut_off(what, max)))
                }
                status => {
                    let output = Vec::new();
                    let reason = DecompressError { status, output }.to_string();
                    return Err(Unreadable::Deflate(reason));
                }
            }
        }
    }
}

/// A record as a store keeps it, raw-DEFLATE JSON ([`DecodedJob::deflated`]), read within
/// the limits: inflated to at most [`RECORD_JSON_MAX`] bytes, parsed, and every field checked
/// ([`limits::check_record`]). Whoever reads a stored record reads it with this (or
/// [`stored_json_record`]), so that no page, mail or report ever sees more than a record may
/// carry, whatever the store holds (e.g. rows stored before the limits).
pub fn stored_record(deflated: &[u8]) -> Result<JobRecord, Unreadable> {
    inflate(deflated, RECORD_JSON_MAX, "record JSON", stored_json_record)?
}

/// A record stored as plain JSON, read within the limits as [`stored_record`].
pub fn stored_json_record(json: &[u8]) -> Result<JobRecord, Unreadable> {
    if json.len() > RECORD_JSON_MAX {
        return Err(Unreadable::Oversized(Oversize {
            what: "record JSON".into(),
            size: Some(json.len() as u64),
            max: RECORD_JSON_MAX as u64,
            unit: "bytes",
        }));
    }
    let mut record: JobRecord =
        serde_json::from_slice(json).map_err(|e| Unreadable::Json(e.to_string()))?;
    limits::check_record(&mut record).map_err(Unreadable::Oversized)?;
    Ok(record)
}

/// Inflate → JSON → record, checking its model version, limits and key.
fn inflate_record(key: &str, deflated: &[u8]) -> Result<JobRecord, Problem> {
    inflate(deflated, RECORD_JSON_MAX, "record JSON", |json| {
        record_of_json(key, json)
    })
    .map_err(|e| e.of_job(key))?
}

/// The record in `json`, checking its model version, its limits and that its key is `key`.
fn record_of_json(key: &str, json: &[u8]) -> Result<JobRecord, Problem> {
    let mut record: JobRecord = parse_versioned(key, json, "record")?;
    limits::check_record(&mut record).map_err(|oversize| oversized(key, oversize))?;
    if record.wire_key() != key {
        return Err(bad_payload(
            key,
            format!("the record's own key is {}", record.wire_key()),
        ));
    }
    Ok(record)
}

/// A value with a model `version` field (record, index or analysis) from `json`, rejecting models
/// newer than its type reads.
fn parse_versioned<T: serde::de::DeserializeOwned + HasVersion>(
    key: &str,
    json: &[u8],
    what: &str,
) -> Result<T, Problem> {
    // Straight into the value (the common case); only when that fails is the version looked
    // at, to tell a newer model from a broken payload.
    let parsed = serde_json::from_slice::<T>(json);
    let version = match &parsed {
        Ok(value) => Some(u64::from(value.version())),
        Err(_) => {
            serde_json::from_slice::<ModelVersion>(json)
                .map_err(|e| bad_payload(key, format!("{what} JSON: {e}")))?
                .version
        }
    };
    match version {
        Some(version) if version > u64::from(T::NEWEST) => Err(Problem::UnsupportedModelVersion {
            key: key.to_string(),
            version,
        }),
        Some(_) => parsed.map_err(|e| bad_payload(key, format!("{what}: {e}"))),
        None => Err(bad_payload(key, format!("{what}: no model version"))),
    }
}

/// The model version a record, index or analysis carries, and the newest this build reads.
trait HasVersion {
    const NEWEST: u32;
    fn version(&self) -> u32;
}

impl HasVersion for AnalysisRecord {
    const NEWEST: u32 = ANALYSIS_MODEL_VERSION;
    fn version(&self) -> u32 {
        self.version
    }
}

impl HasVersion for JobRecord {
    const NEWEST: u32 = MODEL_VERSION;
    fn version(&self) -> u32 {
        self.version
    }
}

impl HasVersion for JobIndex {
    const NEWEST: u32 = MODEL_VERSION;
    fn version(&self) -> u32 {
        self.version
    }
}

/// Just the model version of a record's JSON (any other field ignored).
#[derive(serde::Deserialize)]
struct ModelVersion {
    version: Option<u64>,
}

/// Decode all records found in `lines`.
pub fn decode<'a>(lines: impl IntoIterator<Item = &'a str>) -> Decoded {
    let mut asm = Assembler::new();
    for l in lines {
        asm.push(l);
    }
    asm.finish()
}

#[cfg(test)]
mod tests {
    use super::escape;
    use proptest::prelude::*;

    /// `escape` as it was written before it had to be small (pieces collected, then joined).
    fn escape_by_pieces(value: &str, max: usize) -> String {
        let escaped: Vec<String> = value
            .bytes()
            .map(|b| match b {
                b'\\' | b'%' => format!("\\x{b:02x}"),
                b'!'..=b'~' => (b as char).to_string(),
                _ => format!("\\x{b:02x}"),
            })
            .collect();
        if escaped.iter().map(String::len).sum::<usize>() <= max {
            return escaped.concat();
        }
        let mut out = String::new();
        for piece in escaped {
            if out.len() + piece.len() > max - 3 {
                break;
            }
            out.push_str(&piece);
        }
        out.push_str("...");
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn escape_is_the_pieces_joined_and_cut(
            value in prop_oneof![".{0,80}", "[ -~]{0,80}", "[%\\\\ \n\t\u{0}é漢a-c]{0,40}"],
            max in 3usize..90,
        ) {
            prop_assert_eq!(escape(&value, max), escape_by_pieces(&value, max));
        }
    }
}
