//! The wrappers' hot path: enter and leave an MPI call, and the per-thread counter tables.
//!
//! A wrapper calls [`enter`] before and [`leave`] after the real routine. Only the outermost MPI
//! call of a thread is counted (depth guard), so calls that reach us twice (Fortran bindings and
//! user PMPI tools call our `PMPI_X`; MPI calling itself) count once. Each thread owns its table
//! and is its only writer; `MPI_Finalize` and `MPI_Pcontrol` read all tables.

use crate::clock::ticks;
use crate::ffi::MPI_Comm;
use crate::gates;
use crate::generated::routines::N_ROUTINES;
use crate::traffic::{Measured, Traffic};
use mpistat_record::model::HIST_BUCKETS;
use std::cell::{Cell, UnsafeCell};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::Relaxed};
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

/// One routine's counters, message-size histogram and last call ([`crate::traffic::Memo`]) in
/// one thread: together, so that the hot path reaches all three from one address.
pub struct Routine {
    pub counters: Counters,
    pub hist: [AtomicU64; HIST_BUCKETS],
    pub memo: crate::traffic::Memo,
}

/// One thread's counters for every routine.
pub struct ThreadTable {
    /// Ticks inside all outermost MPI calls of this thread (the supersteps' split of their time
    /// into "outside MPI" and "in other MPI calls" reads it at global collectives only).
    pub mpi_ticks: AtomicU64,
    /// The size of the datatype this thread counted last (see `traffic::TypeSizeCache`).
    pub last_type: crate::traffic::TypeSizeCache,
    /// Whether the last communicator of a global collective on this thread spans
    /// `MPI_COMM_WORLD` (see `superstep::SpansCache`).
    pub last_spans: crate::superstep::SpansCache,
    pub routines: [Routine; N_ROUTINES],
}

/// Every thread's table, for the readers. Tables are never freed: a thread that ended still counts.
pub static TABLES: Mutex<Vec<&'static ThreadTable>> = Mutex::new(Vec::new());

/// A thread's own state: how deep it is in MPI calls, its table once it has one, and whether
/// it is the thread trace mode records ([`crate::trace`]). In this order (the hot path's fields
/// first, at the shortest offsets).
#[repr(C)]
struct ThreadState {
    depth: Cell<u32>,
    table: Cell<Option<&'static ThreadTable>>,
    traced: Cell<bool>,
    /// What the thread's completing call in progress noted ([`Call::requests`]).
    requests: UnsafeCell<crate::requests::Scratch>,
}

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            depth: Cell::new(0),
            table: Cell::new(None),
            traced: Cell::new(false),
            requests: UnsafeCell::new(crate::requests::Scratch::NEW),
        }
    };
}

/// The thread that called `MPI_Init` (its thread pointer, see [`thread_pointer`]; 0: none) and
/// its state. That thread makes nearly every MPI call of a job, and finds its state with one
/// compare instead of the thread-local lookup, a call into ld.so (`__tls_get_addr`, which a
/// library loaded with `dlopen` must use) and its cache lines. Only that thread stores either
/// ([`claim_main_thread`], [`MainThreadExit`]), and only a thread with its thread pointer reads
/// `MAIN_STATE`, so relaxed order is enough: the program order of one thread.
static MAIN_THREAD: AtomicUsize = AtomicUsize::new(0);
static MAIN_STATE: AtomicPtr<ThreadState> = AtomicPtr::new(std::ptr::null_mut());

/// Forgets the main thread when it ends: its thread-local block is freed, and a later thread may
/// get the same thread pointer (glibc reuses thread descriptors). Registered on the main thread
/// by [`claim_main_thread`]; its destructor runs at that thread's exit, `exit()` included.
struct MainThreadExit;

impl Drop for MainThreadExit {
    fn drop(&mut self) {
        if on_main_thread() {
            MAIN_THREAD.store(0, Relaxed);
            gates::set_main_thread(0);
        }
    }
}

thread_local! {
    static MAIN_THREAD_EXIT: MainThreadExit = const { MainThreadExit };
}

