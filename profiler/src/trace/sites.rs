//! The names of a trace's call-site regions, at `MPI_Finalize`: each region's routine, its class
//! for the analysis, and its site as `object+0xOFFSET` of the loaded object (path, GNU build-id,
//! load address) its return address lies in.

use crate::generated::routines::ROUTINES;
use crate::threads::RoutineId;
use mpistat_trace::model::{Module, MpiClass, Region, RegionRole};
use std::ffi::{c_int, c_void};
use std::path::Path;

/// The analysis' class of a routine; nonblocking collectives synchronise in their completion,
/// so their start is not a collective.
pub(super) fn class_of(routine: &str) -> MpiClass {
    let class = MpiClass::of_routine(routine);
    if class != MpiClass::PointToPoint && routine.starts_with("MPI_I") {
        MpiClass::PointToPoint
    } else {
        class
    }
}

/// Every loaded object: path, build-id, load address and the address ranges of its segments.
fn loaded_objects() -> Vec<(Module, Vec<(usize, usize)>)> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info; data is our Vec.
        let (info, out) = unsafe {
            (
                &*info,
                &mut *(data as *mut Vec<(Module, Vec<(usize, usize)>)>),
            )
        };
        let base = info.dlpi_addr as usize;
        let name = crate::callsite::object_name(info);
        let path = if name.is_empty() {
            std::fs::read_link("/proc/self/exe")
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            name
        };
        let mut ranges = Vec::new();
        let mut build_id = String::new();
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        for ph in headers {
            let start = base + ph.p_vaddr as usize;
            if ph.p_type == libc::PT_LOAD {
                ranges.push((start, start + ph.p_memsz as usize));
            } else if ph.p_type == libc::PT_NOTE && build_id.is_empty() {
                // SAFETY: a loaded note segment of p_memsz bytes.
                let notes =
                    unsafe { std::slice::from_raw_parts(start as *const u8, ph.p_memsz as usize) };
                build_id = gnu_build_id(notes).unwrap_or_default();
            }
        }
        out.push((
            Module {
                path,
                build_id,
                load_address: base as u64,
            },
            ranges,
        ));
        0
    }
    let mut out: Vec<(Module, Vec<(usize, usize)>)> = Vec::new();
    // SAFETY: the callback matches dl_iterate_phdr's contract and only touches `out`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<_>).cast()) };
    out
}

/// The GNU build-id (hex) in a note segment.
fn gnu_build_id(mut notes: &[u8]) -> Option<String> {
    let word = |b: &[u8], at: usize| -> Option<usize> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let align = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let desc_at = 12 + align(namesz);
        let next = desc_at + align(descsz);
        let name = notes.get(12..12 + namesz)?;
        if kind == 3 && name == b"GNU\0" {
            let desc = notes.get(desc_at..desc_at + descsz)?;
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        notes = notes.get(next..)?;
    }
    None
}

/// The call site of a region: `object+0xOFFSET` (of the return address), and the objects used.
pub(super) fn site_names(keys: &[(RoutineId, usize)]) -> (Vec<Region>, Vec<Module>) {
    let objects = loaded_objects();
    let mut used: Vec<Module> = Vec::new();
    let regions = keys
        .iter()
        .map(|&(id, addr)| {
            let routine = ROUTINES[id].name();
            let site = objects
                .iter()
                .find(|(_, ranges)| ranges.iter().any(|&(a, b)| (a..b).contains(&addr)))
                .map(|(module, _)| {
                    if !used.contains(module) {
                        used.push(module.clone());
                    }
                    let file = Path::new(&module.path)
                        .file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    format!("{file}+0x{:x}", addr as u64 - module.load_address)
                })
                .unwrap_or_default();
            Region {
                name: routine.to_string(),
                site,
                role: RegionRole::Mpi(class_of(routine)),
            }
        })
        .collect();
    (regions, used)
}
