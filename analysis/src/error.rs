//! Typed errors of the analysis (the trace format's are `mpistat_trace::error`).

use mpistat_trace::error::TraceFileError;
use mpistat_trace::model::{Rank, Ticks};
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

/// Why a trace directory cannot be analysed: a file, or the trace in it.
#[derive(Debug, Error)]
pub enum AnalyzeDirError {
    #[error(transparent)]
    File(#[from] TraceFileError),
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// A trace of another format (see the analysis's `source`) that cannot be read.
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
}
