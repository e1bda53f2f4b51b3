//! The store's read side never writes (issue 35 §1): a week of jobs is ingested as root, the
//! database made read-only (file 0444 in a directory 0555), and a user made with `useradd`
//! (`st-reader`), who may read it but write neither it nor its directory, runs every report
//! (`digest`, `site-report`, `ingest --report`) and `serve`, whose every page (and `/metrics`)
//! is asked for. All succeed; the database's bytes, mode and directory are as they were (no
//! `-wal` or `-shm` made). A job the writer stores later is served (the reader opens the
//! database again), and an upgrade is refused to a reader. And the PostgreSQL server of the
//! tests' own (for the store's second backend) runs, with a role that may only read.

use mpistat_testkit::synthetic;

use mpistat_e2e::serve::{every_page, Serve};
use mpistat_e2e::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// `mpistat ARGS --config config` as `user`: its output, required to succeed.
fn mpistat_ok_as(user: &User, args: &[&str], config: &Path) -> std::process::Output {
    let output = mpistat_as(Some(user), args, config);
    assert!(
        output.status.success(),
        "mpistat {args:?} as {}: {}",
        user.name,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn readers_run_every_report_and_page_on_a_read_only_database() {
    let Some(reader) = User::ensure("st-reader") else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let dir = Scratch::new("store-read-only");
    let d = dir.path();
    set_mode(d, 0o755);
    let db_dir = d.join("db");
    std::fs::create_dir(&db_dir).unwrap();
    let db = db_dir.join("mpistat.db");
    let config = d.join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {:?}\n[ingest]\ncheck_user_names = false\n\
             [site_report]\ngroup = \"\"\n[serve]\nsocket_group = \"\"\n",
            db.display().to_string()
        ),
    )
    .unwrap();
    set_mode(&config, 0o644);
    let jobs = synthetic::week_of_jobs(40);
    let log = d.join("records.log");
    synthetic::append_log(&log, &jobs);
    let ingested = mpistat(&["ingest", log.to_str().unwrap()], &config);
    assert!(ingested.status.success(), "{ingested:?}");

    // Read-only: the file 0444, its directory 0555 (no -wal or -shm can be made there).
    set_mode(&db, 0o444);
    set_mode(&db_dir, 0o555);
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&db_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let (bytes, listed) = (std::fs::read(&db).unwrap(), files());
    assert_eq!(listed, ["mpistat.db"], "ingest left its WAL behind");

    // The reports.
    let mails = mpistat_ok_as(&reader, &["digest", "--week", "2026-W47"], &config);
    let mails = String::from_utf8_lossy(&mails.stdout);
    assert_eq!(mails.matches("\nSubject: ").count(), 5, "{mails}");
    let out = d.join("site");
    std::fs::create_dir(&out).unwrap();
    reader.own(&out);
    let out_arg = out.to_str().unwrap();
    mpistat_ok_as(
        &reader,
        &["site-report", "--week", "2026-W47", "--out", out_arg],
        &config,
    );
    for page in ["index", "charts", "tables", "critical", "users"] {
        assert!(out.join(format!("{page}.html")).exists(), "{page}");
    }
    let report = mpistat_ok_as(&reader, &["ingest", "--report"], &config);
    let report = String::from_utf8_lossy(&report.stdout);
    assert!(report.contains("jobs stored: 40\n"), "{report}");

    // Serve, every page.
    let run = d.join("run");
    std::fs::create_dir(&run).unwrap();
    reader.own(&run);
    let serve = Serve::start(Some(&reader), &config, &run.join("serve.sock"));
    let user = mpistat_pages::site_report::pages::user_slug(&jobs[0].user);
    for page in every_page("2026-W47", &user, &jobs[0].key(), &jobs[0].job_id) {
        serve.get_ok(&page);
    }

    // Nothing written.
    assert!(std::fs::read(&db).unwrap() == bytes, "the database changed");
    assert_eq!(files(), listed);
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
        0o444
    );

    // The writer (root) comes back with one more job: serve, which read the database as a
    // snapshot (it could not make a -shm), opens it again and shows the new job.
    let new_job = synthetic::week_of_jobs(41).remove(40);
    let more = d.join("more.log");
    synthetic::append_log(&more, std::slice::from_ref(&new_job));
    let ingested = mpistat(&["ingest", more.to_str().unwrap()], &config);
    assert!(ingested.status.success(), "{ingested:?}");
    set_mode(&db, 0o444);
    serve.get_ok(&format!("jobs/{}.html", new_job.key()));
    drop(serve);

    // A reader does not upgrade: a database of an older schema is refused, and left as it was.
    set_mode(&db_dir, 0o755);
    set_mode(&db, 0o644);
    mpistat_store::test_support::execute_batch(&db, "PRAGMA user_version = 3").unwrap();
    set_mode(&db, 0o444);
    set_mode(&db_dir, 0o555);
    let bytes = std::fs::read(&db).unwrap();
    let refused = mpistat_as(Some(&reader), &["digest", "--week", "2026-W47"], &config);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("run `mpistat db migrate`"),
        "{said}"
    );
    assert!(std::fs::read(&db).unwrap() == bytes, "the database changed");
    set_mode(&db_dir, 0o755);
}

/// The PostgreSQL server the backend's tests are to run (issue 35 §2), started by the test as a
/// user made with `useradd` on a Unix socket of its own: a role that may only read reads, and
/// cannot write.
#[test]
fn the_tests_run_a_postgresql_server_of_their_own() {
    let Some(owner) = User::ensure("st-postgres") else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let reader = User::ensure("st-reader").unwrap();
    let server = postgresql::PostgresServer::start(&owner)
        .expect("postgresql-15 is not installed (scripts/prereqs.sh installs it)");
    server.psql("postgres", "CREATE DATABASE mpistat");
    server.psql(
        "mpistat",
        "CREATE TABLE jobs (key text PRIMARY KEY); INSERT INTO jobs VALUES ('a');
         CREATE ROLE \"st-reader\" LOGIN; GRANT SELECT ON ALL TABLES IN SCHEMA public TO \"st-reader\"",
    );
    let as_reader = |sql: &str| {
        reader
            .command("psql")
            .arg(server.url("st-reader", "mpistat"))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .unwrap()
    };
    let read = as_reader("SELECT key FROM jobs");
    assert_eq!(String::from_utf8_lossy(&read.stdout), "a\n", "{read:?}");
    let write = as_reader("INSERT INTO jobs VALUES ('b')");
    assert!(
        !write.status.success()
            && String::from_utf8_lossy(&write.stderr).contains("permission denied"),
        "{write:?}"
    );
    assert_eq!(server.psql("mpistat", "SELECT count(*) FROM jobs"), "1\n");
}
