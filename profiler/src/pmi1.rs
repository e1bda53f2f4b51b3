//! PMI-1's wire protocol as MPICH's process manager, Hydra (`mpiexec.mpich`), speaks it to each
//! process over the socket `PMI_FD`: the little [`crate::peers`] needs to tell the other ranks
//! that this one has the library, without MPI.
//!
//! What was verified (Debian 12's MPICH 4.0.2 and its Hydra; `strace` of the dialog, and Hydra's
//! `pmip_pmi_v1.c`/`pmiserv_pmi_v1.c` of that release):
//! - A request is one line, `cmd=<name> key=value ...\n`, and its response one line likewise.
//!   The client always waits for the response before its next request, and Hydra sends nothing
//!   unasked, so between requests the socket is empty.
//! - The node's proxy (`hydra_pmi_proxy`) answers `init`, `get_my_kvsname` and `put` itself. It
//!   resets its cache of puts at the first `init` it gets from any process of the node, so a
//!   process must send `init` before its first `put` (MPICH's own `init` later is answered again
//!   and resets nothing). A `put` is cached by the proxy and sent on to `mpiexec` with the
//!   node's `barrier_in`; after the barrier (`barrier_out`, which MPICH 4.0's `MPI_Init` runs on
//!   every rank), every proxy holds every key put before it.
//! - A `get` of a key the proxy holds is answered by the proxy (one local round trip); any other
//!   is asked of `mpiexec`, which answers at once, with `rc=-1 msg=key_<key>_not_found` if nobody
//!   put it (it does not wait for the key).
//! - A process that sent a PMI request and then closes the socket without `cmd=finalize` counts
//!   as failed, so only a process whose MPI is MPICH (which runs `init` and `finalize` anyway)
//!   may talk here.
//!
//! Every exchange here is one whole request and its one whole response, on the caller's thread,
//! each response awaited at most [`WAIT_MS`]; a response is read up to its newline and no
//! further (peeked first), so nothing of MPICH's is ever taken, and nothing of ours is left for
//! MPICH to read unless the proxy stays silent that long (then MPI itself would not get far).
//! Anything else than the verified answers (PMI-2's length-prefixed form, `PMI_PORT` instead of
//! `PMI_FD`, a launcher other than Hydra, an error reply) is a [`Surprise`]: the caller stops
//! using PMI. Allocation-free and in `.text.init` (it runs inside `MPI_Init`; see footprint.rs).

use std::ffi::{c_int, CStr};

// The words of PMI-1 that more than one exchange writes or compares, in `.text.init` with the
// dialog (`init_bytes!`).
static CMD: &[u8] = init_bytes!(b"cmd");
static RC: &[u8] = init_bytes!(b"rc");
static ZERO: &[u8] = init_bytes!(b"0");
static ONE: &[u8] = init_bytes!(b"1");

/// The longest line sent or read (Hydra 4.0's `vallen_max` is 1024; ours are short).
const LINE: usize = 1200;
/// How long one response may take, in milliseconds.
pub const WAIT_MS: c_int = 30_000;

/// Why the protocol was abandoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surprise {
    /// Not Hydra's PMI-1 over `PMI_FD` (environment, socket type).
    NotHydra,
    /// A send or receive failed, or the proxy closed the socket.
    Io,
    /// No whole response within [`WAIT_MS`].
    Timeout,
    /// A line longer than [`LINE`].
    TooLong,
    /// A response other than the one verified for the request.
    Unexpected,
}

/// A line being built or read, on the stack.
pub struct Line {
    bytes: [u8; LINE],
    len: usize,
}

impl Line {
    #[link_section = ".text.init.mpistat"]
    pub fn new() -> Line {
        Line {
            bytes: [0; LINE],
            len: 0,
        }
    }

    /// Append `part` (a whole line stays within [`LINE`]).
    #[link_section = ".text.init.mpistat"]
    pub fn push(&mut self, part: &[u8]) -> Result<&mut Line, Surprise> {
        let end = self.len + part.len();
        if end > LINE {
            return Err(Surprise::TooLong);
        }
        self.bytes[self.len..end].copy_from_slice(part);
        self.len = end;
        Ok(self)
    }

    /// Append `n` in decimal.
    #[link_section = ".text.init.mpistat"]
    pub fn number(&mut self, n: u32) -> Result<&mut Line, Surprise> {
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        let mut n = n;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[at..])
    }

    #[link_section = ".text.init.mpistat"]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Default for Line {
    fn default() -> Line {
        Line::new()
    }
}

