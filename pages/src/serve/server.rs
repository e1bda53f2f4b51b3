//! The connections of `mpistat serve`, with limits that hold whoever connects.
//!
//! One thread reads every connection's request head, without blocking (`poll`), into a buffer of
//! at most [`http::MAX_HEAD_BYTES`]; it answers refusals and requests without an identity itself
//! (cheap), and hands identified requests to a few workers, each with its own database
//! connection, through a bounded queue (full: 503). It writes the answers back, again without
//! blocking. So an idle, slow or flooding client costs a buffer and a file descriptor, never a
//! thread, and its memory is bounded:
//! * at most `max_connections` open, `max_connections_per_peer` of one peer (a Unix socket's peer
//!   is its uid, a TCP peer its address; all local users share 127.0.0.1). Past a limit the
//!   oldest connection still sending its request (of that peer, or of the peer with the most) is
//!   closed to admit the new one: a client that sends its request at once is served even while
//!   someone holds every slot; only when none can go is the new one refused (503);
//! * a request head must arrive within `request_timeout`, the answer be taken within
//!   `response_timeout`.
//!
//! Tried with `tiny_http` before: it reads a request line without limit (1.5 GB held for one
//! connection) and spawns a thread per connection (1,890 for 2,000 idle ones).

use super::http::{self, Refusal, Request};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// What the server admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    /// From accepting a connection to having its whole request head.
    pub request_timeout: Duration,
    /// From the answer being ready to the client having taken all of it.
    pub response_timeout: Duration,
    /// Identified requests waiting for a worker.
    pub queue: usize,
}

/// What answers requests: who is asking (in the connections' thread, so it must be quick) and
/// what they get (in a worker, with the worker's own state, e.g. a database connection).
pub trait Site: Send + Sync + 'static {
    type Worker: Send + 'static;
    /// The state of a new worker.
    fn worker(&self) -> Result<Self::Worker, mpistat_store::Error>;
    /// Where the server says what it does (the limits it reached).
    fn log(&self) -> &Log;
    /// Who sent `request`, if anyone we trust.
    fn identify(&self, request: &Request) -> Option<String>;
    /// The answer's bytes to a request without an identity.
    fn unidentified(&self, head_only: bool) -> Vec<u8>;
    /// The answer's bytes to `login`'s request.
    fn answer(&self, worker: &mut Self::Worker, login: &str, request: &Request) -> Vec<u8>;
}

/// A listening socket, Unix or TCP.
pub enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Stream::Unix(s) => s,
            Stream::Tcp(s) => s,
        }
    }

    fn fd(&self) -> RawFd {
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }

    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
        };
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Who is at the other end, as far as it can be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Peer {
    Uid(u32),
    Address(IpAddr),
    Unknown,
}

/// The uid of a Unix socket's peer (`SO_PEERCRED`).
fn peer_uid(stream: &UnixStream) -> Option<u32> {
    // SAFETY: zeroed `ucred` is valid; getsockopt writes at most `len` bytes into it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket, and a pointer and length describing `cred`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.uid)
}

impl Listener {
    fn fd(&self) -> RawFd {
        match self {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }

    fn set_nonblocking(&self) -> std::io::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
    }

    /// The next waiting connection (non-blocking) and its peer.
    fn accept(&self) -> std::io::Result<(Stream, Peer)> {
        let (stream, peer) = match self {
            Listener::Unix(l) => {
                let (s, _) = l.accept()?;
                let peer = peer_uid(&s).map_or(Peer::Unknown, Peer::Uid);
                (Stream::Unix(s), peer)
            }
            Listener::Tcp(l) => {
                let (s, address) = l.accept()?;
                (Stream::Tcp(s), Peer::Address(address.ip()))
            }
        };
        match &stream {
            Stream::Unix(s) => s.set_nonblocking(true)?,
            Stream::Tcp(s) => s.set_nonblocking(true)?,
        }
        Ok((stream, peer))
    }
}

