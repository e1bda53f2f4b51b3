//! `MPI_Pcontrol`, the one wrapper written by hand (its C prototype is variadic): counted as any
//! routine ([`crate::rt`]), then [`crate::hooks`] applies its level.

use crate::generated::routines::id;
use crate::hooks::{apply_pcontrol, PCONTROL};
use crate::rt;
use crate::traffic::Traffic;
use std::ffi::c_int;

/// `MPI_Pcontrol(level, ...)`: 0 pauses counting, 1 resumes it, 2 writes this rank's subtotals.
/// The C prototype is variadic; on the x86-64 and AArch64 C ABIs a callee that reads only the
/// first (fixed) argument may be defined without the `...`, and MPI ignores the rest anyway.
/// With the hot wrappers (footprint.rs): programs instrumented for mpiP or IPM pause and resume
/// around regions, often inside their loops, and in `.text` each call kept one or two more
/// 64 KiB chunks of code resident in every rank. One copy for both names (the chunk is nearly
/// full).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
unsafe fn pcontrol(via_pmpi: bool, level: c_int) -> c_int {
    let next: unsafe extern "C" fn(c_int, ...) -> c_int = std::mem::transmute(PCONTROL.get());
    let Some(call) = rt::enter(via_pmpi, true) else {
        let rc = next(level);
        apply_pcontrol(level);
        return rc;
    };
    let rc = next(level);
    rt::leave(
        call,
        None,
        id::MPI_Pcontrol,
        rc,
        Traffic::None,
        crate::family::Handle::NONE,
        rt::After::Nothing,
    );
    apply_pcontrol(level);
    rc
}

/// # Safety
/// Called by MPI programs as `MPI_Pcontrol(level, ...)`.
#[no_mangle]
#[link_section = ".text.hot.mpistat"]
pub unsafe extern "C" fn MPI_Pcontrol(level: c_int) -> c_int {
    pcontrol(false, level)
}

/// # Safety
/// Called by MPI programs and bindings as `PMPI_Pcontrol(level, ...)`.
#[no_mangle]
#[link_section = ".text.hot.mpistat"]
pub unsafe extern "C" fn PMPI_Pcontrol(level: c_int) -> c_int {
    pcontrol(true, level)
}
