//! The `mpistat` command's logic, kept out of `main.rs` so that it can be tested.
//!
//! `cli` is the command line, `show` reads syslog files and decodes them and prints each record
//! as text (`mpistat_record::report`, the same report users get from `MPISTAT_DETAIL`) or as
//! JSON (`json`). `ingest` stores records in the database (crate `mpistat-store`), `mail` builds and sends the
//! weekly mails from it, `site_report` writes the admin web pages and `serve` serves them live
//! with access control, and the site's figures for Prometheus (`metrics`); `site` loads the site
//! configuration for all of them, `html` escapes (crate `mpistat-site`'s).
//! `mpistat analyze` is crate `mpistat-analysis-report`'s, shared with `mpistat-analyze`;
//! `escalate` keeps the escalation list (which jobs the profiler traces) and files the analyses
//! that come back.

pub mod cli;
pub mod commands;
pub mod escalate;
pub use mpistat_site::html;
pub mod ingest;
pub mod json;
pub mod mail;
pub mod metrics;
pub mod plot;
pub mod private;
pub mod render;
pub mod serve;
pub mod show;
pub mod site;
pub mod site_report;