/// Where a server says what it does while it runs, shared by its threads; the binary gives
/// stderr. A line that cannot be written is lost: serving goes on.
#[derive(Clone)]
pub struct Log(Arc<Mutex<Box<dyn Write + Send>>>);

impl Log {
    pub fn new(out: impl Write + Send + 'static) -> Log {
        Log(Arc::new(Mutex::new(Box::new(out))))
    }

    /// Say `line` (and a newline).
    pub fn say(&self, line: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.writer(), "{line}");
    }

    /// The log to write to, held by this thread until dropped.
    pub fn writer(&self) -> MutexGuard<'_, Box<dyn Write + Send>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Log")
    }
}

/// Why the server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot make the listening socket non-blocking: {0}")]
    Listener(std::io::Error),
    #[error("cannot start a worker: {0}")]
    Worker(mpistat_store::Error),
    #[error("poll failed: {0}")]
    Poll(std::io::Error),
}

enum State {
    /// Receiving the request head.
    Reading(Vec<u8>),
    /// A worker has the request.
    Waiting,
    /// Sending the answer: its bytes, how many went, and since when.
    Writing(Vec<u8>, usize, Instant),
}

struct Connection {
    stream: Stream,
    peer: Peer,
    accepted: Instant,
    state: State,
}

/// Why connections were closed early, counted between two reports.
#[derive(Debug, Default)]
struct Closed {
    evicted: u64,
    refused: u64,
    timed_out: u64,
    rejected: u64,
}

/// An identified request for a worker.
struct Job {
    id: u64,
    login: String,
    request: Request,
}

/// How often the counts of [`Closed`] are reported (when not zero).
const REPORT_EVERY: Duration = Duration::from_secs(60);
/// Connections accepted per round, so that the others are read between rounds.
const ACCEPTS_PER_ROUND: usize = 64;

/// The connections' state, in the one thread that owns them.
struct Connections<S: Site> {
    site: Arc<S>,
    limits: Limits,
    open: HashMap<u64, Connection>,
    per_peer: HashMap<Peer, usize>,
    next_id: u64,
    jobs: SyncSender<Job>,
    closed: Closed,
}

impl<S: Site> Connections<S> {
    /// Admit a new connection from `peer`, closing the oldest one still sending its request
    /// where a limit is reached; `false` when none can go.
    fn make_room(&mut self, peer: Peer) -> bool {
        if self.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.max_connections_per_peer
            && !self.evict_oldest_reading(Some(peer))
        {
            return false;
        }
        if self.open.len() >= self.limits.max_connections {
            let busiest = self
                .per_peer
                .iter()
                .max_by_key(|(_, &n)| n)
                .map(|(&p, _)| p);
            if !self.evict_oldest_reading(busiest) && !self.evict_oldest_reading(None) {
                return false;
            }
        }
        true
    }

    /// Close the oldest connection (of `peer`, if given) that is still sending its request.
    fn evict_oldest_reading(&mut self, peer: Option<Peer>) -> bool {
        let oldest = self
            .open
            .iter()
            .filter(|(_, c)| matches!(c.state, State::Reading(_)))
            .filter(|(_, c)| peer.is_none_or(|p| c.peer == p))
            .map(|(&id, _)| id)
            .min();
        match oldest {
            Some(id) => {
                self.close(id);
                self.closed.evicted += 1;
                true
            }
            None => false,
        }
    }

    fn close(&mut self, id: u64) {
        if let Some(connection) = self.open.remove(&id) {
            if let Some(n) = self.per_peer.get_mut(&connection.peer) {
                *n -= 1;
                if *n == 0 {
                    self.per_peer.remove(&connection.peer);
                }
            }
        }
    }

