//! libmpistat: the front library, the one a site preloads (`LD_PRELOAD`) or links (`-lmpistat`)
//! into every process, whatever MPI the process uses.
//!
//! The profiler is compiled once per MPI family (the handle types and the status layout of
//! `mpi.h` differ) into an implementation, `libmpistat_<family>.so`, installed next to this
//! library. This library exports `MPI_X` and `PMPI_X` for every routine of the spec table
//! (`generated.rs`, made by `mpistat-wrapgen`), and `PMIx_Fence`/`PMIx_Fence_nb` (which the
//! Open MPI implementation interposes on, see `profiler/src/peers.rs`). Each export is a
//! trampoline, `jmp *slot(%rip)`: registers, stack and `%al` (variadic calls) untouched, so it is
//! right for every signature and costs one indirect jump.
//!
//! Every slot starts at a lazy stub; each export's first call runs [`resolve::resolve`], which
//! fills its slot (the process's first call also chooses, once, for all): with the implementation
//! of the one MPI family loaded in the process, or, when there is none, several, or anything goes
//! wrong, with the next definition after this library (pass-through). Nothing happens at load
//! time: a process that never calls MPI (bash, python) never loads an implementation, opens no
//! file and calls no `dlopen`.
//!
//! Modules: `generated` (the exported names), `resolve` (each export's first call; the families
//! and the contract it follows are crate `mpistat-abi`, shared with the profilers), the
//! trampolines below.

// The exports are MPI's names; their safety contract is the MPI standard's.
#![allow(non_snake_case, clippy::missing_safety_doc)]

#[cfg(not(target_arch = "x86_64"))]
compile_error!("the front's trampolines are written for x86_64 only");

mod generated;
mod resolve;

use std::ffi::c_void;
use std::sync::atomic::AtomicPtr;

/// Defines, for the names given (the hot routines', then the others): a slot each ([`SLOTS`],
/// [`Slot`], [`names::name`]), its lazy stub (module `lazy`), and the exported trampoline, the
/// hot ones' first (`.text.trampolines.hot`, front/trampolines.ld).
macro_rules! trampolines {
    ($($hot:ident)* ; $($cold:ident)*) => {
        /// Each exported name's index in [`SLOTS`] and [`names::name`].
        #[allow(non_camel_case_types, dead_code)]
        #[repr(usize)]
        enum Slot {
            $($hot,)* $($cold,)*
        }

        /// Every exported name, each followed by a NUL, in slot order.
        const NAMES_TEXT: &str = concat!($(stringify!($hot), "\0",)* $(stringify!($cold), "\0",)*);

        /// Where each export jumps: its lazy stub until [`resolve::resolve`] ran for it, then
        /// the implementation's routine or the next definition.
        static SLOTS: [AtomicPtr<c_void>; names::COUNT] =
            [$(AtomicPtr::new(lazy::$hot as *mut c_void),)* $(AtomicPtr::new(lazy::$cold as *mut c_void),)*];

        /// The lazy stubs: each puts its slot index in `%r11` (a scratch register that carries
        /// no argument) and goes to [`lazy_common`].
        mod lazy {
            $(lazy_stub!($hot);)*
            $(lazy_stub!($cold);)*
        }

        $(trampoline!($hot, ".text.trampolines.hot");)*
        $(trampoline!($cold, ".text.trampolines");)*
    };
}

/// A lazy stub (see [`trampolines`]), in module `lazy`.
macro_rules! lazy_stub {
    ($name:ident) => {
        #[unsafe(naked)]
        pub(super) unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                "mov ${index}, %r11d",
                "jmp {common}",
                index = const super::Slot::$name as u32,
                common = sym super::lazy_common,
                options(att_syntax),
            )
        }
    };
}

/// The exported trampoline of `$name`, in `$section`.
macro_rules! trampoline {
    ($name:ident, $section:literal) => {
        #[unsafe(naked)]
        #[no_mangle]
        #[link_section = $section]
        pub unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                "jmp *({slots} + {offset})(%rip)",
                slots = sym SLOTS,
                offset = const 8 * Slot::$name as usize,
                options(att_syntax),
            )
        }
    };
}

generated::spec_names!(trampolines! { PMIx_Fence PMIx_Fence_nb });

/// The exported names as data that needs no relocation: one text and the offset of each name in
/// it. A table of string slices would be a pointer per name for the loader to relocate at every
/// process's start (this library is preloaded into every process, bash and python included), in
/// pages that then stay private to each process.
mod names {
    use std::ffi::CStr;

    /// How many names (each ends with the text's only NUL after it).
    pub(crate) const COUNT: usize = count(super::NAMES_TEXT.as_bytes());

    /// Where each name starts in the text.
    const STARTS: [u32; COUNT] = starts(super::NAMES_TEXT.as_bytes());

    const fn count(text: &[u8]) -> usize {
        let (mut i, mut n) = (0, 0);
        while i < text.len() {
            if text[i] == 0 {
                n += 1;
            }
            i += 1;
        }
        n
    }

