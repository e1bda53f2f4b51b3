//! `mpistat ingest` on generated syslog files: idempotence, rotation (renamed and `.gz`), forged
//! and unattested records, incomplete jobs after the grace period, `kill -9` at random points
//! followed by a rerun giving the same database as one uninterrupted run, and `--follow`.

use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;

use common::{append_log, syslog_lines, week_of_jobs, USERS};
use mpistat_ingest::{run_once, Options, RunStats};
use mpistat_site::SiteConfig;
use mpistat_store::test_support::{column, execute_batch};
use mpistat_store::WriteStore;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn temp_dir(label: &str) -> Scratch {
    Scratch::new(&format!("ingest-{label}"))
}

fn options(log: &Path) -> Options {
    common::ingest_options(log)
}

fn ingest(db: &mut WriteStore, options: &Options) -> RunStats {
    let mut err = Vec::new();
    let stats = run_once(db, options, &mut err).unwrap();
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
    stats
}

/// Every table but the positions' stats, as text: equal dumps are equal databases.
fn dump(db: &WriteStore) -> String {
    let mut out = String::new();
    for query in [
        "SELECT key || ' ' || uid || ' ' || user || ' ' || hex(record) FROM jobs ORDER BY key",
        "SELECT kind || ' ' || ref || ' ' || detail FROM rejected ORDER BY kind, ref",
        "SELECT head_len || ' ' || head_crc || ' ' || offset FROM positions ORDER BY head_crc",
    ] {
        for row in db.column(query).unwrap() {
            out.push_str(&row);
            out.push('\n');
        }
    }
    out
}

fn rejected_kinds(db: &WriteStore) -> Vec<String> {
    db.rejected()
        .unwrap()
        .into_iter()
        .map(|(kind, ..)| kind)
        .collect()
}

#[test]
fn twice_adds_nothing() {
    let dir = temp_dir("twice");
    let log = dir.join("records.log");
    append_log(&log, &week_of_jobs(50));
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let first = ingest(&mut db, &options(&log));
    assert_eq!((first.records, first.new_jobs, first.rejected), (50, 50, 0));
    let before = dump(&db);
    let second = ingest(&mut db, &options(&log));
    assert_eq!(second.new_jobs, 0);
    assert_eq!(second.lines, 0, "an unchanged file is not read again");
    assert_eq!(dump(&db), before);
    // A new job appended is read from where the last run stopped.
    append_log(&log, &week_of_jobs(51)[50..]);
    let third = ingest(&mut db, &options(&log));
    let lines = syslog_lines(&week_of_jobs(51)[50], Some(1001)).len() as u64;
    assert_eq!((third.new_jobs, third.lines), (1, lines));
    assert_eq!(db.job_count().unwrap(), 51);
}

#[test]
fn rotation_renamed_then_compressed_neither_loses_nor_repeats() {
    let dir = temp_dir("rotation");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(30);
    append_log(&log, &jobs[..10]);
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    assert_eq!(ingest(&mut db, &options(&log)).new_jobs, 10);

    // More jobs, then logrotate renames the file and rsyslog starts a new one.
    append_log(&log, &jobs[10..15]);
    std::fs::rename(&log, dir.join("records.log.1")).unwrap();
    append_log(&log, &jobs[15..20]);
    let stats = ingest(&mut db, &options(&log));
    assert_eq!(stats.new_jobs, 10, "{stats:?}");
    assert_eq!(
        stats.records, 10,
        "the rotated file resumes where it stopped"
    );

    // Next rotation compresses the old one: its known content is not read as new.
    append_log(&log, &jobs[20..25]);
    let gz = std::fs::File::create(dir.join("records.log.2.gz")).unwrap();
    let mut encoder = flate2::write::GzEncoder::new(gz, flate2::Compression::fast());
    encoder
        .write_all(&std::fs::read(dir.join("records.log.1")).unwrap())
        .unwrap();
    encoder.finish().unwrap();
    std::fs::remove_file(dir.join("records.log.1")).unwrap();
    std::fs::rename(&log, dir.join("records.log.1")).unwrap();
    append_log(&log, &jobs[25..30]);
    let stats = ingest(&mut db, &options(&log));
    assert_eq!((stats.new_jobs, stats.records), (10, 10), "{stats:?}");
    assert_eq!(db.job_count().unwrap(), 30);
    assert!(rejected_kinds(&db).is_empty(), "{:?}", db.rejected());
}

