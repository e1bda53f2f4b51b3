//! Requests whose data is counted after the call that made them: a nonblocking receive counts
//! what arrived, which its status says when it completes (as `MPI_Recv` does); a persistent
//! send or collective counts its arguments at each `MPI_Start`; a persistent receive what
//! arrived at each completion (docs/counting.md).
//!
//! The posting call (`MPI_Irecv`, `MPI_Send_init`, ...) keeps its request's handle with what
//! the call described (routine, [`Traffic`], communicator) in one process-wide table. A
//! completing call (`MPI_Wait*`, `MPI_Test*`) looks its requests up *before* calling MPI, which
//! sets a completed request to `MPI_REQUEST_NULL` ([`watch`]); when one of them is kept and the
//! caller ignores statuses, the wrapper passes its own (the caller still sees nothing of them),
//! and afterwards the completed receives add what their statuses say to the routine that posted
//! them ([`After`](crate::rt::After)). Nothing else changes: MPI gets the same requests in the
//! same array, no extra call is made, results pass back as they are.
//!
//! Cost: a completing call reads one counter ([`LIVE`]) while no request is kept; otherwise it
//! looks each of its requests up (a hash probe). Below `MPI_THREAD_MULTIPLE` the table is used
//! without a lock (MPI lets one thread in at a time, and every use is inside an MPI call); at
//! `MPI_THREAD_MULTIPLE` it takes a spin lock, never held across a call into MPI.

use crate::family::Handle;
use crate::ffi::{MPI_Comm, MPI_Count, MPI_Datatype, MPI_Request, MPI_Status};
use crate::spin::{SpinGuard, SpinLock};
pub use crate::thread_parts::Done;
use crate::thread_parts::Scratch;
use crate::threads::{RoutineId, ThreadTable, MAIN_STATE};
use crate::traffic::Traffic;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Requests kept (entries of [`TABLE`]): the completing calls' one test while it is 0.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Threads may use the table at the same time (`MPI_THREAD_MULTIPLE`): take its lock. Until
/// `MPI_Init` tells the level, it is taken. 1 or 0, a word as [`LIVE`] is: [`front_free`]
/// tests both with one `or`.
static SHARED: AtomicUsize = AtomicUsize::new(1);
static TABLE: SpinLock<Table> = SpinLock::new(Table::EMPTY);

/// Most requests kept at once (a million: 80 MB of table). A receive posted beyond it counts
/// its posted size when it is posted; a persistent request beyond it counts nothing.
const MOST: usize = 1 << 20;

/// Before the real `MPI_Init`, with start-up's pages: the table's first slots, so that the
/// first nonblocking receives of the loops run no allocation code (in `.text`).
pub fn prepare() {
    let mut table = Access::table();
    if table.slots.is_empty() {
        table.grow();
    }
}

/// Whether the table is shared by threads at once (`MPI_THREAD_MULTIPLE`): set at `MPI_Init`
/// (inlined there: `.text.init`).
#[inline(always)]
pub fn set_shared(shared: bool) {
    SHARED.store(usize::from(shared), Relaxed);
}

/// The table, under its lock where threads share it (no closure: a closure's body may be
/// compiled out of line into `.text`, one more 64 KiB chunk of code in a rank's loop).
struct Access(Option<SpinGuard<'static, Table>>);

impl Access {
    #[inline(always)]
    fn table() -> Access {
        Access((SHARED.load(Relaxed) != 0).then(|| TABLE.lock()))
    }
}

impl std::ops::Deref for Access {
    type Target = Table;
    #[inline(always)]
    fn deref(&self) -> &Table {
        match &self.0 {
            Some(guard) => guard,
            // SAFETY: below MPI_THREAD_MULTIPLE one thread at a time is inside MPI, and the
            // table is used only inside MPI calls, so its uses are ordered by the program's own
            // ordering of them.
            None => unsafe { TABLE.unlocked() },
        }
    }
}

impl std::ops::DerefMut for Access {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Table {
        match &mut self.0 {
            Some(guard) => guard,
            // SAFETY: as in `deref`.
            None => unsafe { TABLE.unlocked() },
        }
    }
}

/// When a kept request's data counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A nonblocking receive: at its completion, what arrived; then it is forgotten.
    Receive,
    /// A persistent receive: at each completion after a start, what arrived.
    PersistentReceive,
    /// A persistent send or collective: its arguments, at each start.
    PersistentStart,
}

