//! The site configuration and database the site-side commands (`ingest`, `digest`,
//! `site-report`, `serve`, `rebuild-rollups`, `escalate`) work with.

use crate::cli::DatabaseArgs;
use crate::db::Database;
use anyhow::Context;
use mpistat_site::{ConfigProblem, SiteConfig};
use std::path::{Path, PathBuf};

/// Load the site configuration (refusing one with problems, [`config`]) and open the database
/// it names (or `--database`), creating its directory if needed; its rollups are built if they are not yet or are out of date ([`crate::rollup::ensure_built`]).
pub fn load(args: &DatabaseArgs) -> anyhow::Result<(SiteConfig, Database)> {
    let (config, db) = load_without_rollups(args)?;
    // A reader that cannot write the database still reads the rollups as they are.
    if let Err(e) = crate::rollup::ensure_built(&db, &config.site_report) {
        eprintln!("mpistat: the rollups are not rebuilt: {e:#}");
    }
    db.report_quarantined(&mut std::io::stderr())?;
    Ok((config, db))
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

/// [`load`] without looking at the rollups.
pub fn load_without_rollups(args: &DatabaseArgs) -> anyhow::Result<(SiteConfig, Database)> {
    let config = config(args.config.as_deref())?;
    let database = args
        .database
        .clone()
        .unwrap_or_else(|| config.database.path.clone());
    if let Some(dir) = database.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let db = Database::open(&database)?;
    Ok((config, db))
}
