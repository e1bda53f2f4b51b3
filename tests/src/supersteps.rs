//! What `imbalance.c` measured itself: per rank, the time outside `MPI_Allreduce` before each
//! superstep's collective (the files it writes into `IMBALANCE_GAPS_DIR`). From these the tests compute the imbalance figures
//! of Böhme et al., "Scalable critical-path based performance analysis", Sec. IV-A exactly as the
//! profiler should, and compare. Comparing with what the program measured, not with the nominal
//! sleep pattern, keeps the checks tight: on an oversubscribed machine the sleeps overshoot by a
//! millisecond or more per iteration, by an amount that depends on how the MPI waits (Open MPI
//! parks, MPICH polls and yields).

use mpistat_record::model::Imbalance;
use std::path::Path;

/// The figures computed from the program's own gaps, in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredImbalance {
    /// iota: sum over supersteps of (max - average) of the gaps.
    pub critical_path_ns: f64,
    /// max over ranks of their summed gaps minus the average of those sums.
    pub profile_ns: f64,
    /// Average over ranks of the summed gaps (the superstep "work").
    pub work_avg_ns: f64,
    /// Waiting time in the collectives, rank-ns: sum over supersteps ending in a collective of
    /// (ranks x max - sum) of the gaps (the last superstep ends at `MPI_Finalize`, not counted).
    pub collective_wait_ns: f64,
    /// Per superstep, max - average of the gaps (what `critical_path_ns` sums).
    pub per_step_ns: Vec<f64>,
    /// Per rank, the summed gaps.
    pub totals_ns: Vec<f64>,
}

impl MeasuredImbalance {
    /// Read the files `gaps.R` of `ranks` ranks that `imbalance.c` wrote into `dir` (the job's
    /// `IMBALANCE_GAPS_DIR`).
    pub fn from_files(dir: &Path, ranks: u32) -> MeasuredImbalance {
        Self::from_files_of(dir, 0..ranks)
    }

    /// [`MeasuredImbalance::from_files`] of some ranks only (e.g. one MPMD partition's).
    pub fn from_files_of(dir: &Path, ranks: std::ops::Range<u32>) -> MeasuredImbalance {
        let gaps: Vec<Vec<f64>> = ranks
            .map(|rank| {
                let path = dir.join(format!("gaps.{rank}"));
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                text.lines()
                    .map(|v| {
                        v.parse::<f64>()
                            .unwrap_or_else(|e| panic!("{}: {v:?}: {e}", path.display()))
                            * 1e3
                    })
                    .collect()
            })
            .collect();
        Self::from_gaps(&gaps)
    }

    /// The figures from `gaps[rank][superstep]` in ns (every rank the same number of supersteps).
    pub fn from_gaps(gaps: &[Vec<f64>]) -> MeasuredImbalance {
        let p = gaps.len() as f64;
        let steps = gaps[0].len();
        assert!(gaps.iter().all(|g| g.len() == steps), "ranks disagree");
        let mut critical_path_ns = 0.0;
        let mut collective_wait_ns = 0.0;
        let mut per_step_ns = Vec::with_capacity(steps);
        for k in 0..steps {
            let max = gaps.iter().map(|g| g[k]).fold(0.0, f64::max);
            let sum: f64 = gaps.iter().map(|g| g[k]).sum();
            critical_path_ns += max - sum / p;
            per_step_ns.push(max - sum / p);
            if k + 1 < steps {
                collective_wait_ns += p * max - sum;
            }
        }
        let totals: Vec<f64> = gaps.iter().map(|g| g.iter().sum()).collect();
        let work_avg_ns = totals.iter().sum::<f64>() / p;
        MeasuredImbalance {
            critical_path_ns,
            profile_ns: totals.iter().copied().fold(0.0, f64::max) - work_avg_ns,
            work_avg_ns,
            collective_wait_ns,
            per_step_ns,
            totals_ns: totals,
        }
    }

    /// `what` in percent of the average work.
    pub fn percent(&self, ns: f64) -> f64 {
        100.0 * ns / self.work_avg_ns
    }

