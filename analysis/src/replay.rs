//! Running per-rank passes in parallel on threads.
//!
//! [`parallel_map`](mpistat_trace::parallel::parallel_map) runs an independent pass per rank. [`run`] runs *communicating* rank programs
//! (the backward replay): a program runs until it needs the contributions of a synchronisation
//! instance that have not all arrived, parks there, and is made ready by whoever delivers the
//! last one. A fixed set of worker threads serves the ready ranks, so thousands of ranks need no
//! thousands of threads. An instance's arrivals are one atomic counter ([`Gates`]); what the
//! contributors publish lives with the caller (written before [`Gates::arrive`], read after
//! [`Gates::open`]), so nothing is allocated per message. Each worker owns a block of ranks: a
//! rank of its block that its last run woke runs next, without a queue (a replay is a wavefront,
//! so that is nearly always the next work); other ready ranks wait in the owner's queue, and an
//! idle worker steals before it sleeps. The distributed analysis (`distributed_replay.rs`) runs
//! the same backward-replay programs one process per block of ranks, with rounds of all-to-all
//! carrying the contributions in place of the gates.

use crate::matching::InstanceId;
use mpistat_trace::model::Rank;
use mpistat_trace::parallel::workers;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// What a rank program reports when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Done,
    /// It parked at this instance; the last [`Gates::arrive`] there makes it ready again.
    Blocked(InstanceId),
}

/// A per-rank program of a communicating pass.
pub trait RankProgram: Send {
    /// Runs until done or until [`Gates::open`] returned `false`; the ranks that its
    /// [`Gates::arrive`] calls made ready go into `woken`.
    fn resume(&mut self, gates: &Gates<'_>, woken: &mut Vec<Rank>) -> Progress;
}

/// Set in a gate's state when its taker parked there; the low bits count arrivals.
const PARKED: u32 = 1 << 31;

/// Per synchronisation instance, how many of its expected contributions have arrived.
pub struct Gates<'a> {
    expected: &'a [u32],
    state: Vec<AtomicU32>,
    parked: Vec<AtomicU32>,
}

