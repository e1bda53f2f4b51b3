//! The site configuration and database the `ingest` and `digest` commands work with.

use crate::cli::DatabaseArgs;
use crate::db::Database;
use anyhow::Context;
use mpistat_site::SiteConfig;

/// Load the site configuration (problems go to stderr: a bad setting keeps its default) and
/// open the database it names (or `--database`), creating its directory if needed; its
/// rollups are built if they are not yet or are out of date ([`crate::rollup::ensure_built`]).
pub fn load(args: &DatabaseArgs) -> anyhow::Result<(SiteConfig, Database)> {
    let (config, db) = load_without_rollups(args)?;
    // A reader that cannot write the database still reads the rollups as they are.
    if let Err(e) = crate::rollup::ensure_built(&db, &config.site_report) {
        eprintln!("mpistat: the rollups are not rebuilt: {e:#}");
    }
    db.report_quarantined(&mut std::io::stderr())?;
    Ok((config, db))
}

/// [`load`] without looking at the rollups.
pub fn load_without_rollups(args: &DatabaseArgs) -> anyhow::Result<(SiteConfig, Database)> {
    let path = args
        .config
        .clone()
        .unwrap_or_else(SiteConfig::path_from_env);
    let (config, problems) = if path.exists() || args.config.is_some() {
        SiteConfig::load(&path)
    } else {
        (SiteConfig::default(), Vec::new())
    };
    for problem in problems {
        eprintln!("mpistat: {problem}");
    }
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
