//! The `mpistat` command's logic, kept out of `main.rs` so that it can be tested.
//!
//! `cli` is the command line, `show` reads syslog files and decodes them and prints each record
//! as text (`mpistat_record::report`, the same report users get from `MPISTAT_DETAIL`) or as
//! JSON (`json`).

pub mod cli;
pub mod json;
pub mod show;
