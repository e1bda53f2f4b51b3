//! What a record may carry, and what one that is still waiting for parts may cost (issue 34
//! §2 and §3), at `mpistat ingest` and at every later reader:
//!
//! * records beyond the limits (a 20,000,000-bucket histogram, a 60 MB or 100 kB environment
//!   value, a 5 kB executable in wire version 1), sent by their own attested user, are not
//!   stored but rejected as `oversized`, saying which field and how large;
//! * a record stored beyond them (by a release before the limits) is never shown: its reader
//!   quarantines it;
//! * an incomplete record does not keep the read position of a live log for ever: its grace is
//!   judged by the time rsyslog wrote on its first line against the later lines' times (not by
//!   the file's modification time, which every new line renews), and a record whose first line
//!   lies more than `REREAD_MAX` bytes back is given up whatever its grace, so a run rereads at
//!   most that.

mod common;
#[path = "../../record/tests/common/mod.rs"]
mod forge;

use common::{syslog_lines, week_of_jobs, USERS};
use mpistat_digest::db::Database;
use mpistat_digest::ingest::accounts::Table;
use mpistat_digest::ingest::{run_once, Options, RunStats};
use mpistat_record::{JobIndex, JobRecord};
use mpistat_site::SiteConfig;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn temp_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpistat-bounds-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn options(log: &Path) -> Options {
    Options {
        // Names are checked against the invented users, not the machine's.
        accounts: Some(Arc::new(Table::new(USERS))),
        ..Options::from_site(vec![log.to_path_buf()], &SiteConfig::default())
    }
}

fn ingest(db: &mut Database, options: &Options) -> RunStats {
    let mut err = Vec::new();
    let stats = run_once(db, options, &mut err).unwrap();
    eprintln!("{stats:?} {}", String::from_utf8_lossy(&err));
    stats
}

/// `messages` as rsyslog writes them at `time` (RFC 3339), sent by `uid`.
fn lines_at(time: &str, uid: u32, messages: &[String]) -> String {
    messages
        .iter()
        .map(|m| format!("{time} node1 uid={uid} pid=4242 mpistat: {m}\n"))
        .collect()
}

/// Lines of `record` as a forger writes them: not cut to the limits, every checksum right.
fn forged(record: &JobRecord) -> Vec<String> {
    forge::encode_v2_with_index(record, &JobIndex::of(record))
}

fn rejected(db: &Database) -> Vec<(String, String, String, String)> {
    db.rejected().unwrap()
}

#[test]
fn records_beyond_the_limits_are_rejected_as_oversized_saying_why() {
    let dir = temp_dir("oversized");
    let log = dir.join("records.log");
    let base = week_of_jobs(5);
    let mut histogram = base[0].clone();
    histogram.routines[0].hist = vec![0; 20_000_000];
    histogram.routines[0].hist.push(1);
    let mut small_histogram = base[1].clone();
    small_histogram.routines[0].hist = vec![1; 1000];
    let mut environment = base[2].clone();
    environment
        .env
        .insert("OMPI_MCA_btl".into(), "A".repeat(100_000));
    let mut executable = base[3].clone();
    executable.exe = "/".repeat(5_000);
    let time = "2026-11-18T10:00:00.000000+00:00";
    let mut text = String::new();
    for record in [&histogram, &small_histogram, &environment] {
        text.push_str(&lines_at(time, record.uid, &forged(record)));
    }
    text.push_str(&lines_at(
        time,
        executable.uid,
        &forge::encode_v1(&executable),
    ));
    // And a record as the profiler sends it, stored.
    text.push_str(&syslog_lines(&base[4], Some(base[4].uid)).concat());
    std::fs::write(&log, text).unwrap();
    eprintln!("log of {} bytes", std::fs::metadata(&log).unwrap().len());

    let mut db = Database::open(&dir.join("db.sqlite")).unwrap();
    let started = std::time::Instant::now();
    let stats = ingest(&mut db, &options(&log));
    eprintln!("ingest took {:?}", started.elapsed());
    assert_eq!(
        (stats.records, stats.new_jobs),
        (1, 1),
        "only the real record is stored"
    );
    let rejected = rejected(&db);
    let detail = |record: &JobRecord| {
        let key = record.key();
        let found = rejected.iter().find(|r| r.1 == key);
        let (kind, _, _, detail) = found.unwrap_or_else(|| panic!("{key}: {rejected:#?}"));
        assert_eq!(kind, "oversized");
        detail.clone()
    };
    let record_json = mpistat_record::limits::RECORD_JSON_MAX;
    assert!(detail(&histogram).ends_with(&format!(
        "oversized: record JSON of more than {record_json} bytes"
    )));
    let small = detail(&small_histogram);
    assert!(small.ends_with("histogram of 1000 buckets > 48"), "{small}");
    assert!(
        detail(&environment).ends_with("environment value \"OMPI_MCA_btl\" of 100000 bytes > 1024")
    );
    assert!(detail(&executable).ends_with("oversized: exe of 5000 bytes > 4096"));
    assert_eq!(rejected.len(), 4, "{rejected:#?}");
}

