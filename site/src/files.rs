//! Opening the files that settings and the environment name, where a user may have made them
//! hostile: the site configuration (`MPISTAT_CONFIG`), the escalation list, the detail report's
//! destination (`MPISTAT_DETAIL`), a trace directory that `mpistat analyze` reads.
//!
//! - Nothing blocks: every open is `O_NONBLOCK | O_NOCTTY | O_CLOEXEC`, so a FIFO without a
//!   writer (or reader) neither hangs the open nor the read, and a terminal never becomes the
//!   process's controlling one.
//! - Settings are read only from regular files ([`read_regular`]), and at most a cap of bytes
//!   (a device such as `/dev/zero` is not a regular file; a huge file is cut or refused).
//! - A symlink is followed only when it and the directory holding it belong to root or to the
//!   caller ([`trusted_owner`]): the rule of Linux's `fs.protected_symlinks` (which a host may
//!   have off), for every symlink on the way, not just in sticky directories. The caller's own
//!   links are theirs to make (a job runs as its user, who could read the target anyway); a
//!   link someone else made could send root (an admin's `mpistat analyze`, a root job's detail
//!   report) into another user's files.

use std::collections::VecDeque;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// Symlinks followed on one path at most (the kernel's limit, `MAXSYMLINKS`).
const MAX_SYMLINKS: u32 = 40;

/// Why a file was not opened or read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file ({0})")]
    NotRegular(&'static str),
    #[error(
        "{link} is a symlink of uid {owner} in a directory of uid {directory_owner}: only \
         symlinks of root and of the caller (uid {caller}) are followed"
    )]
    ForeignSymlink {
        link: PathBuf,
        owner: u32,
        directory_owner: u32,
        caller: u32,
    },
    #[error("more than {MAX_SYMLINKS} symlinks on the way")]
    SymlinkLoop,
}

impl FileError {
    /// Whether the file (or a directory on the way) does not exist.
    pub fn is_missing(&self) -> bool {
        matches!(self, FileError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Whether a file or symlink of `uid` is trusted: root's, or the calling process's (effective) uid.
pub fn trusted_owner(uid: u32) -> bool {
    // SAFETY: geteuid cannot fail.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

/// `fstat` of an open descriptor.
pub fn stat_fd(fd: RawFd) -> std::io::Result<libc::stat> {
    // SAFETY: a stat to fill; fstat reads no memory of ours.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// How a file's mode reads in a message: "a FIFO", "a directory", ...
pub fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symlink",
        _ => "of an unknown kind",
    }
}

fn c_name(name: &OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| std::io::ErrorKind::InvalidInput.into())
}

/// `openat(dir, name, flags)` with the flags every open here has.
fn open_at(
    dir: RawFd,
    name: &OsStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    let name = c_name(name)?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated name; the descriptor returned is ours alone.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags, libc::c_uint::from(mode)) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a symlink (opened `O_PATH | O_NOFOLLOW` as `fd`) points to.
fn link_target(fd: &OwnedFd) -> std::io::Result<PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat of the link itself (empty name on an O_PATH descriptor) into our buffer.
    let n = unsafe {
        libc::readlinkat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

/// A directory reached by [`walk`], and what it took: the path as walked (for messages).
struct Walk {
    dir: OwnedFd,
    at: PathBuf,
}

impl Walk {
    /// Where walking `path` starts: the root for an absolute path, else the working directory.
    fn start(path: &Path) -> std::io::Result<Walk> {
        let from = if path.is_absolute() { "/" } else { "." };
        Ok(Walk {
            dir: open_at(
                libc::AT_FDCWD,
                OsStr::new(from),
                libc::O_PATH | libc::O_DIRECTORY,
                0,
            )?,
            at: PathBuf::from(from),
        })
    }
}

/// The components of `path` to walk (`.` and the root left out).
fn names_of(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Walks `path` to the directory holding its last component, following only trusted symlinks
/// ([`trusted_owner`]: the link and its directory). With `last_too`, the last component is
/// walked into as well (it must be a directory) and the name returned is `.`; else a last
/// component that is a trusted symlink is followed, and the name returned is what it finally
/// names (which need not exist).
fn walk(path: &Path, last_too: bool) -> Result<(Walk, OsString), FileError> {
    let mut queue: VecDeque<OsString> = VecDeque::new();
    let mut walk = Walk::start(path)?;
    queue.extend(names_of(path));
    let mut links = 0;
    loop {
        let Some(name) = queue.pop_front() else {
            return Ok((walk, OsString::from(".")));
        };
        let last = queue.is_empty();
        let fd = match open_at(walk.dir.as_raw_fd(), &name, libc::O_PATH, 0) {
            Ok(fd) => fd,
            Err(e) if last && !last_too && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((walk, name));
            }
            Err(e) => return Err(e.into()),
        };
        let st = stat_fd(fd.as_raw_fd())?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => {
                let directory_owner = stat_fd(walk.dir.as_raw_fd())?.st_uid;
                if !trusted_owner(st.st_uid) || !trusted_owner(directory_owner) {
                    return Err(FileError::ForeignSymlink {
                        link: walk.at.join(&name),
                        owner: st.st_uid,
                        directory_owner,
                        // SAFETY: geteuid cannot fail.
                        caller: unsafe { libc::geteuid() },
                    });
                }
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(FileError::SymlinkLoop);
                }
                let target = link_target(&fd)?;
                if target.is_absolute() {
                    walk = Walk::start(&target)?;
                }
                for n in names_of(&target).into_iter().rev() {
                    queue.push_front(n);
                }
            }
            libc::S_IFDIR => {
                walk.at.push(&name);
                walk.dir = fd;
            }
            _ if last && !last_too => return Ok((walk, name)),
            kind => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    format!("{} is {}", walk.at.join(&name).display(), kind_of(kind)),
                )
                .into())
            }
        }
    }
}

