//! The routines with a job-level meaning: `MPI_Init(_thread)`, `MPI_Finalize`, `MPI_Abort`,
//! `MPI_Pcontrol`. The generated wrappers call these hooks around the real routine.
//! (Stub: filled in by the runtime work.)

use std::ffi::c_int;

/// After the real `MPI_Init` / `MPI_Init_thread` returned `rc`. `provided` is the thread level
/// (`MPI_THREAD_SINGLE` for `MPI_Init`).
pub fn after_init(_rc: c_int, _provided: c_int) {}

/// Before the real `MPI_Finalize`: reduce, build and send the record.
pub fn before_finalize() {}

/// Before the real `MPI_Abort`: send a partial record with this rank's data.
pub fn before_abort(_errorcode: c_int) {}
