//! Whether every rank of the job has this library, learned from the process manager (PMIx under
//! Open MPI, Hydra's PMI-1 under MPICH), never over MPI.
//!
//! The profiler's own collectives (their communicator of all ranks and the reductions at
//! `MPI_Finalize`, the trace's set-up) need every rank; a rank that lost
//! `LD_PRELOAD` (an MPMD job's static or setuid program, a wrapper that clears the environment)
//! never enters them, and the job would hang. So each rank first learns which ranks are profiled:
//!
//! 1. A profiled rank adds one key, [`KEY`], to the data that its own `MPI_Init` already exchanges
//!    through PMIx (only if that fence collects every process's data, `PMIX_COLLECT_DATA`, as
//!    Open MPI's does by default; else the answer is "unknown"). Open MPI 4.x's PMIx component calls `PMIx_Fence`/`PMIx_Fence_nb` through the
//!    global symbol scope, where this library comes first (or the front, `libmpistat.so`, whose
//!    `PMIx_Fence`/`PMIx_Fence_nb` jump to ours once it loaded us); our definitions below put and commit
//!    the key before forwarding the first fence after the MPI library was recognised
//!    ([`announce_at_init`]), i.e. `MPI_Init`'s modex. Every other fence (and every fence of a
//!    process that is not an MPI rank of the built family) is forwarded untouched.
//! 2. After `MPI_Init`, [`learn`] asks PMIx for every rank's key with `PMIX_OPTIONAL`: PMIx then
//!    looks only in the data the fence already delivered to this node and answers "not found" at
//!    once for a rank without the library, instead of asking (and waiting for) that peer.
//!    The key's value is the rank's wish for a trace ([`wish_trace`]): the same reads tell
//!    every rank, alike, the strongest wish, so tracing is agreed on without a collective.
//!
//! Why this is safe against the user's own MPI communication: it makes no MPI call at all, so
//! there is no message a user's wildcard (`MPI_ANY_SOURCE`/`MPI_ANY_TAG`) receive could match,
//! and no collective whose order could interleave with the user's on any communicator. The only
//! exchange is the fence that Open MPI's `MPI_Init` runs on every rank, with or without this
//! library: adding a key changes what the fence carries, not who takes part or when. The
//! lookups are local. If anything is missing (no PMIx, a launch whose fence collects no data),
//! the answer is "not known to be all", which the profiler treats like a mixed job (it never
//! hangs, at worst it sends a partial record) unless the site chose
//! `assume_all_ranks_profiled`.
//!
//! Under MPICH's launcher, Hydra (`mpiexec.mpich`), there is no PMIx: MPICH 4.0's `MPI_Init`
//! speaks PMI-1 over the socket `PMI_FD` and runs a PMI barrier. The same two steps take that
//! road ([`crate::pmi1`] has the wire and what was verified of it):
//!
//! 1. Before the real `MPI_Init` ([`announce_before_init`], only for a family whose `MPI_Init`
//!    talks PMI-1, [`crate::family::Family::PMI1_AT_INIT`], and only under Hydra), a profiled
//!    rank opens the dialog itself (`cmd=init`, which must come before a put, as Hydra's proxy
//!    resets its puts at the node's first `init`), asks the job's key-value space and puts
//!    [`pmi1_key`] (`mpistat.<rank>`) with its trace wish: three whole request/response
//!    exchanges on the caller's thread before MPICH has touched the socket. MPICH's own `init`
//!    follows and is answered as always.
//! 2. `MPI_Init`'s barrier carries the puts to every node's proxy. After it, [`learn`] first
//!    reads this rank's own key (if it is missing, `MPI_Init` ran no barrier after the puts:
//!    unknown), then every rank's: a key the proxy holds is one local round trip, a missing one
//!    is answered "not found" at once by `mpiexec`. A 1,000-rank job where all are profiled
//!    asks 1,001 local gets per rank (~32 µs of CPU each, `bench/pmi1_gets.c`); in a mixed job
//!    only the lead counts every rank, the others stop once the answer and the lead are known
//!    ([`tally`]).
//!
//! The same safety argument holds: no MPI call, and the PMI barrier is `MPI_Init`'s own, run on
//! every rank with or without this library; a rank without it simply puts no key. Anything but
//! the verified dialog (no Hydra, PMI-2, `PMI_PORT`, an error reply) and the answer is "not known
//! to be all", as before.
//!
//! Under Slurm's `srun --mpi=pmi2` none of this is possible, so such a job stays "not known to
//! be all" (verified with Debian 12's Slurm 22.05 and MPICH 4.0.2; the plugin's task handling is
//! unchanged in Slurm's current source). MPICH's same PMI-1 client then talks to slurmstepd
//! (`PMI_FD`, `PMI_RANK`, `PMI_SIZE`, no `MPI_LOCALNRANKS`), which takes a task's first message
//! as its `init` (`agent.c`) and gives any later `cmd=init` no answer at all (`pmi1.c`: "invalid
//! pmi1 command received: 'init'"): a profiler that opened the dialog before MPICH leaves
//! MPICH's own `init`, and `MPI_Init`, waiting forever (seen: the ranks hung until killed). So
//! MPICH's first request must be its own, and nothing of ours runs between it and `MPI_Init`'s
//! PMI barriers; after `MPI_Init` MPICH runs no PMI barrier before the one inside the real
//! `MPI_Finalize` (after which slurmstepd closes the socket), too late for the profiler's
//! collectives, and a barrier of our own would be a collective. (A PMI-2 client would fare no
//! better: slurmstepd tears the connection down at a second `init`, `pmi2.c`.) What slurmstepd
//! does answer would have served: a `put` waits in the node's buffer for the next
//! `barrier_in`, and a `get` is answered from slurmstepd's own copy of the fenced keys, a
//! missing key at once (`cmd=get_result rc=1`). [`crate::pmi1::Client::from_env`] refuses
//! slurmstepd's socket.
//!
//! The same local look-ups (PMIx only) tell where ranks run: [`with_local_peers`] (the ranks on this node) and
//! [`node_list`] (the job's hosts), from the job-level data the process manager gives every
//! process at start; no communication either. Without them the record says the nodes' bytes
//! and host list are unknown.