/// Opens the file `path` (see the module's rules for symlinks) with `flags` (`O_RDONLY`,
/// `O_WRONLY | O_APPEND | O_CREAT`, ...; `mode` for a file created), never blocking.
pub fn open(path: &Path, flags: libc::c_int, mode: libc::mode_t) -> Result<File, FileError> {
    let (walk, name) = walk(path, false)?;
    let fd = open_at(walk.dir.as_raw_fd(), &name, flags, mode)?;
    Ok(File::from(fd))
}

/// Opens the directory `path` for reading its entries and opening files in it with
/// [`open_in`] (see the module's rules for symlinks).
pub fn open_dir(path: &Path) -> Result<OwnedFd, FileError> {
    let (walk, _) = walk(path, true)?;
    Ok(open_at(
        walk.dir.as_raw_fd(),
        OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    )?)
}

/// Opens `name` (one component) in the directory `dir` for reading, not following a symlink.
pub fn open_in(dir: &OwnedFd, name: &OsStr) -> std::io::Result<File> {
    Ok(File::from(open_at(
        dir.as_raw_fd(),
        name,
        libc::O_RDONLY,
        0,
    )?))
}

/// The names in the directory `dir` (from [`open_dir`]), without `.` and `..`.
pub fn names_in(dir: &OwnedFd) -> std::io::Result<Vec<OsString>> {
    // fdopendir takes the descriptor over: give it a duplicate.
    // SAFETY: dup of a descriptor we hold; fdopendir owns the copy, closedir closes it.
    let copy = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let stream = unsafe { libc::fdopendir(copy) };
    if stream.is_null() {
        let error = std::io::Error::last_os_error();
        unsafe { libc::close(copy) };
        return Err(error);
    }
    // From the start, whoever read the descriptor before.
    unsafe { libc::rewinddir(stream) };
    let mut names = Vec::new();
    loop {
        // SAFETY: readdir on our stream; an entry stays valid until the next call.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push(OsStr::from_bytes(name.to_bytes()).to_os_string());
        }
    }
    // SAFETY: the stream fdopendir gave.
    unsafe { libc::closedir(stream) };
    Ok(names)
}

/// A file read up to a cap: its first bytes, and whether that was all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    pub bytes: Vec<u8>,
    pub whole: bool,
}

