//! Each thread's state and counter tables: how deep the thread is in MPI calls, its table of
//! counters for every routine (read by `MPI_Finalize` and `MPI_Pcontrol` from all threads), and
//! the call in progress ([`Call`]). Each thread owns its table and is its only writer. The
//! wrappers' path through them is [`crate::rt`]'s.

use crate::generated::routines::N_ROUTINES;
use mpistat_record::model::HIST_BUCKETS;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Index of a routine in [`crate::generated::routines::ROUTINES`].
pub type RoutineId = usize;

/// An outermost call arrived through a `PMPI_X` name (a user's PMPI tool, or a Fortran binding).
pub static ENTERED_VIA_PMPI: AtomicBool = AtomicBool::new(false);

/// One routine's counters in one thread.
#[derive(Default)]
pub struct Counters {
    pub calls: AtomicU64,
    pub ticks: AtomicU64,
    pub count: AtomicU64,
    pub bytes: AtomicU64,
    /// Of `bytes`, those that stayed on this node and those that crossed nodes ([`crate::places`]).
    pub on_node: AtomicU64,
    pub off_node: AtomicU64,
}

/// One routine's counters, message-size histogram and last call ([`crate::thread_parts::Memo`]) in
/// one thread: together, so that the hot path reaches all three from one address.
pub struct Routine {
    pub counters: Counters,
    pub hist: [AtomicU64; HIST_BUCKETS],
    pub memo: crate::thread_parts::Memo,
}

/// One thread's counters for every routine.
pub struct ThreadTable {
    /// Ticks inside all outermost MPI calls of this thread (the supersteps' split of their time
    /// into "outside MPI" and "in other MPI calls" reads it at global collectives only).
    pub mpi_ticks: AtomicU64,
    /// The size of the datatype this thread counted last (see [`TypeSizeCache`](crate::thread_parts::TypeSizeCache)).
    pub last_type: crate::thread_parts::TypeSizeCache,
    /// Whether the last communicator of a global collective on this thread spans
    /// `MPI_COMM_WORLD` (see [`SpansCache`](crate::thread_parts::SpansCache)).
    pub last_spans: crate::thread_parts::SpansCache,
    pub routines: [Routine; N_ROUTINES],
}

/// Every thread's table, for the readers. Tables are never freed: a thread that ended still counts.
pub static TABLES: Mutex<Vec<&'static ThreadTable>> = Mutex::new(Vec::new());

/// A thread's own state: how deep it is in MPI calls, its table once it has one, and whether
/// it is the thread trace mode records ([`crate::trace`]). In this order (the hot path's fields
/// first, at the shortest offsets).
#[repr(C)]
pub(crate) struct ThreadState {
    pub(crate) depth: Cell<u32>,
    pub(crate) table: Cell<Option<&'static ThreadTable>>,
    traced: Cell<bool>,
    /// What the thread's completing call in progress noted ([`Call::requests`]).
    pub(crate) requests: UnsafeCell<crate::thread_parts::Scratch>,
}

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            depth: Cell::new(0),
            table: Cell::new(None),
            traced: Cell::new(false),
            requests: UnsafeCell::new(crate::thread_parts::Scratch::NEW),
        }
    };
}

/// The thread that called `MPI_Init` (its thread pointer, see [`thread_pointer`]; 0: none). That
/// thread makes nearly every MPI call of a job, and finds its state, [`MAIN_STATE`], with one
/// compare instead of the thread-local lookup, a call into ld.so (`__tls_get_addr`, which a
/// library loaded with `dlopen` must use) and its cache lines. Only that thread stores it
/// ([`claim_main_thread`], [`MainThreadExit`]), and only a thread with its thread pointer uses
/// `MAIN_STATE`, so relaxed order is enough: the program order of one thread.
static MAIN_THREAD: AtomicUsize = AtomicUsize::new(0);

/// The state of the thread that called `MPI_Init` once it is claimed, at a fixed address: the
/// counting copies, which run on that thread only, test and mark its depth without loading a
/// pointer to its thread-local state (bench/instructions.sh: 2 instructions a call).
pub(crate) struct MainState(ThreadState);

// SAFETY: only the claimed thread uses it ([`on_main_thread`] holds for it alone, and the
// counting copies run only there: `gates::plain_on`).
unsafe impl Sync for MainState {}

pub(crate) static MAIN_STATE: MainState = MainState(ThreadState {
    depth: Cell::new(0),
    table: Cell::new(Some(&MAIN_TABLE)),
    traced: Cell::new(false),
    requests: UnsafeCell::new(crate::thread_parts::Scratch::NEW),
});