use crate::family::{Built, Family};
use crate::pmi1;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering::Relaxed};

/// The key a profiled rank publishes: an unsigned byte, how strongly this rank wants the job
/// traced (0: not at all; see [`wish_trace`]), so that the ranks agree on tracing without a
/// collective of their own.
pub static KEY: &CStr = init_c_str!("mpistat.profiled");

// The PMIx standard's ABI (stable since PMIx v2; Debian 12's libpmix.so.2 is PMIx 4.2).
const PMIX_SUCCESS: c_int = 0;
const PMIX_ERR_NOT_SUPPORTED: c_int = -47;
const PMIX_BOOL: u16 = 1;
const PMIX_UINT8: u16 = 12;
const PMIX_GLOBAL: u8 = 3;
static PMIX_OPTIONAL: &[u8] = init_bytes!(b"pmix.optional");

#[repr(C)]
struct Proc {
    nspace: [c_char; 256],
    rank: u32,
}

#[repr(C)]
struct Value {
    kind: u16,
    data: [u64; 3],
}

#[repr(C)]
struct Info {
    key: [c_char; 512],
    flags: u32,
    value: Value,
}

impl Value {
    fn flag(on: bool) -> Value {
        Value {
            kind: PMIX_BOOL,
            data: [on as u64, 0, 0],
        }
    }

    fn byte(v: u8) -> Value {
        Value {
            kind: PMIX_UINT8,
            data: [v as u64, 0, 0],
        }
    }
}

/// A PMIx routine, found after this library (or in an already loaded libpmix opened locally):
/// the one the caller of our `PMIx_Fence` would have called without us.
struct Pmix {
    name: &'static CStr,
    addr: AtomicPtr<c_void>,
}

