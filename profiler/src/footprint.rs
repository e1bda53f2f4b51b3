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
//! The constants it reads go there too: the C strings it gives PMIx, PMI-1, `getenv`
//! (`init_c_str!`, `init_bytes!`), and no predefined handle is looked up by name after start-up
//! (`family::predefined` remembers them).
//!
//! The hot path lives in one 64 KiB-aligned chunk (`profiler/hot.ld`, spec term `hot`), every
//! real routine is looked up during `MPI_Init` ([`crate::next::Next::prefetch`]), and the
//! constants the hot code reads (jump tables, tables, vector masks) are placed with it
//! (`hot.ld`), so nothing the loops run reads the read-only segment: after `MPI_Init` a rank
//! maps back that chunk, the front's chunk of dynamic symbols that lazy binding reads, and its
//! writable data.
//!
//! Within those chunks, a rank keeps only the pages it runs: at the first release the steady
//! state's code (`.text.hot` to the end of `.text.trace`), and at `MPI_Finalize`'s entry
//! `.text.finalize`, become one mapping per page ([`map_page_by_page`]), and fault-around never
//! crosses a mapping's end. The chunks still bound what a path can reach; the pages are what it
//! keeps.
//!
//! Lazy binding: the program's first call of each routine (and of any other function, printf
//! included) has the loader look the name up in every object of the global scope, the front
//! first: the front's dynamic symbol tables (62 kB, one 64 KiB chunk) come back with the first
//! lookup after the release, and would stay. So at cold points of the steady state (a superstep
//! that starts a slot of the superstep buffer, after [`FIRST_RELEASE`] supersteps, then each time
//! their number doubled, then every [`RELEASE_EVERY`]: when the routines of the loops are long
//! bound) [`release_symbol_tables`] drops them again, with libgcc_s's, verified page by page as
//! never written (`/proc/self/pagemap`). And at each routine's first call, right after its
//! binding: the front fills each slot at its first call and then calls [`mpistat_impl_bound`],
//! so a routine first called after the last of those cold points leaves nothing resident either.

use std::ffi::{c_int, c_void, CStr};
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

/// Supersteps before the first [`release_symbol_tables`], and most between two: a routine first
/// called later keeps the front's symbol tables resident for at most as many supersteps as had
/// run, and at most this many. Each costs a few system calls (a few microseconds).
pub const FIRST_RELEASE: u64 = 1 << 10;
pub const RELEASE_EVERY: u64 = 1 << 14;

/// Most ranges [`release_symbol_tables`] and [`mpistat_impl_bound`] drop again (the front's
/// read-only data and libgcc_s's, 1 + 2 here; then the front's code and this library's read-only
/// data, 1 + 1).
const MAX_LOOKED_UP: usize = 6;
/// Of the ranges the first release found, those that lookups read again after `MPI_Init`, as
/// (start, end) pairs: first the read-only data segments, i.e. not code, of the front and of
/// libgcc_s (their symbol tables), [`LOOKED_UP_N`] of them (0 until then); then, up to
/// [`FIRST_CALL_N`], what a routine's first call also maps ([`ReadOnly::first_call`]); with the
/// page size.
static LOOKED_UP: [AtomicUsize; 2 * MAX_LOOKED_UP] =
    [const { AtomicUsize::new(0) }; 2 * MAX_LOOKED_UP];
static LOOKED_UP_N: AtomicUsize = AtomicUsize::new(0);
static FIRST_CALL_N: AtomicUsize = AtomicUsize::new(0);
/// [`ReadOnly::front_windows`] as the first release found them, as (start, end) pairs; 0, 0:
/// none (no front).
static FRONT_WINDOWS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
static PAGE: AtomicUsize = AtomicUsize::new(0);

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
            map_steady_page_by_page();
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
/// its spill file's opening: `trace/record.rs`, in `.text.once`). It lives in `.text.trace`, the
/// steady chunk, not with that code: its loop runs on after the first `madvise` and would map
/// `.text.once` back (profiler/trace.ld).
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

/// Code that the linker scripts place: `.text.finalize` (finalize.ld), and the steady state's,
/// from `.text.hot` (hot.ld) to the end of `.text.trace` (trace.ld), which ends the code segment.
struct PlacedCode {
    finalize: Range,
    steady: Range,
    page: usize,
}

