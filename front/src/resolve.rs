//! Each export's first call: where it goes, chosen once for the process, filled slot by slot.
//!
//! Exactly one known family's MPI library in the process (its marker symbol, see
//! `mpistat_abi::Known::marker`) and its implementation next to this library, which accepts the
//! contract (`abi::PROTOCOL`): every export goes to the implementation's routine of that
//! name, or to the next definition for a name the implementation lacks. Otherwise (no or several
//! MPI families, no implementation file, another contract version, any error) every export goes
//! to the next definition after this library, which is what the process would have called
//! without us: pass-through, nothing counted, nothing sent, nothing printed.
//!
//! A job whose environment opts out (`MPISTAT=off`, see `abi::opted_out`) is passed through
//! before anything else is looked at.
//!
//! The implementation is opened only from this library's own directory (never a search path the
//! user controls), `RTLD_NOW | RTLD_LOCAL`, so its symbols never enter the global scope.
//!
//! A slot is filled at its own export's first call, not all at the process's first: that call is
//! the moment the loader has just bound the routine (its lazy binding read this library's
//! dynamic symbol tables, a 64 KiB chunk), so the implementation's `abi::BOUND` drops those pages
//! right there (with this library's code that ran, and what `dlsym` read of the implementation),
//! and a routine a program first calls late in the run leaves nothing resident.

use crate::names::name;
use crate::SLOTS;
use mpistat_abi::{self as abi, Attach, KNOWN};
use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// Called by `lazy_common` with a slot index at its export's first call (and again while the
/// slot is unfilled, by racing threads): choose where exports go (once, whichever thread comes
/// first; the others wait), fill this slot and return where it goes. A name nothing defines
/// stops the process with a message, as calling on would jump to address 0; a library loaded
/// since the choice may define it (Open MPI's `MPI_Init` loads libpmix), so it is looked up now.
pub(crate) extern "C" fn resolve(index: u32) -> *mut c_void {
    static CHOICE: OnceLock<Choice> = OnceLock::new();
    let choice = CHOICE.get_or_init(Choice::make);
    let i = index as usize;
    let target =
        std::panic::catch_unwind(|| choice.target(name(i))).unwrap_or(std::ptr::null_mut());
    if target.is_null() {
        abi::missing(name(i));
    }
    SLOTS[i].store(target, Ordering::Release);
    target
}

/// The implementation's `abi::BOUND` (null if none, or before the choice), which `lazy_common`
/// calls after [`resolve`] returned: outside this library's `.text`, whose pages it drops with the
/// rest of the read-only pages the first call mapped.
pub(crate) static BOUND: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// The implementation's `abi::FIRST_CALL` (null if none, or before the choice), which
/// `lazy_common` calls before [`resolve`].
pub(crate) static FIRST_CALL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Where the exports go, chosen at the process's first call of any.
struct Choice {
    /// The implementation (a handle from `dlopen`), `None` for pass-through.
    implementation: Option<*mut c_void>,
    elsewhere: Elsewhere,
}

// SAFETY: a `dlopen` handle and the addresses of loaded objects are the process's, valid from any
// thread while the objects stay loaded (these are never closed).
unsafe impl Send for Choice {}
unsafe impl Sync for Choice {}

impl Choice {
    /// No panic leaves this function (it runs inside a user's MPI call): on one (none is
    /// expected), pass through.
    fn make() -> Choice {
        let implementation = std::panic::catch_unwind(implementation).unwrap_or(None);
        if let Some(h) = implementation {
            // SAFETY: a handle dlopen returned and a NUL-terminated name; the function it
            // names, if any, has the contract's type (`abi::Bound`).
            BOUND.store(
                unsafe { libc::dlsym(h, abi::BOUND.as_ptr()) },
                Ordering::Release,
            );
            // SAFETY: as above; the function, if any, has the type `abi::Bound`.
            FIRST_CALL.store(
                unsafe { libc::dlsym(h, abi::FIRST_CALL.as_ptr()) },
                Ordering::Release,
            );
        }
        let elsewhere = std::panic::catch_unwind(Elsewhere::find).unwrap_or(Elsewhere {
            mpi_libraries: Vec::new(),
        });
        Choice {
            implementation,
            elsewhere,
        }
    }

