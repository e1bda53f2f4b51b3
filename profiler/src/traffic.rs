//! What data a call moved: the spec table's semantics turned into counts and bytes.
//!
//! Wrappers describe their arguments with a [`Traffic`] value (cheap: it only holds the
//! arguments); [`record`] runs after the call's end time was taken (out of line, but for the
//! choice of the path, inlined: `record_elements` gets a routine's count, datatype and peer in
//! registers), and only for calls that succeeded, so every handle it looks at is valid. A call with the same count,
//! datatype, peer and communicator as its routine's last one on the thread (a loop's
//! collective, a halo exchange) adds what that one measured ([`Memo`]): measuring and placing
//! the bytes was most of a collective's added time (issue 18).

use crate::family::Handle;
use crate::ffi::{MPI_Comm, MPI_Count, MPI_Datatype, MPI_Status};
// The real routines: the wrappers' `Next`s (one per routine, all looked up at `MPI_Init`).
use crate::generated::wrappers::{
    NEXT_MPI_Comm_remote_size as COMM_REMOTE_SIZE, NEXT_MPI_Comm_size as COMM_SIZE,
    NEXT_MPI_Comm_test_inter as COMM_TEST_INTER, NEXT_MPI_Type_size as TYPE_SIZE,
};
use crate::rt::{bump, Routine, RoutineId, ThreadTable};
use mpistat_record::model::{hist_bucket, HIST_BUCKETS};
use std::ffi::{c_int, c_void};
use std::mem::transmute;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};

pub use crate::family::{IN_PLACE, PROC_NULL, STATUS_IGNORE};
/// Peer value for collectives without a single peer: no rank and no special rank of any family
/// (MPICH's `MPI_PROC_NULL` is -1, `MPI_ANY_SOURCE` -2, `MPI_ROOT` -3; Open MPI's -2, -1, -4).
pub const NO_PEER: c_int = c_int::MIN;

/// The data arguments of one call (copied: trace mode reads them too).
#[derive(Clone, Copy)]
pub enum Traffic {
    /// Nothing moved (or nothing we count).
    None,
    /// `count` elements of `datatype` to or from `peer` (nothing when `peer` is `MPI_PROC_NULL`).
    /// Collectives give their root as peer (an intercommunicator's non-participants pass
    /// `MPI_PROC_NULL`), or [`NO_PEER`].
    Elements {
        count: MPI_Count,
        datatype: MPI_Datatype,
        peer: c_int,
    },
    /// A completed receive: bytes are what `status` says arrived; `count` is the posted count.
    Received {
        count: MPI_Count,
        datatype: MPI_Datatype,
        status: *const MPI_Status,
    },
    /// A send plus a completed receive (`MPI_Sendrecv`, `MPI_Sendrecv_replace`).
    SendReceived {
        count: MPI_Count,
        datatype: MPI_Datatype,
        peer: c_int,
        recv_count: MPI_Count,
        recv_datatype: MPI_Datatype,
        status: *const MPI_Status,
    },
    /// A collective whose `buf` may be `MPI_IN_PLACE`: then MPI ignores `count` and `datatype`
    /// (they may be garbage) and `in_place_count` elements of `in_place_datatype` describe the data.
    InPlaceOr {
        buf: *const c_void,
        count: MPI_Count,
        datatype: MPI_Datatype,
        in_place_count: MPI_Count,
        in_place_datatype: MPI_Datatype,
    },
    /// One count per rank of `comm` (its remote group for an intercommunicator), e.g.
    /// `MPI_Alltoallv`'s `sendcounts` or `MPI_Reduce_scatter`'s `recvcounts`.
    PerRank {
        counts: Counts,
        datatype: MPI_Datatype,
        comm: MPI_Comm,
    },
}

/// A per-rank counts array: `int`s, or `MPI_Count`s in the large-count (`_c`) routines.
#[derive(Clone, Copy)]
pub enum Counts {
    Int(*const c_int),
    Large(*const MPI_Count),
}

