//! The shipped systemd units (`systemd/*.service`), run with the privileges they give, on a
//! machine whose PID 1 is not systemd (CI, containers).
//!
//! Green tests run as root hid that a service could not read what the tests read. So a test takes
//! the unit file as shipped and runs its `ExecStart=` the way systemd would confine it, emulating
//! the settings that decide what the service can reach: `User=` and its groups plus
//! `SupplementaryGroups=`, `StateDirectory=` and `RuntimeDirectory=` (made with their modes and
//! given to the user, as systemd does), `ReadWritePaths=`, `ProtectSystem=strict` (everything
//! else read-only), `ProtectHome=yes` (homes, `/root` and `/run/user` inaccessible), `PrivateTmp=`,
//! `UMask=` (0022 when unset, as systemd's default), `NoNewPrivileges=` and an empty
//! `CapabilityBoundingSet=`, in a private mount namespace.
//! Settings that only narrow further (system-call filters, address families, IP filters,
//! `PrivateNetwork=`) are not emulated.
//!
//! The site's files are test files mounted at the unit's paths (`/etc/mpistat/site.toml`,
//! `/var/log/mpistat`, ...) inside the namespace only; a path missing on the host gets an empty
//! mount point, removed again when the [`Service`] is dropped.

use crate::users::User;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// One `[Service]` section as shipped.
#[derive(Debug, Clone)]
pub struct Unit {
    pub name: String,
    settings: Vec<(String, String)>,
}

impl Unit {
    /// `systemd/<name>` of this repository.
    pub fn shipped(name: &str) -> Unit {
        Unit::read(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../systemd")
                .join(name),
        )
    }

    /// The unit file at `path` (e.g. one a package installed).
    pub fn read(path: &Path) -> Unit {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.file_name().unwrap().to_string_lossy();
        Unit::parse(&name, &text)
    }

    /// `systemd/<name>` with the shipped drop-in `systemd/<name>.d/<drop_in>` (its settings after
    /// the unit's, as systemd reads a drop-in installed in `/etc/systemd/system/<name>.d/`).
    pub fn shipped_with(name: &str, drop_in: &str) -> Unit {
        let units = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd");
        let read = |path: PathBuf| {
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let unit = read(units.join(name));
        let drop_in = read(units.join(format!("{name}.d")).join(drop_in));
        Unit::parse(name, &format!("{unit}\n{drop_in}"))
    }

    /// The `[Service]` settings of a unit file (comments and other sections skipped).
    pub fn parse(name: &str, text: &str) -> Unit {
        let mut section = "";
        let mut settings = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') {
                section = line;
                continue;
            }
            if section == "[Service]" {
                if let Some((k, v)) = line.split_once('=') {
                    settings.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
        }
        Unit {
            name: name.to_string(),
            settings,
        }
    }

    /// Every value of `key`, in order (a setting may repeat); an empty assignment resets the list.
    pub fn values(&self, key: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for (k, v) in &self.settings {
            if k == key {
                if v.is_empty() {
                    out.clear();
                } else {
                    out.extend(v.split_whitespace());
                }
            }
        }
        out
    }

    /// The last value of `key`.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn yes(&self, key: &str) -> bool {
        matches!(self.value(key), Some("yes" | "true" | "1" | "on"))
    }

    /// `ExecStart=` split into words, with `%i` replaced by `instance`.
    pub fn exec_start(&self, instance: &str) -> Vec<String> {
        let line = self.value("ExecStart").expect("unit has ExecStart=");
        line.split_whitespace()
            .map(|w| w.replace("%i", instance))
            .collect()
    }

    /// The directories systemd makes for the service and gives to its user.
    pub fn owned_directories(&self) -> Vec<PathBuf> {
        let state = self
            .values("StateDirectory")
            .into_iter()
            .map(|d| Path::new("/var/lib").join(d));
        let runtime = self
            .values("RuntimeDirectory")
            .into_iter()
            .map(|d| Path::new("/run").join(d));
        state.chain(runtime).collect()
    }

