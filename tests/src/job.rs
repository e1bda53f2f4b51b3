//! A real `mpirun` job ([`Job`]): bare, with `libmpistat.so` preloaded or linked, on emulated
//! nodes, as another user; killed after a timeout so that a hang fails the test instead of
//! hanging CI. What it left ([`Outcome`]) and how bare and profiled runs compare.

use crate::programs::Mpi;
use crate::users::User;
use crate::workspace::{library, workspace_root};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a job may run before it is killed and its test fails.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// What a finished job left.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Outcome {
    /// Panic (showing the output) unless the job exited with status 0.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "job failed with {}:\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// The stdout lines sorted (ranks print in any order).
    pub fn sorted_stdout(&self) -> Vec<&str> {
        let mut lines: Vec<&str> = self.stdout.lines().collect();
        lines.sort_unstable();
        lines
    }
}

/// Assert that a profiled run printed exactly what the bare run printed, on stdout (lines in any
/// order: ranks interleave) and on stderr.
/// A line Open MPI's rsh launcher prints when it loses a race with its own child under load
/// (`setpgid` after the child already ran `exec`): about the launch of emulated nodes, not the job.
fn launcher_race(line: &str) -> bool {
    line.contains("plm:rsh: Warning: setpgid(")
}

pub fn assert_same_output(bare: &Outcome, profiled: &Outcome) {
    assert_eq!(
        profiled.sorted_stdout(),
        bare.sorted_stdout(),
        "stdout differs from the bare run"
    );
    let mut bare_err: Vec<&str> = bare.stderr.lines().filter(|l| !launcher_race(l)).collect();
    let mut prof_err: Vec<&str> = profiled
        .stderr
        .lines()
        .filter(|l| !launcher_race(l))
        .collect();
    bare_err.sort_unstable();
    prof_err.sort_unstable();
    assert_eq!(prof_err, bare_err, "stderr differs from the bare run");
}

/// How much slower than a bare run a profiled one may be before we call it delayed: far above
/// noise on a loaded machine, far below the time a blocking send to a stopped syslogd would hang.
pub const DELAY_MARGIN: Duration = Duration::from_secs(5);

/// Assert that `profiled` did not take longer than `bare` plus [`DELAY_MARGIN`].
pub fn assert_not_delayed(bare: &Outcome, profiled: &Outcome) {
    assert!(
        profiled.elapsed <= bare.elapsed + DELAY_MARGIN,
        "profiled run took {:?}, the bare run {:?}: the profiler delayed the job",
        profiled.elapsed,
        bare.elapsed
    );
}

/// An `mpirun` job: `mpirun --allow-run-as-root --oversubscribe -np N [-x VAR=VALUE]... prog args`
/// (with [`Job::mpi`] `Mpi::Mpich`: `mpiexec.mpich -np N [-env VAR VALUE]... prog args`).
///
/// [`Job::bare`] runs it as is; [`Job::profiled`] adds `-x LD_PRELOAD=<library> -x
/// MPISTAT_CONFIG=<site.toml>`; [`Job::mixed`] gives the library to half of the ranks only.
/// Either way the job is killed (whole process group) after [`JOB_TIMEOUT`] and the test fails.
/// `OMPI_MCA_mpi_yield_when_idle=1`, `OMPI_MCA_btl_vader_single_copy_mechanism=none` and
/// `MPIR_CVAR_POLLS_BEFORE_YIELD=1` (MPICH) are set for the oversubscribed small machine.
#[derive(Clone, Debug)]
pub struct Job {
    program: PathBuf,
    ranks: u32,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    timeout: Duration,
    user: Option<User>,
    /// Emulated nodes (host name, ranks), see [`Job::on_nodes`]; empty: this host only.
    nodes: Vec<(String, u32)>,
    /// Open MPI parameters for `mpirun` and every daemon (`--mca NAME VALUE`).
    mca: Vec<(String, String)>,
    mpi: Mpi,
    /// Run every rank under `SCHED_FIFO` ([`Job::realtime`]).
    realtime: bool,
    /// More application contexts of the same program (ranks, arguments): an MPMD job.
    more: Vec<(u32, Vec<String>)>,
}