    fn accept(&mut self, listener: &Listener) {
        for _ in 0..ACCEPTS_PER_ROUND {
            let (stream, peer) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // The peer gave up, or no descriptor is left now: try again next round.
                Err(_) => return,
            };
            if !self.make_room(peer) {
                self.closed.refused += 1;
                let mut stream = stream;
                let _ = stream.io().write(&http::refusal(&Refusal::Busy));
                continue;
            }
            let id = self.next_id;
            self.next_id += 1;
            *self.per_peer.entry(peer).or_insert(0) += 1;
            self.open.insert(
                id,
                Connection {
                    stream,
                    peer,
                    accepted: Instant::now(),
                    state: State::Reading(Vec::new()),
                },
            );
            // The request is usually there already.
            self.read(id);
        }
    }

    /// Read what has arrived of connection `id`'s request; once whole, answer it or give it
    /// to a worker.
    fn read(&mut self, id: u64) {
        let Some(connection) = self.open.get_mut(&id) else {
            return;
        };
        let State::Reading(received) = &mut connection.state else {
            return;
        };
        const CHUNK: usize = 4096;
        let mut chunk = [0u8; CHUNK];
        loop {
            let room = http::MAX_HEAD_BYTES - received.len();
            match connection.stream.io().read(&mut chunk[..room.min(CHUNK)]) {
                Ok(0) => return self.close(id),
                Ok(n) => received.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return self.close(id),
            }
            if received.len() >= http::MAX_HEAD_BYTES {
                break;
            }
        }
        let answer = match http::parse(received) {
            Ok(None) => return,
            Err(refusal) => {
                self.closed.rejected += 1;
                http::refusal(&refusal)
            }
            Ok(Some(request)) => match self.site.identify(&request) {
                None => self.site.unidentified(request.head_only),
                Some(login) => {
                    let job = Job { id, login, request };
                    match self.jobs.try_send(job) {
                        Ok(()) => {
                            connection.state = State::Waiting;
                            return;
                        }
                        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                            self.closed.refused += 1;
                            http::refusal(&Refusal::Busy)
                        }
                    }
                }
            },
        };
        self.respond(id, answer);
    }

    /// Start sending `answer` on connection `id`.
    fn respond(&mut self, id: u64, answer: Vec<u8>) {
        if let Some(connection) = self.open.get_mut(&id) {
            connection.state = State::Writing(answer, 0, Instant::now());
            self.write(id);
        }
    }

    /// Send what the socket takes of connection `id`'s answer; close it when all went.
    fn write(&mut self, id: u64) {
        let Some(connection) = self.open.get_mut(&id) else {
            return;
        };
        let State::Writing(answer, sent, _) = &mut connection.state else {
            return;
        };
        while *sent < answer.len() {
            match connection.stream.io().write(&answer[*sent..]) {
                Ok(0) => return self.close(id),
                Ok(n) => *sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return self.close(id),
            }
        }
        connection.stream.shutdown();
        self.close(id);
    }

    /// Close connections past their time; the time until the next one is due.
    fn expire(&mut self, now: Instant) -> Duration {
        let mut next = REPORT_EVERY;
        let mut late = Vec::new();
        for (&id, c) in &self.open {
            let due = match &c.state {
                State::Reading(_) => c.accepted + self.limits.request_timeout,
                State::Writing(_, _, since) => *since + self.limits.response_timeout,
                State::Waiting => continue,
            };
            match due.checked_duration_since(now) {
                Some(left) if !left.is_zero() => next = next.min(left),
                _ => late.push(id),
            }
        }
        for id in late {
            if let Some(c) = self.open.get_mut(&id) {
                if matches!(c.state, State::Reading(_)) {
                    let _ = c.stream.io().write(&http::refusal(&Refusal::Timeout));
                }
            }
            self.close(id);
            self.closed.timed_out += 1;
        }
        next
    }

    fn report(&mut self) {
        let c = std::mem::take(&mut self.closed);
        if c.evicted + c.refused + c.timed_out + c.rejected > 0 {
            self.site.log().say(format_args!(
                "mpistat serve: in the last {} s, at the limits: {} idle connections closed for \
                 new ones, {} refused (busy), {} timed out, {} requests refused (too large or \
                 malformed); {} open now",
                REPORT_EVERY.as_secs(),
                c.evicted,
                c.refused,
                c.timed_out,
                c.rejected,
                self.open.len()
            ));
        }
    }
}

