//! MPICH 4.x (`libmpich.so.12`/`libmpi.so.12`, the ABI of MPICH, Intel MPI, MVAPICH and Cray
//! MPICH): handles are `int`s and predefined handles are compile-time constants of `mpi.h`
//! (bindgen does not translate its cast macros, so they are written here and a test compares
//! them with the installed header); the status keeps the received bytes split over `count_lo`
//! and the upper bits of `count_hi_and_cancelled` (bit 0 is the cancelled flag).

use super::interface::{library_version, only, Family, Predefined, Probe};
use crate::ffi::MPI_Status;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

/// The major version whose ABI the wrappers were generated for (`mpi.h` of MPICH 4.0).
const MAJOR: &str = "4.";

/// The predefined handles the profiler uses, as MPICH's `mpi.h` defines them.
const HANDLES: [(Predefined, u32); 7] = [
    (Predefined::CommWorld, 0x4400_0000),
    (Predefined::CommNull, 0x0400_0000),
    (Predefined::InfoNull, 0x1c00_0000),
    (Predefined::RequestNull, 0x2c00_0000),
    (Predefined::Uint64, 0x4c00_083e),
    (Predefined::OpMax, 0x5800_0001),
    (Predefined::ErrorsReturn, 0x5400_0001),
];

pub struct Mpich;

/// `MPIR_F_NeedInit` (null: not in the process, as in a C program without libmpichfort), looked
/// up when the library is recognised, before `MPI_Init`: at its end the look-up (every loaded
/// object's symbols, the front's code) added two chunks to `MPI_Init`'s peak (footprint.rs).
static NEED_INIT: AtomicPtr<c_int> = AtomicPtr::new(std::ptr::null_mut());

impl Family for Mpich {
    const NAME: &'static str = mpistat_abi::MPICH.name;
    const PROC_NULL: c_int = -1;
    // `(void *) -1` in MPICH's mpi.h.
    const IN_PLACE: *const c_void = usize::MAX as *const c_void;
    // `(MPI_Status *)1`, also `MPI_STATUSES_IGNORE`.
    #[allow(clippy::manual_dangling_ptr)]
    const STATUS_IGNORE: *mut MPI_Status = 1 as *mut MPI_Status;
    // Its MPI_Init starts with PMI-1's `cmd=init` and runs a barrier (crate::pmi1).
    const PMI1_AT_INIT: bool = true;

    fn recognise(probe: &Probe) -> Result<(), String> {
        only(Self::NAME, probe)?;
        // The MPI library is MPICH's: MPI_Get_library_version may be called before MPI_Init.
        known_version(&library_version())?;
        NEED_INIT.store(
            crate::next::mpi_object(c"MPIR_F_NeedInit").cast::<c_int>(),
            Relaxed,
        );
        Ok(())
    }

    // MPICH's `mpif.h`/`use mpi` MPI_INIT (libmpichfort) first runs `mpirinitf_`, which clears
    // `MPIR_F_NeedInit`, then calls MPI_Init(NULL, NULL); `use mpi_f08`'s calls PMPI_Init(NULL,
    // NULL). A C program never clears that flag (and rarely has libmpichfort at all). The flag
    // was found at the process's first MPI call (`recognise`): MPI_INIT's, in a Fortran program.
    unsafe fn fortran_init(via_pmpi: bool, argc: *const c_int) -> bool {
        let need_init = NEED_INIT.load(Relaxed);
        if need_init.is_null() {
            return false;
        }
        *need_init == 0 || (via_pmpi && argc.is_null())
    }

    fn predefined(object: Predefined) -> Option<usize> {
        HANDLES
            .iter()
            .find(|(o, _)| *o == object)
            .map(|(_, h)| *h as usize)
    }

    // A predefined datatype's handle is of MPICH's builtin kind (bits 30-31: 01) and datatype
    // object (bits 26-29: 0011), and holds the type's size in bits 8-15: MPICH's own
    // `MPIR_Datatype_get_basic_size` reads it so, without a call.
    fn encoded_type_size(datatype: usize) -> Option<u64> {
        const KIND_AND_OBJECT: u32 = 0xfc00_0000;
        const BUILTIN_DATATYPE: u32 = 0x4c00_0000;
        let handle = datatype as u32;
        (handle & KIND_AND_OBJECT == BUILTIN_DATATYPE).then_some(u64::from((handle >> 8) & 0xff))
    }

    // MPIR_STATUS_GET_COUNT: count_lo is the low 32 bits (unsigned), count_hi_and_cancelled
    // shifted right by one the high bits.
    unsafe fn received_bytes(status: *const MPI_Status) -> u64 {
        let lo = (*status).count_lo as u32 as u64;
        let hi = ((*status).count_hi_and_cancelled as u32 >> 1) as u64;
        (hi << 32) | lo
    }

    // MPIR_STATUS_GET_CANCEL_BIT: bit 0 of count_hi_and_cancelled.
    unsafe fn status_cancelled(status: *const MPI_Status) -> bool {
        (*status).count_hi_and_cancelled & 1 != 0
    }
}

