//! For tests only (feature `test-support`): databases as an older mpistat, a damaged disk or
//! another program left them, made and looked at with SQL that no mpistat command runs.

use crate::Result;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::postgresql::test_support::{columns as postgres_columns, execute_as_reader};

/// Every table of the SQLite database at `path` and its columns in order.
pub fn sqlite_columns(path: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let conn = Connection::open(path)?;
    let mut stmt = conn.prepare(
        "SELECT m.name, c.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c
         WHERE m.type = 'table' ORDER BY m.name, c.cid",
    )?;
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))? {
        let (table, column) = row?;
        tables.entry(table).or_default().push(column);
    }
    Ok(tables)
}

/// Run `sql` (statements, no results) on the database at `path` (made if missing), whatever
/// its schema.
pub fn execute_batch(path: &Path, sql: &str) -> Result<()> {
    Connection::open(path)?.execute_batch(sql)?;
    Ok(())
}

/// The first column of every row `sql` selects from the database at `path`, whatever its
/// schema, as text ([`column_of`]).
pub fn column(path: &Path, sql: &str) -> Result<Vec<String>> {
    column_of(&Connection::open(path)?, sql)
}

/// The first column of every row `sql` selects, as text (NULL as an empty string, a BLOB as
/// its bytes read as UTF-8).
fn column_of(conn: &Connection, sql: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |row| {
        Ok(match row.get_ref(0)? {
            ValueRef::Null => String::new(),
            ValueRef::Integer(i) => i.to_string(),
            ValueRef::Real(r) => r.to_string(),
            ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

impl crate::WriteStore {
    /// Run `sql` (statements, no results) on this database.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        self.db.batch(sql)
    }

    /// The first column of every row `sql` selects, as text ([`column_of`]).
    pub fn column(&self, sql: &str) -> Result<Vec<String>> {
        column_of(self.db.sqlite_conn()?, sql)
    }
}

/// A PostgreSQL server of a test's own, for the store's tests on both backends: Debian's
/// `postgresql-15` run as `nobody` in a private directory (mode 0700), on a Unix socket there
/// and no TCP port, its superuser `mpistat` logging in without a password (only `nobody` and
/// root may reach the socket). Stopped and removed when dropped.
pub struct PostgresForTest {
    dir: PathBuf,
}

/// Where Debian's `postgresql-15` puts its server programs.
const POSTGRES_BIN: &str = "/usr/lib/postgresql/15/bin";

/// The unprivileged user the test server runs as (PostgreSQL refuses to run as root).
const POSTGRES_USER: &str = "nobody";

impl PostgresForTest {
    /// Start one (an error if `postgresql-15` is not installed: `scripts/prereqs.sh` installs
    /// it; a store test does not pass without its PostgreSQL half).
    pub fn start() -> PostgresForTest {
        use std::os::unix::fs::PermissionsExt;
        use std::sync::atomic::{AtomicUsize, Ordering};
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        assert!(
            Path::new(POSTGRES_BIN).join("initdb").exists(),
            "postgresql-15 is not installed (scripts/prereqs.sh installs it)"
        );
        let dir = std::env::temp_dir().join(format!(
            "mpistat-store-pg-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let owned = std::process::Command::new("chown")
            .arg(format!("{POSTGRES_USER}:"))
            .arg(&dir)
            .status()
            .unwrap();
        assert!(owned.success(), "chown {POSTGRES_USER} {}", dir.display());
        let server = PostgresForTest { dir };
        let data = server.dir.join("data");
        server.run_as_owner(&[
            &format!("{POSTGRES_BIN}/initdb"),
            "--auth=trust",
            "--username=mpistat",
            "--encoding=UTF8",
            "--locale=C",
            "-D",
            &data.to_string_lossy(),
        ]);
        let options = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off",
            server.dir.display()
        );
        server.run_as_owner(&[
            &format!("{POSTGRES_BIN}/pg_ctl"),
            "start",
            "-w",
            "-t",
            "120",
            "-D",
            &data.to_string_lossy(),
            "-l",
            &server.dir.join("server.log").to_string_lossy(),
            "-o",
            &options,
        ]);
        server
    }

    /// Its database `postgres`, as the superuser.
    pub fn location(&self) -> crate::Location {
        crate::Location::parse(&format!(
            "postgresql://mpistat@/postgres?host={}",
            self.dir.display()
        ))
        .unwrap()
    }

    /// Run `command` as the server's user, required to succeed.
    fn run_as_owner(&self, command: &[&str]) {
        let mut run = std::process::Command::new("runuser");
        run.args(["-u", POSTGRES_USER, "--"]).args(command);
        let out = run.output().expect("run a PostgreSQL program");
        assert!(
            out.status.success(),
            "{run:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PostgresForTest {
    fn drop(&mut self) {
        let _ = std::process::Command::new("runuser")
            .args(["-u", POSTGRES_USER, "--"])
            .arg(format!("{POSTGRES_BIN}/pg_ctl"))
            .args(["stop", "-m", "fast", "-w", "-D"])
            .arg(self.dir.join("data"))
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A database of each backend for a test: a new SQLite file and a new PostgreSQL server
/// ([`PostgresForTest`]). Each is removed (stopped) when dropped.
pub enum TestDatabase {
    Sqlite(PathBuf),
    Postgres(PostgresForTest),
}

impl TestDatabase {
    /// Both backends, SQLite first; `name` names the SQLite file.
    pub fn both(name: &str) -> [TestDatabase; 2] {
        let dir = std::env::temp_dir().join(format!("mpistat-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        [
            TestDatabase::Sqlite(dir.join("db.sqlite")),
            TestDatabase::Postgres(PostgresForTest::start()),
        ]
    }

    pub fn location(&self) -> crate::Location {
        match self {
            TestDatabase::Sqlite(path) => crate::Location::Sqlite(path.clone()),
            TestDatabase::Postgres(server) => server.location(),
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let TestDatabase::Sqlite(path) = self {
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}
