//! Decoding complete jobs (base64, inflate, record crc, JSON) on worker threads while the reading
//! thread goes on assembling lines and writing the database. Decoding is most of ingest's work
//! and independent per job; results come back in the order the jobs were handed in, so a run
//! stores exactly what a single-threaded one would.

use crate::db::JobRow;
use mpistat_record::{CompleteJob, Problem};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

/// Jobs waiting per worker before [`Decoders::send`] blocks (bounds the memory in flight).
const QUEUE: usize = 256;

/// What decoding one job gives (the record itself is dropped on the worker, too).
pub type Outcome = Result<JobRow, Problem>;

struct Worker {
    jobs: Option<SyncSender<CompleteJob>>,
    results: Receiver<Outcome>,
    thread: Option<JoinHandle<()>>,
}

/// A few decoding threads, fed round robin and read back in the same order.
pub struct Decoders {
    workers: Vec<Worker>,
    sent: usize,
    received: usize,
}

impl Decoders {
    /// One worker per available core.
    pub fn new() -> Decoders {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = (0..threads)
            .map(|_| {
                let (jobs, inbox) = mpsc::sync_channel::<CompleteJob>(QUEUE);
                // Unbounded: a worker never waits for the reading thread, so neither can block
                // the other for good.
                let (outbox, results) = mpsc::channel();
                let thread = std::thread::spawn(move || {
                    for job in inbox {
                        if outbox.send(job.decode().map(JobRow::from)).is_err() {
                            break;
                        }
                    }
                });
                Worker {
                    jobs: Some(jobs),
                    results,
                    thread: Some(thread),
                }
            })
            .collect();
        Decoders {
            workers,
            sent: 0,
            received: 0,
        }
    }

    /// Hand `job` to the next worker (waiting while its queue is full).
    pub fn send(&mut self, job: CompleteJob) {
        let n = self.workers.len();
        let worker = &self.workers[self.sent % n];
        let sender = worker.jobs.as_ref().expect("workers run until dropped");
        // Decoding never panics (bad input is a `Problem`), so a worker is only gone if a bug
        // killed it: stop rather than lose the job.
        sender.send(job).expect("a decoder thread panicked");
        self.sent += 1;
    }

    /// Jobs handed in whose outcome was not taken yet.
    pub fn in_flight(&self) -> usize {
        self.sent - self.received
    }

    /// The next outcome in hand-in order: `wait` for it, or only if it is ready. `None` when
    /// nothing is in flight (or, without `wait`, the next one is not ready).
    pub fn next(&mut self, wait: bool) -> Option<Outcome> {
        if self.in_flight() == 0 {
            return None;
        }
        let worker = &self.workers[self.received % self.workers.len()];
        let outcome = if wait {
            worker.results.recv().ok()
        } else {
            match worker.results.try_recv() {
                Ok(outcome) => Some(outcome),
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => None,
            }
        };
        let outcome = outcome.expect("a decoder thread panicked");
        self.received += 1;
        Some(outcome)
    }
}

impl Drop for Decoders {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            worker.jobs = None; // ends the worker's loop
        }
        for worker in &mut self.workers {
            if let Some(thread) = worker.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
