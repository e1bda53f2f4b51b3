//! Records of jobs that call many routines reach syslog whole while rsyslogd makes progress, and a
//! stopped rsyslogd still never holds a job up (issue 15, part 1).
//!
//! The job is `many_routines.c` (well over 150 distinct routines, 2 ranks); the daemon is a real
//! private rsyslogd kept busy by the test: in a loop it is stopped (SIGSTOP), its socket's queue
//! filled to the kernel's limit (`net.unix.max_dgram_qlen`, left at the machine's setting) with
//! lines it ignores, and let go (SIGCONT) 20-50 ms later, so the profiler keeps meeting a full
//! queue at `MPI_Finalize`. The records are read back with the real `mpistat show` and
//! `mpistat ingest`.

use mpistat_e2e::*;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const RUNS: usize = 50;

/// A site configuration for `syslogd` with `[syslog] stall_ms = stall_ms`.
fn config_with_stall(syslogd: &Syslogd, dir: &Path, stall_ms: u64) -> std::path::PathBuf {
    let path = write_site_config(dir, &syslogd.socket(), syslogd.facility());
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("stall_ms = {stall_ms}\n"));
    let path = dir.join(format!("site-stall-{stall_ms}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Keep `syslogd` busy until `stop`: stopped with a full queue for 20-50 ms, then running ~10 ms.
fn keep_busy(syslogd: &Syslogd, stop: &AtomicBool) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        syslogd.pause();
        let fillers = syslogd.fill_queue();
        std::thread::sleep(Duration::from_millis(20 + (i * 7) % 31));
        syslogd.resume();
        drop(fillers);
        std::thread::sleep(Duration::from_millis(10));
        i += 1;
    }
    syslogd.resume();
}

/// The detail report's line about syslog (the last one starting `mpistat: record`).
fn delivery_line(detail: &Path) -> String {
    let text = std::fs::read_to_string(detail)
        .unwrap_or_else(|e| panic!("no detail report {}: {e}", detail.display()));
    text.lines()
        .rfind(|l| l.starts_with("mpistat: record"))
        .unwrap_or_else(|| panic!("no delivery line in {text}"))
        .to_string()
}