/// `None` before the first release found the page size, or if the linker scripts did not place
/// the sections in their order.
#[cfg(not(test))]
#[inline(always)]
fn placed_code() -> Option<PlacedCode> {
    extern "C" {
        static __mpistat_finalize_start: u8;
        static __mpistat_steady_start: u8;
        static __mpistat_steady_end: u8;
    }
    let page = PAGE.load(Relaxed);
    if page == 0 {
        return None;
    }
    let [finalize, steady, end] = [
        &raw const __mpistat_finalize_start,
        &raw const __mpistat_steady_start,
        &raw const __mpistat_steady_end,
    ]
    .map(|a| a as usize);
    // The scripts place them in this order; anything else splits nothing (nor underflows).
    if !(finalize <= steady && steady <= end) {
        return None;
    }
    Some(PlacedCode {
        finalize: Range {
            start: finalize,
            end: steady,
        },
        steady: Range {
            start: steady,
            end: end.div_ceil(page) * page,
        },
        page,
    })
}

/// The unit tests' binary is linked without the linker scripts.
#[cfg(test)]
fn placed_code() -> Option<PlacedCode> {
    None
}

/// Make each page of `r` (page-aligned, this library's code) a mapping of its own, so that a
/// fault there maps that page only. The kernel's fault-around maps, at each fault in a file's
/// code, every page of the 64 KiB-aligned window around it that the page cache holds, but only
/// within the faulting mapping (VMA); advice that differs from a neighbour's keeps two pages in
/// two mappings. So every other page gets `MADV_RANDOM` (whose only effect besides is no
/// read-ahead when a page is not in the page cache). A rank then keeps of its steady code the
/// pages its loops run, not the chunks (docs/footprint.md, "pagewise"). Each mapping costs the
/// kernel ~220 bytes (a `vm_area_struct` and its share of the maple tree). Errors are ignored:
/// the chunks then stay whole. Inlined: its callers' chunks are the ones mapped then.
#[inline(always)]
fn map_page_by_page(r: Range, page: usize) {
    let mut at = r.start;
    while at < r.end {
        // SAFETY: advice on our own mapped code; MADV_RANDOM changes no content.
        unsafe { libc::madvise(at as *mut c_void, page, libc::MADV_RANDOM) };
        at += 2 * page;
    }
}

/// [`map_page_by_page`] for the steady state's code, at the first release (before the real
/// `MPI_Init`; cold, in `.text`, whose pages that release drops), and for the front's
/// windows ([`ReadOnly::front_windows`]): a rank then keeps of the front's code the page of the
/// hot routines' trampolines, and of its symbol tables the page of the bloom filter that every
/// lazy binding of a name the front lacks reads, not their three pages each.
#[inline(never)]
fn map_steady_page_by_page() {
    if let Some(placed) = placed_code() {
        let front = [0, 1].map(|i| Range {
            start: FRONT_WINDOWS[2 * i].load(Relaxed),
            end: FRONT_WINDOWS[2 * i + 1].load(Relaxed),
        });
        let pages = pages_of(placed.steady, placed.page)
            + front
                .iter()
                .map(|&r| pages_of(r, placed.page))
                .sum::<usize>();
        if room_for_mappings(pages) {
            map_page_by_page(placed.steady, placed.page);
            for r in front {
                map_page_by_page(r, placed.page);
            }
        }
    }
}

/// [`map_page_by_page`] for `.text.finalize`, at `MPI_Finalize`'s entry: each of its steps then
/// maps the pages of our code it runs, not their 64 KiB chunks (docs/footprint.md, "pagewise").
/// Not done at start-up: for a whole job its 80 mappings would hold ~18 kB of the kernel's
/// memory for code that runs once.
#[link_section = ".text.finalize.mpistat"]
pub fn map_finalize_page_by_page() {
    if let Some(placed) = placed_code() {
        if room_for_mappings(pages_of(placed.finalize, placed.page)) {
            map_page_by_page(placed.finalize, placed.page);
        }
    }
}

#[inline(always)]
fn pages_of(r: Range, page: usize) -> usize {
    (r.end - r.start) / page
}

/// Mappings the program must still be able to make, under the kernel's limit, after ours.
const MAPPINGS_LEFT: usize = 4096;

/// Whether this process has room for `extra` more mappings and still [`MAPPINGS_LEFT`] before
/// the kernel's limit (`vm.max_map_count`, 65,530 by default): our mappings must never be the
/// ones that make the program's next `mmap` fail. `false` when either count cannot be read.
/// Reads `/proc/self/maps` through (one line a mapping): a few hundred lines at start-up.
#[inline(always)]
fn room_for_mappings(extra: usize) -> bool {
    let (mut have, mut limit) = (0usize, 0usize);
    let read = read_through(c"/proc/self/maps", |bytes| {
        have += bytes.iter().filter(|&&b| b == b'\n').count();
    }) && read_through(c"/proc/sys/vm/max_map_count", |bytes| {
        for &b in bytes.iter().take_while(|b| b.is_ascii_digit()) {
            limit = limit
                .saturating_mul(10)
                .saturating_add(usize::from(b - b'0'));
        }
    });
    read && leaves_room(have, limit, extra)
}

