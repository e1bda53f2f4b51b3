//! The site configuration and database the site-side commands (`ingest`, `digest`,
//! `site-report`, `serve`, `rebuild-rollups`, `escalate`, `db`) work with: readers open it with
//! the store's read handle, writers with its write handle, and only ingest and `mpistat db
//! migrate` upgrade it; and the files the site side writes, kept private to it ([`private`]).
//! Its own crate, not `mpistat-site`'s: the in-job library links `mpistat-site`, and must not
//! link a database.

pub mod private;

use mpistat_site::{ConfigProblem, Database, SiteConfig};
use mpistat_store::{Location, ReadStore, WriteStore};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where a site-side command finds its configuration and its database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatabaseOptions {
    /// The site configuration (`None`: [`SiteConfig::path_from_env`]).
    pub config: Option<PathBuf>,
    /// The database, a SQLite file or a `postgresql://` URL (`None`: `[database]` of the site
    /// configuration).
    pub database: Option<String>,
}

/// Why a site-side command could not open its configuration or its database.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The configuration cannot be used as it is: the binary exits with `EX_CONFIG`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] mpistat_store::Error),
    #[error(transparent)]
    Rollups(#[from] mpistat_figures::Error),
    #[error(transparent)]
    Private(#[from] private::PrivateError),
    #[error("cannot create {}", .dir.display())]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// What the command reports could not be written.
    #[error(transparent)]
    Report(#[from] std::io::Error),
}

/// Load the site configuration (refusing one with problems, [`config`]) and open the database
/// it names (or `--database`) to read ([`ReadStore`]: read-only, never upgraded nor changed).
/// Rollups that are out of date (a database upgraded from before them, or other critical-job
/// thresholds) are read as they are, and said on `err`: the write side rebuilds them.
pub fn load(
    args: &DatabaseOptions,
    err: &mut impl Write,
) -> Result<(SiteConfig, ReadStore), OpenError> {
    let (config, location) = config_and_location(args)?;
    let db = ReadStore::open_at(&location)?;
    say_if_rollups_out_of_date(&db, &config, err)?;
    Ok((config, db))
}

/// Say on `err` if the rollups of `db` are out of date ([`mpistat_figures::rollup::out_of_date`]): a
/// reader reads them as they are.
pub fn say_if_rollups_out_of_date(
    db: &ReadStore,
    config: &SiteConfig,
    err: &mut impl Write,
) -> Result<(), OpenError> {
    if let Some(why) = mpistat_figures::rollup::out_of_date(db, &config.site_report)? {
        writeln!(
            err,
            "mpistat: {why}: the rollups are read as they are (mpistat ingest, or `mpistat db \
             migrate`, rebuilds them)"
        )?;
    }
    Ok(())
}

/// The site configuration and the database to write, as it is ([`open_writer`]):
/// `rebuild-rollups`, the mails' bookkeeping.
pub fn load_writer(args: &DatabaseOptions) -> Result<(SiteConfig, WriteStore), OpenError> {
    let (config, location) = config_and_location(args)?;
    Ok((config, open_writer(&location, false)?))
}

/// The site configuration and the database to write, created if needed and brought up to date
/// ([`open_writer`] with migrations), its rollups rebuilt if they are out of date
/// ([`mpistat_figures::rollup::ensure_built`]): the explicit step of ingest's start and `mpistat db
/// migrate`. Records the store quarantined are said on `err`.
pub fn load_and_migrate(
    args: &DatabaseOptions,
    err: &mut impl Write,
) -> Result<(SiteConfig, WriteStore), OpenError> {
    let (config, location) = config_and_location(args)?;
    let db = open_writer(&location, true)?;
    mpistat_figures::rollup::ensure_built(&db, &config.site_report)?;
    db.report_quarantined(err)?;
    Ok((config, db))
}

/// Open the database at `location` to write, brought up to date if `migrate`, else refused
/// unless it has this mpistat's schema. A SQLite file is private to its owner whatever the umask
/// (every user's jobs are in it), created with its directory if `migrate`; a PostgreSQL
/// server keeps its own access rules (docs/store.md).
pub fn open_writer(location: &Location, migrate: bool) -> Result<WriteStore, OpenError> {
    if let Location::Sqlite(path) = location {
        if migrate {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
                    dir: dir.to_path_buf(),
                    source,
                })?;
            }
        }
        if migrate || path.exists() {
            private::owner_only_database(path)?;
        }
    }
    Ok(if migrate {
        WriteStore::open_at(location)?
    } else {
        WriteStore::open_current_at(location)?
    })
}

/// Why a site-side command does not start: its configuration cannot be used as it is. Only the
/// in-job library (and what it starts) runs on defaults; a site command on defaults would store
/// into, mail from or serve another database than the site's.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to start: the site configuration {} cannot be used as it is (only the in-job \
     library falls back to defaults; fix it, or name another with --config or MPISTAT_CONFIG):{}",
    .path.display(),
    .problems.iter().map(|p| format!("\n  {p}")).collect::<String>()
)]
pub struct ConfigError {
    pub path: PathBuf,
    pub problems: Vec<ConfigProblem>,
}

/// The site configuration at `explicit` (`--config`), else at `$MPISTAT_CONFIG`, else at
/// [`mpistat_site::DEFAULT_PATH`]: an error if it is missing, unreadable or has any problem.
pub fn config(explicit: Option<&Path>) -> Result<SiteConfig, ConfigError> {
    let path = explicit.map_or_else(SiteConfig::path_from_env, Path::to_path_buf);
    match SiteConfig::load(&path) {
        (config, problems) if problems.is_empty() => Ok(config),
        (_, problems) => Err(ConfigError { path, problems }),
    }
}

/// The site configuration and the database it names (or `--database`): a SQLite file or a
/// PostgreSQL URL.
pub fn config_and_location(args: &DatabaseOptions) -> Result<(SiteConfig, Location), OpenError> {
    let config = config(args.config.as_deref())?;
    let location = match &args.database {
        Some(text) => Location::parse(text)?,
        None => match config.database.database() {
            Database::Sqlite(path) => Location::Sqlite(path),
            Database::Postgres(url) => Location::parse(&url)?,
        },
    };
    Ok((config, location))
}
