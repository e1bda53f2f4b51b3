//! The read side needs no right to write (issue 35 §2), on either backend: a user made with
//! `useradd` (`ro-reader`) who may only read the database — a SQLite file 0444 in a directory
//! 0555, or a PostgreSQL role granted CONNECT, USAGE and SELECT alone — makes the whole static
//! site of a month and of a week (the same files, byte for byte, as the database's owner makes)
//! and serves every kind of page; every command that writes is refused to it, and the
//! database is left as it was.

use mpistat_e2e::backend::{Backend, SiteDatabase};
use mpistat_e2e::serve::{every_page, Serve};
use mpistat_e2e::*;
use mpistat_testkit::synthetic;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

for_each_backend! {
fn a_reader_who_may_not_write_makes_the_site_and_serves_every_page(backend) {
    let Some(reader) = User::ensure("ro-reader") else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let dir = Scratch::new("read-only");
    let d = dir.path();
    set_mode(d, 0o755);
    let db_dir = d.join("db");
    std::fs::create_dir(&db_dir).unwrap();
    let database = SiteDatabase::new(backend, &db_dir, "ro-postgres").unwrap();
    let site = |name: &str, location: &str| {
        let config = d.join(name);
        std::fs::write(
            &config,
            format!(
                "{}[ingest]\ncheck_user_names = false\n\
                 [site_report]\ngroup = \"\"\n[serve]\nsocket_group = \"\"\n",
                database.section(location)
            ),
        )
        .unwrap();
        set_mode(&config, 0o644);
        config
    };
    let (writer, readers) = (site("writer.toml", &database.writer()), site("reader.toml", &database.reader()));
    let jobs = synthetic::week_of_jobs(60);
    let log = d.join("records.log");
    synthetic::append_log(&log, &jobs);
    set_mode(&log, 0o644);
    let ingested = mpistat(&["ingest", log.to_str().unwrap()], &writer);
    assert!(ingested.status.success(), "{ingested:?}");
    if backend == Backend::Sqlite {
        let file = db_dir.join("mpistat.db");
        set_mode(&file, 0o444);
        set_mode(&db_dir, 0o555);
    }
    let as_reader = |args: &[&str]| mpistat_as(Some(&reader), args, &readers);
    let reader_ok = |args: &[&str]| {
        let out = as_reader(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let state = || {
        let report = mpistat(&["ingest", "--report"], &writer);
        let mails = mpistat(&["digest", "--week", "2026-W47"], &writer);
        (report.stdout, mails.stdout)
    };
    let before = state();
    assert!(String::from_utf8_lossy(&before.0).contains("jobs stored: 60\n"));

    // The whole static site, the same as its owner makes.
    for period in [["--month", "2026-11"], ["--week", "2026-W47"]] {
        let by_reader = d.join(format!("reader{}", period[0]));
        let by_owner = d.join(format!("owner{}", period[0]));
        std::fs::create_dir(&by_reader).unwrap();
        reader.own(&by_reader);
        reader_ok(&["site-report", period[0], period[1], "--out", by_reader.to_str().unwrap()]);
        let owner = mpistat(
            &["site-report", period[0], period[1], "--out", by_owner.to_str().unwrap()],
            &writer,
        );
        assert!(owner.status.success(), "{owner:?}");
        let (made, expected) = (files_under(&by_reader), files_under(&by_owner));
        assert!(expected.len() > 5, "{period:?}: {} files", expected.len());
        assert!(made == expected, "{period:?}: the reader's site differs");
    }
    assert_eq!(reader_ok(&["ingest", "--report"]), before.0);
    assert_eq!(reader_ok(&["digest", "--week", "2026-W47"]), before.1);

    // Every page, served by the reader.
    let run = d.join("run");
    std::fs::create_dir(&run).unwrap();
    reader.own(&run);
    let serve = Serve::start(Some(&reader), &readers, &run.join("serve.sock"));
    let job = &jobs[3];
    for period in ["2026-W47", "2026-11"] {
        for page in every_page(period, &job.user, &job.key(), &job.job_id) {
            serve.get_ok(&page);
        }
    }
    drop(serve);

    // Whatever writes is refused to the reader.
    let more = d.join("more.log");
    synthetic::append_log(&more, &synthetic::week_of_jobs(61)[60..]);
    set_mode(&more, 0o644);
    for args in [
        vec!["ingest", more.to_str().unwrap()],
        vec!["db", "migrate"],
        vec!["rebuild-rollups"],
    ] {
        let refused = as_reader(&args);
        assert!(!refused.status.success(), "{args:?} as the reader: {refused:?}");
    }
    assert!(state() == before, "the database changed");
}
}