#[test]
fn a_record_split_by_rotation_is_stored_whole() {
    let dir = temp_dir("split");
    let log = dir.join("records.log");
    let job = &week_of_jobs(1)[0];
    let lines = syslog_lines(job, Some(job.uid));
    std::fs::write(&log, lines[0].as_bytes()).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    assert_eq!(ingest(&mut db, &options(&log)).records, 0);
    assert!(
        rejected_kinds(&db).is_empty(),
        "within grace: not yet incomplete"
    );
    std::fs::rename(&log, dir.join("records.log.1")).unwrap();
    std::fs::write(&log, lines[1..].concat()).unwrap();
    assert_eq!(ingest(&mut db, &options(&log)).new_jobs, 1);
    assert!(rejected_kinds(&db).is_empty(), "{:?}", db.rejected());
}

#[test]
fn forged_unattested_corrupt_and_incomplete_are_kept_apart() {
    let dir = temp_dir("rejects");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(4);
    let mut text = String::new();
    // Sent by uid 1002 (bob) but claiming uid 0.
    let mut root = jobs[0].clone();
    root.uid = 0;
    root.user = "root".into();
    text.extend(syslog_lines(&root, Some(1002)));
    // No attestation.
    text.extend(syslog_lines(&jobs[1], None));
    // A damaged line of a third job (its record is then also incomplete).
    let mut damaged = syslog_lines(&jobs[2], Some(jobs[2].uid));
    let cut_at = damaged[1].len() - 2;
    damaged[1].replace_range(cut_at.., "#\n");
    text.extend(damaged);
    // A job missing its last part.
    let mut cut = syslog_lines(&jobs[3], Some(jobs[3].uid));
    cut.pop();
    text.extend(cut);
    std::fs::write(&log, text).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let mut opts = options(&log);
    opts.grace = Duration::ZERO;
    let stats = ingest(&mut db, &opts);
    assert_eq!(stats.new_jobs, 0);
    let rejected = db.rejected().unwrap();
    let kinds = rejected_kinds(&db);
    assert_eq!(
        kinds.iter().filter(|k| *k == "forged").count(),
        2,
        "{rejected:#?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "corrupt").count(),
        1,
        "{rejected:#?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "incomplete").count(),
        2,
        "{rejected:#?}"
    );
    assert!(rejected
        .iter()
        .any(|r| r.3.contains("claims uid 0 (root) but uid 1002 sent it")));
    // The same input again adds nothing.
    let before = dump(&db);
    std::fs::write(dir.join("touch"), "").unwrap();
    let mut again = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    again
        .execute_batch("UPDATE positions SET offset = 0, stat = NULL")
        .unwrap();
    ingest(&mut again, &opts);
    assert_eq!(dump(&again), before);

    // Without required attestation the unattested job is accepted (the forged one never is).
    let mut lenient = WriteStore::open(&dir.join("lenient.sqlite")).unwrap();
    opts.require_attested_uid = false;
    ingest(&mut lenient, &opts);
    assert_eq!(lenient.job_count().unwrap(), 1);
    assert_eq!(
        rejected_kinds(&lenient)
            .iter()
            .filter(|k| *k == "forged")
            .count(),
        1
    );
}

