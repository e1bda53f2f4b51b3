//! The recording of a traced call's events by the recorder: the fast path, one copy for every
//! traced wrapper ([`Recorder::leave_fast`], in `trace::record_ended`), the slow path ([`Recorder::leave_slowly`]), supersteps and
//! the window and budget that stop the recording, communicators, messages and the requests of
//! completing calls.

use super::spill::{self, Spill};
use super::start::event_buffer;
use super::state::{
    completes_nothing, Args, Completion, Ended, Facts, Fast, PendingRecv, Recorder, State,
    OVERHEAD_SAMPLE, REQUEST_NULL,
};
use crate::callsite::Slot;
use crate::clock::{ticks, Anchor};
use crate::family::{Built, Family, Handle};
use crate::ffi::{MPI_Comm, MPI_Request, MPI_Status};
use crate::mpi;
use crate::rawevents;
use crate::threads::RoutineId;
use crate::traffic::{Traffic, NO_PEER, PROC_NULL};
use mpistat_trace::model::{Communicator, EventKind, MpiClass};
use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;

/// `MPI_ANY_TAG` in Open MPI.
const ANY_TAG: c_int = -1;

impl Recorder {
    /// The events' times from ticks to nanoseconds of the trace clock, with the tick rate
    /// measured from the start of tracing to now; and the recording's overhead in nanoseconds.
    pub(super) fn ticks_to_ns(&self) -> (impl Fn(u64) -> u64 + '_, u64) {
        let (anchor, later) = (self.anchor, Anchor::now());
        let ns_per_tick = anchor.ns_per_tick(&later);
        let ns = move |t: u64| {
            anchor.ns as i64 + ((t as i64 - anchor.ticks as i64) as f64 * ns_per_tick) as i64
        };
        let time = move |t| self.skewed(ns(t).max(0) as u64);
        (time, (self.overhead_ticks as f64 * ns_per_tick) as u64)
    }

    /// Room in the chunk for `words` more (the slow path, while recording, within the
    /// budget): the chunk spilled when full (the spill file made at the first), or grown to
    /// the budget where the events stay in memory ([`Spill::InMemory`]). False when the chunk
    /// cannot be spilled: recording must stop. The spill's time is the recording's overhead
    /// (as Score-P's trace buffer flush).
    ///
    /// A spill after cold code ran (the spill file's opening, a new call site's unwinding and
    /// tables) drops the library's read-only pages again, as at the end of `MPI_Init`: that
    /// code is spread over `.text`, `.eh_frame` and `.rodata`, 64 KiB of resident memory a chunk
    /// it touched, and no later call runs it; the steady state maps back only `.text.hot`,
    /// `.text.warm` and `.text.trace` (`profiler/trace.ld`). At most once a chunk of events,
    /// and only after something new: never in a loop's steady state.
    pub(super) fn make_room(&mut self, words: usize) -> bool {
        if self.events.len() + words <= self.events.capacity() {
            return true;
        }
        let mut cold = self.regions_released != self.region_keys.len();
        if let Spill::NotYet = self.spill {
            cold = true;
            let began = ticks();
            let root = spill::root_of(&self.config.directory);
            self.spill = match spill::open(&root) {
                Ok(Some(events)) => Spill::File(events),
                Ok(None) => {
                    let room = event_buffer(self.capacity);
                    self.capacity = self.capacity.min(room.capacity());
                    self.events.move_into(room);
                    Spill::InMemory
                }
                Err(_) => Spill::Failed,
            };
            self.overhead_ticks += ticks().saturating_sub(began);
        }
        let room = match &self.spill {
            Spill::File(events) => {
                let began = ticks();
                let spilled = self.events.spill(events).is_ok();
                if cold {
                    self.regions_released = self.region_keys.len();
                    crate::footprint::release_read_only_pages();
                }
                self.overhead_ticks += ticks().saturating_sub(began);
                spilled
            }
            Spill::InMemory => true,
            Spill::NotYet | Spill::Failed => false,
        };
        if room {
            // The chunk's room changed: so does the fast path's limit.
            self.set_state(self.state);
        } else {
            self.spill = Spill::Failed;
        }
        room
    }

