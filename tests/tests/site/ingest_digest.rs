//! Issue 4 end to end with real parts: real `mpirun` jobs under the profiler, a private rsyslogd
//! with trusted properties, a record forged by user `nobody` (claiming uid 0) through the same
//! socket, one of nobody's own uid claiming user name `root` (the mail goes by name), and one
//! claiming uid 0 wrapped in an index of nobody's own (wire version 2), `mpistat ingest` of what
//! rsyslog wrote (names checked against this host's accounts, where uid 65534 is `nobody`),
//! then `mpistat digest --send` to a real SMTP server (Debian's aiosmtpd): both forgeries are
//! rejected and counted, the wrapped one is rejected as corrupt (ingest reads each record and
//! finds it is not the one its index says), the user gets exactly one multipart/alternative mail whose
//! numbers are those of the records (routine calls, imbalance, load balance, counters). On
//! either backend of the store (a SQLite file, a PostgreSQL server of the test's own).

use mpistat_testkit::forge;

use mpistat_e2e::backend::SiteDatabase;
use mpistat_e2e::*;
use mpistat_record::model::CounterEvent;
use mpistat_record::units::{count, rate};
use mpistat_record::wire::Problem;
use mpistat_record::{JobIndex, JobRecord};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// Send `message` to the daemon as user `nobody` (uid 65534), tagged like the profiler's lines.
fn send_as_nobody(syslogd: &Syslogd, message: &str) {
    let socket = syslogd.socket();
    logger(&["-u", socket.to_str().unwrap()], Some(65534), message);
}

for_each_backend! {
fn jobs_are_ingested_a_forgery_is_rejected_and_one_mail_arrives_over_smtp(backend) {
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
        .env("MPISTAT_COUNTERS", "task-clock,instructions")
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
    // Sends a record of its own uid under root's name, which would land in root's mail.
    let mut named_root = records[0].clone();
    named_root.job_id = "named-root-by-nobody".into();
    named_root.uid = 65534;
    assert_eq!(named_root.user, "root");
    for message in mpistat_record::encode(&named_root) {
        send_as_nobody(&syslogd, &message);
    }
    syslogd.wait_for_record("named root by nobody", |r| {
        r.job_id == "named-root-by-nobody"
    });
    // And wraps a record of root's in the index of a job of its own: all checksums right.
    let mut wrapped = records[0].clone();
    wrapped.job_id = "wrapped-by-nobody".into();
    let own = JobRecord {
        uid: 65534,
        user: "nobody".into(),
        ..wrapped.clone()
    };
    for message in forge::encode_v2_with_index(&wrapped, &JobIndex::of(&own)) {
        send_as_nobody(&syslogd, &message);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let is_wrapped = |p: &Problem| {
        matches!(p, Problem::IndexMismatch { key, differences }
            if *key == wrapped.wire_key() && differences[0] == "uid: 65534 vs 0")
    };
    while !syslogd.decoded().problems.iter().any(is_wrapped) {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            syslogd.decoded()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));

    // What rsyslog wrote with the attested uids is the input of ingest.
    let dir = Scratch::new("ingest-digest");
    let database = SiteDatabase::new(backend, dir.path(), "id-postgres").unwrap();
    let log = dir.path().join("records.log");
    write_trusted_log(&syslogd, &log);
    let trusted = std::fs::read_to_string(&log).unwrap();
    assert!(trusted.contains("uid=65534 "), "{trusted}");
    let port = free_port();
    let config = dir.path().join("site.toml");
    std::fs::write(
        &config,
        format!(
            "{}[mail]\ntransport = \"smtp\"\nsmtp_host = \"127.0.0.1\"\n\
             smtp_port = {port}\nsmtp_starttls = \"off\"\nrecipient = \"{{user}}@example.org\"\n",
            database.section(&database.writer())
        ),
    )
    .unwrap();

    let log_arg = log.to_str().unwrap();
    assert!(mpistat(&["ingest", log_arg], &config).status.success());
    let report = mpistat(&["ingest", "--report"], &config);
    let report = String::from_utf8_lossy(&report.stdout).into_owned();
    // The wrapped record came from nobody, whose index it carries; ingest reads each record
    // (for the rollups), finds it is not the one its index says and rejects it as corrupt.
    assert!(report.contains("jobs stored: 2"), "{report}");
    assert!(
        report.contains("rejected: corrupt 1, forged 2\n"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "corrupt     {}  {}: job wrapped-by-nobody filed for uid 65534 (nobody): job {}: the \
             index disagrees with the record (index vs record: uid: 65534 vs 0; ",
            wrapped.wire_key(),
            log.display(),
            wrapped.wire_key()
        )),
        "{report}"
    );
    assert!(
        report.contains("claims uid 0 (root) but uid 65534 sent it"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "forged      {}/user root  {}: job named-root-by-nobody: claims user root but uid \
             65534 is nobody\n",
            named_root.wire_key(),
            log.display()
        )),
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
    // Not root's (the mail counts root's two jobs only, below: not the one nobody named root's)
    // and not nobody's: rejected.
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
    assert_imbalance_and_counters_are_the_records(mail, &records);
}
}

