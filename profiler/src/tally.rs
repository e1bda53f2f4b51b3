//! Totals of this rank's counters, and their reduction over ranks into [`Reduced`] statistics.
//!
//! Only the routines something was counted for are kept ([`RankTotals::routines`]), and the
//! reduction is sparse: the ranks first agree on the routines and histogram buckets any of them
//! used (one bitwise-or allreduce of a mask per routine), then reduce only those: per routine
//! `calls, ns, count, bytes`, its bytes on and off the node and its used buckets, then the
//! job-level values of [`JobValue`]. A job calls tens of the hundreds of routines with a
//! 48-bucket histogram each, so `MPI_Finalize` moves a few kB, not the whole table (147 kB under
//! Open MPI, 235 kB under MPICH, copied twice: issue 38). The statistics are the dense
//! reduction's: a rank that did not call a used routine gives zeros for it.

use crate::generated::routines::N_ROUTINES;
use crate::mpi::{allreduce, reduce_each_to_root, MpiResult, Op, OwnComm};
use crate::threads::TABLES;
use mpistat_record::model::{Stat, HIST_BUCKETS};
use std::sync::atomic::Ordering::Relaxed;

/// Counters kept per routine, in vector order.
pub const PER_ROUTINE: usize = 4;
const CALLS: usize = 0;
const NS: usize = 1;
const COUNT: usize = 2;
const BYTES: usize = 3;

/// Job-level values per rank.
#[derive(Clone, Copy)]
pub enum JobValue {
    WallNs,
    MpiNs,
    OverheadNs,
    /// Ranks of the job on this rank's node (0: unknown), for the fewest and most per node.
    RanksOnNode,
}
const JOB_VALUES: usize = 4;

/// In a routine's mask ([`RoutineTotals::mask`]): the routine has something counted. The bits
/// below [`HIST_BUCKETS`] are its non-empty buckets.
const USED: u64 = 1 << 63;
const _: () = assert!(HIST_BUCKETS < 63);

/// One routine's numbers on this rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutineTotals {
    /// Index in [`crate::generated::routines::ROUTINES`].
    pub id: usize,
    /// `calls, ns, count, bytes`.
    pub values: [u64; PER_ROUTINE],
    pub hist: [u64; HIST_BUCKETS],
    /// Bytes that stayed on this node, then bytes that crossed nodes.
    pub node_bytes: [u64; 2],
}

impl RoutineTotals {
    fn new(id: usize) -> RoutineTotals {
        RoutineTotals {
            id,
            values: [0; PER_ROUTINE],
            hist: [0; HIST_BUCKETS],
            node_bytes: [0; 2],
        }
    }

    /// [`USED`] (if anything is counted) and the non-empty buckets.
    fn mask(&self) -> u64 {
        let buckets = self
            .hist
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != 0)
            .fold(0, |m, (b, _)| m | 1 << b);
        let counted = buckets != 0
            || self.values.iter().any(|v| *v != 0)
            || self.node_bytes.iter().any(|v| *v != 0);
        if counted {
            USED | buckets
        } else {
            0
        }
    }
}

/// This rank's numbers.
#[derive(Debug)]
pub struct RankTotals {
    /// The routines with something counted, by id.
    pub routines: Vec<RoutineTotals>,
    job: [u64; JOB_VALUES],
}

impl RankTotals {
    /// Sum this rank's thread tables; tick counts become nanoseconds at `ns_per_tick`.
    pub fn collect(ns_per_tick: f64) -> RankTotals {
        let tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
        let mut routines = Vec::new();
        let mut mpi_ns = 0;
        for id in 0..N_ROUTINES {
            let mut r = RoutineTotals::new(id);
            let mut ticks = 0u64;
            for table in tables.iter() {
                let routine = &table.routines[id];
                let c = &routine.counters;
                let traffic = crate::traffic::settled(routine);
                r.values[CALLS] += c.calls.load(Relaxed);
                r.values[COUNT] += traffic.count;
                r.values[BYTES] += traffic.bytes;
                ticks += c.ticks.load(Relaxed);
                r.node_bytes[0] += traffic.on_node;
                r.node_bytes[1] += traffic.off_node;
                for (sum, n) in r.hist.iter_mut().zip(traffic.hist) {
                    *sum += n;
                }
            }
            let ns = (ticks as f64 * ns_per_tick) as u64;
            r.values[NS] = ns;
            mpi_ns += ns;
            if r.mask() != 0 {
                routines.push(r);
            }
        }
        let mut totals = RankTotals {
            routines,
            job: [0; JOB_VALUES],
        };
        totals.set(JobValue::MpiNs, mpi_ns);
        totals
    }

