//! The profiler's own MPI calls (rank, size, the reduction at `MPI_Finalize`), made on the real
//! routines directly so that they are never counted and never reach a user's PMPI tool.
//!
//! Predefined handles (`MPI_COMM_WORLD`, `MPI_SUM`, ...) come from the MPI family
//! ([`crate::family`]).

use crate::ffi::{MPI_Comm, MPI_Datatype, MPI_Errhandler, MPI_Group, MPI_Info, MPI_Op};
// The real routines: the wrappers' `Next`s (one per routine, all looked up at `MPI_Init`).
use crate::family::{predefined, Handle, Predefined};
use crate::generated::wrappers::{
    NEXT_MPI_Allreduce as ALLREDUCE, NEXT_MPI_Cart_get as CART_GET,
    NEXT_MPI_Cart_shift as CART_SHIFT, NEXT_MPI_Cartdim_get as CARTDIM_GET,
    NEXT_MPI_Comm_create_group as COMM_CREATE_GROUP, NEXT_MPI_Comm_free as COMM_FREE,
    NEXT_MPI_Comm_get_attr as COMM_GET_ATTR, NEXT_MPI_Comm_get_errhandler as COMM_GET_ERRHANDLER,
    NEXT_MPI_Comm_group as COMM_GROUP, NEXT_MPI_Comm_rank as COMM_RANK,
    NEXT_MPI_Comm_set_errhandler as COMM_SET_ERRHANDLER, NEXT_MPI_Comm_size as COMM_SIZE,
    NEXT_MPI_Comm_split_type as COMM_SPLIT_TYPE, NEXT_MPI_Comm_test_inter as COMM_TEST_INTER,
    NEXT_MPI_Dist_graph_neighbors_count as DIST_GRAPH_NEIGHBORS_COUNT,
    NEXT_MPI_Errhandler_free as ERRHANDLER_FREE,
    NEXT_MPI_Graph_neighbors_count as GRAPH_NEIGHBORS_COUNT, NEXT_MPI_Group_free as GROUP_FREE,
    NEXT_MPI_Group_incl as GROUP_INCL, NEXT_MPI_Group_size as GROUP_SIZE,
    NEXT_MPI_Group_translate_ranks as GROUP_TRANSLATE_RANKS, NEXT_MPI_Iprobe as IPROBE,
    NEXT_MPI_Query_thread as QUERY_THREAD, NEXT_MPI_Recv as RECV, NEXT_MPI_Send as SEND,
    NEXT_MPI_Sendrecv as SENDRECV, NEXT_MPI_Topo_test as TOPO_TEST,
};
use std::ffi::{c_int, c_void};
use std::mem::transmute;

/// A failed MPI call of the profiler's own (the code it returned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpiError(pub c_int);

pub type MpiResult<T> = Result<T, MpiError>;

fn check(rc: c_int) -> MpiResult<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(MpiError(rc))
    }
}

pub fn comm_world() -> Option<MPI_Comm> {
    predefined(Predefined::CommWorld)
}

type CommIntFn = unsafe extern "C" fn(MPI_Comm, *mut c_int) -> c_int;
type CommCreateGroupFn = unsafe extern "C" fn(MPI_Comm, MPI_Group, c_int, *mut MPI_Comm) -> c_int;
type CommErrhandlerFn = unsafe extern "C" fn(MPI_Comm, MPI_Errhandler) -> c_int;
type CommGetErrhandlerFn = unsafe extern "C" fn(MPI_Comm, *mut MPI_Errhandler) -> c_int;
type ErrhandlerFreeFn = unsafe extern "C" fn(*mut MPI_Errhandler) -> c_int;
type CommFreeFn = unsafe extern "C" fn(*mut MPI_Comm) -> c_int;
type CommSplitTypeFn =
    unsafe extern "C" fn(MPI_Comm, c_int, c_int, MPI_Info, *mut MPI_Comm) -> c_int;
type SendrecvFn = unsafe extern "C" fn(
    *const c_void,
    c_int,
    MPI_Datatype,
    c_int,
    c_int,
    *mut c_void,
    c_int,
    MPI_Datatype,
    c_int,
    c_int,
    MPI_Comm,
    *mut crate::ffi::MPI_Status,
) -> c_int;
type AllreduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    c_int,
    MPI_Datatype,
    MPI_Op,
    MPI_Comm,
) -> c_int;
type CommGetAttrFn = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_int) -> c_int;
type QueryThreadFn = unsafe extern "C" fn(*mut c_int) -> c_int;