/// The value of `name=` among a line's space-separated `name=value` words.
#[link_section = ".text.init.mpistat"]
pub fn field<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    line.split(|b| *b == b' ').find_map(|word| {
        let (n, v) = word.split_at(word.iter().position(|b| *b == b'=')?);
        (n == name).then_some(&v[1..])
    })
}

/// A decimal number of at most `u32`'s range (no sign, no spaces).
#[link_section = ".text.init.mpistat"]
pub fn decimal(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() || bytes.len() > 10 {
        return None;
    }
    bytes.iter().try_fold(0u32, |n, b| {
        b.is_ascii_digit()
            .then_some(())
            .and_then(|()| n.checked_mul(10)?.checked_add(u32::from(b - b'0')))
    })
}

/// What a `get_result` line says of a key: its value, `None` if nobody put it.
#[link_section = ".text.init.mpistat"]
pub fn get_result<'a>(line: &'a [u8], key: &[u8]) -> Result<Option<&'a [u8]>, Surprise> {
    if field(line, CMD) != Some(init_bytes!(b"get_result")) {
        return Err(Surprise::Unexpected);
    }
    match (
        field(line, RC),
        field(line, init_bytes!(b"msg")),
        field(line, init_bytes!(b"value")),
    ) {
        (Some(b"0"), Some(b"success"), Some(value)) => Ok(Some(value)),
        (Some(b"-1"), Some(msg), _)
            if msg
                .strip_prefix(init_bytes!(b"key_"))
                .and_then(|m| m.strip_suffix(init_bytes!(b"_not_found")))
                == Some(key) =>
        {
            Ok(None)
        }
        _ => Err(Surprise::Unexpected),
    }
}

/// This process's end of Hydra's PMI-1 socket, and its place in the job.
pub struct Client {
    fd: c_int,
    /// `PMI_RANK`.
    pub rank: u32,
    /// `PMI_SIZE`.
    pub size: u32,
}

/// A number from the environment, without allocating (this runs inside `MPI_Init`).
#[link_section = ".text.init.mpistat"]
fn env_number(name: &CStr) -> Option<u32> {
    // SAFETY: getenv with a NUL-terminated name; the value is read at once.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: getenv returned a NUL-terminated string.
    decimal(unsafe { CStr::from_ptr(value) }.to_bytes())
}

impl Client {
    /// The PMI-1 socket if this process was started by a Hydra proxy (`PMI_FD`, `PMI_RANK`,
    /// `PMI_SIZE` and the proxy's `MPI_LOCALNRANKS` set, no `PMI_PORT`) and `PMI_FD` is a stream
    /// socket. (`MPI_LOCALNRANKS`, not `mpiexec`'s `HYDI_CONTROL_FD`: proxies on other nodes,
    /// started by ssh or a batch system, do not have the latter. Slurm's `srun --mpi=pmi2` sets
    /// `PMI_FD`, `PMI_RANK` and `PMI_SIZE` too, but its slurmstepd answers only a task's first
    /// `init`: a dialog of ours there would hang MPICH's `MPI_Init`, see [`crate::peers`].)
    #[link_section = ".text.init.mpistat"]
    pub fn from_env() -> Result<Client, Surprise> {
        let hydra = env_number(init_c_str!("MPI_LOCALNRANKS")).is_some();
        let port_name = init_c_str!("PMI_PORT");
        // SAFETY: getenv with a NUL-terminated name.
        let port = !unsafe { libc::getenv(port_name.as_ptr()) }.is_null();
        let (Some(fd), Some(rank), Some(size)) = (
            env_number(init_c_str!("PMI_FD")),
            env_number(init_c_str!("PMI_RANK")),
            env_number(init_c_str!("PMI_SIZE")),
        ) else {
            return Err(Surprise::NotHydra);
        };
        let fd = c_int::try_from(fd).map_err(|_| Surprise::NotHydra)?;
        if !hydra || port || rank >= size || !is_stream_socket(fd) {
            return Err(Surprise::NotHydra);
        }
        Ok(Client { fd, rank, size })
    }

