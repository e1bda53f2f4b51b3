//! libotf2's collective callbacks over the distributed analysis's [`Exchange`]: with them the
//! processes of `mpistat-analyze --otf2` write one archive together (process 0's is OTF2's
//! primary archive: it makes the directories and writes the anchor file and the global
//! definitions; every process writes its own locations' files).
//!
//! No panic crosses into libotf2: each callback catches it and returns an error code, which
//! libotf2 returns to the caller as `OTF2_ERROR_COLLECTIVE_CALLBACK`.

use crate::ffi;
use mpistat_analysis::distributed::Exchange;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What the callbacks reach through libotf2's `userData`.
pub(crate) struct Collectives<'a> {
    exchange: &'a dyn Exchange,
    callbacks: ffi::OTF2_CollectiveCallbacks,
}

impl<'a> Collectives<'a> {
    pub(crate) fn new(exchange: &'a dyn Exchange) -> Self {
        Collectives {
            exchange,
            callbacks: ffi::OTF2_CollectiveCallbacks {
                otf2_release: None,
                otf2_get_size: Some(get_size),
                otf2_get_rank: Some(get_rank),
                otf2_create_local_comm: None,
                otf2_free_local_comm: None,
                otf2_barrier: Some(barrier),
                otf2_bcast: Some(bcast),
                otf2_gather: Some(gather),
                otf2_gatherv: Some(gatherv),
                otf2_scatter: Some(scatter),
                otf2_scatterv: Some(scatterv),
            },
        }
    }

    /// Sets the callbacks on `archive`; `self` must stay where it is until the archive is
    /// closed (it is boxed by its owner).
    pub(crate) fn install(&self, archive: *mut ffi::OTF2_Archive) -> ffi::OTF2_ErrorCode {
        let user = self as *const Collectives<'_> as *mut c_void;
        // SAFETY: `self` outlives the archive (its owner closes the archive first); libotf2
        // only passes the context pointers back to the callbacks, which ignore them.
        unsafe {
            ffi::OTF2_Archive_SetCollectiveCallbacks(
                archive,
                &self.callbacks,
                user,
                user as *mut ffi::OTF2_CollectiveContext,
                std::ptr::null_mut(),
            )
        }
    }
}

/// Bytes of one element of an OTF2 type (the integer and floating-point types libotf2 uses
/// in collectives, and the references, which are integers too).
fn element_size(kind: ffi::OTF2_Type) -> usize {
    match u32::from(kind) {
        ffi::OTF2_TYPE_UINT8 | ffi::OTF2_TYPE_INT8 => 1,
        ffi::OTF2_TYPE_UINT16 | ffi::OTF2_TYPE_INT16 => 2,
        ffi::OTF2_TYPE_UINT64
        | ffi::OTF2_TYPE_INT64
        | ffi::OTF2_TYPE_DOUBLE
        | ffi::OTF2_TYPE_LOCATION => 8,
        _ => 4,
    }
}

/// Runs a callback's body on the exchange, turning a panic into an error code.
fn guarded(user: *mut c_void, body: impl FnOnce(&dyn Exchange)) -> ffi::OTF2_CallbackCode {
    // SAFETY: `user` is the `Collectives` that `install` registered, alive while the archive is.
    let collectives = unsafe { &*(user as *const Collectives<'_>) };
    match catch_unwind(AssertUnwindSafe(|| body(collectives.exchange))) {
        Ok(()) => ffi::OTF2_CALLBACK_SUCCESS as ffi::OTF2_CallbackCode,
        Err(_) => ffi::OTF2_CALLBACK_ERROR as ffi::OTF2_CallbackCode,
    }
}

/// # Safety
/// `data` points to `len` readable bytes (or `len` is 0).
unsafe fn bytes<'b>(data: *const c_void, len: usize) -> &'b [u8] {
    if len == 0 || data.is_null() {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(data as *const u8, len) }
}

/// # Safety
/// `data` points to `bytes.len()` writable bytes (or `bytes` is empty).
unsafe fn copy_to(data: *mut c_void, bytes: &[u8]) {
    if !bytes.is_empty() && !data.is_null() {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data as *mut u8, bytes.len()) };
    }
}

unsafe extern "C" fn get_size(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
    size: *mut u32,
) -> ffi::OTF2_CallbackCode {
    // SAFETY: libotf2 passes a valid out-pointer.
    guarded(user, |e| unsafe { *size = e.processes() as u32 })
}

unsafe extern "C" fn get_rank(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
    rank: *mut u32,
) -> ffi::OTF2_CallbackCode {
    // SAFETY: libotf2 passes a valid out-pointer.
    guarded(user, |e| unsafe { *rank = e.process() as u32 })
}