/// bob (uid 1002) sends a record of his own uid that claims alice's name: it would land in
/// alice's weekly mail. Rejected as forged (names checked against the invented users), reported;
/// accepted when the site does not check names.
#[test]
fn a_user_name_not_the_senders_is_forged() {
    let dir = temp_dir("names");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(3);
    let mut impostor = jobs[1].clone();
    impostor.job_id = "impostor".into();
    impostor.user = "alice".into();
    let mut text: String = jobs
        .iter()
        .flat_map(|j| syslog_lines(j, Some(j.uid)))
        .collect();
    text.extend(syslog_lines(&impostor, Some(1002)));
    std::fs::write(&log, text).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let stats = ingest(&mut db, &options(&log));
    assert_eq!((stats.new_jobs, stats.rejected), (3, 1), "{stats:?}");
    let rejected = db.rejected().unwrap();
    assert_eq!(
        rejected,
        [(
            "forged".to_string(),
            format!("{}/user alice", impostor.wire_key()),
            log.display().to_string(),
            "job impostor: claims user alice but uid 1002 is bob".to_string(),
        )]
    );
    let mut report = Vec::new();
    mpistat_ingest::report::print(&db, &mut report).unwrap();
    let report = String::from_utf8(report).unwrap();
    assert!(
        report.contains("jobs stored: 3\nrejected: forged 1\n"),
        "{report}"
    );

    // Without the check (a host whose accounts are not the cluster's) the name is believed.
    let mut unchecked = WriteStore::open(&dir.join("unchecked.sqlite")).unwrap();
    let mut opts = options(&log);
    opts.accounts = None;
    assert_eq!(ingest(&mut unchecked, &opts).new_jobs, 4);
}

