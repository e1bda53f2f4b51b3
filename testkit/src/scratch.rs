//! A test's scratch directory, removed when the test passes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// An empty directory `<tmp>/mpistat-<label>-<pid>-<n>` for a test's files, its own even when
/// tests running at once pass the same label. It is removed when dropped, unless the thread is
/// panicking: a failed test leaves what it saw for its reader. (Tests that kept theirs filled a
/// developer's `/tmp` with gigabytes of databases a day.)
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new directory for `label`, emptied if an earlier process with this id left it.
    pub fn new(label: &str) -> Scratch {
        static MADE: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mpistat-{label}-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn a_passing_tests_directory_is_removed_with_its_files() {
        let scratch = Scratch::new("scratch-self-test");
        std::fs::create_dir(scratch.join("sub")).unwrap();
        std::fs::write(scratch.join("sub/file"), "x").unwrap();
        let path = scratch.to_path_buf();
        drop(scratch);
        assert!(!path.exists(), "{} is left", path.display());
    }

    #[test]
    fn scratch_directories_made_at_once_with_one_label_are_apart() {
        let first = Scratch::new("scratch-self-test-twice");
        let second = Scratch::new("scratch-self-test-twice");
        assert_ne!(first.path(), second.path());
        assert!(first.is_dir() && second.is_dir());
    }

    #[test]
    fn a_failing_tests_directory_is_kept() {
        let path = std::thread::spawn(|| {
            let scratch = Scratch::new("scratch-self-test-kept");
            let path = scratch.to_path_buf();
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _scratch = scratch;
                panic!("the test fails");
            }))
            .unwrap_err();
            path
        })
        .join()
        .unwrap();
        assert!(path.is_dir(), "{} is gone", path.display());
        std::fs::remove_dir_all(path).unwrap();
    }
}
