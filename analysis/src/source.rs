//! Where a trace comes from: the narrow interface between the analysis and a trace format.
//!
//! The passes need, per rank, a timeline built from its events ([`crate::timeline::build`]) and
//! the global [`Definitions`]; the memory check needs each rank's estimated events before
//! anything is read. An mpistat trace directory ([`TraceDir`]) is one source; an OTF2 archive
//! (crate `mpistat-otf2`) is another. Both the one-process analysis
//! ([`crate::analysis::run_passes_on`]) and the distributed one
//! ([`crate::distributed::forward_on`]) take any source.

use crate::analysis::{read_timelines, Built};
use crate::error::AnalyzeDirError;
use crate::memory::FILE_BYTES_PER_EVENT;
use crate::model::{Definitions, Rank};
use crate::tracefile::{rank_file_sizes, DirContents};
use std::path::{Path, PathBuf};

/// What a trace will hold, estimated from its files' sizes alone (see [`crate::memory`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Per rank that has events, their estimated number (an over-estimate rather than under).
    pub events: Vec<(Rank, u64)>,
    /// Bytes the definitions take in memory on every process (besides the events).
    pub definition_bytes: u64,
}

/// A trace the analysis can read: its definitions and, rank by rank, its events.
pub trait TraceSource: Sync {
    /// The trace's path, for messages.
    fn path(&self) -> &Path;

    /// Each rank's estimated events, from sizes alone.
    fn estimate(&self) -> Result<Estimate, AnalyzeDirError>;

    /// The definitions, per world rank its timeline (`None` for ranks not `wanted`; an empty one
    /// for a wanted rank without events), and problems that did not stop the reading. Each
    /// rank's events go straight into its timeline: they are never all in memory.
    fn read_timelines(
        &self,
        wanted: &(dyn Fn(Rank) -> bool + Sync),
    ) -> Result<DirContents<Built>, AnalyzeDirError>;
}

/// An mpistat trace directory (`tracefile.rs`).
#[derive(Debug, Clone)]
pub struct TraceDir(pub PathBuf);

impl TraceSource for TraceDir {
    fn path(&self) -> &Path {
        &self.0
    }

    fn estimate(&self) -> Result<Estimate, AnalyzeDirError> {
        let events = rank_file_sizes(&self.0)?
            .into_iter()
            .map(|(rank, bytes)| (rank, bytes / FILE_BYTES_PER_EVENT))
            .collect();
        Ok(Estimate {
            events,
            definition_bytes: 0,
        })
    }

    fn read_timelines(
        &self,
        wanted: &(dyn Fn(Rank) -> bool + Sync),
    ) -> Result<DirContents<Built>, AnalyzeDirError> {
        read_timelines(&self.0, wanted)
    }
}

/// The world size of a trace's definitions: `MPI_COMM_WORLD`'s members.
pub fn world_size(definitions: &Definitions) -> u32 {
    definitions
        .communicators
        .first()
        .map_or(0, |c| c.members.len() as u32)
}
