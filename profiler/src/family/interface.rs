//! What a family is to the profiler ([`Family`]), the handles and predefined objects its code
//! uses, and what recognition looks at ([`Probe`], [`library_version`]): the interface below the
//! families' modules, which [`super`] chooses from.

use crate::ffi::MPI_Status;
use crate::generated::wrappers::NEXT_MPI_Get_library_version as LIBRARY_VERSION;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::transmute;

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
    /// Whether the word at `stored`, which holds only [`Handle::key`]s of this type or 0, is
    /// this handle's key: one compare with memory on a memo's steady test
    /// (`traffic::Memo::holds_own`).
    ///
    /// # Safety
    /// `stored` is valid for reads, aligned, and no write races with this read.
    #[inline(always)]
    unsafe fn key_is_at(self, stored: *const usize) -> bool {
        // SAFETY: as the caller promises.
        unsafe { *stored == self.key() }
    }
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
    /// Compared as the pointer it is, not as a number: the compiler, knowing the word equal to
    /// the argument, then uses the argument's register for it afterwards (a later compare of
    /// the same handle with memory), where a number made of it (`key`) was replaced by the
    /// word, loaded into a register of its own (Open MPI's communicator: 1 a steady call).
    #[inline(always)]
    unsafe fn key_is_at(self, stored: *const usize) -> bool {
        // SAFETY: as the caller promises; a key is the pointer's address, read back as one.
        unsafe { *stored.cast::<Self>() == self }
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
    /// A key of an `int` handle is zero-extended: its upper half is 0 wherever one is stored
    /// (as in an empty word), so equal lower halves are equal keys. Compared in 32 bits, the
    /// handle is not widened into a register of its own first (MPICH's datatype and
    /// communicator: bench/instructions.sh, 2 a memo's test).
    #[inline(always)]
    unsafe fn key_is_at(self, stored: *const usize) -> bool {
        // SAFETY: as the caller promises.
        unsafe { *lower_half(stored) == self }
    }
}

/// The lower half of the 64-bit word at `word`, as an `int`: where a zero-extended or widened
/// `int` is stored (a handle's key, a memo's count), compared or read in 32 bits without
/// widening the other side first. The first four bytes on a little-endian machine, the last
/// four on a big-endian one.
#[inline(always)]
pub fn lower_half<T>(word: *const T) -> *const c_int {
    const { assert!(std::mem::size_of::<T>() == 8) };
    let at = word.cast::<c_int>();
    if cfg!(target_endian = "little") {
        at
    } else {
        at.wrapping_add(1)
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
    /// `MPI_MAX`, for the one reduction left to MPI ([`crate::mpi::allreduce_max_on`]).
    OpMax,
    /// `MPI_ERRORS_RETURN`, the error handler of the profiler's own communicator.
    ErrorsReturn,
}

impl Predefined {
    pub const ALL: [Predefined; 7] = [
        Predefined::CommWorld,
        Predefined::CommNull,
        Predefined::InfoNull,
        Predefined::RequestNull,
        Predefined::Uint64,
        Predefined::OpMax,
        Predefined::ErrorsReturn,
    ];
}

/// What a family is to the profiler.
pub trait Family {
    /// How records and messages name the family.
    const NAME: &'static str;
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
    /// The size in bytes of one element of the datatype whose [`Handle::key`] is `datatype`, when
    /// the handle itself says it (MPICH's predefined types); `None` when only the library can
    /// tell. Asking the library maps its `MPI_Type_size`'s 64 KiB of code into every rank that a
    /// bare run of the program would not map (docs/footprint.md, "mpichrss").
    fn encoded_type_size(_datatype: usize) -> Option<u64> {
        None
    }
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
    pub(crate) fn take() -> Probe {
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

/// `MPI_Get_library_version`, first line.
pub fn library_version() -> String {
    // Open MPI's is 256 bytes, MPICH's 8192 (it lists its configure options).
    let mut buf = vec![0 as c_char; crate::ffi::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the real routine with a buffer of MPI_MAX_LIBRARY_VERSION_STRING (+1) bytes.
    let rc = unsafe {
        transmute::<*mut c_void, LibraryVersionFn>(LIBRARY_VERSION.get())(
            buf.as_mut_ptr(),
            &mut len,
        )
    };
    if rc != 0 {
        return String::new();
    }
    // SAFETY: MPI wrote a NUL-terminated string into buf (we zeroed the extra byte).
    let s = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
    s.lines().next().unwrap_or("").trim().to_string()
}

type LibraryVersionFn = unsafe extern "C" fn(*mut c_char, *mut c_int) -> c_int;

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Predefined::ALL`] holds each object at its own index (`family::predefined` remembers
    /// each in that slot); the `match` stops compiling when an object is added, until it is
    /// listed here, and then the count tells whether `ALL` lists it too.
    #[test]
    fn every_predefined_object_is_in_all_at_its_index() {
        let listed = |object: Predefined| match object {
            Predefined::CommWorld
            | Predefined::CommNull
            | Predefined::InfoNull
            | Predefined::RequestNull
            | Predefined::Uint64
            | Predefined::OpMax
            | Predefined::ErrorsReturn => object as usize,
        };
        for (i, &object) in Predefined::ALL.iter().enumerate() {
            assert_eq!(listed(object), i, "{object:?}");
        }
        assert_eq!(Predefined::ALL.len(), Predefined::ErrorsReturn as usize + 1);
    }

    /// A handle is found at the word its key was stored in, another one is not (handles that
    /// differ in their upper bits only, MPICH's kinds, included), nor at an empty word.
    #[test]
    fn a_handle_is_at_its_keys_word_only() {
        fn check<H: Handle + std::fmt::Debug>(handles: &[H]) {
            for &stored in handles {
                let word = stored.key();
                for &h in handles {
                    // SAFETY: a local word, no other access.
                    assert_eq!(
                        unsafe { h.key_is_at(&word) },
                        h == stored,
                        "{h:?} at {stored:?}'s key"
                    );
                }
            }
            for &h in handles {
                // SAFETY: as above.
                assert!(!unsafe { h.key_is_at(&0) }, "{h:?} at an empty word");
            }
        }
        let ints: [c_int; 5] = [
            0x4c00_080b,
            0x4c00_0405,
            0x8c00_080b_u32 as c_int,
            0x4c01_080b,
            -1,
        ];
        check(&ints);
        let pointers: Vec<*mut u8> = [0x1000usize, 0x1008, 0x1_0000_1000, usize::MAX]
            .iter()
            .map(|&a| a as *mut u8)
            .collect();
        check(&pointers);
    }
}