    /// A name's target: in the implementation, else the next definition; null if nothing
    /// defines it.
    fn target(&self, name: &CStr) -> *mut c_void {
        self.implementation
            // SAFETY: a handle dlopen returned and a NUL-terminated name.
            .map(|h| unsafe { libc::dlsym(h, name.as_ptr()) })
            .filter(|p| !p.is_null())
            .unwrap_or_else(|| self.elsewhere.next(name))
    }
}

/// The implementation for the process's MPI family, attached; `None` for pass-through, also
/// when the job opts out (`MPISTAT=off`, [`abi::opted_out`]): checked first, so that such a
/// job loads nothing and opens no file.
fn implementation() -> Option<*mut c_void> {
    if abi::opted_out() {
        return None;
    }
    let mut present = KNOWN.iter().filter(|k| !k.find(k.marker).is_null());
    let family = present.next()?;
    if present.next().is_some() {
        return None;
    }
    let path = own_directory()?.join(format!("libmpistat_{}.so", family.implementation));
    if !path.is_file() {
        return None;
    }
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: dlopen/dlsym with NUL-terminated strings; the attach function has the contract's
    // type (an implementation of another contract version says so and is not used).
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            // Leave no message for the program's own dlerror().
            libc::dlerror();
            return None;
        }
        let attach = libc::dlsym(handle, abi::ATTACH.as_ptr());
        if attach.is_null() {
            return None;
        }
        let attach = std::mem::transmute::<*mut c_void, Attach>(attach);
        (attach(next_after_front) == abi::PROTOCOL).then_some(handle)
    }
}

/// The directory this library was loaded from (`dladdr` of our own code); `None` if the loader
/// knows it only by a bare name.
fn own_directory() -> Option<PathBuf> {
    // SAFETY: dladdr only reads the loader's tables; dli_fname is a NUL-terminated path owned by
    // the loader.
    let file = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(resolve as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        PathBuf::from(std::ffi::OsStr::from_bytes(
            CStr::from_ptr(info.dli_fname).to_bytes(),
        ))
    };
    file.parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(PathBuf::from)
}

/// The implementation's lookup of "the next definition" (`abi::ResolveNext`): glibc's
/// `RTLD_NEXT` is relative to the object whose code calls `dlsym`, and here that is this
/// library, in the global scope ahead of the MPI library.
unsafe extern "C" fn next_after_front(name: *const c_char) -> *mut c_void {
    // SAFETY: the implementation passes a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name) };
    // Not a tail call: as `jmp dlsym`, dlsym would see the implementation's return address and
    // search after the implementation, not after us.
    std::hint::black_box(p)
}

/// Where a name is defined when not after this library in the global scope: the loaded MPI
/// libraries of known families opened `RTLD_LOCAL` (python's mpi4py), found once.
struct Elsewhere {
    mpi_libraries: Vec<*mut c_void>,
}

impl Elsewhere {
    fn find() -> Elsewhere {
        let mpi_libraries = KNOWN
            .iter()
            .flat_map(|k| k.libraries)
            // SAFETY: RTLD_NOLOAD only returns an object that is already loaded.
            .map(|lib| unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) })
            .filter(|h| !h.is_null())
            .collect();
        Elsewhere { mpi_libraries }
    }

    /// What a call of `name` would reach without this library; for a `PMPI_X` nothing defines,
    /// `MPI_X` (a minimal "MPI" without the profiling interface); null if nothing.
    fn next(&self, name: &CStr) -> *mut c_void {
        let p = self.exactly(name);
        if !p.is_null() {
            return p;
        }
        abi::plain_name(name).map_or(std::ptr::null_mut(), |plain| self.exactly(plain))
    }

    fn exactly(&self, name: &CStr) -> *mut c_void {
        // SAFETY: dlsym with a NUL-terminated name.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        if !p.is_null() {
            return p;
        }
        if name.to_bytes().starts_with(b"PMIx_") {
            // A libpmix opened `RTLD_LOCAL` by an MPI component.
            return abi::in_loaded(b"libpmix.so", name);
        }
        self.mpi_libraries
            .iter()
            // SAFETY: handles dlopen returned, a NUL-terminated name.
            .map(|h| unsafe { libc::dlsym(*h, name.as_ptr()) })
            .find(|p| !p.is_null())
            .unwrap_or(std::ptr::null_mut())
    }
}