impl Pmix {
    const fn new(name: &'static CStr) -> Pmix {
        Pmix {
            name,
            addr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    #[link_section = ".text.init.mpistat"]
    fn get(&self) -> Option<*mut c_void> {
        let p = self.addr.load(Relaxed);
        if !p.is_null() {
            return Some(p);
        }
        let mut p = crate::next::after_us(self.name);
        if p.is_null() {
            // A libpmix opened `RTLD_LOCAL` by an MPI component, whatever its soname.
            p = mpistat_abi::in_loaded(LIBPMIX.to_bytes(), self.name);
        }
        self.addr.store(p, Relaxed);
        (!p.is_null()).then_some(p)
    }
}

static LIBPMIX: &CStr = init_c_str!("libpmix.so");
static FENCE: Pmix = Pmix::new(init_c_str!("PMIx_Fence"));
static FENCE_NB: Pmix = Pmix::new(init_c_str!("PMIx_Fence_nb"));
static PUT: Pmix = Pmix::new(init_c_str!("PMIx_Put"));
static COMMIT: Pmix = Pmix::new(init_c_str!("PMIx_Commit"));
static GET: Pmix = Pmix::new(init_c_str!("PMIx_Get"));
static VALUE_DESTRUCT: Pmix = Pmix::new(init_c_str!("PMIx_Value_destruct"));

/// The next fence is `MPI_Init`'s: put the key before it.
static ARMED: AtomicBool = AtomicBool::new(false);
/// The key was put and committed.
static ANNOUNCED: AtomicBool = AtomicBool::new(false);
/// This rank's wish for a trace, the key's value.
static TRACE_WISH: AtomicU8 = AtomicU8::new(0);

/// How strongly this rank wants the job traced (0: not), published with the key; set before
/// `MPI_Init` (at recognition).
pub fn wish_trace(level: u8) {
    TRACE_WISH.store(level, Relaxed);
}

/// Called when the process's MPI was recognised as the built family, before its `MPI_Init`.
pub fn announce_at_init() {
    ARMED.store(true, Relaxed);
}

/// The key to ask a fence to collect every process's data (else each `PMIx_Get` of a peer's data
/// would ask that peer: "direct modex"), a boolean.
static PMIX_COLLECT_DATA: &CStr = init_c_str!("pmix.collect");

/// Whether the fence with these `info` collects every process's data (so that after it a
/// missing key means the rank did not put it).
///
/// # Safety
/// `info` points to `ninfo` PMIx infos (or is null with `ninfo` 0).
#[link_section = ".text.init.mpistat"]
unsafe fn collects_data(info: *const Info, ninfo: usize) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: as the caller promises.
    let infos = unsafe { std::slice::from_raw_parts(info, ninfo) };
    infos.iter().any(|i| {
        let key = i.key.iter().take_while(|c| **c != 0).map(|c| *c as u8);
        key.eq(PMIX_COLLECT_DATA.to_bytes().iter().copied())
            && i.value.kind == PMIX_BOOL
            && i.value.data[0] as u8 != 0
    })
}

/// Before the fence armed by [`announce_at_init`]: put and commit the key, if the fence collects
/// data (else nobody could tell a rank without the key from data not yet fetched). Runs inside
/// `MPI_Init`: allocation-free and in `.text.init` (see footprint.rs), like all the fence code.
#[link_section = ".text.init.mpistat"]
fn announce(collects: bool) {
    if !ARMED.swap(false, Relaxed) || !collects {
        return;
    }
    let (Some(put), Some(commit)) = (PUT.get(), COMMIT.get()) else {
        return;
    };
    type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
    type CommitFn = unsafe extern "C" fn() -> c_int;
    let mut value = Value::byte(TRACE_WISH.load(Relaxed));
    // SAFETY: PMIx's routines with a NUL-terminated key and a valid value; PMIx copies both.
    let ok = unsafe {
        std::mem::transmute::<*mut c_void, PutFn>(put)(PMIX_GLOBAL, KEY.as_ptr(), &mut value)
            == PMIX_SUCCESS
            && std::mem::transmute::<*mut c_void, CommitFn>(commit)() == PMIX_SUCCESS
    };
    ANNOUNCED.store(ok, Relaxed);
}

/// `PMIx_Fence`, forwarded after [`announce`] (which does nothing unless armed).
///
/// # Safety
/// Called by PMIx clients with PMIx's arguments, passed on unchanged.
#[no_mangle]
#[link_section = ".text.init.mpistat"]
pub unsafe extern "C" fn PMIx_Fence(
    procs: *const c_void,
    nprocs: usize,
    info: *const c_void,
    ninfo: usize,
) -> c_int {
    if ARMED.load(Relaxed) {
        // SAFETY: PMIx's caller passes `ninfo` infos. This is inside the counted `MPI_Init`
        // (ARMED is set only for its fence), where `contained` suffices (guard.rs).
        crate::guard::contained(|| announce(unsafe { collects_data(info.cast(), ninfo) }));
    }
    type FenceFn = unsafe extern "C" fn(*const c_void, usize, *const c_void, usize) -> c_int;
    match FENCE.get() {
        Some(next) => std::mem::transmute::<*mut c_void, FenceFn>(next)(procs, nprocs, info, ninfo),
        None => PMIX_ERR_NOT_SUPPORTED,
    }
}

/// `PMIx_Fence_nb`, forwarded after [`announce`] (which does nothing unless armed).
///
/// # Safety
/// As for [`PMIx_Fence`].
#[no_mangle]
#[link_section = ".text.init.mpistat"]
pub unsafe extern "C" fn PMIx_Fence_nb(
    procs: *const c_void,
    nprocs: usize,
    info: *const c_void,
    ninfo: usize,
    cbfunc: *const c_void,
    cbdata: *mut c_void,
) -> c_int {
    if ARMED.load(Relaxed) {
        // SAFETY: as in `PMIx_Fence`; `contained` as there.
        crate::guard::contained(|| announce(unsafe { collects_data(info.cast(), ninfo) }));
    }
    type FenceNbFn = unsafe extern "C" fn(
        *const c_void,
        usize,
        *const c_void,
        usize,
        *const c_void,
        *mut c_void,
    ) -> c_int;
    match FENCE_NB.get() {
        Some(next) => std::mem::transmute::<*mut c_void, FenceNbFn>(next)(
            procs, nprocs, info, ninfo, cbfunc, cbdata,
        ),
        None => PMIX_ERR_NOT_SUPPORTED,
    }
}

/// Which ranks of `MPI_COMM_WORLD` have the library, as far as this rank can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peers {
    /// Every rank has it: the profiler's collectives are safe.
    pub all: bool,
    /// How many ranks have it, if the process manager could tell (under Hydra, only the lead
    /// counts a mixed job's ranks: [`tally`]).
    pub with_library: Option<u32>,
    /// The rank that writes the job's record when not all have it: the lowest with the
    /// library (rank 0 if that is unknown).
    pub lead: u32,
    /// The strongest wish for a trace among the ranks (see [`wish_trace`]), when every rank's
    /// key was read (else the ranks must agree otherwise).
    pub trace_wish: Option<u8>,
}

