//! A real PostgreSQL server of the test's own (issue 35 §2): Debian's `postgresql-15` binaries,
//! `initdb` and `pg_ctl` run as an unprivileged user in a temporary directory, listening on a
//! Unix socket there and on no TCP port. Stopped (`pg_ctl stop -m fast`) when dropped.
//!
//! Roles log in by peer authentication (as the user of their name), but for the roles of the
//! group `password_login` ([`PostgresServer::password_role`]), which give a password: the test
//! process, root, connects so as roles of its choice, with the password in the URL as a site
//! would write it.

use crate::users::User;
use mpistat_testkit::scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's `postgresql-15` puts its server programs.
pub const BIN: &str = "/usr/lib/postgresql/15/bin";

/// The role that owns a site's database ([`PostgresServer::start_site`]) and writes it.
pub const WRITER: &str = "mpistat_writer";
/// The role that may only read a site's database (CONNECT, USAGE and SELECT).
pub const READER: &str = "mpistat_reader";
/// The password of [`WRITER`] and [`READER`].
pub const PASSWORD: &str = "pg-s3cret-word";

/// A running server: its data directory, its socket's directory, and the user it runs as (its
/// superuser role has that user's name).
pub struct PostgresServer {
    owner: User,
    dir: Scratch,
}

impl PostgresServer {
    /// `None` when the binaries are not installed (`scripts/prereqs.sh` installs them).
    pub fn start(owner: &User) -> Option<PostgresServer> {
        if !Path::new(BIN).join("initdb").exists() {
            return None;
        }
        let dir = Scratch::new("postgres");
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        owner.own(dir.path());
        let server = PostgresServer {
            owner: owner.clone(),
            dir,
        };
        let data = server.data();
        server.run_ok(
            Command::new(Path::new(BIN).join("initdb"))
                .args(["--auth=peer", "--encoding=UTF8", "--locale=C", "-D"])
                .arg(&data),
        );
        // First match wins: the password roles, then everyone by peer (initdb's own rule).
        let hba = "local all +password_login scram-sha-256\nlocal all all peer\n";
        std::fs::write(data.join("pg_hba.conf"), hba).unwrap();
        let options = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off",
            server.socket_dir().display()
        );
        server.run_ok(
            Command::new(Path::new(BIN).join("pg_ctl"))
                .args(["start", "-w", "-t", "60", "-D"])
                .arg(&data)
                .args(["-l"])
                .arg(server.dir.path().join("server.log"))
                .args(["-o", &options]),
        );
        Some(server)
    }

    /// A server with a site's database, `mpistat`, owned by [`WRITER`], and [`READER`], which
    /// is granted SELECT on every table [`WRITER`] makes (as docs/store.md tells a site to),
    /// both logging in with [`PASSWORD`]. `None` when not root (no user can be made).
    pub fn start_site(owner_name: &str) -> Option<PostgresServer> {
        let owner = User::ensure(owner_name)?;
        let server = PostgresServer::start(&owner)
            .expect("postgresql-15 is not installed (scripts/prereqs.sh installs it)");
        server.password_role(WRITER, PASSWORD);
        server.password_role(READER, PASSWORD);
        server.psql(
            "postgres",
            &format!("CREATE DATABASE mpistat OWNER {WRITER}"),
        );
        server.psql(
            "mpistat",
            &format!(
                "GRANT CONNECT ON DATABASE mpistat TO {READER};
                 GRANT USAGE ON SCHEMA public TO {READER};
                 ALTER DEFAULT PRIVILEGES FOR ROLE {WRITER} IN SCHEMA public
                     GRANT SELECT ON TABLES TO {READER}"
            ),
        );
        Some(server)
    }

    /// The URL of the site's database (`mpistat`) as `role` ([`WRITER`] or [`READER`]).
    pub fn site_url(&self, role: &str) -> String {
        self.password_url(role, PASSWORD, "mpistat")
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The directory of the server's Unix socket (libpq's `host`).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A `postgresql://` URL of database `database` as role `role`, over the socket.
    pub fn url(&self, role: &str, database: &str) -> String {
        format!(
            "postgresql://{role}@/{database}?host={}",
            self.socket_dir().display()
        )
    }

    /// Make role `role` that logs in with `password` (and may do nothing yet): `SQL` to grant
    /// it more follows, as the server's superuser.
    pub fn password_role(&self, role: &str, password: &str) {
        self.psql(
            "postgres",
            &format!(
                "DO $$ BEGIN CREATE ROLE password_login NOLOGIN; \
                 EXCEPTION WHEN duplicate_object THEN NULL; END $$;
                 CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}' IN ROLE password_login"
            ),
        );
    }

    /// A `postgresql://` URL of database `database` as role `role` logging in with `password`,
    /// over the socket.
    pub fn password_url(&self, role: &str, password: &str, database: &str) -> String {
        format!(
            "postgresql://{role}:{password}@/{database}?host={}",
            self.socket_dir().display()
        )
    }

    /// `psql` as `user` (peer authentication: as the role of that user's name) on `database`,
    /// running `sql`; its output (whatever the outcome).
    pub fn psql_as(&self, user: &User, database: &str, sql: &str) -> Output {
        user.command("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.socket_dir())
            .args(["-d", database, "-c", sql])
            .output()
            .expect("run psql")
    }

    /// [`PostgresServer::psql_as`] as the server's owner (its superuser), required to succeed:
    /// its standard output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let out = self.psql_as(&self.owner, database, sql);
        assert!(
            out.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn run_ok(&self, command: &mut Command) {
        let program = command.get_program().to_owned();
        let mut as_owner = self.owner.command(program);
        as_owner.args(command.get_args());
        let out = as_owner.output().expect("run a PostgreSQL program");
        assert!(
            out.status.success(),
            "{as_owner:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let _ = self
            .owner
            .command(Path::new(BIN).join("pg_ctl"))
            .args(["stop", "-m", "fast", "-w", "-D"])
            .arg(self.data())
            .output();
    }
}
