//! Wire format: a [`JobRecord`] as syslog messages, and syslog lines back into records.
//!
//! # Format (wire version 1)
//!
//! A record is sent as `n` messages (`2 <= n <= MAX_PARTS`), each at most [`MAX_MESSAGE`] bytes
//! of printable ASCII (`0x20..=0x7e`: no newline, NUL or other byte syslog might mangle; the
//! only `%` is the one after the MPI percentage). Every message has six space-separated fields:
//!
//! ```text
//! MPISTAT1 <key> <i>/<n> <record crc> <line crc> <data>
//! ```
//!
//! * `MPISTAT1` — the marker; the digits after `MPISTAT` are the wire version. Decoders look for
//!   the first `MPISTAT<digits> ` anywhere in a syslog line (whatever syslog put in front is
//!   ignored); lines without a marker are not ours. A version other than `1` is reported.
//! * `<key>` — [`JobRecord::key`]: 16 lowercase hex digits, the same on all parts of a job.
//! * `<i>/<n>` — part `i` (decimal, `0 <= i < n`) of `n` parts.
//! * `<record crc>` — CRC-32 (IEEE 802.3, as in zlib) of the record's JSON text (below),
//!   8 lowercase hex digits, the same on all parts.
//! * `<line crc>` — CRC-32 of the message with this field and the space after it removed, i.e. of
//!   `MPISTAT1 <key> <i>/<n> <record crc> <data>`; 8 lowercase hex digits. It tells the decoder
//!   *which* line is corrupt.
//! * `<data>` — part 0: a human-readable summary, `name=value` pairs separated by single spaces
//!   (`user= uid= exe= host= ranks= nodes= wall=<s>s mpi=<percent>% job=` and `partial=` for
//!   partial records). In values every byte outside `!`..=`~` and every `\` and `%` is written
//!   as `\xHH` (lowercase hex) and long values are cut, ending in `...`. The summary is for
//!   people reading syslog; decoders need not parse it.
//!   Parts `1..n`: consecutive chunks of the payload, which is the record serialised as JSON
//!   (serde field names of [`JobRecord`], carrying the model `version`), compressed with raw
//!   DEFLATE (RFC 1951, no zlib header) and encoded as URL-safe base64 without padding
//!   (RFC 4648 §5). Concatenate the chunks in part order, base64-decode, inflate, check the
//!   record crc, parse the JSON.
//!
//! A decoder groups parts by key; the lines of many jobs may be interleaved, repeated and
//! reordered. A record is complete when parts `1..n` are there (part 0 is only the summary; a
//! record without it is returned and the missing summary reported).
//!
//! # Decoding
//!
//! [`Assembler`] takes lines one at a time and never fails: everything wrong is a [`Problem`]
//! next to the records that could be decoded ([`Decoded`]). Records complete as soon as their
//! last part arrives and can be taken early with [`Assembler::take_decoded`] (for following a
//! live log); [`Assembler::finish`] returns the rest and reports what stayed incomplete. Callers
//! that decode on other threads take the complete jobs undecoded ([`Assembler::take_complete`],
//! [`CompleteJob::decode`]), which also gives the checked deflated payload to store as it is.

use crate::model::{JobRecord, MODEL_VERSION};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Longest message (after the syslog header) that `encode` produces, in bytes; with an RFC 3164
/// header this keeps every syslog line within 1024 bytes.
pub const MAX_MESSAGE: usize = 900;

/// The wire version this module writes and reads.
pub const WIRE_VERSION: u32 = 1;

/// Most parts a record may have (about 8 MB of compressed payload); lines claiming more are
/// rejected as corrupt so that a forged line cannot make the decoder allocate without bound.
pub const MAX_PARTS: u32 = 10_000;

/// Largest inflated payload the decoder accepts, in bytes.
const MAX_PAYLOAD: usize = 64 << 20;

const MARKER: &str = "MPISTAT";

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

/// Part numbers as compact ranges, e.g. `0, 3-5`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartList(pub Vec<u32>);

impl fmt::Display for PartList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if start != self.0[0] {
                f.write_str(", ")?;
            }
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
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
    /// A part arrived again with different content (or a different part count or record crc than
    /// the job's first line); the first one seen was kept.
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
    /// The reassembled payload is not a record (bad base64, deflate or JSON, wrong key).
    #[error("job {key}: bad payload: {reason}")]
    BadPayload { key: String, reason: String },
    /// The record's data-model version is newer than this decoder.
    #[error(
        "job {key}: unsupported record model version {version} (newest known: {MODEL_VERSION})"
    )]
    UnsupportedModelVersion { key: String, version: u64 },
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
    pub problems: Vec<Problem>,
}

