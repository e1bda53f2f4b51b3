//! Typed errors of the analysis and the trace format.

use crate::model::{Rank, Ticks};
use thiserror::Error;

/// Why a trace cannot be analysed.
#[derive(Debug, Error, PartialEq)]
pub enum AnalysisError {
    #[error("the trace has no ranks")]
    Empty,
    #[error("rank {rank}, event {index}: time {time} is before the previous event's {previous}")]
    TimeGoesBack {
        rank: Rank,
        index: usize,
        time: Ticks,
        previous: Ticks,
    },
    #[error("rank {rank}, event {index}: {what}")]
    BadNesting {
        rank: Rank,
        index: usize,
        what: &'static str,
    },
    #[error("rank {rank}, event {index}: unknown {what} {id}")]
    UnknownId {
        rank: Rank,
        index: usize,
        what: &'static str,
        id: u64,
    },
    #[error(
        "the backward replay stalled: the trace's messages form a cycle (ranks {stuck:?} wait)"
    )]
    ReplayStalled { stuck: Vec<Rank> },
    /// A distributed analysis stops everywhere when one of its processes failed.
    #[error("analysis process {process} failed (its own message says why)")]
    ElsewhereFailed { process: usize },
}

/// Why a trace file cannot be read.
#[derive(Debug, Error)]
pub enum TraceFileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not an mpistat trace file (bad magic)")]
    BadMagic { path: String },
    #[error("{path}: trace format version {found} is not supported (this mpistat reads version {supported})")]
    Version {
        path: String,
        found: u16,
        supported: u16,
    },
    #[error("{path}: truncated at byte {offset} (in {what}); the writer did not finish")]
    Truncated {
        path: String,
        offset: usize,
        what: &'static str,
    },
    #[error("{path}: garbled at byte {offset}: {what}")]
    Garbled {
        path: String,
        offset: usize,
        what: String,
    },
    #[error("{dir}: no definitions file `{name}` (nor the profiler's local-NNNNNN.mpt files)")]
    NoDefinitions { dir: String, name: &'static str },
    /// Not read: what it is, or what it says it holds, is not what a trace may be.
    #[error("{path}: {why}")]
    Refused { path: String, why: String },
}

/// Why a trace directory cannot be analysed: a file, or the trace in it.
#[derive(Debug, Error)]
pub enum AnalyzeDirError {
    #[error(transparent)]
    File(#[from] TraceFileError),
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// A trace of another format (see [`crate::source`]) that cannot be read.
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
}

/// Why an analysis does not start: its trace is too big for the memory of its processes (see
/// [`crate::memory`]), or the directory cannot be listed.
#[derive(Debug, Error)]
pub enum MemoryError {
    #[error(transparent)]
    File(#[from] TraceFileError),
    #[error("{0}")]
    TooBig(crate::memory::TooBig),
    /// A trace of another format whose sizes cannot be read.
    #[error(transparent)]
    Source(AnalyzeDirError),
}