    /// `cmd=init` for PMI 1.1 (before any `put`: see the module doc).
    #[link_section = ".text.init.mpistat"]
    pub fn init(&self) -> Result<(), Surprise> {
        let mut reply = Line::new();
        self.exchange(
            init_bytes!(b"cmd=init pmi_version=1 pmi_subversion=1\n"),
            &mut reply,
        )?;
        let r = reply.as_bytes();
        let ok = field(r, CMD) == Some(init_bytes!(b"response_to_init"))
            && field(r, init_bytes!(b"pmi_version")) == Some(ONE)
            && field(r, init_bytes!(b"pmi_subversion")) == Some(ONE)
            && field(r, RC) == Some(ZERO);
        ok.then_some(()).ok_or(Surprise::Unexpected)
    }

    /// The job's key-value space (`cmd=get_my_kvsname`), into `kvs`.
    #[link_section = ".text.init.mpistat"]
    pub fn kvsname(&self, kvs: &mut Line) -> Result<(), Surprise> {
        let mut reply = Line::new();
        self.exchange(init_bytes!(b"cmd=get_my_kvsname\n"), &mut reply)?;
        let r = reply.as_bytes();
        match (field(r, CMD), field(r, init_bytes!(b"kvsname"))) {
            (Some(b"my_kvsname"), Some(name)) if !name.is_empty() => {
                kvs.push(name)?;
                Ok(())
            }
            _ => Err(Surprise::Unexpected),
        }
    }

    /// Put `key` = `value` (neither with spaces, `=` or newlines) into `kvs`.
    #[link_section = ".text.init.mpistat"]
    pub fn put(&self, kvs: &[u8], key: &[u8], value: &[u8]) -> Result<(), Surprise> {
        let mut reply = Line::new();
        self.about_key(init_bytes!(b"put"), kvs, key, Some(value), &mut reply)?;
        let r = reply.as_bytes();
        let ok = field(r, CMD) == Some(init_bytes!(b"put_result")) && field(r, RC) == Some(ZERO);
        ok.then_some(()).ok_or(Surprise::Unexpected)
    }