/// A job whose payload parts have all arrived, not yet decoded (see
/// [`Assembler::take_complete`]): decoding is the costly step, and independent per job.
#[derive(Debug, Clone)]
pub struct CompleteJob {
    pub key: String,
    record_crc: u32,
    /// The base64 payload, parts in order.
    payload: String,
}

/// A decoded record and the raw-DEFLATE JSON it came from (checked against the record crc), which
/// a store can keep as it is instead of serialising and compressing the record again.
#[derive(Debug, Clone)]
pub struct DecodedJob {
    pub record: JobRecord,
    pub deflated: Vec<u8>,
}

impl CompleteJob {
    /// Base64 → inflate → crc check → JSON → record, checking versions and the key.
    pub fn decode(&self) -> Result<DecodedJob, Problem> {
        decode_payload(&self.key, &self.payload, self.record_crc)
    }
}

/// Bytes of every message before `<i>/<n>`, and of the separators and crcs after it.
const HEADER_FIXED: usize = MARKER.len() + 1 + 1 + 16 + 1 + 1 + 8 + 1 + 8 + 1;

/// Encode a record as syslog messages (without syslog header).
pub fn encode(record: &JobRecord) -> Vec<String> {
    let json = serde_json::to_vec(record).expect("a JobRecord always serialises");
    let record_crc = crc32fast::hash(&json);
    let payload = URL_SAFE_NO_PAD.encode(miniz_oxide::deflate::compress_to_vec(&json, 9));
    let chunk_len = chunk_len_for(payload.len());
    // Base64 is ASCII, so byte chunks are valid strings.
    let chunks: Vec<&str> = payload
        .as_bytes()
        .chunks(chunk_len)
        .map(|chunk| std::str::from_utf8(chunk).expect("base64 is ASCII"))
        .collect();
    let parts = chunks.len() as u32 + 1;
    let key = record.key();
    let summary = summary(record);
    std::iter::once(summary.as_str())
        .chain(chunks)
        .enumerate()
        .map(|(part, data)| message(&key, part as u32, parts, record_crc, data))
        .collect()
}

/// Payload bytes per part such that every message fits in [`MAX_MESSAGE`].
fn chunk_len_for(payload_len: usize) -> usize {
    let mut digits = 1;
    loop {
        let chunk_len = MAX_MESSAGE - HEADER_FIXED - (2 * digits + 1);
        let parts = payload_len.div_ceil(chunk_len) + 1;
        if parts.to_string().len() <= digits {
            return chunk_len;
        }
        digits += 1;
    }
}

fn message(key: &str, part: u32, parts: u32, record_crc: u32, data: &str) -> String {
    let head = format!("{MARKER}{WIRE_VERSION} {key} {part}/{parts} {record_crc:08x} ");
    let line_crc = line_crc(&head, data);
    format!("{head}{line_crc:08x} {data}")
}

/// CRC of a message without its line-crc field: `head` ends with the space before that field.
fn line_crc(head: &str, data: &str) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(head.as_bytes());
    hasher.update(data.as_bytes());
    hasher.finalize()
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

/// One of our messages, parsed and with a good line checksum.
struct Part<'a> {
    key: &'a str,
    part: u32,
    parts: u32,
    record_crc: u32,
    line_crc: u32,
    data: &'a str,
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

/// The first `MPISTAT<digits> ` in `line`: its digits (the wire version) and the text after it.
fn find_marker(line: &str) -> Option<(&str, &str)> {
    let mut from = 0;
    while let Some(found) = line[from..].find(MARKER) {
        let after = &line[from + found + MARKER.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after.as_bytes().get(digits) == Some(&b' ') {
            return Some((&after[..digits], &after[digits + 1..]));
        }
        from += found + MARKER.len();
    }
    None
}

fn parse_line(line: &str) -> Line<'_> {
    let line = line.trim_end_matches(['\r', '\n']);
    let Some((version, rest)) = find_marker(line) else {
        return Line::NotOurs;
    };
    if version.parse() != Ok(WIRE_VERSION) {
        return Line::Bad(LineProblem::UnsupportedVersion(version.to_string()));
    }
    match parse_fields(version, rest) {
        Ok(part) => Line::Part(part),
        Err(reason) => Line::Bad(LineProblem::Corrupt(reason)),
    }
}

