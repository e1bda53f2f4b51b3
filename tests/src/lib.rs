//! Shared harness for the end-to-end tests: real parts, no mocks.
//!
//! * [`Syslogd`]: a real `rsyslogd` listening on a private socket in a fresh temporary directory,
//!   writing our facility raw to a file that the tests read and decode with the real decoder.
//! * [`program`] / [`Program`]: the test programs of `tests/programs/`, compiled with `mpicc` /
//!   `mpifort` once per test binary.
//! * [`Job`]: a real `mpirun` job, bare or with `libmpistat.so` preloaded, killed after a timeout
//!   so that a hang fails the test instead of hanging CI.
//! * [`RankValues`] and [`assert_routine`]: exact expectations on a record's per-routine numbers.
//! * [`webdriver::Browser`]: one headless Chromium (through `chromedriver`) that loads many pages.
//! * [`supersteps::MeasuredImbalance`]: the imbalance figures from what `imbalance.c` measured.
//! * [`rsyslog::RsyslogDaemon`]: a private rsyslogd with a shipped configuration.
//! * [`units::Unit`]: a shipped systemd unit run with the privileges it gives.
//! * [`machine::Machine`]: a copy-on-write view of this host to install packages into.
//! * [`User`]: an unprivileged local user (made with `useradd`) that jobs and `mpistat` run as.
//!
//! MPI jobs oversubscribe a small machine, so every test that runs one takes [`serial`] first:
//! tests of one binary then run one job at a time (cargo runs test binaries one after another).

pub mod backend;
pub mod certs;
pub mod command;
pub mod expect;
pub mod job;
pub mod machine;
pub mod postgresql;
pub mod programs;
pub mod relay;
pub mod rsyslog;
pub mod serve;
pub mod slurm;
pub mod smtp;
pub mod supersteps;
pub mod syslogd;
pub mod units;
pub mod users;
pub mod webdriver;
pub mod workspace;

// The tests name these at the crate's root (`use mpistat_e2e::*`).
pub use command::*;
pub use expect::*;
pub use job::*;
pub use mpistat_testkit::scratch::Scratch;
pub use programs::*;
pub use smtp::*;
pub use syslogd::*;
pub use users::*;
pub use workspace::*;