impl MainState {
    /// The claimed thread's state (on that thread only: [`on_main_thread`]).
    #[inline(always)]
    pub(crate) fn get(&self) -> &ThreadState {
        &self.0
    }
}

/// Forgets the main thread when it ends: its thread-local block is freed, and a later thread may
/// get the same thread pointer (glibc reuses thread descriptors). Registered on the main thread
/// by [`claim_main_thread`]; its destructor runs at that thread's exit, `exit()` included.
struct MainThreadExit;

impl Drop for MainThreadExit {
    fn drop(&mut self) {
        if on_main_thread() {
            MAIN_THREAD.store(0, Relaxed);
            crate::gates::set_main_thread(0);
            // Its calls from here (an exit inside an MPI call, `MPI_Finalize` at exit) find
            // its thread-local state again: as deep in MPI as the claimed state was.
            THREAD.with(|t| t.depth.set(MAIN_STATE.get().depth.get()));
        }
    }
}

thread_local! {
    static MAIN_THREAD_EXIT: MainThreadExit = const { MainThreadExit };
}

/// The calling thread's thread pointer (the address `%fs:0` holds on x86-64, `tpidr_el0` on
/// AArch64): unique among live threads, and never 0.
#[inline(always)]
pub(crate) fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: reads the thread register (x86-64: the TCB's self pointer at %fs:0, which the
    // psABI's TLS model guarantees), no side effect.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, preserves_flags, readonly, pure));
    }
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags, pure));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        tp = usize::MAX; // no fast path: `claim_main_thread` claims nothing
    }
    tp
}

/// The table of the thread that called `MPI_Init` ([`claim_main_thread`]), at a fixed address:
/// the counting copies, which run on that thread only, reach its counters without loading a
/// pointer, testing it or keeping it in a register across the real call. All-zero bytes (`.bss`:
/// its pages stay unresident until touched, as a zeroed allocation's).
// SAFETY: all-zero bytes are a valid ThreadTable (it holds only atomics).
static MAIN_TABLE: ThreadTable = unsafe { std::mem::zeroed() };
/// `MPI_COMM_WORLD`'s key while supersteps are kept without the lock (from `superstep::start`
/// to `superstep::finish`, below `MPI_THREAD_MULTIPLE`), else 0. A memo stored on it keeps it
/// ([`crate::thread_parts::Memo::world`]): here, with the table whose memos do.
pub(crate) static WORLD_UNLOCKED: AtomicUsize = AtomicUsize::new(0);

/// [`WORLD_UNLOCKED`]'s value.
#[inline(always)]
pub(crate) fn world_unlocked() -> usize {
    WORLD_UNLOCKED.load(Relaxed)
}

/// The routines whose memo in [`MAIN_TABLE`] holds a world (bit `id % 64` of word `id / 64`):
/// [`forget_world_memos`] clears those alone, touching no other routine's memory.
static WORLD_MEMOS: [AtomicU64; N_ROUTINES.div_ceil(64)] =
    [const { AtomicU64::new(0) }; N_ROUTINES.div_ceil(64)];

/// Routine `id`'s memo in [`MAIN_TABLE`] now holds a world.
pub(crate) fn note_world_memo(id: RoutineId) {
    WORLD_MEMOS[id / 64].fetch_or(1 << (id % 64), Relaxed);
}

/// Clear every memo's world in [`MAIN_TABLE`], so that a synchronising collective's steady
/// test, which compares no generation, fails until the memo is stored again: where the memos'
/// generation moves (`traffic::forget_memos`: a datatype or communicator freed, the node map
/// learned) and where supersteps stop being kept without the lock (`superstep::finish`). A
/// world is only stored while they are so kept, below `MPI_THREAD_MULTIPLE`, where no other
/// MPI call overlaps the one that gets here; at `MPI_THREAD_MULTIPLE` none is stored, and this
/// stores nothing. Inlined: in `MPI_Finalize` it runs from the finalize path's own section
/// (finalize.ld), not from a chunk of `.text` mapped for it alone.
#[inline(always)]
pub(crate) fn forget_world_memos() {
    if world_unlocked() == 0 {
        return;
    }
    for (word, bits) in WORLD_MEMOS.iter().enumerate() {
        let mut bits = bits.swap(0, Relaxed);
        while bits != 0 {
            let id = word * 64 + bits.trailing_zeros() as usize;
            MAIN_TABLE.routines[id].memo.world.store(0, Relaxed);
            bits &= bits - 1;
        }
    }
}