    const fn starts(text: &[u8]) -> [u32; COUNT] {
        let mut starts = [0u32; COUNT];
        let (mut i, mut n) = (0, 1);
        while i + 1 < text.len() {
            if text[i] == 0 {
                starts[n] = (i + 1) as u32;
                n += 1;
            }
            i += 1;
        }
        starts
    }

    /// The name of slot `i`.
    pub(crate) fn name(i: usize) -> &'static CStr {
        let text = super::NAMES_TEXT.as_bytes();
        CStr::from_bytes_until_nul(&text[STARTS[i] as usize..]).expect("every name ends with a NUL")
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn each_slot_has_its_own_name() {
            use crate::Slot;
            for (slot, expected) in [
                (Slot::PMIx_Fence as usize, "PMIx_Fence"),
                (Slot::PMIx_Fence_nb as usize, "PMIx_Fence_nb"),
                (Slot::MPI_Send as usize, "MPI_Send"),
                (Slot::PMPI_Send as usize, "PMPI_Send"),
            ] {
                assert_eq!(super::name(slot).to_str(), Ok(expected));
            }
            let last = super::COUNT - 1;
            assert!(
                super::name(last).to_bytes().starts_with(b"PMPI_"),
                "{:?}",
                super::name(last)
            );
            assert_eq!(super::COUNT, crate::SLOTS.len());
            let distinct: std::collections::HashSet<_> =
                (0..super::COUNT).map(super::name).collect();
            assert_eq!(distinct.len(), super::COUNT);
        }
    }
}

/// Reached by a jump from a lazy stub, i.e. at a routine's entry with the caller's arguments in
/// place and the slot index in `%r11`: saves every register that may carry an argument (`%rdi`,
/// `%rsi`, `%rdx`, `%rcx`, `%r8`, `%r9`, `%rax` = the vector-register count of a variadic call,
/// `%xmm0`-`%xmm7`), calls [`resolve::resolve`] with the 16-byte aligned stack the ABI wants,
/// restores them all and jumps where it returned: the routine runs as if called directly. In
/// between it calls the implementation's `abi::BOUND` ([`resolve::BOUND`], if any), which drops
/// the read-only pages this first call mapped, this library's `.text` among them: so this code is
/// with the hot trampolines, whose page stays resident anyway, and `resolve` has returned by then.
/// Before `resolve` it calls the implementation's `abi::FIRST_CALL` ([`resolve::FIRST_CALL`], if
/// any), so that the implementation counts all of this as time in MPI.
#[unsafe(naked)]
#[link_section = ".text.trampolines.hot"]
unsafe extern "C" fn lazy_common() {
    core::arch::naked_asm!(
        // At entry %rsp = 8 (mod 16); after %rbp and 7 registers it is 8, after 136 bytes 0.
        "push %rbp",
        "mov %rsp, %rbp",
        "push %rdi",
        "push %rsi",
        "push %rdx",
        "push %rcx",
        "push %r8",
        "push %r9",
        "push %rax",
        "sub $136, %rsp",
        "movaps %xmm0, 0(%rsp)",
        "movaps %xmm1, 16(%rsp)",
        "movaps %xmm2, 32(%rsp)",
        "movaps %xmm3, 48(%rsp)",
        "movaps %xmm4, 64(%rsp)",
        "movaps %xmm5, 80(%rsp)",
        "movaps %xmm6, 96(%rsp)",
        "movaps %xmm7, 112(%rsp)",
        // The slot index in the stack's free 8 bytes (128..136) while the first hook runs.
        "mov %r11, 128(%rsp)",
        "mov {first_call}(%rip), %rax",
        "test %rax, %rax",
        "jz 1f",
        "call *%rax",
        "1:",
        "movl 128(%rsp), %edi",
        "call {resolve}",
        // The target in the stack's free 8 bytes (128..136) while the hook runs.
        "mov %rax, 128(%rsp)",
        "mov {bound}(%rip), %rax",
        "test %rax, %rax",
        "jz 2f",
        "call *%rax",
        "2:",
        "mov 128(%rsp), %r11",
        "movaps 0(%rsp), %xmm0",
        "movaps 16(%rsp), %xmm1",
        "movaps 32(%rsp), %xmm2",
        "movaps 48(%rsp), %xmm3",
        "movaps 64(%rsp), %xmm4",
        "movaps 80(%rsp), %xmm5",
        "movaps 96(%rsp), %xmm6",
        "movaps 112(%rsp), %xmm7",
        "add $136, %rsp",
        "pop %rax",
        "pop %r9",
        "pop %r8",
        "pop %rcx",
        "pop %rdx",
        "pop %rsi",
        "pop %rdi",
        "pop %rbp",
        "jmp *%r11",
        resolve = sym resolve::resolve,
        bound = sym resolve::BOUND,
        first_call = sym resolve::FIRST_CALL,
        options(att_syntax),
    )
}
