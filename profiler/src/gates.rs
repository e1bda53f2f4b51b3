//! The switches that choose a wrapper's path, in one byte: whether counting is on, whether the
//! clock is the TSC, whether per-call counter reads are on, and whether trace mode is on.
//!
//! Every exported wrapper tests them once, with the calling thread, as one load and one compare
//! ([`plain_on`]): in the common case (counting, TSC, neither per-call reads nor a trace, on the
//! thread that called `MPI_Init`) it runs the counting copy,
//! which tests none of them again; otherwise the general copy, out of line, which tests each.
//! Kept apart, the four were six loads and branches a call (counting and the trace at entry, the
//! clock and per-call reads before and after the real call). On the critical path of a
//! synchronising call every instruction between MPI's return and its next call counts (a rank
//! waits for the other's): in the bench's in-job A/B, dropping three of those tests alone took
//! about 2 ns off each `MPI_Allreduce` and `MPI_Barrier` and 1 ns off each ping-pong call.
//!
//! Setting a switch is an atomic read-modify-write of its bit, so switches set by different
//! threads (a trace starting while `MPI_Pcontrol` pauses counting) never undo each other.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};

/// Counting is on: the process's MPI is the family the library was built for (decided at its
/// first MPI call, see [`crate::family`]), the site enabled profiling, and `MPI_Pcontrol(0)` has
/// not paused it. Off until that first call.
pub const COUNTING: u8 = 1;
/// The clock is the TSC ([`crate::clock`]), decided at the first clock read.
pub const TSC: u8 = 2;
/// Per-call counter reads are on ([`crate::counters`]: mode `per-call` and an event opened).
pub const PER_CALL: u8 = 4;
/// Trace mode records this process's calls ([`crate::trace`]), from `MPI_Init` to `MPI_Finalize`.
pub const TRACE: u8 = 8;

/// The switches' byte, and the thread that takes the counting copies.
struct Gates {
    bits: AtomicU8,
    /// The thread pointer of the thread that called `MPI_Init` (`crate::rt`'s claim), 0 if none.
    main_thread: AtomicUsize,
    /// `main_thread` while the switches are plain, else 0: an exported wrapper's one test, a
    /// load and a compare with the calling thread's pointer ([`plain_on`]), covers both the
    /// switches and the thread (the counting copies run on the claimed thread only), where it
    /// was a test of the switches, then one of the thread (bench/instructions.sh: 4
    /// instructions a call fewer on every routine).
    plain_thread: AtomicUsize,
}

impl Gates {
    const fn new() -> Gates {
        Gates {
            bits: AtomicU8::new(0),
            main_thread: AtomicUsize::new(0),
            plain_thread: AtomicUsize::new(0),
        }
    }

    #[inline(always)]
    fn plain(&self) -> bool {
        self.bits.load(Relaxed) == COUNTING | TSC
    }

    #[inline(always)]
    fn is_on(&self, gate: u8) -> bool {
        self.bits.load(Relaxed) & gate != 0
    }

    #[inline(always)]
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn plain_on(&self, thread: usize) -> bool {
        thread == self.plain_thread.load(Relaxed)
    }

    fn set(&self, gate: u8, on: bool) -> bool {
        let before = if on {
            self.bits.fetch_or(gate, SeqCst)
        } else {
            self.bits.fetch_and(!gate, SeqCst)
        };
        self.refresh_plain_thread();
        before & gate != 0
    }

    fn set_main_thread(&self, thread: usize) {
        self.main_thread.store(thread, SeqCst);
        self.refresh_plain_thread();
    }

    /// Make `plain_thread` agree with the switches and `main_thread` after either changed. No
    /// lock (a signal handler may change a switch while this thread is here): whoever stored
    /// last reads both again, and stores again if one changed meanwhile, so the last store
    /// agrees with the last change.
    fn refresh_plain_thread(&self) {
        loop {
            let (bits, main) = (self.bits.load(SeqCst), self.main_thread.load(SeqCst));
            let plain_thread = if bits == COUNTING | TSC { main } else { 0 };
            self.plain_thread.store(plain_thread, SeqCst);
            if self.bits.load(SeqCst) == bits && self.main_thread.load(SeqCst) == main {
                return;
            }
        }
    }
}