/// What a posting call leaves for later (its request, filled by the successful call).
#[derive(Clone, Copy)]
pub enum Later {
    /// A nonblocking receive (spec term `posts`).
    Completion(*mut MPI_Request),
    /// A persistent request (spec term `persistent`): `receive` counts at completions, else at
    /// starts.
    Persistent {
        request: *mut MPI_Request,
        receive: bool,
    },
}

/// One kept request.
#[derive(Clone, Copy)]
struct Entry {
    /// The request's [`Handle::key`]; 0: an empty slot (no request has key 0).
    key: usize,
    id: u32,
    kind: Kind,
    /// A persistent request was started and has not completed since.
    active: bool,
    traffic: Traffic,
    comm: MPI_Comm,
}

impl Entry {
    const EMPTY: Entry = Entry {
        key: 0,
        id: 0,
        kind: Kind::Receive,
        active: false,
        traffic: Traffic::None,
        comm: <MPI_Comm as Handle>::NONE,
    };

    /// The front entry with all it describes: a receive staged while its routine's memo held
    /// its key has only its request written ([`stage_front`]); its routine, count, datatype
    /// and communicator are then the memo's, taken here by whatever reads them
    /// ([`Table::at`], [`front_completed_measured`]), from the memo or from the copy it left
    /// before it was rewritten (`traffic::stash_held`).
    #[inline(always)]
    fn settle(&mut self) {
        if crate::traffic::held_any() {
            self.settle_held();
        }
    }

    #[cold]
    #[inline(never)]
    fn settle_held(&mut self) {
        let Some((id, count, datatype, comm)) = crate::traffic::take_held_key() else {
            return;
        };
        if self.key != 0 {
            self.id = id as u32;
            self.traffic = Traffic::Elements {
                count,
                datatype,
                // No reader of a kept receive uses its posted peer (its status tells).
                peer: crate::traffic::NO_PEER,
            };
            self.comm = comm;
        }
    }
}

/// The kept requests: open addressing with linear probing, a power-of-two number of slots at
/// most half full, keyed by handle; and in front of them one entry, which holds the request
/// kept while no other is (the loop that posts one receive and waits for it: no hashing, no
/// probing, no moving of entries). A handle is in at most one of the two places.
struct Table {
    front: Entry,
    slots: Vec<Entry>,
    /// Entries in `slots`.
    len: usize,
}

/// The slot number of [`Table::front`] (no slot of `slots` has it: they are at most 2^21).
const FRONT: usize = usize::MAX;

// SAFETY: the raw pointers in entries (handles, argument arrays) are only handed back to the
// thread's own MPI calls; the table is used under `TABLE`'s lock or MPI's one-thread rule.
unsafe impl Send for Table {}

impl Table {
    const EMPTY: Table = Table {
        front: Entry::EMPTY,
        slots: Vec::new(),
        len: 0,
    };

    /// Requests kept, in front and in the slots.
    #[inline(always)]
    fn kept(&self) -> usize {
        self.len + usize::from(self.front.key != 0)
    }

    /// The entry in `slot` ([`FRONT`] or one of `slots`).
    #[inline(always)]
    fn at(&mut self, slot: usize) -> &mut Entry {
        if slot == FRONT {
            self.front.settle();
            &mut self.front
        } else {
            &mut self.slots[slot]
        }
    }