impl Traffic {
    #[inline(always)]
    pub fn is_none(&self) -> bool {
        matches!(self, Traffic::None)
    }
}

type TypeSizeFn = unsafe extern "C" fn(MPI_Datatype, *mut c_int) -> c_int;
type CommIntFn = unsafe extern "C" fn(MPI_Comm, *mut c_int) -> c_int;

/// Bumped whenever a datatype is freed (`MPI_Type_free`): a freed handle's address can come back
/// as a different type, so sizes cached before are no longer trusted.
static TYPES_FREED: AtomicU64 = AtomicU64::new(0);

/// After `MPI_Type_free`: forget every thread's cached type size, and every [`Memo`].
pub fn forget_type_sizes() {
    TYPES_FREED.fetch_add(1, Relaxed);
    forget_memos();
}

/// The [`Memo`]s' generation: bumped whenever a memo's answers may have changed (a datatype or a
/// communicator was freed, the node map was learned). Starts at 1: 0 marks an empty memo.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Forget every thread's [`Memo`]s (their answers may have changed).
pub fn forget_memos() {
    GENERATION.fetch_add(1, Relaxed);
}

/// One thread's last (datatype, size) pair, so that a loop sending the same type asks MPI once.
/// All-zero bytes are a valid empty cache (no handle has key 0, see [`Handle::NONE`]). Written
/// only by its thread.
#[derive(Default)]
pub struct TypeSizeCache {
    /// The datatype's [`Handle::key`].
    datatype: AtomicUsize,
    size: AtomicU64,
    /// [`TYPES_FREED`] when the pair was stored.
    freed: AtomicU64,
}

/// Size in bytes of one element of `datatype`, from this thread's cache when it holds it. One
/// copy with the hot code, not one inlined per kind of [`Traffic`]: `.text.hot` is full, and a
/// repeated call does not get here ([`Memo`]).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn cached_type_size(table: &ThreadTable, datatype: MPI_Datatype) -> u64 {
    let cache = &table.last_type;
    let freed = TYPES_FREED.load(Relaxed);
    let handle = datatype.key();
    if cache.datatype.load(Relaxed) == handle && cache.freed.load(Relaxed) == freed {
        return cache.size.load(Relaxed);
    }
    let size = type_size(datatype);
    if size > 0 {
        cache.datatype.store(handle, Relaxed);
        cache.size.store(size, Relaxed);
        cache.freed.store(freed, Relaxed);
    }
    size
}

/// Size in bytes of one element of `datatype` (0 if MPI cannot say).
fn type_size(datatype: MPI_Datatype) -> u64 {
    let mut size: c_int = 0;
    // SAFETY: the real PMPI_Type_size with a valid out pointer; datatype came from a call that succeeded.
    let rc = unsafe { transmute::<*mut c_void, TypeSizeFn>(TYPE_SIZE.get())(datatype, &mut size) };
    if rc == 0 && size > 0 {
        size as u64
    } else {
        0
    }
}

/// Bytes that arrived according to `status` (the family's status layout).
fn received_bytes(status: *const MPI_Status) -> u64 {
    if crate::family::no_status(status) {
        return 0;
    }
    // SAFETY: status was filled by the successful call that just returned.
    unsafe { <crate::family::Built as crate::family::Family>::received_bytes(status) }
}

/// Number of entries in a per-rank counts array of `comm`.
fn per_rank_len(comm: MPI_Comm) -> usize {
    let mut inter: c_int = 0;
    let mut n: c_int = 0;
    // SAFETY: real PMPI routines on a communicator that a successful call just used.
    unsafe {
        transmute::<*mut c_void, CommIntFn>(COMM_TEST_INTER.get())(comm, &mut inter);
        let size_fn = if inter != 0 {
            &COMM_REMOTE_SIZE
        } else {
            &COMM_SIZE
        };
        if transmute::<*mut c_void, CommIntFn>(size_fn.get())(comm, &mut n) != 0 {
            return 0;
        }
    }
    n.max(0) as usize
}

