//! The readable per-job report: what `MPISTAT_DETAIL` gives a user and `mpistat show` prints. A
//! pure function of the record (no IO): a header, then a per-routine table sorted by time, with a
//! message-size histogram under routines that have one. At most 100 columns unless a routine
//! name or a header value is itself longer.

use crate::model::{JobRecord, RoutineStats, SlurmFacts};
use crate::units::{bytes, count, duration, secs, utc};
use std::fmt::Write;

const WIDTH: usize = 100;

/// The report of one job.
pub fn render(record: &JobRecord) -> String {
    let mut out = String::new();
    header(&mut out, record);
    out.push('\n');
    routine_table(&mut out, record);
    imbalance(&mut out, record);
    counters(&mut out, record);
    out
}

/// Counter events outside and inside MPI, with rates per second of that time; in the totals
/// mode (read at `MPI_Init` and `MPI_Finalize` only) the total per second of the run, not split.
fn counters(out: &mut String, r: &JobRecord) {
    let Some(set) = &r.counters else { return };
    let _ = writeln!(out, "\ncounters    {} (summed over ranks)", set.mode);
    let app_s = secs(r.wall_ns.sum.saturating_sub(r.mpi_ns.sum));
    let mpi_s = secs(r.mpi_ns.sum);
    let rate = |v: u64, s: f64| if s > 0.0 { v as f64 / s } else { 0.0 };
    for e in &set.events {
        let value = match &e.unavailable {
            Some(reason) => format!("unavailable: {reason}"),
            None if !set.split() => format!(
                "total {} ({}/s), not split (totals mode)",
                count(e.app + e.mpi),
                count(rate(e.app + e.mpi, secs(r.wall_ns.sum)) as u64)
            ),
            None => format!(
                "application {} ({}/s), MPI {} ({}/s)",
                count(e.app),
                count(rate(e.app, app_s) as u64),
                count(e.mpi),
                count(rate(e.mpi, mpi_s) as u64)
            ),
        };
        let _ = writeln!(out, "  {:<22}{value}", e.name);
    }
}