fn parse_fields<'a>(version: &str, rest: &'a str) -> Result<Part<'a>, String> {
    let mut fields = [""; 5];
    let mut found = 0;
    for (slot, field) in fields.iter_mut().zip(rest.splitn(5, ' ')) {
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
    hasher.update(MARKER.as_bytes());
    hasher.update(version.as_bytes());
    hasher.update(b" ");
    hasher.update(&rest.as_bytes()[..head_len]);
    hasher.update(data.as_bytes());
    if hasher.finalize() != line_crc {
        return Err("line checksum mismatch".into());
    }
    // The line checksum is good: what follows only fails for lines written wrongly.
    if key.len() != 16 || !key.bytes().all(is_lower_hex) {
        return Err(format!("job key {key:?} is not 16 lowercase hex digits"));
    }
    let (part, parts) = part_of
        .split_once('/')
        .and_then(|(i, n)| Some((i.parse::<u32>().ok()?, n.parse::<u32>().ok()?)))
        .ok_or_else(|| format!("part {part_of:?} is not <i>/<n>"))?;
    if !(2..=MAX_PARTS).contains(&parts) || part >= parts {
        return Err(format!("part {part}/{parts} out of range"));
    }
    let record_crc =
        parse_hex32(record_crc).ok_or("record checksum is not 8 lowercase hex digits")?;
    if data.is_empty() {
        return Err("no data".into());
    }
    Ok(Part {
        key,
        part,
        parts,
        record_crc,
        line_crc,
        data,
    })
}

fn is_lower_hex(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'a'..=b'f')
}