/// A row whose stored record is beyond the limits (stored by a release before them, or
/// written into the database): readers never show it, they quarantine it.
#[test]
fn a_stored_record_beyond_the_limits_is_quarantined_by_its_reader() {
    let dir = temp_dir("stored");
    let log = dir.join("records.log");
    let job = week_of_jobs(1).remove(0);
    std::fs::write(&log, syslog_lines(&job, Some(job.uid)).concat()).unwrap();
    let mut db = Database::open(&dir.join("db.sqlite")).unwrap();
    ingest(&mut db, &options(&log));
    let mut huge = job.clone();
    huge.routines[0].hist = vec![3; 20_000_000];
    let json = serde_json::to_vec(&huge).unwrap();
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 6);
    eprintln!(
        "a record of {} bytes JSON stored as {} bytes",
        json.len(),
        deflated.len()
    );
    db.conn
        .execute("UPDATE jobs SET record = ?1", [&deflated])
        .unwrap();
    assert!(db.job(&job.key()).unwrap().is_none(), "not shown");
    let quarantined = db.take_quarantined();
    assert_eq!(quarantined.len(), 1);
    assert!(
        quarantined[0]
            .to_string()
            .contains("oversized: record JSON of more than"),
        "{}",
        quarantined[0]
    );
    assert_eq!(db.job_count().unwrap(), 0);
    assert_eq!(rejected(&db)[0].0, "corrupt");
}

/// An incomplete record in a live log: the log goes on (new lines, the file's modification
/// time fresh) for longer than the grace period after its first line. It is reported
/// incomplete, and the next run reads only what is new.
#[test]
fn an_incomplete_record_does_not_keep_a_live_log_from_moving_on() {
    let dir = temp_dir("live");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(400);
    let mut cut = syslog_lines(&jobs[0], Some(jobs[0].uid));
    cut.pop();
    let mut file = std::fs::File::create(&log).unwrap();
    file.write_all(cut.concat().as_bytes()).unwrap();
    // Then the log goes on: later lines, written more than the grace (300 s) after it.
    let later = "2026-11-18T10:06:00.000000+00:00";
    let mut after = String::new();
    for job in &jobs[1..] {
        for line in syslog_lines(job, Some(job.uid)) {
            after.push_str(&line.replacen("2026-11-18T10:00:00.000000+00:00", later, 1));
        }
    }
    file.write_all(after.as_bytes()).unwrap();
    drop(file);
    let mut db = Database::open(&dir.join("db.sqlite")).unwrap();
    let opts = options(&log);
    let first = ingest(&mut db, &opts);
    assert_eq!(first.new_jobs, 399);
    let kinds: Vec<String> = rejected(&db).into_iter().map(|r| r.0).collect();
    assert_eq!(
        kinds,
        ["incomplete"],
        "its grace is over by the log's own clock"
    );
    // One more line (the file changed just now), and the next run reads only it.
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(format!("{later} node1 uid=0 pid=1 kernel: hello\n").as_bytes())
        .unwrap();
    drop(file);
    let second = ingest(&mut db, &opts);
    eprintln!(
        "the second run read {} lines (the first read {})",
        second.lines, first.lines
    );
    assert_eq!(second.lines, 1, "nothing read again");

    // Within the grace by the log's clock (its later lines written a minute after it), the
    // record waits, and the position stays at its first line.
    let log = dir.join("waiting.log");
    let soon = after.replace(later, "2026-11-18T10:01:00.000000+00:00");
    std::fs::write(&log, format!("{}{soon}", cut.concat())).unwrap();
    let mut db = Database::open(&dir.join("waiting.sqlite")).unwrap();
    let opts = options(&log);
    ingest(&mut db, &opts);
    assert_eq!(rejected(&db), vec![], "still within its grace");
    let last = syslog_lines(&jobs[0], Some(jobs[0].uid)).pop().unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(last.as_bytes()).unwrap();
    drop(file);
    let third = ingest(&mut db, &opts);
    assert_eq!(third.new_jobs, 1, "its last part came: stored whole");
    assert_eq!(rejected(&db), vec![]);
}