/// Whether `version` (`MPI_Get_library_version`'s first line, `MPICH Version:<tab>4.0.2`) is of
/// the major version the wrappers were generated for.
fn known_version(version: &str) -> Result<(), String> {
    let known = version
        .strip_prefix("MPICH Version:")
        .is_some_and(|v| v.trim_start().starts_with(MAJOR));
    if known {
        Ok(())
    } else {
        Err(format!("unknown MPICH version: {version}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn only_major_version_4_is_known() {
        assert_eq!(known_version("MPICH Version:\t4.0.2"), Ok(()));
        assert_eq!(known_version("MPICH Version:      4.1"), Ok(()));
        for other in [
            "MPICH Version:\t3.4.3",
            "MPICH Version:\t5.0.0",
            "MPICH Version:\t40.1",
            "Open MPI v4.1.4, package: Debian OpenMPI",
            "Intel(R) MPI Library 2021.10 for Linux* OS",
            "",
        ] {
            assert!(known_version(other).is_err(), "{other}");
        }
    }

    /// The handles written in [`HANDLES`] are the installed mpi.h's (compiled with
    /// `mpicc.mpich`, as build.rs found the header).
    #[test]
    fn predefined_handles_are_the_headers() {
        let dir =
            std::env::temp_dir().join(format!("mpistat-mpich-handles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = [
            "MPI_COMM_WORLD",
            "MPI_COMM_NULL",
            "MPI_INFO_NULL",
            "MPI_REQUEST_NULL",
            "MPI_UINT64_T",
            "MPI_MAX",
            "MPI_ERRORS_RETURN",
        ];
        let mut c = String::from("#include <mpi.h>\n#include <stdio.h>\nint main(void) {\n");
        for n in names {
            c.push_str(&format!("  printf(\"%u\\n\", (unsigned) {n});\n"));
        }
        c.push_str(
            "  printf(\"%d %ld %d %ld %ld\\n\", MPI_PROC_NULL, (long) MPI_IN_PLACE, (int) sizeof(MPI_Status),\n    (long) MPI_STATUS_IGNORE, (long) MPI_STATUSES_IGNORE);\n  return 0;\n}\n",
        );
        let out = built_and_run(&dir, &c);
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, (object, handle)) in HANDLES.iter().enumerate() {
            assert_eq!(lines[i], handle.to_string(), "{object:?} ({})", names[i]);
        }
        assert_eq!(
            lines[HANDLES.len()],
            format!(
                "{} {} {} {s} {s}",
                Mpich::PROC_NULL,
                Mpich::IN_PLACE as isize,
                std::mem::size_of::<MPI_Status>(),
                s = Mpich::STATUS_IGNORE as isize,
            )
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The C program `source` built with `mpicc.mpich` in `dir` and run (one process).
    fn built_and_run(dir: &std::path::Path, source: &str) -> std::process::Output {
        std::fs::write(dir.join("h.c"), source).unwrap();
        let built = Command::new("mpicc.mpich")
            .current_dir(dir)
            .args(["-o", "h", "h.c"])
            .status()
            .expect("mpicc.mpich");
        assert!(built.success());
        Command::new(dir.join("h")).output().unwrap()
    }

    /// Every datatype the installed mpi.h defines: the size its handle encodes is what the
    /// library's `MPI_Type_size` says, and a handle that encodes none (the pair types of
    /// `MPI_MINLOC`) is left to the library.
    #[test]
    fn encoded_type_sizes_are_the_librarys() {
        let dir = std::env::temp_dir().join(format!("mpistat-mpich-sizes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("h.c"), "#include <mpi.h>\n").unwrap();
        let macros = Command::new("mpicc.mpich")
            .current_dir(&dir)
            .args(["-E", "-dM", "h.c"])
            .output()
            .expect("mpicc.mpich");
        let macros = String::from_utf8(macros.stdout).unwrap();
        let names: Vec<&str> = macros
            .lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .filter_map(|l| l.split_once(" ((MPI_Datatype)0x"))
            .filter(|(name, handle)| !name.contains('(') && !handle.starts_with("0c000000"))
            .map(|(name, _)| name)
            .collect();
        let mut c = String::from(
            "#include <mpi.h>\n#include <stdio.h>\nint main(int argc, char **argv) {\n  int size;\n  MPI_Init(&argc, &argv);\n",
        );
        for n in &names {
            c.push_str(&format!(
                "  size = -1;\n  MPI_Type_size({n}, &size);\n  printf(\"%u %d {n}\\n\", (unsigned) {n}, size);\n"
            ));
        }
        c.push_str("  MPI_Finalize();\n  return 0;\n}\n");
        let out = built_and_run(&dir, &c);
        assert!(out.status.success(), "{out:?}");
        let (mut encoded, mut left) = (0, 0);
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let mut f = line.split(' ');
            let handle: u32 = f.next().unwrap().parse().unwrap();
            let size: i64 = f.next().unwrap().parse().unwrap();
            match Mpich::encoded_type_size(handle as c_int as usize) {
                Some(s) => {
                    assert_eq!(s as i64, size, "{line}");
                    encoded += 1;
                }
                None => left += 1,
            }
        }
        assert_eq!(encoded + left, names.len());
        assert!(
            encoded >= 50 && left >= 5,
            "{encoded} encoded, {left} left to the library"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn received_bytes_joins_both_halves_and_skips_the_cancelled_bit() {
        // SAFETY: MPI_Status is plain integers.
        let mut s: MPI_Status = unsafe { std::mem::zeroed() };
        s.count_lo = 1000;
        assert_eq!(unsafe { Mpich::received_bytes(&s) }, 1000);
        s.count_lo = -1; // 0xffff_ffff
        s.count_hi_and_cancelled = (5 << 1) | 1;
        assert_eq!(
            unsafe { Mpich::received_bytes(&s) },
            (5 << 32) | 0xffff_ffff
        );
    }
}
