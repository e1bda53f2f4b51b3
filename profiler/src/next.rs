//! Finding the real MPI routine behind each wrapper.
//!
//! Every wrapper forwards to the next definition of `PMPI_X` after this library in the symbol
//! search order (`dlsym(RTLD_NEXT)`): the MPI library itself, or another PMPI layer loaded after us.
//! The pointer is resolved on first use and cached, so a process that never calls MPI never even
//! looks (loading the library into bash or python stays free); `MPI_Init` then resolves all the
//! others at once ([`Next::prefetch`]).

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The cached address of one real routine.
pub struct Next {
    name: &'static CStr,
    addr: AtomicPtr<c_void>,
}

impl Next {
    pub const fn new(name: &'static CStr) -> Next {
        Next {
            name,
            addr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The routine's address; never null (a process whose MPI library cannot be found is told so
    /// and stopped, as calling on would jump to address 0).
    #[inline(always)]
    pub fn get(&self) -> *mut c_void {
        let p = self.addr.load(Ordering::Relaxed);
        if !p.is_null() {
            return p;
        }
        self.resolve()
    }

    /// Look the routine up now if it is not yet: `MPI_Init` does this for every routine before
    /// the real call, so that no lookup runs after it (a `dlsym` reads the name, the loader's
    /// tables and this code, all on pages released then and at the end of `MPI_Init`, see
    /// footprint.rs). A routine the MPI library
    /// lacks stays unresolved here; its first call says so.
    pub fn prefetch(&self) {
        if self.addr.load(Ordering::Relaxed).is_null() {
            let p = lookup(self.name);
            if !p.is_null() {
                self.addr.store(p, Ordering::Relaxed);
            }
        }
    }

    /// Runs once per routine, at its first call (before `MPI_Init`, or for a routine the MPI
    /// library lacks).
    #[cold]
    #[inline(never)]
    fn resolve(&self) -> *mut c_void {
        self.prefetch();
        let p = self.addr.load(Ordering::Relaxed);
        if p.is_null() {
            missing(self.name);
        }
        p
    }
}

/// `dlsym(RTLD_NEXT, name)`, falling back to an already-loaded libmpi opened `RTLD_LOCAL`
/// (python's mpi4py does that), which `RTLD_NEXT` cannot see, and for a `PMPI_X` that no library
/// defines, to `MPI_X` (a minimal "MPI" without the profiling interface: forwarding to its
/// `MPI_X` keeps a foreign library's program working).
pub fn lookup(name: &CStr) -> *mut c_void {
    let p = lookup_exactly(name);
    if !p.is_null() {
        return p;
    }
    match name.to_bytes_with_nul().strip_prefix(b"P") {
        Some(plain) if plain.starts_with(b"MPI_") => {
            // SAFETY: still ends with the NUL of `name` and has no interior NUL.
            lookup_exactly(unsafe { CStr::from_bytes_with_nul_unchecked(plain) })
        }
        _ => std::ptr::null_mut(),
    }
}

fn lookup_exactly(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym/dlopen with valid NUL-terminated strings; RTLD_NOLOAD never loads anything.
    unsafe {
        let p = libc::dlsym(libc::RTLD_NEXT, name.as_ptr());
        if !p.is_null() {
            return p;
        }
        for lib in <crate::family::Built as crate::family::Family>::LIBRARIES {
            let h = libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
            if !h.is_null() {
                let p = libc::dlsym(h, name.as_ptr());
                if !p.is_null() {
                    return p;
                }
            }
        }
        std::ptr::null_mut()
    }
}

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

#[cold]
fn missing(name: &CStr) -> ! {
    let msg = format!(
        "mpistat: cannot find {} in the MPI library; is libmpistat.so preloaded into a program \
         built against another MPI?\n",
        name.to_string_lossy()
    );
    // SAFETY: writing a byte buffer to fd 2.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    std::process::abort()
}
