//! Call sites for trace mode: the return address of the user's call into an MPI routine.
//!
//! Unwinding (glibc's `backtrace`) finds it reliably but costs microseconds per call. A wrapper's
//! stack frames have a fixed layout, though: from the same point in our code the user's return
//! address is always the same distance up the stack. So the first call of a routine unwinds, finds
//! where on the stack that address lies, and remembers the distance; later calls read that stack
//! slot and keep the value only if it is plausible (it points into the executable code of an object
//! that is neither this library nor libmpi, right after a call instruction). Anything else (a call
//! from another path, e.g. a Fortran binding, or a library loaded later) falls back to unwinding.

use std::ffi::{c_int, c_void, CStr};
use std::path::Path;

/// How far up the stack (bytes) a return address is looked for after unwinding.
const SCAN_BYTES: usize = 4096;

/// The most frames unwound looking for the user's call (this library's and libmpi's between).
const UNWIND_FRAMES: usize = 12;

/// `_Unwind_Reason_Code`s of the unwinder's backtrace callback: go on, stop.
const URC_NO_REASON: c_int = 0;
const URC_END_OF_STACK: c_int = 5;

// libgcc_s's unwinder (the Itanium C++ ABI's, which Rust's std links for panics too).
extern "C" {
    fn _Unwind_Backtrace(
        trace: extern "C" fn(context: *mut c_void, walk: *mut c_void) -> c_int,
        walk: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(context: *mut c_void) -> usize;
}

/// Executable code of a loaded object.
#[derive(Clone, Copy)]
struct Text {
    start: usize,
    end: usize,
    /// This library or libmpi: frames between the user's call and the tracing.
    internal: bool,
}

/// Where on the stack a routine's calls hold the user's return address, and the address last
/// found there: one per routine, kept in trace mode's per-routine table (whose fast path reads
/// it inline, [`Slot::cached`]) and set by [`CallSites::find`].
#[derive(Clone, Copy, Default)]
pub struct Slot {
    /// Distance from the traced wrapper's stack pointer to the stack slot (learned only within
    /// this thread's stack).
    offset: usize,
    /// The address last found there; 0: no slot known.
    site: usize,
}

impl Slot {
    /// The address last found in the slot (0: none known).
    pub fn site(&self) -> usize {
        self.site
    }

    /// The common case of [`CallSites::find`] (most calls come from a loop): the slot holds
    /// the routine's last call site again, a stack read and a comparison; `None` otherwise.
    /// `sp` is [`stack_pointer`] read in the routine's traced wrapper.
    #[inline(always)]
    pub fn cached(&self, sp: usize) -> Option<usize> {
        // SAFETY: a known slot's sp + offset is below the stack's end (checked when it was
        // learned), in this thread's own stack.
        (self.site != 0 && unsafe { *((sp + self.offset) as *const usize) } == self.site)
            .then_some(self.site)
    }
}

#[cfg(test)]
impl Slot {
    /// A slot `offset` bytes above the stack pointers the test passes, holding `site` (the test
    /// owns that memory).
    pub fn learned(offset: usize, site: usize) -> Slot {
        Slot { offset, site }
    }
}

/// What finding call sites needs to know: the loaded objects' code and the thread's stack.
pub struct CallSites {
    texts: Vec<Text>,
    /// One past the highest address of this thread's stack.
    stack_end: usize,
}

/// The stack pointer of the calling function's frame (inlined: read in the traced wrapper,
/// whose frame is the same for every call of its routine, so the remembered distances hold).
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register.
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register.
    unsafe {
        std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        sp = 0;
    }
    sp
}

/// One past the highest address of the calling thread's stack (0 if unknown).
fn stack_end() -> usize {
    // SAFETY: pthread_getattr_np fills attr for the calling thread; we destroy it after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 0;
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc == 0 {
            addr as usize + size
        } else {
            0
        }
    }
}

/// The loaded objects' executable segments.
fn texts() -> Vec<Text> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info; data is our Vec.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<Text>)) };
        let name = object_name(info);
        let own = own_object_base() == Some(info.dlpi_addr as usize);
        let internal = own
            || Path::new(&name)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libmpi"));
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        for ph in headers {
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
                out.push(Text {
                    start,
                    end: start + ph.p_memsz as usize,
                    internal,
                });
            }
        }
        0
    }
    let mut out: Vec<Text> = Vec::new();
    // SAFETY: the callback matches dl_iterate_phdr's contract and only touches `out`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<Text>).cast()) };
    out.sort_by_key(|t| t.start);
    out
}

/// The load address of this library.
fn own_object_base() -> Option<usize> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads its address argument and fills info.
    let found = unsafe { libc::dladdr(own_object_base as *const () as *const c_void, &mut info) };
    (found != 0).then_some(info.dli_fbase as usize)
}

impl Default for CallSites {
    /// For the calling thread's stack and the objects loaded now.
    fn default() -> CallSites {
        CallSites {
            texts: texts(),
            stack_end: stack_end(),
        }
    }
}

