//! Where trace mode's events go when the recorder's chunk fills: a private spill file in the
//! job's trace root (the site's `[trace] directory` up to its `{job_id}`), which
//! `MPI_Finalize` reads back to write the trace files ([`crate::rawevents::RawEvents::replay`]).
//!
//! The file is made only when the first chunk fills (a short trace never touches the disk),
//! unnamed (`O_TMPFILE`; where the file system has none, a new name made with `O_EXCL`, never
//! following a link, and unlinked at once), mode 0600 in a directory of mode 0700: no other
//! user can read, replace or even see it, and it disappears with the process. Nothing here
//! opens an existing path but the directory (`O_DIRECTORY`: a FIFO there fails at once).
//! On a tmpfs (or ramfs) the file would hold the events in the node's memory where no one
//! sees them: there the events stay in the rank's own memory, as before spilling existed.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Words of the in-memory chunk (32 KiB): the resident set trace mode's events keep. A spill
/// every ~1,000-2,000 calls (16-32 bytes a call): a `pwrite`, whose cost spread over those
/// calls is what a smaller chunk adds to each (against 64 KiB, in-job: 16 KiB +1-15 ns a local
/// call, +32-38 a collective; 32 KiB +0-1.5 a local call, +7-17 a collective, for 32 kB less;
/// docs/footprint.md, "tracewarm").
pub(super) const CHUNK_WORDS: usize = 4096;

/// Where the events that do not fit the chunk go.
pub(super) enum Spill {
    /// No chunk filled yet.
    NotYet,
    /// The spill file of the events.
    File(File),
    /// The trace root is on a tmpfs or ramfs: the chunk grew to the budget.
    InMemory,
    /// The spill file could not be made or written (an unwritable trace root, a full disk):
    /// recording stopped.
    Failed,
}

/// The spill file in `dir`, made with its missing parents (mode 0700); `None` if `dir` is on
/// a tmpfs or ramfs.
pub(super) fn open(dir: &Path) -> io::Result<Option<File>> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir)
    {
        Ok(file) => file,
        // No `O_TMPFILE` in this file system (NFS, older kernels): a new name, unlinked.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
            let path = dir.join(format!(
                ".mpistat-spill-{}-{}",
                std::process::id(),
                crate::clock::monotonic_ns()
            ));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(0o600)
                .open(&path)?;
            std::fs::remove_file(&path)?;
            file
        }
        Err(e) => return Err(e),
    };
    Ok((!in_memory_fs(&file)).then_some(file))
}

/// Whether `file` is on a file system whose files are memory (tmpfs, ramfs).
fn in_memory_fs(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    const RAMFS_MAGIC: libc::c_long = 0x8584_58f6;
    // SAFETY: fstatfs fills the zeroed struct for an open descriptor.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } == 0;
    ok && matches!(fs.f_type as libc::c_long, libc::TMPFS_MAGIC | RAMFS_MAGIC)
}

/// The job's trace root: the trace directory `pattern` (its `~` and `$HOME` expanded) up to
/// the component naming the job, or the whole directory if none does.
pub(super) fn root_of(pattern: &str) -> PathBuf {
    let expanded = super::paths::expand_home(pattern);
    match expanded.find("{job_id}") {
        Some(i) => {
            let before = Path::new(&expanded[..i]);
            if expanded[..i].ends_with('/') {
                before.to_path_buf()
            } else {
                before.parent().unwrap_or(Path::new("")).to_path_buf()
            }
        }
        None => PathBuf::from(expanded),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_directory_before_the_job_id() {
        let home = std::env::var("HOME").unwrap_or_default();
        assert_eq!(
            root_of("$HOME/.mpistat/traces/{job_id}"),
            Path::new(&format!("{home}/.mpistat/traces"))
        );
        assert_eq!(
            root_of("/scratch/t/job-{job_id}/x"),
            Path::new("/scratch/t")
        );
        assert_eq!(root_of("/scratch/t"), Path::new("/scratch/t"));
    }

    /// The spill file has no name: nothing is left in the directory, and no one else can
    /// open it.
    #[test]
    fn the_spill_file_is_unnamed() {
        let dir = std::env::temp_dir().join(format!("mpistat-spill-test-{}", std::process::id()));
        let file = open(&dir.join("traces")).unwrap();
        if let Some(file) = file {
            use std::io::{Read, Seek, Write};
            let mut file = file;
            file.write_all(b"words").unwrap();
            file.rewind().unwrap();
            let mut back = String::new();
            file.read_to_string(&mut back).unwrap();
            assert_eq!(back, "words");
        }
        assert_eq!(std::fs::read_dir(dir.join("traces")).unwrap().count(), 0);
        let mode = std::fs::metadata(dir.join("traces")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o700);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
