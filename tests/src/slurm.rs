//! A private Slurm cluster of one node for the end-to-end tests: Debian's `munged`, `slurmctld` and
//! `slurmd` (slurm-wlm 22.05), started in a fresh temporary directory and stopped on drop.
//!
//! * `munged` with its own key and socket; the cluster finds it through `AuthInfo=socket=`.
//! * `slurm.conf`: one node named after this host (`NodeAddr=127.0.0.1`) with this machine's CPUs,
//!   one partition `debug`, free ports, no accounting, `proctrack/linuxproc`, `task/none`,
//!   `SlurmUser=root`, private state, spool, pid and log files, and mpistat's TaskProlog
//!   (`etc/slurm/mpistat-taskprolog.sh` with `lib=` pointing at the library under test).
//! * Client commands ([`Slurm::command`]) get `SLURM_CONF`; nothing of the host's Slurm is used.
//!
//! [`Slurm::start`] waits until `sinfo` shows the node idle; when a daemon does not come up it
//! panics with the daemons' logs. When Slurm is not installed, or the tests do not run as root
//! (slurmd must), it returns `None` after saying so loudly (the test then passes as skipped),
//! unless `MPISTAT_REQUIRE_SLURM=1` (set by `scripts/test.sh`, which installs Slurm), which turns
//! that into a failure.

use crate::job::{run_with_timeout, Outcome};
use crate::workspace::{free_port, library, workspace_root};
use mpistat_testkit::scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the daemons may take to bring the node to `idle`.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a client command (`sbatch`, `squeue`, ...) may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The daemons needed, and where Debian puts them.
const DAEMONS: [&str; 3] = [
    "/usr/sbin/munged",
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
];

