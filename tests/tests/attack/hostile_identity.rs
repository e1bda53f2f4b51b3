//! Issue 34, §1 and §5's user names, end to end with real parts: hostile users (made with
//! `useradd`, prefix `idn`) send records under their own, correctly attested uid through a
//! real rsyslogd running the shipped configuration (`etc/rsyslog.d/mpistat.conf`, or the relay
//! chain of `etc/rsyslog/relay-node/` and `relay-loghost/`); only the content is hostile.
//!
//! * A copy of Alice's job (her job id, host, pid and start) sent by Mallory before hers takes
//!   nothing: both are stored, each its sender's, and her analysis attaches to her job.
//! * A copy with a later end shows Mallory none of her analysis, and an analysis Mallory sends
//!   with her `job-key` lands on his own job, never on hers.
//! * A record must name the host its line came from, on a single host and through the relay.
//! * Slurm facts a plain `mpirun` job sets itself are shown as claimed; the TaskProlog does not
//!   keep a `MPISTAT_SLURM_JOB` the user set.
//! * User names with surrounding space, control characters or a case variant of a known user
//!   are rejected, and the digest mails none of them.
//!
//! Every record that is not stored has a `rejected` row saying why.

use mpistat_e2e::relay::Chain;
use mpistat_e2e::rsyslog::SingleHost;
use mpistat_e2e::*;
use mpistat_record::model::{RoutineStats, Stat, MODEL_VERSION};
use mpistat_record::{AnalysisRecord, JobRecord};
use std::path::{Path, PathBuf};
use std::process::Command;

fn users() -> Option<(User, User)> {
    match (User::ensure("idnalice"), User::ensure("idnmallory")) {
        (Some(alice), Some(mallory)) => Some((alice, mallory)),
        _ => {
            eprintln!("SKIPPED: needs root to make users");
            None
        }
    }
}

fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    name.trim().to_string()
}

/// Send `message` to `socket` as `user`, tagged like the profiler's lines.
fn send_as(user: &User, socket: &Path, message: &str) {
    let status = user
        .command("logger")
        .args(["--size", "8192", "-u"])
        .arg(socket)
        .args(["-p", "local5.info", "-t", "mpistat", "--", message])
        .status()
        .expect("run logger");
    assert!(status.success(), "logger as {} failed", user.name);
}

