//! The mpistat job record: what one MPI job leaves behind in syslog.
//!
//! `model` is the data (and `analysis` the analysis record `mpistat analyze --send` writes) (one [`JobRecord`] per job, produced by the profiler at `MPI_Finalize`),
//! `wire` turns a record into syslog lines (compressed by `deflate`, a small raw-DEFLATE encoder sized for a record, checksummed by `crc32` and written by `base64url`, both small for the profiler) and lines back into records (taking only records
//! within `limits`), `report` renders the
//! readable per-job report (profiler detail mode and `mpistat show` print the same), `units`
//! formats numbers for people, `app` names the application a process runs (an interpreter's
//! script), `family` tells the MPI family (ABI) from the record's MPI library. This crate is the only
//! place that knows the wire format, and it does no IO: callers hand it strings.

pub mod analysis;
pub mod app;
pub mod base64url;
pub mod crc32;
pub mod deflate;
pub mod family;
pub mod hostlist;
pub mod limits;
pub mod model;
pub mod report;
pub mod units;
pub mod wire;

pub use analysis::AnalysisRecord;
pub use model::JobIndex;
pub use model::{Binding, JobRecord, RoutineStats, Stat};
pub use wire::{
    decode, encode, encode_analysis, Assembler, CompleteJob, Decoded, DecodedJob, IndexedJob,
    Problem,
};