/// A running private cluster; see the module documentation.
pub struct Slurm {
    dir: Scratch,
    node: String,
    daemons: Vec<(&'static str, Child)>,
}

/// A job's state as `scontrol show job` tells it.
#[derive(Debug, Clone)]
pub struct JobState {
    /// `JobState`, e.g. `COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`.
    pub state: String,
    /// `ExitCode`, e.g. `0:0`.
    pub exit_code: String,
}

impl Slurm {
    /// Start the cluster, or `None` (after a loud message) when Slurm is not installed here and
    /// `MPISTAT_REQUIRE_SLURM` is not `1`.
    pub fn start() -> Option<Slurm> {
        let missing = DAEMONS.iter().find(|d| !Path::new(d).exists());
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if missing.is_some() || !root {
            let why = match missing {
                Some(missing) => format!(
                    "{missing} is not installed (scripts/prereqs.sh installs munge, slurmctld, slurmd and slurm-client)"
                ),
                None => "slurmd must run as root (SlurmdUser=root), and these tests are not root".into(),
            };
            if std::env::var("MPISTAT_REQUIRE_SLURM").as_deref() == Ok("1") {
                panic!("MPISTAT_REQUIRE_SLURM=1 but {why}");
            }
            eprintln!("\n**********\nSKIPPED: this Slurm test cannot run: {why}\n**********\n");
            return None;
        }
        let dir = Scratch::new("slurm");
        let mut slurm = Slurm {
            node: short_host_name(),
            dir,
            daemons: Vec::new(),
        };
        slurm.start_munged();
        slurm.write_config();
        let conf = slurm.conf();
        for daemon in ["slurmctld", "slurmd"] {
            let mut cmd = Command::new(format!("/usr/sbin/{daemon}"));
            cmd.arg("-D").env("SLURM_CONF", &conf);
            if daemon == "slurmctld" {
                cmd.arg("-i"); // ignore (absent) state files
            }
            slurm.spawn(daemon, cmd);
        }
        slurm.wait_idle();
        Some(slurm)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The cluster's `slurm.conf`.
    pub fn conf(&self) -> PathBuf {
        self.path("slurm.conf")
    }

    /// The node's name (this host's short name).
    pub fn node(&self) -> &str {
        &self.node
    }

    fn munge_socket(&self) -> PathBuf {
        self.path("munge/munge.socket")
    }

    fn start_munged(&mut self) {
        // munged wants its key private and its socket's directory reachable by every user.
        let key_dir = self.path("munge-key");
        std::fs::create_dir_all(&key_dir).unwrap();
        std::fs::create_dir_all(self.path("munge")).unwrap();
        set_mode(&key_dir, 0o700);
        set_mode(&self.path("munge"), 0o755);
        let key = key_dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .expect("read /dev/urandom");
        std::fs::write(&key, bytes).unwrap();
        set_mode(&key, 0o400);
        let mut cmd = Command::new("/usr/sbin/munged");
        cmd.arg("--foreground")
            .arg("--force")
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", self.munge_socket().display()))
            .arg(format!(
                "--pid-file={}",
                self.path("munge/munged.pid").display()
            ))
            .arg(format!("--log-file={}", self.path("munged.log").display()))
            .arg(format!("--seed-file={}", key_dir.join("seed").display()));
        self.spawn("munged", cmd);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.munge_socket().exists() {
            self.check_alive("munged did not create its socket");
            if Instant::now() > deadline {
                self.fail("munged did not create its socket within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn write_config(&self) {
        let d = self.dir.path().display();
        for sub in ["state", "spool", "jobs"] {
            std::fs::create_dir_all(self.path(sub)).unwrap();
        }
        // The jobs' output files are written by the jobs' users.
        set_mode(&self.path("jobs"), 0o1777);
        std::fs::write(self.path("plugstack.conf"), "").unwrap();
        std::fs::write(self.path("taskprolog.sh"), task_prolog()).unwrap();
        set_mode(&self.path("taskprolog.sh"), 0o755);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let host = &self.node;
        let text = format!(
            "# A private one-node cluster of the mpistat e2e tests.
ClusterName=mpistat
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
PlugStackConfig={d}/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=10
TaskProlog={d}/taskprolog.sh
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
",
            ctld_port = free_port(),
            slurmd_port = free_port(),
            munge = self.munge_socket().display(),
        );
        std::fs::write(self.conf(), text).unwrap();
    }

    fn spawn(&mut self, name: &'static str, mut cmd: Command) {
        let out = std::fs::File::create(self.path(&format!("{name}.out"))).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.daemons.push((name, child));
    }

    /// Panic with the logs if a daemon has exited.
    fn check_alive(&mut self, what: &str) {
        let dead: Vec<String> = self
            .daemons
            .iter_mut()
            .filter_map(|(name, child)| match child.try_wait() {
                Ok(Some(status)) => Some(format!("{name} exited with {status}")),
                _ => None,
            })
            .collect();
        if !dead.is_empty() {
            self.fail(&format!("{what}: {}", dead.join(", ")));
        }
    }

    /// Panic, showing every daemon's output and log.
    fn fail(&self, what: &str) -> ! {
        let mut logs = String::new();
        for name in [
            "munged.out",
            "munged.log",
            "slurmctld.out",
            "slurmctld.log",
            "slurmd.out",
            "slurmd.log",
        ] {
            let text = std::fs::read_to_string(self.path(name)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            logs.push_str(&format!("---- {name} (last lines) ----\n"));
            for l in tail.iter().rev() {
                logs.push_str(l);
                logs.push('\n');
            }
        }
        panic!("private Slurm: {what}\n{logs}");
    }

    fn wait_idle(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.check_alive("a daemon stopped before the node was idle");
            let out = self
                .command("sinfo")
                .args(["--noheader", "--nodes", &self.node, "--format=%T"])
                .output()
                .expect("run sinfo");
            let last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if out.status.success() && last.trim() == "idle" {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "the node was not idle within {START_TIMEOUT:?}; sinfo said: {last}"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A Slurm client command (`sbatch`, `srun`, `squeue`, `scancel`, ...) for this cluster, with
    /// none of the test process's mpistat settings or preloads.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", self.conf());
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("MPISTAT_") || k.starts_with("SLURM_") || k == "LD_PRELOAD" {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd
    }

    /// Run a client command to its end (bounded); panics with its output if it fails.
    pub fn run(&self, cmd: Command) -> Outcome {
        let outcome = run_with_timeout(cmd, CLIENT_TIMEOUT);
        outcome.assert_success();
        outcome
    }

    /// Where `sbatch` jobs of [`Slurm::sbatch`] write their output (`%j` = job id, `%A_%a` for
    /// array tasks).
    pub fn jobs_dir(&self) -> PathBuf {
        self.path("jobs")
    }

    /// Submit `script` (a shell script's text) with `sbatch --parsable` and the extra `args`, in
    /// the environment `env` on top of the command's; output goes to `jobs/<id>.out` (array
    /// tasks: `jobs/<array id>_<task>.out`). Returns the job id.
    pub fn sbatch(&self, script: &str, args: &[&str], env: &[(&str, &str)]) -> String {
        let n = std::fs::read_dir(self.jobs_dir()).unwrap().count();
        let file = self.jobs_dir().join(format!("script-{n}.sh"));
        std::fs::write(&file, script).unwrap();
        let mut cmd = self.command("sbatch");
        cmd.arg("--parsable")
            .arg(format!("--output={}/%j.out", self.jobs_dir().display()))
            .arg(format!("--chdir={}", self.jobs_dir().display()))
            .args(args)
            .arg(&file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = self.run(cmd);
        // "<id>" or "<id>;<cluster>".
        out.stdout.trim().split(';').next().unwrap().to_string()
    }

    /// The job's state (`scontrol show job`); `None` when slurmctld no longer knows it.
    pub fn job_state(&self, id: &str) -> Option<JobState> {
        let out = self
            .command("scontrol")
            .args(["--oneliner", "show", "job", id])
            .output()
            .expect("run scontrol");
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(str::to_string)
        };
        Some(JobState {
            state: field("JobState=")?,
            exit_code: field("ExitCode=").unwrap_or_default(),
        })
    }

    /// Wait until job `id` (every task of an array job) has ended; returns the states. Panics
    /// with the job's output and the daemons' logs after `timeout`.
    pub fn wait_ended(&self, id: &str, timeout: Duration) -> Vec<JobState> {
        let deadline = Instant::now() + timeout;
        loop {
            let out = self
                .command("squeue")
                .args([
                    "--noheader",
                    "--array",
                    "--jobs",
                    id,
                    "--states=all",
                    "--format=%i %T",
                ])
                .output()
                .expect("run squeue");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let states: Vec<&str> = text
                .lines()
                .filter_map(|l| l.split_whitespace().nth(1))
                .collect();
            let running = [
                "PENDING",
                "CONFIGURING",
                "RUNNING",
                "COMPLETING",
                "SUSPENDED",
            ];
            if out.status.success()
                && !states.is_empty()
                && states.iter().all(|s| !running.contains(s))
            {
                return text
                    .lines()
                    .filter_map(|l| self.job_state(l.split_whitespace().next()?))
                    .collect();
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "job {id} did not end within {timeout:?}; squeue: {text}\noutput:\n{}",
                    self.outputs()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Wait until job `id` runs and its output file holds `line`; panics after `timeout`.
    pub fn wait_output_line(&self, id: &str, line: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let file = self.jobs_dir().join(format!("{id}.out"));
        loop {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if text.lines().any(|l| l == line) {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "job {id} did not print {line:?} within {timeout:?}; output:\n{text}"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The output of job `id` (its `jobs/<id>.out`).
    pub fn output(&self, id: &str) -> String {
        std::fs::read_to_string(self.jobs_dir().join(format!("{id}.out"))).unwrap_or_default()
    }

    /// Every job output file, for failure messages.
    fn outputs(&self) -> String {
        let mut all = String::new();
        for e in std::fs::read_dir(self.jobs_dir()).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "out") {
                all.push_str(&format!(
                    "---- {} ----\n{}",
                    e.path().display(),
                    std::fs::read_to_string(e.path()).unwrap_or_default()
                ));
            }
        }
        all
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // Jobs first (their slurmstepd outlive slurmd), then the daemons, slurmd before slurmctld
        // and munged last.
        let mut cancel = self.command("scancel");
        cancel.args(["--full", "--user", "root"]);
        let _ = cancel.stdout(Stdio::null()).stderr(Stdio::null()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let out = self
                .command("squeue")
                .args(["--noheader", "--format=%i"])
                .output();
            match out {
                Ok(o) if o.status.success() && !o.stdout.is_empty() => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                _ => break,
            }
        }
        for (_, child) in self.daemons.iter_mut().rev() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn short_host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    name.trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .to_string()
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// The shipped TaskProlog (`etc/slurm/mpistat-taskprolog.sh`) with its `lib=` line pointing at
/// the library under test.
pub fn task_prolog() -> String {
    let prolog = std::fs::read_to_string(workspace_root().join("etc/slurm/mpistat-taskprolog.sh"))
        .expect("etc/slurm/mpistat-taskprolog.sh");
    let lib_line = format!("lib={}", library().display());
    let prolog: String = prolog
        .lines()
        .map(|l| {
            if l.starts_with("lib=") {
                lib_line.as_str()
            } else {
                l
            }
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        prolog.contains(&lib_line),
        "the TaskProlog has no lib= line"
    );
    prolog
}
