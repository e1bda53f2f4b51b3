//! The readable per-job report: what `MPISTAT_DETAIL` gives a user and `mpistat show` prints.
//! A pure function of the record (no IO), so the profiler and the digest print the same thing.

use crate::model::{JobRecord, Stat};
use std::fmt::Write;

/// Seconds of a nanosecond count, for display.
fn secs(ns: u64) -> f64 {
    ns as f64 * 1e-9
}

/// Bytes with a binary unit, e.g. `1.5 MiB`.
pub fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Min / avg / max over ranks and the rank of the max, in seconds.
fn spread(s: &Stat, ranks: u32) -> String {
    format!(
        "{:.6} / {:.6} / {:.6} (r{})",
        secs(s.min),
        s.avg(ranks) * 1e-9,
        secs(s.max),
        s.max_rank
    )
}

/// Lower bound of a message-size histogram bucket, as text.
fn bucket_label(b: usize) -> String {
    if b == 0 {
        "0".into()
    } else {
        human_bytes((1u64 << (b - 1)) as f64).replace(".0 ", " ")
    }
}

/// The report of one job, as plain text (≤ 100 columns).
pub fn render(r: &JobRecord) -> String {
    let mut out = String::new();
    let ranks = r.ranks.max(1);
    let _ = writeln!(out, "mpistat report for job {}{}", r.job_id, r.partial.as_ref().map(|p| format!(" (PARTIAL: {p})")).unwrap_or_default());
    let _ = writeln!(out, "  user        {} (uid {})", r.user, r.uid);
    let _ = writeln!(out, "  executable  {} (argv[0] {})", r.exe, r.argv0);
    let _ = writeln!(out, "  ranks       {} on {} node(s), {} binding, thread level {}", r.ranks, r.nodes, r.binding.as_str(), r.thread_level);
    let _ = writeln!(out, "  MPI library {}", r.mpi_library);
    let _ = writeln!(
        out,
        "  wall time   {:.3} s (slowest rank; fastest {:.3} s)",
        secs(r.wall_ns.max),
        secs(r.wall_ns.min)
    );
    let _ = writeln!(
        out,
        "  MPI time    {:.3} s per rank on average = {:.1} % of wall time (max {:.3} s on rank {})",
        r.mpi_ns.avg(ranks) * 1e-9,
        100.0 * r.mpi_fraction(),
        secs(r.mpi_ns.max),
        r.mpi_ns.max_rank
    );
    let _ = writeln!(
        out,
        "  overhead    {:.6} s per rank on average ({:.3} % of wall time)",
        r.overhead_ns.avg(ranks) * 1e-9,
        if r.wall_ns.sum == 0 { 0.0 } else { 100.0 * r.overhead_ns.sum as f64 / r.wall_ns.sum as f64 }
    );
    if r.user_pmpi_tool {
        let _ = writeln!(out, "  PMPI tool   another PMPI profiling layer was active");
    }
    for (k, v) in &r.env {
        let _ = writeln!(out, "  env         {k}={v}");
    }
    let mut routines: Vec<_> = r.routines.iter().collect();
    routines.sort_by(|a, b| b.time_ns.sum.cmp(&a.time_ns.sum).then(a.name.cmp(&b.name)));
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<24} {:>10} {:>11} {:>6} {:>12}  time per rank [s] min / avg / max (rank)",
        "routine", "calls", "time [s]", "%MPI", "bytes"
    );
    for s in routines {
        let share = if r.mpi_ns.sum == 0 { 0.0 } else { 100.0 * s.time_ns.sum as f64 / r.mpi_ns.sum as f64 };
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>11.6} {:>6.1} {:>12}  {}",
            s.name,
            s.calls.sum,
            secs(s.time_ns.sum),
            share,
            human_bytes(s.bytes.sum as f64),
            spread(&s.time_ns, ranks)
        );
        if s.bytes.sum > 0 {
            let _ = writeln!(
                out,
                "{:<24} bytes per rank min / avg / max (rank): {} / {} / {} (r{})",
                "",
                human_bytes(s.bytes.min as f64),
                human_bytes(s.bytes.avg(ranks)),
                human_bytes(s.bytes.max as f64),
                s.bytes.max_rank
            );
        }
        if s.hist.iter().any(|n| *n > 0) {
            let cells: Vec<String> =
                s.hist.iter().enumerate().filter(|(_, n)| **n > 0).map(|(b, n)| format!("{}:{}", bucket_label(b), n)).collect();
            let _ = writeln!(out, "{:<24} message sizes (from): {}", "", cells.join("  "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(0.0), "0 B");
        assert_eq!(human_bytes(1023.0), "1023 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
    }

    #[test]
    fn bucket_labels() {
        assert_eq!(bucket_label(0), "0");
        assert_eq!(bucket_label(1), "1 B");
        assert_eq!(bucket_label(11), "1 KiB");
    }
}
