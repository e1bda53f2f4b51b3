//! Sending the record's lines to syslog without ever waiting.
//!
//! A non-blocking datagram socket: a missing socket, a full queue or a stopped syslogd makes the
//! send fail at once (the record is then lost, and detail mode says so) instead of delaying the job.

use std::os::unix::net::UnixDatagram;
use std::path::Path;

/// Why the record did not reach syslog.
#[derive(Debug)]
pub enum SendError {
    Connect(std::io::Error),
    /// Sending line `line` (0-based) of `of` failed; earlier lines went out.
    Send {
        line: usize,
        of: usize,
        error: std::io::Error,
    },
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "cannot reach the syslog socket: {e}"),
            SendError::Send { line, of, error } => {
                write!(f, "syslog took {line} of {of} lines, then: {error}")
            }
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

/// Send `messages` to the syslog socket at `socket` with facility code `facility` (severity info).
pub fn send(socket: &Path, facility: u8, tag: &str, messages: &[String]) -> Result<(), SendError> {
    let sock = UnixDatagram::unbound().map_err(SendError::Connect)?;
    sock.set_nonblocking(true).map_err(SendError::Connect)?;
    sock.connect(socket).map_err(SendError::Connect)?;
    let priority = facility * 8 + 6;
    let pid = std::process::id();
    for (i, m) in messages.iter().enumerate() {
        let datagram = frame(priority, tag, pid, m);
        if let Err(error) = sock.send(datagram.as_bytes()) {
            return Err(SendError::Send {
                line: i,
                of: messages.len(),
                error,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_looks_like_glibc_syslog() {
        let f = frame(174, "mpistat", 42, "hello");
        assert!(f.starts_with("<174>"), "{f}");
        assert!(f.ends_with(" mpistat[42]: hello"), "{f}");
    }

    #[test]
    fn missing_socket_fails_at_once() {
        let r = send(
            Path::new("/nonexistent/mpistat.sock"),
            21,
            "t",
            &["x".into()],
        );
        assert!(matches!(r, Err(SendError::Connect(_))));
    }

    #[test]
    fn full_queue_fails_instead_of_blocking() {
        let dir = std::env::temp_dir().join(format!("mpistat-syslog-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let _receiver = UnixDatagram::bind(&path).unwrap(); // never reads: like a stopped syslogd
        let lines: Vec<String> = (0..100_000).map(|i| format!("{i:0900}")).collect();
        match send(&path, 21, "t", &lines) {
            Err(SendError::Send { line, .. }) => assert!(line > 0 && line < lines.len()),
            other => panic!("expected a failed send once the queue is full, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
