//! The `mpistat` command's logic, kept out of `main.rs` so that it can be tested.
//!
//! `cli` is the command line, `show` reads syslog files and decodes them, `text` and `json` are
//! the two ways `show` prints a record, `units` formats numbers for people.

pub mod cli;
pub mod json;
pub mod show;
pub mod text;
pub mod units;
