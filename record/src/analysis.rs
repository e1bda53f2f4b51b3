//! The analysis record: what `mpistat analyze --send` found in a traced job's trace, sent to
//! syslog by the job's own user (like the job record) so that the digest never reads a trace.
//!
//! It names its job by the job key the profiler wrote into the trace directory. Whoever files it
//! must check that the kernel-attested sender is [`AnalysisRecord::uid`] and that the job's
//! record (filed by its own attested sender) has that uid too: the record only says what the
//! sender claims. On the wire it travels like a job record, marker `MPISTATA` (see
//! [`crate::wire`]).

use serde::{Deserialize, Serialize};

/// Version of the analysis record's data model (its JSON carries it).
pub const ANALYSIS_MODEL_VERSION: u32 = 1;

/// The file the profiler's rank 0 writes into a traced job's directory once every rank's trace
/// files are complete: the job key (16 lowercase hex digits) and a newline.
pub const JOB_KEY_FILE: &str = "job-key";

/// One analysis of one traced job.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct AnalysisRecord {
    /// [`ANALYSIS_MODEL_VERSION`] when written.
    pub version: u32,
    /// The analysed job's [`crate::JobRecord::key`].
    pub job_key: String,
    /// Who ran the analysis (the trace's owner): must be the attested sender and the job's uid.
    pub uid: u32,
    pub user: String,
    pub host: String,
    /// The trace directory as the analysis saw it (shown to the user; nobody else opens it).
    pub dir: String,
    /// JSON of a [`Summary`] when the analysis succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why it failed, otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub analysed_unix_ms: u64,
}

/// The few facts of an analysis that the weekly mail and the job's page tell (the "level 6" of
/// Rolf Rabenseifner's "Automatic MPI Counter Profiling"): carried as JSON in
/// [`AnalysisRecord::summary`] and stored as such.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub wall_s: f64,
    /// Waiting time in % of the allocation (ranks × wall time).
    pub waiting_percent: f64,
    /// Critical-path imbalance (sum over call paths of time on the path beyond the average) in
    /// % of the wall time.
    pub critical_imbalance_percent: f64,
    /// The top root causes of waiting, in plain language.
    pub causes: Vec<String>,
    /// What the trace reader said (e.g. where recording stopped).
    pub notes: Vec<String>,
}

impl AnalysisRecord {
    /// The key of this record's syslog lines: derived from the job key (one analysis per job;
    /// a repeat of the same analysis is a duplicate), distinct from the job's own key.
    pub fn key(&self) -> String {
        analysis_key(&self.job_key)
    }
}

/// [`AnalysisRecord::key`] of the analysis of the job with key `job_key`.
pub fn analysis_key(job_key: &str) -> String {
    // FNV-1a as the job key, over a prefix that no job key's input has.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "analysis\0".bytes().chain(job_key.bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Whether `text` is a job key: 16 lowercase hex digits.
pub fn is_job_key(text: &str) -> bool {
    text.len() == 16 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode, encode_analysis, Problem};

    fn analysis() -> AnalysisRecord {
        AnalysisRecord {
            version: ANALYSIS_MODEL_VERSION,
            job_key: "0123456789abcdef".into(),
            uid: 1000,
            user: "alice".into(),
            host: "node1".into(),
            dir: "/home/alice/.mpistat/traces/1".into(),
            // Incompressible enough to need several parts.
            summary: Some(format!(
                "{:?}",
                (0..8000u64)
                    .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40)
                    .collect::<Vec<_>>()
            )),
            error: None,
            analysed_unix_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn an_analysis_comes_back_whole_and_is_not_a_job() {
        let a = analysis();
        let lines = encode_analysis(&a);
        assert!(lines.len() > 2, "chunked like a job record");
        assert!(lines
            .iter()
            .all(|l| l.starts_with("MPISTATA1 ") && l.len() <= crate::wire::MAX_MESSAGE));
        let with_syslog_header: Vec<String> = lines.iter().map(|l| format!("x y: {l}")).collect();
        let decoded = decode(with_syslog_header.iter().map(String::as_str));
        assert_eq!(decoded.analyses, vec![a.clone()]);
        assert!(decoded.records.is_empty() && decoded.problems.is_empty());
        assert_ne!(a.key(), a.job_key);
    }

    #[test]
    fn a_damaged_or_unknown_analysis_is_a_problem() {
        let mut lines = encode_analysis(&analysis());
        lines[1] = lines[1].replacen("MPISTATA1", "MPISTATA9", 1);
        let decoded = decode(lines.iter().map(String::as_str));
        assert!(decoded.analyses.is_empty());
        assert!(decoded.problems.iter().any(
            |p| matches!(p, Problem::UnsupportedWireVersion { version, .. } if version == "A9")
        ));
        let mut other = analysis();
        other.job_key = "fedcba9876543210".into();
        let mut lines = encode_analysis(&other);
        // A part of another analysis under this one's key: its line crc no longer matches.
        lines[1] = lines[1].replacen(&other.key(), &analysis().key(), 1);
        let decoded = decode(lines.iter().map(String::as_str));
        assert!(decoded.analyses.is_empty(), "{:?}", decoded.problems);
    }

    #[test]
    fn job_keys_are_sixteen_lowercase_hex_digits() {
        assert!(is_job_key("0123456789abcdef"));
        assert!(!is_job_key("0123456789ABCDEF"));
        assert!(!is_job_key("../../etc/shadow"));
    }
}
