//! Issue 4 end to end with real parts: real `mpirun` jobs under the profiler, a private rsyslogd
//! with trusted properties, a record forged by user `nobody` (claiming uid 0) through the same
//! socket, `mpistat ingest` of what rsyslog wrote, then `mpistat digest --send` to a real SMTP
//! server (Debian's aiosmtpd): the forgery is rejected and counted, the user gets exactly one
//! multipart/alternative mail whose numbers are those of the records.

use mpistat_e2e::*;
use mpistat_record::units::count;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

/// Send `message` to the daemon as user `nobody` (uid 65534), tagged like the profiler's lines.
fn send_as_nobody(syslogd: &Syslogd, message: &str) {
    let status = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "logger",
            "-u",
        ])
        .arg(syslogd.socket())
        .args(["-p", "local5.info", "-t", "mpistat", "--", message])
        .status()
        .expect("run setpriv logger");
    assert!(status.success(), "logger as nobody failed");
}

#[test]
fn jobs_are_ingested_a_forgery_is_rejected_and_one_mail_arrives_over_smtp() {
    let _serial = serial();
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to send as nobody");
        return;
    }
    let syslogd = Syslogd::start();
    let site = syslogd.site_config();
    Job::new(program("basic.c"), 4)
        .profiled(&site)
        .assert_success();
    Job::new(program("basic.c"), 2)
        .profiled(&site)
        .assert_success();
    let records = syslogd.records(2);
    assert!(records.iter().all(|r| r.uid == 0));

    // nobody may use the socket, and forges a record of root.
    let socket_dir = syslogd.socket().parent().unwrap().to_path_buf();
    std::fs::set_permissions(&socket_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut forged = records[0].clone();
    forged.job_id = "forged-by-nobody".into();
    for message in mpistat_record::encode(&forged) {
        send_as_nobody(&syslogd, &message);
    }
    syslogd.wait_for_record("forged by nobody", |r| r.job_id == "forged-by-nobody");
    std::thread::sleep(Duration::from_millis(300));

    // What rsyslog wrote with the attested uids is the input of ingest.
    let dir = TempDir::new("ingest-digest");
    let log = dir.path().join("records.log");
    write_trusted_log(&syslogd, &log);
    let trusted = std::fs::read_to_string(&log).unwrap();
    assert!(trusted.contains("uid=65534 "), "{trusted}");
    let port = free_port();
    let config = dir.path().join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {db:?}\n[mail]\ntransport = \"smtp\"\nsmtp_host = \"127.0.0.1\"\n\
             smtp_port = {port}\nsmtp_starttls = \"off\"\nrecipient = \"{{user}}@example.org\"\n",
            db = dir.path().join("mpistat.db").display().to_string()
        ),
    )
    .unwrap();

    let log_arg = log.to_str().unwrap();
    assert!(mpistat(&["ingest", log_arg], &config).status.success());
    let report = mpistat(&["ingest", "--report"], &config);
    let report = String::from_utf8_lossy(&report.stdout).into_owned();
    assert!(report.contains("jobs stored: 2"), "{report}");
    assert!(report.contains("rejected: forged 1\n"), "{report}");
    assert!(
        report.contains("claims uid 0 (root) but uid 65534 sent it"),
        "{report}"
    );
    // Again: nothing new.
    assert!(mpistat(&["ingest", log_arg], &config).status.success());
    let again = mpistat(&["ingest", "--report"], &config);
    assert_eq!(String::from_utf8_lossy(&again.stdout), report);

    // A real SMTP server gets exactly one mail (one user, one week), with the records' numbers.
    let week = this_week();
    let server = SmtpSink::start(port, &dir.path().join("inbox"));
    let send = ["digest", "--week", week.as_str(), "--send"];
    assert!(mpistat(&send, &config).status.success());
    assert!(mpistat(&send, &config).status.success());
    let mails = server.mails(1);
    drop(server);
    assert_eq!(mails.len(), 1, "exactly one mail per user and week");
    let mail = &mails[0];
    assert!(mail.contains("To: root@example.org"), "{mail}");
    assert!(
        mail.contains("Content-Type: multipart/alternative"),
        "{mail}"
    );
    let ranks: Vec<u32> = records.iter().map(|r| r.ranks).collect();
    let jobs_line = format!(
        "2 ({}-{} ranks)",
        ranks.iter().min().unwrap(),
        ranks.iter().max().unwrap()
    );
    assert!(mail.contains(&jobs_line), "{jobs_line} not in {mail}");
    for routine in ["MPI_Send", "MPI_Allreduce"] {
        let calls: u64 = records.iter().map(|r| routine_calls(r, routine)).sum();
        let row = format!("{routine:<16}{:>8}", count(calls));
        assert!(mail.contains(&row), "{row:?} not in {mail}");
    }
}

fn routine_calls(record: &mpistat_record::JobRecord, name: &str) -> u64 {
    record.routine(name).map_or(0, |r| r.calls.sum)
}