    /// The paths that stay writable (`ReadWritePaths=`, a leading `-` meaning "if present", and
    /// the owned directories).
    pub fn writable_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .values("ReadWritePaths")
            .into_iter()
            .map(|p| PathBuf::from(p.trim_start_matches('-')))
            .collect();
        out.extend(self.owned_directories());
        out
    }

    /// Start the service: `ExecStart` (with `%i` = `instance`) confined as the unit says, with
    /// `site` mounting host paths at the unit's paths.
    pub fn start(&self, instance: &str, site: &[(&str, &Path)]) -> Service {
        let mount_points = MountPoints::make(site);
        let child = self
            .command(instance, site)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.name));
        Service {
            child: Some(child),
            _mount_points: mount_points,
        }
    }

    /// Run the service to its end (a `Type=oneshot` unit).
    pub fn run(&self, instance: &str, site: &[(&str, &Path)]) -> Output {
        let mut service = self.start(instance, site);
        let child = service.child.take().expect("started");
        child.wait_with_output().expect("wait for the service")
    }

    /// [`Unit::run`], stopped (killed) when it has not ended after `limit`: then `None`.
    pub fn run_within(
        &self,
        instance: &str,
        site: &[(&str, &Path)],
        limit: std::time::Duration,
    ) -> Option<Output> {
        let mut service = self.start(instance, site);
        let mut child = service.child.take().expect("started");
        let start = std::time::Instant::now();
        while child.try_wait().expect("wait for the service").is_none() {
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Some(child.wait_with_output().expect("the service's output"))
    }

    /// The service's user, as `useradd` made it on the host.
    pub fn user(&self) -> User {
        let name = self.value("User").expect("unit has User=");
        User::ensure(name).expect("needs root to make the service user")
    }

    fn command(&self, instance: &str, site: &[(&str, &Path)]) -> Command {
        let user = self.user();
        let ids = ServiceIds {
            uid: user.uid,
            gid: user.gid,
            // systemd's initgroups: the user's groups in the group database, then the unit's.
            groups: user_groups(&user.name)
                .into_iter()
                .chain(
                    self.values("SupplementaryGroups")
                        .into_iter()
                        .map(|g| group_id(g).unwrap_or_else(|| panic!("no group {g}"))),
                )
                .collect(),
        };
        let mut cmd = Command::new("unshare");
        cmd.args(self.confined(instance, site, &ids));
        cmd
    }

    /// `unshare`'s arguments that run `ExecStart` (with `%i` = `instance`) as the unit confines
    /// it, as the user and groups `ids`, with `site` mounting paths at the unit's paths. For a
    /// machine of its own ([`crate::machine::Machine`]), whose users are not the host's.
    pub fn confined(
        &self,
        instance: &str,
        site: &[(&str, &Path)],
        ids: &ServiceIds,
    ) -> Vec<String> {
        let (user, groups) = (ids, &ids.groups);
        let quote = |p: &Path| shell_quote(&p.display().to_string());
        let mut script = String::from("set -e\n");
        // systemd makes the owned directories before the start and gives them to the user; the
        // test's host directories mounted there get the same treatment.
        for (unit_path, host) in site {
            script += &format!("mount --bind {} {}\n", quote(host), shell_quote(unit_path));
        }
        for dir in self.owned_directories() {
            script += &format!(
                "mkdir -p {d}\nchown {}:{} {d}\n",
                user.uid,
                user.gid,
                d = quote(&dir)
            );
            let mode_key = if dir.starts_with("/run") {
                "RuntimeDirectoryMode"
            } else {
                "StateDirectoryMode"
            };
            if let Some(mode) = self.value(mode_key) {
                script += &format!("chmod {mode} {}\n", quote(&dir));
            }
        }
        let writable = self.writable_paths();
        for w in &writable {
            // Its own mount (if present), so that it stays writable below.
            script += &format!(
                "if [ -e {w} ]; then mount --bind {w} {w}; fi\n",
                w = quote(w)
            );
        }
        if self.value("ProtectSystem") == Some("strict") {
            // Every mount read-only but the API file systems and the writable paths.
            let keep: Vec<String> = writable.iter().map(|w| w.display().to_string()).collect();
            script += &format!(
                "mounts=$(awk '{{print $5}}' /proc/self/mountinfo)\n\
                 for m in $mounts; do\n\
                 case \"$m\" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue ;; esac\n\
                 case \" {} \" in *\" $m \"*) continue ;; esac\n\
                 mount -o remount,bind,ro \"$m\" 2>/dev/null || true\n\
                 done\n",
                keep.join(" ")
            );
        }
        if self.yes("ProtectHome") {
            for d in ["/home", "/root", "/run/user"] {
                script +=
                    &format!("if [ -d {d} ]; then mount -t tmpfs -o ro,mode=000 tmpfs {d}; fi\n");
            }
        }
        if self.yes("PrivateTmp") {
            for d in ["/tmp", "/var/tmp"] {
                script += &format!("mount -t tmpfs -o mode=1777 tmpfs {d}\n");
            }
        }
        // systemd's default is 0022, whatever the test's own.
        let umask = self.value("UMask").unwrap_or("0022");
        script += &format!("umask {umask}\n");
        let mut setpriv = format!(
            "exec setpriv --reuid={} --regid={} --groups={}",
            user.uid,
            user.gid,
            groups
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        if self.yes("NoNewPrivileges") {
            setpriv += " --no-new-privs";
        }
        if self.values("CapabilityBoundingSet").is_empty() {
            setpriv += " --inh-caps=-all --bounding-set=-all";
        }
        setpriv += " -- env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8";
        for word in self.exec_start(instance) {
            setpriv += " ";
            setpriv += &shell_quote(&word);
        }
        script += &setpriv;
        script += "\n";
        [
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            &script,
        ]
        .map(String::from)
        .to_vec()
    }
}

/// Who a service runs as: its user's uid and gid, and every group it gets.
#[derive(Debug, Clone)]
pub struct ServiceIds {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// A running service; killed when dropped, then its mount points are removed.
pub struct Service {
    child: Option<Child>,
    _mount_points: MountPoints,
}

impl Service {
    /// Stop it (SIGTERM to the confined process) and return its output.
    pub fn stop(mut self) -> Output {
        let mut child = self.child.take().expect("running");
        // The child is `unshare`, which exec'd sh, which exec'd setpriv, which exec'd env and the
        // service: one process all along.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let _ = child.try_wait();
        child.wait_with_output().expect("wait for the service")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Mount points made on the host for paths it lacks; removed on drop (deepest first).
struct MountPoints(Vec<PathBuf>);

impl MountPoints {
    fn make(site: &[(&str, &Path)]) -> MountPoints {
        let mut made = Vec::new();
        for (unit_path, host) in site {
            let target = Path::new(unit_path);
            let mut missing: Vec<PathBuf> = target
                .ancestors()
                .filter(|a| !a.exists())
                .map(Path::to_path_buf)
                .collect();
            missing.reverse();
            for path in missing {
                if path == target && !host.is_dir() {
                    std::fs::File::create(&path).map(drop)
                } else {
                    std::fs::create_dir(&path)
                }
                .unwrap_or_else(|e| panic!("make mount point {}: {e}", path.display()));
                made.push(path);
            }
        }
        MountPoints(made)
    }
}

impl Drop for MountPoints {
    fn drop(&mut self) {
        for path in self.0.iter().rev() {
            let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir(path));
        }
    }
}

fn user_groups(name: &str) -> Vec<u32> {
    let out = Command::new("id")
        .args(["-G", name])
        .output()
        .expect("run id");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|g| g.parse().ok())
        .collect()
}

fn group_id(name: &str) -> Option<u32> {
    let out = Command::new("getent").args(["group", name]).output().ok()?;
    let line = String::from_utf8(out.stdout).ok()?;
    line.trim().split(':').nth(2)?.parse().ok()
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_service_section() {
        let unit = Unit::parse(
            "x.service",
            "[Unit]\nUser=nobody\n[Service]\n# c\nUser=mpistat\nReadWritePaths=/a\n\
             ReadWritePaths=-/b /c\nStateDirectory=mpistat\nExecStart=/usr/bin/x --%i last\n",
        );
        assert_eq!(unit.value("User"), Some("mpistat"));
        assert_eq!(
            unit.writable_paths(),
            ["/a", "/b", "/c", "/var/lib/mpistat"].map(PathBuf::from)
        );
        assert_eq!(unit.exec_start("week"), ["/usr/bin/x", "--week", "last"]);
    }
}
