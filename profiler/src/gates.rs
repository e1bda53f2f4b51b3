//! The switches that choose a wrapper's path, in one byte: whether counting is on, whether the
//! clock is the TSC, whether per-call counter reads are on, and whether trace mode is on.
//!
//! Every exported wrapper tests them once, as one load and one compare ([`plain`]): in the
//! common case (counting, TSC, neither per-call reads nor a trace) it runs the counting copy,
//! which tests none of them again; otherwise the general copy, out of line, which tests each.
//! Kept apart, the four were six loads and branches a call (counting and the trace at entry, the
//! clock and per-call reads before and after the real call). On the critical path of a
//! synchronising call every instruction between MPI's return and its next call counts (a rank
//! waits for the other's): in the bench's in-job A/B, dropping three of those tests alone took
//! about 2 ns off each `MPI_Allreduce` and `MPI_Barrier` and 1 ns off each ping-pong call.
//!
//! Setting a switch is an atomic read-modify-write of its bit, so switches set by different
//! threads (a trace starting while `MPI_Pcontrol` pauses counting) never undo each other.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

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

/// The switches' byte.
struct Gates(AtomicU8);

impl Gates {
    #[inline(always)]
    fn plain(&self) -> bool {
        self.0.load(Relaxed) == COUNTING | TSC
    }

    #[inline(always)]
    fn is_on(&self, gate: u8) -> bool {
        self.0.load(Relaxed) & gate != 0
    }

    fn set(&self, gate: u8, on: bool) -> bool {
        let before = if on {
            self.0.fetch_or(gate, Relaxed)
        } else {
            self.0.fetch_and(!gate, Relaxed)
        };
        before & gate != 0
    }
}

static GATES: Gates = Gates(AtomicU8::new(0));

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

/// Turn switch `gate` on or off; returns whether it was on.
pub fn set(gate: u8, on: bool) -> bool {
    GATES.set(gate, on)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_counting_on_the_tsc_is_plain_and_each_switch_is_its_own() {
        let gates = Gates(AtomicU8::new(0));
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
}
