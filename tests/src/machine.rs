//! A throwaway machine: a copy-on-write view of this very host, in which a test may do what a site
//! admin does (`apt-get install`, `useradd`, start the distribution's own `rsyslogd` on its own
//! `/dev/log`) without touching the host.
//!
//! `unshare --mount --pid --uts` makes the namespaces; an overlay file system with the host's `/`
//! as its lower layer and a tmpfs (private to the namespace) as its upper layer becomes the
//! machine's root, with its own `/proc` (of the new PID namespace), `/dev` (a tmpfs with the
//! host's `null zero full random urandom tty` bound in, a fresh `/dev/pts` and `/dev/shm`, the
//! `/dev/fd` links), `/run`
//! and `/tmp`. Everything the host has installed (Open MPI, MPICH, rsyslog, ...) is there; what is
//! written goes to the upper layer and disappears with the machine. Commands run in it through
//! `nsenter` and `chroot` with a clean environment. When the [`Machine`] is dropped its PID
//! namespace's init is killed, which ends every process started in it, and the mounts go with the
//! mount namespace.
//!
//! `/proc/kmsg` is an empty FIFO inside (the init holds it open, so a read waits): the
//! distribution's rsyslog.conf loads imklog, and reading the host kernel's log buffer would take
//! its messages from the host (`/dev/null` would make imklog spin on end-of-file).

use crate::job::{run_with_timeout, Outcome};
use mpistat_testkit::scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one command in a machine may take (installing packages, an MPI job).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

/// The environment commands in a machine get (as a login would), nothing of the test's.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const SETUP: &str = r#"set -e
base=$1
mount -t tmpfs -o mode=755 tmpfs "$base"
mkdir "$base/upper" "$base/work" "$base/root"
R=$base/root
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$R"
mount -t proc proc "$R/proc"
mkfifo "$base/kmsg"
exec 3<>"$base/kmsg"
mount --bind "$base/kmsg" "$R/proc/kmsg"
mount --rbind /sys "$R/sys"
mount -t tmpfs -o mode=755 tmpfs "$R/dev"
for n in null zero full random urandom tty; do
    touch "$R/dev/$n"
    mount --bind "/dev/$n" "$R/dev/$n"
done
mkdir "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
ln -s /proc/self/fd "$R/dev/fd"
for i in 0 1 2; do ln -s "/proc/self/fd/$i" "$R/dev/$(echo stdin stdout stderr | cut -d' ' -f$((i + 1)))"; done
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
mount -t tmpfs -o mode=755 tmpfs "$R/run"
mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
[ -z "$2" ] || hostname "$2"
[ "$3" != private ] || ip link set lo up
echo ready
exec sleep infinity
"#;

/// The network a [`Machine`] is on.
pub enum Network<'a> {
    /// The host's.
    Host,
    /// One of its own, with only loopback.
    Private,
    /// That of another machine (two hosts of a site talking over loopback, no one else).
    Of(&'a Machine),
}

/// A copy-on-write machine; see the module's documentation.
pub struct Machine {
    /// `unshare`, whose child is the namespace's init.
    unshare: Child,
    /// The init's pid on the host.
    init: u32,
    /// The root's path inside the mount namespace.
    root: PathBuf,
    _dir: Scratch,
}

impl Machine {
    /// Start one; `hostname` is its own (UTS namespace) or, `None`, the host's. Its network is
    /// the host's.
    pub fn start(hostname: Option<&str>) -> Machine {
        Machine::start_on(hostname, Network::Host)
    }

    /// Start one on `network`.
    pub fn start_on(hostname: Option<&str>, network: Network) -> Machine {
        let dir = Scratch::new("machine");
        let private = matches!(network, Network::Private);
        let mut unshare = match network {
            Network::Host => Command::new("unshare"),
            Network::Private => {
                let mut cmd = Command::new("unshare");
                cmd.arg("--net");
                cmd
            }
            Network::Of(other) => {
                let mut cmd = Command::new("nsenter");
                cmd.args(["-t", &other.init.to_string(), "-n", "--", "unshare"]);
                cmd
            }
        };
        let mut unshare = unshare
            .args([
                "--mount",
                "--pid",
                "--uts",
                "--fork",
                "--kill-child",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                SETUP,
                "setup",
            ])
            .arg(dir.path())
            .arg(hostname.unwrap_or(""))
            .arg(if private { "private" } else { "" })
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("unshare (util-linux)");
        let mut ready = String::new();
        use std::io::BufRead;
        let _ = std::io::BufReader::new(unshare.stdout.take().unwrap()).read_line(&mut ready);
        if ready.trim() != "ready" {
            let out = unshare.wait_with_output().unwrap();
            panic!(
                "the machine did not start: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let children = format!("/proc/{0}/task/{0}/children", unshare.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        let init = loop {
            let text = std::fs::read_to_string(&children).unwrap_or_default();
            if let Some(pid) = text.split_whitespace().next() {
                break pid.parse().unwrap();
            }
            assert!(Instant::now() < deadline, "no init in the machine");
            std::thread::sleep(Duration::from_millis(10));
        };
        let root = dir.path().join("root");
        Machine {
            unshare,
            init,
            root,
            _dir: dir,
        }
    }

    /// `script` run by `/bin/sh` as root in the machine, with a clean environment.
    pub fn command(&self, script: &str) -> Command {
        self.enter(&["-m", "-u", "-n", "-p"], script)
    }

    fn enter(&self, namespaces: &[&str], script: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(self.init.to_string())
            .args(namespaces)
            .args(["--", "chroot"])
            .arg(&self.root)
            .args(["/usr/bin/env", "-i"])
            .arg(format!("PATH={PATH}"))
            .args(["HOME=/root", "LANG=C.UTF-8", "/bin/sh", "-c", script])
            .stdin(Stdio::null());
        cmd
    }

    /// Run `script` (see [`Machine::command`]) to its end, killed after [`COMMAND_TIMEOUT`] (a
    /// hang fails the test instead of hanging CI). A daemon it starts must not keep its standard
    /// output or error (redirect them), or this waits for the daemon.
    pub fn run(&self, script: &str) -> Outcome {
        run_with_timeout(self.command(script), COMMAND_TIMEOUT)
    }

    /// Run `script` and return its standard output; panics with its output if it fails.
    pub fn sh(&self, script: &str) -> String {
        let out = self.run(script);
        assert!(
            out.status.success(),
            "in the machine, `{script}` failed ({}):\n{}{}",
            out.status,
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// Where the machine's `path` is seen from the host (through its init's root).
    pub fn path(&self, path: impl AsRef<Path>) -> PathBuf {
        let inside = path.as_ref().strip_prefix("/").unwrap_or(path.as_ref());
        PathBuf::from(format!("/proc/{}/root", self.init))
            .join(self.root.strip_prefix("/").unwrap())
            .join(inside)
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // --kill-child: unshare's end ends the init, and the PID namespace with it.
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}
