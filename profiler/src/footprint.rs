//! Keep what the library adds to every rank's resident memory small.
//!
//! `MPI_Init` runs code that no rank needs again (reading site.toml, choosing counters, setting up
//! supersteps), and the kernel maps code in 64 KiB chunks around each fault ("fault-around"), so
//! after `MPI_Init` nearly all of the library's code and read-only data would stay in each rank's
//! RSS. These pages are clean and file-backed: just before the real `MPI_Init` (start-up work that
//! needs no MPI is done by then, so its pages never add to MPI_Init's own peak) and again at its
//! end we drop this process's mappings of them (`MADV_DONTNEED`). They stay in the page cache, shared by all ranks of the
//! node; the hot path maps back in only the few chunks it runs. Writable segments (RELRO
//! included: the dynamic loader relocated them in place) are never touched: dropping them would
//! lose the relocations. The library has no text relocations (a test checks), so read-only segments are
//! exactly their file's bytes. The heap that start-up used and freed is given back too
//! (`malloc_trim`).
//!
//! Start-up runs before the real `MPI_Init`; what must run inside it (our PMIx fence) or after
//! it (setting up the job with MPI's rank and size) is kept to one more 64 KiB chunk,
//! `.text.init`, allocation-free and without std code that lives elsewhere: every chunk of code
//! it touched would add 64 KiB to MPI_Init's peak resident set until the release at its end.
//!
//! The hot path lives in one 64 KiB-aligned chunk (`profiler/hot.ld`, spec term `hot`), every
//! real routine is looked up during `MPI_Init` ([`crate::next::Next::prefetch`]), and the
//! constants the hot code reads (jump tables, tables, vector masks) are placed with it
//! (`hot.ld`), so nothing the loops run reads the read-only segment: after `MPI_Init` a rank
//! maps back that chunk, the front's chunk of dynamic symbols that lazy binding reads, and its
//! writable data.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

/// One read-only, clean, file-backed address range of this library, page-aligned inwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub start: usize,
    pub end: usize,
}

/// Most ranges released (read-only segments of this library, the front and libgcc_s).
const MAX_RANGES: usize = 12;

/// The ranges the first release found, as (start, end) pairs, and how many ([`UNKNOWN`] before
/// it): they stay the same (this library and libgcc_s stay loaded), and finding them again runs
/// cold code, which at the end of `MPI_Init` added 250 kB to its peak (measured).
static KNOWN: [AtomicUsize; 2 * MAX_RANGES] = [const { AtomicUsize::new(0) }; 2 * MAX_RANGES];
static KNOWN_N: AtomicUsize = AtomicUsize::new(UNKNOWN);
const UNKNOWN: usize = usize::MAX;

/// Drop this process's mappings of the read-only segments (see the module doc). Placed with the
/// hot wrappers and allocation-free after the first `madvise`, so that the code running after it
/// does not map a cold chunk straight back in. Errors (e.g. `mlockall` locked the ranges) are
/// ignored: the pages then simply stay.
#[link_section = ".text.hot.mpistat"]
pub fn release_init_pages() {
    let mut todo = [Range { start: 0, end: 0 }; MAX_RANGES];
    let n = match KNOWN_N.load(Acquire) {
        // The first release (before `MPI_Init`, in a small process): its cold code may live
        // anywhere, the madvise below drops it.
        UNKNOWN => {
            let n = crate::guard::quietly(|| fill_release_list(&mut todo)).unwrap_or(0);
            for (i, r) in todo[..n].iter().enumerate() {
                KNOWN[2 * i].store(r.start, Relaxed);
                KNOWN[2 * i + 1].store(r.end, Relaxed);
            }
            KNOWN_N.store(n, Release);
            n
        }
        n => known_ranges(&mut todo, n),
    };
    // Start-up (site.toml parsing, counter set-up) freed about 100 kB of heap that glibc would
    // keep resident; give the free pages back. This touches only free memory.
    // SAFETY: malloc_trim has no preconditions; it is thread-safe (it locks each arena).
    unsafe { libc::malloc_trim(0) };
    drop_ranges(&todo[..n]);
}

