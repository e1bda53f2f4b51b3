//! The recorder's state: what a traced call hands it (its arguments, what it was when it
//! entered, how it ended), one rank's recorder, and the traced thread's lock-free access to it.

use super::clocks::{Nodes, Skew};
use super::sites::class_of;
use super::spill::Spill;
use crate::callsite::{CallSites, Slot};
use crate::clock::Anchor;
use crate::family::Handle;
use crate::ffi::{MPI_Comm, MPI_Request, MPI_Status};
use crate::rawevents::RawEvents;
use crate::threads::RoutineId;
use crate::traffic::{Measured, Traffic};
use mpistat_site::TraceConfig;
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{ClockSample, Communicator, MpiClass};
use std::cell::{Cell, UnsafeCell};
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// How a completing call reports statuses (see the spec's `completes*` terms).
#[derive(Clone, Copy)]
pub enum Completion {
    None,
    One(*mut MPI_Status),
    Each(*mut MPI_Status),
    Some {
        indices: *mut c_int,
        outcount: *mut c_int,
        statuses: *mut MPI_Status,
    },
}

/// What the trace needs of a call beyond its [`Traffic`] (filled by the generated wrappers).
#[derive(Clone, Copy)]
pub struct Args {
    pub comm: MPI_Comm,
    pub tag: c_int,
    pub request: *mut MPI_Request,
    pub newcomm: *mut MPI_Comm,
    pub completion: Completion,
}

impl Args {
    pub const NONE: Args = Args {
        comm: MPI_Comm::NONE,
        tag: 0,
        request: std::ptr::null_mut(),
        newcomm: std::ptr::null_mut(),
        completion: Completion::None,
    };
}

/// A traced call in progress: everything is recorded at its end ([`leave`]), when its start
/// time is the counting path's ([`crate::threads::Call::start`]); only a completing call does
/// something before the real call (keeps its requests, [`enter`]).
#[derive(Clone, Copy)]
pub struct Entered {
    pub(super) id: RoutineId,
    pub(super) start: u64,
    /// The requests the call may complete were kept ([`Recorder::snapshot`]).
    pub(super) snapshot: bool,
}

/// Recording state of the window of supersteps.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum State {
    Skipping,
    Recording,
    Stopped,
}

/// A traced call that ended, as [`leave`] hands it to the recorder: its start, its end time
/// `end` and return code `rc`, what the counting path measured of its `traffic` (zero unless
/// the call succeeded, so that no byte is counted twice), its trace arguments, and the stack
/// pointer the call sites are found from (`sp`, see [`leave`]).
#[derive(Clone, Copy)]
pub(super) struct Ended {
    pub(super) entered: Entered,
    pub(super) end: u64,
    pub(super) rc: c_int,
    pub(super) traffic: Traffic,
    pub(super) measured: Measured,
    pub(super) args: Args,
    pub(super) sp: usize,
}

/// An `MPI_Irecv` waiting for its completion.
pub(super) struct PendingRecv {
    pub(super) comm: u32,
    /// The posted source (world rank) and tag unless wildcards, and the posted size: what the
    /// receive is when its completion gives no status (`MPI_STATUS(ES)_IGNORE`).
    pub(super) source: Option<u32>,
    pub(super) tag: Option<c_int>,
    pub(super) bytes: u64,
}

