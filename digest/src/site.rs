//! The site configuration and database the `ingest` and `digest` commands work with.

use crate::cli::DatabaseArgs;
use crate::db::Database;
use anyhow::Context;
use mpistat_site::SiteConfig;

/// Load the site configuration (problems go to stderr: a bad setting keeps its default) and
/// open the database it names (or `--database`), creating its directory if needed.
pub fn load(args: &DatabaseArgs) -> anyhow::Result<(SiteConfig, Database)> {
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
