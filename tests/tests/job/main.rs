//! What a rank does under the profiler: exact counts (C, Fortran, threads, large counts), a PMPI
//! tool, counters, imbalance, detail mode, partial jobs, big records, real applications, the
//! front and the libraries it loads or leaves alone, the footprint, and the harness itself.
//!
//! One test binary (cargo finds `tests/job/main.rs`), one module per file beside it: a test's
//! name is `<file>::<test>` (`cargo test --release -p mpistat-e2e --test job -- <file>::`).

mod applications;
mod basic;
mod big_records;
mod counters;
mod counting;
mod default_linking;
mod detail;
mod footprint;
mod foreign_mpi;
mod fortran;
mod front;
mod harness;
mod hpcc;
mod imbalance;
mod non_mpi;
mod partial;
mod pmpi_tool;
mod threads;
mod waitany_order;