impl Gates<'_> {
    /// One contribution to `instance` is published (the caller wrote it before this call).
    /// Returns the rank parked there when this was the last one.
    pub fn arrive(&self, instance: InstanceId) -> Option<Rank> {
        let i = instance as usize;
        let before = self.state[i].fetch_add(1, Ordering::AcqRel);
        (before & PARKED != 0 && (before & !PARKED) + 1 == self.expected[i])
            .then(|| self.parked[i].load(Ordering::Relaxed))
    }

    /// Whether all contributions to `instance` have arrived (they are then visible to the
    /// caller).
    pub fn open(&self, instance: InstanceId) -> bool {
        let i = instance as usize;
        self.state[i].load(Ordering::Acquire) & !PARKED == self.expected[i]
    }

    /// Parks `rank` at `instance` once its program has stopped there; `false` when the last
    /// contribution arrived meanwhile (the rank can go on at once).
    fn park(&self, instance: InstanceId, rank: Rank) -> bool {
        let i = instance as usize;
        self.parked[i].store(rank, Ordering::Relaxed);
        let before = self.state[i].fetch_or(PARKED, Ordering::AcqRel);
        if before & !PARKED == self.expected[i] {
            self.state[i].fetch_and(!PARKED, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// The ranks ready to run. Each worker owns a contiguous block of ranks and their queue, so
/// neighbours in a stencil mostly wake each other without touching another worker's lock.
struct Ready {
    queues: Vec<(Mutex<WorkerQueue>, Condvar)>,
    ranks: usize,
    /// Workers asleep on an empty queue; all of them asleep with ranks left means a stall.
    idle: AtomicUsize,
    done: AtomicUsize,
    stalled: AtomicBool,
}

#[derive(Default)]
struct WorkerQueue {
    ranks: VecDeque<Rank>,
    asleep: bool,
}

impl Ready {
    fn owner(&self, rank: Rank) -> usize {
        rank as usize * self.queues.len() / self.ranks
    }

    fn push(&self, rank: Rank) {
        let (queue, wake) = &self.queues[self.owner(rank)];
        let mut queue = queue.lock().expect("ready lock");
        queue.ranks.push_back(rank);
        if queue.asleep {
            queue.asleep = false;
            self.idle.fetch_sub(1, Ordering::SeqCst);
            wake.notify_one();
        }
    }

    /// The next rank for `worker`, or `None` when all are done or nothing can run any more.
    /// An empty queue steals from the others before it sleeps (sleeping and waking cost more
    /// than a rank's stretch of work in a pipelined replay).
    fn next(&self, worker: usize) -> Option<Rank> {
        let count = self.queues.len();
        for other in (0..count).map(|i| (worker + i) % count) {
            let queue = &self.queues[other].0;
            let taken = if other == worker {
                queue.lock().expect("ready lock").ranks.pop_back()
            } else {
                queue.try_lock().ok().and_then(|mut q| q.ranks.pop_front())
            };
            if taken.is_some() {
                return taken;
            }
        }
        let (queue, wake) = &self.queues[worker];
        let mut queue = queue.lock().expect("ready lock");
        loop {
            if self.done.load(Ordering::SeqCst) == self.ranks || self.stalled.load(Ordering::SeqCst)
            {
                return None;
            }
            if let Some(rank) = queue.ranks.pop_back() {
                return Some(rank);
            }
            queue.asleep = true;
            if self.idle.fetch_add(1, Ordering::SeqCst) + 1 == self.queues.len() {
                // Everyone sleeps on an empty queue, and only running ranks wake ranks.
                self.stalled.store(true, Ordering::SeqCst);
                drop(queue);
                self.wake_all();
                return None;
            }
            queue = wake.wait(queue).expect("ready lock");
        }
    }

    fn finished_one(&self) {
        if self.done.fetch_add(1, Ordering::SeqCst) + 1 == self.ranks {
            self.wake_all();
        }
    }

    fn wake_all(&self) {
        for (queue, wake) in &self.queues {
            let mut queue = queue.lock().expect("ready lock");
            if queue.asleep {
                queue.asleep = false;
                self.idle.fetch_sub(1, Ordering::SeqCst);
            }
            wake.notify_all();
        }
    }
}

/// Runs `programs` (index = rank) to completion. `expected[i]`: contributions instance `i`
/// receives. Returns the ranks still parked when no rank could run any more (a cycle in the trace).
pub fn run<P: RankProgram>(programs: &mut [P], expected: &[u32]) -> Result<(), Vec<Rank>> {
    let total = programs.len();
    let threads = workers(total);
    let ready = Ready {
        queues: (0..threads)
            .map(|_| (Mutex::new(WorkerQueue::default()), Condvar::new()))
            .collect(),
        ranks: total,
        idle: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        stalled: AtomicBool::new(false),
    };
    for rank in 0..total as Rank {
        ready.push(rank);
    }
    let gates = Gates {
        expected,
        state: expected.iter().map(|_| AtomicU32::new(0)).collect(),
        parked: expected.iter().map(|_| AtomicU32::new(0)).collect(),
    };
    // Each program with whether it is done.
    let slots: Vec<Mutex<(&mut P, bool)>> = programs
        .iter_mut()
        .map(|p| Mutex::new((p, false)))
        .collect();
    std::thread::scope(|scope| {
        for worker in 0..threads {
            let (slots, gates, ready) = (&slots, &gates, &ready);
            scope.spawn(move || {
                // A rank of this worker's block that just became ready runs next without
                // passing through a queue: the replay is a wavefront, and that rank's data
                // is in this core's cache.
                let mut next: Option<Rank> = None;
                let mut woken = Vec::new();
                while let Some(rank) = next.take().or_else(|| ready.next(worker)) {
                    let progress = {
                        let mut slot = slots[rank as usize].lock().expect("program lock");
                        let progress = slot.0.resume(gates, &mut woken);
                        slot.1 = progress == Progress::Done;
                        progress
                    };
                    match progress {
                        Progress::Done => ready.finished_one(),
                        // Parked only now that nothing touches the program any more.
                        Progress::Blocked(instance) => {
                            if !gates.park(instance, rank) {
                                next = Some(rank);
                            }
                        }
                    }
                    for rank in woken.drain(..) {
                        if next.is_none() && ready.owner(rank) == worker {
                            next = Some(rank);
                        } else {
                            ready.push(rank);
                        }
                    }
                }
            });
        }
    });
    if !ready.stalled.load(Ordering::SeqCst) {
        return Ok(());
    }
    let parked: Vec<Rank> = slots
        .iter()
        .enumerate()
        .filter(|(_, slot)| !slot.lock().expect("program lock").1)
        .map(|(rank, _)| rank as Rank)
        .collect();
    Err(parked)
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
