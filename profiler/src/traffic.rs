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
use crate::generated::routines::{N_ROUTINES, ROUTINES};
use crate::generated::wrappers::{
    NEXT_MPI_Comm_rank as COMM_RANK, NEXT_MPI_Comm_remote_size as COMM_REMOTE_SIZE,
    NEXT_MPI_Comm_size as COMM_SIZE, NEXT_MPI_Comm_test_inter as COMM_TEST_INTER,
    NEXT_MPI_Type_size as TYPE_SIZE,
};
use crate::spec::Reach;
use crate::thread_parts::Memo;
use crate::threads::{bump, Routine, RoutineId, ThreadTable};
use mpistat_record::model::{hist_bucket, HIST_BUCKETS};
use std::ffi::{c_int, c_void};
use std::mem::transmute;
use std::sync::atomic::{
    AtomicI32, AtomicI64, AtomicPtr, AtomicU64, AtomicUsize, Ordering::Relaxed,
};

pub use crate::family::{IN_PLACE, PROC_NULL, STATUS_IGNORE};
/// `MPI_ROOT`: the root of a rooted collective on an intercommunicator passes it.
const ROOT: c_int = crate::ffi::MPI_ROOT as c_int;
/// Peer value for collectives without a single peer: no rank and no special rank of any family
/// (MPICH's `MPI_PROC_NULL` is -1, `MPI_ANY_SOURCE` -2, `MPI_ROOT` -3; Open MPI's -2, -1, -4).
pub const NO_PEER: c_int = c_int::MIN;

/// The data arguments of one call (copied: trace mode reads them too). What they come to is
/// "what is sent": the blocks the call's send arguments name, for every destination its
/// routine's [`Reach`] gives (docs/counting.md); a receive counts what arrived.
#[derive(Clone, Copy)]
pub enum Traffic {
    /// Nothing moved (or nothing we count).
    None,
    /// A block of `count` elements of `datatype`, to or from `peer` (nothing when `peer` is
    /// `MPI_PROC_NULL`) or, for a collective, to each destination of its routine's [`Reach`]
    /// (`peer`: the root of a rooted collective, else [`NO_PEER`]). A negative `count` is
    /// [`in_place`]'s: `!count` elements of a call given `MPI_IN_PLACE`, whose own block stays
    /// where it is.
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
    /// One block of `counts[i]` elements of `datatype` per destination `i` of the routine's
    /// [`Reach`] (every member of `comm`, of its remote group, or every out-neighbour), e.g.
    /// `MPI_Alltoallv`'s `sendcounts`; `peer` as for [`Traffic::Elements`]. `in_place`: the call
    /// was given `MPI_IN_PLACE`, and its own block is not sent.
    PerRank {
        counts: Counts,
        datatype: MPI_Datatype,
        peer: c_int,
        in_place: bool,
    },
    /// As [`Traffic::PerRank`] with a datatype per destination (`MPI_Alltoallw`).
    PerRankTyped {
        counts: Counts,
        datatypes: *const MPI_Datatype,
        in_place: bool,
    },
    /// `MPI_Allgatherv` given `MPI_IN_PLACE`: its own block, `counts[rank]` elements of
    /// `datatype`, to every other member.
    OwnBlock {
        counts: Counts,
        datatype: MPI_Datatype,
    },
}

/// The count [`Traffic::Elements`] holds for `count` elements of a call given `MPI_IN_PLACE`
/// (negative, as no count MPI accepts is): the wrappers pass it in the same register, and a
/// routine's memo keeps in-place calls apart from the others.
#[inline(always)]
pub fn in_place(count: MPI_Count) -> MPI_Count {
    // Marked the rarer form: the wrappers then branch on `MPI_IN_PLACE` instead of choosing the
    // count with `sete`, `neg` and `xor` on every call (bench/instructions.sh).
    std::hint::cold_path();
    // An empty `asm!` that may read memory: a steady copy's in-place form, which begins here,
    // reads its memo after it, so the other form's first read of the memo is not hoisted
    // above the choice of form into both (1 a steady call). No instruction.
    // SAFETY: an empty asm: no instruction, no effect.
    unsafe { std::arch::asm!("", options(nostack, preserves_flags)) };
    !count
}

