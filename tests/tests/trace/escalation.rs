//! Escalation end to end with real parts: a flagged pattern (`delays.c`: most of the time in MPI,
//! a large critical-path imbalance) runs profiled only; `mpistat ingest` of what rsyslog wrote
//! puts (uid, executable) on the escalation list; the second run of the same executable by the
//! same user is traced without the user asking, and at its end the profiler starts `mpistat
//! analyze --send`, whose record reaches syslog; ingest of both spends the entry and stores the
//! analysis; `mpistat digest --send` to a real SMTP server (aiosmtpd) delivers the user's
//! weekly mail with the level-6 section. Also `mpistat escalate add|list|remove`.

use mpistat_e2e::*;
use std::path::Path;

/// The executable's file name (`delays`, or `delays.mpich` as built for MPICH).
fn program_name(exe: &str) -> &str {
    Path::new(exe)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(exe)
}

fn list_text(config: &Path) -> String {
    let out = mpistat(&["escalate", "list"], config);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

for_each_mpi! {
fn a_flagged_job_is_traced_next_time_and_the_mail_tells_where_it_waited(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("escalation");
    let list = dir.path().join("lib/escalation.list");
    let port = free_port();
    // One site file for the profiler and the mpistat command. The job is tiny: no CPU-hour floor.
    let site = syslogd.site_config();
    let mut text = std::fs::read_to_string(&site).unwrap();
    text.push_str(&format!(
        "[trace]\ndirectory = \"{traces}/{{job_id}}\"\nanalyze_command = {mpistat:?}\n\
         [escalation]\nlist = {list:?}\nmpi_percent_min = 30.0\n\
         critical_path_imbalance_percent_min = 20.0\ncpu_hours_min = 0.0\n\
         [database]\npath = {db:?}\n\
         [mail]\ntransport = \"smtp\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {port}\n\
         smtp_starttls = \"off\"\nrecipient = \"{{user}}@example.org\"\n",
        traces = dir.path().join("traces").display(),
        mpistat = mpistat_binary().display().to_string(),
        list = list.display().to_string(),
        db = dir.path().join("mpistat.db").display().to_string(),
    ));
    std::fs::write(&site, text).unwrap();
    let job = Job::new(program_for("delays.c", mpi), 4)
        .mpi(mpi)
        .arg("200")
        .arg("10")
        .arg("10")
        .arg("30");
    let log = dir.path().join("records.log");
    let log_arg = log.to_str().unwrap();

    // First run: profiled only.
    job.profiled(&site).assert_success();
    let first = syslogd.records(1).pop().unwrap();
    assert_eq!(first.trace, None, "nobody asked for a trace yet");
    write_trusted_log(&syslogd, &log);
    assert!(mpistat(&["ingest", log_arg], &site).status.success());
    let listed = list_text(&site);
    assert!(
        listed.contains(&format!(
            "uid {}  {}  1 capture(s) left",
            first.uid, first.exe
        )),
        "{listed}"
    );
    assert!(listed.contains("critical-path imbalance"), "{listed}");

    // Second run of the same executable by the same user: traced by escalation.
    job.profiled(&site).assert_success();
    let second = syslogd.wait_for_record("of the second run", |r| r.job_id != first.job_id);
    let trace = second.trace.clone().expect("the second run was traced");
    assert_eq!(trace.reason, "escalation");
    assert_eq!(trace.ranks_written, 4);
    // The profiler started its analysis at the end of the job, as the job's user.
    let analysis = syslogd.wait_for_analysis("of the traced run", |a| a.job_key == second.wire_key());
    assert_eq!(
        (analysis.uid, analysis.dir.as_str()),
        (second.uid, trace.dir.as_str())
    );
    write_trusted_log(&syslogd, &log);
    assert!(mpistat(&["ingest", log_arg], &site).status.success());
    // Its one capture is spent: the entry left the list.
    let listed = list_text(&site);
    assert!(!listed.contains(&first.exe), "{listed}");

    // The weekly mail, over real SMTP, has the level-6 section for the traced job.
    let server = SmtpSink::start(port, &dir.path().join("inbox"));
    let week = this_week();
    let send = ["digest", "--week", week.as_str(), "--send"];
    assert!(mpistat(&send, &site).status.success());
    let mails = server.mails(1);
    assert_eq!(mails.len(), 1);
    // Quoted-printable may break long lines: undo soft breaks before looking.
    let mail = mails[0].replace("=\r\n", "").replace("=\n", "");
    // The delaying call site as a source line (the analysis symbolises it with addr2line).
    let source = std::fs::read_to_string(programs_dir().join("delays.c")).unwrap();
    let send_line = source
        .lines()
        .position(|l| l.contains("DELAYED SEND"))
        .unwrap()
        + 1;
    for expected in [
        format!("before MPI_Send (delays.c:{send_line}), most on rank 0"),
        "Level 6: where your traced jobs waited".to_string(),
        format!("Job {} ({}) was traced.", second.job_id, program_name(&second.exe)),
        "1. compute after MPI_Barrier".to_string(),
        format!("Full report: mpistat analyze {}", trace.dir),
    ] {
        assert!(mail.contains(&expected), "{expected:?} not in {mail}");
    }

    // Admins edit the list by hand.
    let add = [
        "escalate",
        "add",
        "root",
        "/opt/app/solver",
        "--captures",
        "2",
    ];
    assert!(mpistat(&add, &site).status.success());
    assert!(list_text(&site).contains("uid 0  /opt/app/solver  2 capture(s) left"));
    let remove = ["escalate", "remove", "root", "/opt/app/solver"];
    assert!(mpistat(&remove, &site).status.success());
    assert!(!list_text(&site).contains("/opt/app/solver"));
}
}
