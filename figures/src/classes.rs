//! The classes the pages sort jobs into: by size (ranks), by CPU time, by routine group (Fig. 11
//! of Rolf Rabenseifner's "Automatic MPI Counter Profiling"), and the per-job figures the
//! site-wide rollups add up.

use crate::sums::percent;
use mpistat_record::JobRecord;

/// The size class of a job with `ranks` ranks: powers of two, `1`, `2-3`, `4-7`, ...
pub fn size_class(ranks: u32) -> (u32, String) {
    let low = if ranks <= 1 {
        1
    } else {
        1u32 << (31 - ranks.leading_zeros())
    };
    let label = if low == 1 {
        "1".to_string()
    } else {
        format!("{low}-{}", low.saturating_mul(2) - 1)
    };
    (low, label)
}

/// Add a message-size histogram to a sum of them.
pub fn add_histogram(sum: &mut Vec<u64>, hist: &[u64]) {
    if sum.len() < hist.len() {
        sum.resize(hist.len(), 0);
    }
    for (total, n) in sum.iter_mut().zip(hist) {
        *total += n;
    }
}

/// Classes of a job's CPU time (rank-hours), from: test runs to production jobs.
pub const JOB_CPU_CLASSES: [(f64, &str); 5] = [
    (0.0, "< 1 CPU h"),
    (1.0, "1-10 CPU h"),
    (10.0, "10-100 CPU h"),
    (100.0, "100-1000 CPU h"),
    (1000.0, ">= 1000 CPU h"),
];

/// Index of a job's class in [`JOB_CPU_CLASSES`].
pub fn job_cpu_class(job: &JobRecord) -> usize {
    let hours = job.wall_ns.sum as f64 / 3.6e12;
    JOB_CPU_CLASSES
        .iter()
        .rposition(|(from, _)| hours >= *from)
        .unwrap_or(0)
}

/// Critical-path imbalance of a job in percent of its wall time, where it was estimated.
pub fn imbalance_percent(job: &JobRecord) -> Option<f64> {
    let imbalance = job.imbalance.as_ref()?;
    if imbalance.unavailable.is_some() || job.wall_ns.max == 0 {
        return None;
    }
    Some(percent(
        imbalance.critical_path_ns as f64,
        job.wall_ns.max as f64,
    ))
}

/// The routine group (Fig. 11 of the paper) a routine belongs to (`None`: Init, Finalize,
/// Comm_size and Comm_rank, which every job calls).
pub fn routine_group(name: &str, class: &str) -> Option<&'static str> {
    if matches!(
        name,
        "MPI_Init" | "MPI_Init_thread" | "MPI_Finalize" | "MPI_Comm_size" | "MPI_Comm_rank"
    ) {
        return None;
    }
    Some(match class {
        "p2p" if name.ends_with("_init") || name.starts_with("MPI_Start") => "persistent pt-to-pt",
        "p2p"
            if name.starts_with("MPI_I")
                || name.starts_with("MPI_Wait")
                || name.starts_with("MPI_Test") =>
        {
            "nonblocking pt-to-pt"
        }
        "p2p" => "blocking pt-to-pt",
        "collective" => "collective",
        "one-sided" => "one-sided",
        "io" => "I/O",
        "datatype" if name.contains("ack") => "pack and unpack",
        "datatype" => "derived datatype",
        "comm" => "group and communicator",
        "topology" => "topology",
        _ if name.starts_with("MPI_Wtime") || name.starts_with("MPI_Wtick") => "wtime",
        _ => "other",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_powers_of_two() {
        assert_eq!(size_class(1).1, "1");
        assert_eq!(size_class(2).1, "2-3");
        assert_eq!(size_class(7).1, "4-7");
        assert_eq!(size_class(64), (64, "64-127".to_string()));
    }

    #[test]
    fn groups_follow_the_papers_fig_11() {
        assert_eq!(routine_group("MPI_Init", "misc"), None);
        assert_eq!(
            routine_group("MPI_Isend", "p2p"),
            Some("nonblocking pt-to-pt")
        );
        assert_eq!(
            routine_group("MPI_Send_init", "p2p"),
            Some("persistent pt-to-pt")
        );
        assert_eq!(routine_group("MPI_Send", "p2p"), Some("blocking pt-to-pt"));
        assert_eq!(
            routine_group("MPI_Allreduce", "collective"),
            Some("collective")
        );
    }
}
