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

use mpistat_testkit::forge;
use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;

use common::{syslog_lines, week_of_jobs};
use mpistat_ingest::{run_once, Options, RunStats};
use mpistat_record::{JobIndex, JobRecord};
use mpistat_site::SiteConfig;
use mpistat_store::WriteStore;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

fn temp_dir(label: &str) -> Scratch {
    Scratch::new(&format!("bounds-{label}"))
}

fn options(log: &Path) -> Options {
    common::ingest_options(log)
}

fn ingest(db: &mut WriteStore, options: &Options) -> RunStats {
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

fn rejected(db: &WriteStore) -> Vec<(String, String, String, String)> {
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

    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
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
        let key = record.wire_key();
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
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
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
    let hex: String = deflated.iter().map(|b| format!("{b:02x}")).collect();
    db.execute_batch(&format!("UPDATE jobs SET record = x'{hex}'"))
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
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
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
    let mut db = WriteStore::open(&dir.join("waiting.sqlite")).unwrap();
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
    let reread_max = mpistat_ingest::REREAD_MAX as usize;
    text.push_str(&filler.repeat(reread_max / filler.len() + 1));
    std::fs::write(&log, &text).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
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
    let mut db = WriteStore::open(&dir.join("short.sqlite")).unwrap();
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
    use mpistat_ingest::escalate::{after_ingest, ENTRIES_PER_UID_MAX};
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
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    assert_eq!(ingest(&mut db, &options(&log)).new_jobs, 12);
    // A job stored before the limits, whose application is 5 MB long (its row changed so).
    let long_app = "replace(hex(zeroblob(2500000)), '0', '/')";
    db.execute_batch(&format!(
        "UPDATE escalation_queue SET app = {long_app} WHERE id = (SELECT min(id) FROM jobs);
         UPDATE jobs SET app = {long_app}, exe = {long_app} WHERE id = (SELECT min(id) FROM jobs)"
    ))
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

/// On a log host each relay's lines are judged by that relay's clock: a record of a node whose
/// queue is flushed late (its lines' times an hour old, among other nodes' current lines)
/// still waits for its last part, which comes in the next lines of that node.
#[test]
fn on_a_log_host_a_record_waits_by_its_own_relays_clock() {
    let dir = temp_dir("relays");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(3);
    // `lines` as the log host writes them, delivered by `relay`, written there at `time`.
    let relayed = |relay: &str, time: &str, lines: &[String]| -> String {
        lines
            .iter()
            .map(|line| {
                let line = line.replacen("2026-11-18T10:00:00.000000+00:00", time, 1);
                format!("relay={relay} {line}")
            })
            .collect()
    };
    let options = |log: &Path| Options {
        trusted_relays: vec!["*.cluster".into()],
        ..options(log)
    };
    let mut lines = syslog_lines(&jobs[0], Some(jobs[0].uid));
    let last = lines.pop().unwrap();
    let before = relayed("node1.cluster", "2026-11-18T09:00:00.000000+00:00", &lines);
    // node2's lines, an hour later by its clock.
    let node2 = syslog_lines(&jobs[1], Some(jobs[1].uid));
    let node2 = relayed("node2.cluster", "2026-11-18T10:00:00.000000+00:00", &node2);
    std::fs::write(&log, format!("{before}{node2}")).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    assert_eq!(ingest(&mut db, &options(&log)).new_jobs, 1);
    assert_eq!(rejected(&db), vec![], "node1's clock has not moved on");
    // node1's queue goes on: the last part, a second later by its clock.
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let late = relayed("node1.cluster", "2026-11-18T09:00:01.000000+00:00", &[last]);
    file.write_all(late.as_bytes()).unwrap();
    drop(file);
    assert_eq!(ingest(&mut db, &options(&log)).new_jobs, 1, "stored whole");
    assert_eq!(rejected(&db), vec![]);

    // Had node1's own lines gone on for the grace period, it would have been given up.
    let log = dir.join("moved-on.log");
    let node1 = syslog_lines(&jobs[2], Some(jobs[2].uid));
    let node1 = relayed("node1.cluster", "2026-11-18T09:05:00.000000+00:00", &node1);
    std::fs::write(&log, format!("{before}{node1}")).unwrap();
    let mut db = WriteStore::open(&dir.join("moved-on.sqlite")).unwrap();
    ingest(&mut db, &options(&log));
    let kinds: Vec<String> = rejected(&db).into_iter().map(|r| r.0).collect();
    assert_eq!(kinds, ["incomplete"]);
}

/// Records that never complete from many senders: each sender holds at most 256, all of them
/// together at most 4,096; beyond, the oldest of the sender holding most is given up, and
/// every record has its row.
#[test]
fn records_waiting_for_parts_are_bounded_over_all_senders() {
    use mpistat_ingest::PENDING_JOBS_TOTAL_MAX;
    use mpistat_record::wire::PENDING_JOBS_MAX;
    let dir = temp_dir("senders");
    let log = dir.join("records.log");
    let senders = 20;
    let per_sender = 250;
    let mut text = String::new();
    for i in 0..per_sender {
        for sender in 0..senders {
            let key = 0x5000_0000u64 + sender * 1000 + i;
            let head = format!("MPISTAT2 {key:016x} 4/5 00000000 ");
            let crc = crc32fast::hash(format!("{head}QUFB").as_bytes());
            text.push_str(&format!(
                "2026-11-18T10:00:00.000000+00:00 node1 uid={} pid=7 mpistat: {head}{crc:08x} QUFB\n",
                3000 + sender
            ));
        }
    }
    std::fs::write(&log, &text).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let opts = Options {
        grace: Duration::ZERO,
        ..options(&log)
    };
    ingest(&mut db, &opts);
    let rejected = rejected(&db);
    assert_eq!(rejected.len(), (senders * per_sender) as usize);
    let evicted = rejected
        .iter()
        .filter(|r| r.3.contains("of all senders were waiting for parts"))
        .count();
    eprintln!(
        "{} records of {senders} senders, at most {PENDING_JOBS_MAX} a sender and \
         {PENDING_JOBS_TOTAL_MAX} in all: {evicted} given up before the end",
        senders * per_sender
    );
    assert_eq!(
        evicted,
        (senders * per_sender) as usize - PENDING_JOBS_TOTAL_MAX
    );
}

/// A commit in the middle of a run gives up only records more than `REREAD_MAX` back: one
/// whose lines a commit falls between (here: one every 3 lines, in a rotated file without
/// rsyslog's times) is stored whole.
#[test]
fn a_record_across_a_commit_is_stored_whole() {
    let dir = temp_dir("commits");
    let log = dir.join("records.log");
    // Records of several parts: 150 routines with histograms of measured-looking figures.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut figure = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % 1_000_000_000
    };
    let jobs: Vec<JobRecord> = week_of_jobs(20)
        .into_iter()
        .map(|mut job| {
            job.routines = (0..150)
                .map(|i| mpistat_record::RoutineStats {
                    name: format!("MPI_Routine_{i}"),
                    class: "p2p".into(),
                    hist: (0..48).map(|_| figure()).collect(),
                    ..Default::default()
                })
                .collect();
            job
        })
        .collect();
    let lines_of_first = syslog_lines(&jobs[0], Some(jobs[0].uid)).len();
    assert!(lines_of_first > 3, "{lines_of_first} lines a record");
    let untimed: String = jobs
        .iter()
        .flat_map(|job| syslog_lines(job, Some(job.uid)))
        .map(|line| line.replacen("2026-11-18T10:00:00.000000+00:00 node1 ", "", 1))
        .collect();
    std::fs::write(dir.join("records.log.1"), untimed).unwrap();
    std::fs::write(&log, "uid=0 pid=1 gid=0 kernel: the new file\n").unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let opts = Options {
        batch_lines: 3,
        ..options(&log)
    };
    assert_eq!(ingest(&mut db, &opts).new_jobs, 20);
    assert_eq!(rejected(&db), vec![]);
}
