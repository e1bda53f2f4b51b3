//! Sending the record's lines to syslog: the whole record while syslogd makes progress, never a
//! hang when it does not.
//!
//! A non-blocking datagram socket. Linux queues only `net.unix.max_dgram_qlen` (10 by default)
//! datagrams on the daemon's socket, so a record of more parts, or a busy daemon, meets a full
//! queue (`EAGAIN`). Then the sender waits for room (`poll(POLLOUT)`, which on a connected Unix
//! datagram socket waits for the peer's queue) and goes on as long as parts go out; it gives up
//! only when no part went out for the site's stall budget (`[syslog] stall_ms`). A missing socket
//! or a daemon that is gone (`ENOENT`, `ECONNREFUSED`) fails at once. So a job waits at most
//! `stall_ms` for a stopped syslogd, and at most `stall_ms` per part for a crawling one.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest `poll` before looking at the clock again (a lost wake-up costs at most this).
const POLL_SLICE: Duration = Duration::from_millis(10);

/// How a send went: parts out, and how often and how long it waited for the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Parts that went out.
    pub sent: usize,
    /// Parts of the record.
    pub of: usize,
    /// Times the queue was full and the sender waited for room.
    pub waits: u32,
    /// Time spent waiting, in all.
    pub waited: Duration,
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} parts, {} wait(s) for syslogd, {:.1} ms waited",
            self.sent,
            self.of,
            self.waits,
            self.waited.as_secs_f64() * 1e3
        )
    }
}

/// Why the record did not reach syslog whole.
#[derive(Debug)]
pub enum SendError {
    /// No socket to send on (missing, refused, or no socket at all): nothing was sent.
    Connect(std::io::Error),
    /// No part went out for the whole stall budget: the daemon is stopped or stuck.
    Stalled {
        progress: Progress,
        budget: Duration,
    },
    /// Sending failed otherwise (e.g. the daemon went away mid-record).
    Send {
        progress: Progress,
        error: std::io::Error,
    },
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "cannot reach the syslog socket: {e}"),
            SendError::Stalled { progress, budget } => write!(
                f,
                "{progress}; gave up: no part went out for {} ms (syslogd stopped or stuck)",
                budget.as_millis()
            ),
            SendError::Send { progress, error } => write!(f, "{progress}; then: {error}"),
        }
    }
}

/// The datagram of one message, stamped now.
fn frame(priority: u8, tag: &str, pid: u32, message: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    mpistat_site::syslog_frame(priority, tag, pid, message, now)
}

/// Send `messages` to the syslog socket at `socket` with facility code `facility` (severity
/// info), waiting for room while the daemon makes progress; give up when no part went out for
/// `stall` (zero: at the first full queue).
pub fn send(
    socket: &Path,
    facility: u8,
    tag: &str,
    messages: &[String],
    stall: Duration,
) -> Result<Progress, SendError> {
    let sock = UnixDatagram::unbound().map_err(SendError::Connect)?;
    sock.set_nonblocking(true).map_err(SendError::Connect)?;
    sock.connect(socket).map_err(SendError::Connect)?;
    let priority = facility * 8 + 6;
    let pid = std::process::id();
    let mut progress = Progress {
        of: messages.len(),
        ..Progress::default()
    };
    let mut last_out = Instant::now();
    // The payload first, the summary (part 0, for people reading syslog) last: a sender killed
    // between two parts (Hydra stops every rank right after one calls MPI_Abort) has then sent
    // a record a decoder can read whenever its payload fits one part, where the summary alone
    // was all that arrived of 4 of 22 such records (`tests/tests/partial.rs`).
    for m in messages.iter().skip(1).chain(messages.first()) {
        let datagram = frame(priority, tag, pid, m);
        loop {
            match sock.send(datagram.as_bytes()) {
                Ok(_) => {
                    progress.sent += 1;
                    last_out = Instant::now();
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let left = stall.saturating_sub(last_out.elapsed());
                    if left.is_zero() {
                        return Err(SendError::Stalled {
                            progress,
                            budget: stall,
                        });
                    }
                    progress.waits += 1;
                    let start = Instant::now();
                    wait_writable(&sock, left.min(POLL_SLICE));
                    progress.waited += start.elapsed();
                }
                Err(error) => return Err(SendError::Send { progress, error }),
            }
        }
    }
    Ok(progress)
}