fn elements(count: MPI_Count) -> u64 {
    count.max(0) as u64
}

/// Bytes of `count` elements of `datatype`. A zero count never asks for the type's size: MPI
/// ignores the datatype then, so it may be `MPI_DATATYPE_NULL`, and asking would invoke an error
/// handler.
fn bytes_of(table: &ThreadTable, count: MPI_Count, datatype: MPI_Datatype) -> u64 {
    if count <= 0 {
        0
    } else {
        elements(count) * cached_type_size(table, datatype)
    }
}

/// What a successful call moved: its count, its bytes, and of those the bytes the send side of
/// a send-and-receive sent (0 for other calls; [`crate::places`] places the two sides apart).
#[derive(Clone, Copy, Default)]
pub struct Measured {
    pub count: u64,
    pub bytes: u64,
    pub sent: u64,
}

impl Measured {
    #[inline(always)]
    fn of(count: u64, bytes: u64) -> Measured {
        Measured {
            count,
            bytes,
            sent: 0,
        }
    }
}

/// What `traffic` stands for. On the hot path (from [`record`]), so placed with the hot
/// wrappers (footprint.rs).
#[link_section = ".text.hot.mpistat"]
fn measure(table: &ThreadTable, traffic: Traffic) -> Measured {
    match traffic {
        Traffic::None => Measured::default(),
        Traffic::Elements {
            count,
            datatype,
            peer,
        } => {
            if peer == PROC_NULL {
                Measured::of(elements(count), 0)
            } else {
                Measured::of(elements(count), bytes_of(table, count, datatype))
            }
        }
        Traffic::Received { count, status, .. } => {
            Measured::of(elements(count), received_bytes(status))
        }
        Traffic::SendReceived {
            count,
            datatype,
            peer,
            recv_count,
            status,
            ..
        } => {
            let sent = if peer == PROC_NULL {
                0
            } else {
                bytes_of(table, count, datatype)
            };
            Measured {
                count: elements(count) + elements(recv_count),
                bytes: sent + received_bytes(status),
                sent,
            }
        }
        Traffic::InPlaceOr {
            buf,
            count,
            datatype,
            in_place_count,
            in_place_datatype,
        } => {
            if buf == IN_PLACE {
                Measured::of(
                    elements(in_place_count),
                    bytes_of(table, in_place_count, in_place_datatype),
                )
            } else {
                Measured::of(elements(count), bytes_of(table, count, datatype))
            }
        }
        Traffic::PerRank {
            counts,
            datatype,
            comm,
        } => {
            let total = match counts {
                Counts::Int(c) if !c.is_null() => sum_counts(c, per_rank_len(comm)),
                Counts::Large(c) if !c.is_null() => sum_counts(c, per_rank_len(comm)),
                _ => return Measured::default(),
            };
            let bytes = if total == 0 {
                0
            } else {
                total * cached_type_size(table, datatype)
            };
            Measured::of(total, bytes)
        }
    }
}

/// The elements of `n` counts at `counts`.
fn sum_counts<C: Copy + Into<MPI_Count>>(counts: *const C, n: usize) -> u64 {
    // SAFETY: MPI requires `counts` to have one entry per rank of the (remote) group.
    unsafe { std::slice::from_raw_parts(counts, n) }
        .iter()
        .map(|c| elements((*c).into()))
        .sum()
}