    pub fn set(&mut self, what: JobValue, v: u64) {
        self.job[what as usize] = v;
    }

    pub fn get(&self, what: JobValue) -> u64 {
        self.job[what as usize]
    }

    /// Nanoseconds spent in routine `id` on this rank.
    pub fn routine_ns(&self, id: usize) -> u64 {
        self.find(id).map_or(0, |r| r.values[NS])
    }

    /// Calls of all routines on this rank.
    pub fn total_calls(&self) -> u64 {
        self.routines.iter().map(|r| r.values[CALLS]).sum()
    }

    fn find(&self, id: usize) -> Option<&RoutineTotals> {
        self.routines
            .binary_search_by_key(&id, |r| r.id)
            .ok()
            .map(|i| &self.routines[i])
    }
}

/// Which routines, and which of their buckets, the reduction carries: those any rank used.
struct Layout {
    /// (routine id, its non-empty buckets as bits), by id.
    used: Vec<(usize, u64)>,
}

impl Layout {
    /// The union of every rank's routine masks (collective).
    fn agree(t: &RankTotals, comm: &OwnComm) -> MpiResult<Layout> {
        let mut masks = vec![0u64; N_ROUTINES];
        for r in &t.routines {
            masks[r.id] = r.mask();
        }
        let union = allreduce(&masks, Op::BitOr, comm)?;
        Ok(Layout::of(&union))
    }

    fn of(masks: &[u64]) -> Layout {
        let used = masks
            .iter()
            .enumerate()
            .filter(|(_, m)| **m & USED != 0)
            .map(|(id, m)| (id, m & !USED))
            .collect();
        Layout { used }
    }

    /// Each used routine's totals on this rank (zeros for those it did not use), in layout order.
    fn each<'a>(&'a self, t: &'a RankTotals) -> impl Iterator<Item = (u64, RoutineTotals)> + 'a {
        self.used.iter().map(move |&(id, buckets)| {
            let r = t
                .find(id)
                .cloned()
                .unwrap_or_else(|| RoutineTotals::new(id));
            (buckets, r)
        })
    }

    /// The summed vector: per used routine its values, node bytes and used buckets; then the
    /// job values and the two flags.
    fn sums(&self, t: &RankTotals, flags: [u64; 2]) -> Vec<u64> {
        let mut v = Vec::new();
        for (buckets, r) in self.each(t) {
            v.extend_from_slice(&r.values);
            v.extend_from_slice(&r.node_bytes);
            v.extend(bits(buckets).map(|b| r.hist[b]));
        }
        v.extend_from_slice(&t.job);
        v.extend_from_slice(&flags);
        v
    }

    /// The vector of minima and maxima: per used routine its values, then the job values.
    fn extremes(&self, t: &RankTotals) -> Vec<u64> {
        let mut v: Vec<u64> = self.each(t).flat_map(|(_, r)| r.values).collect();
        v.extend_from_slice(&t.job);
        v
    }
}

/// The set bits of `mask`, lowest first.
fn bits(mask: u64) -> impl Iterator<Item = usize> {
    (0..64).filter(move |b| mask & 1 << b != 0)
}

/// One routine's numbers over the ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReducedRoutine {
    pub id: usize,
    /// `calls, ns, count, bytes`.
    pub stats: [Stat; PER_ROUTINE],
    /// The histogram, up to its last non-empty bucket.
    pub hist: Vec<u64>,
    /// Summed bytes on the node and off it.
    pub node_bytes: (u64, u64),
}

/// Numbers of the whole job (or, for a partial record, of the one rank that wrote it).
#[derive(Debug, PartialEq, Eq)]
pub struct Reduced {
    /// The routines some rank counted something for, by id.
    pub routines: Vec<ReducedRoutine>,
    job: [Stat; JOB_VALUES],
    pub nodes: u32,
    pub user_pmpi_tool: bool,
}

