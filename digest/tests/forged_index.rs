//! A sender writes wire-version-2 records whose index is one of its own jobs (its uid) around a
//! record claiming uid 0 (root), every checksum right. Ingest decodes every record (for the
//! rollups), finds the record is not the one its index says and rejects the job as `corrupt`
//! (in `mpistat ingest --report`) instead of storing it: nobody is credited with it, `mpistat
//! show` reports it, the escalation does not analyse the trace one claims, the mails are those
//! of a database that never held them, and the job page is not served. A record spoilt after
//! it was stored is quarantined by its first reader, which says so (also inside `mpistat
//! ingest`, which holds the stderr lock while it runs).

use mpistat_testkit::forge;
use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;

use common::{syslog_lines, week_of_jobs, USERS};
use mpistat_figures::rollup::rebuild;
use mpistat_figures::week::IsoWeek;
use mpistat_ingest::accounts::Table;
use mpistat_ingest::{run_once, Options, RunStats};
use mpistat_mail::mails;
use mpistat_record::model::TraceInfo;
use mpistat_record::{JobIndex, JobRecord};
use mpistat_site::SiteConfig;
use mpistat_store::WriteStore;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn temp_dir(label: &str) -> Scratch {
    Scratch::new(&format!("forged-{label}"))
}

fn ingest(db: &mut WriteStore, log: &Path) -> RunStats {
    let options = Options {
        // Names are checked against the invented users, not the machine's.
        accounts: Some(Arc::new(Table::new(USERS))),
        ..Options::from_site(vec![log.to_path_buf()], &SiteConfig::default())
    };
    let mut err = Vec::new();
    let stats = run_once(db, &options, &mut err).unwrap();
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
    stats
}

/// `own`'s index around `own` claiming to be root's, as rsyslog writes it for `own`'s sender.
fn forged_lines(own: &JobRecord) -> String {
    let mut root = own.clone();
    root.uid = 0;
    root.user = "root".into();
    forge::encode_v2_with_index(&root, &JobIndex::of(own))
        .into_iter()
        .map(|m| {
            format!(
                "2026-11-18T10:00:00.000000+00:00 node1 uid={} pid={} mpistat: {m}\n",
                own.uid, own.pid
            )
        })
        .collect()
}

/// The honest log of ten jobs of five users.
fn honest_log(dir: &Path) -> (PathBuf, Vec<JobRecord>) {
    let jobs = week_of_jobs(10);
    let log = dir.join("honest.log");
    let text: String = jobs
        .iter()
        .flat_map(|j| syslog_lines(j, Some(j.uid)))
        .collect();
    std::fs::write(&log, text).unwrap();
    (log, jobs)
}

#[test]
fn a_record_under_someone_elses_index_is_never_credited_to_the_uid_it_claims() {
    let dir = temp_dir("digest");
    let (honest, _) = honest_log(&dir);
    // Jobs of bob (1002) and carol (1003) that are not among the ten; carol's claims a trace.
    let more = week_of_jobs(13);
    let bobs = more[11].clone();
    let mut carols = more[12].clone();
    carols.trace = Some(TraceInfo {
        dir: dir.join("traces/1012").display().to_string(),
        reason: "user".into(),
        ..Default::default()
    });
    let log = dir.join("records.log");
    let mut text = std::fs::read_to_string(&honest).unwrap();
    text.push_str(&forged_lines(&bobs));
    text.push_str(&forged_lines(&carols));
    std::fs::write(&log, text).unwrap();

    // `mpistat show` decodes every record: the two are reported, none is shown as root's.
    let show = Command::new(env!("CARGO_BIN_EXE_mpistat"))
        .args(["show", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&show.stdout),
        String::from_utf8_lossy(&show.stderr),
    );
    assert_eq!(out.lines().count(), 10, "{out}");
    assert!(!out.contains("\"root\""), "{out}");
    assert_eq!(
        err.matches("the index disagrees with the record (index vs record: uid: 1002 vs 0; user: \"bob\" vs \"root\")")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("10 records, 2 problems"), "{err}");

    // Ingest reads the records (for the rollups) and rejects both as corrupt, by their senders'
    // indexes (their senders are those the indexes name: not forged, but not usable).
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let stats = ingest(&mut db, &log);
    assert_eq!((stats.records, stats.new_jobs, stats.rejected), (10, 10, 2));

    // Nothing of them is queued for the escalation (carol's claimed a trace).
    let mut config = SiteConfig::default();
    config.escalation.list = dir.join("escalation.list");
    config.escalation.cpu_hours_min = 1e9; // nobody is escalated: only the trace matters
    let mut err = Vec::new();
    mpistat_ingest::escalate::after_ingest(&config, &db, &mut err).unwrap();
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
    assert!(
        db.analyses_by_key().unwrap().is_empty(),
        "no trace analysed"
    );
    assert_eq!(db.rejected().unwrap().len(), 2);
    assert_eq!(db.job_count().unwrap(), 10);

    // Every mail is that of a database that never held the forgeries, and root gets none.
    let week = IsoWeek::parse("2026-W47").unwrap();
    let forged = mails(&db, &config, week, None).unwrap();
    let mut clean_db = WriteStore::open(&dir.join("clean.sqlite")).unwrap();
    ingest(&mut clean_db, &honest);
    let clean = mails(&clean_db, &config, week, None).unwrap();
    let users = |mails: &[mpistat_mailer::Mail]| -> Vec<String> {
        mails.iter().map(|m| m.user.clone()).collect()
    };
    assert_eq!(users(&forged), ["alice", "bob", "carol", "dave", "erin"]);
    assert_eq!(users(&forged), users(&clean));
    for (f, c) in forged.iter().zip(&clean) {
        assert_eq!(f.text, c.text, "{}'s mail", f.user);
        assert_eq!(f.html, c.html, "{}'s mail", f.user);
    }
    // Rebuilding the rollups reads every stored record: nothing more to move out.
    rebuild(&db, &config.site_report).unwrap();
    assert!(db.take_quarantined().is_empty());
    assert_eq!(db.job_count().unwrap(), 10);
    let mut report = Vec::new();
    mpistat_ingest::report::print(&db, &mut report).unwrap();
    let report = String::from_utf8(report).unwrap();
    assert!(
        report.contains("jobs stored: 10\nrejected: corrupt 2\n"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "  corrupt     {key}  {log}: job 1011 filed for uid 1002 (bob): job {key}: the index disagrees with the record (index vs record: uid: 1002 vs 0; user: \"bob\" vs \"root\")",
            key = bobs.wire_key(),
            log = log.display()
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "  corrupt     {key}  {log}: job 1012 filed for uid 1003 (carol): job {key}: the index disagrees with the record (index vs record: uid: 1003 vs 0; user: \"carol\" vs \"root\")",
            key = carols.wire_key(),
            log = log.display()
        )),
        "{report}"
    );
    // Again: nothing changes.
    assert_eq!(mails(&db, &config, week, None).unwrap().len(), 5);
    assert_eq!(db.rejected().unwrap().len(), 2);
}