    /// `imbalance.c static`'s pattern where the percents show the machine's load more than the
    /// scenario (MPICH's ranks poll and yield, and every sleep overshoots by however long they
    /// keep the cores): rank 1 still sleeps `iters` x (1.25 - (P - 1.25) / (P - 1)) x `work_ms`
    /// more than each other rank, and at least half of that is left.
    pub fn assert_rank_1_overloaded(&self, iters: u64, work_ms: f64) {
        let (p, w) = (self.totals_ns.len() as f64, work_ms * 1e6);
        let extra_ns = iters as f64 * (1.25 * w - (p - 1.25) / (p - 1.0) * w);
        for (rank, total) in self.totals_ns.iter().enumerate().filter(|(r, _)| *r != 1) {
            assert!(
                self.totals_ns[1] - total > 0.5 * extra_ns,
                "rank 1 worked {:.3} s, rank {rank} {:.3} s",
                self.totals_ns[1] * 1e-9,
                total * 1e-9
            );
        }
    }

    /// The profiler's estimates equal the measured figures within 1 % of the work. The profiler's
    /// timestamps are taken in the wrapper, a few microseconds from the program's, so the
    /// figures differ by well under 1 ms per 100 supersteps unless a rank was preempted between
    /// the two clocks (which only adds, and rarely).
    pub fn assert_estimated_by(&self, estimates: &Imbalance, ranks: u32) {
        self.assert_totals_estimated_by(estimates, ranks);
        self.assert_close(
            estimates,
            "critical-path imbalance",
            estimates.critical_path_ns as f64,
            self.critical_path_ns,
        );
    }

    /// [`MeasuredImbalance::assert_estimated_by`] for the figures made from each rank's totals
    /// alone (the average work and the profile-based imbalance), which merging supersteps does
    /// not change.
    pub fn assert_totals_estimated_by(&self, estimates: &Imbalance, ranks: u32) {
        let work = estimates.work_avg_ns(ranks);
        self.assert_close(estimates, "average work", work, self.work_avg_ns);
        let profile = estimates.profile_ns as f64;
        self.assert_close(
            estimates,
            "profile-based imbalance",
            profile,
            self.profile_ns,
        );
    }

    fn assert_close(&self, estimates: &Imbalance, what: &str, estimated: f64, measured: f64) {
        let tolerance = 0.01 * self.work_avg_ns;
        assert!(
            (estimated - measured).abs() <= tolerance,
            "{what}: estimated {:.3} ms, measured by the program {:.3} ms (tolerance {:.3} \
             ms); where the series differ by over 0.5 ms: {}; measured {self:?}, estimated \
             {estimates:?}",
            estimated * 1e-6,
            measured * 1e-6,
            tolerance * 1e-6,
            self.series_differences(estimates, 0.5e6)
        );
    }

    /// The points of the record's imbalance series that differ from the program's by more than
    /// `over_ns`, as `point: estimated/measured ms` (to tell a few preempted supersteps from a
    /// bias spread over all of them).
    pub fn series_differences(&self, estimates: &Imbalance, over_ns: f64) -> String {
        let factor = estimates.series_factor.max(1) as usize;
        let measured = self
            .per_step_ns
            .chunks(factor)
            .map(|c| c.iter().sum::<f64>());
        let differences: Vec<String> = estimates
            .series_ns
            .iter()
            .zip(measured)
            .enumerate()
            .filter(|(_, (&e, m))| (e as f64 - m).abs() > over_ns)
            .map(|(i, (&e, m))| format!("{i}: {:.2}/{:.2}", e as f64 * 1e-6, m * 1e-6))
            .collect();
        if differences.is_empty() {
            "none".to_string()
        } else {
            differences.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_a_static_and_a_dynamic_pattern() {
        // Two ranks, two collectives and the tail. Rank 1 is slower in both collectives' steps.
        let m = MeasuredImbalance::from_gaps(&[vec![10.0, 10.0, 1.0], vec![14.0, 14.0, 1.0]]);
        assert_eq!(m.critical_path_ns, 4.0);
        assert_eq!(m.profile_ns, 4.0);
        assert_eq!(m.work_avg_ns, 25.0);
        assert_eq!(m.collective_wait_ns, 8.0);
        // The slow rank alternates: every step is imbalanced, the totals are not.
        let m = MeasuredImbalance::from_gaps(&[vec![10.0, 14.0, 3.0], vec![14.0, 10.0, 1.0]]);
        assert_eq!(m.critical_path_ns, 5.0);
        assert_eq!(m.profile_ns, 1.0);
        assert_eq!(m.collective_wait_ns, 8.0);
    }
}
