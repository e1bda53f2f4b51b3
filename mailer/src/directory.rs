//! The `directory` transport: each mail an `.eml` file, private to the service whatever the umask
//! (systemd's default is 0022, which would make them world-readable): the directory mode 0700,
//! the files 0600. A mail tells a user's jobs and analyses; nobody but the service needs to read
//! them there (a site that picks them up runs its pick-up as the service user).

use crate::MailerError;
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

const DIRECTORY_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// Write `dir/name` whole or not at all (a temporary file, then a rename), mode 0600, in `dir`
/// made (or, when it is the service's own and open to others, made again) private.
pub fn write_eml(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), MailerError> {
    let path = dir.join(name);
    // The name has a user's name in it, which a record supplies: it stays a name in `dir`.
    if name.contains('/') || name.contains('\0') || name.starts_with('.') {
        return Err(MailerError::Write {
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a plain file name"),
        });
    }
    let temporary = dir.join(format!(".{name}.tmp"));
    let write = || -> std::io::Result<()> {
        private_directory(dir)?;
        // A temporary file left by a crash may have another mode: start afresh.
        match std::fs::remove_file(&temporary) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)
    };
    write().map_err(|source| MailerError::Write { path, source })
}

/// Make `dir` (and missing parents) mode 0700; a directory that exists, belongs to this process's
/// user and is open to others (made by an earlier version under a loose umask) is closed.
fn private_directory(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIRECTORY_MODE)
        .create(dir)?;
    let metadata = std::fs::metadata(dir)?;
    // SAFETY: geteuid cannot fail.
    let mine = metadata.uid() == unsafe { libc::geteuid() };
    if mine && metadata.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, Permissions::from_mode(DIRECTORY_MODE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    /// Under systemd's default umask (0022) the mails are still private; a directory an older
    /// version left open is closed. The umask is the process's: only this test changes it.
    #[test]
    fn mails_are_private_whatever_the_umask() {
        let base = std::env::temp_dir().join(format!("mpistat-eml-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        // SAFETY: umask(2) cannot fail.
        let before = unsafe { libc::umask(0o022) };
        let spool = base.join("lib/mail");
        write_eml(&spool, "2026-W47-alice.eml", b"hello").unwrap();
        assert_eq!(mode(&spool), 0o700);
        assert_eq!(mode(&spool.join("2026-W47-alice.eml")), 0o600);
        assert_eq!(
            std::fs::read(spool.join("2026-W47-alice.eml")).unwrap(),
            b"hello"
        );

        std::fs::set_permissions(&spool, Permissions::from_mode(0o755)).unwrap();
        std::fs::write(spool.join(".2026-W47-bob.eml.tmp"), "stale").unwrap();
        std::fs::set_permissions(
            spool.join(".2026-W47-bob.eml.tmp"),
            Permissions::from_mode(0o644),
        )
        .unwrap();
        write_eml(&spool, "2026-W47-bob.eml", b"hi").unwrap();
        unsafe { libc::umask(before) };
        assert_eq!(mode(&spool), 0o700);
        assert_eq!(mode(&spool.join("2026-W47-bob.eml")), 0o600);
        let names: Vec<_> = std::fs::read_dir(&spool)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        for outside in ["2026-W47-../../x.eml", ".hidden.eml"] {
            assert!(write_eml(&spool, outside, b"x").is_err(), "{outside}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
