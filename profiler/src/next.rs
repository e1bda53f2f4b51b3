//! Finding the real MPI routine behind each wrapper.
//!
//! Every wrapper forwards to the next definition of `PMPI_X` after this library in the symbol
//! search order (`dlsym(RTLD_NEXT)`): the MPI library itself, or another PMPI layer loaded after us.
//! Loaded by the front (`libmpistat.so`, `front/`), this library sits outside the global scope
//! (`RTLD_LOCAL`), where glibc's `RTLD_NEXT` does not mean "after the front": the front then
//! hands over its own lookup ([`mpistat_impl_attach`]) and every lookup here goes through it.
//! Preloaded directly (without the front), `RTLD_NEXT` is ours.
//! The pointer is resolved on first use and cached, so a process that never calls MPI never even
//! looks (loading the library into bash or python stays free); `MPI_Init` then resolves all the
//! others at once ([`Next::prefetch`]).

use mpistat_abi::{self as abi, ResolveNext};
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The front's lookup ([`ResolveNext`]) if the front loaded us, else null.
static FRONT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Called once by the front right after loading this library, before any other call into it:
/// from now on "the next definition" is the one after the front. Returns the version of the
/// front/implementation contract this library speaks ([`abi::PROTOCOL`]).
///
/// # Safety
/// `resolve_next` is the front's lookup, callable from any thread for the life of the process.
#[no_mangle]
pub unsafe extern "C" fn mpistat_impl_attach(resolve_next: ResolveNext) -> u32 {
    FRONT.store(resolve_next as *mut c_void, Ordering::Release);
    abi::PROTOCOL
}

/// An address inside the front (`libmpistat.so`) if it loaded us, else 0 (see
/// [`crate::footprint`]: its start-up pages are released with ours).
pub fn front_address() -> usize {
    FRONT.load(Ordering::Acquire) as usize
}

/// The next definition of `name` after this library (after the front, if it loaded us), or null.
pub fn after_us(name: &CStr) -> *mut c_void {
    let front = FRONT.load(Ordering::Acquire);
    // SAFETY: a non-null FRONT is the front's `ResolveNext` (see `mpistat_impl_attach`); dlsym
    // with a NUL-terminated name.
    unsafe {
        if front.is_null() {
            libc::dlsym(libc::RTLD_NEXT, name.as_ptr())
        } else {
            std::mem::transmute::<*mut c_void, ResolveNext>(front)(name.as_ptr())
        }
    }
}

/// One real routine: its name, and the cell where its address is cached once looked up.
///
/// A constant (the generated `NEXT_X`, [`crate::hooks::PCONTROL`]), not a static: the cells are
/// one dense array of zeroed addresses (`.bss`, generated `ADDRESSES`, 8 bytes a routine) and the
/// names stay in the code that reads them. As statics holding their name's pointer, the 382
/// routines (613 under MPICH) took 9 kB of `.data` (15 kB) with a relocation each, written by
/// the loader in every process and so resident in every rank (docs/footprint.md, "dense"). Passed by value (16 bytes, two
/// registers; the name as a thin pointer, as a `&CStr` would make it 24 bytes, passed through
/// memory): a reference to a constant, or a larger one, would make the compiler keep a relocated
/// copy of it.
#[derive(Clone, Copy)]
pub struct Next {
    name: *const c_char,
    addr: &'static AtomicPtr<c_void>,
}

impl Next {
    pub const fn new(name: &'static CStr, addr: &'static AtomicPtr<c_void>) -> Next {
        Next {
            name: name.as_ptr(),
            addr,
        }
    }

