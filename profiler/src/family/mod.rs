//! MPI families: every difference between MPI ABIs in one place, one module per family behind
//! one interface ([`Family`]), and the recognition of the process's MPI at its first MPI call.
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

#[cfg(mpistat_family = "mpich")]
pub mod mpich;
#[cfg(mpistat_family = "openmpi")]
pub mod openmpi;

use crate::ffi::MPI_Status;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

/// The family this build's wrappers were generated for.
#[cfg(mpistat_family = "openmpi")]
pub type Built = openmpi::OpenMpi;
/// The family this build's wrappers were generated for.
#[cfg(mpistat_family = "mpich")]
pub type Built = mpich::Mpich;

/// An MPI handle as the profiler's own code treats it: copied, compared, used as a key, never
/// looked into. Open MPI's handles are pointers, MPICH's are `int`s.
pub trait Handle: Copy + PartialEq {
    /// A value that is no MPI object in either family (the null pointer; MPICH's handle 0, of
    /// its invalid kind): "no handle" in the profiler's own fields and output arguments.
    const NONE: Self;
    /// The handle as a number, for maps and atomics (the same handle gives the same key).
    fn key(self) -> usize;
    /// The handle whose [`Handle::key`] is `key`.
    fn from_key(key: usize) -> Self;
    fn is_none(self) -> bool {
        self == Self::NONE
    }
}

impl<T> Handle for *mut T {
    const NONE: Self = std::ptr::null_mut();
    fn key(self) -> usize {
        self as usize
    }
    fn from_key(key: usize) -> Self {
        key as *mut T
    }
}

impl Handle for c_int {
    const NONE: Self = 0;
    fn key(self) -> usize {
        self as u32 as usize
    }
    fn from_key(key: usize) -> Self {
        key as u32 as c_int
    }
}

/// Predefined MPI objects the profiler itself uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predefined {
    CommWorld,
    CommNull,
    InfoNull,
    RequestNull,
    Uint64,
    LongInt,
    OpSum,
    OpMin,
    OpMax,
    OpMaxLoc,
    OpBitOr,
}

/// What a family is to the profiler.
pub trait Family {
    /// How records and messages name the family.
    const NAME: &'static str;
    /// The sonames of the family's MPI library, for finding it when it was opened `RTLD_LOCAL`.
    const LIBRARIES: &'static [&'static CStr];
    /// `MPI_PROC_NULL`: communication with it moves nothing.
    const PROC_NULL: c_int;
    /// `MPI_IN_PLACE`: a marker address, never dereferenced.
    const IN_PLACE: *const c_void;
    /// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE` (the same address in both families): a
    /// marker, never dereferenced.
    const STATUS_IGNORE: *mut MPI_Status;
    /// Whether the family's `MPI_Init` talks PMI-1 to its launcher over `PMI_FD` (MPICH under
    /// Hydra, [`crate::pmi1`]): then, and only then, may the profiler use that socket itself
    /// before the real `MPI_Init` ([`crate::peers::announce_before_init`]). Open MPI never
    /// touches it: a process that opened a PMI dialog and exits without finalizing it counts
    /// as failed to Hydra.
    const PMI1_AT_INIT: bool;
    /// Whether the process's MPI library is this family at a version the profiler knows; the
    /// reason if not. Called once, before `MPI_Init` may have run: it must not use MPI objects.
    fn recognise(probe: &Probe) -> Result<(), String>;
    /// Whether the `MPI_Init`/`MPI_Init_thread` that just returned was called by the family's
    /// Fortran bindings (`mpif.h`, `use mpi`, `use mpi_f08`): `via_pmpi` if it came in as
    /// `PMPI_Init*`, with the caller's `argc`.
    ///
    /// # Safety
    /// `argc` is null or the caller's valid pointer.
    unsafe fn fortran_init(via_pmpi: bool, argc: *const c_int) -> bool;
    /// The handle of a predefined object (its [`Handle::key`]), if the library has it.
    fn predefined(object: Predefined) -> Option<usize>;
    /// Bytes that arrived according to a successful receive's `status` (not null).
    ///
    /// # Safety
    /// `status` points to a status the MPI library filled.
    unsafe fn received_bytes(status: *const MPI_Status) -> u64;
    /// Whether a completed receive's `status` (not null) says it was cancelled.
    ///
    /// # Safety
    /// As for [`Family::received_bytes`].
    unsafe fn status_cancelled(status: *const MPI_Status) -> bool;
    /// The source rank of a successful receive's `status` (not null): the standard's public
    /// field, in every family.
    ///
    /// # Safety
    /// As for [`Family::received_bytes`].
    unsafe fn status_source(status: *const MPI_Status) -> c_int {
        (*status).MPI_SOURCE
    }
    /// The tag of a successful receive's `status` (not null), likewise.
    ///
    /// # Safety
    /// As for [`Family::received_bytes`].
    unsafe fn status_tag(status: *const MPI_Status) -> c_int {
        (*status).MPI_TAG
    }
}

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
    Built::predefined(object).map(T::from_key)
}

