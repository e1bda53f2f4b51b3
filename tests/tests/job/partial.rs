//! Jobs that end without `MPI_Finalize` still leave exactly one record, marked partial, holding
//! the numbers of the rank that wrote it: the aborting rank for `MPI_Abort`, rank 0 for an exit
//! without `MPI_Finalize`, rank 0 for a finalize whose own MPI calls failed.

use mpistat_e2e::*;
use mpistat_record::model::{JobRecord, Stat};
use std::os::unix::process::ExitStatusExt;

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
    // The rank that wrote it looked its user up itself: only the rank its launcher numbers 0
    // does so before `MPI_Init` (hooks.rs).
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let user = mpistat_site::accounts::System::default().name_of(uid);
    assert_eq!((record.uid, Some(record.user.clone())), (uid, user));
    assert_routines(&record, expected);
    let allowed: Vec<&str> = LIFECYCLE.iter().chain(also_allowed).copied().collect();
    assert_no_other_routines(&record, expected, &allowed);
}

for_each_mpi! {
fn mpi_abort_leaves_one_partial_record_of_the_aborting_rank(mpi) {
    let _serial = serial();
    // abort.c: rank 1 does 2 barriers, 1 allreduce of 4 doubles (to each of the 4 ranks), 3 sends
    // to MPI_PROC_NULL, aborts.
    let expected = [
        Expected::on_rank("MPI_Comm_rank", 1, 1, 0),
        Expected::on_rank("MPI_Barrier", 1, 2, 0),
        Expected::on_rank("MPI_Allreduce", 1, 1, 4 * 4 * 8),
        Expected::on_rank("MPI_Send", 1, 3, 0),
        Expected::on_rank("MPI_Recv", 1, 0, 0),
    ];
    check_partial_record("abort.c", mpi, &expected, &["MPI_Abort"]);
}
}