#[inline]
pub fn comm_rank(comm: MPI_Comm) -> MpiResult<c_int> {
    let mut r = 0;
    // SAFETY: the real routine, a communicator handle from MPI, a valid out pointer.
    check(unsafe { transmute::<*mut c_void, CommIntFn>(COMM_RANK.get())(comm, &mut r) })?;
    Ok(r)
}

#[inline]
pub fn comm_size(comm: MPI_Comm) -> MpiResult<c_int> {
    let mut n = 0;
    // SAFETY: as in comm_rank.
    check(unsafe { transmute::<*mut c_void, CommIntFn>(COMM_SIZE.get())(comm, &mut n) })?;
    Ok(n)
}

/// Whether `comm` is an intercommunicator.
pub fn comm_is_inter(comm: MPI_Comm) -> MpiResult<bool> {
    let mut flag = 0;
    // SAFETY: as in comm_rank.
    check(unsafe { transmute::<*mut c_void, CommIntFn>(COMM_TEST_INTER.get())(comm, &mut flag) })?;
    Ok(flag != 0)
}

/// The thread level MPI provides (`MPI_THREAD_*`). Inlined: it runs from `.text.init`.
#[inline(always)]
pub fn query_thread() -> MpiResult<c_int> {
    let mut level = 0;
    // SAFETY: the real routine, a valid out pointer.
    check(unsafe { transmute::<*mut c_void, QueryThreadFn>(QUERY_THREAD.get())(&mut level) })?;
    Ok(level)
}

/// This process's `MPI_APPNUM` (its application context in an MPMD launch), 0 if MPI has none.
pub fn appnum() -> u32 {
    let Some(world) = comm_world() else { return 0 };
    let mut value: *mut c_int = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: the real routine; for a predefined attribute MPI stores a pointer to the value.
    let rc = unsafe {
        transmute::<*mut c_void, CommGetAttrFn>(COMM_GET_ATTR.get())(
            world,
            crate::ffi::MPI_APPNUM as c_int,
            (&mut value as *mut *mut c_int).cast(),
            &mut flag,
        )
    };
    if rc != 0 || flag == 0 || value.is_null() {
        return 0;
    }
    // SAFETY: MPI gave a pointer to its int attribute value.
    unsafe { *value }.max(0) as u32
}

/// A communicator of our own, freed when dropped.
pub struct OwnComm(pub MPI_Comm);

/// The tag of [`OwnComm::private`]'s `MPI_Comm_create_group` (its messages are MPI's own, on
/// `MPI_COMM_WORLD`'s context for collectives, where no user message can be).
const CREATE_TAG: c_int = 0x6d73;

impl OwnComm {
    /// A communicator of every rank of `world` with a context of its own (collective), whose
    /// errors return to us: no message of the program can match ours, a failure of ours cannot
    /// abort the job.
    ///
    /// `MPI_Comm_create_group`, not `MPI_Comm_dup`: MPICH agrees on the new context id by
    /// point-to-point messages over the group instead of its own `MPI_Allreduce` (whose collective
    /// selection maps 64 kB more of `libmpich` a rank; docs/footprint.md "mpichdup"). The
    /// creating call reports its errors (MPICH's "Too many communicators" when the program
    /// used up the context ids) through `world`'s error handler, by default fatal: `world`
    /// has `MPI_ERRORS_RETURN` for the call, and its own handler back after it. `more`: how many
    /// more communicators the caller will make from it ([`OwnComm::node_local`]), which every
    /// rank must be able to make as well.
    #[link_section = ".text.finalize.mpistat"]
    pub fn private(world: MPI_Comm, more: usize) -> MpiResult<OwnComm> {
        let errors_return: MPI_Errhandler =
            predefined(Predefined::ErrorsReturn).ok_or(MpiError(-1))?;
        // SAFETY: the real routines with valid handles and out pointers; `kept` is freed once,
        // after it was put back.
        unsafe {
            let set = transmute::<*mut c_void, CommErrhandlerFn>(COMM_SET_ERRHANDLER.get());
            let mut kept = MPI_Errhandler::NONE;
            check(transmute::<*mut c_void, CommGetErrhandlerFn>(
                COMM_GET_ERRHANDLER.get(),
            )(world, &mut kept))?;
            let created = match check(set(world, errors_return)) {
                Ok(()) => every_rank_can_make(world, 1 + more).and_then(|()| Self::of_group(world)),
                Err(e) => Err(e),
            };
            let restored = check(set(world, kept));
            transmute::<*mut c_void, ErrhandlerFreeFn>(ERRHANDLER_FREE.get())(&mut kept);
            let comm = created?;
            restored?;
            check(set(comm.0, errors_return))?;
            Ok(comm)
        }
    }