    /// Get `key` of `kvs`: its value (into `value`), or `false` if nobody put it.
    #[link_section = ".text.init.mpistat"]
    pub fn get(&self, kvs: &[u8], key: &[u8], value: &mut Line) -> Result<bool, Surprise> {
        let mut reply = Line::new();
        self.about_key(init_bytes!(b"get"), kvs, key, None, &mut reply)?;
        match get_result(reply.as_bytes(), key)? {
            Some(v) => {
                value.push(v)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// `cmd=<cmd> kvsname=<kvs> key=<key>[ value=<value>]`, and its response into `reply`.
    #[link_section = ".text.init.mpistat"]
    fn about_key(
        &self,
        cmd: &[u8],
        kvs: &[u8],
        key: &[u8],
        value: Option<&[u8]>,
        reply: &mut Line,
    ) -> Result<(), Surprise> {
        let mut request = Line::new();
        request
            .push(init_bytes!(b"cmd="))?
            .push(cmd)?
            .push(init_bytes!(b" kvsname="))?
            .push(kvs)?
            .push(init_bytes!(b" key="))?
            .push(key)?;
        if let Some(value) = value {
            request.push(init_bytes!(b" value="))?.push(value)?;
        }
        request.push(init_bytes!(b"\n"))?;
        self.exchange(request.as_bytes(), reply)
    }

    /// Send `request` (one line) and read its one response line, without its newline, into
    /// `reply`.
    #[link_section = ".text.init.mpistat"]
    fn exchange(&self, request: &[u8], reply: &mut Line) -> Result<(), Surprise> {
        let mut sent = 0;
        while sent < request.len() {
            let rest = &request[sent..];
            // SAFETY: send from a valid buffer; MSG_NOSIGNAL: a closed socket is an error, not
            // SIGPIPE.
            let n = unsafe {
                libc::send(
                    self.fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            match n {
                n if n > 0 => sent += n as usize,
                _ if interrupted() => {}
                _ => return Err(Surprise::Io),
            }
        }
        self.read_line(reply)
    }

    /// Read one line up to its newline and not a byte further.
    #[link_section = ".text.init.mpistat"]
    fn read_line(&self, line: &mut Line) -> Result<(), Surprise> {
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll of one valid pollfd.
            match unsafe { libc::poll(&mut pfd, 1, WAIT_MS) } {
                0 => return Err(Surprise::Timeout),
                n if n < 0 && interrupted() => continue,
                n if n < 0 => return Err(Surprise::Io),
                _ => {}
            }
            let room = LINE - line.len;
            if room == 0 {
                return Err(Surprise::TooLong);
            }
            let free = &mut line.bytes[line.len..];
            // SAFETY: recv into the free part of the line; MSG_PEEK leaves the bytes queued.
            let n = unsafe {
                libc::recv(
                    self.fd,
                    free.as_mut_ptr().cast(),
                    room,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            if n == 0 {
                return Err(Surprise::Io);
            }
            if n < 0 {
                let e = errno();
                if e == libc::EINTR || e == libc::EAGAIN || e == libc::EWOULDBLOCK {
                    continue;
                }
                return Err(Surprise::Io);
            }
            let peeked = n as usize;
            let end = free[..peeked].iter().position(|b| *b == b'\n');
            let take = end.map_or(peeked, |at| at + 1);
            // SAFETY: as above; these bytes are queued (just peeked), so this takes exactly them.
            let got =
                unsafe { libc::recv(self.fd, free.as_mut_ptr().cast(), take, libc::MSG_DONTWAIT) };
            if got != take as isize {
                return Err(Surprise::Io);
            }
            line.len += take;
            if end.is_some() {
                line.len -= 1;
                return Ok(());
            }
        }
    }
}

#[link_section = ".text.init.mpistat"]
fn errno() -> c_int {
    // SAFETY: the thread's errno location.
    unsafe { *libc::__errno_location() }
}

#[link_section = ".text.init.mpistat"]
fn interrupted() -> bool {
    errno() == libc::EINTR
}

/// Whether `fd` is an open stream socket.
#[link_section = ".text.init.mpistat"]
fn is_stream_socket(fd: c_int) -> bool {
    let mut kind: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a c_int of the given length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut c_int).cast(),
            &mut len,
        )
    };
    rc == 0 && kind == libc::SOCK_STREAM
}

#[cfg(test)]
impl Client {
    /// A client on `fd` (a test's end of a socket pair).
    fn on(fd: c_int) -> Client {
        Client {
            fd,
            rank: 0,
            size: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn fields_are_found_by_name() {
        let line = b"cmd=get_result rc=0 msg=success value=3";
        assert_eq!(field(line, b"cmd"), Some(&b"get_result"[..]));
        assert_eq!(field(line, b"value"), Some(&b"3"[..]));
        assert_eq!(field(line, b"rc"), Some(&b"0"[..]));
        assert_eq!(field(line, b"r"), None);
        assert_eq!(field(b"cmd=barrier_out", b"cmd"), Some(&b"barrier_out"[..]));
        assert_eq!(field(b"value=", b"value"), Some(&b""[..]));
        assert_eq!(field(b"novalue", b"novalue"), None);
    }

    #[test]
    fn get_results_say_value_missing_or_surprise() {
        let key = b"mpistat.3";
        assert_eq!(
            get_result(b"cmd=get_result rc=0 msg=success value=2", key),
            Ok(Some(&b"2"[..]))
        );
        assert_eq!(
            get_result(
                b"cmd=get_result rc=-1 msg=key_mpistat.3_not_found value=unknown",
                key
            ),
            Ok(None)
        );
        for other in [
            "cmd=get_result rc=-1 msg=key_mpistat.4_not_found value=unknown",
            "cmd=get_result rc=-1 msg=kvs_not_found",
            "cmd=get_result rc=1 msg=success value=2",
            "cmd=put_result rc=0 msg=success",
            "000032cmd=kvs-get-response;rc=0;found=TRUE;value=2;",
            "",
        ] {
            let got = get_result(other.as_bytes(), key);
            assert_eq!(got, Err(Surprise::Unexpected), "{other}");
        }
    }

    #[test]
    fn decimals_and_lines() {
        assert_eq!(decimal(b"0"), Some(0));
        assert_eq!(decimal(b"4294967295"), Some(u32::MAX));
        for bad in ["", "-1", "4294967296", "12a", " 1", "99999999999"] {
            assert_eq!(decimal(bad.as_bytes()), None, "{bad}");
        }
        let mut line = Line::new();
        line.push(b"mpistat.").unwrap().number(1234).unwrap();
        line.number(0).unwrap();
        assert_eq!(line.as_bytes(), b"mpistat.12340");
        assert_eq!(line.push(&[b'x'; LINE]).err(), Some(Surprise::TooLong));
    }

    /// A fake Hydra proxy on the other end of a socket pair: answers each request line with the
    /// next of `replies` (written in `chunks`-byte pieces), and returns the requests it read.
    fn proxy(
        replies: Vec<&'static [u8]>,
        chunks: usize,
    ) -> (UnixStream, std::thread::JoinHandle<Vec<String>>) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let peer = std::thread::spawn(move || {
            let mut reader = BufReader::new(theirs.try_clone().unwrap());
            let mut writer = theirs;
            let mut requests = Vec::new();
            for reply in replies {
                let mut request = String::new();
                if reader.read_line(&mut request).unwrap() == 0 {
                    break;
                }
                requests.push(request);
                for piece in reply.chunks(chunks) {
                    writer.write_all(piece).unwrap();
                    writer.flush().unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            requests
        });
        (ours, peer)
    }

    #[test]
    fn a_dialog_with_hydra_as_verified() {
        let (socket, peer) = proxy(
            vec![
                b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
                b"cmd=my_kvsname kvsname=kvs_6664_0_431440430_vm\n",
                b"cmd=put_result rc=0 msg=success\n",
                b"cmd=get_result rc=0 msg=success value=2\n",
                b"cmd=get_result rc=-1 msg=key_mpistat.1_not_found value=unknown\n",
            ],
            7,
        );
        let client = Client::on(socket.as_raw_fd());
        client.init().unwrap();
        let mut kvs = Line::new();
        client.kvsname(&mut kvs).unwrap();
        assert_eq!(kvs.as_bytes(), b"kvs_6664_0_431440430_vm");
        client.put(kvs.as_bytes(), b"mpistat.0", b"2").unwrap();
        let mut value = Line::new();
        assert_eq!(
            client.get(kvs.as_bytes(), b"mpistat.0", &mut value),
            Ok(true)
        );
        assert_eq!(value.as_bytes(), b"2");
        assert_eq!(
            client.get(kvs.as_bytes(), b"mpistat.1", &mut Line::new()),
            Ok(false)
        );
        assert_eq!(
            peer.join().unwrap(),
            [
                "cmd=init pmi_version=1 pmi_subversion=1\n",
                "cmd=get_my_kvsname\n",
                "cmd=put kvsname=kvs_6664_0_431440430_vm key=mpistat.0 value=2\n",
                "cmd=get kvsname=kvs_6664_0_431440430_vm key=mpistat.0\n",
                "cmd=get kvsname=kvs_6664_0_431440430_vm key=mpistat.1\n",
            ]
        );
    }

    /// A response is read to its newline and not a byte further: whatever follows stays for
    /// the MPI library.
    #[test]
    fn nothing_after_the_response_is_taken() {
        let (socket, peer) = proxy(
            vec![b"cmd=put_result rc=0 msg=success\ncmd=barrier_out\n"],
            1000,
        );
        let client = Client::on(socket.as_raw_fd());
        client.put(b"kvs", b"k", b"v").unwrap();
        peer.join().unwrap();
        let mut rest = String::new();
        (&socket).read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "cmd=barrier_out\n");
    }

    #[test]
    fn other_answers_are_surprises() {
        for (reply, expected) in [
            (
                &b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n"[..],
                Surprise::Unexpected,
            ),
            (
                b"000057cmd=response_to_init;pmi_version=2;pmi_subversion=0;rc=0;\n",
                Surprise::Unexpected,
            ),
            (
                b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n",
                Surprise::Unexpected,
            ),
            (b"", Surprise::Io),
        ] {
            let (socket, peer) = proxy(vec![reply], 1000);
            let client = Client::on(socket.as_raw_fd());
            if reply.is_empty() {
                socket.shutdown(std::net::Shutdown::Both).ok();
            }
            assert_eq!(
                client.init(),
                Err(expected),
                "{}",
                String::from_utf8_lossy(reply)
            );
            drop(socket);
            peer.join().unwrap();
        }
        let long: &'static [u8] = Box::leak(vec![b'x'; 2 * LINE].into_boxed_slice());
        let (socket, peer) = proxy(vec![long], 100_000);
        let client = Client::on(socket.as_raw_fd());
        assert_eq!(client.init(), Err(Surprise::TooLong));
        drop(socket);
        peer.join().unwrap();
    }

    #[test]
    fn outside_hydra_there_is_no_client() {
        // The test process has no PMI_FD (nor MPI_LOCALNRANKS).
        if std::env::var_os("PMI_FD").is_none() {
            assert_eq!(Client::from_env().err(), Some(Surprise::NotHydra));
        }
        let file = std::fs::File::open("/dev/null").unwrap();
        assert!(!is_stream_socket(file.as_raw_fd()));
        let (a, _b) = UnixStream::pair().unwrap();
        assert!(is_stream_socket(a.as_raw_fd()));
    }
}
