//! The wrappers' hot path: enter and leave an MPI call, counting into the calling thread's table
//! ([`crate::threads`]).
//!
//! A wrapper calls [`enter`] before and [`leave`] after the real routine. Only the outermost MPI
//! call of a thread is counted (depth guard), so calls that reach us twice (Fortran bindings and
//! user PMPI tools call our `PMPI_X`; MPI calling itself) count once.

use crate::clock::ticks;
use crate::ffi::MPI_Comm;
use crate::gates;
use crate::threads::{
    bump, main_table, table_of, this_thread, thread_pointer, Call, RoutineId, ThreadState,
    ENTERED_VIA_PMPI, MAIN_STATE,
};
use crate::traffic::{Measured, Traffic};
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed};

/// Whether the calling thread takes a wrapper's counting copy: the switches are plain
/// ([`gates::plain`]) and it is the thread [`crate::threads::claim_main_thread`] claimed
/// ([`gates::plain_on`]).
#[inline(always)]
pub fn plain_here() -> bool {
    gates::plain_on(thread_pointer())
}

/// The real routine behind `next` for a wrapper's copy: the general copy's (looked up if need
/// be), or, for the counting copy (which runs on the thread that called `MPI_Init` only:
/// [`plain_here`] held), the resolved one, else `None`, and the counting copy hands the call to
/// the general one. So the counting copy calls nothing before the real call (no lookup, no
/// thread-local lookup): the caller's arguments stay in their registers, and only what the
/// call's end needs is kept in callee-saved ones (bench/instructions.sh). Other threads' calls
/// take the general copy. A `hot` routine's (a constant) is not even tested: it is resolved
/// whenever a counting copy runs ([`crate::next::Next::claimed`]).
#[inline(always)]
pub fn next_for(
    next: crate::next::Next,
    general: bool,
    hot: bool,
) -> Option<*mut std::ffi::c_void> {
    if general {
        Some(next.get())
    } else if hot {
        Some(next.claimed())
    } else {
        next.resolved()
    }
}

