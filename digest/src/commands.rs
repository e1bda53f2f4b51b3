//! The entry points of the commands that bring the configuration, the database and a library
//! together (`ingest`, `escalate`, `rebuild-rollups`, `db migrate`). Each takes its options and
//! writes what it reports to the writers it is given; the binary turns the command line into
//! the options and the outcome into an exit status.

use mpistat_ingest as ingest;
use mpistat_ingest::{escalate, report};
use mpistat_service as site;
use mpistat_service::DatabaseOptions;
use mpistat_store::Location;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Seconds between two reads with `--follow`.
const FOLLOW_INTERVAL: Duration = Duration::from_secs(2);

/// What `mpistat ingest` is told to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestOptions {
    pub database: DatabaseOptions,
    /// Keep reading as the files grow (and are rotated), every [`FOLLOW_INTERVAL`].
    pub follow: bool,
    /// Afterwards, print the stored jobs and everything rejected.
    pub report: bool,
    /// Lines read between two commits (`None`: [`ingest::BATCH_LINES`]).
    pub batch_lines: Option<u64>,
    /// The logs rsyslog writes (their rotated siblings are read too).
    pub files: Vec<PathBuf>,
}

/// What `mpistat ingest` did, for its exit status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    /// Files that could not be read (in the last run, with `--follow`).
    pub unreadable: u64,
}

/// `mpistat ingest`: one run (or one every [`FOLLOW_INTERVAL`] with `follow`), then the report
/// if asked (to `out`); progress and problems go to `err`.
pub fn ingest(
    options: &IngestOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<IngestOutcome> {
    if options.files.is_empty() && options.report {
        // Only the report: a reader, which a read-only database serves.
        let (_, db) = site::load(&options.database, err)?;
        report::print(&db, out)?;
        return Ok(IngestOutcome::default());
    }
    let (config, mut db) = site::load_and_migrate(&options.database, err)?;
    if !config.ingest.log_host.is_empty() {
        db.set_position_host(&config.ingest.log_host);
    }
    let defaults = ingest::Options::from_site(options.files.clone(), &config);
    let run = ingest::Options {
        batch_lines: options.batch_lines.unwrap_or(defaults.batch_lines),
        ..defaults
    };
    let mut outcome = IngestOutcome::default();
    if !run.files.is_empty() {
        loop {
            let stats = ingest::run_once(&mut db, &run, err)?;
            writeln!(
                err,
                "{} files, {} lines: {} records ({} new), {} rejected",
                stats.files_read, stats.lines, stats.records, stats.new_jobs, stats.rejected
            )?;
            outcome.unreadable = stats.unreadable;
            escalate::after_ingest(&config, &db, err)?;
            // What the escalation's reads quarantined: said here, on the lock this holds.
            db.report_quarantined(err)?;
            if !options.follow {
                break;
            }
            std::thread::sleep(FOLLOW_INTERVAL);
        }
    }
    if options.report {
        report::print(&db, out)?;
    }
    Ok(outcome)
}

/// What `mpistat escalate` does to the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Print the list's entries.
    List,
    /// Trace the next runs of `user`'s application `exe` (`captures` times within `days`;
    /// `None`: the site's defaults).
    Add {
        user: String,
        exe: String,
        captures: Option<u32>,
        days: Option<u64>,
    },
    /// Remove `user`'s entries: all of them, or only those for the application `exe`.
    Remove { user: String, exe: Option<String> },
}

/// What `mpistat escalate` is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscalateOptions {
    /// The site configuration (`None`: [`mpistat_site::SiteConfig::path_from_env`]).
    pub config: Option<PathBuf>,
    pub edit: Edit,
}

/// `mpistat escalate list|add|remove` on the list the site configuration names.
pub fn escalate(
    options: &EscalateOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<()> {
    let config = site::config(options.config.as_deref())?;
    let rule = &config.escalation;
    match &options.edit {
        Edit::List => escalate::list(rule, out, err)?,
        Edit::Add {
            user,
            exe,
            captures,
            days,
        } => escalate::add(rule, user, exe, *captures, *days, err)?,
        Edit::Remove { user, exe } => escalate::remove(rule, user, exe.as_deref(), err)?,
    }
    Ok(())
}

/// `mpistat rebuild-rollups`: the rollups made again from the stored jobs; what it did to `err`.
pub fn rebuild_rollups(options: &DatabaseOptions, err: &mut impl Write) -> anyhow::Result<()> {
    let (config, db) = site::load_writer(options)?;
    let start = std::time::Instant::now();
    let counted = mpistat_figures::rollup::rebuild(&db, &config.site_report)?;
    db.report_quarantined(err)?;
    writeln!(
        err,
        "rollups rebuilt from {counted} jobs ({:.1} s)",
        start.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// `mpistat db migrate`: [`site::load_and_migrate`], then every stored record read, those that
/// cannot be used moved to the rejected entries (said on `err`).
pub fn migrate(options: &DatabaseOptions, err: &mut impl Write) -> anyhow::Result<()> {
    let (_, location) = site::config_and_location(options)?;
    let (_, db) = site::load_and_migrate(options, err)?;
    let read = db.quarantine_unusable()?;
    let quarantined = db.take_quarantined();
    for done in &quarantined {
        writeln!(err, "mpistat: {done}")?;
    }
    let schema = match location {
        Location::Sqlite(_) => mpistat_store::MIGRATIONS.len(),
        Location::Postgres(_) => mpistat_store::postgresql::MIGRATIONS.len(),
    };
    writeln!(
        err,
        "database {location}: schema {schema} (up to date), {read} stored records read, {} not \
         usable",
        quarantined.len()
    )?;
    Ok(())
}

/// `mpistat db copy FROM TO`: every row of FROM into the new database TO, one a SQLite file (made
/// private to its owner, as every database mpistat makes) and the other a PostgreSQL URL; how
/// many rows of each table, to `err`.
pub fn copy(from: &str, to: &str, err: &mut impl Write) -> anyhow::Result<()> {
    let (from, to) = (Location::parse(from)?, Location::parse(to)?);
    if let Location::Sqlite(path) = &to {
        mpistat_service::private::owner_only_database(path)?;
    }
    let copied = mpistat_store::copy(&from, &to)?;
    for (table, rows) in &copied.tables {
        writeln!(err, "{table}: {rows} rows")?;
    }
    writeln!(err, "copied {from} into {to}")?;
    Ok(())
}
