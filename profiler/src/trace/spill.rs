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

/// Cuts ([`Cuts`]) kept in memory (8 KiB): a spill every 1,024 supersteps. 2 KiB saved 2-8 kB
/// and cost an `MPI_Allreduce` 13-30 ns more (docs/footprint.md, "tracewarm").
const CUTS_CHUNK: usize = 1024;

/// Where the events that do not fit the chunk go.
pub(super) enum Spill {
    /// No chunk filled yet.
    NotYet,
    /// The spill files of the events and of the cuts.
    Files { events: File, cuts: File },
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

/// [`Recorder::events`]' position after each superstep recorded, oldest first (a word each,
/// one a superstep however long the job): the latest [`CUTS_CHUNK`] in memory, the earlier ones
/// in a spill file of their own once the events have one.
///
/// [`Recorder::events`]: super::state::Recorder
pub(super) struct Cuts {
    chunk: Vec<u64>,
    spilled: usize,
}

impl Cuts {
    pub(super) fn new() -> Cuts {
        Cuts {
            chunk: Vec::new(),
            spilled: 0,
        }
    }

    /// Cuts recorded.
    pub(super) fn len(&self) -> usize {
        self.spilled + self.chunk.len()
    }

    /// Record a cut where the chunk has room, without growing it (the fast path): false, and
    /// nothing done, where it has none.
    #[inline(always)]
    pub(super) fn push_within(&mut self, position: usize) -> bool {
        if self.chunk.len() == self.chunk.capacity() {
            return false;
        }
        self.chunk.push(position as u64);
        true
    }

    /// Record a cut (the slow path): a full chunk is spilled to `file` first if some (else, or
    /// if that fails, it grows).
    pub(super) fn push(&mut self, position: usize, file: Option<&File>) {
        use std::os::unix::fs::FileExt;
        if self.chunk.len() >= CUTS_CHUNK {
            if let Some(file) = file {
                let at = (self.spilled * std::mem::size_of::<u64>()) as u64;
                if file
                    .write_all_at(crate::rawevents::as_bytes(&self.chunk), at)
                    .is_ok()
                {
                    self.spilled += self.chunk.len();
                    self.chunk.clear();
                }
            }
        }
        if self.chunk.capacity() == 0 {
            self.chunk.reserve_exact(CUTS_CHUNK);
        }
        self.chunk.push(position as u64);
    }

    /// The cut at index `i` (from `file`, the one [`Cuts::push`] spilled to, if there); none
    /// where it cannot be read.
    pub(super) fn get(&self, i: usize, file: Option<&File>) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        match i.checked_sub(self.spilled) {
            Some(j) => self.chunk.get(j).map(|&c| c as usize),
            None => {
                let mut word = [0u8; 8];
                let at = (i * std::mem::size_of::<u64>()) as u64;
                file?.read_exact_at(&mut word, at).ok()?;
                Some(u64::from_ne_bytes(word) as usize)
            }
        }
    }

    /// All cuts of an unspilled list.
    #[cfg(test)]
    pub(super) fn in_memory(&self) -> Vec<usize> {
        self.chunk.iter().map(|&c| c as usize).collect()
    }
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

    /// Cuts beyond the chunk go to the file and come back from it; without a file the chunk
    /// grows.
    #[test]
    fn cuts_spill_and_come_back() {
        let dir = std::env::temp_dir().join(format!("mpistat-cuts-test-{}", std::process::id()));
        let file = open(&dir).unwrap();
        let (mut spilled, mut grown) = (Cuts::new(), Cuts::new());
        for i in 0..3 * CUTS_CHUNK + 5 {
            spilled.push(7 * i, file.as_ref());
            grown.push(7 * i, None);
        }
        assert_eq!(spilled.len(), 3 * CUTS_CHUNK + 5);
        if file.is_some() {
            assert!(spilled.chunk.len() <= CUTS_CHUNK);
        }
        for i in 0..spilled.len() {
            assert_eq!(spilled.get(i, file.as_ref()), Some(7 * i));
            assert_eq!(grown.get(i, None), Some(7 * i));
        }
        assert_eq!(spilled.get(spilled.len(), file.as_ref()), None);
        std::fs::remove_dir_all(&dir).unwrap();
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