fn parse_hex32(text: &str) -> Option<u32> {
    if text.len() != 8 || !text.bytes().all(is_lower_hex) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// A job whose parts are still arriving.
struct PendingJob {
    /// Global arrival index of the job's first line: records come out in first-seen order.
    first_seen: u64,
    parts: u32,
    record_crc: u32,
    /// Line crc and data of every part that arrived, by part number.
    data: BTreeMap<u32, (u32, String)>,
}

impl PendingJob {
    fn has_all_payload(&self) -> bool {
        (1..self.parts).all(|part| self.data.contains_key(&part))
    }
}

/// What stays of a job after its record was decoded, to recognise later repeats of its lines.
struct FinishedJob {
    parts: u32,
    record_crc: u32,
    /// Line crc of every part that arrived, by part number.
    line_crcs: BTreeMap<u32, u32>,
}

/// Collects lines of many jobs, in any order, and reassembles records.
///
/// Memory: the data of incomplete jobs, plus a few bytes per part of every finished job (to
/// report repeated lines as duplicates rather than as new jobs).
#[derive(Default)]
pub struct Assembler {
    source: Option<String>,
    line: u64,
    lines_seen: u64,
    pending: HashMap<String, PendingJob>,
    finished: HashMap<String, FinishedJob>,
    /// Jobs with all payload parts, not yet handed out, with their first-seen index.
    complete: Vec<(u64, CompleteJob)>,
    problems: Vec<Problem>,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lines pushed from now on come from `name` (e.g. a file path): line numbers in problems
    /// restart at 1 and name it. Jobs may still span sources (e.g. rotated logs).
    pub fn begin_source(&mut self, name: &str) {
        self.source = Some(name.to_string());
        self.line = 0;
    }

    /// Feed one line (a whole syslog line: anything before the mpistat marker is ignored).
    pub fn push(&mut self, line: &str) {
        self.line += 1;
        self.lines_seen += 1;
        let at = || LineRef {
            source: self.source.clone(),
            line: self.line,
        };
        match parse_line(line) {
            Line::NotOurs => {}
            Line::Bad(LineProblem::Corrupt(reason)) => self
                .problems
                .push(Problem::CorruptLine { at: at(), reason }),
            Line::Bad(LineProblem::UnsupportedVersion(version)) => self
                .problems
                .push(Problem::UnsupportedWireVersion { at: at(), version }),
            Line::Part(part) => {
                let at = at();
                self.add_part(part, at)
            }
        }
    }

    fn add_part(&mut self, part: Part<'_>, at: LineRef) {
        let key = part.key;
        let repeat = |conflicting: bool| {
            let (key, part) = (key.to_string(), part.part);
            if conflicting {
                Problem::ConflictingPart { key, part, at }
            } else {
                Problem::DuplicatePart { key, part, at }
            }
        };
        if let Some(done) = self.finished.get(key) {
            let same = done.parts == part.parts
                && done.record_crc == part.record_crc
                && done.line_crcs.get(&part.part) == Some(&part.line_crc);
            self.problems.push(repeat(!same));
            return;
        }
        let lines_seen = self.lines_seen;
        let job = self
            .pending
            .entry(key.to_string())
            .or_insert_with(|| PendingJob {
                first_seen: lines_seen,
                parts: part.parts,
                record_crc: part.record_crc,
                data: BTreeMap::new(),
            });
        if job.parts != part.parts || job.record_crc != part.record_crc {
            self.problems.push(repeat(true));
            return;
        }
        if let Some((_, earlier)) = job.data.get(&part.part) {
            let conflicting = earlier != part.data;
            self.problems.push(repeat(conflicting));
            return;
        }
        job.data
            .insert(part.part, (part.line_crc, part.data.to_string()));
        if job.data.len() == job.parts as usize {
            let job = self.pending.remove(key).expect("job is pending");
            self.complete(key.to_string(), job);
        }
    }

    /// Queue a job whose payload parts are all there for decoding, and remember it as finished.
    fn complete(&mut self, key: String, job: PendingJob) {
        let line_crcs = job
            .data
            .iter()
            .map(|(&part, (line_crc, _))| (part, *line_crc))
            .collect();
        let payload: String = job
            .data
            .range(1..)
            .map(|(_, (_, data))| data.as_str())
            .collect();
        let complete = CompleteJob {
            key: key.clone(),
            record_crc: job.record_crc,
            payload,
        };
        self.complete.push((job.first_seen, complete));
        let finished = FinishedJob {
            parts: job.parts,
            record_crc: job.record_crc,
            line_crcs,
        };
        self.finished.insert(key, finished);
    }

    /// Records completed so far (in first-seen order) and problems found so far; both are
    /// handed out once. Jobs still missing parts stay pending: they are not problems yet.
    pub fn take_decoded(&mut self) -> Decoded {
        let mut decoded = Decoded {
            records: Vec::new(),
            problems: std::mem::take(&mut self.problems),
        };
        for job in self.take_complete() {
            match job.decode() {
                Ok(job) => decoded.records.push(job.record),
                Err(problem) => decoded.problems.push(problem),
            }
        }
        decoded
    }

    /// Like [`Assembler::take_decoded`], for callers that decode themselves (e.g. on other
    /// threads): the jobs completed so far, undecoded, in first-seen order. Problems found in
    /// lines stay for the next `take_decoded` or [`Assembler::take_problems`].
    pub fn take_complete(&mut self) -> Vec<CompleteJob> {
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

    /// Every job whose parts are still arriving: its key and the arrival number of its first
    /// line, i.e. the count of lines pushed into this assembler up to and including that line. A
    /// caller that counts its pushes the same way can tell where in its input an unfinished job
    /// began (e.g. to resume reading there after a restart).
    pub fn pending_first_lines(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.pending
            .iter()
            .map(|(key, job)| (key.as_str(), job.first_seen))
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
        let mut pending: Vec<(String, PendingJob)> = self.pending.drain().collect();
        pending.sort_by_key(|(_, job)| job.first_seen);
        for (key, job) in pending {
            let missing: Vec<u32> = (0..job.parts)
                .filter(|p| !job.data.contains_key(p))
                .collect();
            let summary = job.data.get(&0).map(|(_, summary)| summary.clone());
            self.problems.push(Problem::MissingParts {
                key: key.clone(),
                missing: PartList(missing),
                parts: job.parts,
                summary,
            });
            if job.has_all_payload() {
                self.complete(key, job);
            }
        }
    }
}

/// Base64 → inflate → crc check → JSON → record, checking versions and the key.
fn decode_payload(key: &str, payload: &str, record_crc: u32) -> Result<DecodedJob, Problem> {
    let bad = |reason: String| Problem::BadPayload {
        key: key.to_string(),
        reason,
    };
    let deflated = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|e| bad(format!("base64: {e}")))?;
    let json = miniz_oxide::inflate::decompress_to_vec_with_limit(&deflated, MAX_PAYLOAD)
        .map_err(|e| bad(format!("deflate: {e}")))?;
    if crc32fast::hash(&json) != record_crc {
        return Err(Problem::ChecksumMismatch {
            key: key.to_string(),
        });
    }
    // Straight into a record (the common case); only when that fails is the version looked at,
    // to tell a newer model from a broken payload.
    let parsed = serde_json::from_slice::<JobRecord>(&json);
    let version = match &parsed {
        Ok(record) => Some(u64::from(record.version)),
        Err(_) => {
            serde_json::from_slice::<ModelVersion>(&json)
                .map_err(|e| bad(format!("JSON: {e}")))?
                .version
        }
    };
    match version {
        Some(version) if version > u64::from(MODEL_VERSION) => {
            return Err(Problem::UnsupportedModelVersion {
                key: key.to_string(),
                version,
            })
        }
        Some(_) => {}
        None => return Err(bad("no model version".into())),
    }
    let record = parsed.map_err(|e| bad(format!("record: {e}")))?;
    if record.key() != key {
        return Err(bad(format!("the record's own key is {}", record.key())));
    }
    Ok(DecodedJob { record, deflated })
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
