//! Running per-rank passes in parallel on threads.
//!
//! [`parallel_map`] runs an independent pass per rank. [`run`] runs *communicating* rank programs
//! (the backward replay): a program runs until it needs the messages of a synchronisation instance
//! that have not all arrived, parks there, and is resumed by whoever delivers the last one. A fixed
//! set of worker threads serves the ready ranks, so thousands of ranks need no thousands of
//! threads. The same programs could run one per MPI process with `MPI_Send`/`MPI_Recv` in place of
//! [`PostOffice::deliver`]/[`PostOffice::take`].

use crate::hash::FastMap;
use crate::matching::InstanceId;
use crate::model::Rank;
use std::collections::VecDeque;
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
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, T)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
    /// It parked at this instance; [`PostOffice::deliver`] will make it ready again.
    Blocked(InstanceId),
}

/// A per-rank program of a communicating pass.
pub trait RankProgram: Send {
    type Message: Send;
    /// Runs until done or until [`PostOffice::take`] returned `None`.
    fn resume(&mut self, post: &PostOffice<'_, Self::Message>) -> Progress;
}

const SHARDS: usize = 64;

struct Mailbox<M> {
    messages: Vec<M>,
    parked: Option<Rank>,
}

/// Mailboxes per synchronisation instance; an instance expects a known number of messages.
pub struct PostOffice<'a, M> {
    expected: &'a [u32],
    shards: Vec<Mutex<FastMap<InstanceId, Mailbox<M>>>>,
    ready: &'a Ready,
}

impl<M> PostOffice<'_, M> {
    fn shard(&self, instance: InstanceId) -> &Mutex<FastMap<InstanceId, Mailbox<M>>> {
        &self.shards[instance as usize % SHARDS]
    }

    /// Sends `message` to whoever takes `instance`.
    pub fn deliver(&self, instance: InstanceId, message: M) {
        let mut shard = self.shard(instance).lock().expect("mailbox lock");
        let mailbox = shard.entry(instance).or_insert_with(|| Mailbox {
            messages: Vec::new(),
            parked: None,
        });
        mailbox.messages.push(message);
        if mailbox.messages.len() == self.expected[instance as usize] as usize {
            if let Some(rank) = mailbox.parked.take() {
                self.ready.push(rank);
            }
        }
    }

    /// All messages of `instance` once they have arrived; otherwise parks `rank` and returns `None`.
    pub fn take(&self, instance: InstanceId, rank: Rank) -> Option<Vec<M>> {
        let expected = self.expected[instance as usize] as usize;
        let mut shard = self.shard(instance).lock().expect("mailbox lock");
        match shard.get_mut(&instance) {
            Some(mailbox) if mailbox.messages.len() == expected => {
                shard.remove(&instance).map(|m| m.messages)
            }
            Some(mailbox) => {
                mailbox.parked = Some(rank);
                None
            }
            None => {
                shard.insert(
                    instance,
                    Mailbox {
                        messages: Vec::new(),
                        parked: Some(rank),
                    },
                );
                None
            }
        }
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

/// Runs `programs` (index = rank) to completion. `expected[i]`: messages instance `i` receives.
/// Returns the ranks still parked when no rank could run any more (a cycle in the trace).
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
    let post = PostOffice {
        expected,
        shards: (0..SHARDS)
            .map(|_| Mutex::new(FastMap::default()))
            .collect(),
        ready: &ready,
    };
    let slots: Vec<Mutex<&mut P>> = programs.iter_mut().map(Mutex::new).collect();
    let threads = workers(total);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| worker(&slots, &post, &ready, threads));
        }
    });
    let stalled = ready.state.lock().expect("ready lock").stalled;
    if !stalled {
        return Ok(());
    }
    let mut parked: Vec<Rank> = post
        .shards
        .into_iter()
        .flat_map(|s| s.into_inner().expect("mailbox lock").into_values())
        .filter_map(|m| m.parked)
        .collect();
    parked.sort_unstable();
    Err(parked)
}

fn worker<P: RankProgram>(
    slots: &[Mutex<&mut P>],
    post: &PostOffice<'_, P::Message>,
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
        let progress = slots[rank as usize]
            .lock()
            .expect("program lock")
            .resume(post);
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
