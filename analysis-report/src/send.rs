//! `mpistat analyze --send DIR`: the analysis of a traced job, run as the job's user where the
//! trace is, sent to syslog as that user's record ([`AnalysisRecord`]).
//!
//! The digest never opens a path a record names: it only files the analysis records users send,
//! and believes one only when the kernel-attested sender is the job's uid (the digest's
//! `escalate`). Here: the directory must be the caller's own (not a symlink, owned by the real
//! uid), the job is the one named by the key file the profiler wrote into it ([`JOB_KEY_FILE`],
//! also the caller's own regular file), the analysis runs in a child process `mpistat analyze
//! --format summary DIR` bounded by the site's `[escalation] analysis_timeout_seconds` and
//! `analysis_memory_bytes` (see `mpistat_analysis::memory`), at the lowest priority, and its
//! summary (or why it failed) goes to the site's syslog socket in lines made by
//! [`mpistat_record::encode_analysis`], with a bounded wait for a syslog daemon that does not
//! read.

use crate::error::SendError;
use mpistat_record::analysis::{is_job_key, AnalysisRecord, ANALYSIS_MODEL_VERSION, JOB_KEY_FILE};
use mpistat_site::accounts::System;
use mpistat_site::{EscalationConfig, SiteConfig};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one syslog line may wait for room in the daemon's queue.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Analyse `dir` and send the outcome to syslog as the caller's record. Fails (sending nothing)
/// when the directory or its key file is not the caller's, or syslog cannot be reached.
pub fn run(
    dir: &Path,
    config: &SiteConfig,
    err: &mut impl std::io::Write,
) -> Result<(), SendError> {
    lowest_priority();
    let job_key = job_key_of(dir)?;
    let outcome = analyse(&config.escalation, dir);
    send_outcome(config, job_key, dir, outcome, err)
}

/// Sends the outcome of the analysis of `dir` (the summary's JSON, or why it failed, which also
/// goes to `err`) to syslog as the caller's record of job `job_key` (from [`job_key_of`]). Shared
/// by `mpistat analyze --send` and `mpistat-analyze --send` (the analysis as an MPI program in
/// the job's allocation), so that the digest gets and checks the same record from both.
pub fn send_outcome(
    config: &SiteConfig,
    job_key: String,
    dir: &Path,
    outcome: Result<String, String>,
    err: &mut impl std::io::Write,
) -> Result<(), SendError> {
    if let Err(e) = &outcome {
        writeln!(err, "mpistat: {}: {e}", dir.display())?;
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let (summary, error) = match outcome {
        Ok(summary) => (Some(summary), None),
        Err(error) => (None, Some(error)),
    };
    let record = AnalysisRecord {
        version: ANALYSIS_MODEL_VERSION,
        job_key,
        uid,
        user: System::default().name_of(uid).unwrap_or_default(),
        host: host_name(),
        dir: dir.display().to_string(),
        summary,
        error,
        analysed_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    };
    send(config, &mpistat_record::encode_analysis(&record))
}

/// The key of the job whose trace `dir` is: the directory and its key file must be the
/// caller's own (by real uid), neither a symlink.
pub fn job_key_of(dir: &Path) -> Result<String, SendError> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let own = |path: &Path, want_dir: bool| -> Result<(), SendError> {
        let meta = std::fs::symlink_metadata(path).map_err(|error| SendError::Look {
            path: path.to_path_buf(),
            error,
        })?;
        let kind_ok = if want_dir {
            meta.is_dir()
        } else {
            meta.is_file()
        };
        if !kind_ok || meta.uid() != uid {
            return Err(SendError::NotYours {
                path: path.to_path_buf(),
                kind: if want_dir { "directory" } else { "file" },
                uid,
            });
        }
        Ok(())
    };
    own(dir, true)?;
    let key_file = dir.join(JOB_KEY_FILE);
    own(&key_file, false)?;
    let mut text = String::new();
    std::fs::File::open(&key_file)
        .and_then(|f| f.take(64).read_to_string(&mut text))
        .map_err(|error| SendError::Read {
            path: key_file.clone(),
            error,
        })?;
    let key = text.trim();
    if !is_job_key(key) {
        return Err(SendError::NoJobKey(key_file));
    }
    Ok(key.to_string())
}

/// Be the last to run: the analysis may take minutes on a node that runs the next job.
fn lowest_priority() {
    // SAFETY: setpriority on this process; no memory is involved.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its length.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Run `mpistat analyze --format summary DIR` with the site's time and memory bounds: the memory
/// limit is checked against the trace's estimated need before reading (a clear failure), and
/// the child's address space is capped at twice that plus 1 GiB (threads' stacks and allocator
/// arenas are address space, not resident) as a backstop.
fn analyse(rule: &EscalationConfig, dir: &Path) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find mpistat: {e}"))?;
    let memory = mpistat_analysis::memory::limit(rule.analysis_memory_bytes, 1);
    let mut cmd = Command::new(exe);
    cmd.args(["analyze", "--format", "summary", "--memory-limit"])
        .arg(memory.to_string())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limit = memory.saturating_mul(2).saturating_add(1 << 30);
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
        unsafe {
            cmd.pre_exec(move || {
                let rl = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run the analysis: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let (mut out, mut err) = (String::new(), String::new());
        let _ = stdout.read_to_string(&mut out);
        let _ = stderr.read_to_string(&mut err);
        (out, err)
    });
    let deadline = Instant::now() + Duration::from_secs(rule.analysis_timeout_seconds);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the analysis took longer than {} s and was stopped",
                    rule.analysis_timeout_seconds
                ));
            }
        }
    };
    let (out, err) = reader.join().unwrap_or_default();
    if status.success() {
        Ok(out.trim().to_string())
    } else {
        let last = err.lines().last().unwrap_or("").trim();
        Err(format!("the analysis failed ({status}): {last}"))
    }
}

/// Send `messages` to the site's syslog socket (facility and tag as the profiler's records),
/// waiting at most [`SEND_TIMEOUT`] per line for a daemon that does not read.
fn send(config: &SiteConfig, messages: &[String]) -> Result<(), SendError> {
    let syslog = &config.syslog;
    let socket = std::os::unix::net::UnixDatagram::unbound()?;
    socket.set_write_timeout(Some(SEND_TIMEOUT))?;
    socket
        .connect(&syslog.socket)
        .map_err(|error| SendError::Unreachable {
            socket: syslog.socket.clone(),
            error,
        })?;
    let priority = syslog.facility.code() * 8 + 6;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for (i, message) in messages.iter().enumerate() {
        let datagram =
            mpistat_site::syslog_frame(priority, &syslog.tag, std::process::id(), message, now);
        socket
            .send(datagram.as_bytes())
            .map_err(|error| SendError::Refused {
                socket: syslog.socket.clone(),
                sent: i,
                lines: messages.len(),
                error,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_own_directory_with_a_key_names_a_job() {
        let dir = std::env::temp_dir().join(format!("mpistat-send-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(job_key_of(&dir).is_err(), "no key file");
        std::fs::write(dir.join(JOB_KEY_FILE), "../../etc/shadow\n").unwrap();
        assert!(job_key_of(&dir).is_err(), "not a key");
        std::fs::write(dir.join(JOB_KEY_FILE), "0123456789abcdef\n").unwrap();
        assert_eq!(job_key_of(&dir).unwrap(), "0123456789abcdef");
        let link = dir.with_extension("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(job_key_of(&link).is_err(), "a symlink is not followed");
        std::fs::remove_file(&link).unwrap();
        assert!(job_key_of(Path::new("/etc/shadow")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
