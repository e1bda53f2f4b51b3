//! A private `rsyslogd` that records the profiler's lines ([`Syslogd`]), the site config that
//! points a job at it, and lines sent as other programs send them (`logger`).

use crate::workspace::read_lines;
use mpistat_record::model::JobRecord;
use mpistat_record::{AnalysisRecord, Decoded};
use mpistat_testkit::scratch::Scratch;
use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long [`Syslogd::records`] waits for records to show up in the log file.
pub const RECORD_WAIT: Duration = Duration::from_secs(10);
/// How long [`Syslogd::wait_for_analysis`] waits: the analysis runs detached at the lowest
/// priority after the job, on a machine the other tests keep busy.
pub const ANALYSIS_WAIT: Duration = Duration::from_secs(300);

/// A private `rsyslogd`: its own config, socket, work dir and output file in a temp directory.
///
/// The socket (`log.sock`) takes no rate limiting; messages of the configured facility go raw to
/// `messages.log` as `<rfc3339 time> <host> <tag><msg>` (what [`Syslogd::lines`] returns and the
/// decoder reads). The same messages go to `trusted.log` prefixed with the sender's uid, pid and
/// gid as attested by the kernel (imuxsock trusted properties), see [`Syslogd::trusted_lines`].
/// The daemon is stopped when this value is dropped.
pub struct Syslogd {
    dir: Scratch,
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
        let dir = Scratch::new("syslogd");
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

/// Write what rsyslog wrote with the attested uids (the input of `mpistat ingest`) to `path`,
/// once that file has every line the plain one has: rsyslog writes the two in separate actions,
/// and a test that waited for a record in the plain lines ingested the attested file one line
/// short (`analysis_privileges`, in CI).
pub fn write_trusted_log(syslogd: &Syslogd, path: &Path) {
    let seen = syslogd.lines().len();
    let lines = syslogd.poll_for(
        &format!("the attested log to have the plain log's {seen} lines"),
        RECORD_WAIT,
        |_| Some(syslogd.trusted_lines()).filter(|trusted| trusted.len() >= seen),
    );
    let trusted: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, trusted).expect("write the trusted log");
}
