//! The `sendmail` transport: the local MTA's program, given one mail on its standard input, with a
//! bounded wait.
//!
//! A sendmail that cannot deliver may not say so: Postfix's `postdrop` retries for ever when it
//! cannot write its queue (without group `postdrop` under `NoNewPrivileges=`, or on a read-only
//! `/var/spool` under `ProtectSystem=strict`). So the program runs in a process group of its own;
//! past the timeout the whole group is killed and the mail counts as failed (the digest tries
//! it again on its next run), with what the program said on its standard error.

use crate::MailerError;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most bytes of the program's standard error kept for the error message.
const STDERR_KEPT: usize = 2048;
/// How often the program's end is checked for.
const POLL: Duration = Duration::from_millis(10);
/// How long the threads that feed and read the program are waited for once it ended (a
/// descendant that left the process group may hold the pipes).
const PIPE_GRACE: Duration = Duration::from_secs(1);

pub struct Sendmail {
    pub command: PathBuf,
    /// Longest run for one mail.
    pub timeout: Duration,
}

impl Sendmail {
    /// Run `command -i -f from -- to` with `message` on its standard input (the interface every
    /// MTA's sendmail has: `-i` so that a line of one dot does not end the message).
    pub fn send(&self, from: &str, to: &str, message: &[u8]) -> Result<(), MailerError> {
        let name = self.command.display();
        let mut child = Command::new(&self.command)
            .args(["-i", "-f", from, "--", to])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| MailerError::Send(format!("cannot run {name}: {e}")))?;
        let mut stdin = child.stdin.take().expect("piped");
        let message = message.to_vec();
        // A program that does not read must not block us: the message is fed by a thread.
        let feeder = std::thread::spawn(move || stdin.write_all(&message));
        let mut stderr = child.stderr.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buffer) {
                let room = STDERR_KEPT.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
            kept
        });
        let outcome = wait_bounded(&mut child, self.timeout);
        let said = finished(reader, PIPE_GRACE)
            .map(|kept| String::from_utf8_lossy(&kept).trim().replace('\n', "; "))
            .unwrap_or_default();
        let fed = finished(feeder, PIPE_GRACE);
        let said = if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        };
        match outcome {
            Ok(status) if status.success() => match fed {
                Some(Err(e)) => Err(MailerError::Send(format!(
                    "{name} exited before reading the whole mail: {e}{said}"
                ))),
                _ => Ok(()),
            },
            Ok(status) => Err(MailerError::Send(format!("{name} failed ({status}){said}"))),
            Err(waited) => Err(MailerError::Send(format!(
                "{name} did not finish within {} s and was stopped{said}",
                waited.as_secs()
            ))),
        }
    }
}

/// The child's exit status, or (after killing its process group) the time waited.
fn wait_bounded(
    child: &mut Child,
    timeout: Duration,
) -> Result<std::process::ExitStatus, Duration> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(POLL),
            _ => break,
        }
    }
    // SAFETY: kill(2) on the child's own process group (process_group(0) made it its leader),
    // which still exists: the child is not reaped yet.
    unsafe {
        libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
    }
    let _ = child.wait();
    Err(start.elapsed())
}

/// The thread's result when it ends within `grace`; else it is left to end on its own.
fn finished<T>(thread: JoinHandle<T>, grace: Duration) -> Option<T> {
    let start = Instant::now();
    while !thread.is_finished() && start.elapsed() < grace {
        std::thread::sleep(POLL);
    }
    thread.is_finished().then(|| thread.join().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sendmail that is the shell script `body` (in `dir`), given `timeout` for a mail.
    fn script(dir: &std::path::Path, body: &str, timeout: Duration) -> Sendmail {
        use std::os::unix::fs::PermissionsExt;
        let command = dir.join("sendmail");
        std::fs::write(&command, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&command, std::fs::Permissions::from_mode(0o755)).unwrap();
        Sendmail { command, timeout }
    }

    fn temp_dir(label: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mpistat-sendmail-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_mail_and_the_envelope_reach_the_program() {
        let dir = temp_dir("ok");
        let out = dir.join("out");
        let body = format!("echo \"$@\" > {0}; cat >> {0}", out.display());
        script(&dir, &body, Duration::from_secs(30))
            .send(
                "mpistat@here",
                "alice@there",
                b"Subject: x\r\n\r\n.\r\nbody\r\n",
            )
            .unwrap();
        let got = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            got,
            "-i -f mpistat@here -- alice@there\nSubject: x\r\n\r\n.\r\nbody\r\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_program_says_why() {
        let dir = temp_dir("fail");
        let body = "cat >/dev/null; echo 'no such user' >&2; exit 67";
        let error = script(&dir, body, Duration::from_secs(30))
            .send("a@b", "c@d", b"x")
            .unwrap_err()
            .to_string();
        assert!(error.contains("exit status: 67"), "{error}");
        assert!(error.ends_with(": no such user"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A sendmail that hangs (and a child of it that would go on, like postdrop) is stopped at
    /// the timeout, the whole process group with it, and the mail is an error.
    #[test]
    fn a_hung_program_is_stopped_with_its_children() {
        let dir = temp_dir("hang");
        let pid_file = dir.join("grandchild.pid");
        // Not reading its input either: a mail larger than a pipe's buffer must not block us.
        let body = format!(
            "echo 'postdrop: warning: Permission denied' >&2\n\
             sleep 600 & echo $! > {}\nwait",
            pid_file.display()
        );
        let sendmail = script(&dir, &body, Duration::from_secs(1));
        let start = Instant::now();
        let error = sendmail
            .send("a@b", "c@d", &vec![b'x'; 1 << 20])
            .unwrap_err()
            .to_string();
        let took = start.elapsed();
        assert!(took < Duration::from_secs(10), "took {took:?}");
        assert!(error.contains("did not finish within 1 s"), "{error}");
        assert!(error.contains("Permission denied"), "{error}");
        let grandchild: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SIGKILL was sent to it; its end shows once the kernel has run it (a zombie is dead: the
        // test machine's init may reap it late).
        let dead = || {
            std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .map_or(true, |stat| stat.split_whitespace().nth(2) == Some("Z"))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dead() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert!(dead(), "the sendmail's child {grandchild} still runs");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
