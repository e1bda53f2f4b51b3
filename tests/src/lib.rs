//! Shared harness for the end-to-end tests: real parts, no mocks.
//!
//! * [`Syslogd`]: a real `rsyslogd` listening on a private socket in a fresh temporary directory,
//!   writing our facility raw to a file that the tests read and decode with the real decoder.
//! * [`program`] / [`Program`]: the test programs of `tests/programs/`, compiled with `mpicc` /
//!   `mpifort` once per test binary.
//! * [`Job`]: a real `mpirun` job, bare or with `libmpistat.so` preloaded, killed after a timeout
//!   so that a hang fails the test instead of hanging CI.
//! * [`RankValues`] and [`assert_routine`]: exact expectations on a record's per-routine numbers.
//! * [`webdriver::Browser`]: one headless Chromium (through `chromedriver`) that loads many pages.
//! * [`supersteps::MeasuredImbalance`]: the imbalance figures from what `imbalance.c` measured.
//! * [`rsyslog::RsyslogDaemon`]: a private rsyslogd with a shipped configuration.
//! * [`units::Unit`]: a shipped systemd unit run with the privileges it gives.
//! * [`machine::Machine`]: a copy-on-write view of this host to install packages into.
//! * [`User`]: an unprivileged local user (made with `useradd`) that jobs and `mpistat` run as.
//!
//! MPI jobs oversubscribe a small machine, so every test that runs one takes [`serial`] first:
//! tests of one binary then run one job at a time (cargo runs test binaries one after another).

pub mod certs;
pub mod machine;
pub mod postgresql;
pub mod relay;
pub mod rsyslog;
pub mod slurm;
pub mod supersteps;
pub mod units;
pub mod webdriver;

use mpistat_record::model::{JobRecord, RoutineStats, Stat};
use mpistat_record::{AnalysisRecord, Decoded};
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long a job may run before it is killed and its test fails.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// How long [`Syslogd::records`] waits for records to show up in the log file.
pub const RECORD_WAIT: Duration = Duration::from_secs(10);
/// How long [`Syslogd::wait_for_analysis`] waits: the analysis runs detached at the lowest
/// priority after the job, on a machine the other tests keep busy.
pub const ANALYSIS_WAIT: Duration = Duration::from_secs(300);