    fn name(self) -> &'static CStr {
        // SAFETY: `new` took it from a `&'static CStr`.
        unsafe { CStr::from_ptr(self.name) }
    }

    /// The routine's address; never null (a process whose MPI library cannot be found is told so
    /// and stopped, as calling on would jump to address 0).
    #[inline(always)]
    pub fn get(self) -> *mut c_void {
        let p = self.addr.load(Ordering::Relaxed);
        if !p.is_null() {
            return p;
        }
        self.resolve()
    }

    /// The routine's address if it is resolved (always, after `MPI_Init`, for a routine the MPI
    /// library has: [`Next::prefetch`]). A wrapper's counting copy takes this and leaves the
    /// rest to the general copy: with no lookup to call, it keeps the caller's arguments in
    /// their registers up to the real call.
    #[inline(always)]
    pub fn resolved(self) -> Option<*mut c_void> {
        let p = self.addr.load(Ordering::Relaxed);
        (!p.is_null()).then_some(p)
    }

    /// A hot routine's address in a counting copy, untested: `MPI_Init` claims its thread for
    /// the counting copies (`crate::hooks::after_init`) only once every hot routine is resolved
    /// (`hot_resolved`, generated), and a resolved address never changes back. No load, test
    /// and branch before every call (bench/instructions.sh: 3 instructions).
    #[inline(always)]
    pub fn claimed(self) -> *mut c_void {
        // SAFETY: a valid, aligned atomic; resolved, it is never written again (`prefetch` and
        // `resolve` store only into a null one), so this plain read, which the compiler folds
        // into the call, races with no write.
        unsafe { *self.addr.as_ptr() }
    }

    /// Look the routine up now if it is not yet: `MPI_Init` does this for every routine before
    /// the real call, so that no lookup runs after it (a `dlsym` reads the name, the loader's
    /// tables and this code, all on pages released then and at the end of `MPI_Init`, see
    /// footprint.rs). A routine the MPI library
    /// lacks stays unresolved here; its first call says so.
    pub fn prefetch(self) {
        if self.addr.load(Ordering::Relaxed).is_null() {
            let p = lookup(self.name());
            if !p.is_null() {
                self.addr.store(p, Ordering::Relaxed);
            }
        }
    }

    /// Runs once per routine, at its first call (before `MPI_Init`, or for a routine the MPI
    /// library lacks).
    #[cold]
    #[inline(never)]
    fn resolve(self) -> *mut c_void {
        self.prefetch();
        let p = self.addr.load(Ordering::Relaxed);
        if p.is_null() {
            abi::missing(self.name());
        }
        p
    }
}

/// [`after_us`], falling back to an already-loaded libmpi opened `RTLD_LOCAL` (python's mpi4py
/// does that), which `RTLD_NEXT` cannot see, and for a `PMPI_X` that no library defines, to
/// `MPI_X` (a minimal "MPI" without the profiling interface: forwarding to its `MPI_X` keeps a
/// foreign library's program working).
pub fn lookup(name: &CStr) -> *mut c_void {
    let p = lookup_exactly(name);
    if !p.is_null() {
        return p;
    }
    abi::plain_name(name).map_or(std::ptr::null_mut(), lookup_exactly)
}

fn lookup_exactly(name: &CStr) -> *mut c_void {
    let p = after_us(name);
    if !p.is_null() {
        return p;
    }
    BUILT.in_library(name)
}

/// The built family as the front knows it ([`crate::family::Built`]'s): its sonames find a library
/// that was opened `RTLD_LOCAL`.
#[cfg(mpistat_family = "openmpi")]
const BUILT: abi::Known = abi::OPEN_MPI;
#[cfg(mpistat_family = "mpich")]
const BUILT: abi::Known = abi::MPICH;

/// Address of a symbol of the MPI library by its exact name (Open MPI's predefined handles such
/// as `ompi_mpi_comm_world` are the addresses of such objects), or null. In `.text.init`:
/// `MPI_Init`'s end looks up `MPI_COMM_WORLD` (footprint.rs).
#[link_section = ".text.init.mpistat"]
pub fn mpi_object(name: &CStr) -> *mut c_void {
    // SAFETY: as in `lookup`; RTLD_DEFAULT searches the global scope.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        lookup_exactly(name)
    } else {
        p
    }
}
