//! Open MPI 4.x (`libmpi.so.40`): handles are pointers, predefined handles are the addresses of
//! objects in libmpi (`ompi_mpi_comm_world`, ...), found with `dlsym` since this library is never
//! linked against libmpi; the status keeps the received bytes in its public `_ucount` field.

use super::{Family, Predefined, Probe};
use crate::ffi::MPI_Status;
use std::ffi::{c_int, c_void, CStr};

/// Open MPI's marker (see [`super::MARKERS`]): the function behind its `MPI_Init`.
pub const MARKER: &CStr = c"ompi_mpi_init";

/// The major version whose ABI the wrappers were generated for (`mpi.h` of Open MPI 4.1).
const MAJOR: &str = "4.";

pub struct OpenMpi;

impl Family for OpenMpi {
    const NAME: &'static str = "Open MPI";
    const LIBRARIES: &'static [&'static CStr] = &[c"libmpi.so.40", c"libmpi.so"];
    const PROC_NULL: c_int = -2;
    // `((void *) 1)` in Open MPI's mpi.h.
    #[allow(clippy::manual_dangling_ptr)]
    const IN_PLACE: *const c_void = 1 as *const c_void;

    fn recognise(probe: &Probe) -> Result<(), String> {
        let init = probe.init.as_ref().ok_or("no PMPI_Init in the process")?;
        let names: Vec<&str> = probe.markers.iter().map(|(f, _)| *f).collect();
        match probe.markers.as_slice() {
            [(family, marker)] if *family == Self::NAME => {
                if marker.object != init.object {
                    return Err(format!(
                        "PMPI_Init is in {}, Open MPI's objects in {}",
                        init.object, marker.object
                    ));
                }
            }
            [] => return Err(format!("unknown MPI library {}", init.object)),
            [(family, _)] => return Err(format!("{family} ({})", init.object)),
            _ => return Err(format!("several MPI libraries: {}", names.join(", "))),
        }
        // The MPI library is Open MPI's: MPI_Get_library_version may be called before MPI_Init.
        let version = crate::mpi::library_version();
        let known = version
            .strip_prefix("Open MPI v")
            .is_some_and(|v| v.starts_with(MAJOR));
        if known {
            Ok(())
        } else {
            Err(format!("unknown Open MPI version: {version}"))
        }
    }

    fn predefined(object: Predefined) -> Option<*mut c_void> {
        let symbol = match object {
            Predefined::CommWorld => c"ompi_mpi_comm_world",
            Predefined::CommNull => c"ompi_mpi_comm_null",
            Predefined::InfoNull => c"ompi_mpi_info_null",
            Predefined::RequestNull => c"ompi_request_null",
            Predefined::Uint64 => c"ompi_mpi_uint64_t",
            Predefined::LongInt => c"ompi_mpi_long_int",
            Predefined::OpSum => c"ompi_mpi_op_sum",
            Predefined::OpMin => c"ompi_mpi_op_min",
            Predefined::OpMax => c"ompi_mpi_op_max",
            Predefined::OpMaxLoc => c"ompi_mpi_op_maxloc",
        };
        let p = crate::next::mpi_object(symbol);
        (!p.is_null()).then_some(p)
    }

    // Open MPI keeps the received bytes in `_ucount` (what `MPI_Get_count` divides by the type
    // size): reading it is free, where asking `MPI_Get_count` with `MPI_BYTE` would cost a call
    // and a handle lookup per receive.
    unsafe fn received_bytes(status: *const MPI_Status) -> u64 {
        (*status)._ucount as u64
    }

    unsafe fn status_source(status: *const MPI_Status) -> c_int {
        (*status).MPI_SOURCE
    }

    unsafe fn status_tag(status: *const MPI_Status) -> c_int {
        (*status).MPI_TAG
    }
}