/// What the process has loaded, as far as recognition may look: symbols and the objects that
/// define them, never a call into a library not yet known to be the built family's.
pub struct Probe {
    /// The `PMPI_Init` the wrappers forward to, and the file that defines it.
    pub init: Option<Symbol>,
    /// The marker symbols of known families (see [`mpistat_abi::Known::marker`]) that the process
    /// has, with the family's name: two of them mean two MPI libraries at once.
    pub markers: Vec<(&'static str, Symbol)>,
}

/// The process has the MPI library of the family named `name` and no other, and the wrappers
/// forward to it (`PMPI_Init` is defined by the object that has the family's marker).
pub fn only(name: &str, probe: &Probe) -> Result<(), String> {
    let init = probe.init.as_ref().ok_or("no PMPI_Init in the process")?;
    match probe.markers.as_slice() {
        [(family, marker)] if *family == name => {
            if marker.object == init.object {
                Ok(())
            } else {
                Err(format!(
                    "PMPI_Init is in {}, {name}'s functions in {}",
                    init.object, marker.object
                ))
            }
        }
        [] => Err(format!("unknown MPI library {}", init.object)),
        [(family, _)] => Err(format!("{family} ({})", init.object)),
        several => {
            let names: Vec<&str> = several.iter().map(|(f, _)| *f).collect();
            Err(format!("several MPI libraries: {}", names.join(", ")))
        }
    }
}

/// A symbol found in the process: where it is defined.
pub struct Symbol {
    /// The path of the loaded object defining it (`dladdr`).
    pub object: String,
}

impl Probe {
    fn take() -> Probe {
        Probe {
            init: Symbol::next(c"PMPI_Init"),
            markers: mpistat_abi::KNOWN
                .iter()
                .filter_map(|family| Some((family.name, Probe::find(family.marker)?)))
                .collect(),
        }
    }

    /// A data or code symbol anywhere in the process (the global scope, or a libmpi opened
    /// `RTLD_LOCAL`).
    fn find(name: &CStr) -> Option<Symbol> {
        Symbol::at(crate::next::mpi_object(name))
    }
}

impl Symbol {
    /// The next definition after this library (what a wrapper forwards to).
    fn next(name: &CStr) -> Option<Symbol> {
        Symbol::at(crate::next::lookup(name))
    }

    fn at(addr: *mut c_void) -> Option<Symbol> {
        if addr.is_null() {
            return None;
        }
        // SAFETY: dladdr only reads the loader's tables; fname is a NUL-terminated path owned by
        // the loader.
        let object = unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            if libc::dladdr(addr, &mut info) == 0 || info.dli_fname.is_null() {
                String::new()
            } else {
                CStr::from_ptr(info.dli_fname)
                    .to_string_lossy()
                    .into_owned()
            }
        };
        Some(Symbol { object })
    }
}

/// The decision has been made (then [`crate::gates::COUNTING`] stays off only if paused or foreign).
static DECIDED: AtomicBool = AtomicBool::new(false);

/// Called by [`crate::rt::enter`] when counting is off: at the process's first MPI call, decide
/// whether the MPI library is [`Built`]'s and, if so and the site profiles jobs (its
/// configuration is read now), turn counting on. Returns whether counting is on now. Later
/// calls (counting paused by `MPI_Pcontrol(0)`, or pass-through) return at once; they come from
/// the wrappers' general copies, beside which this sits (`.text.warm`).
#[cold]
#[inline(never)]
#[link_section = ".text.warm.mpistat"]
pub fn first_call() -> bool {
    if !DECIDED.load(Ordering::Acquire) {
        decide();
    }
    crate::gates::is_on(crate::gates::COUNTING)
}

fn decide() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The reason a library is not recognised is not used yet: pass-through sends nothing.
        // A job that opts out is passed through before anything is looked at (the front, when
        // it is there, loaded no implementation: this is for one preloaded or linked directly).
        let ours = !mpistat_abi::opted_out()
            && crate::guard::quietly(|| Built::recognise(&Probe::take()).is_ok()) == Some(true);
        if ours {
            if crate::guard::quietly(crate::hooks::recognised).unwrap_or(false) {
                crate::peers::announce_at_init();
                crate::gates::set(crate::gates::COUNTING, true);
            }
        } else {
            crate::hooks::pass_through();
        }
        DECIDED.store(true, Ordering::Release);
    });
}
