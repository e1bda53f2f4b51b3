//! Whether a call's bytes stayed on this node or crossed nodes.
//!
//! At `MPI_Init` the rank learns which ranks of `MPI_COMM_WORLD` share its node from its process
//! manager ([`crate::peers::with_local_peers`], a local look-up: no communication, so nothing extra
//! when not every rank is profiled). Then, out of line after a successful call's end time
//! ([`crate::traffic::record`]):
//! - point-to-point data goes by its peer's node: the peer argument of a send, the status's
//!   source of a completed receive, each side of a `MPI_Sendrecv` on its own; a peer of another
//!   communicator than `MPI_COMM_WORLD` is translated to its world rank once per communicator
//!   (cached, thread-local last one first; forgotten at `MPI_Comm_free`/`MPI_Comm_disconnect`,
//!   whose handles MPI reuses);
//! - a collective's data goes by whether its communicator spans nodes (all of it off-node if
//!   any member is elsewhere);
//! - the rest (a receive posted for any source, intercommunicators, one-sided and file I/O) is
//!   not placed. Without the process manager's answer nothing is placed and the record says so.

use crate::family::Handle;
use crate::ffi::MPI_Comm;
use crate::generated::routines::{N_ROUTINES, ROUTINES};
use crate::spec::Class;
use crate::threads::RoutineId;
use crate::traffic::Traffic;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{
    AtomicPtr, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex};

/// Each routine's class, by id: a small table that the linker places with the hot code
/// (`profiler/hot.ld`), unlike the whole routine table.
static CLASSES: [Class; N_ROUTINES] = {
    let mut classes = [Class::Misc; N_ROUTINES];
    let mut id = 0;
    while id < N_ROUTINES {
        classes[id] = ROUTINES[id].class;
        id += 1;
    }
    classes
};

/// Which ranks of `MPI_COMM_WORLD` share this rank's node. Made once, right after the real
/// `MPI_Init`, and never freed.
struct NodeMap {
    world: usize,
    /// A bit per world rank.
    local: &'static [u64],
    size: u32,
    here: u32,
}

impl NodeMap {
    #[link_section = ".text.hot.mpistat"]
    fn is_local(&self, world_rank: u32) -> Option<bool> {
        (world_rank < self.size)
            .then(|| self.local[(world_rank / 64) as usize] & (1 << (world_rank % 64)) != 0)
    }
}

/// The [`NodeMap`], once learned (null before). A pointer set once rather than a `OnceLock`:
/// [`learn`] runs right after the real `MPI_Init`, where every chunk of code run adds to its
/// peak resident set (footprint.rs), and `OnceLock`'s and the allocator's code are elsewhere.
static MAP: AtomicPtr<NodeMap> = AtomicPtr::new(std::ptr::null_mut());

#[inline(always)]
fn map() -> Option<&'static NodeMap> {
    // SAFETY: set once to a leaked, fully written `NodeMap` (Release in `learn`), never freed.
    unsafe { MAP.load(Acquire).as_ref() }
}

/// At `MPI_Init`: learn this rank's node mates (if the process manager says, and they include
/// this rank). Allocation-free but for `calloc`, and in `.text.init` (footprint.rs).
#[link_section = ".text.init.mpistat"]
pub fn learn(world: MPI_Comm, size: u32, rank: u32) {
    if map().is_some() {
        return;
    }
    let Some(Some(map)) = crate::peers::with_local_peers(|list| node_map(list, world, size, rank))
    else {
        return;
    };
    MAP.store(map, Release);
    // Answers kept before (`traffic::Memo`: placed as unknown) are stale now.
    FREED.fetch_add(1, Relaxed);
    crate::traffic::forget_memos();
}