/// Reads `path` through, giving `each` every piece read; whether it could.
#[inline(always)]
fn read_through(path: &CStr, mut each: impl FnMut(&[u8])) -> bool {
    // SAFETY: a NUL-terminated path; reads into our own buffer; the descriptor closed once.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        let read = loop {
            let got = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            match usize::try_from(got) {
                Ok(0) => break true,
                Ok(got) => each(&buf[..got]),
                Err(_) => break false,
            }
        };
        libc::close(fd);
        read
    }
}

/// Whether `have` mappings and `extra` more leave [`MAPPINGS_LEFT`] under `limit`.
#[inline(always)]
fn leaves_room(have: usize, limit: usize, extra: usize) -> bool {
    have.saturating_add(extra).saturating_add(MAPPINGS_LEFT) <= limit
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
    let ReadOnly {
        ranges,
        looked_up,
        first_call,
        front_windows,
    } = read_only_ranges();
    for (i, r) in front_windows
        .iter()
        .take(FRONT_WINDOWS.len() / 2)
        .enumerate()
    {
        FRONT_WINDOWS[2 * i].store(r.start, Relaxed);
        FRONT_WINDOWS[2 * i + 1].store(r.end, Relaxed);
    }
    let both = looked_up.iter().chain(&first_call);
    for (i, r) in both.take(MAX_LOOKED_UP).enumerate() {
        LOOKED_UP[2 * i].store(r.start, Relaxed);
        LOOKED_UP[2 * i + 1].store(r.end, Relaxed);
    }
    PAGE.store(page_size(), Relaxed);
    let all = (looked_up.len() + first_call.len()).min(MAX_LOOKED_UP);
    FIRST_CALL_N.store(all, Release);
    LOOKED_UP_N.store(looked_up.len().min(MAX_LOOKED_UP), Release);
    let n = ranges.len().min(MAX_RANGES);
    todo[..n].copy_from_slice(&ranges[..n]);
    n
}

/// `/proc/self/pagemap`, with the hot code: as a literal in `.rodata` it would map a chunk of
/// that at every call.
#[link_section = ".text.hot.mpistat"]
static PAGEMAP: [u8; 19] = *b"/proc/self/pagemap\0";

/// Drop again this process's mappings of the front's and libgcc_s's read-only data (their
/// dynamic symbol tables, which every lazy binding reads: see the module doc), at a cold point
/// of the steady state: called on the schedule of the module doc, never on the per-call path. Only pages that `/proc/self/pagemap` shows as not copied are dropped (mapped
/// from the file, or not mapped and not swapped): a page someone wrote (copy-on-write, after an
/// `mprotect`) keeps its contents. Without pagemap (no /proc, a seccomp filter) nothing is
/// dropped. With the hot code and allocation-free, as [`release_init_pages`]: nothing here may
/// panic (the hot path runs it unguarded). Costs a few system calls: open, one read per 256 kB
/// range, one `madvise` per run of droppable pages, close.
#[cold]
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn release_symbol_tables() {
    drop_looked_up(LOOKED_UP_N.load(Acquire));
}

/// The front's call right after it filled a slot, at the routine's first call (`abi::BOUND`):
/// that call mapped pages no later call needs (the loader's lazy binding of the routine read the
/// front's dynamic symbol tables, the front's code chose its target, and `dlsym` read this
/// library's symbol tables), so drop them again, as [`release_symbol_tables`] does (nothing
/// before `MPI_Init`'s first release), with the front's code and this library's read-only data
/// (which the superstep schedule leaves alone: nothing maps them in a loop). A routine first
/// called after the loops (a rooted collective ends no superstep, so the schedule's drops all
/// came before) then leaves nothing resident. Any thread, any time.
///
/// Its time, and the front's before it, is the program's time in MPI
/// ([`crate::threads::first_call_bound`]).
#[no_mangle]
#[link_section = ".text.hot.mpistat"]
pub extern "C" fn mpistat_impl_bound() {
    drop_looked_up(FIRST_CALL_N.load(Acquire));
    crate::threads::first_call_bound(crate::clock::ticks());
}

/// The front's call as a routine's first call enters it, before it fills the slot
/// (`abi::FIRST_CALL`): where [`mpistat_impl_bound`]'s time in MPI begins.
#[no_mangle]
#[link_section = ".text.hot.mpistat"]
pub extern "C" fn mpistat_impl_first_call() {
    crate::threads::note_first_call(crate::clock::ticks());
}

