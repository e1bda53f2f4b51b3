//! The split of counter values into the application part and the MPI part (Rabenseifner,
//! "Automatic MPI Counter Profiling", Sec. VIII), written for both counter interfaces of the
//! paper: "read" (counters run like a clock) and "read-out" (each read returns the count since
//! the previous read and resets it). Pure arithmetic over a [`Backend`]'s values, unit-tested
//! against a fake backend ([`super`]'s tests).

use crate::generated::routines::N_ROUTINES;

/// How a counter interface behaves when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    /// Cumulative, like a clock.
    Read,
    /// Each read returns the events since the previous read (the counter is reset).
    ReadOut,
}

/// A source of counter values: one value per event.
pub trait Backend: Send {
    fn semantics(&self) -> Semantics;
    /// Read every event into `out`; false if the read failed.
    fn read(&mut self, out: &mut [u64]) -> bool;
}

/// The split of `n` events into application and MPI parts, total and per MPI routine.
#[derive(Clone, Debug)]
pub struct Split {
    sem: Semantics,
    pub app: Vec<u64>,
    pub mpi: Vec<u64>,
    /// Values at the start of the current call (read semantics).
    call_start: Vec<u64>,
    /// `N_ROUTINES` × n events, allocated on the first call.
    pub per_routine: Vec<u64>,
    n: usize,
}

impl Split {
    pub fn new(sem: Semantics, n: usize) -> Split {
        Split {
            sem,
            app: vec![0; n],
            mpi: vec![0; n],
            call_start: vec![0; n],
            per_routine: Vec::new(),
            n,
        }
    }

    /// Counting starts with the counter values `c`.
    pub fn begin(&mut self, c: &[u64]) {
        if self.sem == Semantics::Read {
            for (a, v) in self.app.iter_mut().zip(c) {
                *a = a.wrapping_sub(*v);
            }
        }
    }

    /// An MPI call starts; the counters read `c`.
    pub fn before_call(&mut self, c: &[u64]) {
        match self.sem {
            Semantics::Read => self.call_start.copy_from_slice(c),
            Semantics::ReadOut => {
                for (a, v) in self.app.iter_mut().zip(c) {
                    *a = a.wrapping_add(*v);
                }
            }
        }
    }

    /// The call of routine `id` ended; the counters read `c`.
    pub fn after_call(&mut self, id: usize, c: &[u64]) {
        if self.per_routine.is_empty() {
            self.per_routine = vec![0; N_ROUTINES * self.n];
        }
        for (e, &v) in c.iter().enumerate().take(self.n) {
            let delta = match self.sem {
                Semantics::Read => v.wrapping_sub(self.call_start[e]),
                Semantics::ReadOut => v,
            };
            self.mpi[e] = self.mpi[e].wrapping_add(delta);
            let r = &mut self.per_routine[id * self.n + e];
            *r = r.wrapping_add(delta);
        }
    }

    /// Counting ends with the counter values `c`: the application part is what MPI did not take.
    pub fn end(&mut self, c: &[u64]) {
        for ((a, &v), m) in self.app.iter_mut().zip(c).zip(&self.mpi) {
            *a = match self.sem {
                // -begin + end - mpi
                Semantics::Read => a.wrapping_add(v).wrapping_sub(*m),
                Semantics::ReadOut => a.wrapping_add(v),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_semantics_survive_wrapping() {
        let mut s = Split::new(Semantics::Read, 1);
        s.begin(&[u64::MAX - 5]);
        s.before_call(&[u64::MAX - 1]);
        s.after_call(0, &[2]);
        s.end(&[10]);
        assert_eq!(s.mpi, vec![4]);
        assert_eq!(s.app, vec![4 + 8]);
    }
}
