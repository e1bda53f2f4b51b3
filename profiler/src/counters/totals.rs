//! The counters' totals: a rank's at `MPI_Finalize`, and the job's, summed to rank 0 for the
//! record (or a rank's alone for a partial record).

use crate::generated::routines::N_ROUTINES;

/// This rank's counters at `MPI_Finalize`: names, unavailability, mode, and per event
/// (app, mpi) summed over threads, plus per routine × event the MPI part.
pub struct RankCounters {
    pub names: Vec<String>,
    pub unavailable: Vec<Option<String>>,
    pub mode: &'static str,
    pub app: Vec<u64>,
    pub mpi: Vec<u64>,
    pub per_routine: Vec<u64>,
}

/// The job's counters (on rank 0): the record's set and, per routine id, (event name, MPI part).
pub struct JobCounters {
    pub set: mpistat_record::model::CounterSet,
    pub per_routine: Vec<(usize, String, u64)>,
}

/// Sum every rank's counters to rank 0 of `comm` (collective). Ranks that chose different
/// numbers of events (e.g. MPMD applications with different `MPISTAT_COUNTERS`) skip it alike.
/// In `.text.finalize` by attribute: every rank runs it there, and the callgrind list of
/// `profiler/finalize.ld` lost it in a build where LLVM had inlined it.
#[link_section = ".text.finalize.mpistat"]
pub fn reduce(
    comm: &crate::mpi::OwnComm,
    mine: Option<RankCounters>,
) -> crate::mpi::MpiResult<Option<JobCounters>> {
    use crate::mpi::{allreduce, reduce_to_root, Op};
    let n = mine.as_ref().map_or(0, |m| m.names.len()) as u64;
    let agree = allreduce(&[n, u64::MAX - n], Op::Max, comm)?;
    let Some(mine) = mine else { return Ok(None) };
    if agree[0] != n || u64::MAX - agree[1] != n || n == 0 {
        return Ok(None);
    }
    let Some(sum) = reduce_to_root(&mine.flat(), Op::Sum, comm)? else {
        return Ok(None);
    };
    Ok(Some(mine.summed(&sum)))
}

/// This rank's counters alone, for a partial record (a job that ends without `MPI_Finalize`).
pub fn local(mine: &RankCounters) -> JobCounters {
    mine.summed(&mine.flat())
}

impl RankCounters {
    /// Application part, MPI part and per-routine MPI parts, as one vector to reduce.
    fn flat(&self) -> Vec<u64> {
        let mut v = self.app.clone();
        v.extend_from_slice(&self.mpi);
        v.extend_from_slice(&self.per_routine);
        v
    }

    /// The job's counters from `sum`, a [`RankCounters::flat`] vector summed over ranks.
    fn summed(&self, sum: &[u64]) -> JobCounters {
        let n = self.names.len();
        let counted = |e: usize, v: u64| if self.unavailable[e].is_none() { v } else { 0 };
        let events = self
            .names
            .iter()
            .enumerate()
            .map(|(e, name)| mpistat_record::model::CounterEvent {
                name: name.clone(),
                app: counted(e, sum[e]),
                mpi: counted(e, sum[n + e]),
                unavailable: self.unavailable[e].clone(),
            })
            .collect();
        let mut per_routine = Vec::new();
        for id in 0..N_ROUTINES {
            for (e, name) in self.names.iter().enumerate() {
                let v = counted(e, sum[2 * n + id * n + e]);
                if v > 0 {
                    per_routine.push((id, name.clone(), v));
                }
            }
        }
        JobCounters {
            set: mpistat_record::model::CounterSet {
                mode: self.mode.to_string(),
                events,
            },
            per_routine,
        }
    }
}
