//! A global allocator that counts the bytes allocated now and their peak, for the tests that
//! bound the memory of the decoder and of ingest: a test binary installs it
//! (`#[global_allocator] static ALLOCATOR: counting::Counting = counting::Counting;`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counts the bytes allocated now and their peak.
pub struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = NOW.fetch_add(layout.size(), Relaxed) + layout.size();
        PEAK.fetch_max(now, Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NOW.fetch_sub(layout.size(), Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let now = NOW.fetch_add(new_size - layout.size(), Relaxed) + new_size - layout.size();
            PEAK.fetch_max(now, Relaxed);
        } else {
            NOW.fetch_sub(layout.size() - new_size, Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The bytes `f` allocated at its peak beyond what was allocated when it began (on every
/// thread: nothing else is to run meanwhile), and what it returned.
pub fn peak_of<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let start = NOW.load(Relaxed);
    PEAK.store(start, Relaxed);
    let result = f();
    (PEAK.load(Relaxed).saturating_sub(start), result)
}
