//! What the `mpistat` binary brings together, kept out of `main.rs` so that it can be tested:
//! `commands` joins the configuration, the database and a library for the commands that are
//! glue (`ingest`, `escalate`, `rebuild-rollups`, `db`); `show` reads syslog files, decodes them
//! and prints each record as text (`mpistat_record::report`, the same report users get from
//! `MPISTAT_DETAIL`) or as JSON (`json`).
//!
//! The site side's work is in library crates, each of one job: `mpistat-ingest` (syslog into the
//! store, escalation), `mpistat-mail` (the weekly mails), `mpistat-pages` (the admin pages,
//! static and live, and the metrics), `mpistat-render` (what mail and pages both render),
//! `mpistat-service` (the site configuration and database every command opens). The command
//! line (clap, `cli.rs`), exit codes and where output goes are the binary's (`main.rs`).
//! `mpistat analyze` is crate `mpistat-analysis-report`'s, shared with `mpistat-analyze`.

pub mod commands;
pub mod json;
pub mod show;