/// `mpistat ingest` checks names against this host's password database unless the site says
/// not to. Only uid 0 is assumed to be anyone (root).
#[test]
fn the_command_checks_names_against_this_hosts_accounts() {
    let dir = temp_dir("host-names");
    let log = dir.join("records.log");
    let mut root = week_of_jobs(1).remove(0);
    root.uid = 0;
    root.user = "root".into();
    let mut impostor = root.clone();
    impostor.job_id = "impostor".into();
    impostor.user = "alice".into();
    let text: String = [&root, &impostor]
        .iter()
        .flat_map(|j| syslog_lines(j, Some(0)))
        .collect();
    std::fs::write(&log, text).unwrap();
    let report = |label: &str, site: &str| {
        let config = dir.join(format!("{label}.toml"));
        std::fs::write(&config, site).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_mpistat"))
            .args(["ingest", "--report", "--config"])
            .arg(&config)
            .arg("--database")
            .arg(dir.join(format!("{label}.sqlite")))
            .arg(&log)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let checked = report("default", "");
    assert!(
        checked.contains("jobs stored: 1\nrejected: forged 1\n"),
        "{checked}"
    );
    assert!(
        checked.contains(&format!(
            "forged      {}/user alice  {}: job impostor: claims user alice but uid 0 is root",
            impostor.wire_key(),
            log.display()
        )),
        "{checked}"
    );
    let unchecked = report("unchecked", "[ingest]\ncheck_user_names = false\n");
    assert!(
        unchecked.contains("jobs stored: 2\nrejected: none\n"),
        "{unchecked}"
    );
}

#[test]
fn late_parts_withdraw_the_incomplete_report() {
    let dir = temp_dir("late");
    let log = dir.join("records.log");
    let job = &week_of_jobs(1)[0];
    let lines = syslog_lines(job, Some(job.uid));
    std::fs::write(&log, lines[..lines.len() - 1].concat()).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let mut opts = options(&log);
    opts.grace = Duration::ZERO;
    ingest(&mut db, &opts);
    assert_eq!(rejected_kinds(&db), ["incomplete"]);
    // Rewritten whole (e.g. a late copy arrives in another file): stored, report withdrawn.
    // (Its first line differs: files are told apart by their first line, see `source::Head`.)
    let other = dir.join("late.log");
    let unrelated = "2026-11-18T10:00:00.000000+00:00 node1 uid=0 pid=1 kernel: hello\n";
    std::fs::write(&other, format!("{unrelated}{}", lines.concat())).unwrap();
    ingest(&mut db, &options(&other));
    assert_eq!(db.job_count().unwrap(), 1);
    assert!(rejected_kinds(&db).is_empty());
}

/// `mpistat ingest` killed with SIGKILL at random moments, rerun each time, then once to the
/// end: the database equals that of one uninterrupted run.
#[test]
fn sigkill_at_random_points_then_rerun_gives_the_same_database() {
    let dir = temp_dir("sigkill");
    let log = dir.join("records.log");
    let mut jobs = week_of_jobs(8_000);
    // Some trouble in the stream too: a forged record in the middle.
    jobs[4000].uid = 0;
    append_log(&log, &jobs);
    std::fs::write(
        dir.join("forged.log"),
        syslog_lines(&jobs[4000], Some(1001)).concat(),
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&std::fs::read_to_string(dir.join("forged.log")).unwrap());
    std::fs::write(&log, text).unwrap();

    let reference = dir.join("reference.sqlite");
    let mut db = WriteStore::open(&reference).unwrap();
    // Names not checked, as by the command below: the users are invented (uid 1001 may be
    // someone else here), and job 5000 (uid 0, "alice") is a forged name.
    let mut unchecked = options(&log);
    unchecked.accounts = None;
    ingest(&mut db, &unchecked);
    let expected = dump(&db);
    assert!(expected.contains("forged"));

    let killed = dir.join("killed.sqlite");
    let config = dir.join("site.toml");
    // The users are invented (uid 1001 may be someone else here): names not checked.
    std::fs::write(
        &config,
        "[ingest]\ngrace_seconds = 300\ncheck_user_names = false\n",
    )
    .unwrap();
    // Small batches: many commits to be killed between (and in).
    let run = |database: &Path| {
        Command::new(env!("CARGO_BIN_EXE_mpistat"))
            .args(["ingest", "--batch-lines", "4000", "--config"])
            .arg(&config)
            .arg("--database")
            .arg(database)
            .arg(&log)
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // How long a whole run takes here: the kills fall within its first quarter.
    let started = std::time::Instant::now();
    assert!(run(&dir.join("timed.sqlite")).wait().unwrap().success());
    let whole_ms = started.elapsed().as_millis() as u64;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut kills = 0;
    for _ in 0..8 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = run(&killed);
        std::thread::sleep(Duration::from_millis(1 + seed % (whole_ms / 4).max(1)));
        if child.try_wait().unwrap().is_none() {
            kills += 1;
        }
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
    }
    let resumed = WriteStore::open(&killed).unwrap();
    let saved: u64 = resumed
        .position_paths()
        .unwrap()
        .iter()
        .map(|(_, offset)| offset)
        .sum();
    eprintln!("before the last run {saved} bytes were committed");
    drop(resumed);
    let status = Command::new(env!("CARGO_BIN_EXE_mpistat"))
        .args(["ingest", "--config"])
        .arg(&config)
        .arg("--database")
        .arg(&killed)
        .arg(&log)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let after = WriteStore::open(&killed).unwrap();
    assert_eq!(dump(&after), expected, "after {kills} kills");
    eprintln!("{kills} of 8 runs were killed mid-way (a whole run takes {whole_ms} ms)");
    assert!(kills >= 2, "the kills are to fall within runs");
}

/// `--follow` picks up appended records and a rotation while it runs.
#[test]
fn follow_reads_appends_and_rotations() {
    let dir = temp_dir("follow");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(30);
    append_log(&log, &jobs[..10]);
    let database = dir.join("db.sqlite");
    let config = dir.join("site.toml");
    // Invented users (uid 1001 may be someone else on this host): names not checked.
    std::fs::write(
        &config,
        "[ingest]\ngrace_seconds = 300\ncheck_user_names = false\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mpistat"))
        .args(["ingest", "--follow", "--config"])
        .arg(&config)
        .arg("--database")
        .arg(&database)
        .arg(&log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let count = || {
        WriteStore::open(&database)
            .ok()
            .and_then(|db| db.job_count().ok())
            .unwrap_or(0)
    };
    let wait_for = |n: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while count() < n && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        count()
    };
    assert_eq!(wait_for(10), 10);
    append_log(&log, &jobs[10..20]);
    assert_eq!(wait_for(20), 20);
    append_log(&log, &jobs[20..25]);
    std::fs::rename(&log, dir.join("records.log.1")).unwrap();
    append_log(&log, &jobs[25..30]);
    assert_eq!(wait_for(30), 30);
    let _ = child.kill();
    child.wait().unwrap();
}

