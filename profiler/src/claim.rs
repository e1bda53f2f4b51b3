//! Which rank writes the record of a job that its launcher stops: `MPI_Abort`'s rank, or the
//! record's writer (rank 0) when no rank of its node aborted.
//!
//! A launcher (`mpirun`'s daemons, MPICH's proxies) stops the surviving ranks when a rank ended
//! early: after `MPI_Abort` (whose rank wrote the record already), after a rank was killed or
//! crashed, or when a node was lost with its ranks. Rank 0 (the record's writer,
//! [`crate::terminate`]) then writes a partial record with its own numbers, unless the abort
//! happened on its node: the aborting rank leaves a *claim* there before it writes its record, a
//! file in `/dev/shm` named by the user, the ranks' common parent (the node's launcher daemon)
//! and the job's PMIx namespace, which rank 0 finds and removes. Only a claim made by the same
//! user since the job started counts (an old file left by another job is ignored and removed).
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

/// The claim's file on this node, for this user and job.
fn path() -> PathBuf {
    // SAFETY: getuid and getppid cannot fail.
    let (uid, parent) = unsafe { (libc::getuid(), libc::getppid()) };
    let job = std::env::var("PMIX_NAMESPACE").unwrap_or_default();
    let job: String = job
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    PathBuf::from(format!("/dev/shm/mpistat-claim-{uid}-{parent}-{job}"))
}

/// `MPI_Abort`'s rank, before it writes its record: claim the record on this node, if the
/// record's writer `lead` may share it (it does, or that is unknown).
pub fn take(lead: u32) {
    if crate::places::shares_node(lead) == Some(false) {
        return;
    }
    let Ok(name) = CString::new(path().as_os_str().as_bytes()) else {
        return;
    };
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

/// The record's writer, stopped by its launcher: whether a rank of this node claimed the record
/// since `start_unix_ms` (the job's start). Removes the claim.
pub fn taken_here(start_unix_ms: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    let path = path();
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
