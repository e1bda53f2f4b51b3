//! The harness itself against the real daemon and launcher: records can only be trusted if these
//! hold (a private rsyslogd that takes our facility only, attests the sender, can be stopped and
//! filled; a job that hangs is killed).

use mpistat_e2e::*;
use std::process::Command;
use std::time::Duration;

fn logger(syslogd: &Syslogd, priority: &str, message: &str) {
    let socket = syslogd.socket();
    let status = Command::new("logger")
        .args([
            "-u",
            socket.to_str().unwrap(),
            "-p",
            priority,
            "-t",
            "e2e",
            message,
        ])
        .status()
        .expect("run logger");
    assert!(status.success());
}

#[test]
fn private_syslogd_writes_our_facility_only_with_the_attested_uid() {
    let syslogd = Syslogd::start();
    logger(&syslogd, "local4.info", "not ours");
    logger(&syslogd, "local5.info", "ours");
    syslogd.wait_for_lines(|lines| !lines.is_empty());
    std::thread::sleep(Duration::from_millis(200));
    let lines = syslogd.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].ends_with(" e2e: ours"), "{lines:?}");
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let trusted = syslogd.trusted_lines();
    assert!(
        trusted.len() == 1 && trusted[0].starts_with(&format!("uid={uid} ")),
        "{trusted:?}"
    );
}

#[test]
fn paused_syslogd_queue_fills_and_drains_after_resume() {
    let syslogd = Syslogd::start();
    syslogd.pause();
    let fillers = syslogd.fill_queue();
    let probe = std::os::unix::net::UnixDatagram::unbound().unwrap();
    probe.set_nonblocking(true).unwrap();
    probe.connect(syslogd.socket()).unwrap();
    let err = probe
        .send(b"<174>e2e: lost")
        .expect_err("a full queue must refuse a datagram");
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    syslogd.resume();
    drop(fillers);
    std::thread::sleep(Duration::from_millis(300));
    logger(&syslogd, "local5.info", "after resume");
    syslogd.wait_for_lines(|lines| lines.iter().any(|l| l.ends_with("e2e: after resume")));
}

#[test]
fn hanging_job_is_killed_and_fails() {
    let mut cmd = Command::new("sleep");
    cmd.arg("60");
    let start = std::time::Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_with_timeout(cmd, Duration::from_secs(1))
    }));
    assert!(
        result.is_err(),
        "a job over its time limit must fail the test"
    );
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn basic_program_runs_bare() {
    let _serial = serial();
    let outcome = Job::new(program("basic.c"), 4).bare();
    outcome.assert_success();
    for rank in 0..4 {
        assert!(
            outcome.stdout.lines().any(|l| l == basic_ok_line(rank)),
            "{}",
            outcome.stdout
        );
    }
}
