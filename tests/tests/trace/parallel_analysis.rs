//! The analysis as an MPI program (`mpistat-analyze`, issue 17) against the one-process
//! `mpistat analyze`: for the seed examples and generated executions, written as trace files,
//! `mpirun -n N mpistat-analyze DIR` with N = 1 to 4 prints exactly what `mpistat analyze DIR`
//! prints: the text and JSON reports (delay costs, wait states, critical path, imbalance) and the
//! forward replay's wait states (`--format wait-states`); each process reads only its block of
//! ranks (a missing rank file is noticed only by its owner). A real traced 16-rank job checks the
//! profiler's directories (local definitions, clock correction, call sites turned into source
//! lines). The properties (delay costs add up to the waiting time, the critical path is as long
//! as the run) are checked on the JSON report.
//!
//! `mpistat-analyze` is linked against Open MPI (crate `analyze-mpi`) and runs under its
//! `mpirun`, `mpistat-analyze-mpich` (crate `analyze-mpi/mpich`) under MPICH's `mpiexec.mpich`:
//! the comparisons run under both (`for_each_mpi!`).

use mpistat_analysis::examples::{halo, mixed, topc_figure_2, topc_figure_3};
use mpistat_e2e::*;
use mpistat_trace::model::Trace;
use mpistat_trace::tracefile::{rank_file_name, write_dir};
use std::path::Path;
use std::process::Command;

/// The formats both analyses print.
const FORMATS: [&str; 3] = ["text", "json", "wait-states"];

/// `mpistat analyze --format FORMAT DIR`: its standard output.
fn one_process(dir: &Path, format: &str) -> String {
    mpistat_analyze(&[Path::new("--format"), Path::new(format), dir])
}

/// `mpirun -n PROCESSES mpistat-analyze --format FORMAT DIR` (under `mpi`).
fn parallel(mpi: Mpi, dir: &Path, processes: u32, format: &str) -> Outcome {
    Job::new(analyze_mpi(mpi), processes)
        .mpi(mpi)
        .arg("--format")
        .arg(format)
        .arg(dir.display().to_string())
        .bare()
}

/// Writes `trace` and compares the analyses at 1 to 4 processes. Returns the one-process wait
/// states report (JSON), having checked the properties of the JSON report (the generated
/// executions have one clock: the critical path is as long as the run).
fn assert_same_reports(mpi: Mpi, name: &str, trace: &Trace) -> serde_json::Value {
    let _serial = serial();
    let dir = Scratch::new(&format!("parallel-{name}"));
    write_dir(dir.path(), trace).unwrap();
    let (wait_states, report) = assert_same_reports_of(mpi, name, dir.path());
    assert_properties(name, &report, true);
    wait_states
}

/// [`assert_same_reports`] for a trace directory: the wait states and the JSON report.
fn assert_same_reports_of(
    mpi: Mpi,
    name: &str,
    dir: &Path,
) -> (serde_json::Value, serde_json::Value) {
    for format in FORMATS {
        let expected = one_process(dir, format);
        for processes in 1..=4 {
            let outcome = parallel(mpi, dir, processes, format);
            outcome.assert_success();
            assert!(
                outcome.stdout == expected,
                "{name}, {mpi:?}, {format}, {processes} processes: the reports differ\none process:\n{expected}\nparallel:\n{}",
                outcome.stdout
            );
        }
    }
    let parse = |format| serde_json::from_str(&one_process(dir, format)).unwrap();
    (parse("wait-states"), parse("json"))
}