/// One routine's last call on one thread: its [`Traffic::Elements`] arguments, or a
/// [`Traffic::Received`]'s posted count and type and its status's source (the key), and what the
/// call came to. What a call adds is a function of the key (and, for a receive, of the bytes its
/// status says arrived, compared too) while no datatype nor communicator was freed (a freed
/// handle can come back as another type or group) and the node map did not change: so a call
/// with the same key adds the same, unmeasured. The key holds only while `generation` is the
/// current `GENERATION`, which is never 0: all-zero bytes are a valid empty memo, and a call of
/// another kind, a receive whose status was ignored, or one whose size MPI could not tell (no
/// bytes for a non-empty count) leaves `generation` 0. Whatever the
/// kind, the memo holds what the routine's last recorded call on the thread came to
/// ([`measured`]). Written only by its thread (part of its `rt::ThreadTable`).
#[derive(Default)]
pub struct Memo {
    count: AtomicI64,
    /// The datatype's [`Handle::key`].
    datatype: AtomicUsize,
    comm: AtomicUsize,
    peer: AtomicI32,
    /// [`generation`] when the key was stored; 0: the memo holds no key.
    generation: AtomicU64,
    elements: AtomicU64,
    bytes: AtomicU64,
    sent: AtomicU64,
    /// The message-size histogram's bucket of `bytes` (below `HIST_BUCKETS`).
    bucket: AtomicUsize,
    /// Of `bytes`, those placed on and off this node (both 0 when not placed: adding them is
    /// then adding nothing, so the hit path needs no test).
    on_node: AtomicU64,
    off_node: AtomicU64,
    /// Calls that came to what the memo holds and are not in the routine's counters yet
    /// ([`settle`]): a call like the last adds one here, not five counters and a bucket.
    hits: AtomicU64,
}

impl Memo {
    /// Whether the memo holds this key, and still may (its generation is the current one).
    #[inline(always)]
    fn holds(&self, count: MPI_Count, datatype: MPI_Datatype, peer: c_int, comm: MPI_Comm) -> bool {
        self.datatype.load(Relaxed) == datatype.key()
            && self.count.load(Relaxed) == count
            && self.peer.load(Relaxed) == peer
            && self.comm.load(Relaxed) == comm.key()
            && self.generation.load(Relaxed) == generation()
    }
}

/// The current [`GENERATION`] (never 0).
#[inline(always)]
fn generation() -> u64 {
    GENERATION.load(Relaxed)
}

/// Add a successful call on `comm` (null if none)'s count, bytes, message size, and bytes on
/// and off this node ([`crate::places`]) to this thread's table ([`measured`] then tells what
/// it came to). Inlined into the wrappers, where the kind of `traffic` is a constant: a
/// routine with [`Traffic::Elements`] passes its arguments in registers to `record_elements`.
#[inline(always)]
pub fn record(table: &ThreadTable, id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    match traffic {
        Traffic::Elements {
            count,
            datatype,
            peer,
        } => record_elements(table, id, count, datatype, peer, comm),
        Traffic::Received {
            count,
            datatype,
            status,
        } => record_received(table, id, count, datatype, status, comm),
        _ => record_measured(table, id, traffic, comm),
    }
}

/// [`record`] of a completed receive: one with its routine's last key on the thread, and with
/// the same source and size in its status, adds what that one measured ([`record_elements`]);
/// another is measured.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn record_received(
    table: &ThreadTable,
    id: RoutineId,
    count: MPI_Count,
    datatype: MPI_Datatype,
    status: *const MPI_Status,
    comm: MPI_Comm,
) {
    let routine = &table.routines[id];
    let memo = &routine.memo;
    if let Some((source, bytes)) = status_of_receive(status) {
        if memo.holds(count, datatype, source, comm) && memo.bytes.load(Relaxed) == bytes {
            return add_memo(routine);
        }
    }
    let traffic = Traffic::Received {
        count,
        datatype,
        status,
    };
    record_measured(table, id, traffic, comm);
}

/// The source and the bytes received of a successful receive's status, unless ignored.
#[inline(always)]
fn status_of_receive(status: *const MPI_Status) -> Option<(c_int, u64)> {
    if crate::family::no_status(status) {
        return None;
    }
    // SAFETY: filled by the successful call that just returned.
    Some(unsafe {
        (
            <crate::family::Built as crate::family::Family>::status_source(status),
            <crate::family::Built as crate::family::Family>::received_bytes(status),
        )
    })
}

