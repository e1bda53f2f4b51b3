//! The site as installed: the Debian packages, the systemd units with their privileges, syslog
//! relays, Slurm, jobs across emulated nodes, and syslog trouble that must never break a job.
//!
//! One test binary (cargo finds `tests/deploy/main.rs`), one module per file beside it: a test's
//! name is `<file>::<test>` (`cargo test --release -p mpistat-e2e --test deploy -- <file>::`).

mod nodes;
mod package;
mod relay;
mod slurm;
mod syslog_trouble;
mod units;
