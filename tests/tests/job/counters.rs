//! Performance counters split inside/outside MPI, tested with software events (this machine has
//! no PMU: hardware events must say "unavailable" and change nothing else).
//!
//! `counters.c` on 2 ranks: each burns 5 × 40 ms of its own CPU time outside MPI (400 ms in all),
//! while rank 0 also sleeps 5 × 50 ms outside MPI and rank 1 waits for it in `MPI_Barrier`.
//! Tolerances: the application's task-clock also holds start-up work outside `MPI_Init`
//! (tens of ms), so ±25 % around 400 ms; the barrier wait is wall time, of which Open MPI's
//! polling (yield when idle) uses only part of a core when it shares it, so its task-clock is
//! below its wall time and below the application's.

use mpistat_e2e::*;
use mpistat_record::JobRecord;

const RANKS: u32 = 2;

fn profile(mpi: Mpi, extra_config: &str, counters: &str) -> JobRecord {
    profile_on(mpi, RANKS, extra_config, counters)
}

fn profile_on(mpi: Mpi, ranks: u32, extra_config: &str, counters: &str) -> JobRecord {
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("counters.c", mpi), ranks)
        .mpi(mpi)
        .env("MPISTAT_COUNTERS", counters);
    let bare = job.bare();
    bare.assert_success();
    let profiled = job.profiled(&syslogd.site_config_with("counters-site.toml", extra_config));
    profiled.assert_success();
    // The job is unaffected: same output, nothing printed by us.
    assert_same_output(&bare, &profiled);
    syslogd.single_record()
}

for_each_mpi! {
fn software_counters_split_application_and_mpi(mpi) {
    let _serial = serial();
    let r = profile(
        mpi,
        "[profiler]\ncounters_fallback = \"per-call\"\n",
        "task-clock,page-faults,instructions,fp-ops",
    );
    let set = r.counters.as_ref().expect("record has counters");
    assert_eq!(set.mode, "per-call read");
    let task = set.events.iter().find(|e| e.name == "task-clock").unwrap();
    assert_eq!(task.unavailable, None);
    let app_ms = task.app as f64 * 1e-6;
    let mpi_ms = task.mpi as f64 * 1e-6;
    assert!(
        (300.0..500.0).contains(&app_ms),
        "application task-clock {app_ms:.1} ms, burnt 400 ms"
    );
    let barrier = routine(&r, "MPI_Barrier");
    let barrier_wall_ms = barrier.time_ns.sum as f64 * 1e-6;
    // No bound of MPI's CPU time by the application's: MPICH busy-polls in the barrier while rank
    // 0 sleeps, so on a loaded machine MPI's CPU time came to 437 ms against 400 burnt (stop 28's
    // CI). Time burnt outside MPI counted as MPI would show as `app_ms` below the range above.
    assert!(
        mpi_ms <= r.mpi_ns.sum as f64 * 1e-6,
        "MPI task-clock {mpi_ms:.1} ms above MPI wall time"
    );
    assert!(barrier_wall_ms > 200.0, "rank 1 waited for rank 0's sleeps");
    // Per routine: the barrier's part is in the routine's counters.
    let in_barrier = barrier.counters.get("task-clock").copied().unwrap_or(0);
    assert!(in_barrier <= task.mpi);
    // Hardware counters: unavailable with the reason, nothing else changed.
    let instr = set
        .events
        .iter()
        .find(|e| e.name == "instructions")
        .unwrap();
    let reason = instr.unavailable.as_deref().unwrap_or("");
    assert!(reason.contains("ENOENT") || instr.app > 0, "{instr:?}");
    // fp-ops: this processor's raw event where one is known (then, without a PMU, ENOENT like
    // any hardware event), else left out with that reason.
    let fp = set.events.iter().find(|e| e.name == "fp-ops").unwrap();
    let reason = fp.unavailable.as_deref().unwrap_or("");
    assert!(
        reason.contains("ENOENT") || reason.contains("no raw floating-point event") || fp.app > 0,
        "{fp:?}"
    );
    assert!(set
        .events
        .iter()
        .any(|e| e.name == "page-faults" && e.unavailable.is_none()));
    assert!(r.imbalance.is_some());
}
}

for_each_mpi! {
fn totals_mode_counts_without_split_and_site_default_hardware_set_is_unavailable(mpi) {
    let _serial = serial();
    // The site's default fallback is "totals": read at MPI_Init and MPI_Finalize only.
    let r = profile(mpi, "", "task-clock,cycles");
    let set = r.counters.as_ref().unwrap();
    assert!(set.mode.starts_with("totals"), "{}", set.mode);
    let task = set.events.iter().find(|e| e.name == "task-clock").unwrap();
    assert_eq!(task.mpi, 0);
    assert!(task.app > 300_000_000, "{task:?}");
    // The readable report (MPISTAT_DETAIL, mpistat show, the job page) says so instead of
    // printing the MPI part as a measured zero.
    let report = mpistat_record::report::render(&r);
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("task-clock"));
    let line = line.unwrap_or_else(|| panic!("no task-clock line in {report}"));
    assert!(line.ends_with("not split (totals mode)"), "{line}");
    assert!(!line.contains("MPI"), "{line}");
    let cycles = set.events.iter().find(|e| e.name == "cycles").unwrap();
    assert!(cycles.unavailable.is_some() || cycles.app > 0);
}
}

for_each_mpi! {
fn names_the_site_does_not_allow_are_not_counted(mpi) {
    let _serial = serial();
    let r = profile(
        mpi,
        "[profiler]\ncounters_allowed = [\"page-faults\"]\n",
        "task-clock,page-faults",
    );
    let set = r.counters.as_ref().unwrap();
    let task = set.events.iter().find(|e| e.name == "task-clock").unwrap();
    assert_eq!(task.unavailable.as_deref(), Some("not allowed by the site"));
    assert_eq!((task.app, task.mpi), (0, 0));
}
}

for_each_mpi! {
/// More ranks than CPUs on the node: counters stay closed (an open event slows every context
/// switch, and oversubscribed ranks switch at every collective) unless the site asks for them.
fn oversubscribed_node_opens_no_counters_unless_the_site_asks(mpi) {
    let _serial = serial();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    if cpus > 8 {
        eprintln!("SKIPPED: {cpus} CPUs here; oversubscribing them takes too many ranks");
        return;
    }
    let ranks = cpus + 1;
    let r = profile_on(mpi, ranks, "", "task-clock,page-faults");
    let set = r.counters.as_ref().expect("record has counters");
    for event in &set.events {
        let why = event.unavailable.as_deref().unwrap_or_default();
        assert!(
            why.contains(&format!("{ranks} ranks share")) && why.contains("CPUs on this node"),
            "{}: {why:?}",
            event.name
        );
        assert_eq!((event.app, event.mpi), (0, 0), "{}", event.name);
    }
    let r = profile_on(
        mpi,
        ranks,
        "[profiler]\ncounters_when_oversubscribed = true\n",
        "task-clock,page-faults",
    );
    let task = r
        .counters
        .as_ref()
        .unwrap()
        .events
        .iter()
        .find(|e| e.name == "task-clock")
        .unwrap();
    assert_eq!(task.unavailable, None);
    assert!(task.app > 0);
}
}
