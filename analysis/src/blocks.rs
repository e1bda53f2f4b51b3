//! How the processes of a distributed analysis share the ranks: in blocks of consecutive ranks,
//! process `p` the ranks from `p * ranks / processes` on. The memory check sizes a process's
//! block, the distributed passes read and replay it, the OTF2 export writes it.

use mpistat_trace::model::Rank;
use std::ops::Range;

/// The block distribution of `ranks` ranks over `processes` processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocks {
    pub ranks: u32,
    pub processes: usize,
}

impl Blocks {
    /// The first rank of process `process`'s block.
    pub fn first(&self, process: usize) -> Rank {
        (process as u64 * u64::from(self.ranks) / self.processes as u64) as Rank
    }

    pub fn range(&self, process: usize) -> Range<Rank> {
        self.first(process)..self.first(process + 1)
    }

    /// The process whose block holds `rank`.
    pub fn owner(&self, rank: Rank) -> usize {
        let mut process =
            (u64::from(rank) * self.processes as u64 / u64::from(self.ranks.max(1))) as usize;
        while process + 1 < self.processes && self.first(process + 1) <= rank {
            process += 1;
        }
        while process > 0 && self.first(process) > rank {
            process -= 1;
        }
        process
    }
}
