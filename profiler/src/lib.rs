//! libmpistat_openmpi: the always-on MPI profiling layer, built for one MPI family (Open MPI).
//!
//! Loaded by the front `libmpistat.so` (`front/`; preloaded or linked with `-lmpistat` ahead of
//! `-lmpi` in every process) at the first MPI call of an Open MPI process, or preloaded
//! directly, it exports `MPI_X` and `PMPI_X` for every routine of `mpi.h`, counts each outermost call (calls,
//! time, counts, bytes, message sizes) in per-thread tables, and at `MPI_Finalize` reduces the
//! tables to rank 0, which sends one job record to syslog.
//!
//! Module map: `generated/` (wrappers and routine table, made by `mpistat-wrapgen` from
//! `spec/mpi.spec`; do not edit), `rt` (hot path), `threads` (each thread's state and counter tables), `traffic` (bytes from arguments, out of
//! line), `next` (finding the real routines), `clock`, `hooks` (Init, Finalize, Abort, Pcontrol),
//! `family` (what differs between MPI ABIs, and recognising the process's MPI: a foreign one is
//! passed through untouched), `peers` (whether every rank of the job has the library), `analyse`
//! (a traced job's analysis, started as the job's user at exit).

// MPI handles (communicators, datatypes, statuses) are raw pointers that we only pass back to MPI;
// clippy cannot know that and would have every function taking a handle be `unsafe`.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod analyse;
pub mod callsite;
pub mod claim;
pub mod clock;
pub mod counters;
pub mod detail;
pub mod facts;
pub mod family;
pub mod ffi;
pub mod footprint;
pub mod gates;
pub mod generated;
pub mod guard;
pub mod hooks;
pub mod job;
pub mod mpi;
pub mod next;
pub mod node;
pub mod pcontrol;
pub mod peers;
pub mod places;
pub mod pmi1;
pub mod rawevents;
pub mod requests;
pub mod rt;
pub mod slurm;
pub mod spec;
pub mod spin;
pub mod superstep;
pub mod syslog;
pub mod tally;
pub mod terminate;
pub mod thread_parts;
pub mod threads;
pub mod trace;
pub mod traffic;
pub mod tree;