    #[inline(always)]
    fn home(&self, key: usize) -> usize {
        // Fibonacci hashing: handles are aligned pointers or MPICH's ints with a kind in the
        // high bits; the product's high bits mix both.
        let bits = self.slots.len().trailing_zeros();
        ((key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    /// The slot of `key` ([`FRONT`] or one of `slots`).
    #[inline(always)]
    fn find(&self, key: usize) -> Option<usize> {
        if key == self.front.key && key != 0 {
            return Some(FRONT);
        }
        if self.len == 0 {
            return None;
        }
        self.find_in_slots(key)
    }

    #[inline(never)]
    #[link_section = ".text.hot.mpistat"]
    fn find_in_slots(&self, key: usize) -> Option<usize> {
        if self.slots.is_empty() || key == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            match self.slots[i].key {
                0 => return None,
                k if k == key => return Some(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    #[inline(always)]
    fn get_mut(&mut self, key: usize) -> Option<&mut Entry> {
        self.find(key).map(|i| self.at(i))
    }

    /// The slot of `key`, looked for first at `slot` (where it was found before the call: only
    /// an insertion or removal since can have moved it).
    #[inline(always)]
    fn slot_of(&self, key: usize, slot: usize) -> Option<usize> {
        let at = if slot == FRONT {
            Some(&self.front)
        } else {
            self.slots.get(slot)
        };
        match at {
            Some(e) if e.key == key => Some(slot),
            _ => self.find(key),
        }
    }

    /// Keep `entry` (replacing one of the same handle, which MPI has reused); false if full.
    /// In front if nothing else is kept (then its handle is nowhere else), it is a nonblocking
    /// receive and threads do not share the table: the front's steady paths read and write it
    /// without the lock and count it as a receive ([`front_steady`]).
    #[inline(always)]
    fn insert(&mut self, entry: Entry) -> bool {
        if self.front.key == entry.key {
            self.front = Entry::EMPTY;
            LIVE.store(self.kept(), Relaxed);
        }
        if self.front.key == 0
            && self.len == 0
            && entry.kind == Kind::Receive
            && SHARED.load(Relaxed) == 0
        {
            self.front = entry;
            // Not staged: no memo was tested.
            crate::traffic::hold_none();
            LIVE.store(self.kept(), Relaxed);
            return true;
        }
        self.insert_in_slots(entry)
    }

    /// [`Table::insert`] into `slots` (the handle is not in front).
    #[inline(never)]
    #[link_section = ".text.hot.mpistat"]
    fn insert_in_slots(&mut self, entry: Entry) -> bool {
        if (self.len + 1) * 2 > self.slots.len() && !self.grow() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(entry.key);
        loop {
            match self.slots[i].key {
                0 => break,
                k if k == entry.key => {
                    self.slots[i] = entry;
                    return true;
                }
                _ => i = (i + 1) & mask,
            }
        }
        self.slots[i] = entry;
        self.len += 1;
        LIVE.store(self.kept(), Relaxed);
        true
    }

    /// Twice the slots (64 at first: [`prepare`]), unless that passes [`MOST`].
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> bool {
        let slots = (self.slots.len() * 2).max(64);
        if slots > 2 * MOST {
            return false;
        }
        let old = std::mem::replace(&mut self.slots, vec![Entry::EMPTY; slots]);
        self.len = 0;
        for entry in old.into_iter().filter(|e| e.key != 0) {
            self.insert_in_slots(entry);
        }
        true
    }

    /// Forget the request `key`; the entries after it in its run move back so that every
    /// entry stays reachable from its home slot (no tombstones).
    fn remove(&mut self, key: usize) -> Option<Entry> {
        let slot = self.find(key)?;
        Some(self.remove_at(slot))
    }

    /// [`Table::remove`] of the entry in `slot`.
    #[inline(always)]
    fn remove_at(&mut self, slot: usize) -> Entry {
        if slot == FRONT {
            let removed = std::mem::replace(&mut self.front, Entry::EMPTY);
            LIVE.store(self.len, Relaxed);
            return removed;
        }
        self.remove_from_slots(slot)
    }

    /// [`Table::remove_at`] of one of `slots`.
    #[inline(never)]
    #[link_section = ".text.hot.mpistat"]
    fn remove_from_slots(&mut self, slot: usize) -> Entry {
        let mut hole = slot;
        let removed = self.slots[hole];
        let mask = self.slots.len() - 1;
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let key = self.slots[i].key;
            if key == 0 {
                break;
            }
            // Move the entry at i into the hole unless its home lies cyclically in (hole, i].
            let home = self.home(key);
            let stays = if hole <= i {
                hole < home && home <= i
            } else {
                hole < home || home <= i
            };
            if !stays {
                self.slots[hole] = self.slots[i];
                hole = i;
            }
        }
        self.slots[hole] = Entry::EMPTY;
        self.len -= 1;
        LIVE.store(self.kept(), Relaxed);
        removed
    }

    /// Forget every nonblocking receive (persistent requests stay until freed).
    fn forget_receives(&mut self) {
        let receives: Vec<usize> = std::iter::once(&self.front)
            .chain(&self.slots)
            .filter(|e| e.key != 0 && e.kind == Kind::Receive)
            .map(|e| e.key)
            .collect();
        for key in receives {
            self.remove(key);
        }
    }
}

/// After a successful nonblocking receive of routine `id` on `comm` (`count` elements of
/// `datatype` from `peer`): keep its request for its completion. False if it cannot be kept:
/// then it counts its posted size now.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn keep_receive(
    id: RoutineId,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let traffic = Traffic::Elements {
        count,
        datatype,
        peer,
    };
    keep_entry(id, traffic, comm, request, Kind::Receive)
}

/// After a successful call of routine `id` on `comm` that made the persistent `request`
/// describing `traffic` (`receive`: a receive, which counts at each completion, else at each
/// start): keep it until it is freed. One that cannot be kept counts nothing.
#[inline(never)]
pub fn keep_persistent(
    id: RoutineId,
    traffic: Traffic,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    receive: bool,
) {
    let kind = if receive {
        Kind::PersistentReceive
    } else {
        Kind::PersistentStart
    };
    keep_entry(id, traffic, comm, request, kind);
}

#[inline(always)]
fn keep_entry(
    id: RoutineId,
    traffic: Traffic,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    kind: Kind,
) -> bool {
    if request.is_null() {
        return true;
    }
    // SAFETY: the successful call filled the caller's request.
    let key = unsafe { *request }.key();
    let entry = Entry {
        key,
        id: id as u32,
        kind,
        active: false,
        traffic,
        comm,
    };
    key == 0 || Access::table().insert(entry)
}

impl Scratch {
    /// The call in progress is given kept requests ([`watch`]): [`completed`] has work.
    #[inline(always)]
    pub fn watching(&self) -> bool {
        self.watching
    }

    /// The kept requests noted.
    fn hits(&self) -> &[(usize, usize, usize)] {
        self.hits.used()
    }
}

/// Whether any request is kept: a completing call's counting copy takes its watching copy then
/// (one load on the plain path).
#[inline(always)]
pub fn live() -> bool {
    LIVE.load(Relaxed) != 0
}

/// Before a completing call given `n` requests at `requests`, which will report on them as
/// `done` says: the status(es) to pass to MPI, the caller's unless it ignores them and one of
/// its requests is kept, noted then in the thread's `scratch` for [`completed`]. The common
/// case, no request kept at all, is one load.
#[inline(always)]
pub fn watch(
    scratch: &mut Scratch,
    requests: *const MPI_Request,
    n: c_int,
    done: Done,
) -> *mut MPI_Status {
    if LIVE.load(Relaxed) == 0 {
        return done.statuses();
    }
    watch_kept(scratch, requests, n, done)
}

#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn watch_kept(
    scratch: &mut Scratch,
    requests: *const MPI_Request,
    n: c_int,
    done: Done,
) -> *mut MPI_Status {
    let given = done.statuses();
    if requests.is_null() || n <= 0 {
        return given;
    }
    // SAFETY: MPI's contract for the completing call: `n` requests.
    let requests_given = unsafe { std::slice::from_raw_parts(requests, n as usize) };
    scratch.hits.len = 0;
    let table = Access::table();
    for (i, request) in requests_given.iter().enumerate() {
        let key = request.key();
        if let Some(slot) = table.find(key) {
            scratch.hits.push((i, key, slot));
        }
    }
    drop(table);
    if scratch.hits.len == 0 {
        return given;
    }
    let statuses = if !crate::family::no_status(given) {
        given
    } else if matches!(done, Done::One { .. }) {
        scratch.one.as_mut_ptr()
    } else if scratch.statuses.reserve(n as usize) {
        scratch.statuses.at.cast()
    } else {
        // No memory for them: MPI fills none, and the call's receives count nothing.
        return given;
    };
    scratch.watching = true;
    scratch.requests = requests;
    scratch.done = done.with_statuses(statuses);
    statuses
}

/// `*p` if `p` is not null.
fn read(p: *const c_int) -> Option<c_int> {
    // SAFETY: the completing call's output argument, written by MPI when it succeeded.
    (!p.is_null()).then(|| unsafe { *p })
}

const UNDEFINED: c_int = crate::ffi::MPI_UNDEFINED as c_int;

impl Done {
    /// The status (or statuses) argument.
    #[inline(always)]
    fn statuses(self) -> *mut MPI_Status {
        match self {
            Done::One { status, .. } => status,
            Done::Each { statuses, .. } | Done::Some { statuses, .. } => statuses,
        }
    }

    /// `self` with status (or statuses) argument `statuses`.
    fn with_statuses(self, statuses: *mut MPI_Status) -> Done {
        match self {
            Done::One { flag, index, .. } => Done::One {
                flag,
                index,
                status: statuses,
            },
            Done::Each { flag, .. } => Done::Each { flag, statuses },
            Done::Some {
                outcount, indices, ..
            } => Done::Some {
                outcount,
                indices,
                statuses,
            },
        }
    }

    /// The status of the request at index `i` of the call's array, if the call (which returned
    /// successfully) completed it.
    fn status_of(self, i: usize) -> Option<*const MPI_Status> {
        let flag_set = |flag: *const c_int| read(flag).is_none_or(|f| f != 0);
        match self {
            Done::One {
                flag,
                index,
                status,
            } => {
                let completed = read(index).unwrap_or(0);
                (flag_set(flag) && completed != UNDEFINED && completed as usize == i)
                    .then_some(status.cast_const())
            }
            Done::Each { flag, statuses } => {
                // SAFETY: a status per request (the wrapper's own when the caller ignores them).
                flag_set(flag).then(|| unsafe { statuses.add(i).cast_const() })
            }
            Done::Some {
                outcount,
                indices,
                statuses,
            } => {
                let n = read(outcount).filter(|&n| n != UNDEFINED)?;
                // SAFETY: MPI wrote `n` indices and statuses.
                (0..n.max(0) as usize)
                    .find(|&k| unsafe { *indices.add(k) } as usize == i)
                    .map(|k| unsafe { statuses.add(k).cast_const() })
            }
        }
    }
}

/// After a completing call that returned `rc`, given kept requests noted in `watch` ([`watch`]):
/// add what those that completed moved (to the routines that posted them), and forget the
/// nonblocking ones. A call that failed adds nothing; the requests it completed all the same
/// (`MPI_ERR_IN_STATUS`: their slots became `MPI_REQUEST_NULL`) are forgotten.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn completed(table: &ThreadTable, watch: &mut Scratch, rc: c_int) {
    watch.watching = false;
    if rc != 0 {
        return forget_freed(watch);
    }
    let done = watch.done;
    for &(i, key, slot) in watch.hits() {
        let Some(status) = done.status_of(i) else {
            continue;
        };
        // One entry at a time under the lock, its data added outside (measuring may call MPI).
        let mut kept = Access::table();
        let Some(slot) = kept.slot_of(key, slot) else {
            continue;
        };
        let entry = kept.at(slot);
        let counts = match entry.kind {
            Kind::Receive => true,
            Kind::PersistentReceive => std::mem::replace(&mut entry.active, false),
            Kind::PersistentStart => false,
        };
        // A kept receive's traffic is its posted block.
        let (id, posted, comm) = match entry.traffic {
            Traffic::Elements {
                count, datatype, ..
            } => (entry.id as RoutineId, Some((count, datatype)), entry.comm),
            _ => (entry.id as RoutineId, None, entry.comm),
        };
        if entry.kind == Kind::Receive {
            kept.remove_at(slot);
        }
        drop(kept);
        if let (true, Some((count, datatype))) = (counts, posted) {
            if !cancelled(status) {
                let traffic = Traffic::Received {
                    count,
                    datatype,
                    status,
                };
                crate::traffic::record(table, id, traffic, comm);
            }
        }
    }
}

/// [`completed`] of a call that failed: forget the nonblocking receives it completed all the
/// same (their slots became `MPI_REQUEST_NULL`).
#[cold]
#[inline(never)]
fn forget_freed(watch: &Scratch) {
    let null = crate::family::predefined::<MPI_Request>(crate::family::Predefined::RequestNull)
        .map(Handle::key);
    let mut table = Access::table();
    for &(i, key, _) in watch.hits() {
        // SAFETY: the call's array has an entry at every index it was watched at.
        let after = unsafe { *watch.requests.add(i) }.key();
        if Some(after) == null && table.get_mut(key).is_some_and(|e| e.kind == Kind::Receive) {
            table.remove(key);
        }
    }
}

/// Whether a completed receive's status says it was cancelled (nothing arrived).
fn cancelled(status: *const MPI_Status) -> bool {
    !crate::family::no_status(status)
        // SAFETY: MPI filled the status of the request it completed.
        && unsafe { <crate::family::Built as crate::family::Family>::status_cancelled(status) }
}

/// After a successful `MPI_Start` or `MPI_Startall` of `n` requests: each kept persistent send
/// or collective adds its arguments' data, each kept persistent receive is active.
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
pub fn started(table: &ThreadTable, requests: *const MPI_Request, n: c_int) {
    if requests.is_null() || n <= 0 {
        return;
    }
    // SAFETY: MPI's contract for the call: `n` requests.
    let requests = unsafe { std::slice::from_raw_parts(requests, n as usize) };
    for request in requests {
        let mut kept = Access::table();
        let Some(entry) = kept.get_mut(request.key()) else {
            continue;
        };
        let (id, traffic, comm) = (entry.id as RoutineId, entry.traffic, entry.comm);
        match entry.kind {
            Kind::PersistentStart => {
                drop(kept);
                crate::traffic::record(table, id, traffic, comm);
            }
            Kind::PersistentReceive => entry.active = true,
            Kind::Receive => {}
        }
    }
}

/// Before `MPI_Request_free`: the request's key if it may be kept (0 otherwise).
#[inline(always)]
pub fn freeing(request: *const MPI_Request) -> usize {
    if !live() || request.is_null() {
        return 0;
    }
    // SAFETY: the caller's request, as MPI_Request_free reads it.
    unsafe { *request }.key()
}

/// After a successful `MPI_Request_free` of the kept request `key`: forget it. A nonblocking
/// receive freed before it completed is never counted: no status will tell what arrived.
#[inline(never)]
pub fn freed(key: usize) {
    Access::table().remove(key);
}

/// Counting paused (`MPI_Pcontrol(0)`): a receive posted before and completed while paused
/// would leave a stale entry (its handle, reused by MPI for another request, would be taken for
/// it), so every nonblocking receive is forgotten (one completed after the pause counts
/// nothing). Persistent requests stay.
#[inline(always)]
pub fn forget_receives() {
    if LIVE.load(Relaxed) != 0 {
        forget_kept_receives();
    }
}

#[cold]
#[inline(never)]
fn forget_kept_receives() {
    Access::table().forget_receives();
}

/// The front entry, without the table's lock. Only the steady paths below use it so, on the
/// thread that called `MPI_Init`: written only where threads do not share the table (there one
/// thread at a time is inside MPI); where they do, nothing is ever kept in front
/// ([`Table::insert`], [`front_free`]), so its reads race with no write.
#[inline(always)]
fn front() -> &'static mut Entry {
    // SAFETY: as said above.
    unsafe { &mut TABLE.unlocked().front }
}

/// Whether a nonblocking receive on its routine's steady path can be kept in front, without
/// the lock: nothing is kept, and threads do not share the table. Both in one test (`or` of
/// the two, one branch: three instructions fewer than a branch each).
#[inline(always)]
pub fn front_free() -> bool {
    crate::traffic::tested(LIVE.load(Relaxed) | SHARED.load(Relaxed) == 0)
}

/// Before the real call of a nonblocking receive that [`front_free`] let through: its
/// routine's memo is tested for the receive's key ([`crate::traffic::hold_if_key`]; its
/// arguments are in their registers here, after the call only the request's pointer is kept).
/// If the memo holds it, the front entry is left as it is (six stores fewer a post:
/// [`Entry::settle`] takes the key from the memo where it is read); else it gets what the call
/// describes. Its key stays 0 (not kept) until [`posted`].
#[inline(always)]
pub fn stage_front(id: RoutineId, traffic: Traffic, comm: MPI_Comm) {
    if let Traffic::Elements {
        count, datatype, ..
    } = traffic
    {
        if crate::traffic::hold_if_key(id, count, datatype, comm) {
            return;
        }
    } else {
        crate::traffic::hold_none();
    }
    let front = front();
    // Its kind is a receive's, never active: what every entry in front has.
    front.id = id as u32;
    front.traffic = traffic;
    front.comm = comm;
}

/// After the real call of a receive [`stage_front`] staged, which returned `rc`: keep its
/// request in front, as [`keep_receive`] would; a failed call (or a request MPI left without
/// a handle) leaves the front empty.
#[inline(always)]
pub fn posted(rc: c_int, request: *const MPI_Request) {
    if rc == 0 {
        // SAFETY: the successful call filled the caller's request (MPI writes through the
        // pointer it is given: a null one never comes back with success).
        let key = unsafe { *request }.key();
        if key != 0 {
            front().key = key;
            LIVE.store(1, Relaxed);
            return;
        }
    }
    std::hint::cold_path();
    *front() = Entry::EMPTY;
}

/// Whether no request is kept: then a steady `MPI_Wait` or `MPI_Test` completes nothing of
/// ours, and passes its arguments as they are (a status of ours where the caller ignores it
/// would make MPI fill one: 15 instructions of Open MPI's `MPI_Test` of a null request).
#[inline(always)]
pub fn none_kept() -> bool {
    LIVE.load(Relaxed) == 0
}

/// Whether `MPI_Wait` or `MPI_Test` of `request` on their steady path can count without the
/// table, some request being kept: it is the one in front. Any other (a request in the
/// table's slots, one not kept; a null pointer, which MPI reports) takes the counting copy,
/// which looks it up.
#[inline(always)]
pub fn front_steady(request: *const MPI_Request) -> bool {
    // SAFETY: not null: the caller's request, which MPI reads too.
    crate::traffic::tested(!request.is_null())
        && crate::traffic::tested(unsafe { *request }.key() == front().key)
}

/// The status a steady `MPI_Wait` or `MPI_Test` passes to MPI: the caller's, or, if it ignores
/// it, the thread's own (a completed receive counts what its status says arrived).
#[inline(always)]
pub fn front_status(status: *mut MPI_Status) -> *mut MPI_Status {
    if crate::family::no_status(status) {
        // SAFETY: the main thread's notes, used by its outermost call only (this one).
        unsafe { (*MAIN_STATE.get().requests.get()).one.as_mut_ptr() }
    } else {
        status
    }
}

/// After a steady `MPI_Wait` or `MPI_Test` ([`front_steady`]) that returned successfully, as
/// `done` says (its flag; the status it passed to MPI): if the front's request completed, it
/// is forgotten and adds what its status says arrived to the routine that posted it, as
/// [`completed`] does (a cancelled receive adds nothing).
/// A receive whose memo held its key at the post ([`crate::traffic::held`]) and whose status
/// has the memo's source and bytes adds one hit to the memo, and that is all it reads of the
/// front.
#[inline(always)]
pub fn front_completed(table: &ThreadTable, done: Done) {
    let Done::One { flag, status, .. } = done else {
        return;
    };
    if read(flag) == Some(0) {
        return;
    }
    let memo = crate::traffic::held();
    // SAFETY: MPI filled the status (the thread's own where the caller ignores it); `memo` is
    // a routine's memo in the main table (this thread's: [`stage_front`]) or one that holds
    // nothing.
    if unsafe { crate::traffic::received_as_memo(memo, status) } {
        front().key = 0;
        // One fewer kept (threads do not share the table: something was in front, and `LIVE`
        // is what `Table::kept` was at its last change). One `dec` of memory where storing
        // the slots' count was a load and a store.
        LIVE.store(LIVE.load(Relaxed).wrapping_sub(1), Relaxed);
        return crate::traffic::add_to_memo(memo);
    }
    front_completed_measured(table, status);
}

/// [`front_completed`] otherwise: a receive whose memo did not hold its key or status, or a
/// cancelled one (which adds nothing), out of line.
#[cold]
#[inline(never)]
fn front_completed_measured(table: &ThreadTable, status: *mut MPI_Status) {
    let front = front();
    front.settle();
    // The request given, unless both keys are 0 (no request has key 0: MPI fails the call).
    let Traffic::Elements {
        count, datatype, ..
    } = front.traffic
    else {
        return;
    };
    let (id, comm) = (front.id as RoutineId, front.comm);
    front.key = 0;
    front.traffic = Traffic::None;
    // SAFETY: threads do not share the table (something was in front).
    LIVE.store(unsafe { TABLE.unlocked() }.len, Relaxed);
    // SAFETY: MPI filled the status (the thread's own where the caller ignores it).
    if !unsafe { <crate::family::Built as crate::family::Family>::status_cancelled(status) } {
        crate::traffic::record_received(table, id, count, datatype, status, comm);
    }
}

/// After a steady `MPI_Wait` or `MPI_Test` that failed: if it completed the front's request
/// all the same (`request` became `MPI_REQUEST_NULL`), forget it, as [`forget_freed`] does.
#[inline(always)]
pub fn front_failed(request: *const MPI_Request) {
    let null = crate::family::predefined::<MPI_Request>(crate::family::Predefined::RequestNull)
        .map(Handle::key);
    let front = front();
    // SAFETY: not null when something was in front ([`front_steady`]).
    if front.key != 0 && !request.is_null() && Some(unsafe { *request }.key()) == null {
        *front = Entry::EMPTY;
        // SAFETY: as in `front_completed`.
        LIVE.store(unsafe { TABLE.unlocked() }.len, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn entry(key: usize) -> Entry {
        Entry {
            key,
            ..Entry::EMPTY
        }
    }

    #[test]
    fn kept_requests_are_found_until_removed_whatever_their_order() {
        let mut t = Table::EMPTY;
        // Keys that crowd a few home slots, as handles from one free list do.
        let keys: Vec<usize> = (1..=500).map(|k| k * 64).collect();
        for &k in &keys {
            assert!(t.insert(entry(k)));
        }
        assert_eq!(t.kept(), keys.len());
        for &k in keys.iter().step_by(3) {
            assert_eq!(t.remove(k).map(|e| e.key), Some(k));
        }
        for (n, &k) in keys.iter().enumerate() {
            assert_eq!(t.find(k).is_some(), n % 3 != 0, "key {k}");
        }
        assert!(t.remove(7).is_none());
        assert_eq!(t.find(0), None);
    }

    proptest! {
        /// Whatever the order of posts and completions (and handles MPI reuses), the table
        /// holds exactly the requests kept and not yet forgotten.
        #[test]
        fn the_table_holds_what_was_kept_and_not_forgotten(
            steps in proptest::collection::vec((any::<bool>(), 1usize..200), 0..600),
        ) {
            let mut t = Table::EMPTY;
            let mut model = BTreeSet::new();
            for (keep, handle) in steps {
                // Handles as pointers from a pool: multiples of 16 near each other.
                let key = handle * 16;
                if keep {
                    prop_assert!(t.insert(entry(key)));
                    model.insert(key);
                } else {
                    prop_assert_eq!(t.remove(key).map(|e| e.key), model.take(&key));
                }
                prop_assert_eq!(t.kept(), model.len());
            }
            for handle in 1..200 {
                prop_assert_eq!(t.find(handle * 16).is_some(), model.contains(&(handle * 16)));
            }
        }
    }
}