/// Lines without a time rsyslog wrote (another template): an incomplete record's grace is the
/// live file's, but a run never reads again more than `REREAD_MAX` bytes because of it.
#[test]
fn a_run_reads_again_at_most_the_reread_limit() {
    let dir = temp_dir("reread");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(2);
    let mut cut = syslog_lines(&jobs[0], Some(jobs[0].uid));
    cut.pop();
    let untimed = |line: &str| line.replacen("2026-11-18T10:00:00.000000+00:00 node1 ", "", 1);
    let mut text: String = cut.iter().map(|l| untimed(l)).collect();
    let filler = "uid=0 pid=1 gid=0 kernel: a line of some other program, not ours at all\n";
    let reread_max = mpistat_digest::ingest::REREAD_MAX as usize;
    text.push_str(&filler.repeat(reread_max / filler.len() + 1));
    std::fs::write(&log, &text).unwrap();
    let mut db = Database::open(&dir.join("db.sqlite")).unwrap();
    let opts = Options {
        grace: Duration::from_secs(3600),
        ..options(&log)
    };
    let first = ingest(&mut db, &opts);
    let kinds: Vec<String> = rejected(&db).into_iter().map(|r| r.0).collect();
    assert_eq!(
        kinds,
        ["incomplete"],
        "given up: too far back to read again"
    );
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(filler.as_bytes()).unwrap();
    drop(file);
    let second = ingest(&mut db, &opts);
    eprintln!(
        "{} bytes after an incomplete record: the second run read {} lines (the first {})",
        text.len(),
        second.lines,
        first.lines
    );
    assert_eq!(second.lines, 1);

    // Less than the limit after it: it waits (the file is live and changed within the grace).
    let log = dir.join("short.log");
    let short: String = cut.iter().map(|l| untimed(l)).collect::<String>() + &filler.repeat(1000);
    std::fs::write(&log, &short).unwrap();
    let mut db = Database::open(&dir.join("short.sqlite")).unwrap();
    let opts = Options {
        grace: Duration::from_secs(3600),
        ..options(&log)
    };
    ingest(&mut db, &opts);
    assert_eq!(rejected(&db), vec![]);
    let again = ingest(&mut db, &opts);
    assert_eq!(
        again.lines,
        cut.len() as u64 + 1000,
        "read again from the record on"
    );
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(untimed(&syslog_lines(&jobs[0], Some(jobs[0].uid)).pop().unwrap()).as_bytes())
        .unwrap();
    drop(file);
    let last = ingest(&mut db, &opts);
    assert_eq!((last.new_jobs, last.lines), (1, cut.len() as u64 + 1001));
}

