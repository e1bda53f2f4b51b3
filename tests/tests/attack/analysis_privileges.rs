//! Issue 15, part 2, end to end with real parts: the analysis of a trace runs as the job's user,
//! where the trace is, and reaches the digest as that user's attested syslog record; the digest
//! (ingest, digest, site-report) runs as user `mpistat`, who cannot read any home directory.
//!
//! Alice's flagged job (`delays.c`) is profiled, ingest puts it on the escalation list, her next
//! run is traced into her private home and, at its end, the profiler starts `mpistat analyze
//! --send`, whose record ingest matches to the job: the weekly mail (real SMTP) has the level-6
//! section and her job page the analysis. Mallory tries every way to an analysis that is not
//! hers: `analyze --send` of Alice's trace directory, of `/etc/shadow`, of a symlink to Alice's
//! directory, a directory of his own naming Alice's job; an analysis record claiming Alice's
//! uid; and job records of his own whose trace directory is Alice's, `/etc/shadow` or a symlink.
//! None of it gives an analysis anywhere (database, mail, pages); the forgeries are counted.

use mpistat_e2e::*;
use mpistat_record::analysis::ANALYSIS_MODEL_VERSION;
use mpistat_record::{AnalysisRecord, JobRecord};
use std::path::Path;
use std::process::Command;

/// Send `message` to the daemon as `user`, tagged like the profiler's lines.
fn send_as(user: &User, syslogd: &Syslogd, message: &str) {
    let status = user
        .command("logger")
        // Record lines are up to 7680 bytes; logger cuts at 1 KiB unless told.
        .args(["--size", "8192", "-u"])
        .arg(syslogd.socket())
        .args(["-p", "local5.info", "-t", "mpistat", "--", message])
        .status()
        .expect("run logger");
    assert!(status.success(), "logger as {} failed", user.name);
}