/// Start counting a call, unless counting is off or this thread is already inside MPI. A
/// wrapper's counting copy, which runs only when [`gates::plain`] held at entry and on the thread
/// that called `MPI_Init` ([`next_for`]), passes `general` false and tests nothing else; its
/// general copy (and every hook) passes true: then the process's
/// first MPI call finds counting off and, on that cold side, recognises the MPI library
/// ([`crate::hooks::first_call`]: a foreign one leaves counting off for good), and per-call
/// counter reads and the clock's choice are tested here and in [`leave`].
#[inline(always)]
pub fn enter(via_pmpi: bool, general: bool) -> Option<Call> {
    if general && !gates::is_on(gates::COUNTING) && !crate::hooks::first_call() {
        return None;
    }
    // The counting copy runs on the thread of `MAIN_STATE` only ([`next_for`]).
    let thread = if general {
        this_thread()
    } else {
        MAIN_STATE.get()
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
/// A call on a routine's steady path ([`steady`]): what its end needs, nothing of its arguments.
pub struct Steady {
    t0: u64,
}

/// Whether a counting copy's call is one of its routine's steady state (its real routine is
/// then [`crate::next::Next::claimed`]): on the thread that called `MPI_Init`, outermost, with its routine's last key
/// ([`crate::traffic::steady`]: what its bytes come to is known before the call) and, for a
/// synchronising collective (`superstep`, a constant), on `MPI_COMM_WORLD` below
/// `MPI_THREAD_MULTIPLE` ([`crate::superstep::steady`]). All of it is tested before the call,
/// where the arguments are in their registers anyway: after it, [`leave_steady`] needs none of
/// them, so a wrapper keeps only the start time and two pointers across the call (a memo's
/// test after the call kept count, datatype and communicator in callee-saved registers: six
/// pushes, six pops and their moves). Every other call takes the counting copy as before.
#[inline(always)]
pub fn steady(
    id: RoutineId,
    traffic: Traffic,
    comm: MPI_Comm,
    superstep: bool,
    int_count: bool,
) -> bool {
    outermost() && steady_key(id, traffic, comm, superstep, int_count)
}

/// [`steady`]'s first test: the thread is not inside MPI. Apart where a wrapper has a steady
/// copy for each form of its traffic (in place or not, `rt::memo_count`): tested once before
/// the choice, not loaded ahead of it for both; and for the steady paths of the request
/// routines, whose other tests are their own ([`crate::requests::front_free`],
/// [`crate::requests::front_steady`]).
#[inline(always)]
pub fn outermost() -> bool {
    crate::traffic::tested(main_state().depth.get() == 0)
}

/// [`steady`] past [`outermost`]: the memo's key and the superstep's communicator.
#[inline(always)]
pub fn steady_key(
    id: RoutineId,
    traffic: Traffic,
    comm: MPI_Comm,
    superstep: bool,
    int_count: bool,
) -> bool {
    // Each test a branch of its own to the unsteady copy, in this order
    // ([`crate::traffic::tested`]).
    let routine = &main_table().routines[id];
    if superstep {
        if let Some(steady) = crate::traffic::steady_on_world(routine, traffic, comm, int_count) {
            return steady;
        }
    }
    crate::traffic::steady(routine, traffic, comm, int_count)
        && (!superstep || crate::traffic::tested(crate::superstep::steady(comm)))
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

/// The count of routine `id`'s memo, passed to its real routine on a steady call in place of
/// the `int` count argument that [`steady`] found equal to it (not in place, where the memo
/// holds its complement): that argument's register (`rdx`) is the clock read's, and one load
/// here replaces two moves around `rdtsc` and a copy for the in-place test
/// (bench/instructions.sh). Read after [`enter_steady`]: only this thread writes the memo, and
/// not while it is inside MPI.
#[inline(always)]
pub fn memo_count(id: RoutineId) -> c_int {
    let count = main_table().routines[id].memo.count.as_ptr();
    // SAFETY: a valid, aligned atomic that only this thread writes; the volatile read is one
    // load here, not a value the compiler keeps from before the clock read. Its lower half is
    // the widened `int`.
    unsafe { std::ptr::read_volatile(crate::family::lower_half(count)) }
}

/// The datatype of routine `id`'s memo, passed to its real routine on a steady call in place of
/// the datatype argument that [`steady`] found equal to it, where that is the third argument
/// (`MPI_Send`, `MPI_Bcast`): its register (`rdx`) is the clock read's, and one load here
/// replaces two moves around `rdtsc`, as [`memo_count`] does for a count.
#[inline(always)]
pub fn memo_datatype(id: RoutineId) -> crate::ffi::MPI_Datatype {
    let datatype = main_table().routines[id].memo.datatype.as_ptr();
    // SAFETY: as in `memo_count`; the word holds the datatype's key.
    crate::family::Handle::from_key(unsafe { std::ptr::read_volatile(datatype) })
}

/// The main thread's state, on the main thread ([`plain_here`] held): at a fixed address.
#[inline(always)]
fn main_state() -> &'static ThreadState {
    MAIN_STATE.get()
}

/// Finish a call that [`enter_steady`] started, of routine `id` that returned `rc`, and return
/// `rc`: what [`leave`] does for it, with what was tested before the call known (`memo`: its
/// routine's memo holds its traffic, a constant; `superstep` as in [`steady`]). The return code
/// is tested before the end time is read: a successful call then returns a constant 0, and
/// neither the code nor the end time is moved out of `rdtsc`'s registers and back
/// (bench/instructions.sh: 2 a call); a failed one is counted out of line.
#[inline(always)]
pub fn leave_steady(call: Steady, id: RoutineId, rc: c_int, memo: bool, superstep: bool) -> c_int {
    if rc != 0 {
        std::hint::cold_path();
        return leave_steady_failed(call.t0, id, rc);
    }
    let t1 = crate::clock::tsc_ticks();
    let table = main_table();
    add_steady_time(id, call.t0, t1);
    if memo {
        crate::traffic::add_steady(&table.routines[id]);
    }
    if superstep {
        let mpi_now = table.mpi_ticks.load(Relaxed);
        if !crate::superstep::end_steady_batched(call.t0, t1, mpi_now, id) {
            return end_steady_unbatched(call.t0, t1, mpi_now, id);
        }
    }
    main_state().depth.set(0);
    0
}

/// The start time of the main thread's outermost steady call, where its wrapper keeps it in
/// memory ([`enter_steady_noted`]) rather than in a callee-saved register: a push and a pop,
/// and where that register was the only one besides another, the stack's alignment (a push
/// and an add) too. And the request of a fronted `MPI_Wait` or `MPI_Test` ([`enter_fronted`]),
/// which only its failure reads. Only the main thread's outermost call uses them, one at a
/// time.
static NOTED_T0: AtomicU64 = AtomicU64::new(0);
static FRONTED_REQUEST: AtomicPtr<crate::ffi::MPI_Request> = AtomicPtr::new(std::ptr::null_mut());

/// [`enter_steady`], its start time noted in memory: [`noted_start`] after the call.
#[inline(always)]
pub fn enter_steady_noted(via_pmpi: bool) {
    NOTED_T0.store(enter_steady(via_pmpi).t0, Relaxed);
}

/// The call [`enter_steady_noted`] started.
#[inline(always)]
pub fn noted_start() -> Steady {
    Steady {
        t0: NOTED_T0.load(Relaxed),
    }
}

/// [`enter_steady_noted`] of `MPI_Wait` or `MPI_Test` of `request` on its steady path
/// ([`crate::requests::front_steady`] let it through), the request noted too.
#[inline(always)]
pub fn enter_fronted(via_pmpi: bool, request: *const crate::ffi::MPI_Request) {
    FRONTED_REQUEST.store(request.cast_mut(), Relaxed);
    enter_steady_noted(via_pmpi);
}

/// [`leave_steady`] of `MPI_Wait` or `MPI_Test` on its steady path ([`enter_fronted`]): after
/// its time, the front's request counts if the call completed it
/// ([`crate::requests::front_completed`], `done` as the counting copy's
/// [`crate::requests::watch`] is given); a failed call forgets it if MPI freed it.
#[inline(always)]
pub fn leave_completing(id: RoutineId, rc: c_int, done: crate::requests::Done) -> c_int {
    if rc != 0 {
        std::hint::cold_path();
        return leave_completing_failed(id, rc);
    }
    let t1 = crate::clock::tsc_ticks();
    add_steady_time(id, noted_start().t0, t1);
    crate::requests::front_completed(main_table(), done);
    main_state().depth.set(0);
    0
}

/// [`leave_completing`] of a call that failed: [`leave_steady_failed`]'s count, and the front
/// forgotten if MPI freed its request (one call: the wrapper keeps no return code across it).
#[cold]
#[inline(never)]
fn leave_completing_failed(id: RoutineId, rc: c_int) -> c_int {
    crate::requests::front_failed(FRONTED_REQUEST.load(Relaxed));
    leave_steady_failed(noted_start().t0, id, rc)
}

/// A steady call's time from `t0` to `t1`: one more call of routine `id`, its ticks and the
/// thread's MPI ticks.
#[inline(always)]
fn add_steady_time(id: RoutineId, t0: u64, t1: u64) {
    let table = main_table();
    let c = &table.routines[id].counters;
    let dt = t1.wrapping_sub(t0);
    bump(&c.calls, 1);
    bump(&c.ticks, dt);
    bump(&table.mpi_ticks, dt);
}

/// [`leave_steady`] of a call that failed (`rc` not 0): its time only, no traffic, no
/// superstep, as [`leave`] counts a failed call.
#[cold]
#[inline(never)]
fn leave_steady_failed(t0: u64, id: RoutineId, rc: c_int) -> c_int {
    add_steady_time(id, t0, crate::clock::tsc_ticks());
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