/// The `<n>` of "<n> wait(s) for syslogd" in a delivery line.
fn waits(line: &str) -> u64 {
    let (before, _) = line
        .split_once(" wait(s) for syslogd")
        .unwrap_or_else(|| panic!("no wait count in {line:?}"));
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

for_each_mpi! {
fn a_150_routine_record_arrives_whole_50_times_out_of_50_from_a_busy_syslogd(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("big-records");
    // A stall budget well above the 20-50 ms pauses: this test is about waiting while the daemon
    // makes progress, not about how fast this shared machine schedules it.
    let config = config_with_stall(&syslogd, dir.path(), 1000);
    let lossy = config_with_stall(&syslogd, dir.path(), 0);
    let program = program_for("many_routines.c", mpi);
    let scratch = dir.path().to_str().unwrap();
    let job = |id: String, config: &Path| {
        let detail = dir.path().join(format!("{id}.detail"));
        Job::new(&program, 2)
            .mpi(mpi)
            .arg(scratch)
            .env("SLURM_JOB_ID", id)
            .env("MPISTAT_DETAIL", detail.display().to_string())
            .profiled(config)
            .assert_success();
        delivery_line(&detail)
    };

    let stop = AtomicBool::new(false);
    let (lines, control) = std::thread::scope(|s| {
        let busy = s.spawn(|| keep_busy(&syslogd, &stop));
        let lines: Vec<String> = (0..RUNS)
            .map(|i| job(format!("busy-{i}"), &config))
            .collect();
        // The same with the old behaviour (give up at the first full queue): records are lost,
        // so the scenario above is real.
        let control: Vec<String> = (0..10).map(|i| job(format!("lossy-{i}"), &lossy)).collect();
        stop.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        (lines, control)
    });

    let waited: Vec<u64> = lines.iter().map(|l| waits(l)).collect();
    eprintln!("waits per run: {waited:?}");
    for l in &lines {
        assert!(l.starts_with("mpistat: record sent to syslog"), "{l}");
    }
    assert!(
        waited.iter().filter(|&&w| w > 0).count() >= RUNS / 5,
        "the profiler met a full queue in too few runs for the test to mean anything: {waited:?}"
    );
    let lost = control.iter().filter(|l| l.contains("NOT sent")).count();
    eprintln!(
        "without waiting, {lost} of {} records were lost",
        control.len()
    );
    assert!(lost > 0, "no record was lost without waiting: {control:?}");

    let records = syslogd.records(RUNS);
    let first = records.iter().find(|r| r.job_id == "busy-0").unwrap();
    assert!(
        first.routines.len() >= 150,
        "only {} routines",
        first.routines.len()
    );

    // `mpistat show`: every busy job whole, and no part of one missing.
    let log = dir.path().join("messages.log");
    let text: String = syslogd.lines().iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&log, text).unwrap();
    let shown = std::process::Command::new(library().with_file_name("mpistat"))
        .args(["show", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(shown.status.success());
    let problems = String::from_utf8(shown.stderr).unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    let busy_shown = (0..RUNS)
        .filter(|i| shown.contains(&format!("\"job_id\":\"busy-{i}\"")))
        .count();
    assert_eq!(busy_shown, RUNS, "records shown of the busy jobs");
    let busy_keys: Vec<String> = records
        .iter()
        .filter(|r| r.job_id.starts_with("busy-"))
        .map(|r| r.wire_key())
        .collect();
    assert_eq!(busy_keys.len(), RUNS);
    for key in &busy_keys {
        assert!(!problems.contains(key.as_str()), "{problems}");
    }

    // `mpistat ingest` of what rsyslog wrote with the attested uids: all stored, none incomplete.
    let trusted = dir.path().join("records.log");
    write_trusted_log(&syslogd, &trusted);
    let ingest_config = dir.path().join("ingest.toml");
    std::fs::write(
        &ingest_config,
        format!(
            "[database]\npath = {:?}\n",
            dir.path().join("mpistat.db").display().to_string()
        ),
    )
    .unwrap();
    assert!(
        mpistat(&["ingest", trusted.to_str().unwrap()], &ingest_config)
            .status
            .success()
    );
    let report = mpistat(&["ingest", "--report"], &ingest_config);
    let report = String::from_utf8(report.stdout).unwrap();
    let stored: usize = report
        .lines()
        .find_map(|l| l.strip_prefix("jobs stored: "))
        .unwrap_or_else(|| panic!("{report}"))
        .parse()
        .unwrap();
    assert!(stored >= RUNS, "{report}");
    for key in &busy_keys {
        assert!(
            !report.contains(key.as_str()),
            "busy job {key} rejected: {report}"
        );
    }
}
}

for_each_mpi! {
fn a_stopped_syslogd_does_not_hold_up_a_150_routine_job(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("big-records-stopped");
    let config = syslogd.site_config(); // the default stall budget
    let detail = dir.path().join("detail");
    let job = Job::new(program_for("many_routines.c", mpi), 2)
        .mpi(mpi)
        .arg(dir.path().to_str().unwrap())
        .timeout(Duration::from_secs(120));
    let bare = job.bare();
    bare.assert_success();

    syslogd.pause();
    let fillers = syslogd.fill_queue();
    let start = Instant::now();
    let profiled = job
        .clone()
        .env("SLURM_JOB_ID", "stopped")
        .env("MPISTAT_DETAIL", detail.display().to_string())
        .profiled(&config);
    let elapsed = start.elapsed();
    profiled.assert_success();
    eprintln!(
        "with rsyslogd stopped the job took {elapsed:?} (bare: {:?})",
        bare.elapsed
    );
    // Only a hang detector: the bound itself is 100 ms without progress.
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
    let line = delivery_line(&detail);
    assert!(
        line.contains("record NOT sent") && line.contains("no part went out for 100 ms"),
        "{line}"
    );
    assert!(waits(&line) > 0, "{line}");
    syslogd.resume();
    drop(fillers);
}
}