/// [`record`] of `count` elements of `datatype` to or from `peer`: a call with its routine's
/// last key on the thread ([`Memo`]) adds what that one measured, with no call, no test of
/// whether it was placed and no frame; another is measured ([`measure_elements`], a tail call).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn record_elements(
    table: &ThreadTable,
    id: RoutineId,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    comm: MPI_Comm,
) {
    record_elements_inline(table, id, count, datatype, peer, comm)
}

/// [`record`] with the memo's test of [`record_elements`] inlined, for the wrappers of
/// synchronising collectives, which inline the superstep boundary too (`rt::leave_superstep`):
/// no call on their common path.
#[inline(always)]
pub fn record_inline(table: &ThreadTable, id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    match traffic {
        Traffic::None => {}
        Traffic::Elements {
            count,
            datatype,
            peer,
        } => record_elements_inline(table, id, count, datatype, peer, comm),
        _ => record(table, id, traffic, comm),
    }
}

/// [`record_elements`]'s body.
#[inline(always)]
fn record_elements_inline(
    table: &ThreadTable,
    id: RoutineId,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    comm: MPI_Comm,
) {
    let routine = &table.routines[id];
    let memo = &routine.memo;
    if !memo.holds(count, datatype, peer, comm) {
        return measure_elements(table, id, count, datatype, peer, comm);
    }
    add_memo(routine);
}

/// [`record_elements`] of a call that is not its routine's last key: its arguments stay in
/// registers up to here.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn measure_elements(
    table: &ThreadTable,
    id: RoutineId,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    comm: MPI_Comm,
) {
    let traffic = Traffic::Elements {
        count,
        datatype,
        peer,
    };
    record_measured(table, id, traffic, comm);
}

/// Add what a routine's memo holds: one more call of it ([`Memo::hits`]; the counters get its
/// values times the hits when the memo changes, [`settle`], or is read, [`settled`]).
#[inline(always)]
fn add_memo(routine: &Routine) {
    bump(&routine.memo.hits, 1);
}

/// A routine's traffic counters, in the order of [`Memo::per_call`].
#[inline(always)]
fn traffic_counters(c: &crate::rt::Counters) -> [&AtomicU64; 4] {
    [&c.count, &c.bytes, &c.on_node, &c.off_node]
}

impl Memo {
    /// What one call like the memo's adds to [`traffic_counters`] (its histogram bucket aside).
    #[inline(always)]
    fn per_call(&self) -> [u64; 4] {
        [&self.elements, &self.bytes, &self.on_node, &self.off_node].map(|v| v.load(Relaxed))
    }
}

/// Move the memo's hits into its routine's counters (its thread, before the memo changes).
#[inline(always)]
fn settle(routine: &Routine) {
    let memo = &routine.memo;
    let hits = memo.hits.load(Relaxed);
    if hits == 0 {
        return;
    }
    for (counter, v) in traffic_counters(&routine.counters)
        .into_iter()
        .zip(memo.per_call())
    {
        bump(counter, v.wrapping_mul(hits));
    }
    if let Some(bucket) = routine.hist.get(memo.bucket.load(Relaxed)) {
        bump(bucket, hits);
    }
    memo.hits.store(0, Relaxed);
}

/// A routine's traffic counters on one thread, its memo's unsettled hits included.
pub struct Settled {
    pub count: u64,
    pub bytes: u64,
    pub on_node: u64,
    pub off_node: u64,
    pub hist: [u64; HIST_BUCKETS],
}

