//! The wrappers' clock: the invariant TSC where the CPU has one (about 10 ns a read), else
//! `CLOCK_MONOTONIC`. Ticks are converted to nanoseconds with a rate measured between the start
//! of `MPI_Init` (before the real call) and the moment of conversion, from two [`Anchor`]s,
//! each a tick read bracketed by two monotonic reads. The choice is made at the first read;
//! that the clock is the TSC is the wrappers' switch [`gates::TSC`].

use crate::gates;
use std::sync::atomic::{AtomicBool, Ordering};

/// The clock is `CLOCK_MONOTONIC` (the choice made, and it is not the TSC).
static MONOTONIC: AtomicBool = AtomicBool::new(false);

/// Current time in ticks of the chosen clock.
#[inline(always)]
pub fn ticks() -> u64 {
    if gates::is_on(gates::TSC) {
        return tsc_ticks();
    }
    ticks_without_tsc()
}

/// The TSC, where [`gates::TSC`] is known to be on (a wrapper's counting copy: [`gates::plain`]).
/// Its two halves are joined here, in one `asm!`: with `_rdtsc()` the compiler moves the join
/// after the wrapper's call into MPI, and keeps both halves of the call's start across that
/// call, in two callee-saved registers where one does (bench/instructions.sh: a push, a pop and
/// moves in every wrapper).
#[inline(always)]
pub fn tsc_ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let t: u64;
        // SAFETY: rdtsc has no preconditions; the TSC is chosen only on CPUs with an invariant
        // TSC. The asm reads no memory and uses no stack; it writes rax, rdx and the flags.
        unsafe {
            std::arch::asm!(
                "rdtsc",
                "shl rdx, 32",
                "or rax, rdx",
                out("rax") t,
                out("rdx") _,
                options(nomem, nostack),
            );
        }
        t
    }
    #[cfg(not(target_arch = "x86_64"))]
    ticks()
}

/// [`ticks`] when the clock is not (yet) the TSC. Out of line, so that each wrapper's code holds
/// only the `rdtsc` path: fewer instruction-cache lines a call, which counts where the MPI's
/// own code of a call evicts ours (MPICH's collectives: callgrind's cache simulation). With the
/// hot code, as the monotonic clock is every call's there.
#[cold]
#[inline(never)]
#[link_section = ".text.hot.mpistat"]
fn ticks_without_tsc() -> u64 {
    if MONOTONIC.load(Ordering::Relaxed) {
        monotonic_ns()
    } else {
        decide()
    }
}

#[cold]
fn decide() -> u64 {
    let tsc = invariant_tsc() && std::env::var_os("MPISTAT_CLOCK").is_none_or(|v| v != "monotonic");
    if tsc {
        gates::set(gates::TSC, true);
    } else {
        MONOTONIC.store(true, Ordering::Relaxed);
    }
    ticks()
}

#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    let max_ext = core::arch::x86_64::__cpuid(0x8000_0000).eax;
    max_ext >= 0x8000_0007 && (core::arch::x86_64::__cpuid(0x8000_0007).edx >> 8) & 1 == 1
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A pair of simultaneous readings of the tick clock and the monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct Anchor {
    pub ticks: u64,
    pub ns: u64,
}

/// How many brackets [`Anchor::now`] tries at most, and a width it takes at once.
const BRACKETS: usize = 8;
const TIGHT_NS: u64 = 2_000;

impl Anchor {
    /// The two clocks now: the narrowest of a few brackets (monotonic, ticks, monotonic), its
    /// midpoint the monotonic time of the tick read. A thread descheduled between a plain pair of
    /// reads (milliseconds on a busy node) skewed the pair by that long, and a rate measured from
    /// such an anchor over a short job by as much: a rank's wall time once came out 494 ms in a
    /// job that took 400 (issue 33).
    pub fn now() -> Anchor {
        Anchor::read(ticks, monotonic_ns)
    }

    fn read(ticks: impl Fn() -> u64, ns: impl Fn() -> u64) -> Anchor {
        let mut best = (u64::MAX, Anchor { ticks: 0, ns: 0 });
        for _ in 0..BRACKETS {
            let before = ns();
            let t = ticks();
            let after = ns();
            let width = after.saturating_sub(before);
            if width < best.0 {
                best = (
                    width,
                    Anchor {
                        ticks: t,
                        ns: before + width / 2,
                    },
                );
            }
            if width <= TIGHT_NS {
                break;
            }
        }
        best.1
    }

    /// Nanoseconds per tick measured from `self` to `later` (1.0 for the monotonic clock or when
    /// too little time passed to tell).
    pub fn ns_per_tick(&self, later: &Anchor) -> f64 {
        if !gates::is_on(gates::TSC) {
            return 1.0;
        }
        let dt = later.ticks.saturating_sub(self.ticks);
        let dn = later.ns.saturating_sub(self.ns);
        if dt == 0 || dn < 1_000_000 {
            return tsc_rate_guess();
        }
        dn as f64 / dt as f64
    }
}

/// Nanoseconds per TSC tick measured over a short busy interval (used when the run was too short
/// for its anchors to give a rate).
fn tsc_rate_guess() -> f64 {
    let a = Anchor::now();
    let mut b = Anchor::now();
    while b.ns - a.ns < 2_000_000 {
        b = Anchor::now();
    }
    (b.ns - a.ns) as f64 / (b.ticks - a.ticks).max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// An anchor read on a timeline where every read takes 30 ns and the thread is descheduled
    /// for `stall` ns right after opening each of the first `stalled` brackets; the ticks are the
    /// timeline's nanoseconds. Returns the anchor's error: its nanoseconds less the time of its
    /// tick read.
    fn anchor_error(stalled: usize, stall: u64) -> u64 {
        let now = Cell::new(1_000_000u64);
        let monotonic_reads = Cell::new(0usize);
        let ns = || {
            let n = monotonic_reads.get();
            monotonic_reads.set(n + 1);
            now.set(now.get() + 30);
            let read = now.get();
            if n.is_multiple_of(2) && n / 2 < stalled {
                now.set(now.get() + stall);
            }
            read
        };
        let ticks = || {
            now.set(now.get() + 30);
            now.get()
        };
        let anchor = Anchor::read(ticks, ns);
        anchor.ns.abs_diff(anchor.ticks)
    }

    #[test]
    fn an_anchor_is_the_time_of_its_tick_read_even_when_a_read_pair_is_split_by_a_stall() {
        for stalled in [0, 1, 3, BRACKETS - 1] {
            let error = anchor_error(stalled, 5_000_000);
            assert!(error <= 30, "{stalled} stalled brackets: {error} ns off");
        }
    }
}
