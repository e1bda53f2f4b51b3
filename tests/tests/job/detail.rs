//! Detail mode and `MPI_Pcontrol`. The report's layout belongs to the runtime; these tests rely
//! only on a table row naming the routine followed by its call count (see [`has_count_line`]).

use mpistat_e2e::*;

/// What pcontrol.c does on 2 ranks: rank 0 sends 5 messages, (Pcontrol(2)), 7 while paused, 3 more.
const SENT_BEFORE_SUBTOTAL: u64 = 5;
const SENT_COUNTED: u64 = 5 + 3;

for_each_mpi! {
fn detail_path_gets_a_report_naming_each_routine_with_its_calls(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("detail");
    let path = dir.path().join("report.txt");
    let outcome = Job::new(program_for("basic.c", mpi), 4)
        .mpi(mpi)
        .env("MPISTAT_DETAIL", path.display().to_string())
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    let report = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}", path.display()));
    for e in basic_expectations(4) {
        assert!(
            has_count_line(&report, e.name, e.calls.sum),
            "report lacks `{} {}`:\n{report}",
            e.name,
            e.calls.sum
        );
    }
    // The record still goes to syslog.
    assert_routines(&syslogd.single_record(), &basic_expectations(4));
}
}

for_each_mpi! {
fn without_detail_nothing_is_printed_or_written(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("nodetail");
    let job = Job::new(program_for("basic.c", mpi), 4)
        .mpi(mpi)
        .cwd(dir.path());
    let bare = job.bare();
    let profiled = job.profiled(&syslogd.site_config());
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(
        files.is_empty(),
        "the profiler wrote files into the job's directory: {files:?}"
    );
}
}

for_each_mpi! {
fn pcontrol_pauses_and_resumes_counting_and_prints_subtotals_to_stderr(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for("pcontrol.c", mpi), 2)
        .mpi(mpi)
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    assert!(
        has_count_line(&outcome.stderr, "MPI_Send", SENT_BEFORE_SUBTOTAL),
        "MPI_Pcontrol(2) printed no subtotal `MPI_Send {SENT_BEFORE_SUBTOTAL}` on stderr:\n{}",
        outcome.stderr
    );
    let record = syslogd.single_record();
    let expected = [
        Expected::per_rank(
            "MPI_Send",
            RankValues(vec![SENT_COUNTED, 0]),
            RankValues(vec![SENT_COUNTED * 5 * 4, 0]),
        ),
        Expected::per_rank(
            "MPI_Recv",
            RankValues(vec![0, SENT_COUNTED]),
            RankValues(vec![0, SENT_COUNTED * 5 * 4]),
        ),
    ];
    assert_routines(&record, &expected);
}
}

for_each_mpi! {
fn pcontrol_subtotals_go_to_the_detail_path(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("pcontrol");
    let path = dir.path().join("report.txt");
    let job = Job::new(program_for("pcontrol.c", mpi), 2).mpi(mpi);
    let bare = job.bare();
    let profiled = job
        .clone()
        .env("MPISTAT_DETAIL", path.display().to_string())
        .profiled(&syslogd.site_config());
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    let report = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}", path.display()));
    assert!(
        has_count_line(&report, "MPI_Send", SENT_BEFORE_SUBTOTAL),
        "no subtotal in:\n{report}"
    );
    assert!(
        has_count_line(&report, "MPI_Send", SENT_COUNTED),
        "no final count in:\n{report}"
    );
}
}