/// The calling thread's thread pointer (the address `%fs:0` holds on x86-64, `tpidr_el0` on
/// AArch64): unique among live threads, and never 0.
#[inline(always)]
fn thread_pointer() -> usize {
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
/// [`MAIN_TABLE`] was given to a thread (once: it is one thread's table for good).
static MAIN_TABLE_GIVEN: AtomicBool = AtomicBool::new(false);

/// [`MAIN_TABLE`], for the counting copies (on the claimed thread, whose table it is).
#[inline(always)]
fn main_table() -> &'static ThreadTable {
    &MAIN_TABLE
}

/// Make the calling thread (the one calling `MPI_Init`, before the real call) the one that
/// finds its state without the thread-local lookup ([`MAIN_THREAD`]), and give it its table,
/// [`MAIN_TABLE`]. A table it made before (its calls before `MPI_Init`: `MPI_Initialized`)
/// stays in [`TABLES`] with what it counted (the readers add every table up); only the
/// superstep's MPI ticks, which start at the end of `MPI_Init`, read the thread's own.
pub fn claim_main_thread() {
    let state = THREAD.with(|t| t as *const ThreadState);
    // SAFETY: as in `Call::thread`.
    let state_ref = unsafe { &*state };
    if !MAIN_TABLE_GIVEN.swap(true, Relaxed) {
        TABLES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(&MAIN_TABLE);
        state_ref.table.set(Some(&MAIN_TABLE));
    }
    if !state_ref
        .table
        .get()
        .is_some_and(|table| std::ptr::eq(table, &MAIN_TABLE))
    {
        return;
    }
    let tp = thread_pointer();
    if tp == usize::MAX || tp == 0 {
        return;
    }
    // Registers the destructor that un-claims the thread when it ends.
    MAIN_THREAD_EXIT.with(|_| ());
    MAIN_STATE.store(state.cast_mut(), Relaxed);
    MAIN_THREAD.store(tp, Relaxed);
    gates::set_main_thread(tp);
}

/// Whether the calling thread takes a wrapper's counting copy: the switches are plain
/// ([`gates::plain`]) and it is the thread [`claim_main_thread`] claimed ([`gates::plain_on`]).
#[inline(always)]
pub fn plain_here() -> bool {
    gates::plain_on(thread_pointer())
}

/// The calling thread is the one [`claim_main_thread`] claimed (and it has not ended).
#[inline(always)]
fn on_main_thread() -> bool {
    thread_pointer() == MAIN_THREAD.load(Relaxed)
}

/// The real routine behind `next` for a wrapper's copy: the general copy's (looked up if need
/// be), or, for the counting copy (which runs on the thread that called `MPI_Init` only:
/// [`plain_here`] held), the resolved one, else `None`, and the counting copy hands the call to
/// the general one. So the
/// counting copy calls nothing before the real call (no lookup, no thread-local lookup): the
/// caller's arguments stay in their registers, and only what the call's end needs is kept in
/// callee-saved ones (bench/instructions.sh). Other threads' calls take the general copy.
#[inline(always)]
pub fn next_for(next: &crate::next::Next, general: bool) -> Option<*mut std::ffi::c_void> {
    if general {
        Some(next.get())
    } else {
        next.resolved()
    }
}

/// This thread's state: for the thread that called `MPI_Init` a compare and a load, for others
/// one thread-local lookup (`__tls_get_addr` in a shared library). Once per call of a general
/// copy (a counting copy reads `MAIN_STATE`): the pointer travels in [`Call`] from `enter` to
/// `leave`.
#[inline(always)]
fn this_thread() -> *const ThreadState {
    if on_main_thread() {
        return MAIN_STATE.load(Relaxed);
    }
    THREAD.with(|t| t as *const ThreadState)
}

/// An outermost MPI call in progress. Lives in one wrapper's frame on one thread (the raw
/// pointer keeps it from being sent elsewhere).
pub struct Call {
    t0: u64,
    thread: *const ThreadState,
    /// Entered by a wrapper's general copy ([`enter`]'s `general`): a constant wherever a wrapper
    /// inlines the call's path, as each copy tests its own switches ([`crate::gates`]).
    general: bool,
}

