//! Trace-capture mode: every outermost MPI call of the thread that called `MPI_Init`, with its call
//! site and its messages, collectives, requests and new communicators, as events of
//! `mpistat-trace`'s model, written per rank at `MPI_Finalize` with its writer.
//!
//! Off (the normal case) it costs the wrappers nothing: their one test of their switches
//! ([`crate::gates::plain`]) covers it; everything else is in the traced wrappers (the wrappers'
//! general copies, `general_X`), out of line. On, [`leave`] records the whole call
//! at its end: its start (the counting path's start time), its call site (the first return
//! address outside this library and libmpi, see `callsite.rs`) and its events, the common case
//! in one function all traced wrappers call ([`Recorder::leave_fast`] in `record_ended`), the
//! rest out of line; [`enter`] does something only for completing calls (keeps their requests). Events go into
//! a bounded chunk, spilled to a private file when it fills (`spill.rs`); when the site's
//! budget is reached, the spill fails, or the window of supersteps ends, recording stops. At `MPI_Finalize` [`finish`] measures the clock offsets again, cuts every
//! rank's events at the last superstep all ranks recorded (so that the trace is consistent), and
//! writes `local-NNNNNN.mpt` (this rank's definitions, clock samples, where recording stopped, the
//! loaded objects) and `rank-NNNNNN.mpt` into the job's trace directory (mode 0700).
//!
//! Not traced, by design: calls of other threads than the one that called `MPI_Init`, persistent
//! requests (`MPI_Start`), one-sided and I/O data movement (their calls are traced as regions);
//! a wildcard `MPI_Irecv` completed with `MPI_STATUS(ES)_IGNORE` records no receive (its source
//! or tag is unknown; a non-wildcard one records the posted source, tag and size). A job that ends without `MPI_Finalize` writes no trace.
//!
//! Files, one job each: this one is the wrappers' way in ([`on`], [`enter`], [`leave`]);
//! `state.rs` holds the recorder's state (what a call hands it, the recorder, the one traced
//! thread's access to it); `start.rs` starts it at `MPI_Init` (the site's wish, [`prepare`],
//! [`start_if_wanted`], the event buffer); `record.rs` records a call's events (the fast and
//! the slow path); `clocks.rs` measures the clock offsets (and the test knob's skew);
//! `sites.rs` names the call sites, `spill.rs` keeps the events that do not fit the chunk,
//! `write.rs` ends the trace at `MPI_Finalize` ([`finish`]).

mod clocks;
mod paths;
mod record;
mod sites;
mod spill;
mod start;
mod state;
mod write;

use crate::ffi::MPI_Request;
use crate::threads::RoutineId;
use crate::traffic::{Measured, Traffic};
pub use start::{prepare, start_if_wanted, wish, wish_level};
use state::{completes_nothing, with_recorder_if, Ended, Fast, Recorder, RECORDER};
pub use state::{Args, Completion, Entered};
use std::ffi::c_int;
pub use write::{finish, take_info};

/// Whether tracing is on in this process (from `MPI_Init` to `MPI_Finalize`): a wrapper's
/// general copy then calls [`enter`]. When it is off, trace mode costs nothing: the wrappers'
/// one test of their switches covers it ([`crate::gates::plain`]).
#[inline(always)]
pub fn on() -> bool {
    crate::gates::is_on(crate::gates::TRACE)
}

/// Start of a traced call of routine `id`; `requests` are the `n` requests a completing call
/// may complete (null otherwise: a constant in every other wrapper, which then runs nothing here).
#[inline(always)]
pub fn enter(
    call: &crate::threads::Call,
    id: RoutineId,
    requests: *const MPI_Request,
    n: c_int,
) -> Option<Entered> {
    let snapshot =
        !requests.is_null() && !one_null(requests, n) && enter_completing(call, requests, n);
    Some(Entered {
        id,
        start: call.start(),
        snapshot,
    })
}

/// A completing call given one request, a null one (`MPI_Test`/`MPI_Wait` on
/// `MPI_REQUEST_NULL`): it completes nothing, so [`enter_completing`] would keep nothing. Inline,
/// so such calls skip the recorder's lookup (`Recorder::snapshot` skips the same requests).
#[inline(always)]
fn one_null(requests: *const MPI_Request, n: c_int) -> bool {
    // SAFETY: the caller passes `n` requests (MPI's contract for the completing call).
    n == 1 && completes_nothing(unsafe { *requests })
}

/// [`enter`] of a completing call: keep its requests (out of line).
#[inline(never)]
fn enter_completing(call: &crate::threads::Call, requests: *const MPI_Request, n: c_int) -> bool {
    with_recorder_if(call.on_traced_thread(), |r| {
        r.as_mut().is_some_and(|r| r.snapshot(requests, n))
    })
    .unwrap_or(false)
}

/// What a traced wrapper hands to the counting path ([`crate::rt::leave`]), which records the
/// call with [`leave`] once it has its end time and bytes.
pub struct Leaving {
    pub entered: Entered,
    pub args: Args,
}

/// End of a traced call that returned `rc` at `end` (from the counting path, with what it
/// measured of `traffic`): records the whole call. Inlined in the traced wrapper only as far as
/// the thread's test and the stack pointer's read; the recording is [`record_ended`], one copy
/// for every wrapper.
#[inline(always)]
pub fn leave(
    call: &crate::threads::Call,
    leaving: Leaving,
    end: u64,
    rc: c_int,
    traffic: Traffic,
    measured: Measured,
) {
    if !call.on_traced_thread() {
        return;
    }
    record_ended(&Ended {
        entered: leaving.entered,
        end,
        rc,
        traffic,
        measured,
        args: leaving.args,
        // Where the call sites' stack slots are measured from: the traced wrapper's stack
        // pointer, the same for every call of the routine and at every point of its body (a
        // fixed frame: see `callsite.rs`), so read here, not in `record_ended`'s frame.
        sp: crate::callsite::stack_pointer(),
    });
}

/// [`leave`]'s recording, out of line (`.text.trace`, profiler/trace.ld): inlined in each of
/// the ~40 traced wrappers' general copies it made each 0.5-1 kB larger, and those copies
/// (`.text.warm`) a chunk of their own (docs/footprint.md, "tracewarm").
#[inline(never)]
fn record_ended(ended: &Ended) {
    if !RECORDER.busy.get() {
        // SAFETY: on the traced thread, with no use of the recorder in progress (busy), as in
        // `with_recorder_if`; the fast path calls nothing that could start one, and a signal
        // handler's MPI call is not traced (it is not the thread's outermost call).
        if let Some(r) = unsafe { &mut *RECORDER.recorder.get() } {
            match r.leave_fast(*ended) {
                Fast::Done => return,
                Fast::Superstep => return superstep_left(),
                Fast::Slow => {}
            }
        }
    }
    left_slowly(ended);
}

/// [`leave`] of a collective that [`Recorder::leave_fast`] recorded but for the end of the
/// superstep (out of line, under the panic guard: it may allocate).
#[inline(never)]
fn superstep_left() {
    with_recorder_if(true, |r| r.as_mut().map(Recorder::superstep_done));
}

/// [`leave`] beyond the fast path (out of line, under the panic guard).
#[cold]
#[inline(never)]
fn left_slowly(ended: &Ended) {
    with_recorder_if(true, |r| {
        if let Some(r) = r.as_mut() {
            r.leave_slowly(ended);
        }
    });
}