for_each_mpi! {
/// Every rank aborts at once (`abort_all.c`): the first real `MPI_Abort` makes the launcher
/// stop the others (Hydra within milliseconds), some while they send their own partial record.
/// Whatever arrives of a record is the record (its payload goes first, its summary line last):
/// a record may lack its summary, never its payload (3 of 18 MPICH records did, issue 33).
fn records_of_ranks_stopped_while_sending_them_arrive_whole(mpi) {
    let _serial = serial();
    const RUNS: usize = 8;
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("abort_all.c", mpi), 4).mpi(mpi);
    for _ in 0..RUNS {
        job.profiled(&syslogd.site_config());
    }
    // Each job leaves at least the first aborting rank's record.
    syslogd.wait_for_lines(|lines| {
        mpistat_record::decode(lines.iter().map(String::as_str)).records.len() >= RUNS
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let decoded = syslogd.decoded();
    for problem in &decoded.problems {
        match problem {
            mpistat_record::wire::Problem::MissingParts { missing, .. } => {
                let missing: Vec<u32> = missing.parts().collect();
                assert_eq!(missing, [0], "a record lost its payload: {problem}")
            }
            other => panic!("{other}"),
        }
    }
    for record in &decoded.records {
        assert!(record.partial.is_some(), "{record:#?}");
        assert_eq!(routine(record, "MPI_Allreduce").bytes.sum, 4 * 8);
    }
}
}

for_each_mpi! {
fn exit_without_finalize_leaves_one_partial_record_of_rank_0(mpi) {
    let _serial = serial();
    // no_finalize.c: rank 0 does 2 barriers, 1 allreduce of 4 doubles (to each of the 4 ranks), 5
    // sends to MPI_PROC_NULL.
    let expected = [
        Expected::on_rank("MPI_Comm_rank", 0, 1, 0),
        Expected::on_rank("MPI_Barrier", 0, 2, 0),
        Expected::on_rank("MPI_Allreduce", 0, 1, 4 * 4 * 8),
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
    // Open MPI's mpirun fails such a job; MPICH's Hydra, bare too, exits 9 or, in about 1 run
    // of 6 (its race between rank 0's exit and the PMI connection's end), 0.
    assert!(mpi == Mpi::Mpich || !outcome.status.success(), "{outcome:?}");
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

/// Run `cmd` (a `forever.c` job), kill its rank 0 with SIGTERM once it runs, and wait for the
/// launcher: its exit status and rank 0's pid.
fn sigterm_rank_0(mut cmd: std::process::Command) -> (std::process::ExitStatus, libc::pid_t) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("launcher");
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
    // SAFETY: kill(2) on rank 0, a child of our child launcher.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    // The launcher's own report (Hydra's "BAD TERMINATION" banner goes to stdout) is not read.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, pid);
        }
        if start.elapsed() > JOB_TIMEOUT {
            // SAFETY: kill(2) on the process group made for this launcher.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            panic!("the launcher did not end within {JOB_TIMEOUT:?} of SIGTERM to rank 0");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

for_each_mpi! {
/// Rank 0 killed by SIGTERM from someone else than its launcher (a batch system's daemon, a
/// user's `kill`): it writes a partial record ("SIGTERM") with its own numbers, and still ends by
/// the signal, so the launcher reports the job as failed exactly as in a bare run: Open MPI's
/// `mpirun` exits 143 (128 + SIGTERM) and aborts the other ranks; MPICH's `mpiexec` prints its
/// "BAD TERMINATION ... Terminated (signal 15)" banner, kills the other ranks and exits 15.
/// (SIGTERM from mpirun itself, as after `MPI_Abort`, leaves no second record:
/// `mpi_abort_leaves_one_partial_record_of_the_aborting_rank`.)
fn sigterm_to_rank_0_leaves_one_partial_record_of_rank_0(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("forever.c", mpi), 2).mpi(mpi);
    let (bare, _) = sigterm_rank_0(job.bare_command());
    let (status, pid) = sigterm_rank_0(job.profiled_command(&syslogd.site_config()));
    assert!(!status.success(), "{status}");
    assert_eq!(status.code(), bare.code(), "exit status as in the bare run");
    assert_eq!(status.signal(), bare.signal(), "exit status as in the bare run");
    let record = syslogd.single_record();
    assert_eq!(record.partial.as_deref(), Some("SIGTERM"));
    assert_eq!(record.ranks, 2);
    assert_eq!(record.pid as libc::pid_t, pid);
    let barrier = routine(&record, "MPI_Barrier");
    assert!(barrier.calls.sum >= 1, "{barrier:?}");
    assert_eq!(barrier.calls.max_rank, 0, "rank 0's own numbers");
}
}

for_each_mpi! {
/// `no_context_left.c` uses up MPI's context ids (MPICH has 2,048) and ends normally: bare, the
/// job succeeds. The profiler's communicator cannot be made in its `MPI_Finalize` then; that
/// must not abort the job (under MPICH it did: "Too many communicators" went to
/// `MPI_COMM_WORLD`'s fatal error handler, exit 15), and rank 0 writes a partial record of its
/// own figures saying why. Open MPI has more context ids than the program takes (it stops at
/// 5,000): its record is whole.
fn a_finalize_that_cannot_make_its_communicator_does_not_abort_the_job(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for("no_context_left.c", mpi), 2)
        .mpi(mpi)
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    let record = syslogd.single_record();
    match mpi {
        Mpi::Mpich => {
            assert_eq!(outcome.stdout.trim(), "leaked 2046", "{outcome:?}");
            assert_rank_0_reports_alone_without_a_communicator(&record);
        }
        Mpi::OpenMpi => {
            assert_eq!(record.partial, None);
            assert_eq!(routine(&record, "MPI_Allreduce").calls.sum, 2);
        }
    }
}
}

for_each_mpi! {
/// `no_context_left.c rank0`: rank 0 alone uses up its context ids (duplicates of
/// `MPI_COMM_SELF`), the other rank has plenty. Bare, the job succeeds. Under Open MPI the
/// profiler's `MPI_Comm_create_group` then failed on rank 0 alone: the other rank waited in it
/// for good, and rank 0 crashed in the real `MPI_Finalize` (SIGSEGV in `mca_pml_ob1_isend`,
/// progressing the failed creation's request). The ranks must agree that one of them cannot
/// make it, and rank 0 write a partial record saying why.
fn a_communicator_one_rank_cannot_make_fails_on_every_rank(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("no_context_left.c", mpi), 2)
        .mpi(mpi)
        .arg("rank0")
        .timeout(std::time::Duration::from_secs(60));
    job.bare().assert_success();
    let outcome = job.profiled(&syslogd.site_config());
    outcome.assert_success();
    assert!(outcome.stdout.starts_with("leaked "), "{outcome:?}");
    assert_rank_0_reports_alone_without_a_communicator(&syslogd.single_record());
}
}

/// `no_context_left.c`'s record when the finalize's communicator could not be made: rank 0's
/// own figures (its one `MPI_Allreduce`), saying why.
fn assert_rank_0_reports_alone_without_a_communicator(record: &JobRecord) {
    let reason = record.partial.as_deref().expect("a partial record");
    assert!(
        reason.contains("making its communicator failed") && reason.contains("rank 0"),
        "{reason}"
    );
    assert_eq!(routine(record, "MPI_Allreduce").calls, Stat::single(1, 0));
}