/// A [`NodeMap`] of `size` world ranks (this one `rank`) from PMIx's list of the ranks on this
/// node (`"0,1,5"`), or `None` if the list is malformed, names a rank outside the world, or
/// lacks this rank.
#[link_section = ".text.init.mpistat"]
fn node_map(list: &[u8], world: MPI_Comm, size: u32, rank: u32) -> Option<*mut NodeMap> {
    let words = size.div_ceil(64).max(1) as usize;
    let mut here = 0u32;
    let bits = Words::zeroed(words)?;
    let mut number: Option<u32> = None;
    // One pass over the bytes, a comma (or the end) closing each number; blanks are ignored.
    // The closing comma as a value (`once`), not a one-byte constant: LLVM put that with the
    // crate's anonymous constants, in `.text.finalize`'s first chunk, which this, at the end of
    // `MPI_Init`, then mapped into its peak.
    for b in list.iter().copied().chain(std::iter::once(b',')) {
        match b {
            b'0'..=b'9' => {
                let digit = u32::from(b - b'0');
                number = Some(number.unwrap_or(0).checked_mul(10)?.checked_add(digit)?);
            }
            b',' => {
                let p = number.take()?;
                if p >= size {
                    return None;
                }
                let word = &mut bits.0[(p / 64) as usize];
                if *word & (1 << (p % 64)) == 0 {
                    here += 1;
                }
                *word |= 1 << (p % 64);
            }
            b' ' | b'\t' => {}
            _ => return None,
        }
    }
    let local = bits.leak();
    let map = NodeMap {
        world: world.key(),
        local,
        size,
        here,
    };
    if map.is_local(rank) != Some(true) {
        return None;
    }
    // SAFETY: calloc of one NodeMap; written at once, never freed (the map lives as long as
    // the process).
    unsafe {
        let p = libc::calloc(1, std::mem::size_of::<NodeMap>()) as *mut NodeMap;
        if p.is_null() {
            return None;
        }
        p.write(map);
        Some(p)
    }
}

/// Zeroed words from `calloc`, freed unless leaked.
struct Words(&'static mut [u64]);

impl Words {
    #[link_section = ".text.init.mpistat"]
    fn zeroed(n: usize) -> Option<Words> {
        // SAFETY: calloc of n zeroed u64s (alignment 8 or more), owned by the `Words`.
        unsafe {
            let p = libc::calloc(n, std::mem::size_of::<u64>()) as *mut u64;
            (!p.is_null()).then(|| Words(std::slice::from_raw_parts_mut(p, n)))
        }
    }

    #[link_section = ".text.init.mpistat"]
    fn leak(self) -> &'static [u64] {
        let words = std::mem::ManuallyDrop::new(self);
        // SAFETY: the words of a `Words` that is never dropped, so never freed.
        unsafe { std::slice::from_raw_parts(words.0.as_ptr(), words.0.len()) }
    }
}

impl Drop for Words {
    #[link_section = ".text.init.mpistat"]
    fn drop(&mut self) {
        // SAFETY: the pointer came from calloc in `zeroed`, and this `Words` owns it.
        unsafe { libc::free(self.0.as_mut_ptr().cast()) }
    }
}

/// Whether this rank knows which ranks share its node.
#[inline]
pub fn known() -> bool {
    map().is_some()
}

/// Whether world rank `world_rank` runs on this node, if known.
#[inline]
pub fn shares_node(world_rank: u32) -> Option<bool> {
    map()?.is_local(world_rank)
}

/// Ranks of the job on this node, if known.
pub fn ranks_here() -> Option<u32> {
    map().map(|m| m.here)
}

/// Where the members of a communicator are, seen from this rank.
struct Members {
    /// Per rank of the communicator: on this node. Empty if unknown (an intercommunicator).
    local: Vec<bool>,
    /// Some member is on another node.
    spans: bool,
}

/// Bumped when a communicator is freed: its handle may come back as another communicator.
static FREED: AtomicU64 = AtomicU64::new(0);
static CACHE: Mutex<Option<HashMap<usize, Arc<Members>>>> = Mutex::new(None);

thread_local! {
    /// This thread's last communicator: (handle, [`FREED`] when looked up, members).
    static LAST: RefCell<Option<(usize, u64, Arc<Members>)>> = const { RefCell::new(None) };
}

