//! The parts of each thread's state ([`crate::threads`]) that the per-call modules own: the
//! memos and caches of [`crate::traffic`] and [`crate::superstep`], and the notes of a completing
//! call ([`crate::requests`]). Their types sit here, below the thread's state that holds them;
//! their code stays with the module that owns them.

use crate::ffi::{MPI_Request, MPI_Status};
use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicUsize};

/// One thread's last (datatype, size) pair, so that a loop sending the same type asks MPI once.
/// All-zero bytes are a valid empty cache (no handle has key 0, see [`Handle::NONE`](crate::family::Handle::NONE)). Written
/// only by its thread.
#[derive(Default)]
pub struct TypeSizeCache {
    /// The datatype's [`Handle::key`](crate::family::Handle::key).
    pub(crate) datatype: AtomicUsize,
    pub(crate) size: AtomicU64,
    /// `traffic::TYPES_FREED` when the pair was stored.
    pub(crate) freed: AtomicU64,
}

/// One routine's last call on one thread: its [`Traffic::Elements`](crate::traffic::Traffic::Elements) arguments, or a
/// [`Traffic::Received`](crate::traffic::Traffic::Received)'s posted count and type and its status's source (the key), and what the
/// call came to. What a call adds is a function of the key (and, for a receive, of the bytes its
/// status says arrived, compared too) while no datatype nor communicator was freed (a freed
/// handle can come back as another type or group) and the node map did not change: so a call
/// with the same key adds the same, unmeasured. The key holds only while `generation` is the
/// current `GENERATION`, which is never 0: all-zero bytes are a valid empty memo, and a call of
/// another kind, a receive whose status was ignored, or one whose size MPI could not tell (no
/// bytes for a non-empty count) leaves `generation` 0. Whatever the
/// kind, the memo holds what the routine's last recorded call on the thread came to
/// ([`measured`](crate::traffic::measured)). Written only by its thread (part of its [`ThreadTable`](crate::threads::ThreadTable)).
#[derive(Default)]
pub struct Memo {
    pub(crate) count: AtomicI64,
    /// The datatype's [`Handle::key`](crate::family::Handle::key).
    pub(crate) datatype: AtomicUsize,
    pub(crate) comm: AtomicUsize,
    /// `comm` where the key was stored on `MPI_COMM_WORLD` by the main thread while supersteps
    /// are kept without the lock (`superstep::steady`) and `generation` is not 0, else 0: a
    /// synchronising collective's steady test compares it alone for the communicator, the
    /// superstep's test and the generation's (`traffic::steady`). It is set to 0 wherever
    /// the generation moves instead (`traffic::forget_world_memos`), so that test needs no
    /// generation of its own.
    pub(crate) world: AtomicUsize,
    pub(crate) peer: AtomicI32,
    /// `traffic::generation` when the key was stored; 0: the memo holds no key.
    pub(crate) generation: AtomicU64,
    pub(crate) elements: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) sent: AtomicU64,
    /// The message-size histogram's bucket of `bytes` (below `HIST_BUCKETS`).
    pub(crate) bucket: AtomicUsize,
    /// Of `bytes`, those placed on and off this node (both 0 when not placed: adding them is
    /// then adding nothing, so the hit path needs no test).
    pub(crate) on_node: AtomicU64,
    pub(crate) off_node: AtomicU64,
    /// Calls that came to what the memo holds and are not in the routine's counters yet
    /// (`traffic::settle`): a call like the last adds one here, not five counters and a bucket.
    pub(crate) hits: AtomicU64,
}

/// One thread's last communicator other than `MPI_COMM_WORLD` that a global collective ran on,
/// and whether it spans `MPI_COMM_WORLD`. All-zero bytes are a valid empty cache (no handle has
/// key 0). Written only by its thread (part of its [`ThreadTable`](crate::threads::ThreadTable)).
#[derive(Default)]
pub struct SpansCache {
    /// The communicator's [`Handle::key`](crate::family::Handle::key).
    pub(crate) comm: AtomicUsize,
    /// [`crate::places::comms_freed`] when the answer was stored.
    pub(crate) freed: AtomicU64,
    pub(crate) spans: AtomicBool,
}