/// This machine's host name, as its rsyslogd names it in the lines it writes (a record's host
/// must be its line's).
pub fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    name.trim().to_string()
}

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The workspace's `target` directory (`CARGO_TARGET_DIR` if set).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The profiler library under test, the front: `MPISTAT_LIB`, else
/// `<target>/release/libmpistat.so`.
///
/// Panics if it does not exist: the tests never build it themselves (they would race the build).
pub fn library() -> PathBuf {
    let path = std::env::var_os("MPISTAT_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("release/libmpistat.so"));
    assert!(
        path.is_file(),
        "{} does not exist: run cargo build --release -p mpistat-front -p mpistat-profiler first (or set MPISTAT_LIB)",
        path.display()
    );
    path
}

/// `tests/programs/basic.c`, for any MPI ([`Program::path_for`]).
pub const BASIC: Program = Program {
    source: "basic.c",
    name: "basic",
    flags: &[],
};

/// The profiler built for one MPI family (`openmpi`), which the front [`library`] loads from
/// its own directory: `libmpistat_<family>.so` beside it.
///
/// Panics if it does not exist, as [`library`].
pub fn implementation(family: &str) -> PathBuf {
    let path = library().with_file_name(format!("libmpistat_{family}.so"));
    assert!(
        path.is_file(),
        "{} does not exist: run cargo build --release -p mpistat-profiler first",
        path.display()
    );
    path
}

/// Take the global lock that runs this binary's MPI jobs one at a time (a panicking test does not
/// poison it for the others).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Create a fresh directory whose name starts with `mpistat-e2e-<label>`.
    pub fn new(label: &str) -> TempDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "mpistat-e2e-{label}-{}-{}-{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// rsyslogd
// ---------------------------------------------------------------------------------------------

/// A private `rsyslogd`: its own config, socket, work dir and output file in a temp directory.
///
/// The socket (`log.sock`) takes no rate limiting; messages of the configured facility go raw to
/// `messages.log` as `<rfc3339 time> <host> <tag><msg>` (what [`Syslogd::lines`] returns and the
/// decoder reads). The same messages go to `trusted.log` prefixed with the sender's uid, pid and
/// gid as attested by the kernel (imuxsock trusted properties), see [`Syslogd::trusted_lines`].
/// The daemon is stopped when this value is dropped.
pub struct Syslogd {
    dir: TempDir,
    child: Child,
    facility: String,
}

impl Syslogd {
    /// Start one that records facility `local5` (the site default).
    pub fn start() -> Syslogd {
        Syslogd::with_facility("local5")
    }

    /// Start one that records facility `facility` (e.g. `local2`).
    pub fn with_facility(facility: &str) -> Syslogd {
        let dir = TempDir::new("syslogd");
        let d = dir.path();
        let conf = d.join("rsyslog.conf");
        let text = format!(
            r#"global(workDirectory="{work}")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="{sock}" RateLimit.Interval="0" ParseTrusted="on" Annotate="on")
template(name="mpistatRaw" type="string" string="%TIMESTAMP:::date-rfc3339% %HOSTNAME% %syslogtag%%msg%\n")
template(name="mpistatTrusted" type="string" string="uid=%$!uid% pid=%$!pid% gid=%$!gid% %syslogtag%%msg%\n")
{facility}.* action(type="omfile" file="{raw}" template="mpistatRaw")
{facility}.* action(type="omfile" file="{trusted}" template="mpistatTrusted")
"#,
            work = d.display(),
            sock = d.join("log.sock").display(),
            raw = d.join("messages.log").display(),
            trusted = d.join("trusted.log").display(),
        );
        std::fs::write(&conf, text).expect("write rsyslog.conf");
        let child = Command::new("rsyslogd")
            .arg("-n")
            .arg("-f")
            .arg(&conf)
            .arg("-i")
            .arg(d.join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(d.join("rsyslogd.stderr")).expect("stderr file"),
            ))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start rsyslogd (is rsyslog installed?): {e}"));
        let mut syslogd = Syslogd {
            dir,
            child,
            facility: facility.to_string(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !syslogd.socket().exists() {
            if let Ok(Some(status)) = syslogd.child.try_wait() {
                panic!("rsyslogd exited with {status}: {}", syslogd.daemon_stderr());
            }
            assert!(
                Instant::now() < deadline,
                "rsyslogd did not create its socket: {}",
                syslogd.daemon_stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        syslogd
    }

    fn daemon_stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("rsyslogd.stderr")).unwrap_or_default()
    }

    /// The datagram socket the daemon listens on.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("log.sock")
    }

    /// The facility this daemon records.
    pub fn facility(&self) -> &str {
        &self.facility
    }

    /// Write a site config that sends records to this daemon; returns its path.
    pub fn site_config(&self) -> PathBuf {
        write_site_config(self.dir.path(), &self.socket(), &self.facility)
    }

    /// The site config of `site_config` with `extra` TOML appended, written as `name`.
    pub fn site_config_with(&self, name: &str, extra: &str) -> PathBuf {
        let mut text = std::fs::read_to_string(self.site_config()).expect("site config");
        text.push_str(extra);
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("writing a site config");
        path
    }

    /// Stop the daemon (SIGSTOP): its socket stays, but nobody reads it.
    /// Returns once every thread of the daemon is stopped (SIGSTOP is delivered asynchronously: a
    /// thread still running could drain the queue a moment longer).
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
        let tasks = PathBuf::from(format!("/proc/{}/task", self.child.id()));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let all_stopped = std::fs::read_dir(&tasks)
                .expect("read /proc/<rsyslogd>/task")
                .all(|task| {
                    let stat =
                        std::fs::read_to_string(task.expect("task entry").path().join("stat"))
                            .unwrap_or_default();
                    // The state follows the parenthesised command name: "pid (comm) T ...".
                    stat.rsplit_once(") ")
                        .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
                });
            if all_stopped {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "rsyslogd did not stop after SIGSTOP"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Let a paused daemon go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", self.child.id());
    }

    /// Fill the socket's receive queue (meant for a paused daemon) with datagrams of a facility
    /// the daemon ignores, until the kernel refuses more. Returns the senders: keep them alive
    /// while the queue must stay full. Panics if the queue cannot be filled.
    pub fn fill_queue(&self) -> Vec<UnixDatagram> {
        let mut senders = Vec::new();
        for _ in 0..256 {
            let s = UnixDatagram::unbound().expect("socket");
            s.set_nonblocking(true).expect("nonblocking");
            s.connect(self.socket()).expect("connect to syslogd socket");
            let mut sent = 0;
            let full = loop {
                // Priority 15 = user.debug: a facility the daemon does not write.
                match s.send(b"<15>filler: queue filler") {
                    Ok(_) => sent += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break sent == 0,
                    Err(e) => panic!("filling the syslog queue: {e}"),
                }
            };
            senders.push(s);
            if full {
                return senders;
            }
        }
        panic!("could not fill the syslog socket's queue");
    }

    /// The lines written so far for our facility.
    pub fn lines(&self) -> Vec<String> {
        read_lines(&self.dir.path().join("messages.log"))
    }

    /// The same lines, each prefixed with `uid=<uid> pid=<pid> gid=<gid> ` as the kernel attested
    /// them for the sending process.
    pub fn trusted_lines(&self) -> Vec<String> {
        read_lines(&self.dir.path().join("trusted.log"))
    }

    /// Decode everything written so far.
    pub fn decoded(&self) -> Decoded {
        let lines = self.lines();
        mpistat_record::decode(lines.iter().map(String::as_str))
    }

    /// Call `f` on the lines until it gives `Some` (up to [`RECORD_WAIT`]); panics, showing the
    /// lines and the decoder's problems, if it never does.
    fn poll<T>(&self, what: &str, f: impl FnMut(&[String]) -> Option<T>) -> T {
        self.poll_for(what, RECORD_WAIT, f)
    }

    /// [`Syslogd::poll`] for up to `wait`.
    fn poll_for<T>(
        &self,
        what: &str,
        wait: Duration,
        mut f: impl FnMut(&[String]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + wait;
        loop {
            let lines = self.lines();
            if let Some(v) = f(&lines) {
                return v;
            }
            if Instant::now() >= deadline {
                let decoded = mpistat_record::decode(lines.iter().map(String::as_str));
                panic!(
                    "waited {wait:?} for {what} in syslog; decoded {} record(s).\nproblems: {:?}\nlines:\n{}",
                    decoded.records.len(),
                    decoded.problems,
                    lines.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until `pred` holds for the lines written so far.
    pub fn wait_for_lines(&self, pred: impl Fn(&[String]) -> bool) {
        self.poll("the expected lines", |lines| pred(lines).then_some(()))
    }

    /// Wait until the log holds at least `n` records; return all of them.
    pub fn records(&self, n: usize) -> Vec<JobRecord> {
        self.poll(&format!("{n} record(s)"), |lines| {
            let decoded = mpistat_record::decode(lines.iter().map(String::as_str));
            (decoded.records.len() >= n).then_some(decoded.records)
        })
    }

    /// Wait for a record that satisfies `pred` (e.g. a given `job_id`), described by `what`.
    pub fn wait_for_record(&self, what: &str, pred: impl Fn(&JobRecord) -> bool) -> JobRecord {
        self.poll(&format!("a record {what}"), |lines| {
            mpistat_record::decode(lines.iter().map(String::as_str))
                .records
                .into_iter()
                .find(&pred)
        })
    }

    /// Wait (up to [`ANALYSIS_WAIT`]) for an analysis record that satisfies `pred`. The lines
    /// are decoded per attested sender, as ingest does: analyses of one job by several users
    /// share a key.
    pub fn wait_for_analysis(
        &self,
        what: &str,
        pred: impl Fn(&AnalysisRecord) -> bool,
    ) -> AnalysisRecord {
        self.poll_for(&format!("an analysis {what}"), ANALYSIS_WAIT, |_| {
            let mut by_sender: HashMap<String, Vec<String>> = HashMap::new();
            for line in self.trusted_lines() {
                let sender = line.split(' ').next().unwrap_or_default().to_string();
                by_sender.entry(sender).or_default().push(line);
            }
            by_sender.values().find_map(|lines| {
                mpistat_record::decode(lines.iter().map(String::as_str))
                    .analyses
                    .into_iter()
                    .find(&pred)
            })
        })
    }

    /// Assert that no record was written: a marker line sent after the job (through `logger`)
    /// arrives, and nothing before it decodes to a record or looks like one.
    pub fn assert_no_records(&self) {
        let marker = format!("no-records-marker-{}", std::process::id());
        let status = Command::new("logger")
            .arg("-u")
            .arg(self.socket())
            .args([
                "-p",
                &format!("{}.info", self.facility),
                "-t",
                "e2e",
                &marker,
            ])
            .status()
            .expect("run logger");
        assert!(status.success());
        self.wait_for_lines(|lines| lines.iter().any(|l| l.contains(&marker)));
        let lines = self.lines();
        let ours: Vec<&String> = lines.iter().filter(|l| !l.contains(&marker)).collect();
        assert!(
            ours.is_empty(),
            "expected no records, the log has:\n{ours:#?}"
        );
    }

    /// For a job whose record may be cut off by `SIGKILL`: after a moment (as
    /// [`Syslogd::single_record`]), the log holds at most one job's missing parts, and at most
    /// one record, which may lack only its summary (part 0, sent last: the payload decodes
    /// without it).
    pub fn assert_at_most_one_record_or_its_missing_parts(&self) {
        std::thread::sleep(Duration::from_millis(300));
        let decoded = self.decoded();
        assert!(
            decoded.records.len() <= 1,
            "expected at most one record, got {:#?}",
            decoded.records
        );
        let torn: Vec<(&str, Vec<u32>)> = decoded
            .problems
            .iter()
            .filter_map(|p| match p {
                mpistat_record::wire::Problem::MissingParts { key, missing, .. } => {
                    Some((key.as_str(), missing.parts().collect()))
                }
                _ => None,
            })
            .collect();
        let only_summaries_missing = torn.iter().all(|(_, missing)| *missing == [0]);
        assert!(
            (decoded.records.is_empty() || only_summaries_missing)
                && torn.len() == decoded.problems.len()
                && torn.iter().all(|(k, _)| *k == torn[0].0),
            "decoder problems beyond one job's missing parts: {:?}",
            decoded.problems
        );
    }

    /// The only record of the log: waits for one, then checks that no second one shows up and that
    /// the decoder had no problems.
    pub fn single_record(&self) -> JobRecord {
        let mut records = self.records(1);
        std::thread::sleep(Duration::from_millis(300));
        let decoded = self.decoded();
        assert!(
            decoded.problems.is_empty(),
            "decoder problems: {:?}",
            decoded.problems
        );
        assert_eq!(
            decoded.records.len(),
            1,
            "expected exactly one record, got {:#?}",
            decoded.records
        );
        records.pop().unwrap()
    }
}

impl Drop for Syslogd {
    fn drop(&mut self) {
        self.resume();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of the file at `path` (none if it cannot be read).
pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Write `<dir>/site.toml` pointing the profiler at `socket` with `facility`; returns its path.
pub fn write_site_config(dir: &Path, socket: &Path, facility: &str) -> PathBuf {
    let path = dir.join("site.toml");
    let text = format!(
        "[syslog]\nsocket = \"{}\"\nfacility = \"{facility}\"\n",
        socket.display()
    );
    std::fs::write(&path, text).expect("write site.toml");
    path
}

// ---------------------------------------------------------------------------------------------
// Test programs
// ---------------------------------------------------------------------------------------------

/// The directory holding the test programs' sources.
pub fn programs_dir() -> PathBuf {
    workspace_root().join("tests/programs")
}

/// The MPI a test program is built with and launched by: Open MPI, the system's default (`mpicc`,
/// `mpifort`, `mpirun`), or MPICH installed beside it (`mpicc.mpich`, `mpifort.mpich`,
/// `mpiexec.mpich`). Each family has its own build of the profiler, which the front ([`library`]) loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mpi {
    #[default]
    OpenMpi,
    Mpich,
}

impl Mpi {
    pub const ALL: [Mpi; 2] = [Mpi::OpenMpi, Mpi::Mpich];

    /// The name of the family in records (`record::family::of_library`).
    pub fn family(self) -> mpistat_record::family::Family {
        match self {
            Mpi::OpenMpi => mpistat_record::family::Family::OpenMpi,
            Mpi::Mpich => mpistat_record::family::Family::Mpich,
        }
    }

    fn compiler(self, language: Language) -> &'static str {
        match (self, language) {
            (Mpi::OpenMpi, Language::C) => "mpicc",
            (Mpi::OpenMpi, Language::Cxx) => "mpicxx",
            (Mpi::OpenMpi, Language::Fortran) => "mpifort",
            (Mpi::Mpich, Language::C) => "mpicc.mpich",
            (Mpi::Mpich, Language::Cxx) => "mpicxx.mpich",
            (Mpi::Mpich, Language::Fortran) => "mpifort.mpich",
        }
    }

    /// What the executable's name gets appended.
    fn suffix(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "",
            Mpi::Mpich => ".mpich",
        }
    }
}

/// A test program's language, by its source's extension: `.c`, `.cc` (C++, with the MPI's C++
/// bindings), else Fortran (`.f90`, `.F90`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Language {
    C,
    Cxx,
    Fortran,
}

impl Language {
    fn of(source: &str) -> Language {
        if source.ends_with(".c") {
            Language::C
        } else if source.ends_with(".cc") {
            Language::Cxx
        } else {
            Language::Fortran
        }
    }
}

/// A test program: a source in `tests/programs/` compiled under `name` with extra compiler `flags`
/// (one source can give several programs, e.g. the Fortran binding variants).
#[derive(Clone, Copy, Debug)]
pub struct Program {
    pub source: &'static str,
    pub name: &'static str,
    pub flags: &'static [&'static str],
}

impl Program {
    /// Compile (once per test binary) and return the executable's path. C sources (`.c`) use
    /// `mpicc`, C++ sources (`.cc`) `mpicxx`, Fortran sources (`.f90`, `.F90`) `mpifort`. Panics
    /// with the compiler's output on failure.
    pub fn path(&self) -> PathBuf {
        self.path_for(Mpi::OpenMpi)
    }

    /// [`Program::path`] built with `mpi`'s compiler wrappers.
    pub fn path_for(&self, mpi: Mpi) -> PathBuf {
        type Built = HashMap<(&'static str, Mpi), PathBuf>;
        static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
        let built = BUILT.get_or_init(Default::default);
        let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = built.get(&(self.name, mpi)) {
            return p.clone();
        }
        let path = self.compile(mpi);
        built.insert((self.name, mpi), path.clone());
        path
    }

    fn compile(&self, mpi: Mpi) -> PathBuf {
        let src = programs_dir().join(self.source);
        assert!(src.is_file(), "no test program {}", src.display());
        let out_dir = target_dir().join("e2e-programs");
        std::fs::create_dir_all(&out_dir).expect("create target/e2e-programs");
        let name = format!("{}{}", self.name, mpi.suffix());
        let out = out_dir.join(&name);
        // Compile to a private name, then rename: another test binary may be using `out`.
        let tmp = out_dir.join(format!(".{name}.{}", std::process::id()));
        let language = Language::of(self.source);
        let compiler = mpi.compiler(language);
        let lang_flags: &[&str] = match language {
            Language::Fortran => &["-ffree-line-length-none", "-Wall"],
            Language::C => &["-std=gnu11", "-Wall", "-pthread"],
            Language::Cxx => &["-Wall", "-pthread"],
        };
        let output = Command::new(compiler)
            .args(["-O1", "-g"])
            .args(lang_flags)
            .arg("-o")
            .arg(&tmp)
            .arg(&src)
            // After the source, as wrapper compilers place libraries: with --as-needed a library
            // named before the objects that use it would be dropped.
            .args(self.flags)
            .current_dir(&out_dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
        assert!(
            output.status.success(),
            "{compiler} failed on {}:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::rename(&tmp, &out).expect("rename compiled program");
        out
    }
}

/// `source` built as `name` for `mpi`, linked with the front as a site's compiler wrappers do
/// (`-lmpistat` ahead of the MPI library, found through an rpath to [`library`]'s directory).
/// A program refers to no symbol that only MPICH's library defines (its handles are constants),
/// so with the linker's `--as-needed` (Debian's default) the `-lmpich` that `mpicc.mpich`
/// appends would be dropped: the flags keep it.
pub fn linked_with_front(source: &'static str, name: &'static str, mpi: Mpi) -> PathBuf {
    let dir = library()
        .parent()
        .expect("library directory")
        .display()
        .to_string();
    let keep_mpi = match mpi {
        Mpi::OpenMpi => "-Wl,--as-needed",
        Mpi::Mpich => "-Wl,--no-as-needed",
    };
    let flags: &'static [&'static str] = Box::leak(Box::new([
        Box::leak(format!("-L{dir}").into_boxed_str()) as &str,
        Box::leak(format!("-Wl,-rpath,{dir}").into_boxed_str()),
        keep_mpi,
        "-lmpistat",
    ]));
    Program {
        source,
        name,
        flags,
    }
    .path_for(mpi)
}

/// A C or Fortran program built from `source` alone (named after the source without extension).
pub fn program(source: &'static str) -> PathBuf {
    program_for(source, Mpi::OpenMpi)
}

/// [`program`] built with `mpi`'s compiler wrappers.
pub fn program_for(source: &'static str, mpi: Mpi) -> PathBuf {
    let name = source.rsplit_once('.').map_or(source, |(stem, _)| stem);
    Program {
        source,
        name,
        flags: &[],
    }
    .path_for(mpi)
}

/// One end-to-end test per MPI family: `for_each_mpi! { fn name(mpi) { body } }` makes module
/// `name` with the tests `open_mpi` and `mpich`, each running the body with its [`Mpi`] (so a
/// failure names the family: `basic::mpich`).
#[macro_export]
macro_rules! for_each_mpi {
    ($(#[$meta:meta])* fn $name:ident($mpi:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($mpi: $crate::Mpi) $body

            #[test]
            fn open_mpi() {
                run($crate::Mpi::OpenMpi)
            }

            #[test]
            fn mpich() {
                run($crate::Mpi::Mpich)
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------

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

    /// Launch with `mpi`'s launcher (the program must be built for it, [`Program::path_for`]).
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

// ---------------------------------------------------------------------------------------------
// Expectations on records
// ---------------------------------------------------------------------------------------------

/// A value per rank (index = rank), reduced the way the record reduces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankValues(pub Vec<u64>);

impl RankValues {
    /// The same value on each of `ranks` ranks.
    pub fn uniform(ranks: u32, v: u64) -> RankValues {
        RankValues(vec![v; ranks as usize])
    }

    /// `f(rank)` on each of `ranks` ranks.
    pub fn per_rank(ranks: u32, f: impl Fn(u64) -> u64) -> RankValues {
        RankValues((0..ranks as u64).map(f).collect())
    }

    /// The [`Stat`] of these values: sum, min, max and the lowest rank holding the max.
    pub fn stat(&self) -> Stat {
        let max = self.0.iter().copied().max().unwrap_or(0);
        Stat {
            sum: self.0.iter().sum(),
            min: self.0.iter().copied().min().unwrap_or(0),
            max,
            max_rank: self.0.iter().position(|v| *v == max).unwrap_or(0) as u32,
        }
    }
}

/// The expected numbers of one routine: its calls and bytes as the record reduces them.
#[derive(Clone, Debug)]
pub struct Expected {
    pub name: &'static str,
    pub calls: Stat,
    pub bytes: Stat,
}

impl Expected {
    /// Calls and bytes given per rank (index = rank).
    pub fn per_rank(name: &'static str, calls: RankValues, bytes: RankValues) -> Expected {
        Expected {
            name,
            calls: calls.stat(),
            bytes: bytes.stat(),
        }
    }

    /// `calls` and `bytes` on each of `ranks` ranks alike.
    pub fn uniform(name: &'static str, ranks: u32, calls: u64, bytes: u64) -> Expected {
        Expected::per_rank(
            name,
            RankValues::uniform(ranks, calls),
            RankValues::uniform(ranks, bytes),
        )
    }

    /// The numbers of one rank only, as a partial record written by `rank` holds them.
    pub fn on_rank(name: &'static str, rank: u32, calls: u64, bytes: u64) -> Expected {
        Expected {
            name,
            calls: Stat::single(calls, rank),
            bytes: Stat::single(bytes, rank),
        }
    }
}

/// The record's entry for `name`; panics listing the routines present if it has none.
pub fn routine<'a>(record: &'a JobRecord, name: &str) -> &'a RoutineStats {
    record.routine(name).unwrap_or_else(|| {
        panic!(
            "record has no {name}; it has {:?}",
            record.routines.iter().map(|r| &r.name).collect::<Vec<_>>()
        )
    })
}

/// Assert that `record` has exactly the expected calls and bytes (sum, min, max, rank of max) for
/// every routine of `expected`. A routine expected with 0 calls on every rank must be absent.
pub fn assert_routines(record: &JobRecord, expected: &[Expected]) {
    for e in expected {
        if e.calls.sum == 0 {
            assert!(
                record.routine(e.name).is_none(),
                "{} was never called but is in the record",
                e.name
            );
            continue;
        }
        let r = routine(record, e.name);
        assert_eq!(r.calls, e.calls, "{}: calls", e.name);
        assert_eq!(r.bytes, e.bytes, "{}: bytes", e.name);
    }
}

/// Assert that `record` names no routine outside `expected` and `also_allowed` (e.g. `MPI_Init`,
/// which the program calls but whose counting the tests leave open): the profiler's own MPI
/// traffic, and MPI calling itself, must not show up as the user's calls.
pub fn assert_no_other_routines(record: &JobRecord, expected: &[Expected], also_allowed: &[&str]) {
    let unexpected: Vec<&str> = record
        .routines
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| !expected.iter().any(|e| e.name == *n) && !also_allowed.contains(n))
        .collect();
    assert!(
        unexpected.is_empty(),
        "record has routines the program never called: {unexpected:?}"
    );
}

/// Routines a program calls whose counting the tests leave open (start-up and shut-down).
pub const LIFECYCLE: &[&str] = &[
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Finalize",
    "MPI_Initialized",
    "MPI_Finalized",
];

/// Whether some line of `text` names `routine` followed directly (after white space) by `calls`,
/// as a report's table row does (`MPI_Send      16   ...`).
pub fn has_count_line(text: &str, routine: &str, calls: u64) -> bool {
    let calls = calls.to_string();
    text.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words.windows(2).any(|w| w[0] == routine && w[1] == calls)
    })
}

// ---------------------------------------------------------------------------------------------
// The deterministic program `basic` (C) and its Fortran twins
// ---------------------------------------------------------------------------------------------

/// What `basic.c` and `basic.F90` do on `ranks` ranks (see the sources; both follow the same plan),
/// and what the record counts of it: what each rank sends, and what arrives at its receives
/// (docs/counting.md):
///
/// * ring: each rank sends 3 messages of `100 (r+1)` 4-byte integers to its right neighbour and
///   receives 3 from its left one into a 1000-element buffer (the last with `MPI_STATUS_IGNORE`),
///   plus one `MPI_Send` and one `MPI_Recv` of 50 integers with `MPI_PROC_NULL` (0 bytes);
/// * non-blocking: 2 `MPI_Irecv` posted for 256 doubles each from the right neighbour, which sends
///   `10 (right+1)` doubles to each (the receives count what arrived, at their completion), 2
///   `MPI_Isend` of `10 (r+1)` doubles to the left one, then 2 `MPI_Wait` and 1 `MPI_Waitall`
///   (of 2);
/// * collectives: 3 `MPI_Bcast` of 25 doubles from rank 0, which sends them to every rank (itself
///   included), the others send nothing; 5 `MPI_Allreduce` of 7 integers, each rank's to every
///   rank; 2 `MPI_Barrier`;
/// * 1 `MPI_Comm_rank`, 1 `MPI_Comm_size` and 4 `MPI_Get_count` (checking the statuses).
pub fn basic_expectations(ranks: u32) -> Vec<Expected> {
    let n = ranks as u64;
    let left = |r: u64| (r + n - 1) % n;
    let right = |r: u64| (r + 1) % n;
    vec![
        Expected::per_rank(
            "MPI_Send",
            RankValues::uniform(ranks, 4),
            RankValues::per_rank(ranks, |r| 3 * 100 * (r + 1) * 4),
        ),
        Expected::per_rank(
            "MPI_Recv",
            RankValues::uniform(ranks, 4),
            RankValues::per_rank(ranks, |r| 3 * 100 * (left(r) + 1) * 4),
        ),
        Expected::per_rank(
            "MPI_Irecv",
            RankValues::uniform(ranks, 2),
            RankValues::per_rank(ranks, |r| 2 * 10 * (right(r) + 1) * 8),
        ),
        Expected::per_rank(
            "MPI_Isend",
            RankValues::uniform(ranks, 2),
            RankValues::per_rank(ranks, |r| 2 * 10 * (r + 1) * 8),
        ),
        Expected::uniform("MPI_Wait", ranks, 2, 0),
        Expected::uniform("MPI_Waitall", ranks, 1, 0),
        Expected::per_rank(
            "MPI_Bcast",
            RankValues::uniform(ranks, 3),
            RankValues::per_rank(ranks, |r| if r == 0 { 3 * n * 25 * 8 } else { 0 }),
        ),
        Expected::uniform("MPI_Allreduce", ranks, 5, 5 * n * 7 * 4),
        Expected::uniform("MPI_Barrier", ranks, 2, 0),
        Expected::uniform("MPI_Comm_rank", ranks, 1, 0),
        Expected::uniform("MPI_Comm_size", ranks, 1, 0),
        Expected::uniform("MPI_Get_count", ranks, 4, 0),
    ]
}

/// The stdout line `basic` prints on every rank when all its data checks passed.
pub fn basic_ok_line(rank: u32) -> String {
    format!("basic rank {rank} ok")
}

/// Run `job` bare and then profiled (into `syslogd`): both must succeed and print the same.
/// Returns the profiled run.
pub fn run_compared(job: &Job, syslogd: &Syslogd) -> Outcome {
    let bare = job.bare();
    bare.assert_success();
    let profiled = job.profiled(&syslogd.site_config());
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    profiled
}

/// Each of `ranks` ranks printed its `line(rank)` on stdout.
pub fn assert_every_rank_printed(outcome: &Outcome, ranks: u32, line: impl Fn(u32) -> String) {
    for rank in 0..ranks {
        let line = line(rank);
        assert!(
            outcome.stdout.lines().any(|l| l == line),
            "missing {line:?} in:\n{}",
            outcome.stdout
        );
    }
}

/// Run `basic` (the C program or a Fortran twin) on 4 ranks bare and profiled, and check the
/// whole contract: both exit 0 and print the same (the profiler prints nothing), every rank's data
/// checks passed, and syslog holds exactly one complete record with the exact calls and bytes of
/// [`basic_expectations`] and no other routines, the expected `binding`, 4 ranks, thread level
/// single, no PMPI tool, and plausible times. Returns the record for further checks.
pub fn check_basic_program(
    program: PathBuf,
    binding: mpistat_record::Binding,
    mpi: Mpi,
) -> JobRecord {
    const RANKS: u32 = 4;
    let syslogd = Syslogd::start();
    let profiled = run_compared(&Job::new(&program, RANKS).mpi(mpi), &syslogd);
    assert_every_rank_printed(&profiled, RANKS, basic_ok_line);

    let record = syslogd.single_record();
    assert_eq!(record.ranks, RANKS);
    assert_eq!(record.nodes, 1);
    assert_eq!(record.binding, binding);
    assert_eq!(
        mpistat_record::family::Family::of_library(&record.mpi_library),
        Some(mpi.family()),
        "{}",
        record.mpi_library
    );
    assert_eq!(record.partial, None);
    assert_eq!(record.thread_level, "single");
    assert!(
        !record.user_pmpi_tool,
        "no PMPI tool in this program, but the record says so"
    );
    assert_eq!(
        Path::new(&record.exe),
        program.canonicalize().unwrap(),
        "exe"
    );
    let expected = basic_expectations(RANKS);
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);

    // Times: something was measured, MPI time fits in the wall time, the wall time in the job's.
    assert!(record.mpi_ns.min > 0, "mpi_ns {:?}", record.mpi_ns);
    assert!(record.wall_ns.min > 0, "wall_ns {:?}", record.wall_ns);
    assert!(
        record.mpi_ns.sum <= record.wall_ns.sum,
        "mpi_ns {:?} > wall_ns {:?}",
        record.mpi_ns,
        record.wall_ns
    );
    assert!(
        record.mpi_ns.max <= record.wall_ns.max,
        "mpi_ns {:?} > wall_ns {:?}",
        record.mpi_ns,
        record.wall_ns
    );
    assert!(
        record.wall_ns.max <= profiled.elapsed.as_nanos() as u64,
        "a rank's wall time {:?} exceeds the whole job's {:?}",
        record.wall_ns,
        profiled.elapsed
    );
    assert!(record.start_unix_ms <= record.end_unix_ms);
    let routine_ns: u64 = record.routines.iter().map(|r| r.time_ns.sum).sum();
    assert!(
        routine_ns <= record.mpi_ns.sum,
        "routine times add up to more than the MPI time"
    );

    // Syslog attests who sent the lines: the record's uid must be the sender's.
    let trusted = syslogd.trusted_lines();
    assert!(!trusted.is_empty());
    let uid = format!("uid={} ", record.uid);
    assert!(
        trusted.iter().all(|l| l.starts_with(&uid)),
        "record uid {} but syslog says:\n{}",
        record.uid,
        trusted.join("\n")
    );
    record
}

// ---------------------------------------------------------------------------------------------
// The mpistat command and a real SMTP server
// ---------------------------------------------------------------------------------------------

/// Run the `mpistat` binary (built beside the library) with `args` and `--config config`; its
/// stderr is echoed for the test log.
pub fn mpistat(args: &[&str], config: &Path) -> std::process::Output {
    mpistat_as(None, args, config)
}

/// The `mpistat` binary the tests run (and the profiler starts for `analyze --send`).
pub fn mpistat_binary() -> PathBuf {
    library().with_file_name("mpistat")
}

/// `mpistat analyze ARGS...`: its report (standard output); it must succeed.
pub fn mpistat_analyze<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = Command::new(mpistat_binary())
        .arg("analyze")
        .args(args)
        .output()
        .expect("run mpistat analyze");
    assert!(
        out.status.success(),
        "mpistat analyze failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A real traced job (`delays.c` on `ranks` ranks: a delayed send chain, then barriers after
/// uneven work; `MPISTAT_TRACE=1`, its trace in `home`): what its record says of the trace.
pub fn traced_delays_job(mpi: Mpi, ranks: u32, home: &TempDir) -> mpistat_record::model::TraceInfo {
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for("delays.c", mpi), ranks)
        .mpi(mpi)
        .env("HOME", home.path().display().to_string())
        .env("MPISTAT_TRACE", "1")
        .arg("20")
        .arg("4")
        .arg("2")
        .arg("3")
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    let record = syslogd.single_record();
    record.trace.expect("the record says the job was traced")
}

/// The analysis as an MPI program for `mpi` (`mpistat-analyze`, `mpistat-analyze-mpich`); the
/// tests never build it (`cargo build --release -p mpistat-analyze-mpi -p
/// mpistat-analyze-mpi-mpich`).
pub fn analyze_mpi(mpi: Mpi) -> PathBuf {
    let name = match mpi {
        Mpi::OpenMpi => "mpistat-analyze",
        Mpi::Mpich => "mpistat-analyze-mpich",
    };
    let path = library().with_file_name(name);
    assert!(
        path.is_file(),
        "{} is missing: cargo build --release -p mpistat-analyze-mpi -p mpistat-analyze-mpi-mpich",
        path.display()
    );
    path
}

/// [`mpistat`] as `user` (through `setpriv`), or as the test's own user.
pub fn mpistat_as(user: Option<&User>, args: &[&str], config: &Path) -> std::process::Output {
    let binary = mpistat_binary();
    let mut cmd = match user {
        Some(user) => user.command(&binary),
        None => Command::new(&binary),
    };
    let output = cmd
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    eprintln!(
        "mpistat {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Send `message` with `logger` as a record line (facility `local5`, tag `mpistat`, up to 8192
/// bytes: record lines are up to 7680, and logger cuts at 1 KiB unless told) to `target`,
/// logger's arguments saying where (`["-u", socket]`, or `["-T", "--rfc3164", "-n", host,
/// "-P", port]`), as user `uid` (with its own gid, no other groups: needs root) when given.
pub fn logger(target: &[&str], uid: Option<u32>, message: &str) {
    let mut cmd = Command::new("logger");
    cmd.args(["--size", "8192"]).args(target).args([
        "-p",
        "local5.info",
        "-t",
        "mpistat",
        "--",
        message,
    ]);
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let status = cmd.status().expect("run logger");
    assert!(status.success(), "logger {target:?} as {uid:?} failed");
}

/// Write what rsyslog wrote with the attested uids (the input of `mpistat ingest`) to `path`.
pub fn write_trusted_log(syslogd: &Syslogd, path: &Path) {
    let trusted: String = syslogd
        .trusted_lines()
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(path, trusted).expect("write the trusted log");
}

/// The ISO week of today (UTC), e.g. `2026-W48`, as `mpistat digest --week` takes it.
pub fn this_week() -> String {
    let week = Command::new("date")
        .args(["-u", "+%G-W%V"])
        .output()
        .unwrap();
    String::from_utf8(week.stdout).unwrap().trim().to_string()
}

/// A free TCP port on localhost.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real SMTP server (Debian's python3-aiosmtpd, `digest/tests/smtp_sink.py`) on `port` that
/// stores each mail it gets as a file in `inbox` (its first line `X-Sink-Session: tls=yes|no
/// login=NAME|-`); stopped when dropped.
pub struct SmtpSink {
    child: Child,
    inbox: PathBuf,
}

impl SmtpSink {
    pub fn start(port: u16, inbox: &Path) -> SmtpSink {
        SmtpSink::start_with(port, inbox, &[])
    }

    /// With the sink's options: `--tls CERT KEY` (STARTTLS), `--login USER PASSWORD` (AUTH,
    /// attempts logged in [`SmtpSink::logins`]), `--login-without-tls`.
    pub fn start_with(port: u16, inbox: &Path, options: &[&std::ffi::OsStr]) -> SmtpSink {
        use std::io::BufRead;
        std::fs::create_dir_all(inbox).unwrap();
        let sink = workspace_root().join("digest/tests/smtp_sink.py");
        let mut child = Command::new("/usr/bin/python3")
            .arg(sink)
            .arg(port.to_string())
            .arg(inbox)
            .args(options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3-aiosmtpd (scripts/prereqs.sh installs it)");
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        SmtpSink {
            child,
            inbox: inbox.to_path_buf(),
        }
    }

    /// The mails received, once at least `n` arrived (or after 10 s), then a little longer.
    pub fn mails(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_dir(&self.inbox).unwrap().count() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        std::fs::read_dir(&self.inbox)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect()
    }

    /// The login attempts so far, `NAME PASSWORD tls=yes|no ok|refused` each.
    pub fn logins(&self) -> Vec<String> {
        let mut path = self.inbox.clone().into_os_string();
        path.push(".logins");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Unprivileged users
// ---------------------------------------------------------------------------------------------

/// The set-up of the tests where a traced job's user analyses it and the digest runs as its
/// service user: users `mpistat-alice`, `mpistat-mallory` and `mpistat`, a private rsyslogd whose
/// socket every user can reach, and a temporary directory with `lib/` (the service's state)
/// owned by `mpistat`.
pub struct AnalysisUsers {
    pub alice: User,
    pub mallory: User,
    pub digest: User,
    pub syslogd: Syslogd,
    pub dir: TempDir,
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
        let dir = TempDir::new(name);
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