/// Reads at most `cap` bytes of `file`, which must be a regular file.
pub fn read_capped(file: &File, cap: u64) -> Result<Capped, FileError> {
    let st = stat_fd(file.as_raw_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(FileError::NotRegular(kind_of(st.st_mode)));
    }
    let mut bytes = Vec::new();
    let expected = (st.st_size.max(0) as u64).min(cap);
    bytes
        .try_reserve_exact(expected as usize)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
    // One byte past the cap tells whether there is more (the file may have grown since fstat).
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    let whole = bytes.len() as u64 <= cap;
    bytes.truncate(cap as usize);
    Ok(Capped { bytes, whole })
}

/// Reads at most `cap` bytes of the regular file `path` (see the module's rules).
pub fn read_regular(path: &Path, cap: u64) -> Result<Capped, FileError> {
    read_capped(&open(path, libc::O_RDONLY, 0)?, cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp(label: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mpistat-site-files-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mkfifo(path: &Path) {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_regular_file_is_read_up_to_the_cap() {
        let dir = temp("cap");
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let whole = read_regular(&path, 10).unwrap();
        assert_eq!(
            (whole.bytes.as_slice(), whole.whole),
            (&b"0123456789"[..], true)
        );
        let cut = read_regular(&path, 4).unwrap();
        assert_eq!((cut.bytes.as_slice(), cut.whole), (&b"0123"[..], false));
        // Relative paths and `..` walk as the kernel would.
        let relative = dir.join("sub");
        std::fs::create_dir(&relative).unwrap();
        assert!(read_regular(&relative.join("../f"), 10).unwrap().whole);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fifos_and_devices_are_not_read_and_nothing_blocks() {
        let dir = temp("fifo");
        let fifo = dir.join("fifo");
        mkfifo(&fifo);
        let e = read_regular(&fifo, 10).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a FIFO)");
        let e = read_regular(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a character device)");
        // Appending to a FIFO nobody reads: refused at once, not a hang.
        let e = open(
            &fifo,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
            0o600,
        )
        .unwrap_err();
        assert!(
            matches!(&e, FileError::Io(io) if io.raw_os_error() == Some(libc::ENXIO)),
            "{e}"
        );
        assert!(read_regular(&dir.join("missing"), 10)
            .unwrap_err()
            .is_missing());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn own_symlinks_are_followed_and_created_files_land_at_their_target() {
        let dir = temp("links");
        std::fs::write(dir.join("target"), b"x").unwrap();
        symlink("target", dir.join("relative")).unwrap();
        symlink(dir.join("relative"), dir.join("absolute")).unwrap();
        symlink(&dir, dir.join("dir-link")).unwrap();
        assert!(read_regular(&dir.join("absolute"), 10).unwrap().whole);
        assert!(
            read_regular(&dir.join("dir-link/dir-link/target"), 10)
                .unwrap()
                .whole
        );
        symlink("new", dir.join("dangling")).unwrap();
        drop(open(&dir.join("dangling"), libc::O_WRONLY | libc::O_CREAT, 0o600).unwrap());
        assert!(dir.join("new").is_file());
        symlink("loop", dir.join("loop")).unwrap();
        assert!(matches!(
            read_regular(&dir.join("loop"), 10),
            Err(FileError::SymlinkLoop)
        ));
        let listed = names_in(&open_dir(&dir.join("dir-link")).unwrap()).unwrap();
        assert_eq!(listed.len(), 7, "{listed:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlink_of_another_user_is_not_followed() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: needs root to give a symlink away");
            return;
        }
        let dir = temp("foreign");
        std::fs::write(dir.join("target"), b"x").unwrap();
        let link = dir.join("link");
        symlink(dir.join("target"), &link).unwrap();
        let c = CString::new(link.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; lchown changes the link itself.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
        let e = read_regular(&link, 10).unwrap_err();
        assert!(
            matches!(
                &e,
                FileError::ForeignSymlink {
                    owner: 65534,
                    directory_owner: 0,
                    ..
                }
            ),
            "{e}"
        );
        // Also on the way to a directory, and in a directory another user owns.
        assert!(open_dir(&link).is_err());
        let theirs = dir.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        symlink(dir.join("target"), theirs.join("root-link")).unwrap();
        let c = CString::new(theirs.as_os_str().as_bytes()).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
        let e = read_regular(&theirs.join("root-link"), 10).unwrap_err();
        assert!(
            matches!(
                &e,
                FileError::ForeignSymlink {
                    directory_owner: 65534,
                    ..
                }
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
