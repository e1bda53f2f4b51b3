//! The MPI families mpistat knows, as far as telling them apart in a process goes, and the
//! contract between the front library (`libmpistat.so`) and the per-family implementations
//! (`libmpistat_<family>.so`) it loads.
//!
//! Both the front (`front/`) and the profilers depend on this crate (they cannot depend on each
//! other: both are cdylibs). It uses only `std` and `libc`: the front links only what it runs.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// One MPI family (an ABI): how to recognise its library and which implementation profiles it.
pub struct Known {
    /// How records, messages and the front name the family.
    pub name: &'static str,
    /// A function that only this family's MPI library defines (a function: a data object the
    /// program refers to is copied into the executable, so its address does not tell the library).
    pub marker: &'static CStr,
    /// The sonames of the family's MPI library, for finding it when it was opened `RTLD_LOCAL`
    /// (python's mpi4py does that), where the global symbol scope cannot see it.
    pub libraries: &'static [&'static CStr],
    /// The implementation's file, next to the front: `libmpistat_<implementation>.so`.
    pub implementation: &'static str,
}

/// Open MPI 4.x (`libmpi.so.40`).
pub const OPEN_MPI: Known = Known {
    name: "Open MPI",
    marker: c"ompi_mpi_init",
    libraries: &[c"libmpi.so.40", c"libmpi.so"],
    implementation: "openmpi",
};

/// The MPICH ABI (`libmpi.so.12`: MPICH, Intel MPI, MVAPICH2, Cray MPICH). Listed also while no
/// implementation is built for it, so that a process with both libraries is recognised as such.
pub const MPICH: Known = Known {
    name: "MPICH",
    marker: c"MPII_Comm_get_attr",
    libraries: &[c"libmpich.so.12", c"libmpi.so.12"],
    implementation: "mpich",
};

/// Every known family.
pub const KNOWN: &[Known] = &[OPEN_MPI, MPICH];

/// The variable a job opts out of profiling with, and the values that do (the same spellings
/// as `etc/slurm/mpistat-taskprolog.sh`). With one of them the front loads no implementation and
/// an implementation preloaded or linked directly passes every call through: nothing is read,
/// counted, printed or sent, however the library came into the process.
pub const OPT_OUT_VARIABLE: &str = "MPISTAT";
pub const OPT_OUT_VALUES: &[&str] = &["off", "OFF", "Off", "no", "0", "false"];

/// Whether this process's environment opts out ([`OPT_OUT_VALUES`]).
pub fn opted_out() -> bool {
    std::env::var_os(OPT_OUT_VARIABLE).is_some_and(|v| OPT_OUT_VALUES.iter().any(|off| v == *off))
}

/// The function every implementation exports for the front: the front calls it once, with its
/// [`ResolveNext`], before it uses anything else of the implementation.
pub const ATTACH: &CStr = c"mpistat_impl_attach";

/// What `mpistat_impl_attach` returns: the version of this contract. The front uses an
/// implementation only if it says the same version (a front and an implementation of different
/// builds are passed through, never mixed).
pub const PROTOCOL: u32 = 1;

/// `mpistat_impl_attach`'s type.
pub type Attach = unsafe extern "C" fn(ResolveNext) -> u32;

/// The function an implementation may export for the front to call right after it filled a
/// slot, i.e. at a routine's first call, just after the loader's lazy binding of that routine
/// read the front's dynamic symbol tables (and the front's code and `dlsym` ran): the
/// implementation drops the read-only pages that mapped again (docs/footprint.md, "baseline").
/// The front calls it from outside its `.text`, and only if the implementation defines it.
pub const BOUND: &CStr = c"mpistat_impl_bound";

/// `mpistat_impl_bound`'s type.
pub type Bound = unsafe extern "C" fn();

/// The function an implementation may export for the front to call as a routine's first call
/// enters the front, before the slot is filled: the implementation notes the time, and counts
/// the front's first call up to [`BOUND`]'s end as time in MPI, where the program sees it. The
/// front calls it only once the implementation is chosen (not at the process's first call), and
/// only if the implementation defines it. Its type is [`Bound`]'s.
pub const FIRST_CALL: &CStr = c"mpistat_impl_first_call";

/// The front's lookup of the next definition of a symbol after the front (`dlsym(RTLD_NEXT)`
/// done in the front, which sits in the global scope where the implementation, opened
/// `RTLD_LOCAL`, does not), or null.
pub type ResolveNext = unsafe extern "C" fn(*const c_char) -> *mut c_void;

impl Known {
    /// Where the family's library defines `name`: in the global scope, else in the family's
    /// library opened `RTLD_LOCAL`; null if nowhere.
    #[inline]
    pub fn find(&self, name: &CStr) -> *mut c_void {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        if p.is_null() {
            self.in_library(name)
        } else {
            p
        }
    }