/// One application context of a job: `ranks` ranks of the program with `args` and `env` (on top
/// of the job's), and with `strip_preload` `LD_PRELOAD` removed from the environment unless
/// `env` sets it.
struct Context<'a> {
    ranks: u32,
    args: &'a [String],
    env: Vec<(String, String)>,
    strip_preload: bool,
}

impl Job {
    pub fn new(program: impl Into<PathBuf>, ranks: u32) -> Job {
        Job {
            program: program.into(),
            ranks,
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            timeout: JOB_TIMEOUT,
            user: None,
            nodes: Vec::new(),
            mca: Vec::new(),
            mpi: Mpi::OpenMpi,
            realtime: false,
            more: Vec::new(),
        }
    }

    /// Add an application context: `ranks` more ranks of the same program with arguments `args`
    /// instead of the job's (an MPMD job, `... : -np RANKS program ARGS`; the job's environment,
    /// and the profiler's, apply to every context).
    pub fn then(mut self, ranks: u32, args: &[&str]) -> Job {
        self.more
            .push((ranks, args.iter().map(|a| a.to_string()).collect()));
        self
    }

    /// Run as `user` (through `setpriv`, with the user's `HOME`).
    pub fn as_user(mut self, user: &User) -> Job {
        self.user = Some(user.clone());
        self
    }

    /// Run on emulated nodes: `(host, ranks)` each, ranks placed in order (rank 0 on the first).
    /// Open MPI starts one daemon per host through `tests/bin/node-rsh`, which gives it its own
    /// UTS namespace named `host`; ranks talk TCP over loopback, as between real nodes. MPICH's
    /// Hydra starts its proxies through the same agent (`-launcher rsh -launcher-exec`).
    pub fn on_nodes(program: impl Into<PathBuf>, nodes: &[(&str, u32)]) -> Job {
        let mut job = Job::new(program, nodes.iter().map(|(_, n)| n).sum());
        job.nodes = nodes.iter().map(|(h, n)| (h.to_string(), *n)).collect();
        job
    }

    /// Launch with `mpi`'s launcher (the program must be built for it, [`Program::path_for`](crate::programs::Program::path_for)).
    pub fn mpi(mut self, mpi: Mpi) -> Job {
        self.mpi = mpi;
        self
    }

    /// Add a program argument.
    pub fn arg(mut self, a: impl Into<String>) -> Job {
        self.args.push(a.into());
        self
    }

    /// Set an Open MPI parameter for the launcher and its daemons (`--mca NAME VALUE`).
    pub fn mca(mut self, name: &str, value: impl Into<String>) -> Job {
        self.mca.push((name.to_string(), value.into()));
        self
    }

    /// Set an environment variable in every rank (`-x NAME=VALUE`).
    pub fn env(mut self, name: &str, value: impl Into<String>) -> Job {
        self.env.push((name.to_string(), value.into()));
        self
    }

