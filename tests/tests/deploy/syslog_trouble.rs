//! Syslog trouble never breaks or delays a job: a missing socket, a dead daemon's socket, and a
//! stopped rsyslogd whose socket queue is full. Timing is compared with a bare run of the same
//! job in the same test, with a margin ([`DELAY_MARGIN`]) that catches a blocking send but not
//! noise.

use mpistat_e2e::*;
use std::time::Duration;

for_each_mpi! {
fn missing_syslog_socket_neither_breaks_nor_delays_the_job(mpi) {
    let _serial = serial();
    let dir = Scratch::new("nosocket");
    let config = write_site_config(dir.path(), &dir.path().join("no-such.sock"), "local5");
    let job = Job::new(program_for("basic.c", mpi), 4).mpi(mpi);
    let bare = job.bare();
    bare.assert_success();
    let profiled = job.profiled(&config);
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    assert_not_delayed(&bare, &profiled);
}
}

for_each_mpi! {
fn a_dead_syslogds_socket_fails_the_send_at_once_and_detail_mode_says_so(mpi) {
    let _serial = serial();
    let dir = Scratch::new("deadsocket");
    // The socket file of a daemon that is gone: connecting is refused.
    let socket = dir.path().join("dead.sock");
    drop(std::os::unix::net::UnixDatagram::bind(&socket).unwrap());
    let config = write_site_config(dir.path(), &socket, "local5");
    let detail = dir.path().join("detail");
    let job = Job::new(program_for("basic.c", mpi), 4).mpi(mpi);
    let bare = job.bare();
    bare.assert_success();
    let profiled = job
        .clone()
        .env("MPISTAT_DETAIL", detail.display().to_string())
        .profiled(&config);
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    assert_not_delayed(&bare, &profiled);
    let text = std::fs::read_to_string(&detail).unwrap();
    assert!(
        text.contains("mpistat: record NOT sent to syslog: cannot reach the syslog socket: Connection refused"),
        "{text}"
    );
}
}

for_each_mpi! {
fn stopped_syslogd_does_not_delay_jobs_and_later_jobs_are_recorded_again(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let config = syslogd.site_config();
    // A send that blocks on the stopped daemon would hang forever: fail after a minute instead.
    let job = Job::new(program_for("basic.c", mpi), 4).mpi(mpi).timeout(Duration::from_secs(60));
    let bare = job.bare();
    bare.assert_success();

    syslogd.pause();
    let fillers = syslogd.fill_queue();
    for i in 0..3 {
        let profiled = job
            .clone()
            .env("SLURM_JOB_ID", format!("e2e-paused-{i}"))
            .profiled(&config);
        profiled.assert_success();
        assert_same_output(&bare, &profiled);
        assert_not_delayed(&bare, &profiled);
    }
    syslogd.resume();
    drop(fillers);

    job.clone()
        .env("SLURM_JOB_ID", "e2e-after-resume")
        .profiled(&config)
        .assert_success();
    let record = syslogd.wait_for_record("of job e2e-after-resume", |r| {
        r.job_id == "e2e-after-resume"
    });
    assert_routines(&record, &basic_expectations(4));
    // The scenario was real: the paused jobs' records met a full queue and were dropped.
    let decoded = syslogd.decoded();
    let paused: Vec<&str> = decoded
        .records
        .iter()
        .map(|r| r.job_id.as_str())
        .filter(|id| id.starts_with("e2e-paused"))
        .collect();
    assert!(
        paused.is_empty(),
        "records of jobs run while the queue was full arrived: {paused:?}"
    );
}
}
