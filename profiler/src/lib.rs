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

/// A C string in `.text.init`, beside the code that passes it to PMIx, PMI-1 or `getenv` inside
/// `MPI_Init` and at its end: as a literal it lay with the crate's anonymous constants in
/// `.text.finalize`'s first chunk, which those calls then mapped into `MPI_Init`'s peak
/// (docs/footprint.md, "initpeak"). Each use is a static of its own: name a text used twice.
macro_rules! init_c_str {
    ($text:literal) => {{
        const LEN: usize = $text.len();
        #[link_section = ".text.init.mpistat"]
        static BYTES: [u8; LEN + 1] = {
            let mut bytes = [0; LEN + 1];
            let mut i = 0;
            while i < LEN {
                assert!($text.as_bytes()[i] != 0, "a C string has no NUL inside");
                bytes[i] = $text.as_bytes()[i];
                i += 1;
            }
            bytes
        };
        // SAFETY: the text's bytes, none of them NUL, and a NUL after them.
        unsafe { ::std::ffi::CStr::from_bytes_with_nul_unchecked(&BYTES) }
    }};
}

/// Bytes in `.text.init`, as [`init_c_str!`] for what is not a C string (PMI-1's requests and
/// field names, which the end of `MPI_Init` writes and compares under MPICH).
macro_rules! init_bytes {
    ($bytes:literal) => {{
        #[link_section = ".text.init.mpistat"]
        static BYTES: [u8; $bytes.len()] = *$bytes;
        let bytes: &'static [u8] = &BYTES;
        bytes
    }};
}

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
