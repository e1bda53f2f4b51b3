//! MPI families: every difference between MPI ABIs in one place, one module per family behind
//! one interface ([`Family`]), and how the process's MPI is recognised at its first MPI call
//! (which [`crate::hooks::first_call`] asks).
//!
//! The wrappers, `ffi` and the spec's semantics are generated for one family, [`Built`]: the
//! library is compiled once per family (`mpistat_family`, set by build.rs from the package:
//! `mpistat-profiler` for Open MPI 4.x, [`openmpi`]; `mpistat-profiler-mpich` for MPICH 4.x,
//! `mpich`). Before the profiler touches any MPI object, the first MPI
//! call of the process (whichever routine it is, normally `MPI_Init`; routines such as
//! `MPI_Initialized` may come first) asks [`Built`] whether the loaded MPI library is its own
//! ([`Family::recognise`]). If not (another family such as MPICH, an unknown version, two MPI
//! libraries at once, a stub), the process is in *pass-through* mode: counting stays off for
//! good, so every wrapper takes the branch it already takes when counting is paused and forwards
//! its arguments untouched (no status or handle is read, no profiler collective runs, nothing is
//! printed or sent). The profiled path pays nothing for this: the wrappers' one test of their
//! switches ([`crate::gates::plain`]) covers it, and the decision hides behind its cold side (the
//! wrappers' general copies).
//!
//! The next family is one new module implementing [`Family`] (predefined handles,
//! `MPI_PROC_NULL`, `MPI_IN_PLACE`, the status layout, how to recognise it) and a spec column.

mod interface;
#[cfg(mpistat_family = "mpich")]
pub mod mpich;
#[cfg(mpistat_family = "openmpi")]
pub mod openmpi;

pub use interface::{library_version, lower_half, Family, Handle, Predefined, Probe};

use crate::ffi::MPI_Status;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The family this build's wrappers were generated for.
#[cfg(mpistat_family = "openmpi")]
pub type Built = openmpi::OpenMpi;
/// The family this build's wrappers were generated for.
#[cfg(mpistat_family = "mpich")]
pub type Built = mpich::Mpich;

/// `MPI_PROC_NULL` of [`Built`].
pub const PROC_NULL: c_int = Built::PROC_NULL;
/// `MPI_IN_PLACE` of [`Built`].
pub const IN_PLACE: *const c_void = Built::IN_PLACE;
/// `MPI_STATUS_IGNORE` (= `MPI_STATUSES_IGNORE`) of [`Built`].
pub const STATUS_IGNORE: *mut MPI_Status = Built::STATUS_IGNORE;

/// Whether a status (or statuses) argument holds no status to read: `MPI_STATUS(ES)_IGNORE`, or
/// null.
pub fn no_status(status: *const MPI_Status) -> bool {
    status.is_null() || status == STATUS_IGNORE.cast_const()
}

/// A predefined object of [`Built`], typed as the handle it is used as.
pub fn predefined<T: Handle>(object: Predefined) -> Option<T> {
    predefined_key(object).map(T::from_key)
}

/// [`Built::predefined`], remembered ([`PREDEFINED`]).
fn predefined_key(object: Predefined) -> Option<usize> {
    // Every object has a slot ([`Predefined::ALL`], checked by a test); none is no reason to
    // panic in a wrapper.
    let Some(known) = PREDEFINED.get(object as usize) else {
        return Built::predefined(object);
    };
    match known.load(Relaxed) {
        0 => {
            let found = Built::predefined(object)?;
            known.store(found, Relaxed);
            Some(found)
        }
        key => Some(key),
    }
}

/// The predefined objects' handles as first looked up (0: not yet, or not found). A handle
/// stays the same for the process's life; Open MPI's are found by name (`dlsym`), and the names
/// are constants of `.text.finalize`'s first chunk, which a look-up at the end of `MPI_Init`
/// mapped into its peak.
static PREDEFINED: [AtomicUsize; Predefined::ALL.len()] =
    [const { AtomicUsize::new(0) }; Predefined::ALL.len()];

/// Look every predefined object up: before the real `MPI_Init`, where start-up's code is mapped
/// anyway and dropped after.
pub fn look_up_predefined() {
    for object in Predefined::ALL {
        predefined_key(object);
    }
}
