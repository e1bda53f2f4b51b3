//! A real SMTP server to send mail to.

use crate::workspace::workspace_root;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A real SMTP server (Debian's python3-aiosmtpd, `mail/tests/smtp_sink.py`) on `port` that
/// stores each mail it gets as a file in `inbox` (its first line `X-Sink-Session: tls=yes|no
/// login=NAME|-`); stopped when dropped.
pub struct SmtpSink {
    child: Child,
    inbox: PathBuf,
}

impl SmtpSink {
    pub fn start(port: u16, inbox: &Path) -> SmtpSink {
        SmtpSink::start_with(port, inbox, &[])
    }

    /// With the sink's options: `--tls CERT KEY` (STARTTLS), `--login USER PASSWORD` (AUTH,
    /// attempts logged in [`SmtpSink::logins`]), `--login-without-tls`.
    pub fn start_with(port: u16, inbox: &Path, options: &[&std::ffi::OsStr]) -> SmtpSink {
        use std::io::BufRead;
        std::fs::create_dir_all(inbox).unwrap();
        let sink = workspace_root().join("mail/tests/smtp_sink.py");
        let mut child = Command::new("/usr/bin/python3")
            .arg(sink)
            .arg(port.to_string())
            .arg(inbox)
            .args(options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3-aiosmtpd (scripts/prereqs.sh installs it)");
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        SmtpSink {
            child,
            inbox: inbox.to_path_buf(),
        }
    }

    /// The mails received, once at least `n` arrived (or after 10 s), then a little longer.
    pub fn mails(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_dir(&self.inbox).unwrap().count() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        std::fs::read_dir(&self.inbox)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect()
    }

    /// The login attempts so far, `NAME PASSWORD tls=yes|no ok|refused` each.
    pub fn logins(&self) -> Vec<String> {
        let mut path = self.inbox.clone().into_os_string();
        path.push(".logins");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
