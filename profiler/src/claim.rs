//! Which rank writes the record of a job that its launcher stops: `MPI_Abort`'s rank, or the
//! record's writer (rank 0) when no rank of its node aborted.
//!
//! A launcher (`mpirun`'s daemons, MPICH's proxies) stops the surviving ranks when a rank ended
//! early: after `MPI_Abort` (whose rank wrote the record already), after a rank was killed or
//! crashed, or when a node was lost with its ranks. Rank 0 (the record's writer,
//! [`crate::terminate`]) then writes a partial record with its own numbers, unless the abort
//! happened on its node: the aborting rank leaves a *claim* there before it writes its record, a
//! file in `/dev/shm` named by the user, the ranks' common parent (the node's launcher daemon)
//! and the job's PMIx namespace, which rank 0 finds and removes (at any `SIGTERM`: under Slurm
//! with PMIx it comes from `slurmstepd`). Only a claim made by the same user since the job
//! started counts (an old file left by another job is ignored and removed). On the node where
//! ranks ended, the daemon's pauses between its signals are cut short (by their `SIGCHLD`), so a
//! rank 0 there may be killed before it looks: each new claim first removes the user's claims
//! whose daemon is gone. Only jobs launched with PMIx claim: MPICH's Hydra ends the other ranks
//! with `SIGKILL` (measured after `MPI_Abort`), so its rank 0 writes nothing then.
//!
//! Open MPI 4.1 tells the survivors nothing else: they get `SIGCONT`, one second later `SIGTERM`,
//! one second later `SIGKILL` from their daemon (`odls_base_sigkill_timeout`), the same after an
//! `MPI_Abort` as after a lost node; it delivers no PMIx event about the dead ranks; its daemons
//! sleep between the signals, so no PMIx look-up is answered then; and an event sent by the
//! aborting rank (`PMIx_Notify_event`) made `MPI_Abort` hang (all measured). So an `MPI_Abort`
//! on another node than rank 0's also leaves rank 0's record: two records of one job, each
//! flagged partial with its reason.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The claim's file on this node, for this user and job (a job launched with PMIx only).
fn path() -> Option<PathBuf> {
    // SAFETY: getuid and getppid cannot fail.
    let (uid, parent) = unsafe { (libc::getuid(), libc::getppid()) };
    let job = std::env::var("PMIX_NAMESPACE").ok()?;
    let job: String = job
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    Some(PathBuf::from(format!(
        "{DIR}/{}{parent}-{job}",
        prefix(uid)
    )))
}

/// Where claims are made: a tmpfs every process of the node sees.
const DIR: &str = "/dev/shm";

/// The start of the names of `uid`'s claims (the launcher daemon's pid follows).
fn prefix(uid: libc::uid_t) -> String {
    format!("mpistat-claim-{uid}-")
}

/// Remove `uid`'s claims whose launcher daemon is gone (rank 0 was killed before it looked).
fn sweep(uid: libc::uid_t) {
    let prefix = prefix(uid);
    let Ok(entries) = std::fs::read_dir(DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(daemon) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: kill(2) with signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(daemon, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether the job was launched with PMIx (Open MPI's `mpirun`, Slurm's PMIx plugin), where a
/// launcher stops the survivors with `SIGTERM` only after the job's exit status is settled.
pub fn launched_with_pmix() -> bool {
    path().is_some()
}

/// `MPI_Abort`'s rank, before it writes its record: claim the record on this node, if the
/// record's writer `lead` may share it (it does, or that is unknown).
pub fn take(lead: u32) {
    if crate::places::shares_node(lead) == Some(false) {
        return;
    }
    let Some(Ok(name)) = path().map(|p| CString::new(p.as_os_str().as_bytes())) else {
        return;
    };
    // SAFETY: getuid cannot fail.
    sweep(unsafe { libc::getuid() });
    // SAFETY: open(2) with a NUL-terminated path: a new file of ours only (no link followed);
    // the descriptor is closed at once.
    unsafe {
        let fd = libc::open(
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        );
        if fd >= 0 {
            libc::close(fd);
        }
    }
}

/// The record's writer, stopped by a signal: whether a rank of this node claimed the record
/// since `start_unix_ms` (the job's start). Removes the claim.
pub fn taken_here(start_unix_ms: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(path) = path() else {
        return false;
    };
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    // SAFETY: getuid cannot fail.
    let ours = meta.is_file() && meta.uid() == unsafe { libc::getuid() };
    let made_ms = meta.mtime().max(0) as u64 * 1000 + meta.mtime_nsec().max(0) as u64 / 1_000_000;
    if ours {
        let _ = std::fs::remove_file(&path);
    }
    // Whole seconds of a coarse file clock may round down: a second's slack.
    ours && made_ms + 1000 >= start_unix_ms
}