/// Drop the read-only pages again after [`release_init_pages`] found them (nothing before), but
/// not the heap's (`malloc_trim` walks every free chunk of the program's heap): for a cold path
/// of the steady state that ran code no later call needs (trace mode's learning of call sites,
/// its spill file's opening: `trace/record.rs`; in `.text.trace` with them, profiler/trace.ld).
pub fn release_read_only_pages() {
    let mut todo = [Range { start: 0, end: 0 }; MAX_RANGES];
    match KNOWN_N.load(Acquire) {
        UNKNOWN => {}
        n => {
            let n = known_ranges(&mut todo, n);
            drop_ranges(&todo[..n]);
        }
    }
}

/// The `n` ranges the first release found, into `todo`; how many.
#[inline(always)]
fn known_ranges(todo: &mut [Range; MAX_RANGES], n: usize) -> usize {
    let n = n.min(MAX_RANGES);
    for (i, r) in todo[..n].iter_mut().enumerate() {
        *r = Range {
            start: KNOWN[2 * i].load(Relaxed),
            end: KNOWN[2 * i + 1].load(Relaxed),
        };
    }
    n
}

#[inline(always)]
fn drop_ranges(todo: &[Range]) {
    for r in todo {
        // SAFETY: the range lies inside read-only segments that were never written (no text
        // relocations); MADV_DONTNEED on such private file mappings only drops page-table
        // entries, and the next access maps the same file bytes back in.
        unsafe {
            libc::madvise(r.start as *mut c_void, r.end - r.start, libc::MADV_DONTNEED);
        }
    }
}

#[inline(never)]
fn fill_release_list(todo: &mut [Range; MAX_RANGES]) -> usize {
    let ranges = read_only_ranges();
    let n = ranges.len().min(MAX_RANGES);
    todo[..n].copy_from_slice(&ranges[..n]);
    n
}

/// The read-only `PT_LOAD` segments of this library, of the front that loaded it (if one did:
/// its code ran once, to choose and load us; its trampolines and dynamic symbols map back in as
/// they are used), and of libgcc_s, which Rust's unwinding brings into C and Fortran programs
/// that would not load it otherwise; its code runs only when a panic unwinds.
pub fn read_only_ranges() -> Vec<Range> {
    struct Search {
        /// Addresses inside the objects to release (0: none).
        anchors: [usize; 2],
        ranges: Vec<Range>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our own `Search`.
        let (info, search) = unsafe { (&*info, &mut *(data as *mut Search)) };
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let base = info.dlpi_addr as usize;
        let ours = phdrs.iter().any(|p| {
            let start = base + p.p_vaddr as usize;
            let segment = start..start + p.p_memsz as usize;
            p.p_type == libc::PT_LOAD && search.anchors.iter().any(|a| segment.contains(a))
        });
        // SAFETY: dlpi_name is a NUL-terminated string (possibly empty) or null.
        let unwinder = !info.dlpi_name.is_null()
            && unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
                .to_bytes()
                .ends_with(b"/libgcc_s.so.1");
        if ours || unwinder {
            search.ranges.extend(ranges_of(phdrs, base, page_size()));
        }
        0
    }
    let mut search = Search {
        anchors: [
            read_only_ranges as fn() -> Vec<Range> as usize,
            crate::next::front_address(),
        ],
        ranges: Vec::new(),
    };
    // SAFETY: `visit` matches the callback type and only reads what the loader gives it.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut search as *mut Search as *mut c_void) };
    search.ranges
}