impl CallSites {
    fn text_of(&self, addr: usize) -> Option<Text> {
        let i = self.texts.partition_point(|t| t.end <= addr);
        self.texts.get(i).copied().filter(|t| t.start <= addr)
    }

    /// `addr` is a return address into user code: in a non-internal object's code, after a
    /// `call rel32` (E8) or `call [rip+disp32]` (FF 15).
    fn plausible(&self, addr: usize) -> bool {
        let Some(text) = self.text_of(addr) else {
            return false;
        };
        if text.internal || addr < text.start + 6 {
            return false;
        }
        // SAFETY: addr-6 .. addr lies inside the mapped, executable (readable) segment.
        let bytes = unsafe { std::slice::from_raw_parts((addr - 6) as *const u8, 6) };
        bytes[1] == 0xE8 || (bytes[0] == 0xFF && bytes[1] == 0x15)
    }

    /// The user's return address for a call of a routine whose [`Slot`] is `slot` (0 if none
    /// was found), `sp` being [`stack_pointer`] read in the routine's traced wrapper (the same
    /// for every call of the routine: the remembered distances are from it).
    #[inline(always)]
    pub fn find(&mut self, slot: &mut Slot, sp: usize) -> usize {
        match slot.cached(sp) {
            Some(site) => site,
            None => self.find_again(slot, sp),
        }
    }

    /// [`CallSites::find`] when the slot does not hold the last call site: check the new value,
    /// else unwind and learn where the return address lies.
    #[cold]
    #[inline(never)]
    fn find_again(&mut self, slot: &mut Slot, sp: usize) -> usize {
        if slot.site != 0 {
            // SAFETY: as in `Slot::cached`.
            let value = unsafe { *((sp + slot.offset) as *const usize) };
            if self.plausible(value) {
                slot.site = value;
                return value;
            }
        }
        let site = self.unwind();
        *slot = self
            .learn(sp, site)
            .map_or_else(Slot::default, |offset| Slot { offset, site });
        site
    }

    /// The first return address outside this library and libmpi, by unwinding: frame by frame,
    /// stopping there. Unwinding further (glibc's `backtrace` takes every frame up to `_start`)
    /// reads the unwind tables of the objects below the user's code, libc's among them: 64 KiB
    /// chunks of its `.eh_frame_hdr` and `.eh_frame` that a rank then keeps resident (+60-114 kB
    /// of VmRSS, docs/footprint.md, "tracerss2").
    fn unwind(&mut self) -> usize {
        struct Walk<'a> {
            sites: &'a mut CallSites,
            frames_left: usize,
            reloaded: bool,
            site: usize,
        }
        extern "C" fn each(context: *mut c_void, walk: *mut c_void) -> c_int {
            // SAFETY: `walk` is the `Walk` passed to _Unwind_Backtrace below, alive during it.
            let walk = unsafe { &mut *(walk as *mut Walk) };
            // SAFETY: `context` is the unwinder's context of the frame being visited.
            let address = unsafe { _Unwind_GetIP(context) };
            let mut text = walk.sites.text_of(address);
            if text.is_none() && !walk.reloaded {
                // Code we do not know: a library loaded since.
                walk.sites.texts = texts();
                walk.reloaded = true;
                text = walk.sites.text_of(address);
            }
            walk.frames_left -= 1;
            if text.is_some_and(|t| !t.internal) {
                walk.site = address;
                return URC_END_OF_STACK;
            }
            if walk.frames_left == 0 {
                URC_END_OF_STACK
            } else {
                URC_NO_REASON
            }
        }
        let mut walk = Walk {
            sites: self,
            frames_left: UNWIND_FRAMES,
            reloaded: false,
            site: 0,
        };
        // SAFETY: `each` matches the unwinder's callback contract and only touches `walk`.
        unsafe { _Unwind_Backtrace(each, (&mut walk as *mut Walk).cast()) };
        walk.site
    }

    /// Where on the stack above `sp` the return address `site` lies: the highest copy, as the
    /// frames below the wrapper's (ours, the unwinder's) may hold stale copies of it, while the
    /// user's frames above it cannot (every call from that instruction pushes it to that slot).
    fn learn(&self, sp: usize, site: usize) -> Option<usize> {
        if site == 0 || sp == 0 || !self.plausible(site) {
            return None;
        }
        let end = self.stack_end.min(sp.saturating_add(SCAN_BYTES));
        (sp..end.saturating_sub(7))
            .step_by(std::mem::size_of::<usize>())
            // SAFETY: every address read lies in this thread's stack, between sp and its end.
            .rev()
            .find(|&a| unsafe { *(a as *const usize) } == site)
            .map(|a| a - sp)
    }
}

/// The path of a loaded object as `dl_iterate_phdr` reports it ("" for the main program).
pub(crate) fn object_name(info: &libc::dl_phdr_info) -> String {
    if info.dlpi_name.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated path from the loader.
    unsafe { CStr::from_ptr(info.dlpi_name) }
        .to_string_lossy()
        .into_owned()
}