/// Wait up to `timeout` for room to send on `sock` (any outcome: the caller sends again).
fn wait_writable(sock: &UnixDatagram, timeout: Duration) {
    let mut fd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut fd, 1, ms) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    const BUDGET: Duration = Duration::from_millis(100);

    /// A bound receiving socket in a fresh directory (removed on drop).
    struct Receiver {
        dir: std::path::PathBuf,
        sock: UnixDatagram,
    }

    impl Receiver {
        fn new(label: &str) -> Receiver {
            let dir = std::env::temp_dir().join(format!(
                "mpistat-syslog-test-{label}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let sock = UnixDatagram::bind(dir.join("s.sock")).unwrap();
            Receiver { dir, sock }
        }

        fn path(&self) -> std::path::PathBuf {
            self.dir.join("s.sock")
        }
    }

    impl Drop for Receiver {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn lines(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("part {i:06} {}", "x".repeat(7000)))
            .collect()
    }

    #[test]
    fn frame_looks_like_glibc_syslog() {
        let f = frame(174, "mpistat", 42, "hello");
        assert!(f.starts_with("<174>"), "{f}");
        assert!(f.ends_with(" mpistat[42]: hello"), "{f}");
    }

    #[test]
    fn a_long_tag_is_cut() {
        let f = frame(174, &"é".repeat(40), 42, "hello");
        assert!(
            f.ends_with(&format!(" {}[42]: hello", "é".repeat(16))),
            "{f}"
        );
    }

    #[test]
    fn missing_socket_fails_at_once() {
        let start = Instant::now();
        let r = send(
            Path::new("/nonexistent/mpistat.sock"),
            21,
            "t",
            &["x".into()],
            Duration::from_secs(3600),
        );
        assert!(matches!(r, Err(SendError::Connect(_))), "{r:?}");
        assert!(start.elapsed() < Duration::from_secs(3600));
    }

    #[test]
    fn a_receiver_that_goes_away_fails_the_send_at_once() {
        let receiver = Receiver::new("gone");
        let path = receiver.path();
        let sender = std::thread::spawn(move || send(&path, 21, "t", &lines(1000), Duration::MAX));
        // Keep the receiver until the queue is full, then close it: the sender must not wait
        // for a daemon that is gone (the budget is unbounded).
        std::thread::sleep(Duration::from_millis(200));
        drop(receiver);
        match sender.join().unwrap() {
            Err(SendError::Send { progress, error }) => {
                assert!(progress.sent > 0 && progress.sent < 1000, "{progress}");
                assert_eq!(error.raw_os_error(), Some(libc::ECONNREFUSED), "{error}");
            }
            other => panic!("expected a refused send, got {other:?}"),
        }
    }

    #[test]
    fn a_stopped_reader_makes_the_sender_give_up_after_the_budget() {
        let receiver = Receiver::new("stopped"); // never reads: like a stopped syslogd
        match send(&receiver.path(), 21, "t", &lines(1000), BUDGET) {
            Err(SendError::Stalled { progress, budget }) => {
                assert_eq!(budget, BUDGET);
                assert!(progress.sent > 0 && progress.sent < 1000, "{progress}");
                assert!(progress.waits > 0, "{progress}");
                assert!(progress.waited >= BUDGET / 2, "{progress}");
            }
            other => panic!("expected a stalled send, got {other:?}"),
        }
    }

    #[test]
    fn a_zero_budget_gives_up_at_the_first_full_queue() {
        let receiver = Receiver::new("zero");
        match send(&receiver.path(), 21, "t", &lines(1000), Duration::ZERO) {
            Err(SendError::Stalled { progress, .. }) => assert_eq!(progress.waits, 0),
            other => panic!("expected a stalled send, got {other:?}"),
        }
    }

    /// Not a test: `bench/syslog.sh` runs it (`--ignored`) against a private rsyslogd, live or
    /// stopped, named by `MPISTAT_BENCH_SYSLOG` (socket) and `MPISTAT_BENCH_STATE` (label). It
    /// prints what sending a record of 20, 100 and 1000 parts of the largest size costs.
    #[test]
    #[ignore]
    fn bench_send_cost() {
        let socket = std::env::var("MPISTAT_BENCH_SYSLOG").expect("MPISTAT_BENCH_SYSLOG");
        let state = std::env::var("MPISTAT_BENCH_STATE").unwrap_or_default();
        let stall = Duration::from_millis(100);
        for parts in [20, 100, 1000] {
            let messages: Vec<String> = (0..parts)
                .map(|i| {
                    format!(
                        "{i:06} {}",
                        "x".repeat(mpistat_record::wire::MAX_MESSAGE - 7)
                    )
                })
                .collect();
            let mut times = Vec::new();
            let mut outcome = String::new();
            for _ in 0..5 {
                let start = Instant::now();
                let r = send(Path::new(&socket), 21, "mpistat", &messages, stall);
                times.push(start.elapsed());
                outcome = match r {
                    Ok(p) => format!("sent: {p}"),
                    Err(e) => format!("NOT sent: {e}"),
                };
            }
            times.sort();
            println!(
                "{state:<8} {parts:>5} parts: median {:8.1} ms, max {:8.1} ms (last: {outcome})",
                times[2].as_secs_f64() * 1e3,
                times[4].as_secs_f64() * 1e3
            );
        }
    }

    /// The receiver reads in bursts with pauses longer than the queue takes to fill but
    /// shorter than the budget: every part arrives, in order (the summary, part 0, last), after
    /// waits.
    #[test]
    fn a_slow_reader_gets_every_part() {
        let receiver = Receiver::new("slow");
        let path = receiver.path();
        let done = Arc::new(AtomicBool::new(false));
        let reading = {
            let done = done.clone();
            std::thread::spawn(move || {
                receiver
                    .sock
                    .set_read_timeout(Some(Duration::from_millis(5)))
                    .unwrap();
                let mut got = Vec::new();
                let mut buf = vec![0u8; 65536];
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                    for _ in 0..3 {
                        if let Ok(n) = receiver.sock.recv(&mut buf) {
                            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                        }
                    }
                }
                while let Ok(n) = receiver.sock.recv(&mut buf) {
                    got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
                got
            })
        };
        // A generous budget: the test is about waiting, not about the machine's speed.
        let sent = send(&path, 21, "t", &lines(100), Duration::from_secs(10));
        done.store(true, Ordering::Relaxed);
        let got = reading.join().unwrap();
        let progress = sent.expect("every part goes out");
        assert_eq!(progress.sent, 100);
        assert!(progress.waits > 0, "the queue never filled: {progress}");
        let sent_lines = lines(100);
        let want: Vec<&String> = sent_lines[1..].iter().chain(&sent_lines[..1]).collect();
        assert_eq!(got.len(), 100);
        for (g, w) in got.iter().zip(want) {
            assert!(g.ends_with(w.as_str()), "out of order or damaged");
        }
    }
}