/// `PMIx_Get` of the job's namespace's processes, with `PMIX_OPTIONAL` (local data only).
struct Getter {
    get: GetFn,
    proc: Proc,
    optional: Info,
}

type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;

/// The rank that stands for every process of a namespace (job-level data).
const RANK_WILDCARD: u32 = u32::MAX - 1;
const PMIX_STRING: u16 = 3;

impl Getter {
    /// For this process's namespace (`PMIX_NAMESPACE`), if PMIx is loaded.
    #[link_section = ".text.init.mpistat"]
    fn new() -> Option<Getter> {
        // getenv, not std::env: this runs inside MPI_Init and allocates nothing (footprint.rs).
        // The namespace first: without PMIx (MPICH's Hydra) looking for `PMIx_Get` searched
        // every loaded object's symbols, and `mpistat_abi::in_loaded` in `.text`, at the end of
        // `MPI_Init` (two more chunks in its peak).
        let name = init_c_str!("PMIX_NAMESPACE");
        // SAFETY: getenv with a NUL-terminated name; the value is read at once.
        let nspace = unsafe { libc::getenv(name.as_ptr()) };
        if nspace.is_null() {
            return None;
        }
        let get = GET.get()?;
        // SAFETY: getenv returned a NUL-terminated string.
        let nspace = unsafe { CStr::from_ptr(nspace) }.to_bytes();
        if nspace.len() >= 256 {
            return None;
        }
        let mut proc = Proc {
            nspace: [0; 256],
            rank: 0,
        };
        for (d, s) in proc.nspace.iter_mut().zip(nspace) {
            *d = *s as c_char;
        }
        let mut optional = Info {
            key: [0; 512],
            flags: 0,
            value: Value::flag(true),
        };
        for (d, s) in optional.key.iter_mut().zip(PMIX_OPTIONAL) {
            *d = *s as c_char;
        }
        Some(Getter {
            // SAFETY: PMIx's `PMIx_Get`, whose prototype this is.
            get: unsafe { std::mem::transmute::<*mut c_void, GetFn>(get) },
            proc,
            optional,
        })
    }

