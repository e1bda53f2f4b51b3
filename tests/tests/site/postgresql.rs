//! The PostgreSQL backend (issue 35 §2) against a real server the test starts
//! ([`postgresql::PostgresServer`]): its schema is SQLite's, several ingests starting at once
//! migrate it once, the read side neither migrates nor writes, also as a role that may only
//! read, and `mpistat db copy` moves a site's database there and back without changing a page,
//! a mail or a report.

use mpistat_e2e::postgresql::{PostgresServer, PASSWORD};
use mpistat_e2e::{files_under, mpistat, mpistat_binary, Scratch};
use mpistat_store::postgresql::{check_readable, migrate, MIGRATIONS};
use mpistat_store::test_support::{execute_as_reader, postgres_columns, sqlite_columns};
use mpistat_store::{Error, Location, PostgresUrl, WriteStore};
use mpistat_testkit::synthetic;
use std::collections::BTreeMap;
use std::path::Path;

/// A server with database `mpistat` owned by the role `mpistat_writer`, and the role `mpistat_reader`,
/// which may connect and will be granted SELECT on the tables made after this.
struct Site {
    server: PostgresServer,
}

impl Site {
    fn start() -> Option<Site> {
        let Some(server) = PostgresServer::start_site("pg-postgres") else {
            eprintln!("SKIPPED: needs root to make users");
            return None;
        };
        Some(Site { server })
    }

    fn url(&self, role: &str) -> PostgresUrl {
        match Location::parse(&self.server.password_url(role, PASSWORD, "mpistat")).unwrap() {
            Location::Postgres(url) => url,
            Location::Sqlite(path) => panic!("{} is no URL", path.display()),
        }
    }

    fn tables(&self) -> String {
        self.server.psql(
            "mpistat",
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
        )
    }
}

/// PostgreSQL's schema (its own migrations) ends in the tables and columns SQLite's does, in
/// the same order, so that a copy between them and the statements of both see the same rows.
#[test]
fn the_schema_is_sqlites() {
    let Some(site) = Site::start() else { return };
    assert_eq!(
        migrate(&site.url("mpistat_writer")).unwrap(),
        MIGRATIONS.len()
    );
    let dir = Scratch::new("pg-schema");
    let sqlite = dir.path().join("mpistat.db");
    WriteStore::open(&sqlite).unwrap();
    let postgres = postgres_columns(&site.url("mpistat_writer")).unwrap();
    assert_eq!(postgres, sqlite_columns(&sqlite).unwrap());
    assert!(
        postgres.contains_key("jobs") && postgres.len() > 15,
        "{postgres:?}"
    );
}

/// Three ingests that start at once on a new database: one makes the schema, under the
/// advisory lock; the others wait for it and find it done (none fails, nothing is made twice).
#[test]
fn ingests_starting_at_once_migrate_once() {
    let Some(site) = Site::start() else { return };
    let url = site.url("mpistat_writer");
    let ran: Vec<usize> = std::thread::scope(|scope| {
        let migrations: Vec<_> = (0..3).map(|_| scope.spawn(|| migrate(&url))).collect();
        migrations
            .into_iter()
            .map(|m| m.join().unwrap().unwrap())
            .collect()
    });
    assert_eq!(ran.iter().sum::<usize>(), MIGRATIONS.len(), "{ran:?}");
    assert_eq!(migrate(&url).unwrap(), 0);
    assert_eq!(
        site.server
            .psql("mpistat", "SELECT version FROM schema_version"),
        format!("{}\n", MIGRATIONS.len())
    );
}

