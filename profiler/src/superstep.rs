//! Supersteps and the imbalance estimates made from them, without any communication during the run.
//!
//! A *superstep* is the interval between two consecutive global synchronising collectives: a
//! successful call of a routine marked `superstep` in the spec table (Barrier, Allreduce,
//! Allgather(v), Alltoall(v/w), Reduce_scatter(_block), Scan, Exscan) on a communicator that spans
//! `MPI_COMM_WORLD`. The first superstep starts at the end of `MPI_Init`; the last one ends when
//! `MPI_Finalize` is entered. For each superstep this rank keeps d(k), the time from leaving the
//! previous collective to entering this one, and the part of it spent in other MPI calls, in a
//! bounded buffer ([`Steps`]). When the buffer is full, adjacent supersteps are merged pairwise;
//! every rank sees the same sequence of global collectives, so every rank merges identically and
//! the indices stay aligned. At `MPI_Finalize` the vectors are reduced (max and sum, per MPMD
//! partition) to rank 0, which computes the figures ([`figures`]).
//!
//! Deciding "spans `MPI_COMM_WORLD`" costs a pointer compare with the handle cached at
//! `MPI_Init` for `MPI_COMM_WORLD` itself, else the thread's last answer for the same handle
//! ([`SpansCache`]: a library's duplicate of `MPI_COMM_WORLD` asks MPI once), else two real
//! `PMPI_Comm_size` / `PMPI_Comm_test_inter` calls. A freed communicator's handle can be reused
//! for a different group, so the answer is kept only while no communicator was freed
//! ([`crate::places::comms_freed`]).
//!
//! The rank's supersteps are one state per process. Below `MPI_THREAD_MULTIPLE` a boundary uses
//! it without a lock (MPI lets one thread at a time in, and every use of the state is inside an
//! MPI call), so on `MPI_COMM_WORLD` it costs a compare and plain loads and stores; at
//! `MPI_THREAD_MULTIPLE` it takes a spin lock (`SHARED`).

use crate::family::Handle;
use crate::ffi::MPI_Comm;
use crate::mpi::{allreduce, comm_is_inter, comm_size, reduce_each_to_root, Op, OwnComm};
use crate::spin::SpinLock;
use crate::thread_parts::SpansCache;
use crate::threads::ThreadTable;
use mpistat_record::model::{Imbalance, PartitionImbalance};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::Relaxed};

/// Routine id stored for the last superstep, which `MPI_Finalize` ends.
pub const TAIL: u32 = u32::MAX;
/// Most MPMD partitions given separate figures; jobs with more get job-level figures only.
pub const MAX_PARTITIONS: usize = 16;
/// Most points of the per-superstep imbalance series kept in the record.
pub const SERIES_POINTS: usize = 60;

/// One (possibly merged) superstep of one rank: `d` = time outside collectives, of which
/// `other_mpi` in other MPI calls; `routine` is the id of the collective that ended it (of the
/// last one when merged). Times are ticks while running, nanoseconds after [`Steps::to_ns`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub d: u64,
    pub other_mpi: u64,
    pub routine: u32,
}

/// The bounded per-rank buffer of supersteps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steps {
    cap: usize,
    /// Supersteps per slot (a power of two).
    pub factor: u64,
    /// Supersteps in the last slot.
    in_last: u64,
    /// Supersteps seen.
    pub raw: u64,
    pub slots: Vec<Slot>,
}

impl Steps {
    /// A buffer of at most `bytes` bytes of slots (at least two slots). Allocated now, not at
    /// the first collective: after `MPI_Init` the hot path should not run the allocator's code
    /// (see footprint.rs). Untouched pages cost no memory. A size the allocator refuses (a
    /// process with a small address-space limit) is halved until one is had, down to none
    /// (then no superstep is kept): never an abort.
    pub fn new(bytes: usize) -> Steps {
        let mut cap = (bytes / std::mem::size_of::<Slot>()).max(2) & !1;
        let mut slots = Vec::new();
        while slots.try_reserve_exact(cap).is_err() {
            cap = if cap > 2 { (cap / 2).max(2) & !1 } else { 0 };
        }
        Steps {
            cap,
            factor: 1,
            in_last: 0,
            raw: 0,
            slots,
        }
    }

    /// Add one superstep. Cannot panic, so the hot path runs it unguarded: no index, no
    /// `expect`, wrapping sums, no growth (a full buffer is merged first, out of line, in a tail
    /// call), and `Steps::merge_pairs` cannot panic either.
    #[inline]
    pub fn push(&mut self, d: u64, other_mpi: u64, routine: u32) {
        self.raw = self.raw.wrapping_add(1);
        if self.in_last > 0 && self.in_last < self.factor {
            if let Some(last) = self.slots.last_mut() {
                last.d = last.d.wrapping_add(d);
                last.other_mpi = last.other_mpi.wrapping_add(other_mpi);
                last.routine = routine;
                self.in_last = self.in_last.wrapping_add(1);
                return;
            }
        }
        if !self.push_slot(d, other_mpi, routine) {
            self.merge_and_push(d, other_mpi, routine);
        }
    }