/// A routine's traffic on one thread so far (for the readers, `tally`): its counters plus its
/// memo's unsettled hits. Read from another thread while the owner counts, the sum may miss or
/// repeat the calls of one memo change (a subtotal of `MPI_Pcontrol`); at `MPI_Finalize` no
/// other thread is inside MPI.
pub fn settled(routine: &Routine) -> Settled {
    let memo = &routine.memo;
    let hits = memo.hits.load(Relaxed);
    let (counters, per_call) = (traffic_counters(&routine.counters), memo.per_call());
    let [count, bytes, on_node, off_node] = std::array::from_fn(|i| {
        counters[i]
            .load(Relaxed)
            .wrapping_add(per_call[i].wrapping_mul(hits))
    });
    let mut hist = std::array::from_fn(|b| routine.hist[b].load(Relaxed));
    if let Some(bucket) = hist.get_mut(memo.bucket.load(Relaxed)) {
        *bucket = bucket.wrapping_add(hits);
    }
    Settled {
        count,
        bytes,
        on_node,
        off_node,
        hist,
    }
}

/// [`record`] of a call that is not its routine's last key on the thread: measure and place
/// its bytes, keep them in the routine's [`Memo`] (with the key if it has one) and add them.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn record_measured(table: &ThreadTable, id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    let routine = &table.routines[id];
    let memo = &routine.memo;
    settle(routine);
    // The key, and whether a call without a size is final (nothing to send, or a receive's
    // status, which says what arrived) rather than one MPI could not size.
    let (count, datatype, peer, generation, empty_is_final) = match traffic {
        Traffic::Elements {
            count,
            datatype,
            peer,
        } => (
            count,
            datatype.key(),
            peer,
            generation(),
            count == 0 || peer == PROC_NULL,
        ),
        Traffic::Received {
            count,
            datatype,
            status,
        } => match status_of_receive(status) {
            Some((source, _)) => (count, datatype.key(), source, generation(), true),
            None => (0, 0, 0, 0, false),
        },
        _ => (0, 0, 0, 0, false),
    };
    // A bug here must not unwind into the user's program: swallow it, lose this call's bytes
    // (and tell trace mode it measured none).
    let Some((m, placed)) =
        crate::guard::contained(move || measure_and_place(table, id, traffic, comm))
    else {
        memo.generation.store(0, Relaxed);
        memo.elements.store(0, Relaxed);
        memo.bytes.store(0, Relaxed);
        memo.sent.store(0, Relaxed);
        return;
    };
    // A size MPI could not tell (0 bytes of a non-empty count) is asked again next time.
    let generation = if m.bytes > 0 || empty_is_final {
        generation
    } else {
        0
    };
    memo.datatype.store(datatype, Relaxed);
    memo.count.store(count, Relaxed);
    memo.peer.store(peer, Relaxed);
    memo.comm.store(comm.key(), Relaxed);
    memo.generation.store(generation, Relaxed);
    memo.elements.store(m.count, Relaxed);
    memo.bytes.store(m.bytes, Relaxed);
    memo.sent.store(m.sent, Relaxed);
    memo.bucket
        .store(hist_bucket(m.bytes).min(HIST_BUCKETS - 1), Relaxed);
    let (on, off) = placed.unwrap_or_default();
    memo.on_node.store(on, Relaxed);
    memo.off_node.store(off, Relaxed);
    add_memo(routine);
}

/// What the last call of routine `id` that [`record`] added on this thread came to (trace mode
/// reads it right after, [`crate::trace::leave`]).
#[inline(always)]
pub fn measured(table: &ThreadTable, id: RoutineId) -> Measured {
    let memo = &table.routines[id].memo;
    Measured {
        count: memo.elements.load(Relaxed),
        bytes: memo.bytes.load(Relaxed),
        sent: memo.sent.load(Relaxed),
    }
}