/// The job page (`mpistat serve`) of a forgery is not served: ingest rejected it.
#[test]
fn the_job_page_of_a_forgery_is_not_served() {
    let dir = temp_dir("serve");
    let (honest, jobs) = honest_log(&dir);
    let bobs = week_of_jobs(12)[11].clone();
    let log = dir.join("records.log");
    let mut text = std::fs::read_to_string(&honest).unwrap();
    text.push_str(&forged_lines(&bobs));
    std::fs::write(&log, text).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    ingest(&mut db, &log);
    assert_eq!(db.job(&jobs[3].key()).unwrap(), Some(jobs[3].clone()));
    assert_eq!(db.job(&bobs.key()).unwrap(), None);
    assert_eq!(db.job_count().unwrap(), 10);
    let kinds: Vec<(String, String)> = db
        .rejected()
        .unwrap()
        .into_iter()
        .map(|(kind, reference, ..)| (kind, reference))
        .collect();
    assert_eq!(kinds, [("corrupt".to_string(), bobs.wire_key())]);
}

/// A stored record that cannot be read at all is quarantined too; the digest goes on.
#[test]
fn an_unreadable_stored_record_does_not_stop_the_digest() {
    let dir = temp_dir("unreadable");
    let (honest, jobs) = honest_log(&dir);
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    ingest(&mut db, &honest);
    db.execute_batch(&format!(
        "UPDATE jobs SET record = x'00ff00ff' WHERE key = '{}'",
        jobs[0].key()
    ))
    .unwrap();
    let week = IsoWeek::parse("2026-W47").unwrap();
    let all = mails(&db, &SiteConfig::default(), week, None).unwrap();
    assert_eq!(all.len(), 5);
    // Spoilt after ingest counted it: still in the rollups the mails come from, until a rebuild
    // reads it (as every reader of the record does) and moves it out.
    assert!(db.rejected().unwrap().is_empty());
    rebuild(&db, &SiteConfig::default().site_report).unwrap();
    let rejected = db.rejected().unwrap();
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].3.contains("the stored record is not readable"),
        "{rejected:?}"
    );
    assert_eq!(db.job_count().unwrap(), 9);
}

/// A stored record spoilt after ingest, of a job queued for the escalation (traced) in a row
/// from before the index had columns (whose record the escalation reads): the escalation after
/// the next `mpistat ingest` reads it and quarantines it, and ingest says so on
/// the stderr it holds locked. Run as a child process with a time limit: a message printed
/// from the wrong place while ingest holds the lock would hang it.
#[test]
fn ingest_reports_what_its_escalation_quarantined() {
    let dir = temp_dir("quarantine-in-ingest");
    let mut jobs = week_of_jobs(3);
    jobs[2].trace = Some(TraceInfo {
        dir: dir.join("traces/1002").display().to_string(),
        reason: "user".into(),
        ..Default::default()
    });
    let log = dir.join("records.log");
    let text: String = jobs
        .iter()
        .flat_map(|j| syslog_lines(j, Some(j.uid)))
        .collect();
    std::fs::write(&log, text).unwrap();
    let db_path = dir.join("db.sqlite");
    let mut db = WriteStore::open(&db_path).unwrap();
    assert_eq!(ingest(&mut db, &log).new_jobs, 3);
    assert_eq!(
        db.queued_jobs().unwrap().len(),
        1,
        "the traced job is queued"
    );
    db.execute_batch(&format!(
        "UPDATE jobs SET record = x'00ff00ff', model_version = NULL WHERE key = '{}'",
        jobs[2].key()
    ))
    .unwrap();
    drop(db);
    let config = dir.join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = \"{}\"\n[escalation]\nlist = \"{}\"\n[ingest]\ncheck_user_names = false\n",
            db_path.display(),
            dir.join("escalation.list").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mpistat"))
        .args(["ingest", "--config"])
        .arg(&config)
        .arg(&log)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("mpistat ingest hung after its escalation quarantined a job");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "mpistat: job {} filed for uid {} ({}): the stored record is not readable",
            jobs[2].job_id, jobs[2].uid, jobs[2].user
        )) && err.contains("moved to the rejected entries (mpistat ingest --report)"),
        "{err}"
    );
    let db = WriteStore::open(&db_path).unwrap();
    assert_eq!(db.job_count().unwrap(), 2);
    let rejected = db.rejected().unwrap();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(
        (rejected[0].0.as_str(), &rejected[0].1),
        ("corrupt", &jobs[2].key())
    );
}