    #[inline(always)]
    pub(super) fn push(&mut self, time: u64, kind: EventKind) {
        self.events.push(time, kind);
    }

    /// This rank's id of `comm`, registering a communicator met for the first time.
    pub(super) fn comm_id(&mut self, comm: MPI_Comm) -> u32 {
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

    pub(super) fn register_comm(&mut self, comm: MPI_Comm) -> u32 {
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
    pub(super) fn world_rank(&self, comm: u32, peer: c_int) -> Option<u32> {
        let members = &self.communicators.get(comm as usize)?.members;
        members.get(usize::try_from(peer).ok()?).copied()
    }

    pub(super) fn spans_world(&self, comm: u32) -> bool {
        self.communicators
            .get(comm as usize)
            .is_some_and(|c| c.members.len() == self.world_size as usize)
    }

    /// The region of routine `id` called from the first return address outside the profiler
    /// and libmpi (`sp`: see [`leave`]).
    /// Also sets the routine's [`FastSite`], so that its next call from the same site takes the
    /// fast path.
    pub(super) fn region(&mut self, id: RoutineId, sp: usize) -> u32 {
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

    /// Routine `id`'s [`Facts`], copied into its [`FastSite`] at its first traced call (the
    /// slow path's: a routine's slot is unknown until then) from [`Recorder::routine_facts`].
    pub(super) fn facts(&mut self, id: RoutineId) -> Facts {
        let Some(fast) = self.fast.get_mut(id) else {
            return self.routine_facts[id];
        };
        if !fast.facts_known {
            fast.facts = self.routine_facts[id];
            fast.facts_known = true;
        }
        fast.facts
    }

    /// [`Recorder::region`] of a call site that is not the routine's last one.
    #[cold]
    #[inline(never)]
    pub(super) fn region_of_site(&mut self, id: RoutineId, site: usize) -> u32 {
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

    /// Change the recording state, and the fast path's `limit` with it: below it the chunk
    /// has room for what the fast path writes without growing (at least
    /// [`rawevents::MAX_CALL_WORDS`] words of its capacity unused; it never shrinks), within
    /// the budget.
    pub(super) fn set_state(&mut self, state: State) {
        const { assert!(4 * rawevents::MAX_WORDS >= rawevents::MAX_CALL_WORDS) };
        self.state = state;
        let budget_left = self
            .capacity
            .saturating_sub(self.events.position() - self.events.len());
        let room = budget_left.min(self.events.capacity());
        self.limit = match state {
            State::Recording => room.saturating_sub(4 * rawevents::MAX_WORDS),
            _ => 0,
        };
    }

    /// [`Recorder::superstep_done`] while recording, when the superstep does not end the
    /// window (nothing here can panic); else false, and nothing done.
    #[inline(always)]
    pub(super) fn superstep_quickly(&mut self) -> bool {
        let recorded = (self.supersteps + 1).saturating_sub(self.config.skip_supersteps);
        let window = self.config.record_supersteps;
        if self.state != State::Recording || (window > 0 && recorded >= window) {
            return false;
        }
        self.cut();
        self.supersteps += 1;
        true
    }

    /// A superstep recorded: its collective's record, the last, marks where it ends.
    #[inline(always)]
    fn cut(&mut self) {
        let marked = self.events.end_superstep();
        debug_assert!(marked, "a superstep's end follows its collective's record");
        self.supersteps_recorded += 1;
    }

    /// End of a synchronising collective on a communicator spanning the world: a superstep.
    pub(super) fn superstep_done(&mut self) {
        self.supersteps += 1;
        match self.state {
            State::Recording => {
                self.cut();
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

    /// The common case of recording a call that ended ([`Ended`]), inlined in the one function
    /// every traced wrapper calls (`trace::record_ended`): a call while recording, with room
    /// in the budget, from its routine's last call site (that site's stack slot holds it), on no
    /// communicator or the one of the call before, completing no request and making no
    /// communicator. It records a call with no other events ([`RawEvents::push_call`]), a
    /// blocking send or receive, and a collective (its exit and, unless it ends the window of
    /// supersteps or needs room, the superstep it ended); everything else is the slow path's
    /// ([`Recorder::leave_slowly`]). Nothing here can panic or call out, so it needs no panic
    /// guard.
    #[inline(always)]
    pub(super) fn leave_fast(&mut self, ended: Ended) -> Fast {
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
    pub(super) fn count_traced(&mut self, end: u64) {
        self.traced_calls += 1;
        if self.traced_calls.is_multiple_of(OVERHEAD_SAMPLE) {
            self.overhead_ticks += ticks().saturating_sub(end) * OVERHEAD_SAMPLE;
        }
    }

    /// Record a call that ended beyond [`Recorder::leave_fast`]'s common case.
    pub(super) fn leave_slowly(&mut self, ended: &Ended) {
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
                let words = (4 + 2 * n) * rawevents::MAX_WORDS;
                if self.events.position() + words > self.capacity {
                    self.set_state(State::Stopped);
                    self.stopped_by_budget = true;
                    return;
                }
                if !self.make_room(words) {
                    self.set_state(State::Stopped);
                    self.stopped_by_spill = true;
                    return;
                }
                true
            }
        };
        let facts = self.facts(entered.id);
        let class = facts.class;
        if recording {
            let region = self.region(entered.id, sp);
            // A routine's first call takes this path: it entered MPI in the front, before the
            // wrapper's clock started (`threads::first_call_bound`).
            let start = crate::threads::first_call_entered(entered.start, end);
            self.push(start, EventKind::Enter { region });
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
    pub(super) fn collective_exit(&mut self, class: MpiClass, comm: u32, ended: &Ended) {
        let exit = self.collective_exit_event(comm, ended);
        self.push(ended.end, exit);
        if self.ends_superstep(class, comm, ended.rc) {
            self.superstep_done();
        }
    }

    /// The exit event of a collective on `comm`: its root and bytes.
    #[inline(always)]
    pub(super) fn collective_exit_event(&self, comm: u32, ended: &Ended) -> EventKind {
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
    pub(super) fn ends_superstep(&self, class: MpiClass, comm: u32, rc: c_int) -> bool {
        rc == 0 && matches!(class, MpiClass::Barrier | MpiClass::AllToAll) && self.spans_world(comm)
    }

    /// The messages and requests of a successful call (`measured`: its bytes, from the counting
    /// path).
    pub(super) fn communication(&mut self, facts: Facts, comm: Option<u32>, ended: &Ended) {
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
    pub(super) fn send(
        &mut self,
        at: u64,
        comm: u32,
        peer: c_int,
        tag: c_int,
        bytes: u64,
        sync: bool,
    ) {
        if let Some(send) = self.sent(comm, peer, tag, bytes, sync) {
            self.push(at, send);
        }
    }

    /// The event of a send of `bytes` to `peer` of `comm` (none to `MPI_PROC_NULL`).
    #[inline(always)]
    pub(super) fn sent(
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

    pub(super) fn recv(&mut self, at: u64, comm: u32, status: *const MPI_Status) {
        if let Some(recv) = self.received(comm, status) {
            self.push(at, recv);
        }
    }

    /// The event of a receive on `comm` that filled `status` (none from `MPI_PROC_NULL`, or
    /// without a status).
    #[inline(always)]
    pub(super) fn received(&self, comm: u32, status: *const MPI_Status) -> Option<EventKind> {
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
    pub(super) fn completions(&mut self, end: u64, args: &Args) {
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
    pub(super) fn snapshot(&mut self, requests: *const MPI_Request, n: c_int) -> bool {
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

#[cfg(test)]
pub(super) mod tests;