/// One rank's recording.
pub(super) struct Recorder {
    pub(super) config: TraceConfig,
    pub(super) reason: &'static str,
    pub(super) rank: u32,
    pub(super) world_size: u32,
    pub(super) comm_null: MPI_Comm,
    pub(super) skew: Skew,
    /// Rank 0's [`Skew`] (for the clock samples of the ranks on its node).
    pub(super) rank0_skew: Skew,
    /// `MPISTAT_TRACE_TEST_SKEW`, read when the recorder was built.
    pub(super) skew_spec: Option<String>,
    /// Which ranks share a node, learned at the end of `MPI_Init` (rank 0 only).
    pub(super) nodes: Box<Nodes>,
    /// Changed only by [`Recorder::set_state`] (which keeps `limit` with it).
    pub(super) state: State,
    /// Packed events ([`RawEvents`]): a chunk of at most [`super::spill::CHUNK_WORDS`], spilled to
    /// `spill` when it fills. The budget, `capacity`, counts words recorded
    /// ([`RawEvents::position`]), `limit` the chunk's.
    pub(super) events: RawEvents,
    pub(super) capacity: usize,
    pub(super) spill: Spill,
    /// The fast path records a call while `events` is shorter: recording, with room for the
    /// most a call adds (the slow path's budget check for a call without requests), which is
    /// more than it writes without growing the buffer ([`rawevents::MAX_CALL_WORDS`]); 0
    /// otherwise (one comparison for both). Set only by [`Recorder::set_state`].
    pub(super) limit: usize,
    pub(super) regions: FastMap<(RoutineId, usize), u32>,
    /// Per routine (by id): its last call's site, where that lies on the stack, and its region
    /// (most calls repeat): the fast path's look-up ([`Recorder::leave_fast`]), and the slots
    /// [`CallSites`] finds sites with; and its [`Facts`]. Filled at a routine's first traced
    /// call ([`Recorder::facts`]), in pages of its own: [`FastSites`].
    pub(super) fast: FastSites,
    /// Every routine's [`Facts`] (3 bytes a routine), worked out from the names when the
    /// recorder is built, as that code and the names' constants are mapped anyway then: worked
    /// out at a routine's first traced call, they mapped a chunk or two of read-only data into
    /// the peak each time (50-160 kB of VmHWM, docs/footprint.md, "tracefast").
    pub(super) routine_facts: Box<[Facts]>,
    pub(super) region_keys: Vec<(RoutineId, usize)>,
    /// `region_keys.len()` at the last release of the library's read-only pages
    /// ([`Recorder::make_room`]): a new call site ran cold code (unwinding, the tables' growth).
    pub(super) regions_released: usize,
    pub(super) sites: CallSites,
    pub(super) comms: FastMap<usize, u32>,
    /// The communicator of the last call and its id (most calls use the one of the call before).
    pub(super) last_comm: (usize, u32),
    pub(super) communicators: Vec<Communicator>,
    pub(super) pending: FastMap<usize, PendingRecv>,
    /// The requests a completing call was given, and their values before it ran.
    pub(super) completing: *const MPI_Request,
    pub(super) snapshot: Vec<MPI_Request>,
    pub(super) cartesian: Option<(Vec<u32>, Vec<u32>)>,
    pub(super) supersteps: u64,
    /// Supersteps recorded, each marked at its end in `events` (its cut).
    pub(super) supersteps_recorded: usize,
    pub(super) stop_note: Option<String>,
    pub(super) stopped_by_budget: bool,
    /// Recording stopped because the chunk could not be spilled ([`Spill::Failed`]).
    pub(super) stopped_by_spill: bool,
    pub(super) clock: Vec<ClockSample>,
    /// Event times are ticks of the wrappers' clock while recording (cheaper than the monotonic
    /// clock), turned into nanoseconds of the monotonic clock at `finish` with this anchor.
    pub(super) anchor: Anchor,
    /// The recording's own time, measured on every [`OVERHEAD_SAMPLE`]th call and scaled up
    /// (a clock read costs ~10 ns in a VM: two more per call were a fifth of trace mode's cost).
    pub(super) overhead_ticks: u64,
    pub(super) traced_calls: u64,
}

/// A routine's call site as the fast path looks it up ([`Recorder::leave_fast`]): one slot per
/// routine, set by the slow path ([`Recorder::region`]). All zeros (as the kernel gives a
/// [`FastSites`] page) is a routine not traced yet: no site, facts unknown.
#[derive(Clone, Copy)]
pub(super) struct FastSite {
    /// The user's return address of the routine's last call, where the fast path can check it:
    /// its stack slot above the traced wrapper's stack pointer
    /// ([`crate::callsite::stack_pointer`]).
    pub(super) slot: Slot,
    /// The site's region and its [`rawevents::call_header`].
    pub(super) region: u32,
    pub(super) header: u64,
    /// Valid once `facts_known` ([`Recorder::facts`]); the fast path reads them only for a
    /// routine whose slot is known, which the slow path set after filling them.
    pub(super) facts: Facts,
    pub(super) facts_known: bool,
}

/// [`Recorder::fast`]: a [`FastSite`] per routine of the family (12 kB under Open MPI, 19 kB
/// under MPICH), in anonymous pages of its own, which the kernel zeroes and which become
/// resident only when written: a job keeps the pages of the few routines it calls. (Filled for
/// every routine when the recorder was built, the whole table stayed resident.) Where the pages
/// cannot be had it is empty, and every call takes the slow path.
pub(super) struct FastSites {
    entries: *mut FastSite,
    len: usize,
}

impl FastSites {
    pub(super) fn new(len: usize) -> FastSites {
        let bytes = len * std::mem::size_of::<FastSite>();
        // SAFETY: a new private anonymous mapping; the kernel zeroes it, and all zeros is a
        // valid `FastSite` (integers, `false`, `MpiClass`'s first variant).
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return FastSites {
                entries: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            };
        }
        FastSites {
            entries: map.cast(),
            len,
        }
    }
}

