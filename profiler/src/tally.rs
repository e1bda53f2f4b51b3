//! Totals of this rank's counters, and their reduction over ranks into [`Reduced`] statistics.
//!
//! The vector layout is shared by every rank (same spec table), so reductions are element-wise:
//! per routine `calls, ns, count, bytes`, then the job-level values of [`JobValue`]; bytes on and
//! off the node are only summed, with the histograms.

use crate::generated::routines::N_ROUTINES;
use crate::mpi::{reduce_to_root, MpiResult, Op, OwnComm, ValueRank};
use crate::threads::TABLES;
use mpistat_record::model::{Stat, HIST_BUCKETS};
use std::sync::atomic::Ordering::Relaxed;

/// Counters kept per routine, in vector order.
pub const PER_ROUTINE: usize = 4;
const CALLS: usize = 0;
const NS: usize = 1;
const COUNT: usize = 2;
const BYTES: usize = 3;

/// Job-level values per rank, stored after the routines' counters.
#[derive(Clone, Copy)]
pub enum JobValue {
    WallNs,
    MpiNs,
    OverheadNs,
    /// Ranks of the job on this rank's node (0: unknown), for the fewest and most per node.
    RanksOnNode,
}
const JOB_VALUES: usize = 4;

/// This rank's numbers, laid out for element-wise reduction.
pub struct RankTotals {
    /// `PER_ROUTINE` counters per routine, then the `JobValue`s.
    pub values: Vec<u64>,
    /// `HIST_BUCKETS` per routine.
    pub hist: Vec<u64>,
    /// Bytes on this node, then bytes off it, per routine.
    pub node_bytes: Vec<u64>,
}

impl RankTotals {
    /// Sum this rank's thread tables; tick counts become nanoseconds at `ns_per_tick`.
    pub fn collect(ns_per_tick: f64) -> RankTotals {
        let mut values = vec![0u64; N_ROUTINES * PER_ROUTINE + JOB_VALUES];
        let mut hist = vec![0u64; N_ROUTINES * HIST_BUCKETS];
        let mut node_bytes = vec![0u64; N_ROUTINES * 2];
        let mut ticks = [0u64; N_ROUTINES];
        let tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
        for table in tables.iter() {
            for (id, routine) in table.routines.iter().enumerate() {
                let c = &routine.counters;
                let v = &mut values[id * PER_ROUTINE..(id + 1) * PER_ROUTINE];
                let traffic = crate::traffic::settled(routine);
                v[CALLS] += c.calls.load(Relaxed);
                v[COUNT] += traffic.count;
                v[BYTES] += traffic.bytes;
                ticks[id] += c.ticks.load(Relaxed);
                node_bytes[id * 2] += traffic.on_node;
                node_bytes[id * 2 + 1] += traffic.off_node;
                for (b, n) in traffic.hist.iter().enumerate() {
                    hist[id * HIST_BUCKETS + b] += n;
                }
            }
        }
        let mut mpi_ns = 0;
        for (id, t) in ticks.iter().enumerate() {
            let ns = (*t as f64 * ns_per_tick) as u64;
            values[id * PER_ROUTINE + NS] = ns;
            mpi_ns += ns;
        }
        let mut totals = RankTotals {
            values,
            hist,
            node_bytes,
        };
        totals.set(JobValue::MpiNs, mpi_ns);
        totals
    }

    pub fn set(&mut self, what: JobValue, v: u64) {
        self.values[N_ROUTINES * PER_ROUTINE + what as usize] = v;
    }

    pub fn get(&self, what: JobValue) -> u64 {
        self.values[N_ROUTINES * PER_ROUTINE + what as usize]
    }

    /// Nanoseconds spent in routine `id` on this rank.
    pub fn routine_ns(&self, id: usize) -> u64 {
        self.values[id * PER_ROUTINE + NS]
    }

    /// Calls of all routines on this rank.
    pub fn total_calls(&self) -> u64 {
        (0..N_ROUTINES)
            .map(|id| self.values[id * PER_ROUTINE + CALLS])
            .sum()
    }
}

/// Numbers of the whole job (or, for a partial record, of the one rank that wrote it).
pub struct Reduced {
    pub stats: Vec<Stat>,
    pub hist: Vec<u64>,
    /// Summed bytes on and off the node, per routine (as [`RankTotals::node_bytes`]).
    pub node_bytes: Vec<u64>,
    pub nodes: u32,
    pub user_pmpi_tool: bool,
}

impl Reduced {
    /// A single rank's numbers as statistics over that rank.
    pub fn local(t: &RankTotals, rank: u32, user_pmpi_tool: bool) -> Reduced {
        Reduced {
            stats: t.values.iter().map(|v| Stat::single(*v, rank)).collect(),
            hist: t.hist.clone(),
            node_bytes: t.node_bytes.clone(),
            nodes: 1,
            user_pmpi_tool,
        }
    }

    /// Reduce every rank's totals to rank 0 of `comm` (collective); `Some` on rank 0.
    /// `node_leader` is 1 on exactly one rank per node; `pmpi_tool` is this rank's detection.
    pub fn over_ranks(
        t: &RankTotals,
        node_leader: bool,
        pmpi_tool: bool,
        comm: &OwnComm,
    ) -> MpiResult<Option<Reduced>> {
        let mut summed = t.values.clone();
        summed.extend_from_slice(&t.hist);
        summed.extend_from_slice(&t.node_bytes);
        summed.push(node_leader as u64);
        summed.push(pmpi_tool as u64);
        let sums = reduce_to_root(&summed, Op::Sum, comm)?;
        let mins = reduce_to_root(&t.values, Op::Min, comm)?;
        let rank = crate::mpi::comm_rank(comm.0)?;
        let located: Vec<ValueRank> = t
            .values
            .iter()
            .map(|v| ValueRank {
                value: (*v).min(i64::MAX as u64) as i64,
                rank,
            })
            .collect();
        let maxes = reduce_to_root(&located, Op::MaxLoc, comm)?;
        let (Some(sums), Some(mins), Some(maxes)) = (sums, mins, maxes) else {
            return Ok(None);
        };
        let n = t.values.len();
        let (h, b) = (n + t.hist.len(), n + t.hist.len() + t.node_bytes.len());
        let stats = (0..n)
            .map(|i| Stat {
                sum: sums[i],
                min: mins[i],
                max: maxes[i].value as u64,
                max_rank: maxes[i].rank as u32,
            })
            .collect();
        Ok(Some(Reduced {
            stats,
            hist: sums[n..h].to_vec(),
            node_bytes: sums[h..b].to_vec(),
            nodes: sums[b] as u32,
            user_pmpi_tool: sums[b + 1] > 0,
        }))
    }

    /// The statistics of routine `id`: (calls, ns, count, bytes).
    pub fn routine(&self, id: usize) -> [Stat; PER_ROUTINE] {
        let s = &self.stats[id * PER_ROUTINE..(id + 1) * PER_ROUTINE];
        [s[CALLS], s[NS], s[COUNT], s[BYTES]]
    }

    /// Bytes of routine `id` that stayed on a node and that crossed nodes.
    pub fn routine_node_bytes(&self, id: usize) -> (u64, u64) {
        (self.node_bytes[id * 2], self.node_bytes[id * 2 + 1])
    }

    pub fn routine_hist(&self, id: usize) -> &[u64] {
        &self.hist[id * HIST_BUCKETS..(id + 1) * HIST_BUCKETS]
    }

    pub fn job(&self, what: JobValue) -> Stat {
        self.stats[N_ROUTINES * PER_ROUTINE + what as usize]
    }
}