    /// `key` of process `rank`: what `read` makes of its value, or `None` if PMIx has none.
    #[link_section = ".text.init.mpistat"]
    fn get<T>(&mut self, rank: u32, key: &CStr, read: impl FnOnce(&Value) -> T) -> Option<T> {
        self.proc.rank = rank;
        let mut value: *mut Value = std::ptr::null_mut();
        // SAFETY: PMIx's routine with a valid proc, key and one info; it allocates the value.
        let rc = unsafe { (self.get)(&self.proc, key.as_ptr(), &self.optional, 1, &mut value) };
        if value.is_null() {
            return None;
        }
        // SAFETY: PMIx filled the value it allocated.
        let out = (rc == PMIX_SUCCESS).then(|| read(unsafe { &*value }));
        type DestructFn = unsafe extern "C" fn(*mut Value);
        // SAFETY: PMIx allocated the value with malloc (PMIX_VALUE_RELEASE: destruct, free).
        unsafe {
            if let Some(d) = VALUE_DESTRUCT.get() {
                std::mem::transmute::<*mut c_void, DestructFn>(d)(value);
            }
            libc::free(value.cast());
        }
        out
    }

    /// What `read` makes of a job-level string's bytes (e.g. a comma-separated list), read in
    /// place: nothing is allocated, so this can run inside `MPI_Init` (footprint.rs).
    #[link_section = ".text.init.mpistat"]
    fn job_bytes<T>(&mut self, key: &CStr, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
        self.get(RANK_WILDCARD, key, |v| {
            let p = v.data[0] as *const c_char;
            // SAFETY: a PMIx string value holds a NUL-terminated string (or null).
            (v.kind == PMIX_STRING && !p.is_null())
                .then(|| read(unsafe { CStr::from_ptr(p) }.to_bytes()))
        })
        .flatten()
    }
}

/// What `read` makes of the world ranks on this node as PMIx lists them (`PMIX_LOCAL_PEERS`:
/// decimal ranks separated by commas), if PMIx says; a local look-up, no communication, no
/// allocation (it runs right after the real `MPI_Init`: footprint.rs).
#[link_section = ".text.init.mpistat"]
pub fn with_local_peers<T>(read: impl FnOnce(&[u8]) -> T) -> Option<T> {
    Getter::new()?.job_bytes(init_c_str!("pmix.lpeers"), read)
}

/// The job's nodes, in PMIx's order (`PMIX_NODE_LIST`), if PMIx says; a local look-up.
pub fn node_list() -> Option<Vec<String>> {
    let list = Getter::new()?.job_bytes(init_c_str!("pmix.nlist"), |b| {
        String::from_utf8_lossy(b).into_owned()
    })?;
    let hosts: Vec<String> = list.split(',').map(|h| h.trim().to_string()).collect();
    (!hosts.iter().any(String::is_empty)).then_some(hosts)
}

/// After `MPI_Init`: ask the process manager, for each of the `size` ranks, whether it published
/// its key (PMIx: [`KEY`]; Hydra's PMI-1: [`pmi1_key`]). If it cannot tell, every rank has the
/// library if the site says to assume so (`assume_all_if_unknown`), else that is unknown (and
/// not assumed).
///
/// Runs right after the real `MPI_Init`, where all it runs adds to MPI_Init's peak resident set:
/// allocation-free and in `.text.init` (see footprint.rs).
#[link_section = ".text.init.mpistat"]
pub fn learn(size: u32, assume_all_if_unknown: bool) -> Peers {
    if size <= 1 {
        return Peers {
            all: true,
            with_library: Some(size),
            lead: 0,
            trace_wish: Some(TRACE_WISH.load(Relaxed)),
        };
    }
    let known = if announced_pmi1() {
        learn_over_pmi1(size)
    } else if ANNOUNCED.load(Relaxed) {
        Getter::new().and_then(|mut getter| {
            tally(size, None, |rank| {
                let wish = getter.get(rank, KEY, |v| {
                    (v.kind == PMIX_UINT8).then(|| v.data[0] as u8)
                });
                Some(wish.map(|w| w.unwrap_or(0)))
            })
        })
    } else {
        None
    };
    known.unwrap_or(Peers {
        all: assume_all_if_unknown,
        with_library: None,
        lead: 0,
        trace_wish: None,
    })
}