    /// `MPI_Comm_create_group` of all of `world`'s group.
    #[link_section = ".text.finalize.mpistat"]
    fn of_group(world: MPI_Comm) -> MpiResult<OwnComm> {
        Self::of_ranks(world, None)
    }

    /// `MPI_Comm_create_group` of `world`'s group, or of only its rank `alone` (collective over
    /// that group: for one rank, local).
    #[link_section = ".text.finalize.mpistat"]
    fn of_ranks(world: MPI_Comm, alone: Option<c_int>) -> MpiResult<OwnComm> {
        let mut group = MPI_Group::NONE;
        let mut c = MPI_Comm::NONE;
        // SAFETY: the real routines with valid handles and out pointers; each group is freed
        // once.
        unsafe {
            let free_group = transmute::<*mut c_void, GroupFreeFn>(GROUP_FREE.get());
            check(transmute::<*mut c_void, CommGroupFn>(COMM_GROUP.get())(
                world, &mut group,
            ))?;
            if let Some(rank) = alone {
                let mut one = MPI_Group::NONE;
                let rc = transmute::<*mut c_void, GroupInclFn>(GROUP_INCL.get())(
                    group, 1, &rank, &mut one,
                );
                free_group(&mut group);
                check(rc)?;
                group = one;
            }
            let rc = transmute::<*mut c_void, CommCreateGroupFn>(COMM_CREATE_GROUP.get())(
                world, group, CREATE_TAG, &mut c,
            );
            free_group(&mut group);
            check(rc)?;
        }
        Ok(OwnComm(c))
    }

    /// The ranks of `self` that share a node with the caller (collective).
    #[inline]
    pub fn node_local(&self) -> MpiResult<OwnComm> {
        let info = predefined(Predefined::InfoNull).ok_or(MpiError(-1))?;
        let mut c = MPI_Comm::NONE;
        let shared = crate::ffi::MPI_COMM_TYPE_SHARED as c_int;
        // SAFETY: the real routine with valid handles and pointers.
        check(unsafe {
            transmute::<*mut c_void, CommSplitTypeFn>(COMM_SPLIT_TYPE.get())(
                self.0, shared, 0, info, &mut c,
            )
        })?;
        Ok(OwnComm(c))
    }
}

/// Whether every rank of `world` can make `count` communicators now (collective; `world`'s
/// errors return). Under Open MPI a rank with no context id left fails `MPI_Comm_create_group` (or
/// `MPI_Comm_split_type`) alone, before it exchanges anything: the other ranks then wait in
/// theirs for good, and the failed creation's request, progressed in the real `MPI_Finalize`,
/// crashed that rank (tests/programs/no_context_left.c, "rank0"). So each rank first makes
/// `count` of itself alone (local), holding each while it makes the next, and frees them, and
/// the ranks agree with one `MPI_Allreduce` on `world` (collectives never match the program's
/// messages) on the largest error: all of them go on, or none. Left: a rank with context ids
/// but none that every rank has free still fails alone, which takes some 65,000 communicators
/// and a pattern of frees. MPICH agrees on a context id by a mask over all the ranks, which
/// every rank then finds empty together: nothing to add there.
#[cfg(mpistat_family = "openmpi")]
#[link_section = ".text.finalize.mpistat"]
fn every_rank_can_make(world: MPI_Comm, count: usize) -> MpiResult<()> {
    let mine = comm_rank(world).and_then(|rank| {
        let mut held = Vec::with_capacity(count);
        for _ in 0..count {
            held.push(OwnComm::of_ranks(world, Some(rank))?);
        }
        Ok(())
    });
    let error = match mine {
        Ok(()) => 0,
        Err(MpiError(code)) => u64::from(code.unsigned_abs()).max(1),
    };
    match allreduce_max_on(&[error], world)?[..] {
        [0] => Ok(()),
        [worst, ..] => Err(MpiError(c_int::try_from(worst).unwrap_or(-1))),
        [] => Err(MpiError(-1)),
    }
}