/// `mpistat analyze --send DIR` as `user`: whether it succeeded, and its stderr.
fn analyze_send(user: &User, dir: &Path, site: &Path) -> (bool, String) {
    let out = mpistat_as(
        Some(user),
        &["analyze", "--send", dir.to_str().unwrap()],
        site,
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_analysis_runs_as_the_jobs_user_and_the_digest_reads_no_trace() {
    let _serial = serial();
    let Some(AnalysisUsers {
        alice,
        mallory,
        digest,
        syslogd,
        dir,
        lib,
    }) = AnalysisUsers::start("analysis-privileges")
    else {
        return;
    };
    let out = dir.path().join("site");
    std::fs::create_dir_all(&out).unwrap();
    digest.own(&out);
    let port = free_port();
    let site = syslogd.site_config();
    let mut text = std::fs::read_to_string(&site).unwrap();
    text.push_str(&format!(
        "[trace]\nanalyze_command = {mpistat:?}\n\
         [escalation]\nlist = {list:?}\nmpi_percent_min = 30.0\n\
         critical_path_imbalance_percent_min = 20.0\ncpu_hours_min = 0.0\n\
         [database]\npath = {db:?}\n\
         [site_report]\ngroup = \"\"\n\
         [mail]\ntransport = \"smtp\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {port}\n\
         smtp_starttls = \"off\"\nrecipient = \"{{user}}@example.org\"\n",
        mpistat = mpistat_binary().display().to_string(),
        list = lib.join("escalation.list").display().to_string(),
        db = lib.join("mpistat.db").display().to_string(),
    ));
    std::fs::write(&site, text).unwrap();
    let log = dir.path().join("records.log");
    let log_arg = log.to_str().unwrap();
    let ingest = || {
        write_trusted_log(&syslogd, &log);
        let out = mpistat_as(Some(&digest), &["ingest", log_arg], &site);
        assert!(out.status.success(), "ingest as {}", digest.name);
    };
    // The digest's user cannot read any home directory.
    for home in [&alice.home, &mallory.home] {
        let ls = digest.command("ls").arg(home).output().unwrap();
        assert!(
            !ls.status.success(),
            "{} can read {}",
            digest.name,
            home.display()
        );
    }

    // Alice's flagged job, profiled; ingest (as `mpistat`) puts it on the list.
    let job = Job::new(program("delays.c"), 4)
        .arg("200")
        .arg("10")
        .arg("10")
        .arg("30")
        .as_user(&alice);
    job.profiled(&site).assert_success();
    let first = syslogd.records(1).pop().unwrap();
    assert_eq!((first.uid, first.trace.is_none()), (alice.uid, true));
    ingest();

    // Her next run is traced into her private home, and analysed as her at its end.
    job.profiled(&site).assert_success();
    let second = syslogd.wait_for_record("of the second run", |r| r.job_id != first.job_id);
    let trace = second.trace.clone().expect("the second run was traced");
    assert_eq!(trace.reason, "escalation");
    assert!(
        trace.dir.starts_with(alice.home.to_str().unwrap()),
        "{}",
        trace.dir
    );
    let analysis =
        syslogd.wait_for_analysis("of the traced run", |a| a.job_key == second.wire_key());
    assert_eq!(analysis.uid, alice.uid);
    assert_eq!(analysis.dir, trace.dir);
    assert!(analysis.summary.is_some(), "{:?}", analysis.error);

    // Mallory's tries with `mpistat analyze --send`: nothing of Alice's is read or sent.
    let alice_trace = Path::new(&trace.dir);
    let link = mallory.home.join("alice-trace");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(alice_trace, &link).unwrap();
    let own = mallory.home.join("own-trace");
    let _ = std::fs::remove_dir_all(&own);
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("job-key"), format!("{}\n", second.wire_key())).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", own.join("rank-000000.mpt")).unwrap();
    mallory.own(&own);
    Command::new("chown")
        .args(["-h", &format!("{}:{}", mallory.uid, mallory.gid)])
        .arg(&link)
        .status()
        .unwrap();
    for (target, why) in [
        (alice_trace, "another user's trace directory"),
        (Path::new("/etc/shadow"), "/etc/shadow"),
        (link.as_path(), "a symlink to another user's trace"),
    ] {
        let (sent, stderr) = analyze_send(&mallory, target, &site);
        assert!(!sent, "{why}: analyze --send succeeded");
        assert!(!stderr.trim().is_empty(), "{why}: no reason given");
    }
    // A directory of his own naming Alice's job: analysed as Mallory (who cannot read
    // /etc/shadow) and sent as his record, which the digest rejects (not his job).
    let (sent, stderr) = analyze_send(&mallory, &own, &site);
    assert!(sent, "{stderr}");
    syslogd.wait_for_analysis("of Mallory's own directory", |a| a.uid == mallory.uid);
    // An analysis record claiming to be Alice's (of her first job: the key of an analysis is
    // its job's, and Mallory sent one of her second job already), sent by Mallory.
    let claimed = AnalysisRecord {
        version: ANALYSIS_MODEL_VERSION,
        job_key: first.wire_key(),
        uid: alice.uid,
        user: alice.name.clone(),
        host: "forged".into(),
        dir: trace.dir.clone(),
        summary: Some(analysis.summary.clone().unwrap().replace("MPI_", "FORGED_")),
        error: None,
        analysed_unix_ms: 1,
    };
    for message in mpistat_record::encode_analysis(&claimed) {
        send_as(&mallory, &syslogd, &message);
    }
    syslogd.wait_for_analysis("claiming Alice's uid", |a| a.host == "forged");
    // Job records of Mallory's own whose trace directory is Alice's, /etc/shadow, a symlink.
    let mut named = Vec::new();
    for (n, dir) in [
        trace.dir.clone(),
        "/etc/shadow".into(),
        link.display().to_string(),
    ]
    .into_iter()
    .enumerate()
    {
        let mut record: JobRecord = second.clone();
        record.job_id = format!("mallory-{n}");
        record.uid = mallory.uid;
        record.user = mallory.name.clone();
        record.trace.as_mut().unwrap().dir = dir;
        record.trace.as_mut().unwrap().reason = "user".into();
        for message in mpistat_record::encode(&record) {
            send_as(&mallory, &syslogd, &message);
        }
        named.push(record);
    }
    syslogd.wait_for_record("naming Alice's trace", |r| r.job_id == "mallory-2");
    ingest();
    // Alice's capture is spent.
    let list = std::fs::read_to_string(lib.join("escalation.list")).unwrap();
    assert!(!list.contains(&second.exe), "{list}");

    // The database: exactly one analysis, Alice's; Mallory's claims are rejected as forged.
    let analyses = AnalysisUsers::stored_analyses(&lib);
    let db = mpistat_store::ReadStore::open(&lib.join("mpistat.db")).unwrap();
    assert_eq!(
        analyses,
        vec![(second.key(), alice.name.clone(), analysis.summary.clone())]
    );
    let mut forged: Vec<String> = db
        .rejected()
        .unwrap()
        .into_iter()
        .filter(|(kind, ..)| kind == "forged")
        .map(|(.., detail)| detail)
        .collect();
    forged.sort();
    let claims_alice = format!(
        "claims uid {} ({}) but uid {} sent it",
        alice.uid, alice.name, mallory.uid
    );
    let not_his = format!("is uid {}'s, not the sender's", alice.uid);
    assert_eq!(forged.len(), 2, "{forged:#?}");
    assert!(
        forged.iter().any(|d| d.contains(&claims_alice)),
        "{forged:#?}"
    );
    assert!(forged.iter().any(|d| d.contains(&not_his)), "{forged:#?}");
    assert!(
        db.analysis_inbox().unwrap().is_empty(),
        "every analysis was filed or rejected"
    );

    // The weekly mails (as `mpistat`, real SMTP): Alice's level 6, nothing for Mallory.
    let server = SmtpSink::start(port, &dir.path().join("inbox"));
    let week = this_week();
    let send = ["digest", "--week", week.as_str(), "--send"];
    assert!(mpistat_as(Some(&digest), &send, &site).status.success());
    let mails: Vec<String> = server
        .mails(2)
        .iter()
        .map(|m| m.replace("=\r\n", "").replace("=\n", ""))
        .collect();
    let to = |user: &User| {
        let header = format!("To: {}@example.org", user.name);
        mails
            .iter()
            .find(|m| m.contains(&header))
            .unwrap_or_else(|| panic!("no mail to {}", user.name))
            .clone()
    };
    let alices = to(&alice);
    assert!(
        alices.contains("Level 6: where your traced jobs waited"),
        "{alices}"
    );
    assert!(alices.contains(&format!("Job {} (delays) was traced.", second.job_id)));
    assert!(!alices.contains("FORGED_"), "{alices}");
    let mallorys = to(&mallory);
    // (Every mail's level 6 says how to trace with `mpistat analyze`; Alice's analysis is
    // what must not be in Mallory's.)
    let alices_job = format!("Job {}", second.job_id);
    for absent in [
        "Level 6: where your traced jobs waited",
        "was traced.",
        alices_job.as_str(),
    ] {
        assert!(!mallorys.contains(absent), "{absent:?} in {mallorys}");
    }

    // The pages (as `mpistat`): the analysis is on Alice's job page, on none of Mallory's.
    let out_arg = out.to_str().unwrap();
    let report = ["site-report", "--week", week.as_str(), "--out", out_arg];
    assert!(mpistat_as(Some(&digest), &report, &site).status.success());
    let page = |r: &JobRecord| {
        std::fs::read_to_string(out.join(format!("jobs/{}.html", r.key())))
            .unwrap_or_else(|e| panic!("page of job {}: {e}", r.job_id))
    };
    assert!(page(&second).contains("id=\"trace-analysis\""));
    for record in &named {
        assert!(
            !page(record).contains("trace-analysis"),
            "{}",
            record.job_id
        );
    }
}
