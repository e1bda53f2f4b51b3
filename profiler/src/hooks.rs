//! The routines with a job-level meaning: `MPI_Init(_thread)`, `MPI_Finalize`, `MPI_Abort`,
//! `MPI_Pcontrol`. The generated wrappers call these hooks around the real routine.
//! (Stub: filled in by the runtime work.)

use std::ffi::c_int;

/// After the real `MPI_Init` / `MPI_Init_thread` returned `rc` (and after its call was counted).
/// `provided` is the thread level (`MPI_THREAD_SINGLE` = 0 for `MPI_Init`, or when the call
/// failed); `via_pmpi` says the call came in through `PMPI_Init*`; `argc` is the caller's argument.
pub fn after_init(_rc: c_int, _provided: c_int, _via_pmpi: bool, _argc: *const c_int) {}

/// Before the real `MPI_Finalize`: reduce, build and send the record.
pub fn before_finalize() {}

/// Before the real `MPI_Abort`: send a partial record with this rank's data.
pub fn before_abort(_errorcode: c_int) {}