/// Answer connections on `listener` until the process ends, with `workers` workers.
pub fn run<S: Site>(
    site: S,
    listener: Listener,
    limits: Limits,
    workers: usize,
) -> Result<(), ServeError> {
    listener.set_nonblocking().map_err(ServeError::Listener)?;
    let site = Arc::new(site);
    let (jobs, queue) = mpsc::sync_channel::<Job>(limits.queue);
    let queue = Arc::new(Mutex::new(queue));
    let (answers, answered) = mpsc::channel::<(u64, Vec<u8>)>();
    // A worker that has an answer wakes the connections' thread through this pair.
    let (wake, woken) = UnixStream::pair().map_err(ServeError::Poll)?;
    woken.set_nonblocking(true).map_err(ServeError::Poll)?;
    wake.set_nonblocking(true).map_err(ServeError::Poll)?;
    let wake = Arc::new(wake);
    for _ in 0..workers {
        let state = site.worker().map_err(ServeError::Worker)?;
        let (site, queue, answers, wake) =
            (site.clone(), queue.clone(), answers.clone(), wake.clone());
        std::thread::spawn(move || work(&*site, state, &queue, &answers, &wake));
    }
    let mut connections = Connections {
        site,
        limits,
        open: HashMap::new(),
        per_peer: HashMap::new(),
        next_id: 0,
        jobs,
        closed: Closed::default(),
    };
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut ids: Vec<u64> = Vec::new();
    let mut last_report = Instant::now();
    loop {
        let now = Instant::now();
        let wait = connections.expire(now);
        if now.duration_since(last_report) >= REPORT_EVERY {
            connections.report();
            last_report = now;
        }
        fds.clear();
        ids.clear();
        let poll_fd = |fd, events| libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        fds.push(poll_fd(listener.fd(), libc::POLLIN));
        fds.push(poll_fd(woken.as_raw_fd(), libc::POLLIN));
        for (&id, c) in &connections.open {
            let events = match c.state {
                State::Reading(_) => libc::POLLIN,
                State::Writing(..) => libc::POLLOUT,
                State::Waiting => continue,
            };
            fds.push(poll_fd(c.stream.fd(), events));
            ids.push(id);
        }
        let timeout_ms = wait.as_millis().clamp(1, 1000) as libc::c_int;
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(ServeError::Poll(e));
        }
        for (n, &id) in ids.iter().enumerate() {
            let revents = fds[n + 2].revents;
            if revents & libc::POLLIN != 0 {
                connections.read(id);
            } else if revents & libc::POLLOUT != 0 {
                connections.write(id);
            } else if revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                connections.close(id);
            }
        }
        if fds[1].revents != 0 {
            let mut sink = [0u8; 256];
            while matches!((&woken).read(&mut sink), Ok(n) if n > 0) {}
            while let Ok((id, answer)) = answered.try_recv() {
                connections.respond(id, answer);
            }
        }
        if fds[0].revents != 0 {
            connections.accept(&listener);
        }
    }
}

/// A worker: answer queued requests until the queue is gone. A page that panics is answered
/// with 500, and the worker goes on.
fn work<S: Site>(
    site: &S,
    mut state: S::Worker,
    queue: &Mutex<Receiver<Job>>,
    answers: &mpsc::Sender<(u64, Vec<u8>)>,
    wake: &UnixStream,
) {
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            site.answer(&mut state, &job.login, &job.request)
        }))
        .unwrap_or_else(|_| {
            http::answer(
                500,
                &[("Content-Type", "text/plain; charset=utf-8")],
                b"internal error (logged)\n",
                job.request.head_only,
            )
        });
        if answers.send((job.id, answer)).is_err() {
            return;
        }
        // Full: a wake-up is already pending.
        let _ = (&*wake).write(&[1]);
    }
}
