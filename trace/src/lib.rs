//! The mpistat trace: its event model, its file format and the event encoding, in one copy for
//! the profiler that writes traces and the analysis (and the OTF2 converter) that reads them.
//!
//! [`model`] is what a trace holds (per rank, and the definitions); [`tracefile`] the files of a
//! trace directory (writer, and a reader that trusts nothing it reads); [`unify`] makes the
//! profiler's per-rank definitions one trace's; [`hash`] the fast map both sides use;
//! [`parallel`] the per-file (per-rank) work on all cores.

pub mod error;
pub mod hash;
pub mod model;
pub mod parallel;
pub mod tracefile;
pub mod unify;
