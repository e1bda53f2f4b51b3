//! Where a user's opt-in output goes: `MPISTAT_DETAIL=stderr|stdout|<path>`.
//!
//! A path may name anything: a regular file (appended to), a terminal, a FIFO. It is opened
//! without blocking and through no other user's symlink ([`mpistat_site::files`]; the job's
//! user's own symlinks are followed: the job could write there anyway), so a FIFO nobody reads
//! is skipped at once, and the report is written with a bounded wait ([`WRITE_WAIT`]): a reader
//! that stops reading never holds `MPI_Finalize`.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The longest the report may wait for room in a pipe or terminal at a path: a reader that
/// takes nothing for this long gets the rest of the report no more.
const WRITE_WAIT: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    Stderr,
    /// Appended to, so several jobs (or ranks, for `MPI_Pcontrol(2)`) never overwrite each other.
    File(PathBuf),
}

impl Destination {
    /// The destination the user asked for, if any.
    pub fn from_env() -> Option<Destination> {
        let v = std::env::var_os("MPISTAT_DETAIL")?;
        Some(match v.to_str() {
            Some("") | Some("0") | Some("no") | Some("off") => return None,
            Some("stderr") | Some("1") | Some("yes") | Some("on") => Destination::Stderr,
            Some("stdout") => Destination::Stdout,
            _ => Destination::File(PathBuf::from(v)),
        })
    }

    /// Write `text` in one piece (best effort: the user's job never fails because of it).
    pub fn write(&self, text: &str) {
        let _ = match self {
            Destination::Stdout => std::io::stdout().lock().write_all(text.as_bytes()),
            Destination::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
            Destination::File(p) => {
                let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT;
                match mpistat_site::files::open(p, flags, 0o666) {
                    Ok(file) => write_bounded(&file, text.as_bytes(), WRITE_WAIT),
                    Err(_) => Ok(()),
                }
            }
        };
    }
}

/// Writes `bytes` to the non-blocking `file`, waiting for room at most `wait` in all.
fn write_bounded(
    mut file: &std::fs::File,
    mut bytes: &[u8],
    wait: Duration,
) -> std::io::Result<()> {
    let deadline = Instant::now() + wait;
    while !bytes.is_empty() {
        match file.write(bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(e);
                }
                let mut poll = libc::pollfd {
                    fd: file.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one pollfd of ours; the timeout is under a second.
                unsafe { libc::poll(&mut poll, 1, left.as_millis().max(1) as libc::c_int) };
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_nobody_reads_holds_the_writer_only_as_long_as_the_wait() {
        let mut fds = [0; 2];
        // SAFETY: a pipe into our array.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        // SAFETY: descriptors just made, each owned once.
        let (_reader, writer) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        let more_than_a_pipe = vec![b'x'; 1 << 20];
        let e = write_bounded(&writer, &more_than_a_pipe, Duration::from_millis(100)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
}
