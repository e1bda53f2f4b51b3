//! Trace-capture mode: every outermost MPI call of the thread that called `MPI_Init`, with its call
//! site and its messages, collectives, requests and new communicators, as events of
//! `mpistat-trace`'s model, written per rank at `MPI_Finalize` with its writer.
//!
//! Off (the normal case) it costs the wrappers nothing: their one test of their switches
//! ([`crate::gates::plain`]) covers it; everything else is in the traced wrappers (the wrappers'
//! general copies, `general_X`), out of line. On, [`leave`] records the whole call
//! at its end: its start (the counting path's start time), its call site (the first return
//! address outside this library and libmpi, see `callsite.rs`) and its events, the common case
//! inlined in the traced wrapper ([`Recorder::leave_fast`]), the rest out of line; [`enter`]
//! does something only for completing calls (keeps their requests). Events go into
//! a buffer sized by the site's budget; when it is full, or the window of supersteps ends,
//! recording stops. At `MPI_Finalize` [`finish`] measures the clock offsets again, cuts every
//! rank's events at the last superstep all ranks recorded (so that the trace is consistent), and
//! writes `local-NNNNNN.mpt` (this rank's definitions, clock samples, where recording stopped, the
//! loaded objects) and `rank-NNNNNN.mpt` into the job's trace directory (mode 0700).
//!
//! Not traced, by design: calls of other threads than the one that called `MPI_Init`, persistent
//! requests (`MPI_Start`), one-sided and I/O data movement (their calls are traced as regions);
//! a wildcard `MPI_Irecv` completed with `MPI_STATUS(ES)_IGNORE` records no receive (its source
//! or tag is unknown; a non-wildcard one records the posted source, tag and size). A job that ends without `MPI_Finalize` writes no trace.
//!
//! Files: this one records (the recorder, [`enter`], [`leave`], [`start`], the clock offsets);
//! `sites.rs` names the call sites, `write.rs` ends the trace at `MPI_Finalize` ([`finish`]).

mod sites;
mod write;

use crate::callsite::{CallSites, Slot};
use crate::clock::{monotonic_ns, ticks, Anchor};
use crate::family::Handle;
use crate::family::{Built, Family, Predefined};
use crate::ffi::{MPI_Comm, MPI_Request, MPI_Status};
use crate::generated::routines::ROUTINES;
use crate::mpi;
use crate::rawevents::{self, RawEvents};
use crate::threads::RoutineId;
use crate::traffic::{Measured, Traffic, NO_PEER, PROC_NULL};
use mpistat_site::{escalation, SiteConfig, TraceConfig};
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{ClockSample, Communicator, Event, EventKind, MpiClass};
use sites::class_of;
use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
pub use write::{finish, take_info};

/// Whether tracing is on in this process (from `MPI_Init` to `MPI_Finalize`): a wrapper's
/// general copy then calls [`enter`]. When it is off, trace mode costs nothing: the wrappers'
/// one test of their switches covers it ([`crate::gates::plain`]).
#[inline(always)]
pub fn on() -> bool {
    crate::gates::is_on(crate::gates::TRACE)
}

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
    id: RoutineId,
    start: u64,
    /// The requests the call may complete were kept ([`Recorder::snapshot`]).
    snapshot: bool,
}

/// Recording state of the window of supersteps.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Skipping,
    Recording,
    Stopped,
}

/// A traced call that ended, as [`leave`] hands it to the recorder: its start, its end time
/// `end` and return code `rc`, what the counting path measured of its `traffic` (zero unless
/// the call succeeded, so that no byte is counted twice), its trace arguments, and the stack
/// pointer the call sites are found from (`sp`, see [`leave`]).
#[derive(Clone, Copy)]
struct Ended {
    entered: Entered,
    end: u64,
    rc: c_int,
    traffic: Traffic,
    measured: Measured,
    args: Args,
    sp: usize,
}

/// An `MPI_Irecv` waiting for its completion.
struct PendingRecv {
    comm: u32,
    /// The posted source (world rank) and tag unless wildcards, and the posted size: what the
    /// receive is when its completion gives no status (`MPI_STATUS(ES)_IGNORE`).
    source: Option<u32>,
    tag: Option<c_int>,
    bytes: u64,
}

/// Artificial clock error of one rank, for testing the correction (`MPISTAT_TRACE_TEST_SKEW`).
#[derive(Clone, Copy, Default)]
struct Skew {
    offset_ns: i64,
    drift_ppm: f64,
    origin: u64,
}

impl Skew {
    /// Monotonic nanoseconds `t` on the skewed clock.
    #[inline]
    fn apply(&self, t: u64) -> u64 {
        if self.offset_ns == 0 && self.drift_ppm == 0.0 {
            return t;
        }
        let since = t.saturating_sub(self.origin) as f64;
        (t as i64 + self.offset_ns + (since * self.drift_ppm * 1e-6) as i64).max(0) as u64
    }
}

/// What a rank knows of where the ranks run, for the clock samples ([`measure_offset`]). The
/// recorder holds it boxed (out of the way of the fields every call uses), the box made with
/// the recorder before `MPI_Init` and filled at its end without allocating (footprint.rs):
/// hence the mapping is not boxed itself.
#[allow(clippy::large_enum_variant)]
enum Nodes {
    Unknown,
    /// PMIx's local peers ([`crate::places`]).
    Pmix,
    /// Hydra's process mapping.
    Hydra(crate::node::Mapping),
}

/// One rank's recording.
struct Recorder {
    config: TraceConfig,
    reason: &'static str,
    rank: u32,
    world_size: u32,
    comm_null: MPI_Comm,
    skew: Skew,
    /// Rank 0's [`Skew`] (for the clock samples of the ranks on its node).
    rank0_skew: Skew,
    /// `MPISTAT_TRACE_TEST_SKEW`, read when the recorder was built.
    skew_spec: Option<String>,
    /// Which ranks share a node, learned at the end of `MPI_Init` (rank 0 only).
    nodes: Box<Nodes>,
    /// Changed only by [`Recorder::set_state`] (which keeps `limit` with it).
    state: State,
    /// Packed events ([`RawEvents`]); `capacity` and the lengths below count its words.
    events: RawEvents,
    capacity: usize,
    /// The fast path records a call while `events` is shorter: recording, with room for the
    /// most a call adds (the slow path's budget check for a call without requests), which is
    /// more than it writes without growing the buffer ([`rawevents::MAX_CALL_WORDS`]); 0
    /// otherwise (one comparison for both). Set only by [`Recorder::set_state`].
    limit: usize,
    regions: FastMap<(RoutineId, usize), u32>,
    /// Per routine (by id): its last call's site, where that lies on the stack, and its region
    /// (most calls repeat): the fast path's look-up ([`Recorder::leave_fast`]), and the slots
    /// [`CallSites`] finds sites with; and its [`Facts`].
    fast: Vec<FastSite>,
    region_keys: Vec<(RoutineId, usize)>,
    sites: CallSites,
    comms: FastMap<usize, u32>,
    /// The communicator of the last call and its id (most calls use the one of the call before).
    last_comm: (usize, u32),
    communicators: Vec<Communicator>,
    pending: FastMap<usize, PendingRecv>,
    /// The requests a completing call was given, and their values before it ran.
    completing: *const MPI_Request,
    snapshot: Vec<MPI_Request>,
    cartesian: Option<(Vec<u32>, Vec<u32>)>,
    supersteps: u64,
    /// `events.len()` after each superstep recorded.
    cuts: Vec<usize>,
    stop_note: Option<String>,
    stopped_by_budget: bool,
    clock: Vec<ClockSample>,
    /// Event times are ticks of the wrappers' clock while recording (cheaper than the monotonic
    /// clock), turned into nanoseconds of the monotonic clock at `finish` with this anchor.
    anchor: Anchor,
    /// The recording's own time, measured on every [`OVERHEAD_SAMPLE`]th call and scaled up
    /// (a clock read costs ~10 ns in a VM: two more per call were a fifth of trace mode's cost).
    overhead_ticks: u64,
    traced_calls: u64,
}

