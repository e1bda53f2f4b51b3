//! An ordered pool of worker threads: items go in, each is turned into an output by the same
//! function on some worker, and outputs come back in the order the items went in. Ingest decodes
//! records this way while its own thread reads lines and writes the database, and the digest
//! decodes stored records; decoding is most of their work and independent per record, and the
//! order keeps a run's result exactly that of a single-threaded one.

use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

/// Items waiting per worker before [`OrderedPool::send`] blocks (bounds the memory in flight).
const QUEUE: usize = 256;

struct Worker<I, O> {
    items: Option<SyncSender<I>>,
    outputs: Receiver<O>,
    thread: Option<JoinHandle<()>>,
}

/// Workers fed round robin and read back in the same order.
pub struct OrderedPool<I, O> {
    workers: Vec<Worker<I, O>>,
    sent: usize,
    received: usize,
}

impl<I: Send + 'static, O: Send + 'static> OrderedPool<I, O> {
    /// One worker per available core, each applying `work`.
    pub fn new(work: fn(I) -> O) -> OrderedPool<I, O> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = (0..threads)
            .map(|_| {
                let (items, inbox) = mpsc::sync_channel::<I>(QUEUE);
                // Unbounded: a worker never waits for the caller's thread, so neither can block
                // the other for good.
                let (outbox, outputs) = mpsc::channel();
                let thread = std::thread::spawn(move || {
                    for item in inbox {
                        if outbox.send(work(item)).is_err() {
                            break;
                        }
                    }
                });
                Worker {
                    items: Some(items),
                    outputs,
                    thread: Some(thread),
                }
            })
            .collect();
        OrderedPool {
            workers,
            sent: 0,
            received: 0,
        }
    }

    /// Hand `item` to the next worker (waiting while its queue is full).
    pub fn send(&mut self, item: I) {
        let worker = &self.workers[self.sent % self.workers.len()];
        let items = worker.items.as_ref().expect("workers run until dropped");
        // `work` does not panic on bad input (it returns errors), so a worker is only gone if a
        // bug killed it: stop rather than lose the item.
        if items.send(item).is_err() {
            panic!("a worker thread panicked");
        }
        self.sent += 1;
    }

    /// The next output in hand-in order: `wait` for it, or only if it is ready. `None` when
    /// nothing is in flight (or, without `wait`, the next one is not ready).
    pub fn next(&mut self, wait: bool) -> Option<O> {
        if self.sent == self.received {
            return None;
        }
        let worker = &self.workers[self.received % self.workers.len()];
        let output = if wait {
            worker.outputs.recv().ok()
        } else {
            match worker.outputs.try_recv() {
                Ok(output) => Some(output),
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => None,
            }
        };
        let output = output.expect("a worker thread panicked");
        self.received += 1;
        Some(output)
    }
}

impl<I, O> Drop for OrderedPool<I, O> {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            worker.items = None; // ends the worker's loop
        }
        for worker in &mut self.workers {
            if let Some(thread) = worker.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OrderedPool;

    #[test]
    fn outputs_come_back_in_order() {
        let mut pool = OrderedPool::new(|n: u64| {
            // Uneven work, so that workers finish out of order.
            std::thread::sleep(std::time::Duration::from_micros((n * 7919) % 300));
            n * 2
        });
        let mut got = Vec::new();
        for n in 0..500 {
            pool.send(n);
            got.extend(pool.next(false));
        }
        while let Some(out) = pool.next(true) {
            got.push(out);
        }
        assert_eq!(got, (0..500).map(|n| n * 2).collect::<Vec<_>>());
    }
}