    /// How many more supersteps the last slot takes before [`Steps::push`] starts another.
    fn room_in_last(&self) -> u64 {
        if self.in_last > 0 && !self.slots.is_empty() {
            self.factor.saturating_sub(self.in_last)
        } else {
            0
        }
    }

    /// Add `n` supersteps (at most [`Steps::room_in_last`]) to the last slot at once: their
    /// sums, and `routine`, the last one's.
    fn add_to_last(&mut self, n: u64, d: u64, other_mpi: u64, routine: u32) {
        if let Some(last) = self.slots.last_mut() {
            last.d = last.d.wrapping_add(d);
            last.other_mpi = last.other_mpi.wrapping_add(other_mpi);
            last.routine = routine;
            self.in_last = self.in_last.wrapping_add(n);
            self.raw = self.raw.wrapping_add(n);
        }
    }

    /// Add a slot if the buffer has room (never growing it); returns whether it had.
    #[inline(always)]
    fn push_slot(&mut self, d: u64, other_mpi: u64, routine: u32) -> bool {
        let len = self.slots.len();
        match self.slots.spare_capacity_mut().first_mut() {
            Some(free) if len < self.cap => {
                free.write(Slot {
                    d,
                    other_mpi,
                    routine,
                });
                // SAFETY: the slot at `len` was just written, and is within the capacity.
                unsafe { self.slots.set_len(len + 1) };
                self.in_last = 1;
                true
            }
            _ => false,
        }
    }

    /// [`Steps::push`] into a full buffer: merging pairs leaves room. Rare, but every long job
    /// runs it: it sits with the hot code so as not to map another chunk (footprint.rs).
    #[cold]
    #[inline(never)]
    #[link_section = ".text.hot.mpistat"]
    fn merge_and_push(&mut self, d: u64, other_mpi: u64, routine: u32) {
        self.merge_pairs();
        self.push_slot(d, other_mpi, routine);
    }

    /// Merge slots 2i and 2i+1 into slot i; the factor doubles. Cannot panic (no index, wrapping
    /// sums), as [`Steps::push`], which runs it. With the hot code, as [`Steps::merge_and_push`].
    #[cold]
    #[inline(never)]
    #[link_section = ".text.hot.mpistat"]
    fn merge_pairs(&mut self) {
        let n = self.slots.len();
        for i in 0..n / 2 {
            let pair = (self.slots.get(2 * i), self.slots.get(2 * i + 1));
            if let (Some(&a), Some(&b)) = pair {
                if let Some(slot) = self.slots.get_mut(i) {
                    *slot = Slot {
                        d: a.d.wrapping_add(b.d),
                        other_mpi: a.other_mpi.wrapping_add(b.other_mpi),
                        routine: b.routine,
                    };
                }
            }
        }
        let last_alone = n % 2 == 1;
        if last_alone {
            if let Some(&last) = self.slots.last() {
                if let Some(slot) = self.slots.get_mut(n / 2) {
                    *slot = last;
                }
            }
        }
        self.slots.truncate(n.div_ceil(2));
        // The last slot holds the old last slot's steps, plus a full old slot before it if paired.
        if !last_alone {
            self.in_last = self.factor.wrapping_add(self.in_last);
        }
        self.factor = self.factor.wrapping_mul(2);
    }

    /// Merge until the factor is at least `factor` (a power of two), as a rank with more merges did.
    pub fn coarsen_to(&mut self, factor: u64) {
        while self.factor < factor {
            self.merge_pairs();
        }
    }

