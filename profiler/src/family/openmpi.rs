//! Open MPI 4.x (`libmpi.so.40`): handles are pointers, predefined handles are the addresses of
//! objects in libmpi (`ompi_mpi_comm_world`, ...), found with `dlsym` since this library is never
//! linked against libmpi; the status keeps the received bytes in its public `_ucount` field.

use super::interface::{library_version, only, Family, Handle, Predefined, Probe};
use crate::ffi::MPI_Status;
use std::ffi::{c_int, c_void};

/// The major version whose ABI the wrappers were generated for (`mpi.h` of Open MPI 4.1).
const MAJOR: &str = "4.";

pub struct OpenMpi;

impl Family for OpenMpi {
    const NAME: &'static str = mpistat_abi::OPEN_MPI.name;
    const PROC_NULL: c_int = -2;
    // `((void *) 1)` in Open MPI's mpi.h.
    #[allow(clippy::manual_dangling_ptr)]
    const IN_PLACE: *const c_void = 1 as *const c_void;
    // `((MPI_Status *) 0)`, also `MPI_STATUSES_IGNORE`.
    const STATUS_IGNORE: *mut MPI_Status = std::ptr::null_mut();
    const PMI1_AT_INIT: bool = false;

    fn recognise(probe: &Probe) -> Result<(), String> {
        only(Self::NAME, probe)?;
        // The MPI library is Open MPI's: MPI_Get_library_version may be called before MPI_Init.
        known_version(&library_version())
    }

    // Open MPI's Fortran bindings call PMPI_Init(&argc, &argv) with argc = 0; C programs call
    // MPI_Init with their real argc (≥ 1) or NULL.
    unsafe fn fortran_init(via_pmpi: bool, argc: *const c_int) -> bool {
        via_pmpi && !argc.is_null() && *argc == 0
    }

    fn predefined(object: Predefined) -> Option<usize> {
        let symbol = match object {
            Predefined::CommWorld => c"ompi_mpi_comm_world",
            Predefined::CommNull => c"ompi_mpi_comm_null",
            Predefined::InfoNull => c"ompi_mpi_info_null",
            Predefined::RequestNull => c"ompi_request_null",
            Predefined::Uint64 => c"ompi_mpi_uint64_t",
            Predefined::OpMax => c"ompi_mpi_op_max",
            Predefined::ErrorsReturn => c"ompi_mpi_errors_return",
        };
        let p = crate::next::mpi_object(symbol);
        (!p.is_null()).then(|| p.key())
    }

    // Open MPI keeps the received bytes in `_ucount` (what `MPI_Get_count` divides by the type
    // size): reading it is free, where asking `MPI_Get_count` with `MPI_BYTE` would cost a call
    // and a handle lookup per receive.
    unsafe fn received_bytes(status: *const MPI_Status) -> u64 {
        (*status)._ucount as u64
    }

    unsafe fn status_cancelled(status: *const MPI_Status) -> bool {
        (*status)._cancelled != 0
    }
}

/// Whether `version` (`MPI_Get_library_version`'s first line) is of the major version the
/// wrappers were generated for.
fn known_version(version: &str) -> Result<(), String> {
    let known = version
        .strip_prefix("Open MPI v")
        .is_some_and(|v| v.starts_with(MAJOR));
    if known {
        Ok(())
    } else {
        Err(format!("unknown Open MPI version: {version}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::interface::Symbol;

    fn symbol(object: &str) -> Symbol {
        Symbol {
            object: object.to_string(),
        }
    }

    fn probe(init: &str, markers: &[(&'static str, &str)]) -> Probe {
        Probe {
            init: Some(symbol(init)),
            markers: markers.iter().map(|(f, o)| (*f, symbol(o))).collect(),
        }
    }

    const OMPI: &str = "/lib/x86_64-linux-gnu/libmpi.so.40";
    const MPICH: &str = "/lib/x86_64-linux-gnu/libmpich.so.12";

    #[test]
    fn open_mpi_alone_is_recognised() {
        assert_eq!(
            only(OpenMpi::NAME, &probe(OMPI, &[("Open MPI", OMPI)])),
            Ok(())
        );
    }

    #[test]
    fn anything_else_is_foreign() {
        // MPICH (or Intel MPI, MVAPICH, Cray MPICH: libmpi.so.12).
        let e = only(OpenMpi::NAME, &probe(MPICH, &[("MPICH", MPICH)])).unwrap_err();
        assert!(e.starts_with("MPICH"), "{e}");
        // A stub "MPI" with no known family's functions.
        let e = only(OpenMpi::NAME, &probe("/tmp/libstubmpi.so", &[])).unwrap_err();
        assert!(e.contains("unknown MPI library"), "{e}");
        // Two MPI libraries at once.
        let both = probe(OMPI, &[("Open MPI", OMPI), ("MPICH", MPICH)]);
        assert!(only(OpenMpi::NAME, &both).unwrap_err().contains("several"));
        // Open MPI's functions present, but the wrappers would forward to another library.
        let elsewhere = probe("/tmp/libstubmpi.so", &[("Open MPI", OMPI)]);
        assert!(only(OpenMpi::NAME, &elsewhere).is_err());
        // No MPI_Init to forward to at all.
        let none = Probe {
            init: None,
            markers: Vec::new(),
        };
        assert!(only(OpenMpi::NAME, &none).is_err());
    }

    #[test]
    fn only_major_version_4_is_known() {
        let debian = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4";
        assert_eq!(known_version(debian), Ok(()));
        assert_eq!(known_version("Open MPI v4.0.3, package: Open MPI"), Ok(()));
        for other in [
            "Open MPI v5.0.3, package: Open MPI",
            "Open MPI v3.1.6",
            "Open MPI v40.0",
            "MPICH Version: 4.0.2",
            "",
        ] {
            assert!(known_version(other).is_err(), "{other}");
        }
    }
}
