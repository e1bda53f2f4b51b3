//! Where a trace comes from: the narrow interface between the analysis and a trace format.
//!
//! The passes need, per rank, a timeline built from its events ([`crate::timeline::build`]) and
//! the global [`Definitions`]; the memory check needs each rank's estimated events before
//! anything is read. An mpistat trace directory ([`TraceDir`]) is one source; an OTF2 archive
//! (crate `mpistat-otf2`) is another. Both the one-process analysis
//! ([`crate::analysis::run_passes_on`]) and the distributed one
//! ([`crate::distributed::forward_on`]) take any source.

use crate::callpath::CallTree;
use crate::error::{AnalysisError, AnalyzeDirError};
use crate::timeline::{self, RankTimeline};
use mpistat_trace::model::{Definitions, Rank};
use mpistat_trace::tracefile::{read_dir_ranks_with, survey, DirContents, Survey};
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

/// A rank's timeline and its call tree (ids local to the rank), or why it could not be built.
pub type Built = Result<(RankTimeline, CallTree), AnalysisError>;

/// Reads the `wanted` ranks of a trace directory into timelines (see [`read_dir_ranks_with`]):
/// the definitions, per world rank its timeline (`None` for ranks not wanted; an empty one for
/// a wanted rank without a file), and the problems of the reading.
pub fn read_timelines(
    dir: &Path,
    wanted: impl Fn(Rank) -> bool + Sync,
) -> Result<DirContents<Built>, AnalyzeDirError> {
    let (defs, ranks, problems) = read_dir_ranks_with(dir, &wanted, |rank, events, defs| {
        // Events take four bytes or so, never less than two.
        let expected = events.remaining_bytes() / 3;
        timeline::build(rank, events, expected, defs).map_err(AnalyzeDirError::from)
    })?;
    let built = ranks
        .into_iter()
        .enumerate()
        .map(|(rank, built)| match built {
            Some(built) => Some(Ok(built)),
            None if wanted(rank as Rank) => Some(timeline::build(rank as Rank, [], 0, &defs)),
            None => None,
        })
        .collect();
    Ok((defs, built, problems))
}