/// The ranks' answers: for each of the `size` ranks, `wish_of` says its trace wish if it
/// published its key, `Some(None)` if it did not, `None` if the process manager cannot tell
/// (then nothing is known). With `me` (this rank), a look-up that costs more for a missing key
/// (PMI-1's, answered by `mpiexec`) stops as soon as the answer is "not all" and another rank
/// leads: only the lead needs the count, for its partial record.
#[link_section = ".text.init.mpistat"]
fn tally(
    size: u32,
    me: Option<u32>,
    mut wish_of: impl FnMut(u32) -> Option<Option<u8>>,
) -> Option<Peers> {
    let mut count = Some(0u32);
    let mut lead = None;
    let mut missing = false;
    let mut trace_wish = 0u8;
    for rank in 0..size {
        match wish_of(rank)? {
            Some(wish) => {
                trace_wish = trace_wish.max(wish);
                count = count.map(|c| c + 1);
                lead.get_or_insert(rank);
            }
            None => missing = true,
        }
        if missing && me.is_some() && lead.is_some() && lead != me {
            count = None;
            break;
        }
    }
    Some(Peers {
        all: !missing,
        with_library: count,
        lead: lead.unwrap_or(0),
        trace_wish: (!missing).then_some(trace_wish),
    })
}

/// The key a profiled rank puts into Hydra's key-value space: PMI-1 keys are the job's, not a
/// process's, so the rank is part of the name (`mpistat.<rank>`).
#[link_section = ".text.init.mpistat"]
pub fn pmi1_key(rank: u32) -> Result<pmi1::Line, pmi1::Surprise> {
    let mut key = pmi1::Line::new();
    key.push(init_bytes!(b"mpistat."))?.number(rank)?;
    Ok(key)
}

/// This rank published its key over Hydra's PMI-1 before `MPI_Init`.
static ANNOUNCED_PMI1: AtomicBool = AtomicBool::new(false);

/// Whether this rank put its key over PMI-1: never in a family that does not talk PMI-1 at
/// `MPI_Init`, which then links none of the PMI-1 dialog (decided when compiling, not by how the
/// optimiser happens to see the flag).
fn announced_pmi1() -> bool {
    <Built as Family>::PMI1_AT_INIT && ANNOUNCED_PMI1.load(Relaxed)
}

/// Before the real `MPI_Init` of a family whose `MPI_Init` talks PMI-1 to Hydra
/// ([`crate::family::Family::PMI1_AT_INIT`]), once the process's MPI was recognised and the site
/// profiles the job ([`announce_at_init`]): put this rank's key with its trace wish, so that
/// `MPI_Init`'s barrier delivers it to every node ([`crate::pmi1`]). Without Hydra, or at any
/// surprise, nothing is announced (and the PMI dialog is left as MPICH expects it: no request
/// without its response read).
pub fn announce_before_init() {
    if !<Built as Family>::PMI1_AT_INIT {
        return;
    }
    // Not under Hydra: the key may still go with a PMIx fence (an MPICH built for PMIx).
    let Ok(pmi) = pmi1::Client::from_env() else {
        return;
    };
    if !ARMED.swap(false, Relaxed) {
        return;
    }
    let announce = || -> Result<(), pmi1::Surprise> {
        pmi.init()?;
        let mut kvs = pmi1::Line::new();
        pmi.kvsname(&mut kvs)?;
        let mut wish = pmi1::Line::new();
        wish.number(u32::from(TRACE_WISH.load(Relaxed)))?;
        pmi.put(
            kvs.as_bytes(),
            pmi1_key(pmi.rank)?.as_bytes(),
            wish.as_bytes(),
        )
    };
    ANNOUNCED_PMI1.store(announce().is_ok(), Relaxed);
}

