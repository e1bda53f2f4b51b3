//! The wrappers' clock: the invariant TSC where the CPU has one (about 10 ns a read), else
//! `CLOCK_MONOTONIC`. Ticks are converted to nanoseconds with a rate measured between `MPI_Init`
//! and the moment of conversion. The choice is made at the first read; that the clock is the TSC
//! is the wrappers' switch [`gates::TSC`].

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

impl Anchor {
    pub fn now() -> Anchor {
        Anchor {
            ticks: ticks(),
            ns: monotonic_ns(),
        }
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
/// for the Init..Finalize anchors to give a rate).
fn tsc_rate_guess() -> f64 {
    let a = Anchor::now();
    let mut b = Anchor::now();
    while b.ns - a.ns < 2_000_000 {
        b = Anchor::now();
    }
    (b.ns - a.ns) as f64 / (b.ticks - a.ticks).max(1) as f64
}