/// [`MAIN_TABLE`] was given to a thread (once: it is one thread's table for good).
static MAIN_TABLE_GIVEN: AtomicBool = AtomicBool::new(false);

/// [`MAIN_TABLE`], for the counting copies (on the claimed thread, whose table it is).
#[inline(always)]
pub(crate) fn main_table() -> &'static ThreadTable {
    &MAIN_TABLE
}

/// Give the calling thread (the one calling `MPI_Init`, before the real call) its table,
/// [`MAIN_TABLE`] (`MPI_Init`'s own call counts there). A table it made before (its calls
/// before `MPI_Init`: `MPI_Initialized`) stays in [`TABLES`] with what it counted (the readers
/// add every table up); only the superstep's MPI ticks, which start at the end of `MPI_Init`,
/// read the thread's own.
pub fn give_main_table() {
    if !MAIN_TABLE_GIVEN.swap(true, Relaxed) {
        TABLES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(&MAIN_TABLE);
        THREAD.with(|t| t.table.set(Some(&MAIN_TABLE)));
    }
}

/// At the end of the outermost `MPI_Init` (outside MPI again) on the thread that
/// [`give_main_table`] gave [`MAIN_TABLE`]: make it the one that finds its state,
/// [`MAIN_STATE`], without the thread-local lookup ([`MAIN_THREAD`]), and that takes the
/// counting copies (`gates`). Not inside an MPI call: the claimed state starts outside MPI (a
/// call that began on the thread-local state ends on it).
pub fn claim_main_thread() {
    let (depth, table) = THREAD.with(|t| (t.depth.get(), t.table.get()));
    if depth != 0 || !table.is_some_and(|table| std::ptr::eq(table, &MAIN_TABLE)) {
        return;
    }
    let tp = thread_pointer();
    if tp == usize::MAX || tp == 0 || MAIN_THREAD.load(Relaxed) == tp {
        return;
    }
    // Registers the destructor that un-claims the thread when it ends.
    MAIN_THREAD_EXIT.with(|_| ());
    MAIN_THREAD.store(tp, Relaxed);
    crate::gates::set_main_thread(tp);
}

/// The calling thread is the one [`claim_main_thread`] claimed (and it has not ended).
#[inline(always)]
pub(crate) fn on_main_thread() -> bool {
    thread_pointer() == MAIN_THREAD.load(Relaxed)
}

/// This thread's state: for the thread that called `MPI_Init` a compare, for others one
/// thread-local lookup (`__tls_get_addr` in a shared library). Once per call of a general
/// copy (a counting copy uses `MAIN_STATE`): the pointer travels in [`Call`] from `enter` to
/// `leave`.
#[inline(always)]
pub(crate) fn this_thread() -> *const ThreadState {
    if on_main_thread() {
        return MAIN_STATE.get();
    }
    THREAD.with(|t| t as *const ThreadState)
}

/// An outermost MPI call in progress. Lives in one wrapper's frame on one thread (the raw
/// pointer keeps it from being sent elsewhere).
pub struct Call {
    pub(crate) t0: u64,
    pub(crate) thread: *const ThreadState,
    /// Entered by a wrapper's general copy ([`enter`]'s `general`): a constant wherever a wrapper
    /// inlines the call's path, as each copy tests its own switches ([`crate::gates`]).
    pub(crate) general: bool,
}

impl Call {
    #[inline(always)]
    pub(crate) fn thread(&self) -> &ThreadState {
        // SAFETY: a thread-local lives as long as its thread, and a `Call` never outlives the
        // wrapper call on the thread that made it.
        unsafe { &*self.thread }
    }

    /// The call's start time (trace mode's too: one clock read less).
    #[inline(always)]
    pub fn start(&self) -> u64 {
        self.t0
    }

    /// The thread's notes of its completing call in progress ([`crate::requests::watch`]).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub fn requests(&self) -> &mut crate::thread_parts::Scratch {
        // SAFETY: only the thread's outermost call, this one, uses its notes, and no reference
        // to them outlives the wrapper's use of them.
        unsafe { &mut *self.thread().requests.get() }
    }

    /// The call is on the thread that trace mode records (no thread-local lookup: the call
    /// has its thread already).
    #[inline(always)]
    pub fn on_traced_thread(&self) -> bool {
        self.thread().traced.get()
    }
}

/// Make the calling thread the one trace mode records ([`Call::on_traced_thread`]). With the
/// hot code, where the thread-local lookup is inlined: run from `.text.init` (`trace::start`)
/// it would call the lookup's own function in `.text`, one more chunk of code in MPI_Init's
/// peak (footprint.rs).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn mark_traced_thread() {
    // SAFETY: as in `Call::thread`.
    unsafe { (*this_thread()).traced.set(true) }
}

