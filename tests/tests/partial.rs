//! Jobs that end without `MPI_Finalize` still leave exactly one record, marked partial, holding
//! the numbers of the rank that wrote it: the aborting rank for `MPI_Abort`, rank 0 for an exit
//! without `MPI_Finalize`.

use mpistat_e2e::*;

/// Run `program` on 4 ranks profiled; it must fail (mpirun reports the abnormal end) and leave one
/// partial record with exactly `expected` (and nothing else but `also_allowed` routines).
fn check_partial_record(
    source: &'static str,
    mpi: Mpi,
    expected: &[Expected],
    also_allowed: &[&str],
) {
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for(source, mpi), 4)
        .mpi(mpi)
        .profiled(&syslogd.site_config());
    // Open MPI's mpirun reports a rank that ended without MPI_Finalize; MPICH's mpiexec does so
    // only sometimes (it exited 0 in about 1 run of 3, bare too), which is not the profiler's
    // business.
    if mpi == Mpi::OpenMpi {
        assert!(
            !outcome.status.success(),
            "mpirun should report the abnormal end, got {}",
            outcome.status
        );
    }
    let record = syslogd.single_record();
    assert!(
        record.partial.is_some(),
        "record not marked partial: {record:#?}"
    );
    assert_eq!(record.ranks, 4);
    assert_routines(&record, expected);
    let allowed: Vec<&str> = LIFECYCLE.iter().chain(also_allowed).copied().collect();
    assert_no_other_routines(&record, expected, &allowed);
}

for_each_mpi! {
fn mpi_abort_leaves_one_partial_record_of_the_aborting_rank(mpi) {
    let _serial = serial();
    // abort.c: rank 1 does 2 barriers, 1 allreduce of 4 doubles, 3 sends to MPI_PROC_NULL, aborts.
    let expected = [
        Expected::on_rank("MPI_Comm_rank", 1, 1, 0),
        Expected::on_rank("MPI_Barrier", 1, 2, 0),
        Expected::on_rank("MPI_Allreduce", 1, 1, 4 * 8),
        Expected::on_rank("MPI_Send", 1, 3, 0),
        Expected::on_rank("MPI_Recv", 1, 0, 0),
    ];
    check_partial_record("abort.c", mpi, &expected, &["MPI_Abort"]);
}
}

for_each_mpi! {
fn exit_without_finalize_leaves_one_partial_record_of_rank_0(mpi) {
    let _serial = serial();
    // no_finalize.c: rank 0 does 2 barriers, 1 allreduce of 4 doubles, 5 sends to MPI_PROC_NULL.
    let expected = [
        Expected::on_rank("MPI_Comm_rank", 0, 1, 0),
        Expected::on_rank("MPI_Barrier", 0, 2, 0),
        Expected::on_rank("MPI_Allreduce", 0, 1, 4 * 8),
        Expected::on_rank("MPI_Send", 0, 5, 0),
    ];
    check_partial_record("no_finalize.c", mpi, &expected, &[]);
}
}

for_each_mpi! {
fn a_partial_record_carries_the_writing_ranks_counters(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for("no_finalize.c", mpi), 4)
        .mpi(mpi)
        .env("MPISTAT_COUNTERS", "task-clock,page-faults,instructions")
        // 4 ranks may outnumber this machine's CPUs: counters are wanted all the same.
        .profiled(&syslogd.site_config_with(
            "partial-site.toml",
            "[profiler]\ncounters_when_oversubscribed = true\n",
        ));
    assert!(!outcome.status.success(), "{outcome:?}");
    let record = syslogd.single_record();
    assert!(record.partial.is_some());
    let set = record
        .counters
        .as_ref()
        .expect("partial record has counters");
    let event = |name: &str| set.events.iter().find(|e| e.name == name).unwrap();
    // Rank 0's own task-clock from MPI_Init to its exit: some CPU time, and not the other ranks'.
    let task = event("task-clock");
    assert_eq!(task.unavailable, None);
    assert!(task.app > 0, "{set:?}");
    assert!(
        task.app + task.mpi <= record.wall_ns.max + 50_000_000,
        "more CPU time than one rank's wall time: {set:?}"
    );
    assert!(event("page-faults").unavailable.is_none());
    // No PMU here: the hardware event says why, nothing else changes.
    assert!(event("instructions").unavailable.is_some(), "{set:?}");
}
}

/// Rank 0 killed by SIGTERM from someone else than its launcher (a batch system's daemon, a
/// user's `kill`): it writes a partial record ("SIGTERM") with its own numbers, and still ends by
/// the signal, so mpirun reports the job as failed. (SIGTERM from mpirun itself, as after
/// `MPI_Abort`, leaves no second record: `mpi_abort_leaves_one_partial_record_of_the_aborting_rank`.)
#[test]
fn sigterm_to_rank_0_leaves_one_partial_record_of_rank_0() {
    use std::io::BufRead;
    let _serial = serial();
    let syslogd = Syslogd::start();
    let mut child = std::process::Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["-np", "2", "-x"])
        .arg(format!("LD_PRELOAD={}", library().display()))
        .arg("-x")
        .arg(format!(
            "MPISTAT_CONFIG={}",
            syslogd.site_config().display()
        ))
        .arg(program("forever.c"))
        .env("OMPI_MCA_mpi_yield_when_idle", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mpirun");
    // forever.c prints its lines after MPI_Init and a barrier, then runs (at most 10 minutes).
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = [String::new(), String::new()];
    for line in &mut lines {
        stdout.read_line(line).unwrap();
    }
    assert_eq!(lines[0], "forever: running\n");
    let pid: libc::pid_t = lines[1]
        .trim()
        .strip_prefix("forever: rank 0 pid ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{lines:?}"));
    // SAFETY: kill(2) on rank 0, a child of our child mpirun.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status}");
    let record = syslogd.single_record();
    assert_eq!(record.partial.as_deref(), Some("SIGTERM"));
    assert_eq!(record.ranks, 2);
    assert_eq!(record.pid as libc::pid_t, pid);
    let barrier = routine(&record, "MPI_Barrier");
    assert!(barrier.calls.sum >= 1, "{barrier:?}");
    assert_eq!(barrier.calls.max_rank, 0, "rank 0's own numbers");
}