/// A routine's call site as the fast path looks it up ([`Recorder::leave_fast`]): one slot per
/// routine, set by the slow path ([`Recorder::region`]).
#[derive(Clone, Copy)]
struct FastSite {
    /// The user's return address of the routine's last call, where the fast path can check it:
    /// its stack slot above the traced wrapper's stack pointer
    /// ([`crate::callsite::stack_pointer`]).
    slot: Slot,
    /// The site's region and its [`rawevents::call_header`].
    region: u32,
    header: u64,
    facts: Facts,
}

/// What [`Recorder::leave_fast`] did with a call.
enum Fast {
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
struct Facts {
    /// The analysis' class ([`MpiClass::PointToPoint`] for local calls too: no collective exit;
    /// every routine is an MPI one, [`RegionRole::Mpi`]).
    class: MpiClass,
    /// A synchronous send (`MPI_Ssend`, `MPI_Issend`).
    synchronous: bool,
    /// A request-posting call that receives (`MPI_Irecv`, ...), not one that sends.
    receives: bool,
}

impl Facts {
    fn of(routine: &str) -> Facts {
        Facts {
            class: class_of(routine),
            synchronous: matches!(routine, "MPI_Ssend" | "MPI_Issend"),
            receives: routine.contains("recv"),
        }
    }
}

/// One call in this many measures the recording's own time.
const OVERHEAD_SAMPLE: u64 = 32;

// SAFETY: the raw handles are MPI's process-wide objects; the recorder is only used under its lock.
unsafe impl Send for Recorder {}

/// The recorder, touched only by the traced thread (the one that called `MPI_Init`, which also
/// calls `MPI_Finalize`): no lock on the per-call path, where two uncontended locks cost more
/// than the rest of the bookkeeping.
struct TracedThreadOnly {
    recorder: UnsafeCell<Option<Recorder>>,
    /// A use is in progress (guards against re-entry, e.g. from an MPI callback).
    busy: Cell<bool>,
}

// SAFETY: every access goes through `with_recorder`, which only the traced thread passes
// (`threads::mark_traced_thread`, in `start` on the thread calling `MPI_Init`).
unsafe impl Sync for TracedThreadOnly {}

static RECORDER: TracedThreadOnly = TracedThreadOnly {
    recorder: UnsafeCell::new(None),
    busy: Cell::new(false),
};

/// Run `f` on the recorder, on the traced thread only (else, or when re-entered, `None`).
fn with_recorder<R>(f: impl FnOnce(&mut Option<Recorder>) -> R) -> Option<R> {
    with_recorder_if(crate::threads::on_traced_thread(), f)
}

/// [`with_recorder`] for a caller that knows whether it is on the traced thread (a wrapper's
/// [`threads::Call`] does: no thread-local lookup per call).
#[inline(always)]
fn with_recorder_if<R>(
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

/// Why a job is traced, strongest first; the ranks agree on the strongest any of them has.
const REASONS: [&str; 3] = ["user", "site", "escalation"];

/// Why this rank would trace the job: `MPISTAT_TRACE=1` (the user), the site's `everyone`, or
/// an entry of the escalation list for this user and application (index into [`REASONS`]). The
/// list is read bounded, from a regular file only ([`escalation::load`]); why it could not be
/// read (but for a missing list: none was written yet), or that it was cut, goes to `problems`.
pub fn wish(config: &SiteConfig, problems: &mut Vec<String>) -> Option<usize> {
    // Worked out here, at MPI_Init, whatever decides: the record names the same application.
    let app = &crate::facts::program().application.name;
    if std::env::var_os("MPISTAT_TRACE").is_some_and(|v| v == "1") {
        return Some(0);
    }
    if config.trace.everyone {
        return Some(1);
    }
    let list = &config.escalation.list;
    let text = match escalation::load(list) {
        Ok((text, note)) => {
            problems.extend(note);
            text
        }
        Err(e) => {
            if !e.is_missing() {
                problems.push(format!("escalation list {}: {e}", list.display()));
            }
            return None;
        }
    };
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let now = crate::facts::unix_ms_now() / 1000;
    text.lines()
        .filter_map(|line| escalation::parse_line(line).flatten())
        .any(|e| e.applies(uid, app, now))
        .then_some(2)
}

/// A [`wish`] as a number that grows with its strength (0: no wish), for the ranks to agree on
/// the strongest.
pub fn wish_level(wish: Option<usize>) -> u8 {
    wish.map_or(0, |i| (REASONS.len() - i.min(REASONS.len() - 1)) as u8)
}

/// At the end of `MPI_Init`: if any rank wants a trace, every rank starts tracing (ranks may read
/// the escalation list at different moments, and a rank that traced alone would wait forever in
/// the clock measurement). `agreed` is the strongest [`wish_level`] of all ranks when the ranks
/// told it each other through PMIx ([`crate::peers`]); else they agree now (a collective over
/// `MPI_COMM_WORLD`). Only a traced job runs anything more here (in `.text.init`, with the end
/// of `MPI_Init`: see footprint.rs).
#[link_section = ".text.init.mpistat"]
pub fn start_if_wanted(
    config: &SiteConfig,
    wish: Option<usize>,
    agreed: Option<u8>,
    rank: u32,
    world_size: u32,
) {
    let level = match agreed {
        Some(level) => u64::from(level),
        None => {
            let Some(world) = mpi::comm_world() else {
                return;
            };
            let mine = u64::from(wish_level(wish));
            let Ok(agreed) = mpi::allreduce_on(&[mine], mpi::Op::Max, world) else {
                return;
            };
            agreed[0]
        }
    };
    if let Some(reason) = (level as usize)
        .checked_sub(1)
        .and_then(|i| REASONS.len().checked_sub(i + 1))
        .map(|i| REASONS[i])
    {
        start(&config.trace, reason, rank, world_size);
    }
}

impl Recorder {
    /// The trace clock now, in nanoseconds (clock samples; events take [`ticks`]).
    fn now(&self) -> u64 {
        self.skewed(monotonic_ns())
    }

    /// Monotonic nanoseconds `t` on this rank's trace clock (the test knob's skew applied).
    fn skewed(&self, t: u64) -> u64 {
        self.skew.apply(t)
    }

    /// Whether world rank `other` runs on this rank's node (false if unknown).
    #[link_section = ".text.init.mpistat"]
    fn shares_node(&self, other: u32) -> bool {
        match &*self.nodes {
            Nodes::Unknown => false,
            Nodes::Pmix => crate::places::shares_node(other) == Some(true),
            Nodes::Hydra(m) => match (m.node_of(self.rank), m.node_of(other)) {
                (Some(mine), Some(theirs)) => mine == theirs,
                _ => false,
            },
        }
    }

    /// This rank's clock sample when it runs on rank 0's node: one kernel, one monotonic clock,
    /// so the offset is exactly the difference of the test knob's skews (0 without).
    #[link_section = ".text.init.mpistat"]
    fn sample_beside_rank0(&self) -> ClockSample {
        let t = monotonic_ns();
        let local = self.skewed(t);
        ClockSample {
            local,
            offset: self.rank0_skew.apply(t) as i64 - local as i64,
        }
    }

    /// The events, their times from ticks to nanoseconds of the trace clock, with the tick rate
    /// measured from the start of tracing to now; and the recording's overhead in nanoseconds.
    fn events_in_ns(&self) -> (Vec<Event>, u64) {
        let (anchor, later) = (self.anchor, Anchor::now());
        let ns_per_tick = anchor.ns_per_tick(&later);
        let ns = |t: u64| {
            anchor.ns as i64 + ((t as i64 - anchor.ticks as i64) as f64 * ns_per_tick) as i64
        };
        let events = self.events.decode(|t| self.skewed(ns(t).max(0) as u64));
        (events, (self.overhead_ticks as f64 * ns_per_tick) as u64)
    }

    #[inline(always)]
    fn push(&mut self, time: u64, kind: EventKind) {
        self.events.push(time, kind);
    }

    /// This rank's id of `comm`, registering a communicator met for the first time.
    fn comm_id(&mut self, comm: MPI_Comm) -> u32 {
        if self.last_comm.0 == comm.key() {
            return self.last_comm.1;
        }
        let id = match self.comms.get(&comm.key()) {
            Some(&id) => id,
            None => self.register_comm(comm),
        };
        self.last_comm = (comm.key(), id);
        id
    }

    fn register_comm(&mut self, comm: MPI_Comm) -> u32 {
        let members = mpi::world_ranks_of(comm).unwrap_or_default();
        if members.len() == self.world_size as usize && self.cartesian.is_none() {
            self.cartesian = mpi::cartesian_of(comm).ok().flatten();
        }
        self.communicators.push(Communicator { members });
        let id = (self.communicators.len() - 1) as u32;
        self.comms.insert(comm as usize, id);
        id
    }

    /// World rank of rank `peer` of local communicator `comm`.
    #[inline]
    fn world_rank(&self, comm: u32, peer: c_int) -> Option<u32> {
        let members = &self.communicators.get(comm as usize)?.members;
        members.get(usize::try_from(peer).ok()?).copied()
    }

    fn spans_world(&self, comm: u32) -> bool {
        self.communicators
            .get(comm as usize)
            .is_some_and(|c| c.members.len() == self.world_size as usize)
    }

    /// The region of routine `id` called from the first return address outside the profiler
    /// and libmpi (`sp`: see [`leave`]).
    /// Also sets the routine's [`FastSite`], so that its next call from the same site takes the
    /// fast path.
    fn region(&mut self, id: RoutineId, sp: usize) -> u32 {
        let (mut slot, last_region) = self
            .fast
            .get(id)
            .map_or((Slot::default(), 0), |fast| (fast.slot, fast.region));
        let last = slot.site();
        let site = self.sites.find(&mut slot, sp);
        let region = if site == last && site != 0 {
            last_region
        } else {
            self.region_of_site(id, site)
        };
        if let Some(fast) = self.fast.get_mut(id) {
            fast.slot = slot;
            fast.region = region;
            fast.header = rawevents::call_header(region);
        }
        region
    }

    /// [`Recorder::region`] of a call site that is not the routine's last one.
    #[cold]
    #[inline(never)]
    fn region_of_site(&mut self, id: RoutineId, site: usize) -> u32 {
        let key = (id, site);
        match self.regions.get(&key) {
            Some(&r) => r,
            None => {
                self.region_keys.push(key);
                let r = (self.region_keys.len() - 1) as u32;
                self.regions.insert(key, r);
                r
            }
        }
    }

    /// Change the recording state, and the fast path's `limit` with it: below it the buffer
    /// has room for what the fast path writes without growing (at least
    /// [`rawevents::MAX_CALL_WORDS`] words of its capacity unused; it never shrinks).
    fn set_state(&mut self, state: State) {
        const { assert!(4 * rawevents::MAX_WORDS >= rawevents::MAX_CALL_WORDS) };
        self.state = state;
        let room = self.capacity.min(self.events.capacity());
        self.limit = match state {
            State::Recording => room.saturating_sub(4 * rawevents::MAX_WORDS),
            _ => 0,
        };
    }

    /// [`Recorder::superstep_done`] while recording, when the superstep neither ends the
    /// window nor needs more room for its cut (nothing here can panic); else false, and
    /// nothing done.
    #[inline(always)]
    fn superstep_quickly(&mut self) -> bool {
        let recorded = (self.supersteps + 1).saturating_sub(self.config.skip_supersteps);
        let window = self.config.record_supersteps;
        if self.state != State::Recording
            || self.cuts.len() == self.cuts.capacity()
            || (window > 0 && recorded >= window)
        {
            return false;
        }
        self.supersteps += 1;
        self.cuts.push(self.events.len());
        true
    }

    /// End of a synchronising collective on a communicator spanning the world: a superstep.
    fn superstep_done(&mut self) {
        self.supersteps += 1;
        match self.state {
            State::Recording => {
                self.cuts.push(self.events.len());
                let recorded = self.supersteps - self.config.skip_supersteps;
                if self.config.record_supersteps > 0 && recorded >= self.config.record_supersteps {
                    self.set_state(State::Stopped);
                    self.stop_note = Some(format!(
                        "the window of supersteps ended: supersteps {} to {} recorded",
                        self.config.skip_supersteps + 1,
                        self.supersteps
                    ));
                }
            }
            State::Skipping if self.supersteps >= self.config.skip_supersteps => {
                self.set_state(State::Recording);
            }
            _ => {}
        }
    }

    /// The common case of recording a call that ended ([`Ended`]), inlined in the traced
    /// wrapper (its arguments' checks mostly constant there): a call while recording, with room
    /// in the budget, from its routine's last call site (that site's stack slot holds it), on no
    /// communicator or the one of the call before, completing no request and making no
    /// communicator. It records a call with no other events ([`RawEvents::push_call`]), a
    /// blocking send or receive, and a collective (its exit and, unless it ends the window of
    /// supersteps or needs room, the superstep it ended); everything else is the slow path's
    /// ([`Recorder::leave_slowly`]). Nothing here can panic or call out, so it needs no panic
    /// guard.
    #[inline(always)]
    fn leave_fast(&mut self, ended: Ended) -> Fast {
        let (entered, args) = (ended.entered, ended.args);
        if entered.snapshot || !args.newcomm.is_null() || self.events.len() >= self.limit {
            return Fast::Slow;
        }
        let Some(&fast) = self.fast.get(entered.id) else {
            return Fast::Slow;
        };
        let comm = if args.comm.is_none() {
            None
        } else if args.comm.key() == self.last_comm.0 {
            Some(self.last_comm.1)
        } else {
            return Fast::Slow;
        };
        if fast.slot.cached(ended.sp).is_none() {
            return Fast::Slow;
        }
        let (start, end) = (entered.start, ended.end);
        if fast.facts.class != MpiClass::PointToPoint {
            let Some(comm) = comm else {
                return Fast::Slow;
            };
            // Its collective exit is its end (no `Exit`).
            let exit = self.collective_exit_event(comm, &ended);
            // SAFETY: below `limit` (checked above) the buffer has the room.
            unsafe {
                self.events
                    .push_call_with(fast.region, start, (end, exit), None)
            };
            let superstep = self.ends_superstep(fast.facts.class, comm, ended.rc);
            self.count_traced(end);
            return if superstep && !self.superstep_quickly() {
                Fast::Superstep
            } else {
                Fast::Done
            };
        }
        // The call's message, sent at its start or received at its end.
        let message = if ended.rc != 0 || ended.traffic.is_none() {
            None
        } else {
            match (comm, ended.traffic) {
                (Some(comm), Traffic::Elements { peer, .. }) if args.request.is_null() => {
                    let (tag, sync) = (args.tag, fast.facts.synchronous);
                    let bytes = ended.measured.bytes;
                    self.sent(comm, peer, tag, bytes, sync).map(|m| (start, m))
                }
                (Some(comm), Traffic::Received { status, .. }) => {
                    self.received(comm, status).map(|m| (end, m))
                }
                _ => return Fast::Slow,
            }
        };
        // SAFETY: below `limit` (checked above) the buffer has the room.
        unsafe {
            match message {
                Some(message) => self
                    .events
                    .push_call_with(fast.region, start, message, Some(end)),
                None => self.events.push_call(fast.header, fast.region, start, end),
            }
        }
        self.count_traced(end);
        Fast::Done
    }

    /// Count a recorded call, and on every [`OVERHEAD_SAMPLE`]th measure the recording's own
    /// time (since `end`, the call's end).
    #[inline(always)]
    fn count_traced(&mut self, end: u64) {
        self.traced_calls += 1;
        if self.traced_calls.is_multiple_of(OVERHEAD_SAMPLE) {
            self.overhead_ticks += ticks().saturating_sub(end) * OVERHEAD_SAMPLE;
        }
    }

    /// Record a call that ended beyond [`Recorder::leave_fast`]'s common case.
    fn leave_slowly(&mut self, ended: &Ended) {
        let Ended {
            entered,
            end,
            rc,
            args,
            sp,
            ..
        } = *ended;
        // Its events are recorded (else, before the window, only supersteps and new
        // communicators are followed).
        let recording = match self.state {
            State::Stopped => return,
            State::Skipping => false,
            State::Recording => {
                let n = if entered.snapshot {
                    self.snapshot.len()
                } else {
                    0
                };
                // A call adds at most an enter, a send, a receive, an exit and two events per
                // request (words).
                if self.events.len() + (4 + 2 * n) * rawevents::MAX_WORDS > self.capacity {
                    self.set_state(State::Stopped);
                    self.stopped_by_budget = true;
                    return;
                }
                true
            }
        };
        let facts = self.fast[entered.id].facts;
        let class = facts.class;
        if recording {
            let region = self.region(entered.id, sp);
            self.push(entered.start, EventKind::Enter { region });
        }
        let comm = (!args.comm.is_none()).then(|| self.comm_id(args.comm));
        if rc == 0 && recording {
            self.communication(facts, comm, ended);
        }
        match comm {
            Some(comm) if !recording => {
                if self.ends_superstep(class, comm, rc) {
                    self.superstep_done();
                }
            }
            _ if !recording => {}
            Some(comm) if class != MpiClass::PointToPoint => {
                self.collective_exit(class, comm, ended)
            }
            _ => self.push(end, EventKind::Exit),
        }
        if rc == 0 && !args.newcomm.is_null() {
            // SAFETY: the successful call filled *newcomm.
            let new = unsafe { *args.newcomm };
            if !new.is_none() && new != self.comm_null {
                self.register_comm(new);
            }
        }
        if recording {
            self.count_traced(end);
        }
    }

    /// The exit of a collective of class `class` on `comm` (with its root and bytes), and the
    /// end of a superstep if it synchronised the world.
    fn collective_exit(&mut self, class: MpiClass, comm: u32, ended: &Ended) {
        let exit = self.collective_exit_event(comm, ended);
        self.push(ended.end, exit);
        if self.ends_superstep(class, comm, ended.rc) {
            self.superstep_done();
        }
    }

    /// The exit event of a collective on `comm`: its root and bytes.
    #[inline(always)]
    fn collective_exit_event(&self, comm: u32, ended: &Ended) -> EventKind {
        let bytes = ended.measured.bytes;
        let root = match ended.traffic {
            Traffic::Elements { peer, .. } | Traffic::SendReceived { peer, .. }
                if peer != NO_PEER =>
            {
                self.world_rank(comm, peer)
            }
            _ => None,
        };
        EventKind::CollectiveExit {
            comm,
            root,
            sent: bytes,
            received: bytes,
        }
    }

    /// A collective of class `class` on `comm` that returned `rc` ends a superstep: it
    /// succeeded, synchronises, and spans the world.
    #[inline(always)]
    fn ends_superstep(&self, class: MpiClass, comm: u32, rc: c_int) -> bool {
        rc == 0 && matches!(class, MpiClass::Barrier | MpiClass::AllToAll) && self.spans_world(comm)
    }

    /// The messages and requests of a successful call (`measured`: its bytes, from the counting
    /// path).
    fn communication(&mut self, facts: Facts, comm: Option<u32>, ended: &Ended) {
        let Ended {
            entered,
            end,
            traffic,
            measured,
            args,
            ..
        } = *ended;
        let synchronous = facts.synchronous;
        if let Some(comm) = comm {
            if facts.class == MpiClass::PointToPoint {
                match traffic {
                    Traffic::Elements { peer, .. } if !args.request.is_null() => {
                        let sends = !facts.receives;
                        if sends {
                            let bytes = measured.bytes;
                            self.send(entered.start, comm, peer, args.tag, bytes, synchronous);
                        }
                        // SAFETY: the successful call filled *request.
                        let request = unsafe { *args.request };
                        self.push(
                            end,
                            EventKind::RequestPost {
                                request: request.key() as u64,
                            },
                        );
                        if !sends {
                            let posted = PendingRecv {
                                comm,
                                source: self.world_rank(comm, peer),
                                tag: (args.tag != ANY_TAG).then_some(args.tag),
                                bytes: measured.bytes,
                            };
                            self.pending.insert(request.key(), posted);
                        }
                    }
                    Traffic::Elements { peer, .. } => {
                        let bytes = measured.bytes;
                        self.send(entered.start, comm, peer, args.tag, bytes, synchronous)
                    }
                    Traffic::Received { status, .. } => self.recv(end, comm, status),
                    Traffic::SendReceived { peer, status, .. } => {
                        self.send(entered.start, comm, peer, args.tag, measured.sent, false);
                        self.recv(end, comm, status);
                    }
                    _ => {}
                }
            }
        }
        if entered.snapshot {
            self.completions(end, &args);
        }
    }

    /// A send of `bytes` to `peer` of `comm` (none to `MPI_PROC_NULL`).
    fn send(&mut self, at: u64, comm: u32, peer: c_int, tag: c_int, bytes: u64, sync: bool) {
        if let Some(send) = self.sent(comm, peer, tag, bytes, sync) {
            self.push(at, send);
        }
    }

    /// The event of a send of `bytes` to `peer` of `comm` (none to `MPI_PROC_NULL`).
    #[inline(always)]
    fn sent(
        &self,
        comm: u32,
        peer: c_int,
        tag: c_int,
        bytes: u64,
        sync: bool,
    ) -> Option<EventKind> {
        if peer == PROC_NULL {
            return None;
        }
        Some(EventKind::Send {
            peer: self.world_rank(comm, peer)?,
            tag,
            comm,
            bytes,
            synchronous: sync,
        })
    }

    fn recv(&mut self, at: u64, comm: u32, status: *const MPI_Status) {
        if let Some(recv) = self.received(comm, status) {
            self.push(at, recv);
        }
    }

    /// The event of a receive on `comm` that filled `status` (none from `MPI_PROC_NULL`, or
    /// without a status).
    #[inline(always)]
    fn received(&self, comm: u32, status: *const MPI_Status) -> Option<EventKind> {
        if crate::family::no_status(status) {
            return None;
        }
        // SAFETY: the successful call filled the status (the wrapper substitutes its own when
        // the caller passed MPI_STATUS_IGNORE).
        let (source, tag, bytes) = unsafe {
            (
                Built::status_source(status),
                Built::status_tag(status),
                Built::received_bytes(status),
            )
        };
        if source == PROC_NULL {
            return None;
        }
        Some(EventKind::Recv {
            peer: self.world_rank(comm, source)?,
            tag,
            comm,
            bytes,
        })
    }

    /// Requests of the snapshot that the call completed (their slot became `MPI_REQUEST_NULL`).
    fn completions(&mut self, end: u64, args: &Args) {
        let snapshot = std::mem::take(&mut self.snapshot);
        let requests = self.completing;
        for (i, &before) in snapshot.iter().enumerate() {
            if completes_nothing(before) {
                continue;
            }
            // SAFETY: the caller's request array has snapshot.len() entries.
            let after = unsafe { *requests.add(i) };
            if after.key() != REQUEST_NULL.load(Relaxed) {
                continue;
            }
            self.push(
                end,
                EventKind::RequestComplete {
                    request: before.key() as u64,
                },
            );
            if let Some(recv) = self.pending.remove(&before.key()) {
                let status = status_of(args.completion, i);
                if !crate::family::no_status(status) {
                    self.recv(end, recv.comm, status);
                } else if let (Some(peer), Some(tag)) = (recv.source, recv.tag) {
                    let (comm, bytes) = (recv.comm, recv.bytes);
                    self.push(
                        end,
                        EventKind::Recv {
                            peer,
                            tag,
                            comm,
                            bytes,
                        },
                    );
                }
            }
        }
        self.snapshot = snapshot;
    }
}

/// The status of the request at index `i` of a completing call.
fn status_of(completion: Completion, i: usize) -> *const MPI_Status {
    match completion {
        Completion::None => std::ptr::null(),
        Completion::One(s) => s.cast_const(),
        Completion::Each(s) if crate::family::no_status(s) => std::ptr::null(),
        // SAFETY: a status per request.
        Completion::Each(s) => unsafe { s.add(i).cast_const() },
        Completion::Some {
            indices,
            outcount,
            statuses,
        } => {
            if crate::family::no_status(statuses) || indices.is_null() || outcount.is_null() {
                return std::ptr::null();
            }
            // SAFETY: MPI filled outcount indices and statuses.
            unsafe {
                let n = (*outcount).max(0) as usize;
                (0..n)
                    .find(|&k| *indices.add(k) == i as c_int)
                    .map_or(std::ptr::null(), |k| statuses.add(k).cast_const())
            }
        }
    }
}

impl Recorder {
    /// Keep the `n` requests at `requests` that a completing call may complete, when recording
    /// and any of them is active.
    fn snapshot(&mut self, requests: *const MPI_Request, n: c_int) -> bool {
        if self.state != State::Recording {
            return false;
        }
        // SAFETY: the caller passes `n` requests (MPI's contract for the completing call).
        let requests = unsafe { std::slice::from_raw_parts(requests, n.max(0) as usize) };
        // Null requests complete nothing (`completions` skips them): a call given only those
        // needs no snapshot, and is recorded as any other call.
        if requests.iter().all(|&r| completes_nothing(r)) {
            return false;
        }
        self.completing = requests.as_ptr();
        self.snapshot.clear();
        self.snapshot.extend_from_slice(requests);
        true
    }
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

/// `MPI_REQUEST_NULL`'s [`Handle::key`], set when a recorder is built (0 until then: the null
/// handle's): read by [`one_null`] before any recorder is looked up, and by the recorder.
static REQUEST_NULL: AtomicUsize = AtomicUsize::new(0);

/// A request that no call can complete: the null handle, or `MPI_REQUEST_NULL`.
#[inline(always)]
fn completes_nothing(request: MPI_Request) -> bool {
    request.is_none() || request.key() == REQUEST_NULL.load(Relaxed)
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
/// measured of `traffic`): records the whole call. Inlined in the traced wrapper, where most of
/// [`Recorder::leave_fast`]'s checks fold away; what it leaves is out of line.
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
    // Made where it is used: built once before the branches, it was stored on the stack for
    // the slow path's sake on every call.
    let ended = || Ended {
        entered: leaving.entered,
        end,
        rc,
        traffic,
        measured,
        args: leaving.args,
        // Where the call sites' stack slots are measured from: the traced wrapper's stack
        // pointer, the same for every call of the routine and at every point of its body (a
        // fixed frame: see `callsite.rs`), read here in each branch (read once before them,
        // the compiler built `Ended` there too).
        sp: crate::callsite::stack_pointer(),
    };
    if !RECORDER.busy.get() {
        // SAFETY: on the traced thread, with no use of the recorder in progress (busy), as in
        // `with_recorder_if`; the fast path calls nothing that could start one, and a signal
        // handler's MPI call is not traced (it is not the thread's outermost call).
        if let Some(r) = unsafe { &mut *RECORDER.recorder.get() } {
            match r.leave_fast(ended()) {
                Fast::Done => return,
                Fast::Superstep => return superstep_left(),
                Fast::Slow => {}
            }
        }
    }
    left_slowly(ended());
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
fn left_slowly(ended: Ended) {
    with_recorder_if(true, |r| {
        if let Some(r) = r.as_mut() {
            r.leave_slowly(&ended);
        }
    });
}

/// `MPISTAT_TRACE_TEST_SKEW=RANK:OFFSET_NS:DRIFT_PPM[,RANK:...]`: a test knob that puts an
/// artificial offset and drift on some ranks' trace clocks (e.g. all ranks of one node), to show
/// the analysis corrects them.
fn test_skew(text: &str, rank: u32) -> Skew {
    text.split(',')
        .find_map(
            |entry| match entry.split(':').collect::<Vec<_>>().as_slice() {
                [r, offset, drift] if r.parse() == Ok(rank) => Some(Skew {
                    offset_ns: offset.parse().unwrap_or(0),
                    drift_ppm: drift.parse().unwrap_or(0.0),
                    origin: monotonic_ns(),
                }),
                _ => None,
            },
        )
        .unwrap_or_default()
}

/// `MPI_ANY_TAG` in Open MPI.
const ANY_TAG: c_int = -1;

/// Tag of the clock ping-pongs (on a private communicator).
const CLOCK_TAG: c_int = 7001;
/// Ping-pongs with each rank at least, and at most while none was quick ([`QUICK_NS`]) and the
/// rank's exchanges took less than [`MAX_PING_PONG_NS`] (so the exchanges past the first 16 add
/// at most that per rank to a traced job's start and end).
const PING_PONGS: usize = 16;
const MAX_PING_PONGS: usize = 128;
const MAX_PING_PONG_NS: u64 = 20_000_000;
/// A round trip this short (or at most twice the shortest with an earlier rank, which a slower
/// network between nodes needs) ends a rank's ping-pongs after [`PING_PONGS`]: its offset is
/// then right within half of it.
const QUICK_NS: u64 = 20_000;
/// The first word of rank 0's messages: a ping, the result (offset, the peer's time of the
/// exchange it came from, its round trip), or [`SAME_NODE`].
const PING: u64 = 0;
const RESULT: u64 = 1;
/// Rank 0's only message to a rank on its node: take the offset of one clock.
const SAME_NODE: u64 = 2;

/// This rank's clock offset to rank 0 (rank 0's clock minus ours), collective over `comm` (its
/// ranks are the world's). Rank 0 tells each rank how: a rank on its node ([`Nodes`]: PMIx's
/// local peers, Hydra's process mapping) gets one message, [`SAME_NODE`], and reads the one
/// monotonic clock of their kernel: its offset is exactly 0 (or what the test knob's skews make
/// it), and neither side runs the ping-pongs' MPI code at `MPI_Init` (rank 0 sends, the rank
/// receives, once: footprint.rs). Only rank 0's knowledge decides, so a rank that knows less of
/// the nodes (a failed PMIx query) cannot wait for a message that never comes. Each other rank
/// ping-pongs with rank 0 over `comm` (every receive names its source and tag), keeping the
/// exchange with the shortest round trip: its offset is right within half that round trip
/// whatever delayed one direction, and every slower exchange is left out. The peer's sample is
/// at its own time of that exchange. The waits yield the processor
/// ([`mpi::recv_u64s_yielding`]), so that on an oversubscribed node the ranks waiting for their
/// turn leave the cores to the two exchanging. In `.text.init` with [`start`].
#[inline(never)]
#[link_section = ".text.init.mpistat"]
fn measure_offset(recorder: &Recorder, comm: MPI_Comm) -> Option<ClockSample> {
    let rank = recorder.rank as c_int;
    if rank != 0 {
        loop {
            let [kind, offset, local, _] = mpi::recv_u64s_yielding::<4>(0, CLOCK_TAG, comm).ok()?;
            match kind {
                RESULT => {
                    return Some(ClockSample {
                        local,
                        offset: offset as i64,
                    })
                }
                SAME_NODE => return Some(recorder.sample_beside_rank0()),
                _ => mpi::send_u64s(&[recorder.now()], 0, CLOCK_TAG, comm).ok()?,
            }
        }
    }
    let mut shortest: Option<u64> = None;
    for peer in 1..recorder.world_size as c_int {
        if recorder.shares_node(peer as u32) {
            mpi::send_u64s(&[SAME_NODE, 0, 0, 0], peer, CLOCK_TAG, comm).ok()?;
            continue;
        }
        let quick = shortest.map_or(QUICK_NS, |s| (2 * s).max(QUICK_NS));
        // (round trip, offset, the peer's time) of the quickest exchange so far.
        let mut best = (u64::MAX, 0i64, 0u64);
        let first = recorder.now();
        for done in 1..=MAX_PING_PONGS {
            let t0 = recorder.now();
            mpi::send_u64s(&[PING, 0, 0, 0], peer, CLOCK_TAG, comm).ok()?;
            let [remote] = mpi::recv_u64s_yielding::<1>(peer, CLOCK_TAG, comm).ok()?;
            let t1 = recorder.now();
            let rtt = t1.saturating_sub(t0);
            if rtt < best.0 {
                let offset = ((t0 as i128 + t1 as i128) / 2 - remote as i128) as i64;
                best = (rtt, offset, remote);
            }
            if done >= PING_PONGS
                && (best.0 <= quick || t1.saturating_sub(first) > MAX_PING_PONG_NS)
            {
                break;
            }
        }
        let (rtt, offset, remote) = best;
        mpi::send_u64s(&[RESULT, offset as u64, remote, rtt], peer, CLOCK_TAG, comm).ok()?;
        shortest = Some(shortest.map_or(rtt, |s| s.min(rtt)));
    }
    Some(ClockSample {
        local: recorder.now(),
        offset: 0,
    })
}

/// A recorder built before the real `MPI_Init` by a rank that wants a trace itself ([`prepare`]).
static EARLY: Mutex<Option<Recorder>> = Mutex::new(None);

/// Before the real `MPI_Init`, on the thread calling it, when this rank wants a trace: build
/// the recorder's parts that need no MPI (event buffer, routine facts, call sites) while
/// start-up's pages are mapped anyway, so that its code adds nothing to MPI_Init's peak
/// (footprint.rs). [`start`] completes it if the ranks agree to trace.
pub fn prepare(config: &TraceConfig) {
    let recorder = Recorder::new(config);
    *EARLY.lock().unwrap_or_else(|e| e.into_inner()) = Some(recorder);
}

impl Recorder {
    /// A recorder for the calling thread, without what needs MPI (rank, world, clock samples).
    fn new(config: &TraceConfig) -> Recorder {
        let events = event_buffer(config.budget_bytes / std::mem::size_of::<u64>());
        let capacity = events.capacity();
        // MPI_COMM_WORLD is this rank's communicator 0 (its members are set by `start`).
        let mut comms = FastMap::default();
        let last_comm = match mpi::comm_world() {
            Some(world) => {
                comms.insert(world.key(), 0);
                (world.key(), 0)
            }
            None => (0, 0),
        };
        let request_null: MPI_Request =
            crate::family::predefined(Predefined::RequestNull).unwrap_or(Handle::NONE);
        REQUEST_NULL.store(request_null.key(), Relaxed);
        let fast = ROUTINES
            .iter()
            .map(|r| FastSite {
                slot: Slot::default(),
                region: 0,
                header: 0,
                facts: Facts::of(r.name()),
            })
            .collect();
        let mut recorder = Recorder {
            config: config.clone(),
            reason: "",
            rank: 0,
            world_size: 0,
            comm_null: crate::family::predefined(Predefined::CommNull).unwrap_or(Handle::NONE),
            skew: Skew::default(),
            rank0_skew: Skew::default(),
            skew_spec: std::env::var("MPISTAT_TRACE_TEST_SKEW").ok(),
            nodes: Box::new(Nodes::Unknown),
            state: State::Stopped,
            events: RawEvents::with_capacity(events),
            capacity,
            limit: 0,
            regions: FastMap::default(),
            fast,
            region_keys: Vec::new(),
            sites: CallSites::default(),
            comms,
            // The world's entry, with room for its members as the launcher counts them: the
            // end of `MPI_Init` fills it without allocating (footprint.rs).
            communicators: vec![Communicator {
                members: room_for_world(),
            }],
            pending: FastMap::default(),
            completing: std::ptr::null(),
            snapshot: Vec::new(),
            cartesian: None,
            supersteps: 0,
            cuts: Vec::new(),
            stop_note: None,
            stopped_by_budget: false,
            // The samples at Init and Finalize.
            clock: Vec::with_capacity(2),
            anchor: Anchor::now(),
            overhead_ticks: 0,
            traced_calls: 0,
            last_comm,
        };
        recorder.set_state(if config.skip_supersteps == 0 {
            State::Recording
        } else {
            State::Skipping
        });
        recorder
    }
}

/// Set up this rank's recorder (the one [`prepare`]d, else a new one) and measure its clock
/// against rank 0's (collective over `MPI_COMM_WORLD`). At the end of `MPI_Init`, so in
/// `.text.init` with [`measure_offset`] (footprint.rs): anywhere else in `.text` each of them
/// mapped one more 64 KiB chunk of code during MPI_Init. What a recorder needs that shared
/// generic code would build (the world's entry in the communicators' map) was made by
/// [`Recorder::new`], before the real `MPI_Init`.
#[inline(never)]
#[link_section = ".text.init.mpistat"]
fn start(config: &TraceConfig, reason: &'static str, rank: u32, world_size: u32) {
    let Some(world) = mpi::comm_world() else {
        return;
    };
    let early = EARLY.lock().unwrap_or_else(|e| e.into_inner()).take();
    let mut recorder = early.unwrap_or_else(|| Recorder::new(config));
    recorder.reason = reason;
    recorder.rank = rank;
    recorder.world_size = world_size;
    if let Some(spec) = recorder.skew_spec.as_deref() {
        recorder.skew = test_skew(spec, rank);
        recorder.rank0_skew = test_skew(spec, 0);
    }
    // Only rank 0 decides whose clock is its own ([`measure_offset`]).
    *recorder.nodes = if rank != 0 {
        Nodes::Unknown
    } else if crate::places::known() {
        Nodes::Pmix
    } else {
        match crate::peers::pmi1_mapping() {
            Some(m) => Nodes::Hydra(m),
            None => Nodes::Unknown,
        }
    };
    // The world's entry (made by `Recorder::new`): its members, in the room reserved there.
    if let Some(world) = recorder.communicators.first_mut() {
        world.members.clear();
        world.members.reserve(world_size as usize);
        for r in 0..world_size {
            world.members.push(r);
        }
    }
    if recorder.last_comm != (world.key(), 0) {
        recorder.comms.insert(world.key(), 0);
        recorder.last_comm = (world.key(), 0);
    }
    recorder.anchor = Anchor::now();
    // On `MPI_COMM_WORLD` itself, not a duplicate (whose making ran MPI code that added to
    // MPI_Init's peak, footprint.rs): no user message can meet these. Every receive names
    // its source (rank 0, or on rank 0 its current peer) and the clock tag, so a message from
    // a rank that already returned from `MPI_Init` cannot match it; and every message sent
    // here is received before its receiver returns, so none is left for the user's receives.
    if let Some(sample) = measure_offset(&recorder, world) {
        recorder.clock.push(sample);
    }
    crate::threads::mark_traced_thread();
    if !RECORDER.busy.get() {
        // SAFETY: the calling thread was just made the traced one, and no use of the recorder
        // is in progress (busy), as in `with_recorder_if`: not through it, as its panic
        // guard's generic code lives in `.text` (one more chunk of code in MPI_Init's peak).
        // Written without dropping the slot's old value: it is `None` (one `start` a process).
        unsafe { RECORDER.recorder.get().write(Some(recorder)) };
        crate::gates::set(crate::gates::TRACE, true);
    }
}

/// Room for the world's members: as many as the job's ranks as its launcher says before
/// `MPI_Init` (Open MPI's `OMPI_COMM_WORLD_SIZE`, PMI's `PMI_SIZE`), none if it does not.
fn room_for_world() -> Vec<u32> {
    let ranks = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(0);
    // The environment says it: only a hint, taken if the allocator gives it.
    let mut members = Vec::new();
    let _ = members.try_reserve_exact(ranks);
    members
}

/// Room for `capacity` events (or, where the allocator refuses that much address space, the
/// most of it, halving, that it gives), reserved, not touched: pages become resident only as
/// events arrive. In huge pages where the kernel allows it (transparent huge pages in `madvise`
/// or `always` mode): two events a call fill a 4 KiB page every ~50 calls, and its page fault
/// (~2 us) was a third of trace mode's cost per call; a 2 MiB page takes one fault per ~26,000.
fn event_buffer(mut capacity: usize) -> Vec<u64> {
    const HUGE: usize = 2 << 20;
    let mut events = Vec::new();
    while events.try_reserve_exact(capacity).is_err() {
        capacity /= 2;
    }
    let start = (events.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (events.as_ptr() as usize + capacity * std::mem::size_of::<u64>()) / HUGE * HUGE;
    if end > start {
        // SAFETY: advice on whole pages inside the buffer just reserved; failure changes nothing.
        unsafe { libc::madvise(start as *mut c_void, end - start, libc::MADV_HUGEPAGE) };
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::MPI_Count;
    use proptest::prelude::*;

    /// The user's return address the test's calls come from, and where it lies above their
    /// stack pointer.
    const SITE: usize = 0x5173;
    const OFFSET: usize = std::mem::size_of::<usize>();

    /// `MPI_COMM_WORLD` (this rank's communicator 0) and one of rank 1 alone (1), as handles.
    fn world() -> MPI_Comm {
        Handle::from_key(0x1000)
    }
    fn sub() -> MPI_Comm {
        Handle::from_key(0x2000)
    }

    fn routine(name: &str) -> RoutineId {
        ROUTINES.iter().position(|r| r.name() == name).unwrap()
    }

    /// The routines of the test's calls.
    const ROUTINE_NAMES: [&str; 10] = [
        "MPI_Comm_rank",
        "MPI_Send",
        "MPI_Ssend",
        "MPI_Recv",
        "MPI_Allreduce",
        "MPI_Barrier",
        "MPI_Bcast",
        "MPI_Isend",
        "MPI_Irecv",
        "MPI_Sendrecv",
    ];

    /// Rank 0's recorder of a 2-rank job, built as at `MPI_Init` but for what needs MPI, with
    /// every routine's last call site known (in its stack slot, region `region + id`).
    fn recorder(budget_words: usize, skip: u64, window: u64, region: u32) -> Recorder {
        let config = TraceConfig {
            budget_bytes: budget_words * std::mem::size_of::<u64>(),
            skip_supersteps: skip,
            record_supersteps: window,
            ..TraceConfig::default()
        };
        let mut r = Recorder::new(&config);
        r.world_size = 2;
        r.communicators[0].members = vec![0, 1];
        r.communicators.push(Communicator { members: vec![1] });
        r.comms.insert(world().key(), 0);
        r.comms.insert(sub().key(), 1);
        r.last_comm = (world().key(), 0);
        for (id, fast) in r.fast.iter_mut().enumerate() {
            fast.slot = Slot::learned(OFFSET, SITE);
            fast.region = region.wrapping_add(id as u32);
            fast.header = rawevents::call_header(fast.region);
        }
        r
    }

    /// A status of a receive from `source` with `tag` of `bytes` bytes.
    fn status(source: c_int, tag: c_int, bytes: u32) -> MPI_Status {
        // SAFETY: MPI_Status is plain integers.
        let mut s: MPI_Status = unsafe { std::mem::zeroed() };
        s.MPI_SOURCE = source;
        s.MPI_TAG = tag;
        #[cfg(mpistat_family = "openmpi")]
        {
            s._ucount = bytes as _;
        }
        #[cfg(mpistat_family = "mpich")]
        {
            s.count_lo = bytes as _;
        }
        s
    }

    /// One traced call, as the test describes it.
    #[derive(Clone, Debug)]
    struct Call {
        routine: usize,
        /// None, the world, the other communicator.
        comm: u8,
        rc: c_int,
        peer: c_int,
        tag: c_int,
        bytes: u32,
        start: u64,
        duration: u64,
    }

    fn call() -> impl Strategy<Value = Call> {
        let peer = prop_oneof![Just(0), Just(1), Just(PROC_NULL), Just(NO_PEER), Just(7)];
        (
            0..ROUTINE_NAMES.len(),
            prop_oneof![Just(1u8), Just(1), Just(0), Just(2)],
            prop_oneof![Just(0), Just(0), Just(0), Just(1)],
            peer,
            -1..3,
            0..100_000u32,
            0..1u64 << 40,
            prop_oneof![0..1000u64, Just(1 << 32), 0..1u64 << 40],
        )
            .prop_map(
                |(routine, comm, rc, peer, tag, bytes, start, duration)| Call {
                    routine,
                    comm,
                    rc,
                    peer,
                    tag,
                    bytes,
                    start,
                    duration,
                },
            )
    }

    /// Record `call` with `record` (the stack the call sites are read from: `stack`).
    fn with_ended(call: &Call, stack: &[usize; 2], record: impl FnOnce(Ended)) {
        let name = ROUTINE_NAMES[call.routine];
        let comm = [MPI_Comm::NONE, world(), sub()][usize::from(call.comm)];
        let datatype = Handle::from_key(0x3000);
        let count = MPI_Count::from(call.bytes);
        let mut received = status(call.peer, call.tag, call.bytes);
        let status_ptr: *mut MPI_Status = &mut received;
        let mut request: MPI_Request = Handle::from_key(0x4000 + call.routine);
        let request_ptr: *mut MPI_Request = &mut request;
        let measured = Measured {
            count: u64::from(call.bytes),
            bytes: u64::from(call.bytes),
            sent: u64::from(call.bytes / 2),
        };
        let elements = Traffic::Elements {
            count,
            datatype,
            peer: call.peer,
        };
        let (traffic, request) = match name {
            "MPI_Comm_rank" | "MPI_Barrier" => (Traffic::None, std::ptr::null_mut()),
            "MPI_Recv" => {
                let traffic = Traffic::Received {
                    count,
                    datatype,
                    status: status_ptr,
                };
                (traffic, std::ptr::null_mut())
            }
            "MPI_Allreduce" => {
                let traffic = Traffic::Elements {
                    count,
                    datatype,
                    peer: NO_PEER,
                };
                (traffic, std::ptr::null_mut())
            }
            "MPI_Isend" | "MPI_Irecv" => (elements, request_ptr),
            "MPI_Sendrecv" => {
                let traffic = Traffic::SendReceived {
                    count,
                    datatype,
                    peer: call.peer,
                    recv_count: count,
                    recv_datatype: datatype,
                    status: status_ptr,
                };
                (traffic, std::ptr::null_mut())
            }
            _ => (elements, std::ptr::null_mut()),
        };
        let ok = call.rc == 0;
        record(Ended {
            entered: Entered {
                id: routine(name),
                start: call.start,
                snapshot: false,
            },
            end: call.start.wrapping_add(call.duration),
            rc: call.rc,
            traffic,
            measured: if ok { measured } else { Measured::default() },
            args: Args {
                comm,
                tag: call.tag,
                request,
                ..Args::NONE
            },
            sp: stack.as_ptr() as usize,
        });
    }

    /// [`leave`]'s choice: the fast path, else the slow one.
    fn leave_as_traced(r: &mut Recorder, ended: Ended) -> bool {
        match r.leave_fast(ended) {
            Fast::Done => true,
            Fast::Superstep => {
                r.superstep_done();
                true
            }
            Fast::Slow => {
                r.leave_slowly(&ended);
                false
            }
        }
    }

    /// What a recorder recorded (its cuts as the events before them: the paths' records of a
    /// call may differ in size), and where it stands.
    fn outcome(r: &Recorder) -> impl PartialEq + std::fmt::Debug {
        let events_before = |&cut: &usize| r.events.first(cut).decode(|t| t).len();
        (
            r.events.decode(|t| t),
            r.cuts.iter().map(events_before).collect::<Vec<_>>(),
            r.supersteps,
            r.state,
            r.stopped_by_budget,
            r.stop_note.clone(),
            r.traced_calls,
        )
    }

    proptest! {
        /// The same calls give the same events, cuts, supersteps and state whether each is
        /// recorded as trace mode does (`leave_fast`, and `leave_slowly` when it declines) or
        /// only by `leave_slowly`: calls with and without messages, failed ones, collectives
        /// ending supersteps, calls on other communicators, calls that post requests, calls
        /// too long or of a region too high for a `CALL` record, near the end of the window of
        /// supersteps. Near the end of the budget too, until the slow path alone stops: the
        /// fast path's `CALL` records take half the words, so it goes on after, its events
        /// continuing the slow path's.
        #[test]
        fn the_fast_path_records_what_the_slow_path_records(
            calls in prop::collection::vec(call(), 1..40),
            budget_words in prop_oneof![40..200usize, Just(1 << 16)],
            skip in prop_oneof![Just(0u64), 0..3u64],
            window in prop_oneof![Just(0u64), 1..4u64],
            region in prop_oneof![Just(0u32), Just((1 << 29) - 4)],
        ) {
            let stack = [0, SITE];
            let mut traced = recorder(budget_words, skip, window, region);
            let mut slowly = recorder(budget_words, skip, window, region);
            for call in &calls {
                with_ended(call, &stack, |ended| {
                    leave_as_traced(&mut traced, ended);
                    slowly.leave_slowly(&ended);
                });
                if slowly.stopped_by_budget {
                    let (more, fewer) = (traced.events.decode(|t| t), slowly.events.decode(|t| t));
                    prop_assert!(more.starts_with(&fewer));
                    prop_assert!(traced.traced_calls >= slowly.traced_calls);
                } else {
                    prop_assert_eq!(outcome(&traced), outcome(&slowly));
                }
            }
        }
    }

    /// The common calls take the fast path (so that the property above compares it).
    #[test]
    fn common_calls_take_the_fast_path() {
        let stack = [0, SITE];
        let mut r = recorder(1 << 16, 0, 0, 0);
        for (name, peer) in [
            ("MPI_Comm_rank", 0),
            ("MPI_Send", 1),
            ("MPI_Ssend", 1),
            ("MPI_Recv", 1),
            ("MPI_Allreduce", 0),
            ("MPI_Barrier", 0),
            ("MPI_Bcast", 0),
            ("MPI_Send", PROC_NULL),
        ] {
            let routine = ROUTINE_NAMES.iter().position(|&n| n == name).unwrap();
            let call = Call {
                routine,
                comm: 1,
                rc: 0,
                peer,
                tag: 5,
                bytes: 8,
                start: 1000,
                duration: 50,
            };
            let before = r.events.len();
            with_ended(&call, &stack, |ended| {
                assert!(leave_as_traced(&mut r, ended), "{name} to {peer}");
            });
            assert!(r.events.len() > before, "{name} to {peer} recorded nothing");
        }
    }

    #[test]
    fn rank_0_knows_which_ranks_share_its_clock() {
        // Hydra's mapping of ranks 0, 1 on node 0 and rank 2 on node 1 (only rank 0 holds one).
        let mapping = crate::node::Mapping::parse(b"(vector,(0,1,2),(1,1,1))").unwrap();
        let mut r = recorder(1 << 10, 0, 0, 0);
        r.world_size = 3;
        *r.nodes = Nodes::Hydra(mapping);
        r.rank = 0;
        assert!((r.shares_node(1), r.shares_node(2)) == (true, false));
        *r.nodes = Nodes::Unknown;
        assert!(
            !r.shares_node(1),
            "unknown: every rank takes the ping-pongs"
        );
        // The sample of rank 1, whose test clock runs 3 s ahead of rank 0's (which runs 1 s
        // behind the true one): offset exactly -4 s (no drift).
        r.rank = 1;
        r.skew = test_skew("1:3000000000:0,0:-1000000000:0", 1);
        r.rank0_skew = test_skew("1:3000000000:0,0:-1000000000:0", 0);
        let sample = r.sample_beside_rank0();
        assert_eq!(sample.offset, -4_000_000_000);
        assert!(sample.local > 3_000_000_000);
    }
}