/// How many times communicators were freed (or the node map was learned) so far: a handle seen
/// before and this value unchanged is the same communicator with the same placement (caches
/// keyed by handle check it, as [`crate::superstep`]; `traffic::Memo` has a generation of its
/// own, bumped with it).
#[inline(always)]
pub fn comms_freed() -> u64 {
    FREED.load(Relaxed)
}

/// After `MPI_Comm_free` or `MPI_Comm_disconnect`: forget every communicator's members.
pub fn forget_comms() {
    FREED.fetch_add(1, Relaxed);
    crate::traffic::forget_memos();
    if let Some(cache) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        cache.clear();
    }
}

/// After a successful call that made a communicator at `newcomm` (`MPI_COMM_NULL` where this
/// rank is not in it): look its members up now, inside the call that made it, rather than in
/// the first call that uses it. That first call may be a nonblocking send, and a lookup there
/// (MPI group calls, allocations, code mapped back in: 3-50 us measured) between its return
/// and the program's next call let a reply arrive first, so that an `MPI_Waitany` completed
/// the receive before the send every time where the bare program completed the send first
/// (MPICH's `f77/pt2pt/irsendf`, issue 33).
#[inline(never)]
pub fn made(newcomm: *const MPI_Comm) {
    let Some(map) = map() else { return };
    if newcomm.is_null() {
        return;
    }
    // SAFETY: the successful call wrote the new handle there.
    let comm = unsafe { *newcomm };
    if comm.is_none() || comm.key() == map.world || Some(comm.key()) == comm_null() {
        return;
    }
    with_members(map, comm, |_| ());
}

/// `MPI_COMM_NULL`'s key, looked up once.
fn comm_null() -> Option<usize> {
    static NULL: AtomicUsize = AtomicUsize::new(0);
    match NULL.load(Relaxed) {
        0 => {
            let key = crate::family::predefined::<MPI_Comm>(crate::family::Predefined::CommNull)
                .map(Handle::key)?;
            NULL.store(key, Relaxed);
            Some(key)
        }
        key => Some(key),
    }
}

/// `f` of the members of `comm` (not `MPI_COMM_WORLD`).
#[link_section = ".text.hot.mpistat"]
fn with_members<R>(map: &NodeMap, comm: MPI_Comm, f: impl FnOnce(&Members) -> R) -> Option<R> {
    let freed = FREED.load(Relaxed);
    LAST.try_with(|last| {
        let mut last = last.try_borrow_mut().ok()?;
        match last.as_ref() {
            Some((c, at, members)) if *c == comm.key() && *at == freed => Some(f(members)),
            _ => {
                let members = look_up(map, comm, freed);
                let out = f(&members);
                *last = Some((comm.key(), freed, members));
                Some(out)
            }
        }
    })
    .ok()
    .flatten()
}

#[cold]
#[inline(never)]
fn look_up(map: &NodeMap, comm: MPI_Comm, freed: u64) -> Arc<Members> {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = cache.as_ref().and_then(|c| c.get(&(comm.key()))) {
        return m.clone();
    }
    let members = Arc::new(members_of(map, comm));
    // Not kept if a communicator was freed meanwhile (it may have been this one).
    if FREED.load(Relaxed) == freed {
        cache
            .get_or_insert_with(HashMap::new)
            .insert(comm.key(), members.clone());
    }
    members
}

fn members_of(map: &NodeMap, comm: MPI_Comm) -> Members {
    let unknown = Members {
        local: Vec::new(),
        spans: false,
    };
    if crate::mpi::comm_is_inter(comm).unwrap_or(true) {
        return unknown;
    }
    let Ok(world_ranks) = crate::mpi::world_ranks_of(comm) else {
        return unknown;
    };
    let local: Option<Vec<bool>> = world_ranks.iter().map(|&r| map.is_local(r)).collect();
    match local {
        Some(local) => Members {
            spans: local.iter().any(|l| !l),
            local,
        },
        None => unknown,
    }
}