impl std::ops::Deref for FastSites {
    type Target = [FastSite];
    #[inline(always)]
    fn deref(&self) -> &[FastSite] {
        // SAFETY: `len` entries, mapped by `new` and owned by this table.
        unsafe { std::slice::from_raw_parts(self.entries, self.len) }
    }
}

impl std::ops::DerefMut for FastSites {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [FastSite] {
        // SAFETY: as in `deref`, borrowed mutably with the table.
        unsafe { std::slice::from_raw_parts_mut(self.entries, self.len) }
    }
}

impl Drop for FastSites {
    fn drop(&mut self) {
        if self.len > 0 {
            let bytes = self.len * std::mem::size_of::<FastSite>();
            // SAFETY: the mapping made by `new`, no longer borrowed.
            unsafe { libc::munmap(self.entries.cast(), bytes) };
        }
    }
}

/// What [`Recorder::leave_fast`] did with a call.
pub(super) enum Fast {
    /// Recorded it.
    Done,
    /// Recorded it, but the superstep it ended is left to [`superstep_left`].
    Superstep,
    /// Nothing: the slow path records it.
    Slow,
}

/// What the recording needs to know of a routine, worked out when the recorder is built so that
/// no call looks at a routine's name.
#[derive(Clone, Copy)]
pub(super) struct Facts {
    /// The analysis' class ([`MpiClass::PointToPoint`] for local calls too: no collective exit;
    /// every routine is an MPI one, [`RegionRole::Mpi`]).
    pub(super) class: MpiClass,
    /// A synchronous send (`MPI_Ssend`, `MPI_Issend`).
    pub(super) synchronous: bool,
    /// A request-posting call that receives (`MPI_Irecv`, ...), not one that sends.
    pub(super) receives: bool,
}

impl Facts {
    pub(super) fn of(routine: &str) -> Facts {
        Facts {
            class: class_of(routine),
            synchronous: matches!(routine, "MPI_Ssend" | "MPI_Issend"),
            receives: routine.contains("recv"),
        }
    }
}

/// One call in this many measures the recording's own time.
pub(super) const OVERHEAD_SAMPLE: u64 = 32;

// SAFETY: the raw handles are MPI's process-wide objects; the recorder is only used under its lock.
unsafe impl Send for Recorder {}

/// The recorder, touched only by the traced thread (the one that called `MPI_Init`, which also
/// calls `MPI_Finalize`): no lock on the per-call path, where two uncontended locks cost more
/// than the rest of the bookkeeping.
pub(super) struct TracedThreadOnly {
    pub(super) recorder: UnsafeCell<Option<Recorder>>,
    /// A use is in progress (guards against re-entry, e.g. from an MPI callback).
    pub(super) busy: Cell<bool>,
}

// SAFETY: every access goes through `with_recorder`, which only the traced thread passes
// (`threads::mark_traced_thread`, in `start` on the thread calling `MPI_Init`).
unsafe impl Sync for TracedThreadOnly {}

pub(super) static RECORDER: TracedThreadOnly = TracedThreadOnly {
    recorder: UnsafeCell::new(None),
    busy: Cell::new(false),
};

/// Run `f` on the recorder, on the traced thread only (else, or when re-entered, `None`).
pub(super) fn with_recorder<R>(f: impl FnOnce(&mut Option<Recorder>) -> R) -> Option<R> {
    with_recorder_if(crate::threads::on_traced_thread(), f)
}

/// [`with_recorder`] for a caller that knows whether it is on the traced thread (a wrapper's
/// [`threads::Call`] does: no thread-local lookup per call).
#[inline(always)]
pub(super) fn with_recorder_if<R>(
    traced_thread: bool,
    f: impl FnOnce(&mut Option<Recorder>) -> R,
) -> Option<R> {
    if !traced_thread || RECORDER.busy.replace(true) {
        return None;
    }
    // SAFETY: only the traced thread gets here, and not re-entrantly (busy).
    let result = crate::guard::contained(|| f(unsafe { &mut *RECORDER.recorder.get() }));
    RECORDER.busy.set(false);
    result
}

/// `MPI_REQUEST_NULL`'s [`Handle::key`], set when a recorder is built (0 until then: the null
/// handle's): read by [`one_null`] before any recorder is looked up, and by the recorder.
pub(super) static REQUEST_NULL: AtomicUsize = AtomicUsize::new(0);

/// A request that no call can complete: the null handle, or `MPI_REQUEST_NULL`.
#[inline(always)]
pub(super) fn completes_nothing(request: MPI_Request) -> bool {
    request.is_none() || request.key() == REQUEST_NULL.load(Relaxed)
}