    /// `name` in the family's library if it is loaded (however it was opened), or null.
    #[inline]
    pub fn in_library(&self, name: &CStr) -> *mut c_void {
        in_libraries(self.libraries, name)
    }
}

/// `name` in the first of these loaded libraries (sonames or paths) that defines it (however it
/// was opened), or null.
pub fn in_libraries(libraries: &[&CStr], name: &CStr) -> *mut c_void {
    for lib in libraries {
        // SAFETY: RTLD_NOLOAD only returns an object that is already loaded.
        let p = unsafe {
            let h = libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
            if h.is_null() {
                continue;
            }
            libc::dlsym(h, name.as_ptr())
        };
        if !p.is_null() {
            return p;
        }
    }
    std::ptr::null_mut()
}

/// `name` in a loaded object whose file name starts with `prefix` (such as `libpmix.so`),
/// whatever its soname and however it was opened; null if none defines it.
pub fn in_loaded(prefix: &[u8], name: &CStr) -> *mut c_void {
    struct Search<'a> {
        prefix: &'a [u8],
        found: Vec<CString>,
    }
    unsafe extern "C" fn collect(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info whose name is NUL-terminated (or null), and
        // `data` is the search below.
        let (path, search) = unsafe { ((*info).dlpi_name, &mut *data.cast::<Search>()) };
        if !path.is_null() {
            // SAFETY: as above.
            let path = unsafe { CStr::from_ptr(path) };
            let file = path
                .to_bytes()
                .rsplit(|b| *b == b'/')
                .next()
                .unwrap_or_default();
            if file.starts_with(search.prefix) {
                search.found.push(path.to_owned());
            }
        }
        0
    }
    let mut search = Search {
        prefix,
        found: Vec::new(),
    };
    // SAFETY: the callback only reads the loader's entries and pushes to `search`.
    unsafe { libc::dl_iterate_phdr(Some(collect), (&mut search as *mut Search).cast()) };
    let paths: Vec<&CStr> = search.found.iter().map(CString::as_c_str).collect();
    in_libraries(&paths, name)
}

/// `MPI_X` for `PMPI_X`: what to forward to when no library defines the profiling name (a
/// minimal "MPI" without the profiling interface).
#[inline]
pub fn plain_name(name: &CStr) -> Option<&CStr> {
    match name.to_bytes_with_nul().strip_prefix(b"P") {
        // Still ends with the NUL of `name` and has no interior NUL.
        Some(plain) if plain.starts_with(b"MPI_") => CStr::from_bytes_with_nul(plain).ok(),
        _ => None,
    }
}

/// A routine was called that no loaded library defines: say so and stop (calling on would jump
/// to address 0).
#[cold]
pub fn missing(name: &CStr) -> ! {
    let msg = format!(
        "mpistat: cannot find {} in the MPI library; is libmpistat.so preloaded into a program \
         built against another MPI?\n",
        name.to_string_lossy()
    );
    // SAFETY: writing a byte buffer to fd 2.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_profiling_name_has_a_plain_name() {
        assert_eq!(plain_name(c"PMPI_Send"), Some(c"MPI_Send"));
        assert_eq!(plain_name(c"PMPI_Pcontrol"), Some(c"MPI_Pcontrol"));
        assert_eq!(plain_name(c"MPI_Send"), None);
        assert_eq!(plain_name(c"PMIx_Fence"), None);
        assert_eq!(plain_name(c"P"), None);
    }

    #[test]
    fn the_library_opts_out_with_the_taskprologs_spellings() {
        let prolog = include_str!("../../etc/slurm/mpistat-taskprolog.sh");
        let case = prolog
            .lines()
            .find(|l| l.trim_end().ends_with(") exit 0 ;;"))
            .expect("the TaskProlog's opt-out case");
        let spellings: Vec<&str> = case
            .trim_end()
            .trim_end_matches(") exit 0 ;;")
            .split('|')
            .map(str::trim)
            .collect();
        assert_eq!(spellings, OPT_OUT_VALUES, "{case}");
        assert!(prolog.contains(&format!("case ${{{OPT_OUT_VARIABLE}:-}} in")));
    }

    #[test]
    fn families_have_distinct_markers_and_implementations() {
        for (i, a) in KNOWN.iter().enumerate() {
            for b in &KNOWN[i + 1..] {
                assert_ne!(a.marker, b.marker);
                assert_ne!(a.implementation, b.implementation);
                assert!(a.libraries.iter().all(|l| !b.libraries.contains(l)));
            }
        }
    }
}