/// Whether rank `peer` of `comm` is on this node (none if unknown).
#[link_section = ".text.hot.mpistat"]
fn peer_is_local(map: &NodeMap, comm: MPI_Comm, peer: c_int) -> Option<bool> {
    let peer = u32::try_from(peer).ok()?;
    if comm.key() == map.world {
        return map.is_local(peer);
    }
    with_members(map, comm, |m| m.local.get(peer as usize).copied()).flatten()
}

/// Whether `comm` has members on other nodes (none if unknown).
#[link_section = ".text.hot.mpistat"]
fn spans_nodes(map: &NodeMap, comm: MPI_Comm) -> Option<bool> {
    if comm.key() == map.world {
        return Some(map.here < map.size);
    }
    with_members(map, comm, |m| (!m.local.is_empty()).then_some(m.spans)).flatten()
}

/// (on-node, off-node) bytes of a successful call of routine `id` on `comm` that moved `bytes`
/// in all (`sent` of them by the send side of a send-and-receive); none if it cannot be placed.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn split(
    id: RoutineId,
    traffic: &Traffic,
    comm: MPI_Comm,
    bytes: u64,
    sent: u64,
) -> Option<(u64, u64)> {
    if bytes == 0 || comm.is_none() {
        return None;
    }
    let map = map()?;
    let by = |local: bool, b: u64| if local { (b, 0) } else { (0, b) };
    match (CLASSES[id], *traffic) {
        (Class::Collective, _) => Some(by(!spans_nodes(map, comm)?, bytes)),
        (Class::P2p, Traffic::Elements { peer, .. }) => {
            Some(by(peer_is_local(map, comm, peer)?, bytes))
        }
        (Class::P2p, Traffic::Received { status, .. }) => {
            Some(by(peer_is_local(map, comm, source(status)?)?, bytes))
        }
        (Class::P2p, Traffic::SendReceived { peer, status, .. }) => {
            let received = bytes - sent.min(bytes);
            let (a, b) = match sent {
                0 => (0, 0),
                _ => by(peer_is_local(map, comm, peer)?, sent),
            };
            let (c, d) = match received {
                0 => (0, 0),
                _ => by(peer_is_local(map, comm, source(status)?)?, received),
            };
            Some((a + c, b + d))
        }
        _ => None,
    }
}

/// The source rank in a completed receive's status.
#[link_section = ".text.hot.mpistat"]
fn source(status: *const crate::ffi::MPI_Status) -> Option<c_int> {
    if crate::family::no_status(status) {
        return None;
    }
    // SAFETY: filled by the successful call that just returned.
    Some(unsafe {
        <crate::family::Built as crate::family::Family>::status_source(
            status.cast::<c_void>().cast(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The map made of `list` for rank `rank` of `size`: (bits of the first word, ranks here).
    fn parsed(list: &str, size: u32, rank: u32) -> Option<(u64, u32)> {
        let p = node_map(list.as_bytes(), Handle::NONE, size, rank)?;
        // SAFETY: node_map's leaked, fully written map.
        let map = unsafe { &*p };
        Some((map.local[0], map.here))
    }

    #[test]
    fn the_local_peers_list_becomes_a_bit_per_world_rank() {
        assert_eq!(parsed("0,1,5", 8, 1), Some((0b10_0011, 3)));
        assert_eq!(parsed("3", 4, 3), Some((0b1000, 1)));
        assert_eq!(parsed(" 2, 0 ,2", 3, 0), Some((0b101, 2)));
        let (_, here) = parsed("64,65,130", 200, 130).unwrap();
        assert_eq!(here, 3);
    }

    #[test]
    fn a_list_that_cannot_be_right_places_nothing() {
        for (list, size, rank) in [
            ("0,1", 4, 2),           // lacks this rank
            ("0,4", 4, 0),           // outside the world
            ("0,,1", 4, 0),          // empty entry
            ("", 4, 0),              // empty
            ("0;1", 4, 0),           // not a list of numbers
            ("0,99999999999", 4, 0), // overflows
        ] {
            assert_eq!(parsed(list, size, rank), None, "{list:?}");
        }
    }
}