static GATES: Gates = Gates::new();

/// The common case: counting, on the TSC, with neither per-call reads nor a trace.
#[inline(always)]
pub fn plain() -> bool {
    GATES.plain()
}

/// Whether switch `gate` is on.
#[inline(always)]
pub fn is_on(gate: u8) -> bool {
    GATES.is_on(gate)
}

/// Whether the thread whose pointer is `thread` takes the counting copies: the switches are
/// [`plain`] and it is the claimed thread ([`set_main_thread`]).
#[inline(always)]
#[cfg(not(target_arch = "x86_64"))]
pub fn plain_on(thread: usize) -> bool {
    GATES.plain_on(thread)
}

/// [`Gates::plain_on`] of [`GATES`] as one compare of `thread` with the memory that holds
/// `plain_thread` and one branch: the compiler does not fold an atomic load into the compare
/// (a load into a register, then the compare: one instruction a call more on every routine,
/// bench/instructions.sh). The same read as a relaxed atomic load (an aligned word; other
/// threads and signal handlers only store it whole).
#[inline(always)]
#[cfg(target_arch = "x86_64")]
pub fn plain_on(thread: usize) -> bool {
    // SAFETY: reads the aligned word `GATES.plain_thread` (a static: its address is fixed), and
    // writes nothing; the label is a plain jump.
    unsafe {
        std::arch::asm!(
            "cmp {thread}, qword ptr [rip + {gates} + {at}]",
            "jne {other}",
            thread = in(reg) thread,
            gates = sym GATES,
            at = const std::mem::offset_of!(Gates, plain_thread),
            other = label { return false },
            options(nostack, readonly),
        );
    }
    true
}

/// Turn switch `gate` on or off; returns whether it was on.
pub fn set(gate: u8, on: bool) -> bool {
    GATES.set(gate, on)
}

/// The claimed thread is now the one whose pointer is `thread` (0: none).
pub fn set_main_thread(thread: usize) {
    GATES.set_main_thread(thread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_counting_on_the_tsc_is_plain_and_each_switch_is_its_own() {
        let gates = Gates::new();
        let all = [COUNTING, TSC, PER_CALL, TRACE];
        for subset in 0u8..16 {
            for (i, gate) in all.iter().enumerate() {
                gates.set(*gate, subset & (1 << i) != 0);
            }
            for (i, gate) in all.iter().enumerate() {
                assert_eq!(gates.is_on(*gate), subset & (1 << i) != 0);
            }
            assert_eq!(
                gates.plain(),
                subset == COUNTING | TSC,
                "switches {subset:04b}"
            );
        }
        assert!(gates.set(TRACE, false));
        assert!(!gates.set(TRACE, false));
    }

    #[test]
    fn only_the_claimed_thread_takes_the_counting_copies_and_only_while_plain() {
        let gates = Gates::new();
        let (main, other) = (0x7f00_0000_1000, 0x7f00_0000_2000);
        gates.set(COUNTING, true);
        gates.set(TSC, true);
        // No thread claimed: none (not even a thread pointer of 0, which none has).
        assert!(!gates.plain_on(main) && !gates.plain_on(other));
        gates.set_main_thread(main);
        assert!(gates.plain_on(main) && !gates.plain_on(other));
        for gate in [PER_CALL, TRACE] {
            gates.set(gate, true);
            assert!(!gates.plain_on(main), "switch {gate} on");
            gates.set(gate, false);
            assert!(gates.plain_on(main), "switch {gate} off again");
        }
        for gate in [COUNTING, TSC] {
            gates.set(gate, false);
            assert!(!gates.plain_on(main), "switch {gate} off");
            gates.set(gate, true);
        }
        gates.set_main_thread(0);
        assert!(!gates.plain_on(main));
    }
}