/// [`drop_unwritten_pages`] of the first `n` ranges of [`LOOKED_UP`].
#[inline(always)]
fn drop_looked_up(n: usize) {
    let n = n.min(MAX_LOOKED_UP);
    let page = PAGE.load(Relaxed);
    if n == 0 || page == 0 {
        return;
    }
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(PAGEMAP.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return;
    }
    for i in 0..n {
        let (start, end) = (
            LOOKED_UP[2 * i].load(Relaxed),
            LOOKED_UP[2 * i + 1].load(Relaxed),
        );
        drop_unwritten_pages(fd, start, end, page);
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
}

/// Drop the pages of `start..end` (page-aligned, inside a read-only file mapping) that the
/// pagemap `fd` shows as not copied: present and file-backed, or neither present nor swapped.
/// Stops (having dropped only what it read) if the read fails.
#[inline(always)]
fn drop_unwritten_pages(fd: c_int, start: usize, end: usize, page: usize) {
    drop_unwritten_pages_but(fd, start, end, page, |_| false);
}

/// [`drop_unwritten_pages`], keeping besides the pages whose number from `start` `keep` names.
#[inline(always)]
fn drop_unwritten_pages_but(
    fd: c_int,
    start: usize,
    end: usize,
    page: usize,
    keep: impl Fn(usize) -> bool,
) {
    // pagemap's other bits ([`PRESENT`]).
    const SWAPPED: u64 = 1 << 62;
    const FILE: u64 = 1 << 61;
    let unwritten = |e: u64| {
        if e & PRESENT != 0 {
            e & FILE != 0
        } else {
            e & SWAPPED == 0
        }
    };
    let drop_run = |from: usize, to: usize| {
        if from < to {
            // SAFETY: pages of a read-only file mapping that pagemap showed as not copied:
            // MADV_DONTNEED only drops their page-table entries; the next read maps the same
            // file bytes back.
            unsafe { libc::madvise(from as *mut c_void, to - from, libc::MADV_DONTNEED) };
        }
    };
    let mut entries = [0u64; 64];
    let mut run = start;
    let mut at = start;
    while at < end {
        let want = ((end - at) / page).min(entries.len());
        // SAFETY: reads at most `entries`' bytes into it.
        let got = unsafe {
            libc::pread(
                fd,
                entries.as_mut_ptr().cast(),
                want * 8,
                (at / page * 8) as libc::off_t,
            )
        };
        if got < 8 {
            break;
        }
        for &e in entries.iter().take(got as usize / 8) {
            if !unwritten(e) || keep((at - start) / page) {
                drop_run(run, at);
                run = at + page;
            }
            at += page;
        }
    }
    drop_run(run, at.min(end));
}

/// The read-only pages of every other object loaded (the program, the MPI library and its
/// components, libc, ...) and which of them were resident at a mark ([`ResidentMark::note`]):
/// start-up's beginning and `MPI_Finalize`'s entry. [`ResidentMark::release_since`] drops those
/// that our own work mapped since: start-up's use of libc (reading site.toml, `getpwuid_r`) before
/// the real `MPI_Init`, and between the finalize's steps what each step mapped (the
/// communicator's creation and the messages in the MPI library), so that it counts in the step
/// that ran it only, not in every later one. What the program or the MPI library had resident
/// at the mark stays: we take nothing from what the bare job holds. Only clean file-backed pages
/// go (pagemap-checked, as [`release_symbol_tables`]); without `/proc/self/pagemap` nothing does.
pub struct ResidentMark {
    ranges: Vec<Range>,
    /// A bit a page of `ranges`, in order: resident at the mark.
    resident: Vec<u64>,
    page: usize,
}

/// The load addresses (`dlpi_addr`) of this library and of the front, once [`read_only_ranges`]
/// found them ([`UNKNOWN`] before): [`others_read_only_ranges`] skips them by it, as reading
/// their program headers would map their first chunk of `.rodata` back.
static OWN_BASES: [AtomicUsize; 2] = [const { AtomicUsize::new(UNKNOWN) }; 2];

/// Pagemap entries read at a time (4 kB of stack).
const PAGEMAP_BATCH: usize = 512;

impl ResidentMark {
    /// Note which read-only pages of the other objects are resident now; `None` without
    /// `/proc/self/pagemap` (then nothing is dropped).
    #[link_section = ".text.finalize.mpistat"]
    pub fn note() -> Option<ResidentMark> {
        let page = page_size();
        ResidentMark::of(others_read_only_ranges(page), page)
    }

    /// Note which pages of `ranges` (read-only file mappings, whole pages) are resident now.
    #[link_section = ".text.finalize.mpistat"]
    fn of(ranges: Vec<Range>, page: usize) -> Option<ResidentMark> {
        let pages: usize = ranges.iter().map(|r| (r.end - r.start) / page).sum();
        let mut resident = vec![0u64; pages.div_ceil(64)];
        let pagemap = Pagemap::open()?;
        let mut n = 0;
        for r in &ranges {
            let mut entries = [0u64; PAGEMAP_BATCH];
            let mut at = r.start;
            while at < r.end {
                let got = pagemap.read(at, r.end, page, &mut entries)?;
                for &e in got {
                    if e & PRESENT != 0 {
                        resident[n / 64] |= 1 << (n % 64);
                    }
                    n += 1;
                }
                at += got.len() * page;
            }
        }
        Some(ResidentMark {
            ranges,
            resident,
            page,
        })
    }

    /// At start-up's end, and between two steps of the finalize: this library's read-only pages
    /// ([`release_init_pages`]), and the others' clean pages that were not resident at the mark.
    /// In `.text.hot`, which every rank keeps, as [`release_init_pages`] is: dropping this
    /// library's pages drops `.text.finalize`'s, and a step that came back into them for the
    /// rest of its release mapped the common part's first chunk again (docs/footprint.md,
    /// "finpieces").
    #[link_section = ".text.hot.mpistat"]
    pub fn release_since(&self) {
        release_init_pages();
        let Some(pagemap) = Pagemap::open() else {
            return;
        };
        let mut first = 0;
        for r in &self.ranges {
            let was_resident = |i: usize| {
                let n = first + i;
                self.resident[n / 64] & (1 << (n % 64)) != 0
            };
            drop_unwritten_pages_but(pagemap.0, r.start, r.end, self.page, was_resident);
            first += (r.end - r.start) / self.page;
        }
    }
}

// pagemap's bits (Documentation/admin-guide/mm/pagemap.rst).
const PRESENT: u64 = 1 << 63;

/// `/proc/self/pagemap`, open.
struct Pagemap(c_int);

impl Pagemap {
    #[link_section = ".text.hot.mpistat"]
    fn open() -> Option<Pagemap> {
        // SAFETY: a NUL-terminated path; the descriptor is closed on drop.
        let fd = unsafe { libc::open(PAGEMAP.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
        (fd >= 0).then_some(Pagemap(fd))
    }

    /// The entries of the pages from `at` (at most to `end`, at most `entries.len()`); `None` if
    /// the read fails or gives nothing.
    #[link_section = ".text.hot.mpistat"]
    fn read<'a>(
        &self,
        at: usize,
        end: usize,
        page: usize,
        entries: &'a mut [u64; PAGEMAP_BATCH],
    ) -> Option<&'a [u64]> {
        let want = ((end - at) / page).min(entries.len());
        // SAFETY: reads at most `entries`' bytes into it.
        let got = unsafe {
            libc::pread(
                self.0,
                entries.as_mut_ptr().cast(),
                want * 8,
                (at / page * 8) as libc::off_t,
            )
        };
        (got >= 8).then(|| &entries[..got as usize / 8])
    }
}

impl Drop for Pagemap {
    #[link_section = ".text.hot.mpistat"]
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

/// The read-only `PT_LOAD` segments (whole pages, [`ranges_of`]) of every object loaded but
/// this library, the front (whose pages [`release_init_pages`] drops whatever was resident) and
/// the vDSO (no file behind it).
#[link_section = ".text.finalize.mpistat"]
fn others_read_only_ranges(page: usize) -> Vec<Range> {
    struct Search {
        /// The load addresses of this library and the front ([`OWN_BASES`]).
        own_bases: [usize; 2],
        /// Addresses inside this library, the front (0: none) and the vDSO (0: none), for the
        /// objects whose load address does not say.
        skipped: [usize; 3],
        page: usize,
        found: Vec<Range>,
    }
    #[link_section = ".text.finalize.mpistat"]
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our own `Search`.
        let (info, search) = unsafe { (&*info, &mut *(data as *mut Search)) };
        let base = info.dlpi_addr as usize;
        if search.own_bases.contains(&base) {
            return 0;
        }
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let holds = |a: usize| {
            a != 0
                && phdrs.iter().any(|p| {
                    let start = base + p.p_vaddr as usize;
                    p.p_type == libc::PT_LOAD && (start..start + p.p_memsz as usize).contains(&a)
                })
        };
        if !search.skipped.iter().any(|&a| holds(a)) {
            let ranges = ranges_of(phdrs, base, search.page, libc::PF_W);
            search.found.extend(ranges);
        }
        0
    }
    let mut search = Search {
        own_bases: [OWN_BASES[0].load(Relaxed), OWN_BASES[1].load(Relaxed)],
        skipped: [
            read_only_ranges as fn() -> ReadOnly as usize,
            crate::next::front_address(),
            // SAFETY: getauxval has no preconditions (0 when the entry is missing).
            unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize,
        ],
        page,
        found: Vec::new(),
    };
    // SAFETY: `visit` matches the callback type and only reads what the loader gives it.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut search as *mut Search as *mut c_void) };
    search.found
}

/// The read-only `PT_LOAD` segments of this library, of the front that loaded it (if one did:
/// its code ran once, to choose and load us; its trampolines and dynamic symbols map back in as
/// they are used), and of libgcc_s, which Rust's unwinding brings into C and Fortran programs
/// that would not load it otherwise; its code runs only when a panic unwinds.
pub struct ReadOnly {
    pub ranges: Vec<Range>,
    /// Those that lookups of names read again after `MPI_Init`: the front's and libgcc_s's
    /// read-only segments of data (their dynamic symbol tables; not their code).
    pub looked_up: Vec<Range>,
    /// What a routine's first call maps besides (the front fills its slot then,
    /// [`mpistat_impl_bound`]): the front's code and this library's read-only data (the front's
    /// `dlsym` reads its symbol tables).
    pub first_call: Vec<Range>,
    /// The last 64 KiB window of each of the front's read-only segments, where
    /// front/trampolines.ld places what a rank keeps using of them: the bloom filter and hash
    /// table of its dynamic symbols (`.gnu.hash`), which every lazy binding of the program reads
    /// first, and its trampolines (the hot routines' first).
    pub front_windows: Vec<Range>,
}

/// The kernel's fault-around window, and the alignment of the chunks the linker scripts place.
const FAULT_AROUND: usize = 64 * 1024;

/// The part of `segment` in its last [`FAULT_AROUND`] window.
fn last_window(segment: Range) -> Range {
    Range {
        start: segment
            .start
            .max((segment.end - 1) / FAULT_AROUND * FAULT_AROUND),
        end: segment.end,
    }
}

/// The [`ReadOnly`] ranges of this process.
pub fn read_only_ranges() -> ReadOnly {
    struct Search {
        /// Addresses inside this library and the front (0: none).
        anchors: [usize; 2],
        found: ReadOnly,
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
        let holds = |a: usize| {
            phdrs.iter().any(|p| {
                let start = base + p.p_vaddr as usize;
                p.p_type == libc::PT_LOAD && (start..start + p.p_memsz as usize).contains(&a)
            })
        };
        let [own, front] = search.anchors;
        let (own, front) = (holds(own), front != 0 && holds(front));
        // SAFETY: dlpi_name is a NUL-terminated string (possibly empty) or null.
        let unwinder = !info.dlpi_name.is_null()
            && unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
                .to_bytes()
                .ends_with(b"/libgcc_s.so.1");
        if own || front {
            OWN_BASES[usize::from(front)].store(base, Relaxed);
        }
        if own || front || unwinder {
            let found = &mut search.found;
            let read_only = ranges_of(phdrs, base, page_size(), libc::PF_W);
            let data = ranges_of(phdrs, base, page_size(), libc::PF_W | libc::PF_X);
            if front {
                let code = read_only.iter().filter(|r| !data.contains(r));
                found.first_call.extend(code);
                found.front_windows = read_only.iter().map(|&r| last_window(r)).collect();
            }
            found.ranges.extend(read_only);
            if own {
                found.first_call.extend(data);
            } else {
                found.looked_up.extend(data);
            }
        }
        0
    }
    let mut search = Search {
        anchors: [
            read_only_ranges as fn() -> ReadOnly as usize,
            crate::next::front_address(),
        ],
        found: ReadOnly {
            ranges: Vec::new(),
            looked_up: Vec::new(),
            first_call: Vec::new(),
            front_windows: Vec::new(),
        },
    };
    // SAFETY: `visit` matches the callback type and only reads what the loader gives it.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut search as *mut Search as *mut c_void) };
    search.found
}

/// The loadable segments in `phdrs` with none of the flags `excluded` (`PF_W`: the read-only
/// ones), loaded at `base`, as whole pages: a segment's first and last page are included unless
/// another loadable segment (possibly writable, which the loader mapped over it) lies in the same
/// page.
pub fn ranges_of(
    phdrs: &[libc::Elf64_Phdr],
    base: usize,
    page: usize,
    excluded: u32,
) -> Vec<Range> {
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
        .filter(|(_, p)| p.p_flags & excluded == 0)
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
            ranges_of(&phdrs, base, 0x1000, libc::PF_W),
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
            ranges_of(&phdrs, base, 0x1000, libc::PF_W),
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
        assert_eq!(ranges_of(&phdrs, 0, 0x1000, libc::PF_W), vec![]);
    }

    #[test]
    fn this_test_binary_has_read_only_ranges_around_its_code() {
        let ranges = read_only_ranges().ranges;
        let here = read_only_ranges as fn() -> ReadOnly as usize;
        assert!(
            ranges.iter().any(|r| (r.start..r.end).contains(&here)),
            "{ranges:x?}"
        );
    }

    /// Whether each page of `start..start + pages * 4096` is mapped, and whether it is a copy,
    /// from pagemap.
    fn mapped_and_copied(start: usize, pages: usize) -> Vec<(bool, bool)> {
        use std::os::unix::fs::FileExt;
        let mut bytes = vec![0u8; pages * 8];
        std::fs::File::open("/proc/self/pagemap")
            .unwrap()
            .read_exact_at(&mut bytes, (start / 4096 * 8) as u64)
            .unwrap();
        bytes
            .chunks(8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
            .map(|e| (e >> 63 == 1, e >> 63 == 1 && (e >> 61) & 1 == 0))
            .collect()
    }

    /// A private read-only mapping of `len` bytes of 7 (an unlinked file of this process's),
    /// which the test unmaps.
    fn file_of_sevens(name: &str, len: usize) -> *mut u8 {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        // SAFETY: a private read-only mapping of our own file (it outlives the descriptor).
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        } as *mut u8;
        assert_ne!(map, libc::MAP_FAILED as *mut u8);
        map
    }

    /// Page `page` of `map` ([`file_of_sevens`]) made writable, 42 written at its start (the
    /// kernel copies it), read-only again.
    fn write_a_copy(map: *mut u8, page: usize) {
        // SAFETY: a page inside the test's mapping.
        unsafe {
            let copied = map.add(page * 4096);
            assert_eq!(
                libc::mprotect(copied.cast(), 4096, libc::PROT_READ | libc::PROT_WRITE),
                0
            );
            *copied = 42;
            assert_eq!(libc::mprotect(copied.cast(), 4096, libc::PROT_READ), 0);
        }
    }

    /// Page 17 of `pages` (32) of a new mapping of a file, read after `prepare` ran on the
    /// mapping: which pages are mapped then.
    fn mapped_after_one_read(name: &str, prepare: impl Fn(Range)) -> Vec<bool> {
        let pages = 32;
        let map = file_of_sevens(name, pages * 4096);
        let start = map as usize;
        prepare(Range {
            start,
            end: start + pages * 4096,
        });
        // SAFETY: a read inside the mapping, then unmapped once.
        let mapped = unsafe {
            std::ptr::read_volatile(map.add(17 * 4096));
            let mapped = mapped_and_copied(start, pages);
            libc::munmap(map.cast(), pages * 4096);
            mapped
        };
        mapped.into_iter().map(|(present, _)| present).collect()
    }

    #[test]
    fn a_read_in_code_mapped_page_by_page_maps_its_page_only() {
        // Without it, the kernel maps the 64 KiB around the read (fault-around).
        let whole = mapped_after_one_read("footprint-whole", |_| {});
        assert!(whole.iter().filter(|&&p| p).count() > 1, "{whole:?}");
        let paged = mapped_after_one_read("footprint-paged", |r| map_page_by_page(r, 4096));
        let only_17: Vec<bool> = (0..32).map(|i| i == 17).collect();
        assert_eq!(paged, only_17);
    }

    #[test]
    fn the_front_s_windows_are_its_segments_last_ones() {
        let range = |start, end| Range { start, end };
        // The front as linked: code from 0x42000, trampolines from 0x80000 to the PLT's page.
        let code = range(0x7f00_0004_2000, 0x7f00_0008_3000);
        assert_eq!(last_window(code), range(0x7f00_0008_0000, 0x7f00_0008_3000));
        // Ending on a window's boundary: that whole window.
        let code = range(0x42000, 0x90000);
        assert_eq!(last_window(code), range(0x80000, 0x90000));
        // Code smaller than a window: all of it, never before its start.
        let code = range(0x81000, 0x83000);
        assert_eq!(last_window(code), code);
    }

    #[test]
    fn page_by_page_only_with_room_under_the_mapping_limit() {
        assert!(leaves_room(500, 65_530, 80));
        assert!(leaves_room(65_530 - 80 - MAPPINGS_LEFT, 65_530, 80));
        assert!(!leaves_room(65_530 - 80 - MAPPINGS_LEFT + 1, 65_530, 80));
        assert!(!leaves_room(usize::MAX, 65_530, 80));
        // This process: a few dozen mappings, far under the default limit, and under none of 0.
        assert!(room_for_mappings(80));
        assert!(!room_for_mappings(usize::MAX / 2));
    }

    #[test]
    fn a_page_written_since_it_was_mapped_is_never_dropped() {
        use std::os::fd::AsRawFd;
        let len = 4 * 4096;
        let map = file_of_sevens("footprint-drop", len);
        let start = map as usize;
        // SAFETY: reads inside the mapping.
        unsafe {
            for page in 0..4 {
                std::ptr::read_volatile(map.add(page * 4096));
            }
        }
        write_a_copy(map, 2);
        assert_eq!(
            mapped_and_copied(start, 4),
            [(true, false), (true, false), (true, true), (true, false)]
        );
        let pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
        drop_unwritten_pages(pagemap.as_raw_fd(), start, start + len, 4096);
        // The file's pages are gone, the copy stays, and holds what was written.
        assert_eq!(
            mapped_and_copied(start, 4),
            [(false, false), (false, false), (true, true), (false, false)]
        );
        // SAFETY: inside the mapping, then unmapped once.
        unsafe {
            assert_eq!(*map.add(2 * 4096), 42);
            assert_eq!(*map.add(3 * 4096), 7);
            libc::munmap(map.cast(), len);
        }
    }

    #[test]
    fn a_finalize_step_drops_only_the_clean_pages_mapped_since_the_entry() {
        let len = 6 * 4096;
        let map = file_of_sevens("footprint-entry", len);
        let start = map as usize;
        // Only page 1 resident at the entry (a read maps its neighbours too: fault-around).
        // SAFETY: reads inside the mapping, and drops of its clean pages.
        unsafe {
            std::ptr::read_volatile(map.add(4096));
            libc::madvise(map.cast(), 4096, libc::MADV_DONTNEED);
            libc::madvise(map.add(2 * 4096).cast(), 4 * 4096, libc::MADV_DONTNEED);
        }
        let mapped = |pages: &[(bool, bool)]| pages.iter().map(|p| p.0).collect::<Vec<_>>();
        assert_eq!(
            mapped(&mapped_and_copied(start, 6)),
            [false, true, false, false, false, false]
        );
        let entry = ResidentMark::of(
            vec![Range {
                start,
                end: start + len,
            }],
            4096,
        )
        .expect("/proc/self/pagemap");
        // SAFETY: reads inside the mapping.
        unsafe {
            for page in [2, 3, 4] {
                std::ptr::read_volatile(map.add(page * 4096));
            }
        }
        write_a_copy(map, 4);
        assert_eq!(mapped(&mapped_and_copied(start, 6))[1..5], [true; 4]);
        entry.release_since();
        // Page 1 was resident at the entry and stays; 2 and 3 the step mapped, and go; 4 is a
        // copy, and stays with what was written.
        assert_eq!(
            mapped_and_copied(start, 6),
            [
                (false, false),
                (true, false),
                (false, false),
                (false, false),
                (true, true),
                (false, false)
            ]
        );
        // SAFETY: inside the mapping, then unmapped once.
        unsafe {
            assert_eq!(*map.add(4 * 4096), 42);
            assert_eq!(*map.add(2 * 4096), 7);
            libc::munmap(map.cast(), len);
        }
    }

    #[test]
    fn the_finalize_entry_covers_libc_but_not_this_library() {
        // This test binary is "this library" only by the anchor's address: the objects it skips
        // are found by their load addresses once `read_only_ranges` ran.
        read_only_ranges();
        let page = page_size();
        let ranges = others_read_only_ranges(page);
        let in_ranges = |a: usize| ranges.iter().any(|r| (r.start..r.end).contains(&a));
        assert!(
            in_ranges(libc::getpid as *const () as usize),
            "libc: {ranges:x?}"
        );
        let here = read_only_ranges as fn() -> ReadOnly as usize;
        assert!(!in_ranges(here), "this object: {ranges:x?}");
    }

    #[test]
    fn code_still_runs_after_its_pages_were_released() {
        release_init_pages();
        release_symbol_tables();
        assert!(
            !read_only_ranges().ranges.is_empty(),
            "and we are still running"
        );
    }
}