/// Processes that open one database at the same moment (an ingest starting while a digest or a
/// second ingest opens it) all succeed, also while the schema is being created.
#[test]
fn many_openers_of_one_new_database_all_succeed() {
    for round in 0..20 {
        let dir = temp_dir(&format!("openers-{round}"));
        let path = dir.join("db.sqlite");
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let db = WriteStore::open(&path)?;
                        db.job_count()
                    })
                })
                .collect();
            for opener in openers {
                let opened = opener.join().unwrap();
                assert!(opened.is_ok(), "round {round}: {opened:?}");
            }
        });
    }
}

#[test]
fn a_schema_4_database_is_upgraded_keeping_its_jobs_ids_and_queue() {
    use mpistat_store::MIGRATIONS;
    let dir = temp_dir("schema-4");
    let log = dir.join("records.log");
    append_log(&log, &week_of_jobs(20));
    // The jobs as the current schema stores them...
    let mut current = WriteStore::open(&dir.join("current.sqlite")).unwrap();
    ingest(&mut current, &options(&log));
    let expected = dump(&current);
    drop(current);
    // ... copied into a database of schema 4 (unique by key alone), as an older mpistat left it.
    let old_path = dir.join("old.sqlite");
    let old = |sql: &str| execute_batch(&old_path, sql).unwrap();
    old(&MIGRATIONS[..4].concat());
    let attach = format!(
        "PRAGMA user_version = 4; ATTACH '{}' AS current;",
        dir.join("current.sqlite").display()
    );
    // (Schema 4 has the columns of `jobs` up to `traced`; a later one added `app`, and
    // `rejected_ms` to `rejected`.)
    let schema_4_jobs = "id, key, uid, user, job_id, exe, ranks, start_ms, end_ms, wall_ns_sum, \
        mpi_ns_sum, partial, record, model_version, host, pid, wall_ns_max, critical_path_ns, \
        work_sum_ns, traced";
    // (Schema 13 made a job's key its wire key and uid: schema 4 had the wire key alone.)
    let schema_4_jobs = schema_4_jobs.replace(" key,", " substr(key, 1, instr(key, '-') - 1),");
    for table in ["jobs", "rejected", "positions", "escalation_queue"] {
        let columns = match table {
            "jobs" => &schema_4_jobs,
            "rejected" => "kind, ref, source, detail, line",
            _ => "*",
        };
        old(&format!(
            "{attach} INSERT INTO main.{table} SELECT {columns} FROM current.{table}"
        ));
    }
    let job_ids = "SELECT id || ' ' || key FROM jobs ORDER BY id";
    let old_queued = "SELECT id || ' ' || exe FROM escalation_queue ORDER BY id";
    let (old_jobs, old_queue) = (
        column(&old_path, job_ids).unwrap(),
        column(&old_path, old_queued).unwrap(),
    );
    assert_eq!(old_jobs.len(), 20);

    let mut upgraded = WriteStore::open(&old_path).unwrap();
    assert_eq!(dump(&upgraded), expected);
    // (Their keys got their uids, schema 13.)
    let wire_keys = "SELECT id || ' ' || substr(key, 1, instr(key, '-') - 1) FROM jobs ORDER BY id";
    assert_eq!(upgraded.column(wire_keys).unwrap(), old_jobs);
    // The queue's executable column became the application (the executable of these jobs).
    let queued = "SELECT id || ' ' || app FROM escalation_queue ORDER BY id";
    assert_eq!(upgraded.column(queued).unwrap(), old_queue);
    // Another file (its first line differs) of the same jobs only repeats them.
    let again = dir.join("again.log");
    let mut reversed = week_of_jobs(20);
    reversed.reverse();
    append_log(&again, &reversed);
    let stats = ingest(&mut upgraded, &options(&again));
    assert_eq!(
        (stats.records, stats.new_jobs),
        (20, 0),
        "a repeat is no new job"
    );
    let index = upgraded
        .column("SELECT sql FROM sqlite_schema WHERE name = 'jobs_by_end'")
        .unwrap()
        .concat();
    assert!(
        index.contains("UNIQUE INDEX jobs_by_end ON jobs (end_ms, key)"),
        "{index}"
    );
}

