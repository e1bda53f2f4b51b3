//! Typed errors of the analysis's reports, its Perfetto output and `--send`; their messages are
//! what `mpistat analyze` and `mpistat-analyze` say.

use mpistat_analysis::error::{AnalysisError, AnalyzeDirError};
use mpistat_analysis::memory::MemoryError;
use mpistat_otf2::Otf2Error;
use std::io;
use std::path::PathBuf;
use thiserror::Error;

/// Why an analysis, its report or one of its outputs failed.
#[derive(Debug, Error)]
pub enum ReportError {
    #[error("unknown format {0:?} (one of text, json, html, summary, wait-states)")]
    UnknownFormat(String),
    #[error("{}: already an OTF2 archive; --otf2 exports mpistat's own trace directories", .0.display())]
    AlreadyOtf2(PathBuf),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Analysis(#[from] AnalyzeDirError),
    #[error(transparent)]
    Otf2(#[from] Otf2Error),
    #[error(transparent)]
    Perfetto(#[from] PerfettoError),
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl ReportError {
    /// The error of a process of a distributed analysis that stopped because another one failed
    /// (which says why itself).
    pub fn failed_elsewhere(&self) -> bool {
        matches!(
            self,
            ReportError::Analysis(AnalyzeDirError::Analysis(
                AnalysisError::ElsewhereFailed { .. }
            )) | ReportError::Otf2(Otf2Error::ElsewhereFailed { .. })
        )
    }
}

/// Why the Perfetto timeline could not be written.
#[derive(Debug, Error)]
pub enum PerfettoError {
    #[error("{}: {error}", path.display())]
    File { path: PathBuf, error: io::Error },
    /// Another process of a distributed analysis failed on the file.
    #[error("{}: analysis process {process} could not {what}", path.display())]
    Elsewhere {
        path: PathBuf,
        process: usize,
        what: &'static str,
    },
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Labels(#[from] serde_json::Error),
}

/// Why `--send` sent nothing: the trace is not the caller's, or syslog cannot be reached.
#[derive(Debug, Error)]
pub enum SendError {
    #[error("cannot look at {}", path.display())]
    Look {
        path: PathBuf,
        #[source]
        error: io::Error,
    },
    #[error("{} is not a {kind} of yours (uid {uid}); a trace is analysed only by its owner", path.display())]
    NotYours {
        path: PathBuf,
        kind: &'static str,
        uid: u32,
    },
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        error: io::Error,
    },
    #[error("{} does not hold a job key", .0.display())]
    NoJobKey(PathBuf),
    #[error("cannot reach syslog at {}", socket.display())]
    Unreachable {
        socket: PathBuf,
        #[source]
        error: io::Error,
    },
    #[error("syslog at {} took {sent} of {lines} lines", socket.display())]
    Refused {
        socket: PathBuf,
        sent: usize,
        lines: usize,
        #[source]
        error: io::Error,
    },
    #[error(transparent)]
    Io(#[from] io::Error),
}
