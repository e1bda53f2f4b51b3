//! Private rsyslogds running the shipped configurations (`etc/rsyslog.d/*.conf`): unchanged, with
//! the daemon's paths mounted where the test wants them ([`RsyslogDaemon::start_seeing`]), or with
//! only the site-specific parts (sockets, ports, paths) changed ([`shipped_rsyslog_config`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private rsyslogd running the configuration `conf`; stopped on drop.
pub struct RsyslogDaemon {
    conf: PathBuf,
    pid_file: PathBuf,
    stderr: PathBuf,
    /// Host directories mounted at the configuration's paths, in a mount namespace of its own.
    binds: Vec<(PathBuf, PathBuf)>,
    child: Option<Child>,
}

impl RsyslogDaemon {
    /// Write `text` as `<dir>/<name>.conf` (with a work directory of its own) and start it.
    pub fn start(dir: &Path, name: &str, text: &str) -> RsyslogDaemon {
        RsyslogDaemon::start_seeing(dir, name, text, &[])
    }

    /// [`RsyslogDaemon::start`] in a mount namespace of its own where each `(host, path)` of
    /// `binds` mounts the host directory at `path` (e.g. a test's directory at `/run`): a shipped
    /// configuration then runs unchanged, its paths being the daemon's only.
    pub fn start_seeing(
        dir: &Path,
        name: &str,
        text: &str,
        binds: &[(&Path, &str)],
    ) -> RsyslogDaemon {
        let work = dir.join(format!("{name}-work"));
        std::fs::create_dir_all(&work).unwrap();
        let conf = dir.join(format!("{name}.conf"));
        let text = format!("global(workDirectory=\"{}\")\n{text}", work.display());
        std::fs::write(&conf, text).unwrap();
        let mut daemon = RsyslogDaemon {
            conf,
            pid_file: dir.join(format!("{name}.pid")),
            stderr: dir.join(format!("{name}.stderr")),
            binds: binds
                .iter()
                .map(|(host, path)| (host.to_path_buf(), PathBuf::from(path)))
                .collect(),
            child: None,
        };
        daemon.run();
        daemon
    }