/// The read side refuses a database it would have to migrate, and makes nothing there; on a
/// migrated one its session is read-only even for the role that owns the tables; a role that
/// may only SELECT opens it.
#[test]
fn the_read_side_neither_migrates_nor_writes() {
    let Some(site) = Site::start() else { return };
    for role in ["mpistat_writer", "mpistat_reader"] {
        let refused = check_readable(&site.url(role)).unwrap_err();
        assert!(
            matches!(refused, Error::NotMigrated { found: 0, .. }),
            "{refused}"
        );
    }
    assert_eq!(site.tables(), "0\n", "a reader made tables");

    migrate(&site.url("mpistat_writer")).unwrap();
    let tables = site.tables();
    for role in ["mpistat_writer", "mpistat_reader"] {
        check_readable(&site.url(role)).unwrap();
        execute_as_reader(&site.url(role), "SELECT count(*) FROM jobs").unwrap();
        let write = execute_as_reader(
            &site.url(role),
            "INSERT INTO rollup_state (name, value) VALUES ('stale', '')",
        )
        .unwrap_err();
        assert!(
            write.to_string().contains("read-only transaction"),
            "{role}: {write}"
        );
        let create = execute_as_reader(&site.url(role), "CREATE TABLE t (a int)").unwrap_err();
        assert!(
            create.to_string().contains("read-only transaction"),
            "{role}: {create}"
        );
    }
    assert_eq!(site.tables(), tables);
    assert_eq!(
        site.server
            .psql("mpistat", "SELECT count(*) FROM rollup_state"),
        "0\n"
    );
    // The role that may only read cannot write outside the read session either.
    let denied = site.server.psql(
        "mpistat",
        "SELECT has_table_privilege('mpistat_reader', 'jobs', 'INSERT'),
                has_table_privilege('mpistat_reader', 'jobs', 'SELECT')",
    );
    assert_eq!(denied, "f|t\n");
}

/// Neither an error nor a location shown says the URL's password.
#[test]
fn a_password_is_never_shown() {
    let Some(site) = Site::start() else { return };
    let url = site.url("mpistat_writer");
    assert!(!url.to_string().contains(PASSWORD), "{url}");
    assert!(!format!("{url:?}").contains(PASSWORD), "{url:?}");
    let wrong = site
        .server
        .password_url("mpistat_writer", "not-the-password", "mpistat");
    let Location::Postgres(wrong) = Location::parse(&wrong).unwrap() else {
        panic!("{wrong} is a URL")
    };
    let refused = migrate(&wrong).unwrap_err().to_string();
    assert!(
        refused.contains("password authentication failed") && !refused.contains("not-the-password"),
        "{refused}"
    );
    assert_eq!(site.tables(), "0\n");
}

/// November 2026 (UTC), the synthetic jobs' month.
const NOVEMBER_START_MS: u64 = 1_793_491_200_000;

/// What a site's readers make of the database at `database`: the month's static site, the
/// week's mails (as `mpistat digest` prints them) and ingest's report of stored and rejected
/// entries.
fn outputs(
    database: &str,
    config: &Path,
    out: &Path,
) -> (BTreeMap<String, Vec<u8>>, String, String) {
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--database", database]);
        let output = mpistat(&all, config);
        assert!(output.status.success(), "mpistat {all:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    run(&[
        "site-report",
        "--month",
        "2026-11",
        "--out",
        out.to_str().unwrap(),
    ]);
    let mails = run(&["digest", "--week", "2026-W46"]);
    let report = run(&["ingest", "--report"]);
    (files_under(out), mails, report)
}