/// The imbalance estimates, the per-routine waiting times and the per-superstep sparkline.
fn imbalance(out: &mut String, r: &JobRecord) {
    let Some(i) = &r.imbalance else { return };
    out.push('\n');
    if let Some(reason) = &i.unavailable {
        let _ = writeln!(out, "imbalance   unavailable: {reason}");
        return;
    }
    let work = i.work_avg_ns(r.ranks);
    let of_work = |ns: u64| {
        if work <= 0.0 {
            0.0
        } else {
            100.0 * ns as f64 / work
        }
    };
    let bound = if i.merge_factor > 1 {
        format!(
            "; {} supersteps merged per slot: a lower bound",
            i.merge_factor
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "imbalance   over {} supersteps (between global synchronising collectives){bound}",
        i.supersteps
    );
    let mut field = |name: &str, value: String| {
        let gap = if name.len() >= 22 { " " } else { "" };
        let _ = writeln!(out, "  {name:<22}{gap}{value}");
    };
    field(
        "critical path",
        format!(
            "{:.3} s = {:.1} % of work, {:.1} % of wall",
            secs(i.critical_path_ns),
            of_work(i.critical_path_ns),
            percent(i.critical_path_ns, r.wall_ns.max)
        ),
    );
    field(
        "profile-based",
        format!(
            "{:.3} s = {:.1} % of work; dynamic share {:.0} %",
            secs(i.profile_ns),
            of_work(i.profile_ns),
            100.0 * i.dynamic_share()
        ),
    );
    field(
        "POP efficiencies",
        format!(
            "load balance {:.3}, communication {:.3}, parallel {:.3}",
            i.load_balance(r.ranks),
            i.comm_efficiency(r.wall_ns.max),
            i.parallel_efficiency(r.ranks, r.wall_ns.max)
        ),
    );
    for s in r.routines.iter().filter(|s| s.sync_ns.is_some()) {
        let sync = s.sync_ns.unwrap_or(0);
        field(
            &format!("waiting in {}", s.name),
            format!(
                "{:.3} s over all ranks = {:.0} % of its time",
                secs(sync),
                percent(sync.min(s.time_ns.sum), s.time_ns.sum)
            ),
        );
    }
    if !i.partitions.is_empty() {
        field(
            "between partitions",
            format!("{:.3} s of the critical path", secs(i.inter_partition_ns)),
        );
        for p in &i.partitions {
            field(
                &format!("partition {} ({} ranks)", p.appnum, p.ranks),
                format!(
                    "critical path {:.3} s, profile-based {:.3} s, load balance {:.3}",
                    secs(p.critical_path_ns),
                    secs(p.profile_ns),
                    p.load_balance()
                ),
            );
        }
    }
    if !i.series_ns.is_empty() {
        field(
            "per superstep",
            format!(
                "{} (max {} per {} superstep(s))",
                sparkline(&i.series_ns),
                duration(i.series_ns.iter().copied().max().unwrap_or(0)),
                i.series_factor.max(1)
            ),
        );
    }
}

/// Values as a line of block characters, scaled to the largest.
pub fn sparkline(v: &[u64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = v.iter().copied().max().unwrap_or(0);
    v.iter()
        .map(|&x| {
            if max == 0 {
                BARS[0]
            } else {
                BARS[((x as u128 * 7 + max as u128 / 2) / max as u128) as usize]
            }
        })
        .collect()
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// What every view of a record's Slurm facts says of them.
pub const SLURM_CLAIMED: &str = "claimed by the job's environment, not verified";

/// The Slurm facts of a record of `ranks` ranks that ended at `end_unix_ms`, as (name, value)
/// lines of the header, leaving out what is unknown.
pub fn slurm_lines(s: &SlurmFacts, ranks: u32, end_unix_ms: u64) -> Vec<(&'static str, String)> {
    let unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut lines = Vec::new();
    let mut job = s.job_step();
    if let Some(name) = &s.job_name {
        job.push_str(&format!(" \"{name}\""));
    }
    if let Some(cluster) = &s.cluster {
        job.push_str(&format!(" on cluster {cluster}"));
    }
    lines.push(("Slurm job", job));
    // The profiler reads them from the job's environment, which its user may set.
    lines.push(("Slurm facts", SLURM_CLAIMED.into()));
    lines.push((
        "account",
        format!(
            "{}, partition {}, QOS {}",
            unknown(&s.account),
            unknown(&s.partition),
            unknown(&s.qos)
        ),
    ));
    let mut alloc = format!(
        "{} node(s) {}",
        s.nodes.map_or("-".into(), |n| n.to_string()),
        unknown(&s.node_list)
    );
    if let Some(per_node) = &s.cpus_per_node {
        alloc.push_str(&format!(", CPUs per node {per_node}"));
        if let Some(total) = s.cpus_allocated().filter(|t| *t > 0) {
            alloc.push_str(&format!(
                " = {total} CPUs; {ranks} rank(s) ran on them ({:.0} %)",
                100.0 * f64::from(ranks) / total as f64
            ));
        }
    }
    lines.push(("allocated", alloc));
    if let Some(limit) = s.time_limit_s {
        let mut text = format!("{}:{:02}:{:02}", limit / 3600, limit / 60 % 60, limit % 60);
        if let Some(start) = s.start_unix_s {
            let end_s = end_unix_ms / 1000;
            let deadline = start.saturating_add(limit);
            if s.reached_time_limit(end_unix_ms) {
                text.push_str(&format!(
                    "; REACHED (ended {} s after it)",
                    end_s - deadline
                ));
            } else {
                text.push_str(&format!("; ended {} s before it", deadline - end_s));
            }
        }
        lines.push(("time limit", text));
    }
    if let (Some(wait), Some(submit), Some(start)) =
        (s.queue_wait_s(), s.submit_unix_s, s.start_unix_s)
    {
        lines.push((
            "queue wait",
            format!(
                "{wait} s (submitted {}, started {})",
                utc(submit * 1000),
                utc(start * 1000)
            ),
        ));
    }
    lines
}

fn header(out: &mut String, r: &JobRecord) {
    let partial = r
        .partial
        .as_ref()
        .map(|reason| format!(" (PARTIAL: {reason})"));
    let _ = writeln!(
        out,
        "job {} (key {}){}",
        r.job_id,
        r.key(),
        partial.unwrap_or_default()
    );
    let mut field = |name: &str, value: String| {
        let _ = writeln!(out, "  {name:<12}{value}");
    };
    field("user", format!("{} (uid {})", r.user, r.uid));
    match &r.interpreter {
        Some(interpreter) => {
            field("application", r.application().to_string());
            field("interpreter", interpreter.clone());
        }
        None => field("executable", r.exe.clone()),
    }
    field("argv0", r.argv0.clone());
    field("host", format!("{} (pid {} of rank 0)", r.host, r.pid));
    field("ranks", ranks_line(r));
    if !r.host_list.is_empty() {
        field("hosts", r.host_list.clone());
    }
    if let Some(line) = node_bytes_line(r) {
        field("bytes", line);
    }
    field("start", utc(r.start_unix_ms));
    field("end", utc(r.end_unix_ms));
    field(
        "wall",
        format!(
            "{:.3} s (slowest rank; fastest {:.3} s)",
            r.wall_s(),
            secs(r.wall_ns.min)
        ),
    );
    field(
        "MPI",
        format!(
            "{:.3} s over all ranks = {:.1} % of wall (max {:.3} s on rank {})",
            secs(r.mpi_ns.sum),
            100.0 * r.mpi_fraction(),
            secs(r.mpi_ns.max),
            r.mpi_ns.max_rank
        ),
    );
    field("binding", r.binding.as_str().to_string());
    field("threads", r.thread_level.clone());
    field(
        "MPI library",
        crate::family::describe_library(&r.mpi_library),
    );
    let tool = if r.user_pmpi_tool {
        "another PMPI tool was active"
    } else {
        "none"
    };
    field("PMPI tool", tool.to_string());
    field(
        "overhead",
        format!(
            "{:.6} s over all ranks = {:.3} % of wall",
            secs(r.overhead_ns.sum),
            percent(r.overhead_ns.sum, r.wall_ns.sum)
        ),
    );
    if let Some(reason) = &r.partial {
        let at_limit = r
            .slurm
            .as_ref()
            .is_some_and(|s| s.reached_time_limit(r.end_unix_ms));
        let limit = if at_limit {
            " (at the Slurm job's time limit)"
        } else {
            ""
        };
        field("partial", format!("{reason}{limit}"));
    }
    if let Some(s) = &r.slurm {
        for (name, value) in slurm_lines(s, r.ranks, r.end_unix_ms) {
            field(name, value);
        }
    }
    if let Some(t) = &r.trace {
        field(
            "trace",
            format!(
                "{} ({} events of {} ranks, asked by: {}; tracing took {:.6} s over all ranks); analyse with `mpistat analyze {}`",
                t.dir,
                count(t.events),
                t.ranks_written,
                t.reason,
                secs(t.overhead_ns),
                t.dir
            ),
        );
        if let Some(stopped) = &t.stopped {
            field("trace", stopped.clone());
        }
    }
    for (name, value) in &r.env {
        field("env", format!("{name}={value}"));
    }
}

/// `4 on 2 node(s), 2 per node` (`1-3 per node` when they differ).
pub fn ranks_line(r: &JobRecord) -> String {
    let mut line = format!("{} on {} node(s)", r.ranks, r.nodes);
    match r.ranks_per_node {
        Some(p) if p.min == p.max => line.push_str(&format!(", {} per node", p.min)),
        Some(p) => line.push_str(&format!(", {}-{} per node", p.min, p.max)),
        None => {}
    }
    line
}

/// `82 % of 1.2MB stayed on a node (218kB crossed nodes)`, when the record says.
pub fn node_bytes_line(r: &JobRecord) -> Option<String> {
    let b = r.node_bytes()?;
    let share = b.on_node_share()?;
    Some(format!(
        "{:.0} % of {} stayed on a node ({} crossed nodes)",
        100.0 * share,
        bytes((b.on_node + b.off_node) as f64),
        bytes(b.off_node as f64)
    ))
}

fn routine_table(out: &mut String, r: &JobRecord) {
    let mut routines: Vec<&RoutineStats> = r.routines.iter().collect();
    routines.sort_by(|a, b| {
        b.time_ns
            .sum
            .cmp(&a.time_ns.sum)
            .then_with(|| a.name.cmp(&b.name))
    });
    let name_width = routines
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let _ = writeln!(
        out,
        "{:<name_width$} {:>7} {:>9} {:>5} {:>6} {:>6} {:>6} {:>5} {:>7} {:>7} {:>7}",
        "routine",
        "calls",
        "time s",
        "%MPI",
        "avg",
        "min",
        "max",
        "@rank",
        "bytes",
        "B/call",
        "count"
    );
    let ranks = r.ranks.max(1);
    for s in routines {
        let bytes_per_call = if s.calls.sum == 0 {
            0.0
        } else {
            s.bytes.sum as f64 / s.calls.sum as f64
        };
        let _ = writeln!(
            out,
            "{:<name_width$} {:>7} {:>9.3} {:>5.1} {:>6} {:>6} {:>6} {:>5} {:>7} {:>7} {:>7}",
            s.name,
            count(s.calls.sum),
            secs(s.time_ns.sum),
            percent(s.time_ns.sum, r.mpi_ns.sum),
            duration(s.time_ns.avg(ranks).round() as u64),
            duration(s.time_ns.min),
            duration(s.time_ns.max),
            s.time_ns.max_rank,
            bytes(s.bytes.sum as f64),
            bytes(bytes_per_call),
            count(s.count.sum),
        );
        if let Some(b) = s.node_bytes.filter(|b| b.on_node + b.off_node > 0) {
            let _ = writeln!(
                out,
                "    on node {}, off node {}",
                bytes(b.on_node as f64),
                bytes(b.off_node as f64)
            );
        }
        histogram(out, &s.hist);
    }
}

/// Non-empty histogram buckets as `<smallest size>:<messages>`, wrapped at [`WIDTH`].
fn histogram(out: &mut String, hist: &[u64]) {
    let cells: Vec<String> = hist
        .iter()
        .enumerate()
        .filter(|(_, &messages)| messages > 0)
        .map(|(bucket, &messages)| format!("{}:{}", bucket_floor(bucket), count(messages)))
        .collect();
    if cells.is_empty() {
        return;
    }
    let indent = "    ";
    let mut line = format!("{indent}sizes (from:messages)");
    for cell in cells {
        if line.len() + 1 + cell.len() > WIDTH {
            let _ = writeln!(out, "{line}");
            line = format!("{indent}                     ");
        }
        line.push(' ');
        line.push_str(&cell);
    }
    let _ = writeln!(out, "{line}");
}

/// Smallest message size in a histogram bucket: `0B`, then powers of two (`1B` .. `512EiB`).
fn bucket_floor(bucket: usize) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    match bucket {
        0 => "0B".into(),
        _ => {
            let exponent = (bucket - 1).min(63);
            format!("{}{}", 1u64 << (exponent % 10), UNITS[exponent / 10])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_histogram_wraps_within_the_width() {
        let mut out = String::new();
        histogram(&mut out, &[123_456_789; crate::model::HIST_BUCKETS]);
        assert!(out.lines().count() > 1);
        assert!(out.lines().all(|line| line.len() <= WIDTH), "{out}");
        assert!(
            out.starts_with("    sizes (from:messages) 0B:123M 1B:123M 2B:123M"),
            "{out}"
        );
        assert!(out.trim_end().ends_with(" 64TiB:123M"), "{out}");
    }

    #[test]
    fn sparkline_scales_to_the_largest() {
        assert_eq!(sparkline(&[0, 7, 14]), "▁▅█");
        assert_eq!(sparkline(&[0, 0]), "▁▁");
    }

    #[test]
    fn slurm_facts_in_the_header() {
        let record = JobRecord {
            job_id: "12.0".into(),
            ranks: 2,
            start_unix_ms: 1_000_000,
            end_unix_ms: 1_070_500,
            partial: Some("SIGTERM".into()),
            slurm: Some(SlurmFacts {
                job_id: "12".into(),
                step_id: Some("0".into()),
                array_job_id: Some("11".into()),
                array_task_id: Some("2".into()),
                job_name: Some("solver".into()),
                account: Some("physics".into()),
                partition: Some("debug".into()),
                node_list: Some("n[01-02]".into()),
                nodes: Some(2),
                cpus_per_node: Some("2(x2)".into()),
                time_limit_s: Some(60),
                submit_unix_s: Some(990),
                start_unix_s: Some(1000),
                ..SlurmFacts::default()
            }),
            ..JobRecord::default()
        };
        let text = render(&record);
        for line in [
            "  partial     SIGTERM (at the Slurm job's time limit)",
            "  Slurm job   11_2.0 \"solver\"",
            "  Slurm facts claimed by the job's environment, not verified",
            "  account     physics, partition debug, QOS -",
            "  allocated   2 node(s) n[01-02], CPUs per node 2(x2) = 4 CPUs; 2 rank(s) ran on them (50 %)",
            "  time limit  0:01:00; REACHED (ended 10 s after it)",
            "  queue wait  10 s (submitted 1970-01-01T00:16:30.000Z, started 1970-01-01T00:16:40.000Z)",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
        }
    }

    #[test]
    fn counters_of_the_totals_mode_are_not_split() {
        let event = |name: &str| crate::model::CounterEvent {
            name: name.into(),
            app: 80_100_000,
            mpi: 0,
            unavailable: None,
        };
        let record = |mode: &str| JobRecord {
            wall_ns: crate::Stat::single(150_000_000, 0),
            mpi_ns: crate::Stat::single(50_000_000, 0),
            counters: Some(crate::model::CounterSet {
                mode: mode.into(),
                events: vec![event("task-clock")],
            }),
            ..JobRecord::default()
        };
        let totals = render(&record("totals (read at MPI_Init and MPI_Finalize)"));
        let line = "  task-clock            total 80.1M (534M/s), not split (totals mode)";
        assert!(totals.lines().any(|l| l == line), "{totals}");
        assert!(!totals.contains("MPI 0"), "{totals}");
        let split = render(&record("per-call read"));
        let line = "  task-clock            application 80.1M (801M/s), MPI 0 (0/s)";
        assert!(split.lines().any(|l| l == line), "{split}");
    }

    #[test]
    fn empty_histogram_prints_nothing() {
        let mut out = String::new();
        histogram(&mut out, &[0, 0]);
        assert_eq!(out, "");
    }
}
