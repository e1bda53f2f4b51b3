//! Files the site side writes, private to the service (and at most one group, the web server's)
//! whatever the umask it runs under: systemd's default 0022 would make them 0644 in 0755
//! directories, readable by every local user. Modes are set explicitly, never left to the umask.

use std::ffi::CString;
use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Pages: the service reads and writes, the group reads.
pub const FILE_MODE: u32 = 0o640;
/// Their directories: the group may enter and list.
pub const DIR_MODE: u32 = 0o750;
/// The database and its `-wal` and `-shm`: the service's alone.
pub const OWNER_ONLY: u32 = 0o600;

/// A file could not be made or kept private.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    #[error("no group {0:?}")]
    NoGroup(String),
    #[error("cannot give {} to group {group} (the service must be a member of it)", .path.display())]
    Chown {
        path: PathBuf,
        group: String,
        source: std::io::Error,
    },
    #[error("{}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> PrivateError + '_ {
    move |source| PrivateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A group that files are given to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub gid: u32,
}

impl Group {
    /// The group `name` (`None` for an empty name: files keep the group they get).
    pub fn named(name: &str) -> Result<Option<Group>, PrivateError> {
        if name.is_empty() {
            return Ok(None);
        }
        let no_group = || PrivateError::NoGroup(name.to_string());
        let c_name = CString::new(name).map_err(|_| no_group())?;
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        // SAFETY: zeroed `group` is a valid out-parameter; getgrnam_r writes only into it and
        // `buf`.
        let mut group: libc::group = unsafe { std::mem::zeroed() };
        let mut result = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `buf.len()` is the buffer's real length.
        let rc = unsafe {
            libc::getgrnam_r(
                c_name.as_ptr(),
                &mut group,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        if rc != 0 || result.is_null() {
            return Err(no_group());
        }
        Ok(Some(Group {
            name: name.to_string(),
            gid: group.gr_gid,
        }))
    }

    /// Give `path` to this group.
    pub fn give(&self, path: &Path) -> Result<(), PrivateError> {
        std::os::unix::fs::chown(path, None, Some(self.gid)).map_err(|source| PrivateError::Chown {
            path: path.to_path_buf(),
            group: self.name.clone(),
            source,
        })
    }
}

/// Set `path`'s permission bits to `mode`, keeping a directory's setgid bit (a site may make
/// the pages' directory setgid so that they inherit its group).
fn set_mode(path: &Path, mode: u32) -> Result<(), PrivateError> {
    let meta = std::fs::metadata(path).map_err(io_error(path))?;
    let setgid = if meta.is_dir() {
        meta.mode() & libc::S_ISGID
    } else {
        0
    };
    std::fs::set_permissions(path, Permissions::from_mode(mode | setgid)).map_err(io_error(path))
}

/// Whether `path` is the effective user's.
fn ours(path: &Path) -> bool {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(path).is_ok_and(|meta| meta.uid() == me)
}

/// Make `dir` and the missing directories above it with [`DIR_MODE`], given to `group`; `dir`
/// itself gets that mode and group if it was there and is ours (a directory the admin made for
/// the pages is left as it is).
pub fn create_dir_all(dir: &Path, group: Option<&Group>) -> Result<(), PrivateError> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|a| !a.exists()).collect();
    for made in missing.iter().rev() {
        match DirBuilder::new().mode(DIR_MODE).create(made) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(io_error(made)(e))
            }
            _ => {}
        }
    }
    let existing = Some(dir).filter(|d| !missing.contains(d) && ours(d));
    for path in missing.iter().copied().chain(existing) {
        if let Some(group) = group {
            group.give(path)?;
        }
        set_mode(path, DIR_MODE)?;
    }
    Ok(())
}

/// Write `bytes` to `path` with [`FILE_MODE`], given to `group`. A file already there is emptied
/// first, so that what it held is never readable with its old mode or group.
pub fn write(path: &Path, bytes: &[u8], group: Option<&Group>) -> Result<(), PrivateError> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(OWNER_ONLY)
        .open(path)
        .map_err(io_error(path))?;
    if let Some(group) = group {
        std::os::unix::fs::fchown(&file, None, Some(group.gid)).map_err(|source| {
            PrivateError::Chown {
                path: path.to_path_buf(),
                group: group.name.clone(),
                source,
            }
        })?;
    }
    file.set_permissions(Permissions::from_mode(FILE_MODE))
        .map_err(io_error(path))?;
    file.write_all(bytes).map_err(io_error(path))
}

/// Make the database file at `path` (created empty if missing) and its `-wal` and `-shm`, where
/// they are ours, [`OWNER_ONLY`]. SQLite gives the `-wal` and `-shm` it creates the database's
/// mode, so they follow. Files of another user (a reader's, or root's look at ours) are left as
/// they are.
pub fn owner_only_database(path: &Path) -> Result<(), PrivateError> {
    let name = path.as_os_str();
    if name.is_empty() || name == ":memory:" || path.starts_with("file:") {
        return Ok(());
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(OWNER_ONLY)
        .open(path)
    {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io_error(path)(e)),
        _ => {}
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let file = PathBuf::from(file);
        let open_to_others = std::fs::metadata(&file).is_ok_and(|m| m.mode() & 0o077 != 0);
        if open_to_others && ours(&file) {
            set_mode(&file, OWNER_ONLY)?;
        }
    }
    Ok(())
}
