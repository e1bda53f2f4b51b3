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
//! Every slot starts at a lazy stub; the process's first call of any export runs
//! [`resolve::resolve`] once, which fills every slot: with the implementation of the one MPI
//! family loaded in the process, or, when there is none, several, or anything goes wrong, with
//! the next definition after this library (pass-through). Nothing happens at load time: a
//! process that never calls MPI (bash, python) never loads an implementation, opens no file and
//! calls no `dlopen`.
//!
//! Modules: `known` (the families and the front/implementation contract, shared with the
//! profiler), `generated` (the exported names), `resolve` (the first call), the trampolines
//! below.

// The exports are MPI's names; their safety contract is the MPI standard's.
#![allow(non_snake_case, clippy::missing_safety_doc)]

#[cfg(not(target_arch = "x86_64"))]
compile_error!("the front's trampolines are written for x86_64 only");

mod generated;
// The front uses the families and the contract, not everything the profiler does with them.
#[allow(dead_code)]
#[path = "../../profiler/src/family/known.rs"]
mod known;
mod resolve;

use std::ffi::c_void;
use std::sync::atomic::AtomicPtr;

/// Defines, for the names given: a slot each ([`SLOTS`], [`Slot`], [`NAMES`]), its lazy stub
/// (module `lazy`), and the exported trampoline.
macro_rules! trampolines {
    ($($name:ident)*) => {
        /// Each exported name's index in [`SLOTS`] and [`NAMES`].
        #[allow(non_camel_case_types, dead_code)]
        #[repr(usize)]
        enum Slot {
            $($name,)*
        }

        /// Every exported name, NUL-terminated, in slot order.
        const NAMES: &[&str] = &[$(concat!(stringify!($name), "\0"),)*];

        /// Where each export jumps: its lazy stub until [`resolve::resolve`] ran, then the
        /// implementation's routine or the next definition.
        static SLOTS: [AtomicPtr<c_void>; NAMES.len()] =
            [$(AtomicPtr::new(lazy::$name as *mut c_void),)*];

        /// Each slot's lazy stub (what a slot still holds if nothing defines its name).
        const LAZY: [unsafe extern "C" fn(); NAMES.len()] = [$(lazy::$name,)*];

        /// The lazy stubs: each puts its slot index in `%r11` (a scratch register that carries
        /// no argument) and goes to [`lazy_common`].
        mod lazy {
            $(
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
            )*
        }

        $(
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!(
                    "jmp *({slots} + {offset})(%rip)",
                    slots = sym SLOTS,
                    offset = const 8 * Slot::$name as usize,
                    options(att_syntax),
                )
            }
        )*
    };
}

generated::spec_names!(trampolines! { PMIx_Fence PMIx_Fence_nb });

/// Reached by a jump from a lazy stub, i.e. at a routine's entry with the caller's arguments in
/// place and the slot index in `%r11`: saves every register that may carry an argument (`%rdi`,
/// `%rsi`, `%rdx`, `%rcx`, `%r8`, `%r9`, `%rax` = the vector-register count of a variadic call,
/// `%xmm0`-`%xmm7`), calls [`resolve::resolve`] with the 16-byte aligned stack the ABI wants,
/// restores them all and jumps where it returned: the routine runs as if called directly.
#[unsafe(naked)]
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
        "mov %r11d, %edi",
        "call {resolve}",
        "mov %rax, %r11",
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
        options(att_syntax),
    )
}