    /// The shipped single-host configuration, `etc/rsyslog.d/mpistat.conf` unchanged, after
    /// `globals` (e.g. the host's own settings) and the module line of the distribution's
    /// rsyslog.conf (its system socket off: /dev/log is the host's), the daemon seeing
    /// `<dir>/run` as `/run` and `<dir>/var-log` as `/var/log`. Returns it with the jobs' socket
    /// and the records file, once the socket is there.
    pub fn shipped_single_host(dir: &Path, globals: &str) -> (RsyslogDaemon, PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let run = dir.join("run");
        let var_log = dir.join("var-log");
        for dir in [&run, &var_log] {
            std::fs::create_dir(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let snippet = crate::workspace::workspace_root().join("etc/rsyslog.d/mpistat.conf");
        let mut daemon = RsyslogDaemon::start_seeing(
            dir,
            "rsyslog",
            &format!(
                "module(load=\"imuxsock\" SysSock.Use=\"off\")\n{globals}include(file=\"{}\")\n",
                snippet.display()
            ),
            &[(&run, "/run"), (&var_log, "/var/log")],
        );
        let socket = run.join("mpistat-syslog.sock");
        daemon.wait_until("the syslog socket", || socket.exists());
        (daemon, socket, var_log.join("mpistat/records.log"))
    }

    pub fn run(&mut self) {
        assert!(self.child.is_none(), "already running");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr)
            .unwrap();
        let mut command = if self.binds.is_empty() {
            Command::new("rsyslogd")
        } else {
            // unshare and sh exec: the child is rsyslogd itself, as signals need.
            let mut script = String::from("set -e\n");
            for (host, path) in &self.binds {
                script += &format!("mount --bind '{}' '{}'\n", host.display(), path.display());
            }
            script += "exec rsyslogd \"$@\"\n";
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(script)
                .arg("rsyslogd");
            cmd
        };
        let child = command
            .arg("-n")
            .arg("-f")
            .arg(&self.conf)
            .arg("-i")
            .arg(&self.pid_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("rsyslogd (scripts/prereqs.sh installs rsyslog and rsyslog-relp)");
        self.child = Some(child);
    }

    /// Stop it (SIGTERM, as `systemctl stop` does) and wait until it is gone.
    pub fn stop(&mut self) {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        child.wait().unwrap();
    }

    /// Wait until `ready` holds, failing with the daemon's errors if it exits or never does.
    pub fn wait_until(&mut self, what: &str, ready: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready() {
            let child = self.child.as_mut().expect("running");
            if let Ok(Some(status)) = child.try_wait() {
                panic!("rsyslogd exited with {status}: {}", self.errors());
            }
            assert!(Instant::now() < deadline, "{what}: {}", self.errors());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn errors(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for RsyslogDaemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The shipped configuration `name` with each `(from, to)` replaced; `from` must be in it.
pub fn shipped_rsyslog_config(name: &str, changes: &[(&str, &str)]) -> String {
    let path = crate::workspace::workspace_root()
        .join("etc/rsyslog.d")
        .join(name);
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in changes {
        assert!(text.contains(from), "{from:?} not in {}", path.display());
        text = text.replace(from, to);
    }
    text
}

/// A single host's rsyslogd running the shipped `etc/rsyslog.d/mpistat.conf` (changed only: the
/// path of its own socket and of the records file), as `mpistat ingest`
/// reads it on a site without a log host: `<time> <host> uid=<n> pid=<n> <tag><msg>`.
pub struct SingleHost {
    pub dir: mpistat_testkit::scratch::Scratch,
    pub daemon: RsyslogDaemon,
}

impl SingleHost {
    /// Start one in a fresh temporary directory (`label`) whose socket every user may use.
    pub fn start(label: &str) -> SingleHost {
        let dir = mpistat_testkit::scratch::Scratch::new(label);
        let d = dir.path();
        let socket = d.join("log.sock");
        // The test's main configuration loads imuxsock without the system socket, as Debian's
        // rsyslog.conf loads it with one; the snippet adds its own input, changed only in path.
        let text = shipped_rsyslog_config(
            "mpistat.conf",
            &[
                ("/run/mpistat-syslog.sock", &socket.display().to_string()),
                (
                    "/var/log/mpistat/records.log",
                    &d.join("records.log").display().to_string(),
                ),
            ],
        );
        let text = format!("module(load=\"imuxsock\" SysSock.Use=\"off\")\n{text}");
        let mut daemon = RsyslogDaemon::start(d, "single", &text);
        daemon.wait_until("the socket", || socket.exists());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        SingleHost { dir, daemon }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("log.sock")
    }

    /// The records file rsyslog writes.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("records.log")
    }

    pub fn lines(&self) -> Vec<String> {
        crate::workspace::read_lines(&self.log())
    }

    /// Wait until the file's lines satisfy `ready`.
    pub fn wait_for_lines(&mut self, what: &str, ready: impl Fn(&[String]) -> bool) {
        let log = self.log();
        self.daemon
            .wait_until(what, || ready(&crate::workspace::read_lines(&log)));
    }
}

/// The host's global rsyslog settings that decide how files are made (as rsyslog reads them
/// before `/etc/rsyslog.d/*.conf`).
pub fn host_rsyslog_globals() -> String {
    let text = std::fs::read_to_string("/etc/rsyslog.conf").unwrap_or_default();
    text.lines()
        .filter(|l| {
            [
                "$FileOwner",
                "$FileGroup",
                "$FileCreateMode",
                "$DirCreateMode",
                "$Umask",
                "$PrivDrop",
            ]
            .iter()
            .any(|k| l.starts_with(k))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}