/// The read-only loadable segments in `phdrs`, loaded at `base`, as whole pages: a segment's
/// first and last page are included unless another loadable segment (possibly writable, which
/// the loader mapped over it) lies in the same page.
pub fn ranges_of(phdrs: &[libc::Elf64_Phdr], base: usize, page: usize) -> Vec<Range> {
    let loads: Vec<&libc::Elf64_Phdr> =
        phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD).collect();
    let span = |p: &libc::Elf64_Phdr| (p.p_vaddr as usize, (p.p_vaddr + p.p_memsz) as usize);
    // Whether a loadable segment other than number `own` has bytes in the page at `at`.
    let shared = |own: usize, at: usize| {
        loads.iter().enumerate().any(|(i, p)| {
            let (start, end) = span(p);
            i != own && start < at + page && at < end
        })
    };
    loads
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_flags & libc::PF_W == 0)
        .filter_map(|(i, p)| {
            let (start, end) = span(p);
            let first = start / page * page;
            let last = (end - 1) / page * page;
            let r = Range {
                start: base
                    + if shared(i, first) {
                        first + page
                    } else {
                        first
                    },
                end: base + if shared(i, last) { last } else { last + page },
            };
            (r.start < r.end).then_some(r)
        })
        .collect()
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phdr(p_type: u32, flags: u32, vaddr: u64, memsz: u64) -> libc::Elf64_Phdr {
        libc::Elf64_Phdr {
            p_type,
            p_flags: flags,
            p_offset: vaddr,
            p_vaddr: vaddr,
            p_paddr: vaddr,
            p_filesz: memsz,
            p_memsz: memsz,
            p_align: 0x1000,
        }
    }

    #[test]
    fn read_only_segments_cover_their_pages_except_those_another_segment_shares() {
        // The layout of libmpistat.so as lld links it with 64 KiB segment alignment: no two
        // segments share a page.
        let phdrs = [
            phdr(libc::PT_LOAD, libc::PF_R, 0, 0x85e40),
            phdr(libc::PT_LOAD, libc::PF_R | libc::PF_X, 0x95e40, 0x1b8940),
            phdr(libc::PT_LOAD, libc::PF_R | libc::PF_W, 0x25e780, 0x9468),
            phdr(libc::PT_LOAD, libc::PF_R | libc::PF_W, 0x277be8, 0x3538),
            phdr(libc::PT_GNU_RELRO, libc::PF_R, 0x25e780, 0x9468),
        ];
        let base = 0x7f00_0000_0000;
        assert_eq!(
            ranges_of(&phdrs, base, 0x1000),
            vec![
                Range {
                    start: base,
                    end: base + 0x86000
                },
                Range {
                    start: base + 0x95000,
                    end: base + 0x24f000
                },
            ]
        );
        // A compact layout (4 KiB alignment): the code's last page is also the start of the
        // writable segment, which the loader mapped over it, so it stays.
        let phdrs = [
            phdr(libc::PT_LOAD, libc::PF_R, 0, 0x6ebfc),
            phdr(libc::PT_LOAD, libc::PF_R | libc::PF_X, 0x6fbfc, 0x121684),
            phdr(libc::PT_LOAD, libc::PF_R | libc::PF_W, 0x191280, 0x8d80),
        ];
        assert_eq!(
            ranges_of(&phdrs, base, 0x1000),
            vec![
                Range {
                    start: base,
                    end: base + 0x6f000
                },
                Range {
                    start: base + 0x6f000,
                    end: base + 0x191000
                },
            ]
        );
    }

    #[test]
    fn a_segment_sharing_its_only_page_is_left_alone() {
        let phdrs = [
            phdr(libc::PT_LOAD, libc::PF_R, 0x1100, 0x800),
            phdr(libc::PT_LOAD, libc::PF_R | libc::PF_W, 0x1900, 0x800),
        ];
        assert_eq!(ranges_of(&phdrs, 0, 0x1000), vec![]);
    }

    #[test]
    fn this_test_binary_has_read_only_ranges_around_its_code() {
        let ranges = read_only_ranges();
        let here = read_only_ranges as fn() -> Vec<Range> as usize;
        assert!(
            ranges.iter().any(|r| (r.start..r.end).contains(&here)),
            "{ranges:x?}"
        );
    }

    #[test]
    fn code_still_runs_after_its_pages_were_released() {
        release_init_pages();
        assert!(!read_only_ranges().is_empty(), "and we are still running");
    }
}