/// Whether the calling thread is the one trace mode records.
pub fn on_traced_thread() -> bool {
    // SAFETY: as in `Call::thread`.
    unsafe { (*this_thread()).traced.get() }
}

/// Add `v` to a counter that only this thread writes (a plain load and store, no locked op).
#[inline(always)]
pub fn bump(c: &AtomicU64, v: u64) {
    c.store(c.load(Relaxed).wrapping_add(v), Relaxed);
}

thread_local! {
    /// When this thread's first call of a routine entered the front ([`note_first_call`]), until
    /// [`first_call_bound`] counts it; 0 for none.
    static FIRST_CALL_BEGAN: Cell<u64> = const { Cell::new(0) };
    /// The last first call [`first_call_bound`] counted: where it began, and the thread's time
    /// in MPI before and after it was counted ([`call_entered`]).
    static LAST_FIRST_CALL: Cell<[u64; 3]> = const { Cell::new([0; 3]) };
}

/// Where this thread's first call of a routine entered the front (`abi::FIRST_CALL`), for
/// [`first_call_bound`].
#[inline(always)]
pub fn note_first_call(began: u64) {
    FIRST_CALL_BEGAN.set(began);
}

/// At `now`, the end of the front's work at a routine's first call (`abi::BOUND`): count the
/// ticks since it began ([`note_first_call`]) as this thread's time in MPI, unless the thread is
/// inside an outermost call, whose clock holds them already, or counting is off (the call will
/// not be counted either). The program sees them inside its MPI call, before the wrapper's
/// clock starts: uncounted, the supersteps took them for the program's work (tens of
/// microseconds a routine; milliseconds in `MPI_Finalize` when the other ranks already poll
/// there and the cores are shared).
#[inline(always)]
pub fn first_call_bound(now: u64) {
    let began = FIRST_CALL_BEGAN.replace(0);
    if began == 0 {
        return;
    }
    let ticks = now.wrapping_sub(began);
    // SAFETY: this thread's own state, read on this thread only.
    let thread = unsafe { &*this_thread() };
    if thread.depth.get() == 0 && crate::gates::is_on(crate::gates::COUNTING) {
        let mpi_ticks = &table_of(thread).mpi_ticks;
        let before = mpi_ticks.load(Relaxed);
        bump(mpi_ticks, ticks);
        LAST_FIRST_CALL.set([began, before, before.wrapping_add(ticks)]);
    }
}

/// The last first call [`first_call_bound`] counted, as (where it entered the front, the
/// thread's time in MPI before it was counted), if the thread has counted only `since` ticks
/// since.
#[inline(always)]
fn last_first_call(since: u64) -> Option<(u64, u64)> {
    let [began, before, after] = LAST_FIRST_CALL.get();
    (began != 0 && after.wrapping_add(since) == thread_mpi_ticks()).then_some((began, before))
}

/// Where the outermost call this thread is in entered MPI, and the thread's time in MPI then,
/// for a hook that runs before the wrapper's clock starts (`MPI_Finalize`'s) and read the time
/// `now`: `now` and the time in MPI so far, unless the call is its routine's first, which
/// entered the front before (nothing was counted since [`first_call_bound`] counted it).
#[inline(always)]
pub fn call_entered(now: u64) -> (u64, u64) {
    last_first_call(0).unwrap_or_else(|| (now, thread_mpi_ticks()))
}

/// Where a call of this thread that the wrapper's clock took from `start` to `end` (and counted
/// already) entered MPI: `start`, unless it was its routine's first, whose part in the front
/// [`first_call_bound`] counted right before it (nothing counted since but the call itself):
/// then where it entered the front. For trace mode's events, whose first call of a routine
/// takes the slow path.
#[inline(always)]
pub fn first_call_entered(start: u64, end: u64) -> u64 {
    last_first_call(end.wrapping_sub(start)).map_or(start, |(began, _)| began)
}

/// Ticks this thread spent in outermost MPI calls so far. With the hot code, as
/// [`mark_traced_thread`] (`superstep::start` runs it at the end of `MPI_Init`).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn thread_mpi_ticks() -> u64 {
    thread_table().mpi_ticks.load(Relaxed)
}

#[inline(always)]
fn thread_table() -> &'static ThreadTable {
    // SAFETY: as in `Call::thread`; the reference does not leave this call.
    table_of(unsafe { &*this_thread() })
}