/// After `MPI_Init`, when this rank put its key over PMI-1: read every rank's. This rank's own
/// key must be there (else `MPI_Init` ran no barrier after the puts, and a missing key would not
/// mean a rank without the library); each other rank's is either its trace wish or, at once,
/// "not found" (asked of `mpiexec`). Any surprise: unknown.
#[link_section = ".text.init.mpistat"]
fn learn_over_pmi1(size: u32) -> Option<Peers> {
    let pmi = pmi1::Client::from_env().ok()?;
    if pmi.size != size {
        return None;
    }
    let mut kvs = pmi1::Line::new();
    pmi.kvsname(&mut kvs).ok()?;
    pmi1_wish(&pmi, kvs.as_bytes(), pmi.rank)??;
    tally(size, Some(pmi.rank), |rank| {
        pmi1_wish(&pmi, kvs.as_bytes(), rank)
    })
}

/// Which node each rank runs on, as Hydra tells it (`PMI_process_mapping`, which MPICH reads too),
/// when this rank talks PMI-1 ([`announce_before_init`]); `None` otherwise or at any surprise.
#[link_section = ".text.init.mpistat"]
pub fn pmi1_mapping() -> Option<crate::node::Mapping> {
    if !announced_pmi1() {
        return None;
    }
    let pmi = pmi1::Client::from_env().ok()?;
    let mut kvs = pmi1::Line::new();
    pmi.kvsname(&mut kvs).ok()?;
    let mut value = pmi1::Line::new();
    if !pmi
        .get(
            kvs.as_bytes(),
            init_bytes!(b"PMI_process_mapping"),
            &mut value,
        )
        .ok()?
    {
        return None;
    }
    crate::node::Mapping::parse(value.as_bytes())
}

/// Rank `rank`'s trace wish if it put its key into `kvs`, `Some(None)` if it did not, `None` if
/// PMI-1 did not answer as verified. (A named function: a closure called twice is compiled out
/// of line, outside `.text.init`.)
#[link_section = ".text.init.mpistat"]
fn pmi1_wish(pmi: &pmi1::Client, kvs: &[u8], rank: u32) -> Option<Option<u8>> {
    let mut value = pmi1::Line::new();
    if !pmi
        .get(kvs, pmi1_key(rank).ok()?.as_bytes(), &mut value)
        .ok()?
    {
        return Some(None);
    }
    let wish = pmi1::decimal(value.as_bytes())?;
    Some(Some(u8::try_from(wish).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the ranks' keys, every rank that looks them up agrees on whether all have
        /// the library, on the lead and (if all) on the strongest trace wish; the lead (or a
        /// rank counting everything) also knows how many have it.
        #[test]
        fn every_rank_reaches_the_same_answer(
            keys in proptest::collection::vec(proptest::option::of(0u8..4), 2..40),
        ) {
            let size = keys.len() as u32;
            let with: Vec<u32> = (0..size).filter(|r| keys[*r as usize].is_some()).collect();
            let full = tally(size, None, |r| Some(keys[r as usize])).unwrap();
            prop_assert_eq!(full.all, with.len() == keys.len());
            prop_assert_eq!(full.with_library, Some(with.len() as u32));
            prop_assert_eq!(full.lead, with.first().copied().unwrap_or(0));
            let strongest = keys.iter().flatten().max().copied().unwrap_or(0);
            prop_assert_eq!(full.trace_wish, full.all.then_some(strongest));
            for me in &with {
                let mut asked = 0;
                let mine = tally(size, Some(*me), |r| {
                    asked += 1;
                    Some(keys[r as usize])
                })
                .unwrap();
                prop_assert_eq!((mine.all, mine.lead, mine.trace_wish), (full.all, full.lead, full.trace_wish));
                if *me == full.lead || full.all {
                    prop_assert_eq!(mine.with_library, full.with_library);
                } else {
                    // It stopped at the first missing key after the lead's (or the lead's after it).
                    let first_missing = keys.iter().position(Option::is_none).unwrap() as u32;
                    prop_assert_eq!(asked, first_missing.max(full.lead) + 1);
                }
            }
        }
    }

    #[test]
    fn a_rank_the_process_manager_cannot_answer_for_makes_it_unknown() {
        assert_eq!(tally(4, Some(0), |r| (r != 2).then_some(Some(0))), None);
    }

    #[test]
    fn pmi1_keys_name_the_rank() {
        assert_eq!(pmi1_key(0).unwrap().as_bytes(), b"mpistat.0");
        assert_eq!(pmi1_key(12345).unwrap().as_bytes(), b"mpistat.12345");
    }
}
