//! Trace capture and analysis: traced jobs, OTF2 out and in, the analysis as an MPI program,
//! escalation from a flagged pattern to a trace.
//!
//! One test binary (cargo finds `tests/trace/main.rs`), one module per file beside it: a test's
//! name is `<file>::<test>` (`cargo test --release -p mpistat-e2e --test trace -- <file>::`).

mod escalation;
mod otf2;
mod parallel_analysis;
mod spill;
mod trace;