#[cfg(mpistat_family = "mpich")]
#[inline(always)]
fn every_rank_can_make(_world: MPI_Comm, _count: usize) -> MpiResult<()> {
    Ok(())
}

impl Drop for OwnComm {
    fn drop(&mut self) {
        // SAFETY: a communicator we created and nobody else holds.
        unsafe { transmute::<*mut c_void, CommFreeFn>(COMM_FREE.get())(&mut self.0) };
    }
}

pub use crate::tree::{Op, Part};

/// The tag of the reductions' messages (on our own communicator, where no user message can be).
const TREE_TAG: c_int = 0x6d73;

/// Point-to-point on a communicator for [`crate::tree`] (in `.text.finalize` with it).
struct OnComm(MPI_Comm);

impl crate::tree::Link for OnComm {
    type Error = MpiError;
    #[link_section = ".text.finalize.mpistat"]
    fn send(&mut self, to: usize, data: &[u64]) -> MpiResult<()> {
        send_u64s(data, to as c_int, TREE_TAG, self.0)
    }
    #[link_section = ".text.finalize.mpistat"]
    fn recv(&mut self, from: usize, into: &mut [u64]) -> MpiResult<()> {
        recv_u64s_into(into, from as c_int, TREE_TAG, self.0)
    }
    #[link_section = ".text.finalize.mpistat"]
    fn exchange(&mut self, peer: usize, data: &[u64], into: &mut [u64]) -> MpiResult<()> {
        let (datatype, send_len) = words(data.len())?;
        let (_, recv_len) = words(into.len())?;
        // SAFETY: the real routine; `data` and `into` hold their lengths' 64-bit words.
        check(unsafe {
            transmute::<*mut c_void, SendrecvFn>(SENDRECV.get())(
                data.as_ptr().cast(),
                send_len,
                datatype,
                peer as c_int,
                TREE_TAG,
                into.as_mut_ptr().cast(),
                recv_len,
                datatype,
                peer as c_int,
                TREE_TAG,
                self.0,
                crate::family::STATUS_IGNORE,
            )
        })
    }
}

/// Words a message of the finalize's reductions carries at most: 8 KiB, which MPICH over UCX's
/// shared memory sends eagerly (measured: no `ucp_rndv_*` code mapped), where its 24 kB
/// superstep vectors took the rendezvous path (docs/footprint.md, "finpieces"). The limit is
/// the MPI library's and its transport's; Open MPI's shared memory (vader) goes eager only to
/// 4 KiB, and its finalize steps showed no cost of the larger messages.
const PIECE_WORDS: usize = 1024;

/// The reductions' link over `comm`, in pieces of [`PIECE_WORDS`].
#[link_section = ".text.finalize.mpistat"]
fn pieces(comm: &OwnComm) -> crate::tree::InPieces<OnComm> {
    crate::tree::InPieces::new(OnComm(comm.0), PIECE_WORDS)
}

/// The caller's rank and the size of `comm`.
#[link_section = ".text.finalize.mpistat"]
fn rank_and_size(comm: MPI_Comm) -> MpiResult<(usize, usize)> {
    let rank = usize::try_from(comm_rank(comm)?).map_err(|_| MpiError(-1))?;
    let size = usize::try_from(comm_size(comm)?).map_err(|_| MpiError(-1))?;
    Ok((rank, size))
}

/// Reduce several vectors at once to rank 0 of `comm` (collective; one pass of a binomial tree
/// of point-to-point messages, [`crate::tree::to_root`]), each with its operation; the results
/// in the same order on rank 0, `None` elsewhere.
#[link_section = ".text.finalize.mpistat"]
pub fn reduce_each_to_root(
    vectors: &[(Op, &[u64])],
    comm: &OwnComm,
) -> MpiResult<Option<Vec<Vec<u64>>>> {
    let (rank, size) = rank_and_size(comm.0)?;
    let parts: Vec<Part> = vectors
        .iter()
        .map(|(op, v)| Part {
            op: *op,
            len: v.len(),
        })
        .collect();
    let mut data: Vec<u64> = vectors
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .collect();
    if !crate::tree::to_root(&mut pieces(comm), rank, size, &parts, &mut data)? {
        return Ok(None);
    }
    let mut rest = &data[..];
    Ok(Some(
        parts
            .iter()
            .map(|p| {
                let (this, after) = rest.split_at(p.len);
                rest = after;
                this.to_vec()
            })
            .collect(),
    ))
}

