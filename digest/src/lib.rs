//! The `mpistat` command's logic, kept out of `main.rs` so that it can be tested.
//!
//! `cli` is the command line, `show` reads syslog files and decodes them and prints each record
//! as text (`mpistat_record::report`, the same report users get from `MPISTAT_DETAIL`) or as
//! JSON (`json`). `ingest` stores records in the database (crate `mpistat-store`), `mail` builds and sends the
//! weekly mails from it, `site_report` writes the admin web pages and `serve` serves them live
//! with access control, and the site's figures for Prometheus (`metrics`); `site` loads the site
//! configuration for all of them, `html` escapes.
//! `analyze` reports the replay analysis of a trace directory (crate `mpistat-analysis`) or of
//! an OTF2 archive (`trace_input`, which also exports traces as OTF2), and
//! `send` sends its summary to syslog as the trace owner's record (`analyze --send`);
//! `escalate` keeps the escalation list (which jobs the profiler traces) and files the analyses
//! that come back.

pub mod analyze;
pub mod cli;
pub mod commands;
pub mod escalate;
pub mod html;
pub mod ingest;
pub mod json;
pub mod mail;
pub mod metrics;
pub mod perfetto;
pub mod plot;
pub mod private;
pub mod render;
pub mod send;
pub mod serve;
pub mod show;
pub mod site;
pub mod site_report;
pub mod trace_input;