impl Reduced {
    /// A single rank's numbers as statistics over that rank.
    pub fn local(t: &RankTotals, rank: u32, user_pmpi_tool: bool) -> Reduced {
        let single = |v: &u64| Stat::single(*v, rank);
        Reduced {
            routines: t
                .routines
                .iter()
                .map(|r| ReducedRoutine {
                    id: r.id,
                    stats: r.values.each_ref().map(single),
                    hist: trimmed(&r.hist),
                    node_bytes: (r.node_bytes[0], r.node_bytes[1]),
                })
                .collect(),
            job: t.job.each_ref().map(single),
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
        let layout = Layout::agree(t, comm)?;
        let sums = layout.sums(t, [node_leader as u64, pmpi_tool as u64]);
        let extremes = layout.extremes(t);
        let located = located(&extremes, crate::mpi::comm_rank(comm.0)? as u64);
        // One pass of the tree for the three.
        let reduced = reduce_each_to_root(
            &[
                (Op::Sum, &sums),
                (Op::Min, &extremes),
                (Op::MaxLoc, &located),
            ],
            comm,
        )?;
        let Some([sums, mins, maxes]) = reduced.and_then(|r| <[Vec<u64>; 3]>::try_from(r).ok())
        else {
            return Ok(None);
        };
        Ok(Some(Reduced::unpack(&layout, &sums, &mins, &maxes)))
    }

    /// The statistics from the reduced vectors of `layout` ([`Layout::sums`], [`Layout::extremes`]
    /// and the (value, rank) pairs of the maxima, [`located`]).
    fn unpack(layout: &Layout, sums: &[u64], mins: &[u64], maxes: &[u64]) -> Reduced {
        let stat = |sum: u64, i: usize| Stat {
            sum,
            min: mins[i],
            max: maxes[2 * i],
            max_rank: maxes[2 * i + 1] as u32,
        };
        let (mut s, mut e) = (0, 0);
        let mut routines = Vec::with_capacity(layout.used.len());
        for &(id, buckets) in &layout.used {
            let stats = std::array::from_fn(|k| stat(sums[s + k], e + k));
            s += PER_ROUTINE;
            e += PER_ROUTINE;
            let node_bytes = (sums[s], sums[s + 1]);
            s += 2;
            let mut hist = [0u64; HIST_BUCKETS];
            for b in bits(buckets) {
                hist[b] = sums[s];
                s += 1;
            }
            routines.push(ReducedRoutine {
                id,
                stats,
                hist: trimmed(&hist),
                node_bytes,
            });
        }
        let job = std::array::from_fn(|k| stat(sums[s + k], e + k));
        s += JOB_VALUES;
        Reduced {
            routines,
            job,
            nodes: sums[s] as u32,
            user_pmpi_tool: sums[s + 1] > 0,
        }
    }

    pub fn job(&self, what: JobValue) -> Stat {
        self.job[what as usize]
    }
}

/// The (value, rank) pairs of [`Op::MaxLoc`] for `values` of `rank`. Values are capped at
/// `i64::MAX`, as when they were `MPI_LONG_INT`'s (no figure of the record changes).
fn located(values: &[u64], rank: u64) -> Vec<u64> {
    values
        .iter()
        .flat_map(|v| [(*v).min(i64::MAX as u64), rank])
        .collect()
}

/// `hist` without its empty buckets at the end.
fn trimmed(hist: &[u64]) -> Vec<u64> {
    let end = hist.iter().rposition(|n| *n != 0).map_or(0, |i| i + 1);
    hist[..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the dense reduction made of these ranks' totals (every routine, every bucket,
    /// element-wise; MAXLOC keeps the lowest rank of equal maxima), without the routines no
    /// rank counted anything for.
    fn dense(ranks: &[RankTotals], flags: &[[u64; 2]]) -> Reduced {
        let zero = |id| RoutineTotals::new(id);
        let of = |t: &RankTotals, id| t.find(id).cloned().unwrap_or_else(|| zero(id));
        let stat = |values: Vec<u64>| {
            let max = *values.iter().max().unwrap();
            Stat {
                sum: values.iter().sum(),
                min: *values.iter().min().unwrap(),
                max,
                max_rank: values.iter().position(|v| *v == max).unwrap() as u32,
            }
        };
        let routines = (0..N_ROUTINES)
            .filter(|id| ranks.iter().any(|t| t.find(*id).is_some()))
            .map(|id| {
                let all: Vec<RoutineTotals> = ranks.iter().map(|t| of(t, id)).collect();
                let sum = |f: &dyn Fn(&RoutineTotals) -> u64| all.iter().map(f).sum::<u64>();
                let hist: Vec<u64> = (0..HIST_BUCKETS).map(|b| sum(&|r| r.hist[b])).collect();
                ReducedRoutine {
                    id,
                    stats: std::array::from_fn(|k| stat(all.iter().map(|r| r.values[k]).collect())),
                    hist: trimmed(&hist),
                    node_bytes: (sum(&|r| r.node_bytes[0]), sum(&|r| r.node_bytes[1])),
                }
            })
            .collect();
        Reduced {
            routines,
            job: std::array::from_fn(|k| stat(ranks.iter().map(|t| t.job[k]).collect())),
            nodes: flags.iter().map(|f| f[0]).sum::<u64>() as u32,
            user_pmpi_tool: flags.iter().any(|f| f[1] > 0),
        }
    }

    /// What MPI makes of the sparse vectors, element-wise over ranks.
    fn sparse(ranks: &[RankTotals], flags: &[[u64; 2]]) -> Reduced {
        let mut union = vec![0u64; N_ROUTINES];
        for t in ranks {
            for r in &t.routines {
                union[r.id] |= r.mask();
            }
        }
        let layout = Layout::of(&union);
        let columns = |vectors: Vec<Vec<u64>>| -> Vec<Vec<u64>> {
            (0..vectors[0].len())
                .map(|i| vectors.iter().map(|v| v[i]).collect())
                .collect()
        };
        let sums: Vec<u64> = columns(
            ranks
                .iter()
                .zip(flags)
                .map(|(t, f)| layout.sums(t, *f))
                .collect(),
        )
        .iter()
        .map(|c| c.iter().sum())
        .collect();
        let extremes = columns(ranks.iter().map(|t| layout.extremes(t)).collect());
        let mins: Vec<u64> = extremes.iter().map(|c| *c.iter().min().unwrap()).collect();
        let maxes: Vec<u64> = extremes
            .iter()
            .flat_map(|c| {
                let max = *c.iter().max().unwrap();
                [max, c.iter().position(|v| *v == max).unwrap() as u64]
            })
            .collect();
        Reduced::unpack(&layout, &sums, &mins, &maxes)
    }

    fn rank_totals() -> impl Strategy<Value = RankTotals> {
        let routine = (
            0..N_ROUTINES,
            prop::array::uniform4(0u64..1 << 40),
            prop::collection::vec((0..HIST_BUCKETS, 1u64..1000), 0..4),
            prop::array::uniform2(0u64..1 << 40),
        )
            .prop_map(|(id, values, buckets, node_bytes)| {
                let mut r = RoutineTotals::new(id);
                r.values = values;
                for (b, n) in buckets {
                    r.hist[b] = n;
                }
                r.node_bytes = node_bytes;
                r
            });
        (
            prop::collection::vec(routine, 0..12),
            prop::array::uniform4(0u64..1 << 40),
        )
            .prop_map(|(mut routines, job)| {
                routines.sort_by_key(|r| r.id);
                routines.dedup_by_key(|r| r.id);
                routines.retain(|r| r.mask() != 0);
                RankTotals { routines, job }
            })
    }

    proptest! {
        #[test]
        fn the_sparse_reduction_gives_the_dense_ones_figures(
            ranks in prop::collection::vec(rank_totals(), 1..6),
            flag_bits in prop::collection::vec(prop::array::uniform2(0u64..2), 6),
        ) {
            let flags = &flag_bits[..ranks.len()];
            prop_assert_eq!(sparse(&ranks, flags), dense(&ranks, flags));
        }
    }

    #[test]
    fn a_rank_that_used_nothing_gives_zeros_to_the_routines_others_used() {
        let mut used = RoutineTotals::new(7);
        used.values = [3, 30, 3, 24];
        used.hist[3] = 3;
        let ranks = [
            RankTotals {
                routines: vec![used],
                job: [1, 2, 3, 4],
            },
            RankTotals {
                routines: Vec::new(),
                job: [5, 6, 7, 8],
            },
        ];
        let reduced = sparse(&ranks, &[[1, 0], [0, 0]]);
        let r = &reduced.routines[0];
        assert_eq!((r.id, r.stats[CALLS].sum, r.stats[CALLS].min), (7, 3, 0));
        assert_eq!(r.hist, vec![0, 0, 0, 3]);
        assert_eq!(reduced.job(JobValue::WallNs).max_rank, 1);
    }
}
