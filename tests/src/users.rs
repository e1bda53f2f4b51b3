//! Unprivileged local users made with `useradd` ([`User`]), and the set-up where a traced job's
//! user analyses it and the digest runs as its service user ([`AnalysisUsers`]).

use crate::syslogd::Syslogd;
use mpistat_testkit::scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The set-up of the tests where a traced job's user analyses it and the digest runs as its
/// service user: users `mpistat-alice`, `mpistat-mallory` and `mpistat`, a private rsyslogd whose
/// socket every user can reach, and a temporary directory with `lib/` (the service's state)
/// owned by `mpistat`.
pub struct AnalysisUsers {
    pub alice: User,
    pub mallory: User,
    pub digest: User,
    pub syslogd: Syslogd,
    pub dir: Scratch,
    pub lib: PathBuf,
}

impl AnalysisUsers {
    /// `None` (said on stderr) when not root: users cannot be made.
    pub fn start(name: &str) -> Option<AnalysisUsers> {
        let users = ["mpistat-alice", "mpistat-mallory", "mpistat"].map(User::ensure);
        let [Some(alice), Some(mallory), Some(digest)] = users else {
            eprintln!("SKIPPED: needs root to make users");
            return None;
        };
        let syslogd = Syslogd::start();
        use std::os::unix::fs::PermissionsExt;
        let socket_dir = syslogd.socket().parent().unwrap().to_path_buf();
        std::fs::set_permissions(&socket_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = Scratch::new(name);
        let lib = dir.path().join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        digest.own(&lib);
        Some(AnalysisUsers {
            alice,
            mallory,
            digest,
            syslogd,
            dir,
            lib,
        })
    }

    /// The analyses stored in the service's database (`<lib>/mpistat.db`, where both tests put
    /// it): key, user and summary of each, by key and user.
    pub fn stored_analyses(lib: &Path) -> Vec<(String, String, Option<String>)> {
        let db = mpistat_store::ReadStore::open(&lib.join("mpistat.db")).unwrap();
        let mut analyses: Vec<_> = db
            .analyses_by_key()
            .unwrap()
            .into_iter()
            .map(|(key, a)| (key, a.user, a.summary))
            .collect();
        analyses.sort();
        analyses
    }
}

/// A local user for the tests, made with `useradd` if it is not there (and kept: tests of
/// several runs share it), whose home is private (mode 0700).
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl User {
    /// `nobody` (uid and gid 65534, Debian's), whose home does not exist.
    pub fn nobody() -> User {
        User {
            name: "nobody".into(),
            uid: 65534,
            gid: 65534,
            home: PathBuf::from("/nonexistent"),
        }
    }

    /// The user `name` with a home `/home/<name>` (created, mode 0700); `None` when not root.
    pub fn ensure(name: &str) -> Option<User> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let home = PathBuf::from("/home").join(name);
        if User::lookup(name).is_none() {
            // Another test binary may make it at the same time: only the lookup decides.
            let _ = Command::new("useradd")
                .args([
                    "--create-home",
                    "--user-group",
                    "--shell",
                    "/bin/sh",
                    "--home-dir",
                ])
                .arg(&home)
                .arg(name)
                .status();
        }
        let (uid, gid) = User::lookup(name).unwrap_or_else(|| panic!("cannot make user {name}"));
        let user = User {
            name: name.to_string(),
            uid,
            gid,
            home,
        };
        std::fs::create_dir_all(&user.home).expect("create the home directory");
        let chown = Command::new("chown")
            .arg(format!("{uid}:{gid}"))
            .arg(&user.home)
            .status()
            .expect("chown");
        assert!(chown.success());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&user.home, std::fs::Permissions::from_mode(0o700)).unwrap();
        Some(user)
    }

    fn lookup(name: &str) -> Option<(u32, u32)> {
        let out = Command::new("getent")
            .args(["passwd", name])
            .output()
            .ok()?;
        let line = String::from_utf8(out.stdout).ok()?;
        let fields: Vec<&str> = line.trim().split(':').collect();
        Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?))
    }

    /// `program` to be run as this user (real and effective ids, no supplementary groups).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .args(["--clear-groups", "--"])
            .arg(program);
        cmd
    }

    /// Give `path` to this user.
    pub fn own(&self, path: &Path) {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uid, self.gid))
            .arg(path)
            .status()
            .expect("chown");
        assert!(status.success(), "chown {}", path.display());
    }
}