/// Schema 13 files a job under its wire key and uid: a database of schema 12 (jobs, an
/// analysis, critical jobs and a held partial record under wire keys) is rekeyed on open, its
/// jobs read back as filed (none quarantined) and found by their new keys, and its rollups
/// are made again.
#[test]
fn a_schema_12_database_is_rekeyed_by_uid() {
    use mpistat_record::model::TraceInfo;
    use mpistat_store::MIGRATIONS;
    let dir = temp_dir("schema-12");
    let log = dir.join("records.log");
    let mut jobs = week_of_jobs(20);
    jobs[3].trace = Some(TraceInfo {
        dir: "/home/bob/.mpistat/traces/3".into(),
        reason: "user".into(),
        ..TraceInfo::default()
    });
    append_log(&log, &jobs);
    let mut current = WriteStore::open(&dir.join("current.sqlite")).unwrap();
    ingest(&mut current, &options(&log));
    let analysis = mpistat_record::AnalysisRecord {
        version: mpistat_record::analysis::ANALYSIS_MODEL_VERSION,
        job_key: jobs[3].wire_key(),
        uid: jobs[3].uid,
        user: jobs[3].user.clone(),
        host: "node1".into(),
        dir: "/home/bob/.mpistat/traces/3".into(),
        summary: Some("{}".into()),
        error: None,
        analysed_unix_ms: 1,
    };
    let analysis_log = dir.join("analysis.log");
    std::fs::write(&analysis_log, analysis_lines(&analysis, jobs[3].uid)).unwrap();
    ingest(&mut current, &options(&analysis_log));
    let mut err = Vec::new();
    mpistat_ingest::escalate::after_ingest(&SiteConfig::default(), &current, &mut err).unwrap();
    current
        .execute_batch(
            "INSERT INTO partial_inbox (end_ms, key, half, uid, look, record, state, held_ms)
                 SELECT end_ms, key, 'abort', uid, 0, record, 'held', 0 FROM jobs WHERE id = 1",
        )
        .unwrap();
    let expected = dump(&current);
    let listed = |db: &WriteStore, query: &str| -> Vec<String> { db.column(query).unwrap() };
    let analyses = "SELECT key FROM analyses ORDER BY key";
    let critical = "SELECT key FROM critical_jobs ORDER BY key";
    let held = "SELECT key FROM partial_inbox ORDER BY key";
    let (expected_analyses, expected_critical, expected_held) = (
        listed(&current, analyses),
        listed(&current, critical),
        listed(&current, held),
    );
    assert_eq!(expected_analyses, [jobs[3].key()]);
    assert!(!expected_critical.is_empty());
    drop(current);
    // The same rows in a database of schema 12, under their wire keys, as mpistat left it.
    let old_path = dir.join("old.sqlite");
    let old = |sql: &str| execute_batch(&old_path, sql).unwrap();
    old(&MIGRATIONS[..12].concat());
    let attach = format!(
        "PRAGMA user_version = 12; ATTACH '{}' AS current;",
        dir.join("current.sqlite").display()
    );
    let wire = "substr(key, 1, instr(key, '-') - 1)";
    for (table, columns) in [
        (
            "jobs",
            format!(
                "id, {wire}, uid, user, job_id, exe, ranks, start_ms, end_ms, wall_ns_sum, \
                 mpi_ns_sum, partial, record, model_version, host, pid, wall_ns_max, \
                 critical_path_ns, work_sum_ns, traced, app"
            ),
        ),
        (
            "analyses",
            format!("{wire}, user, end_ms, job_id, app, dir, status, summary, error"),
        ),
        (
            "critical_jobs",
            format!("end_ms, {wire}, user, wall_ns, reasons"),
        ),
        (
            "partial_inbox",
            format!("end_ms, {wire}, half, uid, look, record, state, held_ms"),
        ),
        ("rejected", "kind, ref, source, detail, line".into()),
        ("positions", "*".into()),
        ("escalation_queue", "*".into()),
    ] {
        old(&format!(
            "{attach} INSERT INTO main.{table} SELECT {columns} FROM current.{table}"
        ));
    }
    let old_keys = column(&old_path, "SELECT key FROM jobs ORDER BY id").unwrap();
    assert!(old_keys.iter().all(|k| k.len() == 16), "{old_keys:?}");

    let upgraded = WriteStore::open(&old_path).unwrap();
    assert_eq!(dump(&upgraded), expected);
    assert_eq!(listed(&upgraded, analyses), expected_analyses);
    assert_eq!(listed(&upgraded, critical), expected_critical);
    assert_eq!(listed(&upgraded, held), expected_held);
    assert!(
        upgraded.rollup_state("stale").unwrap().is_some(),
        "the rollups are made again"
    );
    for job in &jobs {
        assert_eq!(upgraded.job(&job.key()).unwrap().as_ref(), Some(job));
    }
    assert!(upgraded.take_quarantined().is_empty());
    assert!(upgraded.rejected().unwrap().is_empty());
    let stored = upgraded.analyses_by_key().unwrap();
    assert_eq!(stored[&jobs[3].key()].summary.as_deref(), Some("{}"));
}