/// The properties of Böhme et al.'s two papers (wait states, critical path) on a JSON report: the
/// delay costs add up to the waiting time, and so do direct and indirect waiting; with `one_clock`,
/// the critical path is as long as the run (a real job's corrected clocks may still disagree a
/// little).
fn assert_properties(name: &str, report: &serde_json::Value, one_clock: bool) {
    let sum = |field: &str| -> f64 {
        report["callpaths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["total"][field].as_f64().unwrap())
            .sum()
    };
    let waiting = report["total_waiting"].as_f64().unwrap();
    let tolerance = 1e-6 * (1.0 + waiting);
    let costs = sum("delay_short_term") + sum("delay_long_term");
    assert!(
        (costs - waiting).abs() <= tolerance,
        "{name}: costs {costs}, waiting {waiting}"
    );
    let split = sum("direct_waiting") + sum("indirect_waiting");
    assert!(
        (split - waiting).abs() <= tolerance,
        "{name}: split {split}, waiting {waiting}"
    );
    if !one_clock {
        return;
    }
    let critical: u64 = report["critical_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["end"].as_u64().unwrap() - s["start"].as_u64().unwrap())
        .sum();
    let wall = report["end"].as_u64().unwrap() - report["start"].as_u64().unwrap();
    assert_eq!(
        critical, wall,
        "{name}: the critical path is as long as the run"
    );
}

/// The waiting time per rank and in all, from the wait-states report.
fn waiting(report: &serde_json::Value) -> (Vec<u64>, u64) {
    let ranks = report["ranks"].as_u64().unwrap() as usize;
    let mut per_rank = vec![0; ranks];
    for wait in report["wait_states"].as_array().unwrap() {
        per_rank[wait["rank"].as_u64().unwrap() as usize] += wait["wait"].as_u64().unwrap();
    }
    (per_rank, report["total_waiting"].as_u64().unwrap())
}

for_each_mpi! {
    fn seed_000_figure_2(mpi) {
        let report = assert_same_reports(mpi, "fig2", &topc_figure_2().finish());
        // Rank 1 waits 2 in R1, rank 2 waits 3 in R2.
        assert_eq!(waiting(&report), (vec![0, 2, 3], 5));
    }
}

for_each_mpi! {
    fn seed_000_figure_3(mpi) {
        let report = assert_same_reports(mpi, "fig3", &topc_figure_3().finish());
        // Rank 1 waits 3 in R3, rank 2 waits 2 in R4.
        assert_eq!(waiting(&report), (vec![0, 3, 2], 5));
    }
}

for_each_mpi! {
    fn halo_exchange_on_7_ranks(mpi) {
        let report = assert_same_reports(mpi, "halo", &halo(7, 5_000));
        let (per_rank, total) = waiting(&report);
        assert!(per_rank.iter().all(|&w| w > 0), "{per_rank:?}");
        assert_eq!(per_rank.iter().sum::<u64>(), total);
    }
}

for_each_mpi! {
    fn mixed_messages_and_collectives_on_sub_communicators(mpi) {
        for (ranks, seed) in [(2, 1), (5, 2), (6, 3), (9, 4)] {
            let name = format!("mixed{ranks}");
            let report = assert_same_reports(mpi, &name, &mixed(ranks, 400, seed));
            let patterns: std::collections::BTreeSet<&str> = report["wait_states"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["pattern"].as_str().unwrap())
                .collect();
            // Every pattern of a random mix of this size shows up.
            assert!(patterns.len() >= 5, "{ranks} ranks: {patterns:?}");
        }
    }
}

for_each_mpi! {
    /// The timeline past one node (issue 37 §3): `mpistat-analyze --perfetto FILE`, each process
    /// writing its ranks' tracks at their place, writes the file `mpistat analyze --perfetto`
    /// writes, to the byte, at any number of processes (also more than ranks).
    fn perfetto_timeline_in_parallel(mpi) {
        let _serial = serial();
        let dir = Scratch::new("parallel-perfetto");
        let out = Scratch::new("parallel-perfetto-out");
        write_dir(dir.path(), &mixed(6, 400, 3)).unwrap();
        let one = out.path().join("one.json");
        let status = Command::new(mpistat_binary())
            .args(["analyze", "--format", "summary", "--perfetto"])
            .arg(&one)
            .arg(dir.path())
            .output()
            .unwrap()
            .status;
        assert!(status.success());
        let expected = std::fs::read(&one).unwrap();
        for (processes, format) in [(1, "text"), (2, "json"), (4, "wait-states"), (7, "text")] {
            let file = out.path().join(format!("n{processes}.json"));
            Job::new(analyze_mpi(mpi), processes)
                .mpi(mpi)
                .arg("--format")
                .arg(format)
                .arg("--perfetto")
                .arg(file.display().to_string())
                .arg(dir.path().display().to_string())
                .bare()
                .assert_success();
            assert!(
                std::fs::read(&file).unwrap() == expected,
                "{processes} processes: the timelines differ"
            );
        }
    }
}

/// A rank without a trace file is analysed as empty by its owner, as in one process.
#[test]
fn missing_rank_file() {
    let _serial = serial();
    let dir = Scratch::new("parallel-missing");
    write_dir(dir.path(), &mixed(5, 200, 7)).unwrap();
    std::fs::remove_file(dir.path().join(rank_file_name(3))).unwrap();
    for format in ["wait-states", "json"] {
        let expected = one_process(dir.path(), format);
        for processes in [1, 2, 4] {
            let outcome = parallel(Mpi::OpenMpi, dir.path(), processes, format);
            outcome.assert_success();
            assert_eq!(outcome.stdout, expected, "{format}, {processes} processes");
            assert!(
                outcome.stderr.contains("no trace for ranks [3]"),
                "{}",
                outcome.stderr
            );
        }
    }
}

/// A broken file stops every process, and the one that read it says why.
#[test]
fn broken_rank_file_fails_everywhere() {
    let _serial = serial();
    let dir = Scratch::new("parallel-broken");
    write_dir(dir.path(), &mixed(4, 100, 9)).unwrap();
    std::fs::write(dir.path().join(rank_file_name(2)), b"garbage").unwrap();
    let outcome = parallel(Mpi::OpenMpi, dir.path(), 3, "wait-states");
    assert!(!outcome.status.success());
    assert!(outcome.stdout.is_empty(), "{}", outcome.stdout);
    assert!(
        outcome.stderr.contains("rank-000002.mpt"),
        "{}",
        outcome.stderr
    );
}

for_each_mpi! {
    /// A real traced job of 16 ranks (`delays.c`: a delayed send chain, then barriers after
    /// uneven work, `MPISTAT_TRACE=1`): the profiler's directory (per-rank local definitions,
    /// clocks corrected to rank 0's) analyses the same in parallel.
    fn real_traced_job_of_16_ranks(mpi) {
        let _serial = serial();
        let home = Scratch::new("parallel-home");
        let info = traced_delays_job(mpi, 16, &home);
        assert_eq!(info.ranks_written, 16);
        let (wait_states, report) = assert_same_reports_of(mpi, "real", Path::new(&info.dir));
        assert_properties("real", &report, false);
        let (per_rank, _) = waiting(&wait_states);
        // Ranks 1 to 15 wait for the delayed send chain.
        assert!(per_rank[1..].iter().all(|&w| w > 0), "{per_rank:?}");
    }
}

for_each_mpi! {
    /// The memory bound (issue 17): with a limit each process cannot meet, both forms fail
    /// before reading, with the numbers and how many processes would do; at that many, the
    /// parallel analysis under the same limit passes and prints the one-process report.
    fn a_trace_over_the_memory_limit_fails_clearly_and_enough_processes_pass(mpi) {
        let _serial = serial();
        let dir = Scratch::new("parallel-memory");
        write_dir(dir.path(), &halo(8, 40_000)).unwrap();
        let survey = mpistat_trace::tracefile::survey(dir.path()).unwrap();
        // What 4 processes need: 2 processes and one are over it.
        let limit = mpistat_analysis::memory::need(&survey, 4).per_process;
        let limit_arg = limit.to_string();
        let out = Command::new(mpistat_binary())
            .args(["analyze", "--format", "wait-states", "--memory-limit", &limit_arg])
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && out.stdout.is_empty(), "{stderr}");
        assert!(stderr.contains("a process for these 8 ranks"), "{stderr}");
        assert!(stderr.contains("with 1 process, limit"), "{stderr}");
        assert!(
            stderr.contains("run mpistat-analyze with at least 4 processes"),
            "{stderr}"
        );
        let expected = one_process(dir.path(), "text");
        let limited = |processes| {
            Job::new(analyze_mpi(mpi), processes)
                .mpi(mpi)
                .arg("--memory-limit")
                .arg(limit_arg.clone())
                .arg(dir.path().display().to_string())
                .bare()
        };
        let over = limited(2);
        assert!(!over.status.success() && over.stdout.is_empty());
        assert!(
            over.stderr.contains("with 2 processes, limit")
                && over.stderr.contains("run mpistat-analyze with at least 4 processes"),
            "{}",
            over.stderr
        );
        // Process 0 alone says it.
        assert_eq!(over.stderr.matches("the analysis needs").count(), 1, "{}", over.stderr);
        let enough = limited(4);
        enough.assert_success();
        assert!(enough.stdout == expected, "{}", enough.stdout);
    }
}

for_each_mpi! {
    /// The analysis in the job's allocation, as the job's user (issue 17): Alice's traced job,
    /// then `mpirun -n 2 mpistat-analyze --send DIR` as her (the batch script's last step); its
    /// summary (the one-process form's, root causes and all) reaches syslog as her record, and
    /// ingest (as user `mpistat`) stores it as the analysis of her job. Mallory's `mpistat-analyze --send` of her directory sends nothing.
    fn the_parallel_analysis_sends_the_summary_as_the_jobs_user(mpi) {
        let _serial = serial();
        let Some(AnalysisUsers {
            alice,
            mallory,
            digest,
            syslogd,
            dir,
            lib,
        }) = AnalysisUsers::start("parallel-send")
        else {
            return;
        };
        let site = syslogd.site_config();
        let mut text = std::fs::read_to_string(&site).unwrap();
        text.push_str(&format!(
            "[trace]\nanalyze_at_exit = false\n\
             [escalation]\nlist = {list:?}\n[database]\npath = {db:?}\n",
            list = lib.join("escalation.list").display().to_string(),
            db = lib.join("mpistat.db").display().to_string(),
        ));
        std::fs::write(&site, text).unwrap();
        let site_arg = site.display().to_string();

        let outcome = Job::new(program_for("delays.c", mpi), 4)
            .mpi(mpi)
            .as_user(&alice)
            .env("MPISTAT_TRACE", "1")
            .arg("20")
            .arg("4")
            .arg("2")
            .arg("3")
            .profiled(&site);
        outcome.assert_success();
        let record = syslogd.single_record();
        let trace = record.trace.clone().expect("the job was traced");
        assert!(trace.dir.starts_with(alice.home.to_str().unwrap()), "{}", trace.dir);
        let send_as = |user: &User| {
            Job::new(analyze_mpi(mpi), 2)
                .mpi(mpi)
                .as_user(user)
                .arg("--send")
                .arg("--config")
                .arg(site_arg.clone())
                .arg(trace.dir.clone())
                .bare()
        };
        let refused = send_as(&mallory);
        assert!(!refused.status.success(), "Mallory's --send of Alice's trace succeeded");
        // The reason names her directory (he cannot even look at it).
        assert!(refused.stderr.contains(&trace.dir), "{}", refused.stderr);
        send_as(&alice).assert_success();
        let analysis = syslogd.wait_for_analysis("of the parallel form", |a| a.job_key == record.wire_key());
        assert_eq!((analysis.uid, analysis.dir.as_str()), (alice.uid, trace.dir.as_str()));
        let summary: serde_json::Value =
            serde_json::from_str(analysis.summary.as_deref().expect("a summary")).unwrap();
        assert!(summary["wall_s"].as_f64().unwrap() > 0.0, "{summary}");
        assert!(summary["waiting_percent"].as_f64().unwrap() > 0.0, "{summary}");
        assert!(!summary["causes"].as_array().unwrap().is_empty(), "{summary}");
        // The same summary as the one-process form's, which `mpistat analyze --send` sends.
        let one = mpistat_as(Some(&alice), &["analyze", "--format", "summary", &trace.dir], &site);
        assert!(one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
        let one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
        assert_eq!(summary, one);

        // Ingest as `mpistat`: the analysis is filed as Alice's, the same as the one-process one.
        let log = dir.path().join("records.log");
        write_trusted_log(&syslogd, &log);
        let out = mpistat_as(Some(&digest), &["ingest", log.to_str().unwrap()], &site);
        assert!(out.status.success(), "ingest as {}", digest.name);
        let analyses = AnalysisUsers::stored_analyses(&lib);
        assert_eq!(analyses, vec![(record.key(), alice.name.clone(), analysis.summary.clone())]);
    }
}
