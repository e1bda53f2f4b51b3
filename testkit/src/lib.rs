//! What mpistat's tests share, as a crate instead of files included by `#[path]`: the digest's
//! tests, the end-to-end tests (`tests/`), the record's tests and the benchmarks' record generator
//! (`digest/examples/gen_records.rs`) take it as a dev-dependency. No shipped crate depends on it.
//!
//! * [`synthetic`]: deterministic job records of invented users and their syslog lines, varied
//!   enough for the mail and the admin pages; with feature `ingest`, a database filed from them.
//! * [`forge`]: wire lines the record's encoder does not write (version 1, forged indexes).
//! * [`counting`]: a global allocator that counts, for the tests that bound memory.
//! * [`known`]: a job of known figures whose sums the metrics tests work out by hand.
//! * [`dashboard`]: the shipped Grafana dashboard's queries.
//! * [`scratch`]: a test's scratch directory, removed when the test passes.

pub mod counting;
pub mod dashboard;
pub mod forge;
pub mod known;
pub mod scratch;
pub mod synthetic;