/// `mpistat db copy FROM TO` (which reads no site configuration).
fn db_copy(from: &str, to: &str) -> std::process::Output {
    let output = std::process::Command::new(mpistat_binary())
        .args(["db", "copy", from, to])
        .output()
        .unwrap();
    eprintln!(
        "mpistat db copy: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A site moves its database into PostgreSQL and back (`mpistat db copy`): every page of the
/// month, every mail of the week and ingest's report are the same, byte for byte, from the
/// database that went there and back as from the original; a copy into a database that holds
/// rows is refused.
#[test]
fn a_database_moves_to_postgresql_and_back_unchanged() {
    let Some(site) = Site::start() else { return };
    let dir = Scratch::new("pg-copy");
    let log = dir.path().join("records.log");
    let mut text = String::new();
    // 400 jobs, and one whose lines have no attested sender (rejected as forged): the
    // rejected entries move too.
    let jobs = synthetic::varied_jobs(401, 25, NOVEMBER_START_MS, 20 * 86_400_000);
    for (i, record) in jobs.enumerate() {
        text.extend(synthetic::syslog_lines(
            &record,
            (i < 400).then_some(record.uid),
        ));
    }
    std::fs::write(&log, text).unwrap();
    let original = dir.path().join("original.db");
    let config = dir.path().join("site.toml");
    // The synthetic users are invented (uid 2000.. may be someone else here): names not checked.
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {:?}\n[ingest]\ncheck_user_names = false\n",
            original.display().to_string()
        ),
    )
    .unwrap();
    let ingest = mpistat(&["ingest", log.to_str().unwrap()], &config);
    assert!(ingest.status.success(), "{ingest:?}");
    let url = site
        .server
        .password_url("mpistat_writer", PASSWORD, "mpistat");
    let back = dir.path().join("back.db");
    let (original_text, back_text) = (original.to_str().unwrap(), back.to_str().unwrap());
    for (from, to) in [(original_text, url.as_str()), (url.as_str(), back_text)] {
        let copy = db_copy(from, to);
        assert!(copy.status.success(), "db copy {from} {to}: {copy:?}");
        let said = String::from_utf8_lossy(&copy.stderr);
        assert!(said.contains("jobs: 400 rows"), "{said}");
        assert!(!said.contains(PASSWORD), "{said}");
    }
    let before = outputs(original_text, &config, &dir.path().join("before"));
    let after = outputs(back_text, &config, &dir.path().join("after"));
    assert!(before.0.len() > 20, "{:?}", before.0.keys());
    assert!(
        before.1.contains("Subject: mpistat"),
        "no mails: {}",
        before.1
    );
    assert!(before.2.contains("forged"), "{}", before.2);
    assert!(before.0 == after.0, "the pages differ");
    assert_eq!(before.1, after.1, "the mails differ");
    assert_eq!(before.2, after.2, "the reports differ");

    let again = db_copy(original_text, &url);
    assert!(
        !again.status.success()
            && String::from_utf8_lossy(&again.stderr).contains("already has rows"),
        "{again:?}"
    );
}

/// Ingest into PostgreSQL (which stores a batch's jobs, escalation entries, critical jobs and
/// users' rollups in a statement each) stores what ingest into SQLite (a statement a row)
/// does: the same pages, mails and report, from a log with jobs sent twice (in the same run
/// and in a later one) and another record of a stored job (rejected).
#[test]
fn ingest_into_postgresql_stores_what_sqlite_stores() {
    let Some(site) = Site::start() else { return };
    let dir = Scratch::new("pg-ingest");
    let log = dir.path().join("records.log");
    let jobs: Vec<_> =
        synthetic::varied_jobs(300, 20, NOVEMBER_START_MS, 20 * 86_400_000).collect();
    let mut collision = jobs[7].clone();
    collision.wall_ns.sum += 1_000_000;
    let lines = |records: &[mpistat_record::JobRecord]| -> String {
        records
            .iter()
            .flat_map(|r| synthetic::syslog_lines(r, Some(r.uid)))
            .collect()
    };
    let first_run = lines(&jobs) + &lines(&jobs[..40]) + &lines(&[collision]);
    std::fs::write(&log, &first_run).unwrap();
    let sqlite = dir.path().join("sqlite.db");
    let url = site
        .server
        .password_url("mpistat_writer", PASSWORD, "mpistat");
    let config = dir.path().join("site.toml");
    std::fs::write(&config, "[ingest]\ncheck_user_names = false\n").unwrap();
    let second_run = first_run + &lines(&jobs[100..150]);
    for (run, text) in [(0, None), (1, Some(&second_run))] {
        if let Some(text) = text {
            std::fs::write(&log, text).unwrap();
        }
        for database in [sqlite.to_str().unwrap(), url.as_str()] {
            let ingest = mpistat(
                &["ingest", "--database", database, log.to_str().unwrap()],
                &config,
            );
            assert!(
                ingest.status.success(),
                "run {run} into {database}: {ingest:?}"
            );
        }
    }
    let on_sqlite = outputs(
        sqlite.to_str().unwrap(),
        &config,
        &dir.path().join("sqlite"),
    );
    let on_postgresql = outputs(&url, &config, &dir.path().join("postgresql"));
    assert!(on_sqlite.2.contains("300"), "{}", on_sqlite.2);
    // The reading side turns away the lines of a job sent twice in a run, and those of another
    // record of it: what reaches the writers is the same on both.
    assert!(on_sqlite.2.contains("conflicting"), "{}", on_sqlite.2);
    assert!(on_sqlite.0 == on_postgresql.0, "the pages differ");
    assert_eq!(on_sqlite.1, on_postgresql.1, "the mails differ");
    assert_eq!(on_sqlite.2, on_postgresql.2, "the reports differ");
}