impl Call {
    #[inline(always)]
    fn thread(&self) -> &ThreadState {
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
    pub fn requests(&self) -> &mut crate::requests::Scratch {
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

/// Start counting a call, unless counting is off or this thread is already inside MPI. A
/// wrapper's counting copy, which runs only when [`gates::plain`] held at entry and on the thread
/// that called `MPI_Init` ([`next_for`]), passes `general` false and tests nothing else; its
/// general copy (and every hook) passes true: then the process's
/// first MPI call finds counting off and, on that cold side, recognises the MPI library
/// ([`crate::family::first_call`]: a foreign one leaves counting off for good), and per-call
/// counter reads and the clock's choice are tested here and in [`leave`].
#[inline(always)]
pub fn enter(via_pmpi: bool, general: bool) -> Option<Call> {
    if general && !gates::is_on(gates::COUNTING) && !crate::family::first_call() {
        return None;
    }
    // The counting copy runs on the thread of `MAIN_STATE` only ([`next_for`]).
    let thread = if general {
        this_thread()
    } else {
        MAIN_STATE.load(Relaxed).cast_const()
    };
    // SAFETY: as in `Call::thread`.
    let depth = unsafe { &(*thread).depth };
    if depth.get() != 0 {
        return None;
    }
    depth.set(1);
    if via_pmpi && !ENTERED_VIA_PMPI.load(Relaxed) {
        ENTERED_VIA_PMPI.store(true, Relaxed);
    }
    if general && gates::is_on(gates::PER_CALL) {
        crate::counters::before_call();
    }
    Some(Call {
        t0: now(general),
        thread,
        general,
    })
}

/// The clock: its general read, or the TSC's where [`gates::plain`] held at entry.
#[inline(always)]
fn now(general: bool) -> u64 {
    if general {
        ticks()
    } else {
        crate::clock::tsc_ticks()
    }
}

/// What a call leaves for later or settles from before, besides its own data: its request, a
/// communicator it made, or requests it completed, started or freed ([`crate::requests`],
/// [`crate::places`]). A constant variant in each wrapper: `Nothing` costs nothing.
pub enum After {
    Nothing,
    /// The call's traffic was measured before it ([`ahead`]): add it if the call succeeded.
    Ahead,
    /// A nonblocking receive or a persistent request was made: its data counts later.
    Keep(crate::requests::Later),
    /// Requests may have completed (what the call noted before: [`crate::requests::watch`]).
    Complete,
    /// `n` requests at the pointer were started.
    Start(*const crate::ffi::MPI_Request, c_int),
    /// The request of this key (0: none kept) was freed.
    Free(usize),
    /// A communicator was made at the pointer (`MPI_COMM_NULL` if this rank is not in it).
    NewComm(*const MPI_Comm),
}

impl After {
    /// Whether the call's own traffic counts now (a kept request's counts later).
    #[inline(always)]
    fn counts_now(&self) -> bool {
        !matches!(self, After::Keep(_) | After::Ahead)
    }
}

/// Before the real call of a routine whose data counts ahead ([`After::Ahead`]): measure it now
/// ([`crate::traffic::ahead`]).
#[inline(always)]
pub fn ahead(call: &Call, id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    let table = if call.general {
        table_of(call.thread())
    } else {
        main_table()
    };
    crate::traffic::ahead(table, id, traffic, comm);
}

/// Finish counting a call of routine `id` on `comm` (null if none) that returned `rc`;
/// `traffic` describes its data and is looked at only when the call succeeded; `after` is what
/// else it leaves or settles (a constant variant in each wrapper). `traced` is what trace mode
/// needs to record the call ([`crate::trace::leave`], out of line, with this path's end time
/// and bytes: nothing is measured twice), else `None` (a constant in the untraced wrappers: no
/// cost there).
#[inline(always)]
pub fn leave(
    call: Call,
    traced: Option<crate::trace::Leaving>,
    id: RoutineId,
    rc: c_int,
    traffic: Traffic,
    comm: MPI_Comm,
    after: After,
) {
    leave_as(call, traced, id, rc, traffic, comm, false, after);
}

/// [`leave`] for a synchronising collective (spec term `superstep`) on `comm`: if it succeeded
/// and `comm` spans `MPI_COMM_WORLD`, it also ends a superstep. Both that and the memo's test
/// are inlined in these wrappers (`traffic::record_inline`, `superstep::boundary`): in the
/// bench's in-job A/B, 40 interleaved jobs each, `MPI_Allreduce` 27.0 -> 23.0 ns added under
/// Open MPI, 33.4 -> 30.9 under MPICH, for 3.6 kB more hot code.
#[inline(always)]
pub fn leave_superstep(
    call: Call,
    traced: Option<crate::trace::Leaving>,
    id: RoutineId,
    rc: c_int,
    traffic: Traffic,
    comm: MPI_Comm,
) {
    leave_as(call, traced, id, rc, traffic, comm, true, After::Nothing);
}

/// [`leave`], and if `superstep` (a constant in each wrapper) [`leave_superstep`]'s boundary,
/// while the thread is still marked inside MPI (a panic there stays silent, see `guard`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn leave_as(
    call: Call,
    traced: Option<crate::trace::Leaving>,
    id: RoutineId,
    rc: c_int,
    traffic: Traffic,
    comm: MPI_Comm,
    superstep: bool,
    after: After,
) {
    let t1 = now(call.general);
    let table = if call.general {
        table_of(call.thread())
    } else {
        main_table()
    };
    let c = &table.routines[id].counters;
    let dt = t1.wrapping_sub(call.t0);
    bump(&c.calls, 1);
    bump(&c.ticks, dt);
    bump(&table.mpi_ticks, dt);
    let counts_now = after.counts_now();
    // One test of the return code for both (bytes only from successful calls).
    if rc == 0 {
        if matches!(after, After::Ahead) {
            crate::traffic::add_last(table, id);
        } else if superstep {
            crate::traffic::record_inline(table, id, traffic, comm);
            crate::superstep::boundary(call.t0, t1, table, id, comm);
        } else if !traffic.is_none() && counts_now {
            crate::traffic::record(table, id, traffic, comm);
        }
    }
    if let Some(leaving) = traced {
        // A persistent request's making moves nothing yet; a receive's posting is recorded
        // with what its arguments describe.
        let (traffic, measured) = match after {
            After::Keep(crate::requests::Later::Persistent { .. }) => {
                (Traffic::None, Measured::default())
            }
            _ if rc != 0 || traffic.is_none() => (traffic, Measured::default()),
            After::Ahead => (traffic, crate::traffic::measured(table, id)),
            _ if counts_now => (traffic, crate::traffic::measured(table, id)),
            _ => (traffic, crate::traffic::measure(table, id, traffic, comm)),
        };
        crate::trace::leave(&call, leaving, t1, rc, traffic, measured);
    }
    match after {
        After::Nothing | After::Ahead => {}
        After::Keep(crate::requests::Later::Completion(request)) if rc == 0 => {
            if let Traffic::Elements {
                count,
                datatype,
                peer,
            } = traffic
            {
                if !crate::requests::keep_receive(id, count, datatype, peer, comm, request) {
                    crate::traffic::record(table, id, traffic, comm);
                }
            }
        }
        After::Keep(crate::requests::Later::Persistent { request, receive }) if rc == 0 => {
            crate::requests::keep_persistent(id, traffic, comm, request, receive)
        }
        After::Keep(_) => {}
        After::Complete if call.requests().watching() => {
            crate::requests::completed(table, call.requests(), rc)
        }
        After::Complete => {}
        After::Start(requests, n) if rc == 0 && crate::requests::live() => {
            crate::requests::started(table, requests, n)
        }
        After::Start(..) => {}
        After::Free(key) if rc == 0 && key != 0 => crate::requests::freed(key),
        After::Free(_) => {}
        After::NewComm(newcomm) if rc == 0 => crate::places::made(newcomm),
        After::NewComm(_) => {}
    }
    if call.general && gates::is_on(gates::PER_CALL) {
        crate::counters::after_call(id);
    }
    call.thread().depth.set(0);
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
fn table_of(thread: &ThreadState) -> &'static ThreadTable {
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

/// A call on a routine's steady path ([`steady`]): what its end needs, nothing of its arguments.
pub struct Steady {
    t0: u64,
}

/// Whether a counting copy's call is one of its routine's steady state, and if so the real
/// routine: on the thread that called `MPI_Init`, outermost, with its routine's last key
/// ([`crate::traffic::steady`]: what its bytes come to is known before the call) and, for a
/// synchronising collective (`superstep`, a constant), on `MPI_COMM_WORLD` below
/// `MPI_THREAD_MULTIPLE` ([`crate::superstep::steady`]). All of it is tested before the call,
/// where the arguments are in their registers anyway: after it, [`leave_steady`] needs none of
/// them, so a wrapper keeps only the start time and two pointers across the call (a memo's
/// test after the call kept count, datatype and communicator in callee-saved registers: six
/// pushes, six pops and their moves). Every other call takes the counting copy as before.
#[inline(always)]
pub fn steady(
    next: &crate::next::Next,
    id: RoutineId,
    traffic: Traffic,
    comm: MPI_Comm,
    superstep: bool,
) -> Option<*mut std::ffi::c_void> {
    let next = next.resolved()?;
    let thread = main_state();
    if thread.depth.get() != 0 {
        return None;
    }
    if !crate::traffic::steady(&main_table().routines[id], traffic, comm) {
        return None;
    }
    if superstep && !crate::superstep::steady(comm) {
        return None;
    }
    Some(next)
}

/// Start a call that [`steady`] let through: the thread is inside MPI from here.
#[inline(always)]
pub fn enter_steady(via_pmpi: bool) -> Steady {
    main_state().depth.set(1);
    if via_pmpi && !ENTERED_VIA_PMPI.load(Relaxed) {
        ENTERED_VIA_PMPI.store(true, Relaxed);
    }
    Steady {
        t0: crate::clock::tsc_ticks(),
    }
}

/// The main thread's state, on the main thread (after [`on_main_thread`] held): read again
/// where it is needed rather than kept in a register across the real call.
#[inline(always)]
fn main_state() -> &'static ThreadState {
    // SAFETY: as in `Call::thread` (the claimed thread's own state, read on that thread).
    unsafe { &*MAIN_STATE.load(Relaxed) }
}

/// Finish a call that [`enter_steady`] started, of routine `id` that returned `rc`, and return
/// `rc`: what [`leave`] does for it, with what was tested before the call known (`memo`: its
/// routine's memo holds its traffic, a constant; `superstep` as in [`steady`]).
#[inline(always)]
pub fn leave_steady(call: Steady, id: RoutineId, rc: c_int, memo: bool, superstep: bool) -> c_int {
    let t1 = crate::clock::tsc_ticks();
    let table = main_table();
    let c = &table.routines[id].counters;
    let dt = t1.wrapping_sub(call.t0);
    bump(&c.calls, 1);
    bump(&c.ticks, dt);
    bump(&table.mpi_ticks, dt);
    if rc == 0 {
        if memo {
            crate::traffic::add_steady(&table.routines[id]);
        }
        let mpi_now = table.mpi_ticks.load(Relaxed);
        if superstep && !crate::superstep::end_steady_batched(call.t0, t1, mpi_now, id) {
            return end_steady_unbatched(call.t0, t1, mpi_now, id);
        }
    }
    main_state().depth.set(0);
    rc
}

/// The rest of [`leave_steady`] of a successful call that ends a superstep outside the batch,
/// out of line and last (a tail call: the wrapper keeps no return code across it).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn end_steady_unbatched(t0: u64, t1: u64, mpi_now: u64, id: RoutineId) -> c_int {
    crate::superstep::end_steady_unbatched(t0, t1, mpi_now, id);
    main_state().depth.set(0);
    0
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
            claim_main_thread();
            let fast_path = on_main_thread();
            claimed_tx
                .send((fast_path, this_thread() == own_state()))
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
}