/// The syslog lines of an analysis record attested as sent by `sender`.
fn analysis_lines(analysis: &mpistat_record::AnalysisRecord, sender: u32) -> String {
    mpistat_record::encode_analysis(analysis)
        .into_iter()
        .map(|m| {
            format!("2026-11-18T10:00:00.000000+00:00 node1 uid={sender} pid=9 mpistat: {m}\n")
        })
        .collect()
}

/// Analyses come in as their senders' records: stored only for a traced job of the sender's
/// uid; another user's claim to it, an analysis of an untraced job and one claiming a uid that
/// did not send it are rejected as forged; one whose job has not come yet waits.
#[test]
fn an_analysis_is_stored_only_for_a_traced_job_of_its_sender() {
    use mpistat_record::analysis::ANALYSIS_MODEL_VERSION;
    use mpistat_record::model::TraceInfo;
    use mpistat_record::AnalysisRecord;
    let dir = temp_dir("analyses");
    let log = dir.join("records.log");
    let mut jobs = week_of_jobs(3); // alice's, bob's, carol's
    for n in [0, 2] {
        jobs[n].trace = Some(TraceInfo {
            dir: format!("/home/{}/.mpistat/traces/{n}", jobs[n].user),
            reason: "user".into(),
            ..TraceInfo::default()
        });
    }
    // Carol's job comes after its analysis.
    append_log(&log, &jobs[..2]);
    let analysis = |job_key: String, (user, uid): (&str, u32)| AnalysisRecord {
        version: ANALYSIS_MODEL_VERSION,
        job_key,
        uid,
        user: user.into(),
        host: "node1".into(),
        dir: "/home/alice/.mpistat/traces/0".into(),
        summary: Some(format!("{{\"by\":\"{user}\"}}")),
        error: None,
        analysed_unix_ms: 1,
    };
    let (alice, bob, carol) = (USERS[0], USERS[1], USERS[2]);
    let lines = [
        analysis_lines(&analysis(jobs[0].wire_key(), alice), alice.1),
        // Bob claims alice's traced job as his, and analyses his own untraced job.
        analysis_lines(&analysis(jobs[0].wire_key(), bob), bob.1),
        analysis_lines(&analysis(jobs[1].wire_key(), bob), bob.1),
        // Bob sends an analysis claiming to be alice's.
        analysis_lines(&analysis("0123456789abcdef".into(), alice), bob.1),
        // Alice's analysis of a job never stored, carol's of one not stored yet.
        analysis_lines(&analysis("fedcba9876543210".into(), alice), alice.1),
        analysis_lines(&analysis(jobs[2].wire_key(), carol), carol.1),
    ]
    .concat();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    ingest(&mut db, &options(&log));
    let mut err = Vec::new();
    mpistat_ingest::escalate::after_ingest(&SiteConfig::default(), &db, &mut err).unwrap();
    let stored = db.analyses_by_key().unwrap();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        stored[&jobs[0].key()].summary.as_deref(),
        Some("{\"by\":\"alice\"}")
    );
    let forged: Vec<String> = db
        .rejected()
        .unwrap()
        .into_iter()
        .filter(|(kind, ..)| kind == "forged")
        .map(|(.., detail)| detail)
        .collect();
    assert_eq!(forged.len(), 3, "{forged:#?}");
    for expected in [
        "is uid 1001's, not the sender's",
        "was not traced",
        "claims uid 1001 (alice) but uid 1002 sent it",
    ] {
        assert!(
            forged.iter().any(|d| d.contains(expected)),
            "{expected}: {forged:#?}"
        );
    }
    let waiting = db.analysis_inbox().unwrap();
    assert_eq!(waiting.len(), 2);
    assert!(waiting.iter().all(|w| w.looked_to == 2), "{waiting:?}");
    // Carol's job arrives: her analysis is found among the new rows.
    append_log(&log, &jobs[2..]);
    ingest(&mut db, &options(&log));
    mpistat_ingest::escalate::after_ingest(&SiteConfig::default(), &db, &mut err).unwrap();
    assert_eq!(db.analyses_by_key().unwrap().len(), 2);
    let waiting = db.analysis_inbox().unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].analysis.job_key, "fedcba9876543210");
    // A week later it is an orphan.
    db.execute_batch("UPDATE analysis_inbox SET received_ms = received_ms - 8 * 86400000")
        .unwrap();
    mpistat_ingest::escalate::after_ingest(&SiteConfig::default(), &db, &mut err).unwrap();
    assert!(db.analysis_inbox().unwrap().is_empty());
    assert!(rejected_kinds(&db).contains(&"orphan".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `[ingest] log_host` names whose read positions a run reads and saves: a run as another log
/// host reads the same file again from its start (storing nothing twice), one as the same host
/// resumes where it stopped, and the default is this machine's name (a host of its own here).
#[test]
fn the_log_host_setting_names_whose_read_positions_they_are() {
    let dir = temp_dir("log-host");
    let log = dir.join("records.log");
    append_log(&log, &week_of_jobs(3));
    let run = |host: Option<&str>| {
        let config = dir.join("site.toml");
        let setting = host.map_or(String::new(), |host| format!("log_host = {host:?}\n"));
        std::fs::write(
            &config,
            format!("[ingest]\ncheck_user_names = false\n{setting}"),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_mpistat"))
            .args(["ingest", "--config"])
            .arg(&config)
            .arg("--database")
            .arg(dir.join("db.sqlite"))
            .arg(&log)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        let summary = err.lines().find(|line| line.contains(" files, ")).unwrap();
        summary.split_once(" lines: ").unwrap().1.to_string()
    };
    assert_eq!(run(Some("loghost-a")), "3 records (3 new), 0 rejected");
    assert_eq!(run(Some("loghost-a")), "0 records (0 new), 0 rejected");
    assert_eq!(run(Some("loghost-b")), "3 records (0 new), 0 rejected");
    assert_eq!(run(None), "3 records (0 new), 0 rejected");
    assert_eq!(run(None), "0 records (0 new), 0 rejected");
}