/// The reduction of `data` to rank 0 of `comm` (collective): the result on rank 0, `None`
/// elsewhere.
#[link_section = ".text.finalize.mpistat"]
pub fn reduce_to_root(data: &[u64], op: Op, comm: &OwnComm) -> MpiResult<Option<Vec<u64>>> {
    Ok(reduce_each_to_root(&[(op, data)], comm)?.and_then(|mut v| v.pop()))
}

/// The reduction of `data` over `comm` (collective): the result on every rank (recursive
/// doubling of point-to-point messages, [`crate::tree::to_all`]).
#[link_section = ".text.finalize.mpistat"]
pub fn allreduce(data: &[u64], op: Op, comm: &OwnComm) -> MpiResult<Vec<u64>> {
    let (rank, size) = rank_and_size(comm.0)?;
    let mut out = data.to_vec();
    let parts = [Part {
        op,
        len: data.len(),
    }];
    crate::tree::to_all(&mut pieces(comm), rank, size, &parts, &mut out)?;
    Ok(out)
}

/// MPI's `MPI_Allreduce` with `MPI_MAX` of `data` on any communicator (`MPI_COMM_WORLD` inside
/// `MPI_Init`, where the user cannot have a collective in progress: trace mode's agreement; and
/// `MPI_Finalize`'s on making its communicator). Inlined: each caller's copy stays in that
/// caller's section (`.text.init`, `.text.finalize`).
#[inline(always)]
pub fn allreduce_max_on(data: &[u64], comm: MPI_Comm) -> MpiResult<Vec<u64>> {
    let (datatype, len) = words(data.len())?;
    let mpi_op: MPI_Op = predefined(Predefined::OpMax).ok_or(MpiError(-1))?;
    let mut out = vec![0u64; data.len()];
    // SAFETY: the real routine; `data` and `out` hold `len` 64-bit words.
    check(unsafe {
        transmute::<*mut c_void, AllreduceFn>(ALLREDUCE.get())(
            data.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            len,
            datatype,
            mpi_op,
            comm,
        )
    })?;
    Ok(out)
}

type SendFn =
    unsafe extern "C" fn(*const c_void, c_int, MPI_Datatype, c_int, c_int, MPI_Comm) -> c_int;
type RecvFn = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    MPI_Datatype,
    c_int,
    c_int,
    MPI_Comm,
    *mut crate::ffi::MPI_Status,
) -> c_int;
type IprobeFn =
    unsafe extern "C" fn(c_int, c_int, MPI_Comm, *mut c_int, *mut crate::ffi::MPI_Status) -> c_int;
type CommGroupFn = unsafe extern "C" fn(MPI_Comm, *mut crate::ffi::MPI_Group) -> c_int;
type GroupSizeFn = unsafe extern "C" fn(crate::ffi::MPI_Group, *mut c_int) -> c_int;
type GroupTranslateFn = unsafe extern "C" fn(
    crate::ffi::MPI_Group,
    c_int,
    *const c_int,
    crate::ffi::MPI_Group,
    *mut c_int,
) -> c_int;
type GroupFreeFn = unsafe extern "C" fn(*mut crate::ffi::MPI_Group) -> c_int;
type GroupInclFn = unsafe extern "C" fn(
    crate::ffi::MPI_Group,
    c_int,
    *const c_int,
    *mut crate::ffi::MPI_Group,
) -> c_int;
type CartGetFn = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int;
type CartShiftFn = unsafe extern "C" fn(MPI_Comm, c_int, c_int, *mut c_int, *mut c_int) -> c_int;
type GraphNeighborsCountFn = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_int) -> c_int;
type DistGraphNeighborsCountFn =
    unsafe extern "C" fn(MPI_Comm, *mut c_int, *mut c_int, *mut c_int) -> c_int;

/// `MPI_UINT64_T` and `n` as an MPI count.
#[inline]
fn words(n: usize) -> MpiResult<(MPI_Datatype, c_int)> {
    let datatype: MPI_Datatype = predefined(Predefined::Uint64).ok_or(MpiError(-1))?;
    Ok((datatype, c_int::try_from(n).map_err(|_| MpiError(-1))?))
}

