//! The store's two backends (issue 35 §2) as a site test chooses them: a SQLite file, or a
//! database on a PostgreSQL server of the test's own ([`PostgresServer::start_site`]), and
//! [`for_each_backend!`], which makes a test of each.

use crate::postgresql::{PostgresServer, READER, WRITER};
use std::path::{Path, PathBuf};

/// Where a site keeps its jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgresql,
}

impl Backend {
    pub const ALL: [Backend; 2] = [Backend::Sqlite, Backend::Postgresql];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgresql => "postgresql",
        }
    }
}

/// A site's database of either backend: a file `mpistat.db` in a directory, or the database
/// `mpistat` of a server started for it (stopped when this is dropped).
pub enum SiteDatabase {
    Sqlite(PathBuf),
    Postgresql(PostgresServer),
}

impl SiteDatabase {
    /// A new, empty site database of `backend` (a SQLite file in `dir`; a PostgreSQL server run
    /// by the user `server_owner`, made with `useradd`). `None` when not root.
    pub fn new(backend: Backend, dir: &Path, server_owner: &str) -> Option<SiteDatabase> {
        Some(match backend {
            Backend::Sqlite => SiteDatabase::Sqlite(dir.join("mpistat.db")),
            Backend::Postgresql => {
                SiteDatabase::Postgresql(PostgresServer::start_site(server_owner)?)
            }
        })
    }

    /// The location the writers use (`[database]`'s `path` or `url`, `--database`).
    pub fn writer(&self) -> String {
        match self {
            SiteDatabase::Sqlite(path) => path.display().to_string(),
            SiteDatabase::Postgresql(server) => server.site_url(WRITER),
        }
    }

    /// The location the readers use: the same file, or the role that may only read.
    pub fn reader(&self) -> String {
        match self {
            SiteDatabase::Sqlite(path) => path.display().to_string(),
            SiteDatabase::Postgresql(server) => server.site_url(READER),
        }
    }

    /// `[database]` naming `location` (one of the above), as a site writes it in `site.toml`.
    pub fn section(&self, location: &str) -> String {
        let key = match self {
            SiteDatabase::Sqlite(_) => "path",
            SiteDatabase::Postgresql(_) => "url",
        };
        format!("[database]\n{key} = {location:?}\n")
    }
}

/// A test once per backend: `for_each_backend! { fn name(backend) { ... } }` makes the module
/// `name` with the tests `sqlite` and `postgresql`, each calling the body with its
/// [`Backend`].
#[macro_export]
macro_rules! for_each_backend {
    ($(#[$meta:meta])* fn $name:ident($backend:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($backend: $crate::backend::Backend) $body

            #[test]
            fn sqlite() {
                run($crate::backend::Backend::Sqlite)
            }

            #[test]
            fn postgresql() {
                run($crate::backend::Backend::Postgresql)
            }
        }
    };
}