unsafe extern "C" fn barrier(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
) -> ffi::OTF2_CallbackCode {
    guarded(user, |e| {
        e.all_to_all(vec![Vec::new(); e.processes()]);
    })
}

unsafe extern "C" fn bcast(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
    data: *mut c_void,
    elements: u32,
    kind: ffi::OTF2_Type,
    root: u32,
) -> ffi::OTF2_CallbackCode {
    let len = elements as usize * element_size(kind);
    guarded(user, |e| {
        let mine = match e.process() == root as usize {
            // SAFETY: the root's buffer holds `elements` elements.
            true => unsafe { bytes(data, len) }.to_vec(),
            false => Vec::new(),
        };
        let outgoing = vec![mine; e.processes()];
        let incoming = e.all_to_all(outgoing);
        if e.process() != root as usize {
            // SAFETY: every process's buffer holds `elements` elements.
            unsafe { copy_to(data, &incoming[root as usize][..len]) };
        }
    })
}

/// Everyone's `len` bytes (or the given lengths) to the root, which writes them in process order.
fn gather_to(e: &dyn Exchange, mine: &[u8], out: *mut c_void, root: usize) {
    let mut outgoing = vec![Vec::new(); e.processes()];
    outgoing[root] = mine.to_vec();
    let incoming = e.all_to_all(outgoing);
    if e.process() == root {
        let all: Vec<u8> = incoming.concat();
        // SAFETY: the root's output buffer holds every process's elements.
        unsafe { copy_to(out, &all) };
    }
}

unsafe extern "C" fn gather(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
    in_data: *const c_void,
    out_data: *mut c_void,
    elements: u32,
    kind: ffi::OTF2_Type,
    root: u32,
) -> ffi::OTF2_CallbackCode {
    let len = elements as usize * element_size(kind);
    guarded(user, |e| {
        // SAFETY: every process's input holds `elements` elements.
        gather_to(e, unsafe { bytes(in_data, len) }, out_data, root as usize)
    })
}

unsafe extern "C" fn gatherv(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
    in_data: *const c_void,
    in_elements: u32,
    out_data: *mut c_void,
    _out_elements: *const u32,
    kind: ffi::OTF2_Type,
    root: u32,
) -> ffi::OTF2_CallbackCode {
    let len = in_elements as usize * element_size(kind);
    guarded(user, |e| {
        // SAFETY: this process's input holds `in_elements` elements.
        gather_to(e, unsafe { bytes(in_data, len) }, out_data, root as usize)
    })
}

/// The root's pieces (by process) to each process, which writes its own.
fn scatter_from(e: &dyn Exchange, pieces: Vec<Vec<u8>>, out: *mut c_void, root: usize) {
    let mut outgoing = vec![Vec::new(); e.processes()];
    if e.process() == root {
        outgoing = pieces;
    }
    let incoming = e.all_to_all(outgoing);
    // SAFETY: each process's output buffer holds its piece.
    unsafe { copy_to(out, &incoming[root]) };
}

unsafe extern "C" fn scatter(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
    in_data: *const c_void,
    out_data: *mut c_void,
    elements: u32,
    kind: ffi::OTF2_Type,
    root: u32,
) -> ffi::OTF2_CallbackCode {
    let len = elements as usize * element_size(kind);
    guarded(user, |e| {
        let pieces = match e.process() == root as usize {
            // SAFETY: the root's input holds `elements` elements per process.
            true => unsafe { bytes(in_data, len * e.processes()) }
                .chunks(len.max(1))
                .map(<[u8]>::to_vec)
                .collect(),
            false => Vec::new(),
        };
        scatter_from(e, pieces, out_data, root as usize)
    })
}

unsafe extern "C" fn scatterv(
    user: *mut c_void,
    _context: *mut ffi::OTF2_CollectiveContext,
    in_data: *const c_void,
    in_elements: *const u32,
    out_data: *mut c_void,
    _out_elements: u32,
    kind: ffi::OTF2_Type,
    root: u32,
) -> ffi::OTF2_CallbackCode {
    let size = element_size(kind);
    guarded(user, |e| {
        let mut pieces = Vec::new();
        if e.process() == root as usize {
            // SAFETY: the root passes one count per process and that many elements.
            let counts = unsafe { std::slice::from_raw_parts(in_elements, e.processes()) };
            let total: usize = counts.iter().map(|&c| c as usize * size).sum();
            let mut all = unsafe { bytes(in_data, total) };
            for &count in counts {
                let (piece, rest) = all.split_at(count as usize * size);
                pieces.push(piece.to_vec());
                all = rest;
            }
        }
        scatter_from(e, pieces, out_data, root as usize)
    })
}