/// `job` made to meet the site's escalation rule (30 % MPI, 20 % critical-path imbalance, one
/// CPU hour: 64 ranks for an hour, 40 % in MPI, 25 % imbalance), running `app`.
fn meeting_the_rule(job: &JobRecord, app: &str) -> JobRecord {
    let wall = 3_600_000_000_000u64;
    let work = wall * 60 / 100;
    JobRecord {
        ranks: 64,
        exe: app.into(),
        app: app.into(),
        partial: None,
        wall_ns: mpistat_record::Stat {
            sum: wall * 64,
            min: wall,
            max: wall,
            max_rank: 0,
        },
        mpi_ns: mpistat_record::Stat {
            sum: wall * 64 * 40 / 100,
            ..Default::default()
        },
        imbalance: Some(mpistat_record::model::Imbalance {
            work_sum_ns: work * 64,
            critical_path_ns: work * 25 / 100,
            ..Default::default()
        }),
        ..job.clone()
    }
}

/// The escalation list every rank of every job reads stays small: no entry's application is
/// longer than a record's (an old database may hold such a job, or an old list such an
/// entry), a user whose records all meet the rule gets at most 8 entries, and each left out is
/// said.
#[test]
fn the_escalation_list_holds_no_over_long_application_and_few_entries_a_user() {
    use mpistat_digest::escalate::{after_ingest, ENTRIES_PER_UID_MAX};
    let dir = temp_dir("escalation");
    let log = dir.join("records.log");
    let alice = week_of_jobs(1).remove(0);
    let mut text = String::new();
    let mut jobs = Vec::new();
    for n in 0..12 {
        let mut job = meeting_the_rule(&alice, &format!("/home/alice/solver{n}"));
        job.pid += n;
        text.push_str(&syslog_lines(&job, Some(job.uid)).concat());
        jobs.push(job);
    }
    std::fs::write(&log, text).unwrap();
    let mut db = Database::open(&dir.join("db.sqlite")).unwrap();
    assert_eq!(ingest(&mut db, &options(&log)).new_jobs, 12);
    // A job stored before the limits, whose application is 5 MB long (its row changed so).
    let long_app = "/".repeat(5_000_000);
    db.conn
        .execute(
            "UPDATE escalation_queue SET app = ?1 WHERE id = (SELECT min(id) FROM jobs)",
            [&long_app],
        )
        .unwrap();
    db.conn
        .execute(
            "UPDATE jobs SET app = ?1, exe = ?1 WHERE id = (SELECT min(id) FROM jobs)",
            [&long_app],
        )
        .unwrap();
    // An old list with an over-long entry of bob's.
    let list = dir.join("escalation.list");
    std::fs::write(
        &list,
        format!(
            "1002\t{}\t1\t99999999999\trule\n1002\t/home/bob/ok\t1\t99999999999\trule\n",
            "/".repeat(5_000_000)
        ),
    )
    .unwrap();
    let mut config = SiteConfig::default();
    config.escalation.list = list.clone();
    let mut err = Vec::new();
    after_ingest(&config, &db, &mut err).unwrap();
    let err = String::from_utf8(err).unwrap();
    eprintln!("{err}");
    let written = std::fs::read_to_string(&list).unwrap();
    eprintln!("the list: {} bytes", written.len());
    let (entries, problems) = mpistat_site::escalation::parse(&written);
    assert_eq!(problems, Vec::<String>::new());
    let alices: Vec<&str> = entries
        .iter()
        .filter(|e| e.uid == alice.uid)
        .map(|e| e.exe.as_str())
        .collect();
    assert_eq!(alices.len(), ENTRIES_PER_UID_MAX, "{alices:?}");
    assert!(alices.iter().all(|app| app.len() < 100));
    assert!(entries.iter().any(|e| e.exe == "/home/bob/ok"));
    assert!(written.len() < 4096, "{} bytes", written.len());
    assert!(err.contains("entry of uid 1002 \"////"), "{err}");
    assert!(err.contains("its application is 5000000 bytes long (at most 4096); dropped"));
    assert!(err.contains("is not listed: its application is 5000000 bytes long"));
    assert!(err.contains(&format!(
        "is not listed: uid 1001 has {ENTRIES_PER_UID_MAX} entries already"
    )));
}
