//! The analysis of a traced job, started by the job itself: the trace stays where it is and is
//! read only by its user.
//!
//! When rank 0 has sent a traced job's record (every rank's trace files are written by then:
//! their counts were reduced to rank 0 after the writes), it writes the job key into the trace
//! directory ([`mpistat_record::analysis::JOB_KEY_FILE`], mode 0600), which is how
//! `mpistat analyze --send` names the job its analysis belongs to. With the site's
//! `[trace] analyze_at_exit`, rank 0 also starts `analyze_command analyze --send DIR` when the
//! process exits (after `MPI_Finalize` returned): `posix_spawn` (no fork of a large MPI
//! process), a session of its own (`setsid`, so the job's process group and terminal signals do
//! not reach it), stdin, stdout and stderr on `/dev/null`, an empty signal mask, and the job's
//! environment without `LD_PRELOAD`. The analysis lowers its own priority and sends its summary
//! to syslog as the user's record. Nothing is waited for: a command that cannot be started
//! changes nothing for the job.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The command to start at exit (rank 0 of a traced job, with `analyze_at_exit`).
static AT_EXIT: Mutex<Option<Vec<CString>>> = Mutex::new(None);

/// Rank 0, after sending the record of a traced job: name the job in its trace directory, and
/// arm the analysis at exit if the site wants it (`Ok(true)`). The key file is written only into
/// a directory that is this user's own and not a symlink (the one the ranks created).
pub fn after_record(
    dir: &str,
    job_key: &str,
    analyze_at_exit: bool,
    command: &Path,
) -> std::io::Result<bool> {
    let dir = PathBuf::from(dir);
    write_job_key(&dir, job_key)?;
    if !analyze_at_exit {
        return Ok(false);
    }
    let args = [
        command.as_os_str(),
        "analyze".as_ref(),
        "--send".as_ref(),
        dir.as_os_str(),
    ];
    use std::os::unix::ffi::OsStrExt;
    let argv: Option<Vec<CString>> = args
        .iter()
        .map(|a| CString::new(a.as_bytes()).ok())
        .collect();
    let armed = argv.is_some();
    *AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()) = argv;
    Ok(armed)
}

fn write_job_key(dir: &Path, job_key: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: getuid cannot fail.
    if !meta.is_dir() || meta.uid() != unsafe { libc::getuid() } {
        return Err(std::io::ErrorKind::PermissionDenied.into());
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(mpistat_record::analysis::JOB_KEY_FILE))?
        .write_all(format!("{job_key}\n").as_bytes())
}

/// At process exit (rank 0): start the armed analysis, detached. Best effort.
pub fn start_at_exit() {
    let Some(argv) = AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    let env: Vec<CString> = std::env::vars_os()
        .filter(|(name, _)| name != "LD_PRELOAD")
        .filter_map(|(name, value)| {
            use std::os::unix::ffi::OsStrExt;
            let mut entry = name.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            CString::new(entry).ok()
        })
        .collect();
    let _ = spawn_detached(&argv, &env);
}

/// `posix_spawn` `argv` with `env` in a new session, standard streams on `/dev/null`, no
/// blocked signals; the child is not waited for (the process is exiting).
fn spawn_detached(argv: &[CString], env: &[CString]) -> Result<libc::pid_t, i32> {
    let pointers = |strings: &[CString]| -> Vec<*mut libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr() as *mut libc::c_char)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect()
    };
    let (argv_ptrs, env_ptrs) = (pointers(argv), pointers(env));
    let null: &CStr = c"/dev/null";
    // SAFETY: the attribute and file-action objects are initialised before use and destroyed
    // after; every pointer passed stays alive until posix_spawn returns.
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        if libc::posix_spawnattr_init(&mut attr) != 0 {
            return Err(-1);
        }
        if libc::posix_spawn_file_actions_init(&mut actions) != 0 {
            libc::posix_spawnattr_destroy(&mut attr);
            return Err(-1);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        let flags = i32::from(libc::POSIX_SPAWN_SETSID) | libc::POSIX_SPAWN_SETSIGMASK;
        let mut rc = libc::posix_spawnattr_setflags(&mut attr, flags as libc::c_short);
        if rc == 0 {
            rc = libc::posix_spawnattr_setsigmask(&mut attr, &empty);
        }
        for (fd, mode) in [
            (0, libc::O_RDONLY),
            (1, libc::O_WRONLY),
            (2, libc::O_WRONLY),
        ] {
            if rc == 0 {
                rc = libc::posix_spawn_file_actions_addopen(
                    &mut actions,
                    fd,
                    null.as_ptr(),
                    mode,
                    0,
                );
            }
        }
        let mut pid: libc::pid_t = 0;
        if rc == 0 {
            rc = libc::posix_spawn(
                &mut pid,
                argv[0].as_ptr(),
                &actions,
                &attr,
                argv_ptrs.as_ptr(),
                env_ptrs.as_ptr(),
            );
        }
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        if rc == 0 {
            Ok(pid)
        } else {
            Err(rc)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_runs_in_its_own_session_with_null_streams() {
        let dir = std::env::temp_dir().join(format!("mpistat-spawn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out");
        let script = format!(
            "ps -o sid= -p $$ > {0}.sid; readlink /proc/self/fd/0 > {0}.in; readlink /proc/self/fd/2 > {0}.err; mv {0}.sid {0}",
            out.display()
        );
        let argv = ["/bin/sh", "-c", &script].map(|a| CString::new(a).unwrap());
        let pid = spawn_detached(&argv, &[CString::new("PATH=/usr/bin:/bin").unwrap()]).unwrap();
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let sid: i32 = std::fs::read_to_string(&out)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(sid, pid, "the child leads a session of its own");
        let stdin = std::fs::read_to_string(format!("{}.in", out.display())).unwrap();
        let stderr = std::fs::read_to_string(format!("{}.err", out.display())).unwrap();
        assert_eq!((stdin.trim(), stderr.trim()), ("/dev/null", "/dev/null"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_key_goes_only_into_an_own_directory() {
        let dir = std::env::temp_dir().join(format!("mpistat-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_job_key(&dir, "0123456789abcdef").unwrap();
        let key = std::fs::read_to_string(dir.join("job-key")).unwrap();
        assert_eq!(key, "0123456789abcdef\n");
        let link = dir.with_extension("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(
            write_job_key(&link, "0123456789abcdef").is_err(),
            "not through a symlink"
        );
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