fn send_record(user: &User, socket: &Path, record: &JobRecord) {
    for message in mpistat_record::encode(record) {
        send_as(user, socket, &message);
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A small, plausible record of `user` (uid) on `host`, ended a minute ago.
fn crafted(user: &str, uid: u32, job_id: &str, host: &str) -> JobRecord {
    let end = now_ms() - 60_000;
    let second = Stat {
        sum: 2_000_000_000,
        min: 1_000_000_000,
        max: 1_000_000_000,
        max_rank: 0,
    };
    JobRecord {
        version: MODEL_VERSION,
        job_id: job_id.into(),
        uid,
        user: user.into(),
        exe: "/usr/bin/solver".into(),
        argv0: "solver".into(),
        host: host.into(),
        pid: 4242,
        ranks: 2,
        nodes: 1,
        start_unix_ms: end - 1000,
        end_unix_ms: end,
        wall_ns: second,
        mpi_ns: Stat {
            sum: 200_000_000,
            min: 100_000_000,
            max: 100_000_000,
            max_rank: 0,
        },
        thread_level: "single".into(),
        mpi_library: "Open MPI v4.1.4".into(),
        routines: vec![RoutineStats {
            name: "MPI_Barrier".into(),
            class: "collective".into(),
            calls: Stat::single(4, 0),
            time_ns: Stat::single(200_000_000, 0),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A site file for jobs and the `mpistat` command: records to `socket`, the database and the
/// escalation list in `dir`, traces analysed by hand (`mpistat analyze --send`).
fn site_file(dir: &Path, socket: &Path, extra: &str) -> PathBuf {
    let path = dir.join("site.toml");
    std::fs::write(
        &path,
        format!(
            "[syslog]\nsocket = {socket:?}\n[trace]\nanalyze_at_exit = false\n\
             [escalation]\nlist = {list:?}\n[database]\npath = {db:?}\n{extra}",
            socket = socket.display().to_string(),
            list = dir.join("escalation.list").display().to_string(),
            db = dir.join("mpistat.db").display().to_string(),
        ),
    )
    .unwrap();
    path
}

/// `mpistat ingest FILES` (as root, the test's user); its summary line.
fn ingest(site: &Path, files: &[&Path]) -> String {
    let mut args = vec!["ingest"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let out = mpistat(&args, site);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The users of the stored jobs, of the stored analyses (each sorted) and the rejected entries
/// (kind and detail) of `db`, through the store's read handle.
fn stored(db: &Path) -> (Vec<String>, Vec<String>, Vec<String>) {
    let db = mpistat_store::ReadStore::open(db).unwrap();
    let mut owners: Vec<String> = db
        .jobs_ended_between(0, i64::MAX as u64)
        .unwrap()
        .into_iter()
        .map(|job| job.user)
        .collect();
    owners.sort();
    let mut analysed: Vec<String> = db
        .analyses_by_key()
        .unwrap()
        .into_values()
        .map(|a| a.user)
        .collect();
    analysed.sort();
    let rejected = db
        .rejected()
        .unwrap()
        .into_iter()
        .map(|(kind, _, _, detail)| format!("{kind} {detail}"))
        .collect();
    (owners, analysed, rejected)
}

/// Alice's traced job (a real one, as her) and her analysis of it (`mpistat analyze --send`,
/// as her), both through `socket`'s rsyslogd: her record and analysis as `lines` show them.
fn alices_traced_job(alice: &User, site: &Path, log: impl Fn() -> Vec<String>) -> JobRecord {
    Job::new(program("basic.c"), 2)
        .as_user(alice)
        .env("MPISTAT_TRACE", "1")
        .profiled(site)
        .assert_success();
    let deadline = std::time::Instant::now() + RECORD_WAIT;
    let record = loop {
        let lines = log();
        let decoded = mpistat_record::decode(lines.iter().map(String::as_str));
        if let Some(r) = decoded.records.into_iter().find(|r| r.uid == alice.uid) {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "no record of Alice");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let dir = record.trace.as_ref().expect("traced").dir.clone();
    let out = mpistat_as(Some(alice), &["analyze", "--send", &dir], site);
    assert!(out.status.success(), "{out:?}");
    let deadline = std::time::Instant::now() + RECORD_WAIT;
    while !mpistat_record::decode(log().iter().map(String::as_str))
        .analyses
        .iter()
        .any(|a| a.uid == alice.uid)
    {
        assert!(std::time::Instant::now() < deadline, "no analysis of Alice");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    record
}

/// Mallory's copy of `record`: its job id, host, pid and start (the old key), his uid and name.
fn copy_for(record: &JobRecord, mallory: &User) -> JobRecord {
    JobRecord {
        uid: mallory.uid,
        user: mallory.name.clone(),
        ..record.clone()
    }
}

#[test]
fn a_copy_of_her_job_sent_first_takes_neither_her_job_nor_her_analysis() {
    let _serial = serial();
    let Some((alice, mallory)) = users() else {
        return;
    };
    let mut hers = SingleHost::start("idn-first-hers");
    let mut his = SingleHost::start("idn-first-his");
    let site = site_file(hers.dir.path(), &hers.socket(), "");
    let record = alices_traced_job(&alice, &site, || hers.lines());
    // Mallory's copy (same job id, host, pid, start and end) reaches the log host first.
    send_record(&mallory, &his.socket(), &copy_for(&record, &mallory));
    his.wait_for_lines("Mallory's copy", |lines| {
        mpistat_record::decode(lines.iter().map(String::as_str))
            .records
            .len()
            == 1
    });
    hers.wait_for_lines("Alice's lines", |l| !l.is_empty());
    let summary = ingest(&site, &[&his.log(), &hers.log()]);
    assert!(
        summary.contains("2 records (2 new), 0 rejected"),
        "{summary}"
    );
    let db = hers.dir.path().join("mpistat.db");
    let (owners, analysed, rejected) = stored(&db);
    assert_eq!(owners, [alice.name.clone(), mallory.name.clone()]);
    assert_eq!(analysed, std::slice::from_ref(&alice.name));
    assert!(rejected.is_empty(), "{rejected:#?}");
    // Her weekly mail has her job, his has his.
    let week = this_week();
    for user in [&alice, &mallory] {
        let out = mpistat(&["digest", "--week", &week, "--user", &user.name], &site);
        let mail = String::from_utf8_lossy(&out.stdout);
        assert!(mail.contains("1 (2 ranks)"), "{}: {mail}", user.name);
    }
}

/// The job pages of the static site whose user is `user`.
fn job_pages_of(out: &Path, user: &User) -> Vec<String> {
    let owner = format!("<th>user</th><td>{} (uid {})</td>", user.name, user.uid);
    std::fs::read_dir(out.join("jobs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .filter(|page| page.contains(&owner))
        .collect()
}

fn site_report(site: &Path, out: &Path) {
    let _ = std::fs::remove_dir_all(out);
    let week = this_week();
    let report = [
        "site-report",
        "--week",
        week.as_str(),
        "--out",
        out.to_str().unwrap(),
    ];
    assert!(mpistat(&report, site).status.success());
}

#[test]
fn a_later_copy_shows_him_nothing_of_hers_and_his_analysis_stays_his() {
    let _serial = serial();
    let Some((alice, mallory)) = users() else {
        return;
    };
    let hers = SingleHost::start("idn-later-hers");
    let mut his = SingleHost::start("idn-later-his");
    let site = site_file(hers.dir.path(), &hers.socket(), "");
    let record = alices_traced_job(&alice, &site, || hers.lines());
    assert!(ingest(&site, &[&hers.log()]).contains("1 records (1 new), 0 rejected"));
    // Mallory's copy, ended later: the same old key.
    let copy = JobRecord {
        end_unix_ms: record.end_unix_ms + 1000,
        ..copy_for(&record, &mallory)
    };
    send_record(&mallory, &his.socket(), &copy);
    his.wait_for_lines("Mallory's copy", |l| l.len() >= 2);
    let summary = ingest(&site, &[&hers.log(), &his.log()]);
    assert!(summary.contains("1 new"), "{summary}");
    let out = hers.dir.path().join("site");
    site_report(&site, &out);
    let mallorys = job_pages_of(&out, &mallory);
    assert_eq!(mallorys.len(), 1, "Mallory's job has a page of its own");
    assert!(!mallorys[0].contains("trace-analysis"), "{}", mallorys[0]);
    let alices = job_pages_of(&out, &alice);
    assert_eq!(alices.len(), 1, "Alice's job has a page of its own");
    assert!(alices[0].contains("id=\"trace-analysis\""), "{}", alices[0]);

    // Mallory sends an analysis naming her job's key (the profiler's `job-key`).
    let analysis = AnalysisRecord {
        version: mpistat_record::analysis::ANALYSIS_MODEL_VERSION,
        job_key: record.wire_key(),
        uid: mallory.uid,
        user: mallory.name.clone(),
        host: hostname(),
        dir: record.trace.as_ref().unwrap().dir.clone(),
        summary: None,
        error: Some("MALLORY-WAS-HERE".into()),
        analysed_unix_ms: now_ms(),
    };
    for message in mpistat_record::encode_analysis(&analysis) {
        send_as(&mallory, &his.socket(), &message);
    }
    his.wait_for_lines("Mallory's analysis", |lines| {
        lines.iter().any(|l| l.contains("MPISTATA1"))
    });
    ingest(&site, &[&hers.log(), &his.log()]);
    site_report(&site, &out);
    let alices = job_pages_of(&out, &alice);
    assert_eq!(alices.len(), 1);
    assert!(!alices[0].contains("MALLORY-WAS-HERE"), "{}", alices[0]);
    assert!(alices[0].contains("id=\"trace-analysis\""), "{}", alices[0]);
    // His lands on his own copy (his uid, the key his directory named): it is his to see.
    let mallorys = job_pages_of(&out, &mallory);
    assert!(mallorys[0].contains("MALLORY-WAS-HERE"), "{}", mallorys[0]);
    let db = hers.dir.path().join("mpistat.db");
    let (_, analysed, _) = stored(&db);
    assert_eq!(analysed, [alice.name.clone(), mallory.name.clone()]);
}

/// What `mpistat ingest --report` says of the database of `site`.
fn report(site: &Path) -> String {
    let out = mpistat(&["ingest", "--report"], site);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn on_a_single_host_a_record_names_the_host_its_line_came_from() {
    let _serial = serial();
    let Some((_, mallory)) = users() else {
        return;
    };
    let mut single = SingleHost::start("idn-host");
    let site = site_file(single.dir.path(), &single.socket(), "");
    let host = hostname();
    let own = crafted(&mallory.name, mallory.uid, "idn-own-host", &host);
    let other = crafted(&mallory.name, mallory.uid, "idn-node017", "node017");
    send_record(&mallory, &single.socket(), &own);
    send_record(&mallory, &single.socket(), &other);
    // A datagram of his own making, whose header names node017 (rsyslog must not believe it).
    let spoofed = crafted(&mallory.name, mallory.uid, "idn-spoofed-header", "node017");
    let script = "import socket, sys\n\
                  s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
                  for m in sys.argv[2:]:\n    \
                  s.sendto(('<174>Nov 24 10:00:00 node017 mpistat: ' + m).encode(), sys.argv[1])\n";
    let status = mallory
        .command("/usr/bin/python3")
        .args(["-c", script])
        .arg(single.socket())
        .args(mpistat_record::encode(&spoofed))
        .status()
        .unwrap();
    assert!(status.success());
    single.wait_for_lines("the three records", |lines| {
        mpistat_record::decode(lines.iter().map(String::as_str))
            .records
            .len()
            == 3
    });
    let lines = single.lines();
    assert!(
        lines
            .iter()
            .all(|l| l.split(' ').nth(1) == Some(host.as_str())),
        "rsyslog wrote another host than its own: {lines:#?}"
    );
    let summary = ingest(&site, &[&single.log()]);
    assert!(
        summary.contains("1 records (1 new), 2 rejected"),
        "{summary}"
    );
    let text = report(&site);
    for job in [&other, &spoofed] {
        let line = format!(
            "forged      {}/host node017  {}: job {}: claims host node017 but its line came from {host}\n",
            job.wire_key(),
            single.log().display(),
            job.job_id
        );
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    }
}

#[test]
fn through_the_relay_a_record_names_the_node_its_line_came_from() {
    let _serial = serial();
    let Some((_, mallory)) = users() else {
        return;
    };
    let chain = Chain::start();
    let host = hostname();
    let own = crafted(&mallory.name, mallory.uid, "idn-relayed-own", &host);
    let other = crafted(&mallory.name, mallory.uid, "idn-relayed-node017", "node017");
    send_record(&mallory, &chain.socket(), &own);
    send_record(&mallory, &chain.socket(), &other);
    chain.wait_for("of node017", |r| r.job_id == other.job_id);
    chain.wait_for("of his own node", |r| r.job_id == own.job_id);
    let dir = Scratch::new("idn-relay-ingest");
    let site = dir.path().join("site.toml");
    std::fs::write(
        &site,
        format!(
            "[database]\npath = {:?}\n[ingest]\ntrusted_relays = [\"127.0.0.1\"]\n",
            dir.path().join("mpistat.db").display().to_string()
        ),
    )
    .unwrap();
    let summary = ingest(&site, &[&chain.log()]);
    assert!(
        summary.contains("1 records (1 new), 1 rejected"),
        "{summary}"
    );
    let text = report(&site);
    let line = format!(
        "forged      {}/host node017  {}: job {}: claims host node017 but its line came from {host} (relayed by 127.0.0.1)\n",
        other.wire_key(),
        chain.log().display(),
        other.job_id
    );
    assert!(text.contains(&line), "{line:?} not in\n{text}");
}

#[test]
fn slurm_facts_a_job_sets_itself_are_shown_as_claimed() {
    let _serial = serial();
    let Some((_, mallory)) = users() else {
        return;
    };
    let mut single = SingleHost::start("idn-slurm");
    let site = site_file(single.dir.path(), &single.socket(), "");
    // A plain mpirun job, outside any Slurm allocation, that sets Slurm's variables itself.
    let job = Job::new(program("basic.c"), 2)
        .as_user(&mallory)
        .env("MPISTAT_TRACE", "1")
        .env("SLURM_JOB_ID", "4711")
        .env("SLURM_STEP_ID", "0")
        .env("SLURM_JOB_ACCOUNT", "physics-admin")
        .env("SLURM_JOB_PARTITION", "compute")
        .env("SLURM_JOB_NUM_NODES", "100")
        .env("SLURM_JOB_CPUS_PER_NODE", "128(x100)")
        .env("MPISTAT_SLURM_JOB", "4711|UNLIMITED|1000|795001000|high");
    job.profiled(&site).assert_success();
    single.wait_for_lines("the record", |lines| {
        !mpistat_record::decode(lines.iter().map(String::as_str))
            .records
            .is_empty()
    });
    let record = mpistat_record::decode(single.lines().iter().map(String::as_str))
        .records
        .pop()
        .unwrap();
    let slurm = record
        .slurm
        .clone()
        .expect("Slurm facts as the job claims them");
    assert_eq!(slurm.cpus_allocated(), Some(12_800));
    assert_eq!(slurm.queue_wait_s(), Some(795_000_000));
    let claimed = "claimed by the job's environment, not verified";
    // `mpistat show` of the log.
    let show = Command::new(mpistat_binary())
        .arg("show")
        .arg(single.log())
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("Slurm job   4711.0"), "{show}");
    assert!(show.contains(claimed), "{show}");
    // The job page and the mail.
    assert!(ingest(&site, &[&single.log()]).contains("1 new"));
    let out = single.dir.path().join("site");
    site_report(&site, &out);
    let pages = job_pages_of(&out, &mallory);
    assert_eq!(pages.len(), 1);
    let escaped = claimed.replace('\'', "&#39;");
    assert!(pages[0].contains(&escaped), "{}", pages[0]);
    let week = this_week();
    let out = mpistat(&["digest", "--week", &week, "--user", &mallory.name], &site);
    let mail = String::from_utf8_lossy(&out.stdout);
    assert!(mail.contains("4711.0"), "{mail}");
    assert!(mail.contains("claimed"), "{mail}");
}

#[test]
fn the_task_prolog_does_not_keep_a_slurm_job_line_the_user_set() {
    let dir = Scratch::new("idn-prolog");
    // The shipped TaskProlog, its `lib=` line pointing at the library under test.
    let path = dir.path().join("taskprolog.sh");
    std::fs::write(&path, mpistat_e2e::slurm::task_prolog()).unwrap();
    // Task 0 of a step whose user exported a line about the job herself; no slurmctld answers.
    let out = Command::new("sh")
        .arg(&path)
        .env("SLURM_PROCID", "0")
        .env("SLURM_JOB_ID", "4711")
        .env("MPISTAT_SLURM_JOB", "4711|UNLIMITED|1000|795001000|high")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("unset MPISTAT_SLURM_JOB\n"), "{said}");
    assert!(!said.contains("795001000"), "{said}");
}

#[test]
fn names_with_space_control_characters_or_another_case_are_rejected_and_never_mailed() {
    let _serial = serial();
    let Some((alice, _)) = users() else {
        return;
    };
    let mut single = SingleHost::start("idn-names");
    let port = free_port();
    let site = site_file(
        single.dir.path(),
        &single.socket(),
        &format!(
            "[mail]\ntransport = \"smtp\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {port}\n\
             smtp_starttls = \"off\"\nrecipient = \"{{user}}@example.org\"\n"
        ),
    );
    // Uids this host does not know, and names it does not know either (but for their case).
    let host = hostname();
    let alices_upper = alice.name.to_uppercase();
    let names = [
        (4_000_101, " root"),
        (4_000_102, "ROOT"),
        (4_000_103, "root\u{7}"),
        (4_000_104, alices_upper.as_str()),
        (4_000_105, "idnghost"),
    ];
    for (uid, name) in names {
        let record = crafted(name, uid, &format!("idn-name-{uid}"), &host);
        for message in mpistat_record::encode(&record) {
            logger(
                &["-u", single.socket().to_str().unwrap()],
                Some(uid),
                &message,
            );
        }
    }
    single.wait_for_lines("the five records", |lines| {
        mpistat_record::decode(lines.iter().map(String::as_str))
            .records
            .len()
            == 5
    });
    let summary = ingest(&site, &[&single.log()]);
    assert!(
        summary.contains("1 records (1 new), 4 rejected"),
        "{summary}"
    );
    let text = report(&site);
    for (detail, uid) in [
        (
            "claims user \" root\": a name with surrounding space",
            4_000_101,
        ),
        (
            "claims user \"ROOT\": a case variant of user root (uid 0)",
            4_000_102,
        ),
        (
            "claims user \"root\\u{7}\": a name with a control character",
            4_000_103,
        ),
        (
            &format!(
                "claims user {alices_upper:?}: a case variant of user {} (uid {})",
                alice.name, alice.uid
            ),
            4_000_104,
        ),
    ] {
        let line = format!("job idn-name-{uid}: {detail}");
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    }
    let server = SmtpSink::start(port, &single.dir.path().join("inbox"));
    let week = this_week();
    let out = mpistat(&["digest", "--week", &week, "--send"], &site);
    assert!(out.status.success(), "{out:?}");
    let mails = server.mails(1);
    assert_eq!(mails.len(), 1, "{mails:#?}");
    assert!(
        mails[0].contains("To: idnghost@example.org"),
        "{}",
        mails[0]
    );
}
