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
use mpistat_trace::model::{Definitions, Rank};
use mpistat_trace::tracefile::{survey, DirContents, Survey};
use std::path::{Path, PathBuf};

/// A trace the analysis can read: its definitions and, rank by rank, its events.
pub trait TraceSource: Sync {
    /// The trace's path, for messages.
    fn path(&self) -> &Path;

    /// What the memory check estimates from, in the units of an mpistat trace directory's
    /// (see [`crate::memory`]): each rank's events as bytes of mpistat's format
    /// (`memory::FILE_BYTES_PER_EVENT` a event), the world size, the definitions' bytes.
    fn survey(&self) -> Result<Survey, AnalyzeDirError>;

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

    fn survey(&self) -> Result<Survey, AnalyzeDirError> {
        Ok(survey(&self.0)?)
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