/// [`Traffic::Elements`]'s count as elements and whether the call was given `MPI_IN_PLACE`.
fn block_count(count: MPI_Count) -> (MPI_Count, bool) {
    if count < 0 {
        (!count, true)
    } else {
        (count, false)
    }
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
    crate::threads::forget_world_memos();
    // Tested here, not only in it: the end of `MPI_Init` forgets the memos with nothing held,
    // and calling `stash_held` (cold, in `.text`) mapped a chunk into its peak.
    if held_any() {
        stash_held();
    }
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

/// Size in bytes of one element of `datatype` (0 if MPI cannot say): from the handle where the
/// family encodes it there, else from the real `MPI_Type_size`.
fn type_size(datatype: MPI_Datatype) -> u64 {
    if let Some(size) =
        <crate::family::Built as crate::family::Family>::encoded_type_size(datatype.key())
    {
        return size;
    }
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

/// The group a collective on `comm` sends to: its size (of the remote group for an
/// intercommunicator) and whether `comm` is one.
struct Group {
    size: u64,
    inter: bool,
}

#[link_section = ".text.hot.mpistat"]
fn group_of(comm: MPI_Comm) -> Group {
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
            n = 0;
        }
    }
    Group {
        size: n.max(0) as u64,
        inter: inter != 0,
    }
}

/// This rank in `comm` (-1 if MPI cannot say).
#[link_section = ".text.hot.mpistat"]
fn rank_in(comm: MPI_Comm) -> c_int {
    let mut rank: c_int = -1;
    // SAFETY: as in `group_of`.
    if unsafe { transmute::<*mut c_void, CommIntFn>(COMM_RANK.get())(comm, &mut rank) } != 0 {
        return -1;
    }
    rank
}

/// The blocks a collective with `reach` on `comm` (root `root`; `in_place`: given
/// `MPI_IN_PLACE`) sends: entries `0..len` of its per-destination arguments, but `own` (its
/// own block, which stays where it is) and, for neighbourhood collectives, the slots whose
/// neighbour is `MPI_PROC_NULL`. A rank that sends nothing has `len` 0: its send arguments
/// may be garbage and are never read.
struct Blocks {
    len: usize,
    own: Option<usize>,
    /// Per slot, whether the neighbour is a process (neighbourhood collectives only).
    sent_to: Option<Vec<bool>>,
}

impl Blocks {
    fn first(len: u64, own: Option<c_int>) -> Blocks {
        Blocks {
            len: len as usize,
            own: own.and_then(|r| usize::try_from(r).ok()),
            sent_to: None,
        }
    }

    fn none() -> Blocks {
        Blocks::first(0, None)
    }

    /// Whether block `i` of `0..len` is sent.
    fn sent(&self, i: usize) -> bool {
        self.own != Some(i)
            && self
                .sent_to
                .as_ref()
                .is_none_or(|s| s.get(i) == Some(&true))
    }

    /// How many blocks are sent.
    fn count(&self) -> u64 {
        (0..self.len).filter(|&i| self.sent(i)).count() as u64
    }
}

/// [`Blocks`] of a call of a routine with `reach` on `comm`. Asks MPI (sizes, this rank, the
/// topology) only as far as `reach` needs.
#[link_section = ".text.hot.mpistat"]
fn blocks(reach: Reach, comm: MPI_Comm, root: c_int, in_place: bool) -> Blocks {
    // With MPI_IN_PLACE a rank's own block stays in its buffer.
    let own = |rank: c_int| in_place.then_some(rank);
    match reach {
        Reach::Once => Blocks::first(1, None),
        Reach::All => {
            let group = group_of(comm);
            let me = if in_place { rank_in(comm) } else { -1 };
            Blocks::first(group.size, own(me))
        }
        // Only a participant of an intercommunicator's other group passes a root >= 0 there, as
        // every rank of an intracommunicator does; only the root may pass MPI_IN_PLACE.
        Reach::Root => Blocks::first(u64::from(root >= 0 && !in_place), None),
        Reach::AllFromRoot => {
            if root == ROOT {
                return Blocks::first(group_of(comm).size, None);
            }
            if root < 0 {
                return Blocks::none();
            }
            let group = group_of(comm);
            if group.inter || rank_in(comm) != root {
                return Blocks::none();
            }
            Blocks::first(group.size, own(root))
        }
        Reach::SelfAndHigher | Reach::Higher => {
            let (size, me) = (group_of(comm).size, rank_in(comm));
            let Ok(me) = u64::try_from(me) else {
                return Blocks::none();
            };
            // Blocks me..size, as the slots of an array of that many, less its own block.
            let others = in_place || reach == Reach::Higher;
            Blocks::first(size.saturating_sub(me), others.then_some(0))
        }
        Reach::Neighbours => neighbour_blocks(comm),
    }
}