/// `MPI_Send` of `data` (64-bit words) to `dest` of `comm`. With the init code: trace mode's clock
/// samples at the end of `MPI_Init` send with it (in `.text` it mapped a chunk into its peak).
#[link_section = ".text.init.mpistat"]
pub fn send_u64s(data: &[u64], dest: c_int, tag: c_int, comm: MPI_Comm) -> MpiResult<()> {
    let (datatype, len) = words(data.len())?;
    // SAFETY: the real routine; `data` holds `len` 64-bit words.
    check(unsafe {
        transmute::<*mut c_void, SendFn>(SEND.get())(
            data.as_ptr().cast(),
            len,
            datatype,
            dest,
            tag,
            comm,
        )
    })
}

/// `MPI_Recv` of `N` 64-bit words from `source` of `comm`.
pub fn recv_u64s<const N: usize>(source: c_int, tag: c_int, comm: MPI_Comm) -> MpiResult<[u64; N]> {
    let mut out = [0u64; N];
    recv_u64s_into(&mut out, source, tag, comm)?;
    Ok(out)
}

/// `MPI_Recv` of `into.len()` 64-bit words from `source` of `comm`.
pub fn recv_u64s_into(
    into: &mut [u64],
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> MpiResult<()> {
    let (datatype, len) = words(into.len())?;
    // SAFETY: the real routine; `into` has room for `len` words; the status is ignored.
    check(unsafe {
        transmute::<*mut c_void, RecvFn>(RECV.get())(
            into.as_mut_ptr().cast(),
            len,
            datatype,
            source,
            tag,
            comm,
            crate::family::STATUS_IGNORE,
        )
    })
}

/// [`recv_u64s`] that waits for the message by probing and yielding the processor between
/// probes (`MPI_Iprobe`, `sched_yield`) instead of in `MPI_Recv`. For the clock ping-pongs:
/// MPICH's `MPI_Recv` polls without ever yielding (its `MPIR_CVAR_POLLS_BEFORE_YIELD` does not
/// apply to ch4's progress loop), so on an oversubscribed node the ranks waiting for their turn
/// keep the cores, the two ranks of an exchange run only at scheduler ticks (round trips of
/// 4-16 ms at HZ=250, none of 16 below 4 ms), and half a round trip is the offset's error.
/// In `.text.init` with the clock measurement that uses it at the end of `MPI_Init`
/// (footprint.rs: elsewhere in `.text` it mapped one more chunk of code during `MPI_Init`).
#[inline(never)]
#[link_section = ".text.init.mpistat"]
pub fn recv_u64s_yielding<const N: usize>(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> MpiResult<[u64; N]> {
    loop {
        let mut flag: c_int = 0;
        // SAFETY: the real routine; MPI writes `flag`; the status is ignored.
        check(unsafe {
            transmute::<*mut c_void, IprobeFn>(IPROBE.get())(
                source,
                tag,
                comm,
                &mut flag,
                crate::family::STATUS_IGNORE,
            )
        })?;
        if flag != 0 {
            return recv_u64s(source, tag, comm);
        }
        // SAFETY: no arguments; it cannot fail on Linux.
        unsafe { libc::sched_yield() };
    }
}

/// The members of `comm` (its local group) as ranks of `MPI_COMM_WORLD`, in `comm`'s rank order.
pub fn world_ranks_of(comm: MPI_Comm) -> MpiResult<Vec<u32>> {
    let world = comm_world().ok_or(MpiError(-1))?;
    // SAFETY: real routines on valid handles; every group we create is freed.
    unsafe {
        let mut group = crate::ffi::MPI_Group::NONE;
        let mut world_group = crate::ffi::MPI_Group::NONE;
        check(transmute::<*mut c_void, CommGroupFn>(COMM_GROUP.get())(
            comm, &mut group,
        ))?;
        let result = (|| {
            check(transmute::<*mut c_void, CommGroupFn>(COMM_GROUP.get())(
                world,
                &mut world_group,
            ))?;
            let mut n: c_int = 0;
            check(transmute::<*mut c_void, GroupSizeFn>(GROUP_SIZE.get())(
                group, &mut n,
            ))?;
            let ranks: Vec<c_int> = (0..n).collect();
            let mut out = vec![0 as c_int; n.max(0) as usize];
            check(transmute::<*mut c_void, GroupTranslateFn>(
                GROUP_TRANSLATE_RANKS.get(),
            )(
                group, n, ranks.as_ptr(), world_group, out.as_mut_ptr()
            ))?;
            Ok(out.into_iter().map(|r| r.max(0) as u32).collect())
        })();
        let free = transmute::<*mut c_void, GroupFreeFn>(GROUP_FREE.get());
        free(&mut group);
        if !world_group.is_none() {
            free(&mut world_group);
        }
        result
    }
}

/// The slots of the out-neighbours of `comm`'s topology in the order of its neighbourhood
/// collectives' send blocks, each `true` if MPI sends there (a Cartesian topology's neighbour
/// beyond a non-periodic edge is `MPI_PROC_NULL`: its block is not sent); `None` without a
/// topology.
pub fn out_neighbours(comm: MPI_Comm) -> MpiResult<Option<Vec<bool>>> {
    let mut kind: c_int = 0;
    // SAFETY: real routines on a valid communicator with out pointers of the right sizes.
    unsafe {
        check(transmute::<*mut c_void, CommIntFn>(TOPO_TEST.get())(
            comm, &mut kind,
        ))?;
        if kind == crate::ffi::MPI_CART as c_int {
            let mut ndims: c_int = 0;
            check(transmute::<*mut c_void, CommIntFn>(CARTDIM_GET.get())(
                comm, &mut ndims,
            ))?;
            // Per dimension, the neighbour in the negative direction, then the positive one.
            let mut slots = Vec::with_capacity(2 * ndims.max(0) as usize);
            for dimension in 0..ndims {
                let (mut below, mut above) = (0, 0);
                check(transmute::<*mut c_void, CartShiftFn>(CART_SHIFT.get())(
                    comm, dimension, 1, &mut below, &mut above,
                ))?;
                slots.extend([below, above].map(|r| r != crate::family::PROC_NULL));
            }
            Ok(Some(slots))
        } else if kind == crate::ffi::MPI_GRAPH as c_int {
            let rank = comm_rank(comm)?;
            let mut n: c_int = 0;
            check(transmute::<*mut c_void, GraphNeighborsCountFn>(
                GRAPH_NEIGHBORS_COUNT.get(),
            )(comm, rank, &mut n))?;
            Ok(Some(vec![true; n.max(0) as usize]))
        } else if kind == crate::ffi::MPI_DIST_GRAPH as c_int {
            let (mut sources, mut destinations, mut weighted) = (0, 0, 0);
            check(transmute::<*mut c_void, DistGraphNeighborsCountFn>(
                DIST_GRAPH_NEIGHBORS_COUNT.get(),
            )(
                comm, &mut sources, &mut destinations, &mut weighted
            ))?;
            Ok(Some(vec![true; destinations.max(0) as usize]))
        } else {
            Ok(None)
        }
    }
}

/// If `comm` has a Cartesian topology: its dimensions and the caller's coordinates.
pub fn cartesian_of(comm: MPI_Comm) -> MpiResult<Option<(Vec<u32>, Vec<u32>)>> {
    let mut kind: c_int = 0;
    // SAFETY: real routines on a valid communicator with out pointers of the right sizes.
    unsafe {
        check(transmute::<*mut c_void, CommIntFn>(TOPO_TEST.get())(
            comm, &mut kind,
        ))?;
        if kind != crate::ffi::MPI_CART as c_int {
            return Ok(None);
        }
        let mut ndims: c_int = 0;
        check(transmute::<*mut c_void, CommIntFn>(CARTDIM_GET.get())(
            comm, &mut ndims,
        ))?;
        let n = ndims.max(0) as usize;
        let (mut dims, mut periods, mut coords) = (vec![0; n], vec![0; n], vec![0; n]);
        check(transmute::<*mut c_void, CartGetFn>(CART_GET.get())(
            comm,
            ndims,
            dims.as_mut_ptr(),
            periods.as_mut_ptr(),
            coords.as_mut_ptr(),
        ))?;
        let u = |v: Vec<c_int>| v.into_iter().map(|x| x.max(0) as u32).collect();
        Ok(Some((u(dims), u(coords))))
    }
}