    /// Times from ticks to nanoseconds.
    pub fn to_ns(&mut self, ns_per_tick: f64) {
        for s in &mut self.slots {
            s.d = (s.d as f64 * ns_per_tick) as u64;
            s.other_mpi = (s.other_mpi as f64 * ns_per_tick) as u64;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Run time
// ---------------------------------------------------------------------------------------------

struct State {
    steps: Steps,
    /// Ticks when the current superstep began (end of the previous global collective), unless
    /// `batch` holds supersteps: then when the first of them began.
    start: u64,
    /// The calling thread's MPI ticks at `start`.
    mpi_at_start: u64,
    /// Supersteps ended but not in `steps` yet.
    batch: Batch,
    /// Supersteps may be batched: one thread ends them all, below `MPI_THREAD_MULTIPLE`.
    batching: bool,
    /// When `steps.raw` reaches this, [`State::release_symbol_tables`] runs.
    next_release: u64,
}

/// Supersteps that ended since [`State`]'s `start`, all of them in the last slot's room, kept
/// as the sum of their collectives' times and where the last one ended. A boundary on the common
/// path then writes five fields and computes nothing else, where adding the superstep to its
/// slot read ten and wrote seven (in-job A/B, 100 interleaved jobs, `MPI_Allreduce`: about 2 ns
/// less under either MPI). The sums follow when the batch is folded ([`State::fold`]): the
/// supersteps' `d` add up to the time from `start` to the last one's end less the collectives'
/// time, and their `other_mpi` to the thread's MPI time over the same span less the same (a
/// collective's time is MPI time), as [`State::end_one`] would have added them one by one. Only
/// on one thread: at `MPI_THREAD_MULTIPLE` another thread's collective would break both sums,
/// and each superstep is added alone, as before.
struct Batch {
    /// How many more supersteps fit (the last slot's room when the batch was opened, less those
    /// in it).
    left: u64,
    /// The last slot's room when the batch was opened.
    room: u64,
    /// Ticks inside the batch's collectives.
    collectives: u64,
    /// When the last one ended, and the thread's MPI ticks then.
    end: u64,
    mpi_at_end: u64,
    routine: u32,
}

impl Batch {
    const EMPTY: Batch = Batch {
        left: 0,
        room: 0,
        collectives: 0,
        end: 0,
        mpi_at_end: 0,
        routine: 0,
    };
}

impl State {
    /// No buffer (capacity 0: a superstep pushed is dropped).
    const NONE: State = State {
        steps: Steps {
            cap: 0,
            factor: 1,
            in_last: 0,
            raw: 0,
            slots: Vec::new(),
        },
        start: 0,
        mpi_at_start: 0,
        batch: Batch::EMPTY,
        batching: false,
        next_release: crate::footprint::FIRST_RELEASE,
    };

    /// Whether this holds a buffer.
    fn kept(&self) -> bool {
        self.steps.cap > 0
    }

    /// End the current superstep: a global collective of routine `routine` ran from `t0` to `t1`
    /// on a thread whose MPI ticks are `mpi_now` (this collective's own included); at
    /// `MPI_Finalize`, `t0` = `t1` and `routine` [`TAIL`]. Into the batch while the last slot has
    /// room (nothing here can panic: the hot path runs it without a panic guard).
    #[inline(always)]
    fn end(&mut self, t0: u64, t1: u64, mpi_now: u64, routine: u32) {
        if !self.end_batched(t0, t1, mpi_now, routine) {
            self.end_unbatched(t0, t1, mpi_now, routine);
        }
    }

    /// [`State::end`] into the batch if it has room (else `false`, and nothing changed): one
    /// subtraction and its borrow test for the room (its common path).
    #[inline(always)]
    fn end_batched(&mut self, t0: u64, t1: u64, mpi_now: u64, routine: u32) -> bool {
        let batch = &mut self.batch;
        let (left, full) = batch.left.overflowing_sub(1);
        batch.left = left;
        if full {
            batch.left = 0;
            return false;
        }
        batch.collectives = batch.collectives.wrapping_add(t1.wrapping_sub(t0));
        batch.end = t1;
        batch.mpi_at_end = mpi_now;
        batch.routine = routine;
        true
    }

    /// [`State::end`] when the batch is full or off: fold it, add this superstep alone, and open
    /// the next batch with the last slot's room. Once per slot on a long run (a slot holds
    /// `factor` supersteps), every superstep while the buffer is not full yet.
    #[inline(never)]
    #[link_section = ".text.hot.mpistat"]
    fn end_unbatched(&mut self, t0: u64, t1: u64, mpi_now: u64, routine: u32) {
        self.fold();
        self.end_one(t0, t1, mpi_now, routine);
        if self.batching {
            let room = self.steps.room_in_last();
            self.batch.room = room;
            self.batch.left = room;
        }
        if self.steps.raw >= self.next_release {
            self.release_symbol_tables();
        }
    }

    /// At a cold point of the steady state ([`State::end_unbatched`] runs once per slot of the
    /// buffer, per superstep only until it first fills): drop the symbol tables that lazy
    /// bindings mapped back since the last time (footprint.rs), after
    /// [`crate::footprint::FIRST_RELEASE`] supersteps, then each time their number doubled, then
    /// every [`crate::footprint::RELEASE_EVERY`].
    #[cold]
    #[inline(never)]
    #[link_section = ".text.hot.mpistat"]
    fn release_symbol_tables(&mut self) {
        let raw = self.steps.raw;
        self.next_release = raw.saturating_add(raw.min(crate::footprint::RELEASE_EVERY));
        if self.kept() {
            crate::footprint::release_symbol_tables();
        }
    }

    /// Add the batch's supersteps to the last slot (see [`Batch`]) and empty it.
    fn fold(&mut self) {
        let batch = std::mem::replace(&mut self.batch, Batch::EMPTY);
        let n = batch.room.wrapping_sub(batch.left);
        if n == 0 {
            return;
        }
        let d = batch
            .end
            .saturating_sub(self.start)
            .saturating_sub(batch.collectives);
        let other = batch
            .mpi_at_end
            .saturating_sub(self.mpi_at_start)
            .saturating_sub(batch.collectives)
            .min(d);
        self.start = batch.end;
        self.mpi_at_start = batch.mpi_at_end;
        self.steps.add_to_last(n, d, other, batch.routine);
    }

    /// Add one superstep to the buffer.
    fn end_one(&mut self, t0: u64, t1: u64, mpi_now: u64, routine: u32) {
        let d = t0.saturating_sub(self.start);
        let other = mpi_now
            .saturating_sub(t1.wrapping_sub(t0))
            .saturating_sub(self.mpi_at_start)
            .min(d);
        self.start = t1;
        self.mpi_at_start = mpi_now;
        // Last, so that a merge is a tail call (no registers to keep across it).
        self.steps.push(d, other, routine);
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static WORLD_SIZE: AtomicU32 = AtomicU32::new(0);
/// `MPI_COMM_WORLD`'s handle ([`Handle::key`]), looked up once (a `dlsym` costs about 100 ns);
/// 0 (no handle's key) until [`start`].
static WORLD: AtomicUsize = AtomicUsize::new(0);
/// Threads may end supersteps at the same time: the thread level is `MPI_THREAD_MULTIPLE`, and
/// a boundary takes [`STATE`]'s lock. Below it, MPI's rule that one thread at a time calls MPI
/// (which the program keeps by ordering its threads' calls) orders every use of [`STATE`], all
/// of which run inside MPI calls: a boundary then uses it without the lock (no atomic
/// read-modify-write per global collective).
static SHARED: AtomicBool = AtomicBool::new(true);
/// [`WORLD`] while supersteps are kept without the lock (from [`start`] to [`finish`], below
/// `MPI_THREAD_MULTIPLE`), else 0: [`boundary`]'s one test on its common path. With the main
/// thread's table, whose memos keep it (`threads::forget_world_memos`).
use crate::threads::WORLD_UNLOCKED;
/// Supersteps kept from [`prepare`] (or [`start`]) to [`finish`]; [`State::NONE`] otherwise.
static STATE: SpinLock<State> = SpinLock::new(State::NONE);

/// Before the real `MPI_Init`: the buffer of `bytes`, allocated while start-up's pages are mapped
/// anyway (footprint.rs).
pub fn prepare(bytes: usize) {
    *STATE.lock() = State {
        steps: Steps::new(bytes),
        ..State::NONE
    };
}

/// At the end of `MPI_Init`: supersteps are kept from now on, in the buffer [`prepare`]d (else a
/// new one of `bytes`); `world` is `MPI_COMM_WORLD`'s handle; `shared`: the thread level is
/// `MPI_THREAD_MULTIPLE` (`SHARED`). The first superstep's start is set by [`restart`], the last
/// thing `MPI_Init` runs.
#[link_section = ".text.init.mpistat"]
pub fn start(bytes: usize, world_size: u32, world: MPI_Comm, shared: bool) {
    SHARED.store(shared, Relaxed);
    WORLD_SIZE.store(world_size, Relaxed);
    WORLD.store(world.key(), Relaxed);
    let mpi_at_start = crate::threads::thread_mpi_ticks();
    let mut state = STATE.lock();
    if state.kept() {
        state.mpi_at_start = mpi_at_start;
    } else {
        *state = State {
            steps: Steps::new(bytes),
            mpi_at_start,
            ..State::NONE
        };
    }
    state.batching = !shared;
    drop(state);
    ON.store(true, Relaxed);
    if !shared {
        WORLD_UNLOCKED.store(world.key(), Relaxed);
    }
}

/// At the very end of `MPI_Init`, after the profiler's own start-up work: the first superstep
/// starts at `now` (ticks), where the program's work begins.
#[link_section = ".text.hot.mpistat"]
pub fn restart(now: u64) {
    if ON.load(Relaxed) {
        STATE.lock().start = now;
    }
}

/// Whether `comm`, not `MPI_COMM_WORLD`'s handle, spans `MPI_COMM_WORLD` (an intracommunicator
/// with as many ranks), from the thread's `cache` when it holds the answer.
#[inline(always)]
fn spans_world(comm: MPI_Comm, cache: &SpansCache) -> bool {
    let key = comm.key();
    let freed = crate::places::comms_freed();
    if cache.comm.load(Relaxed) == key && cache.freed.load(Relaxed) == freed {
        return cache.spans.load(Relaxed);
    }
    let spans = asks_spans_world(comm);
    cache.comm.store(key, Relaxed);
    cache.freed.store(freed, Relaxed);
    cache.spans.store(spans, Relaxed);
    spans
}

/// [`spans_world`] asked of MPI (out of line: once per communicator).
#[cold]
#[inline(never)]
fn asks_spans_world(comm: MPI_Comm) -> bool {
    comm_size(comm).is_ok_and(|n| n as u32 == WORLD_SIZE.load(Relaxed))
        && comm_is_inter(comm).is_ok_and(|inter| !inter)
}

/// A successful synchronising collective of routine `id` on `comm` ran from `t0` to `t1` on the
/// thread whose table is `table` (called while the thread is still marked inside that call).
/// On `MPI_COMM_WORLD` below `MPI_THREAD_MULTIPLE`: a compare, the superstep's sums and a few
/// plain stores, with no lock and no panic guard ([`Steps::push`] cannot panic), inlined in the
/// wrapper (`rt::leave_superstep`).
#[inline(always)]
pub fn boundary(t0: u64, t1: u64, table: &ThreadTable, id: usize, comm: MPI_Comm) {
    // Another communicator, supersteps not kept yet or any more, or `MPI_THREAD_MULTIPLE`.
    if comm.key() != WORLD_UNLOCKED.load(Relaxed) {
        return boundary_elsewhere(t0, t1, table, id, comm);
    }
    // SAFETY: as in `boundary_elsewhere` (`WORLD_UNLOCKED` is set only below
    // `MPI_THREAD_MULTIPLE`).
    unsafe { STATE.unlocked() }.end(t0, t1, table.mpi_ticks.load(Relaxed), id as u32);
}

/// Whether a successful synchronising collective on `comm` would end a superstep by
/// [`boundary`]'s common path (`MPI_COMM_WORLD`, below `MPI_THREAD_MULTIPLE`, supersteps kept),
/// tested before the call ([`crate::rt::steady`]): `WORLD_UNLOCKED` changes only inside
/// `MPI_Init` and `MPI_Finalize`, which no other call overlaps below `MPI_THREAD_MULTIPLE`.
#[inline(always)]
pub fn steady(comm: MPI_Comm) -> bool {
    // SAFETY: a valid, aligned atomic, written only by `start` (in `MPI_Init`, below
    // `MPI_THREAD_MULTIPLE`) and `finish` (in `MPI_Finalize`, once written): no MPI call of a
    // correct program overlaps either, so this plain read (which the compiler folds into the
    // compare) races with no write; it holds `MPI_COMM_WORLD`'s key or 0.
    unsafe { comm.key_is_at(WORLD_UNLOCKED.as_ptr()) }
}

/// [`boundary`] of a call that [`steady`] let through, into the batch if it has room (else
/// `false`, and [`end_steady_unbatched`] ends it).
#[inline(always)]
pub fn end_steady_batched(t0: u64, t1: u64, mpi_now: u64, id: usize) -> bool {
    // SAFETY: as in `boundary` (`steady` held before the call, and still holds).
    unsafe { STATE.unlocked() }.end_batched(t0, t1, mpi_now, id as u32)
}

/// [`boundary`] of a call that [`steady`] let through and [`end_steady_batched`] did not take.
#[inline(always)]
pub fn end_steady_unbatched(t0: u64, t1: u64, mpi_now: u64, id: usize) {
    // SAFETY: as in `end_steady_batched`.
    unsafe { STATE.unlocked() }.end_unbatched(t0, t1, mpi_now, id as u32);
}

/// [`boundary`] on a communicator other than `MPI_COMM_WORLD`, or at `MPI_THREAD_MULTIPLE`.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn boundary_elsewhere(t0: u64, t1: u64, table: &ThreadTable, id: usize, comm: MPI_Comm) {
    if !ON.load(Relaxed)
        || comm.key() != WORLD.load(Relaxed) && !spans_world(comm, &table.last_spans)
    {
        return;
    }
    let mpi_now = table.mpi_ticks.load(Relaxed);
    if SHARED.load(Relaxed) {
        return end_superstep_locked(t0, t1, mpi_now, id);
    }
    // SAFETY: below `MPI_THREAD_MULTIPLE` ([`SHARED`]) only one thread at a time is inside MPI,
    // and this runs inside a global collective; every other use of `STATE` runs inside an MPI
    // call too (`prepare`, `start`: `MPI_Init`; `finish`: `MPI_Finalize`), so none overlaps and
    // the program's ordering of its MPI calls orders them.
    unsafe { STATE.unlocked() }.end(t0, t1, mpi_now, id as u32);
}

/// [`State::end`] at `MPI_THREAD_MULTIPLE`: with the lock.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn end_superstep_locked(t0: u64, t1: u64, mpi_now: u64, id: usize) {
    STATE.lock().end(t0, t1, mpi_now, id as u32);
}

/// At `MPI_Finalize`, entered at `now` with `mpi_now` ticks of the thread's time in MPI so far
/// (`threads::call_entered`): close the last superstep and take the buffer.
pub fn finish(now: u64, mpi_now: u64) -> Option<Steps> {
    ON.store(false, Relaxed);
    // Only if written (at `MPI_THREAD_MULTIPLE` never: [`steady`] reads it without an atomic).
    if WORLD_UNLOCKED.load(Relaxed) != 0 {
        // Memos stored on it stop taking the steady path with it.
        crate::threads::forget_world_memos();
        WORLD_UNLOCKED.store(0, Relaxed);
    }
    let mut st = std::mem::replace(&mut *STATE.lock(), State::NONE);
    if !st.kept() {
        return None;
    }
    st.end(now, now, mpi_now, TAIL);
    st.fold();
    Some(st.steps)
}

/// What rank 0 learns: the figures and the estimated waiting time per routine id (rank-ns).
pub struct Estimates {
    pub imbalance: Imbalance,
    pub sync_ns: BTreeMap<u32, u64>,
}

/// Per partition block: the slots' d, then these values.
const USEFUL: usize = 0;
const TOTAL_D: usize = 1;
const OTHER_MPI: usize = 2;
const RANKS: usize = 3;
const EXTRA: usize = 4;

/// Reduce every rank's supersteps to rank 0 of `comm` (collective) and compute the figures there.
/// `useful_ns` is this rank's time outside MPI (wall - MPI); `wall_max_ns` matters on rank 0 only.
pub fn reduce(
    comm: &OwnComm,
    steps: Option<Steps>,
    ns_per_tick: f64,
    useful_ns: u64,
    appnum: u32,
) -> crate::mpi::MpiResult<Option<Estimates>> {
    let mut steps = steps.unwrap_or_else(|| Steps::new(0));
    // Agree on the merge factor, the number of supersteps and of partitions.
    let agree = allreduce(
        &[steps.factor, steps.raw, u64::MAX - steps.raw, appnum as u64],
        Op::Max,
        comm,
    )?;
    let (factor, raw_max, raw_min, app_max) = (agree[0], agree[1], u64::MAX - agree[2], agree[3]);
    let rank0 = crate::mpi::comm_rank(comm.0)? == 0;
    if raw_min != raw_max {
        return Ok(rank0.then(|| Estimates {
            imbalance: Imbalance {
                supersteps: raw_max,
                merge_factor: factor,
                unavailable: Some(format!(
                    "ranks saw different numbers of global synchronising collectives ({raw_min} to {raw_max})"
                )),
                ..Imbalance::default()
            },
            sync_ns: BTreeMap::new(),
        }));
    }
    steps.coarsen_to(factor);
    steps.to_ns(ns_per_tick);
    let parts = if app_max as usize >= MAX_PARTITIONS {
        1
    } else {
        app_max as usize + 1
    };
    let part = if parts == 1 { 0 } else { appnum as usize };
    let s = steps.slots.len();
    let block = s + EXTRA;
    let mut v = vec![0u64; parts * block];
    {
        let b = &mut v[part * block..(part + 1) * block];
        let mut total = 0;
        let mut other = 0;
        for (k, slot) in steps.slots.iter().enumerate() {
            b[k] = slot.d;
            total += slot.d;
            other += slot.other_mpi;
        }
        b[s + USEFUL] = useful_ns;
        b[s + TOTAL_D] = total;
        b[s + OTHER_MPI] = other;
        b[s + RANKS] = 1;
    }
    // One pass of the tree for both.
    let reduced = reduce_each_to_root(&[(Op::Max, &v), (Op::Sum, &v)], comm)?;
    let Some([max, sum]) = reduced.and_then(|r| <[Vec<u64>; 2]>::try_from(r).ok()) else {
        return Ok(None);
    };
    let routines: Vec<u32> = steps.slots.iter().map(|s| s.routine).collect();
    Ok(Some(figures(&max, &sum, parts, &routines, factor, raw_max)))
}

/// The figures from the reduced blocks (`parts` blocks of `routines.len()` slots + extras).
pub fn figures(
    max: &[u64],
    sum: &[u64],
    parts: usize,
    routines: &[u32],
    factor: u64,
    raw: u64,
) -> Estimates {
    let s = routines.len();
    let block = s + EXTRA;
    let bm = |j: usize| &max[j * block..(j + 1) * block];
    let bs = |j: usize| &sum[j * block..(j + 1) * block];
    let n: Vec<u64> = (0..parts).map(|j| bs(j)[s + RANKS]).collect();
    let p: u64 = n.iter().sum::<u64>().max(1);
    let mut iota: u128 = 0;
    let mut inter: u128 = 0;
    let mut intra = vec![0u128; parts];
    let mut per_slot = Vec::with_capacity(s);
    let mut sync_ns: BTreeMap<u32, u64> = BTreeMap::new();
    for (k, &routine) in routines.iter().enumerate() {
        let jmax = (0..parts).map(|j| bm(j)[k]).max().unwrap_or(0);
        let jsum: u64 = (0..parts).map(|j| bs(j)[k]).sum();
        let wait = (p as u128 * jmax as u128).saturating_sub(jsum as u128);
        iota += wait;
        per_slot.push((wait / p as u128) as u64);
        if routine != TAIL {
            *sync_ns.entry(routine).or_default() += wait as u64;
        }
        for j in 0..parts {
            let (mj, sj) = (bm(j)[k] as u128, bs(j)[k] as u128);
            intra[j] += (n[j] as u128 * mj).saturating_sub(sj);
            inter += n[j] as u128 * (jmax as u128 - mj.min(jmax as u128));
        }
    }
    let total = |j: usize| (bm(j)[s + TOTAL_D], bs(j)[s + TOTAL_D]);
    let useful = |j: usize| (bm(j)[s + USEFUL], bs(j)[s + USEFUL]);
    let work_max = (0..parts).map(|j| total(j).0).max().unwrap_or(0);
    let work_sum: u64 = (0..parts).map(|j| total(j).1).sum();
    let partitions = if parts > 1 {
        (0..parts)
            .filter(|&j| n[j] > 0)
            .map(|j| PartitionImbalance {
                appnum: j as u32,
                ranks: n[j] as u32,
                critical_path_ns: (intra[j] / n[j] as u128) as u64,
                profile_ns: total(j).0.saturating_sub(total(j).1 / n[j]),
                work_max_ns: total(j).0,
                work_sum_ns: total(j).1,
                useful_max_ns: useful(j).0,
                useful_sum_ns: useful(j).1,
            })
            .collect()
    } else {
        Vec::new()
    };
    let imbalance = Imbalance {
        supersteps: raw,
        merge_factor: factor,
        critical_path_ns: (iota / p as u128) as u64,
        profile_ns: work_max.saturating_sub(work_sum / p),
        work_max_ns: work_max,
        work_sum_ns: work_sum,
        useful_max_ns: (0..parts).map(|j| useful(j).0).max().unwrap_or(0),
        useful_sum_ns: (0..parts).map(|j| useful(j).1).sum(),
        other_mpi_ns: (0..parts).map(|j| bs(j)[s + OTHER_MPI]).sum(),
        inter_partition_ns: if parts > 1 {
            (inter / p as u128) as u64
        } else {
            0
        },
        series_ns: coarsen_series(&per_slot, SERIES_POINTS),
        series_factor: (per_slot.len().div_ceil(SERIES_POINTS).max(1) as u64) * factor,
        partitions,
        unavailable: None,
    };
    Estimates { imbalance, sync_ns }
}

/// Sum adjacent groups of `v` so that at most `points` remain.
pub fn coarsen_series(v: &[u64], points: usize) -> Vec<u64> {
    let group = v.len().div_ceil(points.max(1)).max(1);
    v.chunks(group).map(|c| c.iter().sum()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reduce per-rank slot vectors the way `reduce` does (one partition) and compute iota.
    fn iota_of(ranks: &[Steps]) -> u64 {
        let s = ranks[0].slots.len();
        let block = s + EXTRA;
        let mut max = vec![0u64; block];
        let mut sum = vec![0u64; block];
        for r in ranks {
            for (k, slot) in r.slots.iter().enumerate() {
                max[k] = max[k].max(slot.d);
                sum[k] += slot.d;
            }
            sum[s + RANKS] += 1;
        }
        let routines: Vec<u32> = ranks[0].slots.iter().map(|s| s.routine).collect();
        figures(&max, &sum, 1, &routines, ranks[0].factor, ranks[0].raw)
            .imbalance
            .critical_path_ns
    }

    #[test]
    fn merging_keeps_totals_and_alignment() {
        let mut st = Steps::new(4 * std::mem::size_of::<Slot>());
        for k in 0..11u64 {
            st.push(k, 0, k as u32);
        }
        // 11 steps in 4 slots: factor 4, slots of 4, 4, 3 steps.
        assert_eq!(st.factor, 4);
        assert_eq!(st.raw, 11);
        let d: Vec<u64> = st.slots.iter().map(|s| s.d).collect();
        assert_eq!(d, vec![6, 22, 27]);
        assert_eq!(st.slots[2].routine, 10);
    }

    #[test]
    fn static_and_dynamic_patterns() {
        // 4 ranks, 8 supersteps of 100: static (rank 0 has 125, others 75) and dynamic.
        let mk = |f: &dyn Fn(usize, usize) -> u64| -> Vec<Steps> {
            (0..4)
                .map(|p| {
                    let mut st = Steps::new(1 << 16);
                    for k in 0..8 {
                        st.push(f(p, k), 0, 1);
                    }
                    st
                })
                .collect()
        };
        let stat = mk(&|p, _| if p == 0 { 175 } else { 75 });
        assert_eq!(iota_of(&stat), 8 * 75);
        let dynamic = mk(&|p, k| if p == k % 4 { 175 } else { 75 });
        assert_eq!(iota_of(&dynamic), 8 * 75);
    }

    #[test]
    fn partitions_split_the_imbalance() {
        // Two partitions of 2 ranks: a works 100, b works 150 per superstep, 10 supersteps.
        let s = 10;
        let block = s + EXTRA;
        let mut max = vec![0u64; 2 * block];
        let mut sum = vec![0u64; 2 * block];
        for (j, w) in [(0, 100u64), (1, 150)] {
            for k in 0..s {
                max[j * block + k] = w;
                sum[j * block + k] = 2 * w;
            }
            max[j * block + s + TOTAL_D] = w * s as u64;
            sum[j * block + s + TOTAL_D] = 2 * w * s as u64;
            sum[j * block + s + RANKS] = 2;
        }
        let e = figures(&max, &sum, 2, &vec![3; s], 1, s as u64);
        let i = e.imbalance;
        // Each superstep: avg 125, max 150 -> 25; all of it between partitions.
        assert_eq!(i.critical_path_ns, 250);
        assert_eq!(i.inter_partition_ns, 250);
        assert_eq!(i.partitions.len(), 2);
        assert!(i.partitions.iter().all(|p| p.critical_path_ns == 0));
        // Ranks of a wait 50 each superstep: 2 * 50 * 10.
        assert_eq!(e.sync_ns[&3], 1000);
    }

    proptest! {
        /// Batching changes nothing: the same collectives fill the same slots whether each
        /// superstep is added alone (as at `MPI_THREAD_MULTIPLE`) or batched, through merges,
        /// a first superstep that fills a fresh buffer and `MPI_Finalize`'s end.
        #[test]
        fn batched_supersteps_fill_the_same_slots(
            cap_slots in 2usize..16,
            // Per superstep: ticks outside collectives, of them in other MPI calls, in the
            // collective, and its routine.
            supersteps in prop::collection::vec((0u64..1000, 0u64..1000, 0u64..500, 0u32..3), 0..300),
        ) {
            let fill = |batching: bool| {
                let mut st = State {
                    steps: Steps::new(cap_slots * std::mem::size_of::<Slot>()),
                    start: 1000,
                    batching,
                    ..State::NONE
                };
                let (mut now, mut mpi) = (1000u64, 0u64);
                for &(outside, other_mpi, collective, routine) in &supersteps {
                    now += outside;
                    mpi += other_mpi.min(outside);
                    let t0 = now;
                    now += collective;
                    mpi += collective;
                    st.end(t0, now, mpi, routine);
                }
                st.end(now + 7, now + 7, mpi, TAIL);
                st.fold();
                st.steps
            };
            let (batched, alone) = (fill(true), fill(false));
            prop_assert_eq!(batched.raw, supersteps.len() as u64 + 1);
            prop_assert_eq!(batched, alone);
        }

        /// The merged (coarsened) estimate never exceeds the unmerged one, and equals it when no
        /// merge happened.
        #[test]
        fn merged_estimate_is_a_lower_bound(
            ranks in 1usize..6,
            steps in 1usize..200,
            cap_slots in 2usize..64,
            seed in any::<u64>(),
        ) {
            let mut x = seed | 1;
            let mut rnd = move || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x % 1_000_000 };
            let data: Vec<Vec<u64>> = (0..ranks).map(|_| (0..steps).map(|_| rnd()).collect()).collect();
            let fill = |bytes: usize| -> Vec<Steps> {
                data.iter().map(|d| {
                    let mut st = Steps::new(bytes);
                    for (k, v) in d.iter().enumerate() { st.push(*v, 0, k as u32); }
                    st
                }).collect()
            };
            let unmerged = fill(steps * std::mem::size_of::<Slot>() + 64);
            prop_assert_eq!(unmerged[0].factor, 1);
            let merged = fill(cap_slots * std::mem::size_of::<Slot>());
            prop_assert!(merged.iter().all(|m| m.factor == merged[0].factor && m.slots.len() == merged[0].slots.len()));
            prop_assert!(merged[0].slots.len() <= cap_slots);
            let (u, m) = (iota_of(&unmerged), iota_of(&merged));
            prop_assert!(m <= u, "merged {} > unmerged {}", m, u);
            if merged[0].factor == 1 {
                prop_assert_eq!(m, u);
            }
        }
    }
}