    /// Run in directory `dir`.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Job {
        self.cwd = Some(dir.into());
        self
    }

    /// Kill the job after `t` instead of [`JOB_TIMEOUT`].
    pub fn timeout(mut self, t: Duration) -> Job {
        self.timeout = t;
        self
    }

    /// Run without the profiler.
    pub fn bare(&self) -> Outcome {
        self.run(&[])
    }

    /// The environment that preloads the profiler (for the job's MPI) configured by
    /// `site_config`, as the site wrote it: under MPICH too, the profiler learns whether every
    /// rank has it (over Hydra's PMI-1, `profiler/src/pmi1.rs`), with no assumption.
    fn preloaded(&self, site_config: &Path) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".to_string(), library().display().to_string()),
            (
                "MPISTAT_CONFIG".to_string(),
                site_config.display().to_string(),
            ),
        ]
    }

    /// Run with the profiler preloaded and configured by `site_config`.
    pub fn profiled(&self, site_config: &Path) -> Outcome {
        self.run(&self.preloaded(site_config))
    }

    /// Run with `library` (e.g. the build for another MPI family) preloaded and configured by
    /// `site_config`.
    pub fn preloading(&self, library: &Path, site_config: &Path) -> Outcome {
        self.run(&[
            ("LD_PRELOAD".to_string(), library.display().to_string()),
            (
                "MPISTAT_CONFIG".to_string(),
                site_config.display().to_string(),
            ),
        ])
    }

    /// Run as an MPMD job of two halves, the first half of the ranks (rank 0 on) with the
    /// profiler preloaded if `library_first`, else the second half; the other half runs through
    /// `env -u LD_PRELOAD` (a wrapper that clears the environment, or a static program).
    pub fn mixed(&self, site_config: &Path, library_first: bool) -> Outcome {
        let (with, without) = (self.preloaded(site_config), Vec::new());
        if library_first {
            self.halves(with, without)
        } else {
            self.halves(without, with)
        }
    }

    /// Run as an MPMD job of two halves with the profiler preloaded in both, the first half
    /// configured by `first`, the second by `second` (e.g. one where the site disables it).
    pub fn profiled_halves(&self, first: &Path, second: &Path) -> Outcome {
        self.halves(self.preloaded(first), self.preloaded(second))
    }

    fn halves(&self, first: Vec<(String, String)>, second: Vec<(String, String)>) -> Outcome {
        let half = self.ranks / 2;
        self.launch(&[
            Context {
                ranks: half,
                args: &self.args,
                env: first,
                strip_preload: true,
            },
            Context {
                ranks: self.ranks - half,
                args: &self.args,
                env: second,
                strip_preload: true,
            },
        ])
    }

    /// Run a program that links the profiler itself (`-lmpistat`): no `LD_PRELOAD`, only the
    /// site configuration.
    pub fn linked(&self, site_config: &Path) -> Outcome {
        self.run(&[(
            "MPISTAT_CONFIG".to_string(),
            site_config.display().to_string(),
        )])
    }

    fn run(&self, extra_env: &[(String, String)]) -> Outcome {
        self.launch(&self.contexts(extra_env.to_vec()))
    }

    /// The job's application contexts, each with `env`.
    fn contexts(&self, env: Vec<(String, String)>) -> Vec<Context<'_>> {
        std::iter::once((self.ranks, &self.args))
            .chain(self.more.iter().map(|(ranks, args)| (*ranks, args)))
            .map(|(ranks, args)| Context {
                ranks,
                args,
                env: env.clone(),
                strip_preload: false,
            })
            .collect()
    }

    /// The emulated nodes as both launchers take them: `host:ranks,...`.
    fn host_list(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|(h, n)| format!("{h}:{n}")).collect();
        hosts.join(",")
    }

    /// Run every rank under the real-time policy `SCHED_FIFO` (`chrt -f 1` in front of the
    /// program): a job whose outcome is a race between its ranks (which request completes first)
    /// then runs as on a quiet node, whatever else this machine runs meanwhile, as long as it
    /// lasts (the kernel's real-time throttling still leaves others 5 % of each core).
    ///
    /// The ranks only, not the launcher: a real-time `mpirun` once spun in the kernel for 25
    /// minutes reaping a rank (`wait4` -> `release_task` -> `shrink_dcache_parent`, while another
    /// process dropped the caches in a loop), with `SIGKILL` pending, so that no timeout could
    /// end the job. The launcher and its daemons stay at the normal policy, and a test's timeout
    /// kills them.
    pub fn realtime(mut self) -> Job {
        self.realtime = true;
        self
    }

    /// `launcher` as the job's user (with the user's `HOME`), or as the test's.
    fn command(&self, launcher: &str) -> Command {
        match &self.user {
            Some(user) => {
                let mut cmd = user.command(launcher);
                cmd.env("HOME", &user.home).env("USER", &user.name);
                cmd
            }
            None => Command::new(launcher),
        }
    }

    /// The launcher's command for the job profiled by `site_config`, to run it oneself (e.g. to
    /// signal some of its processes while it runs).
    pub fn profiled_command(&self, site_config: &Path) -> Command {
        self.command_for(&self.contexts(self.preloaded(site_config)))
    }

    /// [`Job::profiled_command`] without the profiler.
    pub fn bare_command(&self) -> Command {
        self.command_for(&self.contexts(Vec::new()))
    }

    fn launch(&self, contexts: &[Context]) -> Outcome {
        run_with_timeout(self.command_for(contexts), self.timeout)
    }

    fn command_for(&self, contexts: &[Context]) -> Command {
        let mut cmd = match self.mpi {
            Mpi::OpenMpi => {
                let mut cmd = self.command("mpirun");
                cmd.args([
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                ]);
                if !self.nodes.is_empty() {
                    cmd.arg("--host").arg(self.host_list());
                    // Remote daemons get MCA parameters from the command line, not from the
                    // environment.
                    for (param, value) in [
                        ("plm_rsh_agent", node_agent().display().to_string()),
                        ("btl", "tcp,self".into()),
                        ("btl_tcp_if_include", "lo".into()),
                        ("oob_tcp_if_include", "lo".into()),
                        ("mpi_yield_when_idle", "1".into()),
                        ("rmaps_base_mapping_policy", "slot".into()),
                    ] {
                        cmd.args(["--mca", param, &value]);
                    }
                }
                for (param, value) in &self.mca {
                    cmd.args(["--mca", param, value]);
                }
                cmd
            }
            Mpi::Mpich => {
                let mut cmd = self.command("mpiexec.mpich");
                if !self.nodes.is_empty() {
                    // Hydra starts one proxy per host through the same agent (`-launcher rsh`).
                    cmd.args(["-launcher", "rsh", "-launcher-exec"])
                        .arg(node_agent())
                        .arg("-hosts")
                        .arg(self.host_list());
                }
                cmd
            }
        };
        for (i, context) in contexts.iter().enumerate() {
            if i > 0 {
                cmd.arg(":");
            }
            cmd.arg("-np").arg(context.ranks.to_string());
            for (k, v) in context.env.iter().chain(&self.env) {
                match self.mpi {
                    Mpi::OpenMpi => cmd.arg("-x").arg(format!("{k}={v}")),
                    Mpi::Mpich => cmd.args(["-env", k, v]),
                };
            }
            if context.strip_preload && !context.env.iter().any(|(k, _)| k == "LD_PRELOAD") {
                cmd.args(["env", "-u", "LD_PRELOAD"]);
            }
            if self.realtime {
                cmd.args(["chrt", "-f", "1"]);
            }
            cmd.arg(&self.program).args(context.args);
        }
        // Local ranks inherit mpirun's environment: keep ours from leaking into a bare run.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("MPISTAT_") || k == "LD_PRELOAD" {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd.env("OMPI_MCA_mpi_yield_when_idle", "1")
            .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
            // MPICH's busy wait gives the core away at every poll, like Open MPI's above.
            .env("MPIR_CVAR_POLLS_BEFORE_YIELD", "1");
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd
    }
}

/// The launchers' rsh agent that makes emulated nodes (`tests/bin/node-rsh`: each host its own
/// UTS namespace).
fn node_agent() -> PathBuf {
    workspace_root().join("tests/bin/node-rsh")
}

/// Run `cmd` in its own process group with piped stdout/stderr; kill the group after `timeout`
/// and panic (a hang must fail the test, not CI).
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Outcome {
    let shown = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for job") {
            break status;
        }
        if start.elapsed() > timeout {
            // SAFETY: kill(2) on the process group we created for this child.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            let stdout =
                String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
            let stderr =
                String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
            panic!("{shown} did not finish within {timeout:?} and was killed.\nstdout:\n{stdout}\nstderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    Outcome {
        status,
        stdout,
        stderr,
        elapsed,
    }
}