/// The level-1 value of `name` in the text part.
fn level_1<'m>(mail: &'m str, name: &str) -> &'m str {
    let line = mail
        .lines()
        .find(|l| l.len() > 2 && l[2..].starts_with(&format!("{name:<16}")))
        .unwrap_or_else(|| panic!("no level-1 line {name:?} in {mail}"));
    line[18..36].trim()
}

/// Imbalance (CPU-time weighted critical path, percent of wall), load balance (POP, weighted)
/// and the counters of the mail, computed here from the records themselves.
fn assert_imbalance_and_counters_are_the_records(mail: &str, records: &[JobRecord]) {
    let weight = |r: &JobRecord| r.wall_ns.sum as f64;
    let total: f64 = records.iter().map(weight).sum();
    let figures: Vec<_> = records
        .iter()
        .map(|r| {
            let i = r
                .imbalance
                .as_ref()
                .expect("basic.c has global collectives");
            assert_eq!(i.unavailable, None);
            let percent = 100.0 * i.critical_path_ns as f64 / r.wall_ns.max as f64;
            (r, percent, i.load_balance(r.ranks))
        })
        .collect();
    let imbalance: f64 = figures.iter().map(|(r, p, _)| p * weight(r)).sum::<f64>() / total;
    let balance: f64 = figures.iter().map(|(r, _, b)| b * weight(r)).sum::<f64>() / total;
    assert_eq!(
        level_1(mail, "imbalance"),
        format!("{imbalance:.1} %"),
        "{mail}"
    );
    assert_eq!(
        level_1(mail, "load balance"),
        format!("{balance:.2}"),
        "{mail}"
    );
    for (r, percent, balance) in &figures {
        let row = mail
            .lines()
            .find(|l| l.starts_with(&format!("{:<12}{:>6}", r.job_id, r.ranks)))
            .unwrap_or_else(|| panic!("job {} not among the biggest jobs: {mail}", r.job_id));
        assert!(
            row.contains(&format!("{balance:>6.2}{percent:>7.1}  ")),
            "{row:?}: load balance {balance:.2}, imbalance {percent:.1}"
        );
    }

    // One job counted task-clock (software, always there) and instructions (a hardware event:
    // unavailable on machines without a PMU, like most CI runners); the other the site's default
    // events (hardware ones only).
    fn events(r: &JobRecord) -> &[CounterEvent] {
        r.counters.as_ref().map_or(&[], |c| &c.events)
    }
    let counted = records
        .iter()
        .find(|r| events(r).iter().any(|e| e.name == "task-clock"))
        .expect("the job with MPISTAT_COUNTERS");
    let events = events(counted);
    let app_s = (counted.wall_ns.sum - counted.mpi_ns.sum) as f64 * 1e-9;
    let task = events.iter().find(|e| e.name == "task-clock").unwrap();
    // Counters read only at MPI_Init and MPI_Finalize cannot be split: no made-up MPI zero.
    let totals_mode = counted
        .counters
        .as_ref()
        .is_some_and(|c| c.mode.starts_with("totals"));
    let row = if totals_mode {
        format!(
            "{:<18}{:>12}  in all, not split (totals mode)",
            "task-clock",
            count(task.app)
        )
    } else {
        format!(
            "{:<18}{:>12}{:>10}{:>12}",
            "task-clock",
            count(task.app),
            rate(task.app as f64 / app_s),
            count(task.mpi)
        )
    };
    assert!(mail.contains(&row), "{row:?} not in {mail}");
    let instructions = events.iter().find(|e| e.name == "instructions").unwrap();
    let expected = match &instructions.unavailable {
        Some(_) => "unavailable".to_string(),
        None => rate(instructions.app as f64 / app_s),
    };
    assert_eq!(level_1(mail, "instruction rate"), expected, "{mail}");
}

fn routine_calls(record: &mpistat_record::JobRecord, name: &str) -> u64 {
    record.routine(name).map_or(0, |r| r.calls.sum)
}