#[inline(always)]
pub(crate) fn table_of(thread: &ThreadState) -> &'static ThreadTable {
    match thread.table.get() {
        Some(table) => table,
        None => new_thread_table(thread),
    }
}

#[cold]
#[inline(never)]
fn new_thread_table(thread: &ThreadState) -> &'static ThreadTable {
    let layout = std::alloc::Layout::new::<ThreadTable>();
    // SAFETY: all-zero bytes are a valid ThreadTable (it holds only atomics). The allocation is
    // leaked on purpose: readers keep it after the thread ends. Zeroed pages stay unresident until
    // touched, so unused routines cost no memory.
    let table: &'static ThreadTable = unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut ThreadTable;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        &*p
    };
    TABLES.lock().unwrap_or_else(|e| e.into_inner()).push(table);
    thread.table.set(Some(table));
    table
}

/// Whether the calling thread is inside an outermost MPI call (used by hooks that must not count).
pub fn inside_mpi() -> bool {
    // SAFETY: as in `Call::thread`.
    unsafe { (*this_thread()).depth.get() != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_state() -> *const ThreadState {
        THREAD.with(|t| t as *const ThreadState)
    }

    #[test]
    fn the_claiming_thread_alone_finds_its_state_by_its_thread_pointer_until_it_ends() {
        let (claimed_tx, claimed_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let main = std::thread::spawn(move || {
            give_main_table();
            // Inside an MPI call (the `MPI_Init` in progress): not claimed yet, its call ends
            // on the thread-local state.
            THREAD.with(|t| t.depth.set(1));
            claim_main_thread();
            assert!(!on_main_thread());
            THREAD.with(|t| t.depth.set(0));
            claim_main_thread();
            let fast_path = on_main_thread();
            claimed_tx
                .send((fast_path, std::ptr::eq(this_thread(), MAIN_STATE.get())))
                .unwrap();
            done_rx.recv().unwrap();
        });
        assert_eq!(claimed_rx.recv().unwrap(), (true, true));
        // Another thread, while that one holds the claim: its own state, not the claimed one.
        let other = std::thread::spawn(|| this_thread() == own_state())
            .join()
            .unwrap();
        assert!(other);
        assert_ne!(MAIN_THREAD.load(Relaxed), 0);
        done_tx.send(()).unwrap();
        main.join().unwrap();
        // Its thread-local block is gone: a thread that gets its thread pointer must not use it.
        assert_eq!(MAIN_THREAD.load(Relaxed), 0);
    }

    /// The front's part of a first call is the thread's time in MPI, and a hook that runs before
    /// the wrapper's clock (`MPI_Finalize`'s) learns where the call entered the front; once the
    /// thread counted anything since, or inside a call, neither.
    #[test]
    fn a_first_calls_front_part_is_time_in_mpi_and_where_the_call_entered() {
        std::thread::spawn(|| {
            let before = thread_mpi_ticks();
            // Counting off (before `MPI_Init`, paused): the call is not counted, nor its front.
            crate::gates::set(crate::gates::COUNTING, false);
            note_first_call(100);
            first_call_bound(600);
            assert_eq!(thread_mpi_ticks(), before);
            crate::gates::set(crate::gates::COUNTING, true);
            note_first_call(1_000);
            first_call_bound(6_000);
            assert_eq!(thread_mpi_ticks() - before, 5_000);
            assert_eq!(call_entered(7_000), (1_000, before));
            // Without the front's call first, nothing is counted.
            first_call_bound(9_000);
            assert_eq!(thread_mpi_ticks() - before, 5_000);
            // A call counted since: this one entered at its hook.
            bump(&thread_table().mpi_ticks, 1);
            assert_eq!(call_entered(10_000), (10_000, before + 5_001));
            // Inside an outermost call, whose clock holds the first call already.
            THREAD.with(|t| t.depth.set(1));
            note_first_call(11_000);
            first_call_bound(12_000);
            THREAD.with(|t| t.depth.set(0));
            assert_eq!(thread_mpi_ticks() - before, 5_001);
            assert_eq!(call_entered(13_000), (13_000, before + 5_001));
            // A traced call right after the front's part of its first call enters at the front;
            // a later one where its clock started.
            note_first_call(20_000);
            first_call_bound(21_000);
            bump(&thread_table().mpi_ticks, 500);
            assert_eq!(first_call_entered(21_100, 21_600), 20_000);
            bump(&thread_table().mpi_ticks, 300);
            assert_eq!(first_call_entered(22_000, 22_300), 22_000);
        })
        .join()
        .unwrap();
    }
}