/// [`blocks`] of a neighbourhood collective: its topology's out-neighbours.
#[cold]
#[inline(never)]
fn neighbour_blocks(comm: MPI_Comm) -> Blocks {
    match crate::mpi::out_neighbours(comm) {
        Ok(Some(slots)) => Blocks {
            len: slots.len(),
            own: None,
            sent_to: Some(slots),
        },
        _ => Blocks::none(),
    }
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

    /// `self` `times` over.
    fn times(self, times: u64) -> Measured {
        Measured {
            count: self.count.wrapping_mul(times),
            bytes: self.bytes.wrapping_mul(times),
            sent: self.sent.wrapping_mul(times),
        }
    }
}

/// Each routine's [`Reach`], by id: a small table that the linker places with the hot code
/// (`profiler/hot.ld`), unlike the whole routine table.
static REACHES: [Reach; N_ROUTINES] = {
    let mut reaches = [Reach::Once; N_ROUTINES];
    let mut id = 0;
    while id < N_ROUTINES {
        reaches[id] = ROUTINES[id].reach;
        id += 1;
    }
    reaches
};

/// What `traffic` of a successful call of routine `id` on `comm` stands for. On the hot path
/// (from [`record`]), so placed with the hot wrappers (footprint.rs).
#[link_section = ".text.hot.mpistat"]
pub fn measure(table: &ThreadTable, id: RoutineId, traffic: Traffic, comm: MPI_Comm) -> Measured {
    let reach = REACHES.get(id).copied().unwrap_or(Reach::Once);
    match traffic {
        Traffic::None => Measured::default(),
        Traffic::Elements {
            count,
            datatype,
            peer,
        } => {
            let (count, in_place) = block_count(count);
            if reach == Reach::Once {
                return if peer == PROC_NULL {
                    Measured::of(elements(count), 0)
                } else {
                    Measured::of(elements(count), bytes_of(table, count, datatype))
                };
            }
            // The destinations first: a rank that sends nothing may pass garbage as its type.
            match blocks(reach, comm, peer, in_place).count() {
                0 => Measured::default(),
                n => Measured::of(elements(count), bytes_of(table, count, datatype)).times(n),
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
        Traffic::PerRank {
            counts,
            datatype,
            peer,
            in_place,
        } => {
            let blocks = blocks(reach, comm, peer, in_place);
            let total = per_block(counts, &blocks, |i| i);
            Measured::of(total, bytes_of(table, total as MPI_Count, datatype))
        }
        Traffic::PerRankTyped {
            counts,
            datatypes,
            in_place,
        } => measure_typed(
            table,
            counts,
            datatypes,
            &blocks(reach, comm, NO_PEER, in_place),
        ),
        Traffic::OwnBlock { counts, datatype } => {
            let group = group_of(comm);
            let own = Blocks::first(group.size, Some(rank_in(comm)));
            let Some(me) = own.own.filter(|&me| me < own.len) else {
                return Measured::default();
            };
            let block = per_block(counts, &Blocks::first(1, None), |_| me);
            Measured::of(block, bytes_of(table, block as MPI_Count, datatype)).times(own.count())
        }
    }
}

/// [`measure`] of [`Traffic::PerRankTyped`]: each block's elements times its type's size.
#[cold]
#[inline(never)]
fn measure_typed(
    table: &ThreadTable,
    counts: Counts,
    datatypes: *const MPI_Datatype,
    blocks: &Blocks,
) -> Measured {
    if datatypes.is_null() {
        return Measured::default();
    }
    let (mut total, mut bytes) = (0u64, 0u64);
    for i in (0..blocks.len).filter(|&i| blocks.sent(i)) {
        let count = per_block(counts, &Blocks::first(1, None), |_| i);
        // SAFETY: MPI requires a datatype per block of the (remote) group or neighbourhood.
        let datatype = unsafe { *datatypes.add(i) };
        total = total.wrapping_add(count);
        bytes = bytes.wrapping_add(bytes_of(table, count as MPI_Count, datatype));
    }
    Measured::of(total, bytes)
}

/// The elements of the sent blocks of `counts` (entry `at(i)` for block `i`; null counts: none).
#[inline(always)]
fn per_block(counts: Counts, blocks: &Blocks, at: impl Fn(usize) -> usize) -> u64 {
    match counts {
        // SAFETY: MPI requires one entry per block of the (remote) group or neighbourhood.
        Counts::Int(c) if !c.is_null() => {
            sum_blocks(blocks, |i| MPI_Count::from(unsafe { *c.add(at(i)) }))
        }
        // SAFETY: as above.
        Counts::Large(c) if !c.is_null() => sum_blocks(blocks, |i| unsafe { *c.add(at(i)) }),
        _ => 0,
    }
}

/// The elements `count(i)` of the sent blocks `i`.
#[inline(always)]
fn sum_blocks(blocks: &Blocks, count: impl Fn(usize) -> MPI_Count) -> u64 {
    (0..blocks.len)
        .filter(|&i| blocks.sent(i))
        .map(|i| elements(count(i)))
        .fold(0u64, u64::wrapping_add)
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

impl Memo {
    /// [`Memo::holds`] on the thread that owns the memo, the only one that writes it: its own
    /// stores are the only ones it can see, so plain reads (which the compiler folds into the
    /// compares) read what atomic ones would. The peer is compared as [`Memo::holds`] does,
    /// also where the wrapper passes [`NO_PEER`] (its memo then holds it too): a test that it
    /// is not [`NO_PEER`] folds away there but costs a variable peer (`MPI_Send`'s, a root)
    /// three instructions a call before its compare (bench/instructions.sh's `irecv_wait`).
    #[inline(always)]
    fn holds_own(
        &self,
        count: MPI_Count,
        datatype: MPI_Datatype,
        peer: c_int,
        comm: MPI_Comm,
        int_count: bool,
    ) -> bool {
        // Each compare a branch of its own, in this order ([`tested`]).
        // SAFETY: the fields are valid, aligned atomics; only this thread writes them, and
        // other threads only read them (`settled`), so these reads race with no write.
        unsafe {
            self.holds_type_and_count(count, datatype, int_count)
                && tested(*self.peer.as_ptr() == peer)
                && self.holds_comm_anywhere(comm)
        }
    }

    /// Whether the memo's communicator is `comm` and its generation the current one:
    /// [`Memo::world`] first, then [`Memo::holds_comm_own`].
    ///
    /// # Safety
    /// As in [`Memo::holds_own`].
    #[inline(always)]
    unsafe fn holds_comm_anywhere(&self, comm: MPI_Comm) -> bool {
        // SAFETY: as the caller promises.
        unsafe { comm.key_is_at(self.world.as_ptr()) || self.holds_comm_own(comm) }
    }

    /// Whether the memo's communicator is `comm` and its generation the current one: the
    /// steady tests' second try where `comm` is not the memo's [`Memo::world`] (which holds
    /// the key only while both held, see there: on `MPI_COMM_WORLD` one compare, 3
    /// instructions fewer a call, bench/instructions.sh's `irecv_wait`; elsewhere two more).
    ///
    /// # Safety
    /// As in [`Memo::holds_own`].
    #[inline(always)]
    unsafe fn holds_comm_own(&self, comm: MPI_Comm) -> bool {
        std::hint::cold_path();
        // SAFETY: as the caller promises.
        unsafe {
            tested(comm.key_is_at(self.comm.as_ptr()))
                && tested(*self.generation.as_ptr() == generation())
        }
    }

    /// [`Memo::holds_own`] for a synchronising collective without a peer, and whether `comm`
    /// is `MPI_COMM_WORLD` with supersteps kept without the lock (`superstep::steady`): one
    /// compare of `comm` with [`Memo::world`], which holds the key only while both held at the
    /// memo's store and nothing its generation guards changed since
    /// (`threads::forget_world_memos`).
    /// Three compares and branches instead of five, one of them with a load more (the
    /// generation's): 5 instructions a call (bench/instructions.sh).
    #[inline(always)]
    fn holds_on_world(
        &self,
        count: MPI_Count,
        datatype: MPI_Datatype,
        comm: MPI_Comm,
        int_count: bool,
    ) -> bool {
        // SAFETY: as in `holds_own`; `world` is written by other threads only below
        // `MPI_THREAD_MULTIPLE`, inside MPI calls that no call of this thread overlaps.
        unsafe {
            self.holds_type_and_count(count, datatype, int_count)
                && tested(comm.key_is_at(self.world.as_ptr()))
        }
    }

    /// A steady test's first two, each a branch of its own ([`tested`]): the datatype and
    /// the count.
    ///
    /// # Safety
    /// As in [`Memo::holds_own`].
    #[inline(always)]
    unsafe fn holds_type_and_count(
        &self,
        count: MPI_Count,
        datatype: MPI_Datatype,
        int_count: bool,
    ) -> bool {
        // SAFETY: as the caller promises.
        unsafe {
            tested(datatype.key_is_at(self.datatype.as_ptr()))
                && tested(self.count_is(count, int_count))
        }
    }

    /// Whether the memo's count is `count`, on the thread that owns the memo.
    ///
    /// # Safety
    /// As in [`Memo::holds_own`].
    #[inline(always)]
    unsafe fn count_is(&self, count: MPI_Count, int_count: bool) -> bool {
        // SAFETY: as the caller promises.
        unsafe {
            if int_count {
                // Only this routine's calls, all with an `int` count, store its memo's count:
                // a widened `int` (or its complement, in place), whose upper half follows from
                // its lower one. Equal lower halves are equal counts, and one compare with
                // memory, without widening the argument first.
                *crate::family::lower_half(self.count.as_ptr()) == count as i32
            } else {
                *self.count.as_ptr() == count
            }
        }
    }
}

/// `same`, as a branch of its own before anything after it is read: a steady path's tests
/// ([`Memo::holds_own`], `rt::steady`), each one compare with the value in memory and one
/// branch, taken rarely. Left alone, the compiler reads ahead and joins them with `sete`,
/// `test` and `and` (their reads need no test before them), about one instruction more a test.
/// The empty `asm!` reads nothing but is not known not to, so nothing read after it moves
/// before it; it adds no instruction.
#[inline(always)]
pub fn tested(same: bool) -> bool {
    if !same {
        std::hint::cold_path();
        return false;
    }
    // SAFETY: an empty asm: no instruction, no effect.
    unsafe { std::arch::asm!("", options(nostack, preserves_flags)) };
    true
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
/// another is measured. Also a kept receive's that completed on a steady `MPI_Wait` or
/// `MPI_Test` and was not found as its memo (`requests::front_completed`).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn record_received(
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

/// The memo of the routine whose nonblocking receive is in front of the kept requests, if it
/// held the receive's key (count, datatype, communicator, generation) at the post
/// ([`hold_if_key`]) and was not rewritten since ([`remember`], [`forget_memos`]); else
/// [`NO_MEMO`].
/// The steady completion then compares only what the status tells (source, bytes) with it
/// ([`received_as_memo`]): the key's compares are made at the post, where its arguments are in
/// registers, and the completion needs no routine's id to find the memo. Used only below
/// `MPI_THREAD_MULTIPLE` (the front's rule, `requests::front_free`).
static HELD: AtomicPtr<Memo> = AtomicPtr::new(std::ptr::addr_of!(NO_MEMO).cast_mut());

/// What [`HELD`] points at when no memo held the front's key: its peer is no status's source
/// ([`NO_PEER`]), so [`received_as_memo`] is false of it, and the steady completion needs no
/// test for "none" (a load, a test and a branch fewer; bench/instructions.sh's `irecv_wait`).
/// Nothing writes it.
static NO_MEMO: Memo = unmatched_memo();

/// What [`HELD`] points at once the memo that held the front receive's key is to change
/// ([`remember`], [`forget_memos`]): a copy of that key ([`stash_held`]), the routine in
/// [`STASHED_ID`], until [`take_held_key`] takes it. Its peer is [`NO_PEER`], as [`NO_MEMO`]'s:
/// the steady completion never takes it for a hit, and measures the receive.
static STASHED: Memo = unmatched_memo();
static STASHED_ID: AtomicUsize = AtomicUsize::new(0);

/// A memo with no key and [`NO_PEER`]: no status is received as it ([`NO_MEMO`], [`STASHED`]).
const fn unmatched_memo() -> Memo {
    Memo {
        count: AtomicI64::new(0),
        datatype: AtomicUsize::new(0),
        comm: AtomicUsize::new(0),
        world: AtomicUsize::new(0),
        peer: AtomicI32::new(NO_PEER),
        generation: AtomicU64::new(0),
        elements: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        bucket: AtomicUsize::new(0),
        on_node: AtomicU64::new(0),
        off_node: AtomicU64::new(0),
        hits: AtomicU64::new(0),
    }
}

/// At the post of a nonblocking receive of routine `id` kept in front (on the main thread, its
/// steady path): whether its memo holds the receive's key (all but the source, which its
/// status tells), tested as [`Memo::holds_own`] tests it, is what [`held`] tells, and what
/// this returns. If it does, the front keeps nothing of the key but the request
/// (`requests::stage_front`): [`take_held_key`] gives it back.
#[inline(always)]
pub fn hold_if_key(
    id: RoutineId,
    count: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> bool {
    let memo = &crate::threads::main_table().routines[id].memo;
    // SAFETY: as in `holds_own` (the main thread's table, on the main thread).
    let holds = unsafe {
        memo.holds_type_and_count(count, datatype, false) && memo.holds_comm_anywhere(comm)
    };
    if holds {
        HELD.store(std::ptr::from_ref(memo).cast_mut(), Relaxed);
        return true;
    }
    hold_none();
    false
}

/// The key of the receive whose memo [`held`] it at its post (routine, count, datatype,
/// communicator), read from that memo, which no call has rewritten since, or from its copy
/// ([`stash_held`]: [`remember`] and [`forget_memos`] make one first); [`held`] is [`NO_MEMO`]
/// after. None if it was.
#[cold]
#[inline(never)]
pub fn take_held_key() -> Option<(RoutineId, MPI_Count, MPI_Datatype, MPI_Comm)> {
    let memo = HELD.load(Relaxed);
    if !held_any() {
        return None;
    }
    hold_none();
    let id = if std::ptr::eq(memo, &STASHED) {
        STASHED_ID.load(Relaxed)
    } else {
        routine_of_held(memo)
    };
    // SAFETY: `HELD` points at `STASHED` or at a memo of the main table (static).
    let memo = unsafe { &*memo };
    Some((
        id,
        memo.count.load(Relaxed),
        MPI_Datatype::from_key(memo.datatype.load(Relaxed)),
        MPI_Comm::from_key(memo.comm.load(Relaxed)),
    ))
}

/// The routine whose memo `memo` is: one of the main table's ([`hold_if_key`]).
fn routine_of_held(memo: *const Memo) -> RoutineId {
    let routines = &crate::threads::main_table().routines;
    (memo as usize - std::ptr::from_ref(&routines[0].memo) as usize)
        / std::mem::size_of::<Routine>()
}

/// Before the memo [`HELD`] points at changes: its key (what the receive in front was posted
/// with) goes to [`STASHED`], and [`HELD`] points there.
#[cold]
#[inline(never)]
fn stash_held() {
    let memo = HELD.load(Relaxed);
    if !held_any() || std::ptr::eq(memo, &STASHED) {
        return;
    }
    STASHED_ID.store(routine_of_held(memo), Relaxed);
    // SAFETY: `HELD` points at a memo of the main table (static).
    let memo = unsafe { &*memo };
    STASHED.count.store(memo.count.load(Relaxed), Relaxed);
    STASHED.datatype.store(memo.datatype.load(Relaxed), Relaxed);
    STASHED.comm.store(memo.comm.load(Relaxed), Relaxed);
    HELD.store(std::ptr::addr_of!(STASHED).cast_mut(), Relaxed);
}

/// A receive kept in front without a memo's test (the counting copy's): [`held`] is
/// [`NO_MEMO`].
#[inline(always)]
pub fn hold_none() {
    HELD.store(std::ptr::addr_of!(NO_MEMO).cast_mut(), Relaxed);
}

/// [`HELD`]: the memo that held the key of the receive in front at its post, or [`NO_MEMO`].
#[inline(always)]
pub fn held() -> &'static Memo {
    // SAFETY: `HELD` points at `NO_MEMO` or at a memo of the main table (static).
    unsafe { &*HELD.load(Relaxed) }
}

/// Whether [`held`] is a routine's memo, not [`NO_MEMO`].
#[inline(always)]
pub fn held_any() -> bool {
    !std::ptr::eq(HELD.load(Relaxed), std::ptr::addr_of!(NO_MEMO))
}

/// Whether a completed receive, whose routine's memo held the rest of its key at the post
/// ([`hold_if_key`]; not rewritten since), adds what the memo holds: not cancelled, and its
/// status's source and bytes are the memo's.
///
/// # Safety
/// `status` was filled by the successful call that just returned; `memo` is on this thread's
/// table.
#[inline(always)]
pub unsafe fn received_as_memo(memo: &Memo, status: *const MPI_Status) -> bool {
    type Built = crate::family::Built;
    // SAFETY: as the caller promises; the memo's fields as in `holds_own`.
    unsafe {
        tested(!<Built as crate::family::Family>::status_cancelled(status))
            && tested(
                *memo.peer.as_ptr() == <Built as crate::family::Family>::status_source(status),
            )
            && tested(
                *memo.bytes.as_ptr() == <Built as crate::family::Family>::received_bytes(status),
            )
    }
}

/// One more call that came to what `memo` holds ([`add_memo`]).
#[inline(always)]
pub fn add_to_memo(memo: &Memo) {
    bump(&memo.hits, 1);
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

/// Whether a call of `routine` with `traffic` on `comm` adds what its memo holds, decided
/// before the call ([`crate::rt::steady`]): nothing moved, or its routine's last key (its
/// memo's generation still the current one: a handle freed meanwhile by another thread leaves
/// what the memo measured for the handle this call was given).
#[inline(always)]
pub fn steady(routine: &Routine, traffic: Traffic, comm: MPI_Comm, int_count: bool) -> bool {
    match traffic {
        Traffic::None => true,
        Traffic::Elements {
            count,
            datatype,
            peer,
        } => routine
            .memo
            .holds_own(count, datatype, peer, comm, int_count),
        _ => false,
    }
}

/// [`steady`] of a synchronising collective, with whether `comm` is `MPI_COMM_WORLD` with
/// supersteps kept without the lock: `Some` where its traffic has no peer ([`Memo::holds_on_world`]
/// then answers both in one compare), else `None` (a constant in each wrapper).
#[inline(always)]
pub fn steady_on_world(
    routine: &Routine,
    traffic: Traffic,
    comm: MPI_Comm,
    int_count: bool,
) -> Option<bool> {
    match traffic {
        Traffic::Elements {
            count,
            datatype,
            peer: NO_PEER,
        } => Some(
            routine
                .memo
                .holds_on_world(count, datatype, comm, int_count),
        ),
        _ => None,
    }
}

/// A successful call that [`steady`] found its routine's memo holds: what [`record`] adds then.
#[inline(always)]
pub fn add_steady(routine: &Routine) {
    add_memo(routine);
}

/// Add what a routine's memo holds: one more call of it ([`Memo::hits`]; the counters get its
/// values times the hits when the memo changes, [`settle`], or is read, [`settled`]).
#[inline(always)]
fn add_memo(routine: &Routine) {
    add_to_memo(&routine.memo);
}

/// A routine's traffic counters, in the order of [`Memo::per_call`].
#[inline(always)]
fn traffic_counters(c: &crate::threads::Counters) -> [&AtomicU64; 4] {
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
    remember(table, id, traffic, comm);
    add_memo(&table.routines[id]);
}

/// Before a call of routine `id` whose data its arguments tell before it starts (a nonblocking
/// send, spec term `request` with a send side): make the routine's memo hold what the call
/// comes to, measuring it on a miss; after the call, [`add_last`] adds it if it succeeded. The
/// measuring (MPI calls, the placement's lookups, code and data not touched for a while: 1-3 us
/// on a communicator's first send, measured) then happens before the message leaves, not
/// between its start and the program's next call, where a reply could arrive in the meantime
/// and change the order in which `MPI_Waitany` completes (issue 33, `f77/pt2pt/irsendf`).
#[inline(always)]
pub fn ahead(table: &ThreadTable, id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    if let Traffic::Elements {
        count,
        datatype,
        peer,
    } = traffic
    {
        if !table.routines[id].memo.holds(count, datatype, peer, comm) {
            remember_measured(table, id, traffic, comm);
        }
    }
}

/// [`ahead`]'s miss (one call per routine and key).
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn remember_measured(table: &ThreadTable, id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    remember(table, id, traffic, comm);
}

/// After a successful call whose memo [`ahead`] made hold what it came to: add it.
#[inline(always)]
pub fn add_last(table: &ThreadTable, id: RoutineId) {
    add_memo(&table.routines[id]);
}

/// Measure and place `traffic`, and keep what it comes to in the routine's [`Memo`] (with the
/// key if it has one), not adding it.
#[inline(always)]
fn remember(table: &ThreadTable, id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    let routine = &table.routines[id];
    let memo = &routine.memo;
    // The receive in front, if staged with this memo, keeps its key in a copy before the
    // memo changes, and tests its whole key again.
    if HELD.load(Relaxed) == std::ptr::from_ref(memo).cast_mut() {
        stash_held();
    }
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
        memo.world.store(0, Relaxed);
        memo.elements.store(0, Relaxed);
        memo.bytes.store(0, Relaxed);
        memo.sent.store(0, Relaxed);
        return;
    };
    // A size MPI could not tell (0 bytes of a non-empty count) is asked again next time; a call
    // that sends nothing (no count, no destination) is final.
    let generation = if m.bytes > 0 || m.count == 0 || empty_is_final {
        generation
    } else {
        0
    };
    memo.datatype.store(datatype, Relaxed);
    memo.count.store(count, Relaxed);
    memo.peer.store(peer, Relaxed);
    memo.comm.store(comm.key(), Relaxed);
    memo.world
        .store(world_of(table, id, comm, generation), Relaxed);
    memo.generation.store(generation, Relaxed);
    memo.elements.store(m.count, Relaxed);
    memo.bytes.store(m.bytes, Relaxed);
    memo.sent.store(m.sent, Relaxed);
    memo.bucket
        .store(hist_bucket(m.bytes).min(HIST_BUCKETS - 1), Relaxed);
    let (on, off) = placed.unwrap_or_default();
    memo.on_node.store(on, Relaxed);
    memo.off_node.store(off, Relaxed);
}

/// The [`Memo::world`] of routine `id`'s memo in `table`, stored with a key on `comm` of
/// `generation` (0: none): `comm`'s key on the main thread's table if it is `MPI_COMM_WORLD`
/// with supersteps kept without the lock (noted: `threads::forget_world_memos`), else 0.
fn world_of(table: &ThreadTable, id: RoutineId, comm: MPI_Comm, generation: u64) -> usize {
    let world = crate::threads::world_unlocked();
    if generation == 0
        || world == 0
        || comm.key() != world
        || !std::ptr::eq(table, crate::threads::main_table())
    {
        return 0;
    }
    crate::threads::note_world_memo(id);
    world
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
    let m = measure(table, id, traffic, comm);
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
        // SAFETY: all-zero bytes are a valid table (atomics only), as in `threads::new_thread_table`.
        unsafe { &*(std::alloc::alloc_zeroed(layout) as *const ThreadTable) }
    }

    #[test]
    fn no_memo_holds_no_receive() {
        // What `HELD` points at when no memo held the front's key: no status matches it, so a
        // steady wait measures the receive (any source, the null process's, any size).
        hold_none();
        assert!(!held_any());
        for source in [-2, -1, 0, 1, 7, c_int::MAX] {
            for bytes in [0, 4, 1 << 20] {
                let s = status(source, bytes);
                // SAFETY: a filled status; `NO_MEMO` is only read.
                assert!(!unsafe { received_as_memo(held(), &s) }, "{source} {bytes}");
            }
        }
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
