//! Running per-rank passes in parallel on threads.
//!
//! [`parallel_map`] runs an independent pass per rank. [`run`] runs *communicating* rank programs
//! (the backward replay): a program runs until it needs the contributions of a synchronisation
//! instance that have not all arrived, parks there, and is resumed by whoever delivers the last
//! one. A fixed set of worker threads serves the ready ranks, so thousands of ranks need no
//! thousands of threads. An instance's arrivals are one atomic counter ([`Gates`]); what the
//! contributors publish lives with the caller (written before [`Gates::arrive`], read after
//! [`Gates::open`]), so nothing is allocated per message. The same programs could run one per MPI
//! process with `MPI_Send`/`MPI_Recv` carrying the contributions in place of the gates.

use crate::matching::InstanceId;
use crate::model::Rank;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// The number of worker threads to use for `items` independent pieces of work.
fn workers(items: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items)
        .max(1)
}

/// `f(0..n)` computed on all cores, in order.
pub fn parallel_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = workers(n);
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, T)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return mine;
                        }
                        mine.push((i, f(i)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a replay worker panicked"))
            .collect()
    });
    results.sort_unstable_by_key(|&(i, _)| i);
    results.into_iter().map(|(_, t)| t).collect()
}

/// What a rank program reports when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Done,
    /// It parked at this instance; the last [`Gates::arrive`] there makes it ready again.
    Blocked(InstanceId),
}

/// A per-rank program of a communicating pass.
pub trait RankProgram: Send {
    /// Runs until done or until [`Gates::open`] returned `false`.
    fn resume(&mut self, gates: &Gates<'_>) -> Progress;
}

/// Set in a gate's state when its taker parked there; the low bits count arrivals.
const PARKED: u32 = 1 << 31;

/// Per synchronisation instance, how many of its expected contributions have arrived.
pub struct Gates<'a> {
    expected: &'a [u32],
    state: Vec<AtomicU32>,
    parked: Vec<AtomicU32>,
    ready: &'a Ready,
}

impl Gates<'_> {
    /// One contribution to `instance` is published (the caller wrote it before this call).
    pub fn arrive(&self, instance: InstanceId) {
        let i = instance as usize;
        let before = self.state[i].fetch_add(1, Ordering::AcqRel);
        if before & PARKED != 0 && (before & !PARKED) + 1 == self.expected[i] {
            self.ready.push(self.parked[i].load(Ordering::Relaxed));
        }
    }

    /// Whether all contributions to `instance` have arrived (they are then visible to the
    /// caller); otherwise parks `rank` there and returns `false`.
    pub fn open(&self, instance: InstanceId, rank: Rank) -> bool {
        let i = instance as usize;
        let expected = self.expected[i];
        if self.state[i].load(Ordering::Acquire) & !PARKED == expected {
            return true;
        }
        self.parked[i].store(rank, Ordering::Relaxed);
        let before = self.state[i].fetch_or(PARKED, Ordering::AcqRel);
        if before & !PARKED == expected {
            // The last one arrived in between and saw no parked rank: go on.
            self.state[i].fetch_and(!PARKED, Ordering::Relaxed);
            return true;
        }
        false
    }
}

/// The queue of ranks ready to run, and how many workers are idle.
struct Ready {
    state: Mutex<ReadyState>,
    wake: Condvar,
}

struct ReadyState {
    queue: VecDeque<Rank>,
    idle: usize,
    done: usize,
    stalled: bool,
}

impl Ready {
    fn push(&self, rank: Rank) {
        let mut state = self.state.lock().expect("ready lock");
        state.queue.push_back(rank);
        if state.idle > 0 {
            self.wake.notify_one();
        }
    }
}

/// Runs `programs` (index = rank) to completion. `expected[i]`: contributions instance `i`
/// receives. Returns the ranks still parked when no rank could run any more (a cycle in the trace).
pub fn run<P: RankProgram>(programs: &mut [P], expected: &[u32]) -> Result<(), Vec<Rank>> {
    let total = programs.len();
    let ready = Ready {
        state: Mutex::new(ReadyState {
            queue: (0..total as Rank).collect(),
            idle: 0,
            done: 0,
            stalled: false,
        }),
        wake: Condvar::new(),
    };
    let gates = Gates {
        expected,
        state: expected.iter().map(|_| AtomicU32::new(0)).collect(),
        parked: expected.iter().map(|_| AtomicU32::new(0)).collect(),
        ready: &ready,
    };
    // Each program with whether it is done.
    let slots: Vec<Mutex<(&mut P, bool)>> = programs
        .iter_mut()
        .map(|p| Mutex::new((p, false)))
        .collect();
    let threads = workers(total);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| worker(&slots, &gates, &ready, threads));
        }
    });
    if !ready.state.lock().expect("ready lock").stalled {
        return Ok(());
    }
    let mut parked: Vec<Rank> = slots
        .iter()
        .enumerate()
        .filter(|(_, slot)| !slot.lock().expect("program lock").1)
        .map(|(rank, _)| rank as Rank)
        .collect();
    parked.sort_unstable();
    Err(parked)
}

fn worker<P: RankProgram>(
    slots: &[Mutex<(&mut P, bool)>],
    gates: &Gates<'_>,
    ready: &Ready,
    threads: usize,
) {
    loop {
        let rank = {
            let mut state = ready.state.lock().expect("ready lock");
            loop {
                if state.done == slots.len() || state.stalled {
                    return;
                }
                if let Some(rank) = state.queue.pop_front() {
                    break rank;
                }
                state.idle += 1;
                if state.idle == threads {
                    state.stalled = true;
                    ready.wake.notify_all();
                    return;
                }
                state = ready.wake.wait(state).expect("ready lock");
                state.idle -= 1;
            }
        };
        let mut slot = slots[rank as usize].lock().expect("program lock");
        let progress = slot.0.resume(gates);
        slot.1 = progress == Progress::Done;
        drop(slot);
        if progress == Progress::Done {
            let mut state = ready.state.lock().expect("ready lock");
            state.done += 1;
            if state.done == slots.len() {
                ready.wake.notify_all();
            }
        }
    }
}

/// `f(index, item)` for every item of `items`, on all cores.
pub fn parallel_for_each_mut<T: Send>(items: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
    let threads = workers(items.len());
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (c, part) in items.chunks_mut(chunk).enumerate() {
            let f = &f;
            scope.spawn(move || {
                for (i, item) in part.iter_mut().enumerate() {
                    f(c * chunk + i, item);
                }
            });
        }
    });
}
