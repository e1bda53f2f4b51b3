//! Typed errors of the trace format.

use thiserror::Error;

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