/// A call's count and bytes, and its bytes on and off this node if known. A function of its own
/// in the hot chunk: as a closure body it may be compiled out of line into `.text`, mapping one
/// more chunk of code into every rank (footprint.rs).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn measure_and_place(
    table: &ThreadTable,
    id: RoutineId,
    traffic: Traffic,
    comm: MPI_Comm,
) -> (Measured, Option<(u64, u64)>) {
    let m = measure(table, traffic);
    let placed = crate::places::split(id, &traffic, comm, m.bytes, m.sent);
    (m, placed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::routines::id;

    /// A thread table of its own (leaked, as the profiler's are).
    fn table() -> &'static ThreadTable {
        let layout = std::alloc::Layout::new::<ThreadTable>();
        // SAFETY: all-zero bytes are a valid table (atomics only), as in `rt::new_thread_table`.
        unsafe { &*(std::alloc::alloc_zeroed(layout) as *const ThreadTable) }
    }

    /// A receive's status: from `source`, `bytes` arrived.
    fn status(source: c_int, bytes: u64) -> MPI_Status {
        // SAFETY: MPI_Status is plain integers.
        let mut s: MPI_Status = unsafe { std::mem::zeroed() };
        s.MPI_SOURCE = source;
        #[cfg(mpistat_family = "openmpi")]
        {
            s._ucount = bytes as _;
        }
        #[cfg(mpistat_family = "mpich")]
        {
            s.count_lo = bytes as u32 as c_int;
            s.count_hi_and_cancelled = ((bytes >> 32) << 1) as c_int;
        }
        s
    }

    fn receive(table: &ThreadTable, status: &MPI_Status) {
        let traffic = Traffic::Received {
            count: 100,
            datatype: MPI_Datatype::from_key(0x5000),
            status,
        };
        record(table, id::MPI_Recv, traffic, MPI_Comm::from_key(0x7000));
    }

    #[test]
    fn receives_like_the_last_add_what_it_came_to_and_other_sizes_or_sources_are_measured() {
        let table = table();
        let routine = &table.routines[id::MPI_Recv];
        let arrivals = [
            (1, 8),
            (1, 8),
            (1, 8),
            (1, 24),
            (2, 24),
            (2, 0),
            (2, 0),
            (1, 8),
        ];
        for (source, bytes) in arrivals {
            receive(table, &status(source, bytes));
        }
        // Keyed after a receive (the next like it adds the memo, unmeasured).
        assert_eq!(routine.memo.generation.load(Relaxed), generation());
        assert_eq!(routine.memo.peer.load(Relaxed), 1);
        let s = settled(routine);
        assert_eq!((s.count, s.bytes), (8 * 100, 4 * 8 + 2 * 24));
        let hist = |bytes| s.hist[hist_bucket(bytes)];
        assert_eq!((hist(8), hist(24), hist(0)), (4, 2, 2));
        // What the counters hold already and what the memo still holds add up to the same.
        assert_eq!(routine.memo.hits.load(Relaxed), 1);
    }

    #[test]
    fn a_receive_whose_status_was_ignored_keys_no_memo() {
        let table = table();
        receive(table, &status(1, 8));
        let traffic = Traffic::Received {
            count: 100,
            datatype: MPI_Datatype::from_key(0x5000),
            status: std::ptr::null(),
        };
        record(table, id::MPI_Recv, traffic, MPI_Comm::from_key(0x7000));
        let routine = &table.routines[id::MPI_Recv];
        assert_eq!(routine.memo.generation.load(Relaxed), 0);
        let s = settled(routine);
        assert_eq!((s.count, s.bytes), (200, 8));
    }

    #[test]
    fn empty_sends_keep_their_key() {
        let table = table();
        let send = |count, peer| {
            let traffic = Traffic::Elements {
                count,
                datatype: MPI_Datatype::from_key(0x5000),
                peer,
            };
            record(table, id::MPI_Send, traffic, MPI_Comm::from_key(0x7000));
        };
        let memo = &table.routines[id::MPI_Send].memo;
        send(0, 1);
        assert_eq!(memo.generation.load(Relaxed), generation());
        send(5, PROC_NULL);
        assert_eq!(memo.generation.load(Relaxed), generation());
        assert_eq!(settled(&table.routines[id::MPI_Send]).bytes, 0);
    }
}