/// What a thread's completing call keeps from before it calls MPI (one at a time: only the
/// outermost call of a thread counts): whether it is given kept requests, which (their index in
/// the call's array and their handle), its [`Done`] (the statuses it passes to MPI: its own
/// when the caller ignores them), for [`completed`](crate::requests::completed). Part of the thread's state ([`crate::threads`]), reused
/// from call to call, so plain memory from `realloc`, never freed: a type with a destructor
/// would make every access to the thread's state test whether the thread is ending.
pub struct Scratch {
    pub(crate) watching: bool,
    pub(crate) requests: *const MPI_Request,
    pub(crate) done: Done,
    /// The kept requests given: (index in the call's array, handle, slot in the table).
    pub(crate) hits: Grown<(usize, usize, usize)>,
    pub(crate) one: MaybeUninit<MPI_Status>,
    pub(crate) statuses: Grown<MaybeUninit<MPI_Status>>,
}

impl Scratch {
    pub const NEW: Scratch = Scratch {
        watching: false,
        requests: std::ptr::null(),
        done: Done::One {
            flag: std::ptr::null(),
            index: std::ptr::null(),
            status: std::ptr::null_mut(),
        },
        hits: Grown::NEW,
        one: MaybeUninit::uninit(),
        statuses: Grown::NEW,
    };
}

/// Which requests a completing call completed, and their statuses (the arguments it passed to
/// MPI; `flag`, `index`, `outcount` null where the routine has none).
#[derive(Clone, Copy)]
pub enum Done {
    /// `MPI_Wait`, `MPI_Test` (`flag`), `MPI_Waitany` (`index`), `MPI_Testany` (both): one
    /// request, with `status`.
    One {
        flag: *const c_int,
        index: *const c_int,
        status: *mut MPI_Status,
    },
    /// `MPI_Waitall`, `MPI_Testall` (`flag`): every request, request `i` with `statuses[i]`.
    Each {
        flag: *const c_int,
        statuses: *mut MPI_Status,
    },
    /// `MPI_Waitsome`, `MPI_Testsome`: `outcount` requests, the k-th `indices[k]` with
    /// `statuses[k]`.
    Some {
        outcount: *const c_int,
        indices: *const c_int,
        statuses: *mut MPI_Status,
    },
}

/// An array that only grows (`realloc`), of `len` used elements.
pub(crate) struct Grown<T> {
    pub(crate) at: *mut T,
    pub(crate) capacity: usize,
    pub(crate) len: usize,
}

impl<T: Copy> Grown<T> {
    pub(crate) const NEW: Grown<T> = Grown {
        at: std::ptr::null_mut(),
        capacity: 0,
        len: 0,
    };

    /// Room for `n` elements (false if there is no memory for them).
    #[inline(always)]
    pub(crate) fn reserve(&mut self, n: usize) -> bool {
        n <= self.capacity || self.grow_to(n)
    }

    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, n: usize) -> bool {
        let n = n.max(16).next_power_of_two();
        let Some(bytes) = n.checked_mul(std::mem::size_of::<T>()) else {
            return false;
        };
        // SAFETY: `at` is null or came from realloc; T is plain data (Copy).
        let at = unsafe { libc::realloc(self.at.cast(), bytes) }.cast::<T>();
        if at.is_null() {
            return false;
        }
        (self.at, self.capacity) = (at, n);
        true
    }

    pub(crate) fn push(&mut self, value: T) {
        if self.reserve(self.len + 1) {
            // SAFETY: room reserved for len + 1 elements.
            unsafe { self.at.add(self.len).write(value) };
            self.len += 1;
        }
    }

    pub(crate) fn used(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the first `len` elements were written.
        unsafe { std::slice::from_raw_parts(self.at, self.len) }
    }
}
