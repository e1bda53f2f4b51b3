//! Issue 13, item 1 end to end with real parts: records relayed from a compute node to a central
//! log host with the sender still attested.
//!
//! Two private rsyslogds run the shipped configuration (`etc/rsyslog.d/mpistat.conf` with the
//! relay roles of `etc/rsyslog/relay-node/` and `relay-loghost/`; changed only: paths, ports, the
//! log host's address, and the heartbeat and retry intervals, 1 s): a "compute" one reading a private socket with trusted
//! properties (and, as a site might, a plain TCP input), forwarding over RELP with TLS and a
//! client certificate on 127.0.0.1 to a "log host" one (which also has a plain syslog port).
//! Certificates come from `openssl` into a temporary directory. Real MPI jobs of root and of `nobody` end on the compute node; forgers
//! try every path there is: a record claiming root's uid sent by nobody through the relay, one
//! sent unannotated through the compute node's TCP input, one sent to the log host's plain
//! port, and RELP connections to the log host without a certificate and with a self-signed one.
//! `mpistat ingest` of the log host's file (trusting the relay) stores the real jobs, credited
//! to their users, and rejects the first three as forged, each with its reason; the RELP
//! connections never get a line into the file. The log host is stopped while two jobs end and
//! started again: the compute node keeps the unacknowledged records and delivers them.

use mpistat_e2e::certs::TestCa;
use mpistat_e2e::rsyslog::{shipped_rsyslog_config, RsyslogDaemon};
use mpistat_e2e::*;
use mpistat_record::JobRecord;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

/// Whether something listens on TCP `port` (read from /proc: connecting would be a connection
/// the daemon logs).
fn listening(port: u16) -> bool {
    let port = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        let table = std::fs::read_to_string(table).unwrap_or_default();
        table.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3 && fields[1].ends_with(&port) && fields[3] == "0A"
        })
    })
}

/// The shipped relay role `role` (`etc/rsyslog/<role>/`) with `changes`, as a directory in `dir`
/// the base snippet includes from (its path, with a trailing `/`).
fn relay_role(dir: &Path, role: &str, changes: &[(&str, &str)]) -> String {
    let out = dir.join(role);
    std::fs::create_dir_all(&out).unwrap();
    for file in ["defs.conf", "route.conf"] {
        let shipped = workspace_root().join("etc/rsyslog").join(role).join(file);
        let mut text = std::fs::read_to_string(&shipped).unwrap();
        for (from, to) in changes {
            text = text.replace(from, to);
        }
        std::fs::write(out.join(file), text).unwrap();
    }
    format!("{}/", out.display())
}

/// A site value file as the docs say to write one (no trailing newline); its path.
fn write_value(dir: &Path, name: &str, value: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value).unwrap();
    path.display().to_string()
}

/// A site CA, a certificate it signs for `loghost.cluster` and one for `node1.cluster`, and a
/// self-signed `node1.cluster` one (a forger's), as `<name>.pem` and `<name>.key` in `dir`.
fn certificates(dir: &Path) {
    let ca = TestCa::new(dir, "ca", "mpistat test CA");
    TestCa::new(dir, "rogue", "node1.cluster");
    ca.issue("loghost", &["loghost.cluster"]);
    ca.issue("node", &["node1.cluster"]);
}

/// The relay chain: a compute node's rsyslogd forwarding to a log host's.
struct Chain {
    dir: TempDir,
    compute: RsyslogDaemon,
    log_host: RsyslogDaemon,
    /// The compute node's extra plain TCP input.
    compute_tcp: u16,
    /// The log host's RELP (TLS) port and its plain syslog port.
    relp: u16,
    plain: u16,
}

impl Chain {
    fn start() -> Chain {
        let dir = TempDir::new("relay");
        let d = dir.path();
        let certs = d.join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        certificates(&certs);
        let certs = format!("{}/", certs.display());
        let (relp, plain, compute_tcp) = (free_port(), free_port(), free_port());
        let (relp_s, plain_s, tcp_s) =
            (relp.to_string(), plain.to_string(), compute_tcp.to_string());
        // The log host, with DNS off so that the relay is named by its address, and a plain
        // syslog port as log hosts have for everything else.
        let certs_dir = certs.as_str();
        let log_host_role = relay_role(
            d,
            "relay-loghost",
            &[
                ("/etc/mpistat/tls/", certs_dir),
                ("port=\"2514\"", &format!("port=\"{relp}\"")),
                (
                    "/etc/mpistat/relay-peers",
                    &write_value(d, "relay-peers", "*.cluster"),
                ),
            ],
        );
        let log_host = shipped_rsyslog_config(
            "mpistat.conf",
            &[
                (
                    "/run/mpistat-syslog.sock",
                    &d.join("loghost.sock").display().to_string(),
                ),
                (
                    "/var/log/mpistat/records.log",
                    &d.join("records.log").display().to_string(),
                ),
                ("/etc/mpistat/relay/", &log_host_role),
            ],
        );
        let log_host = format!(
            "global(net.enableDNS=\"off\")\nmodule(load=\"imuxsock\" SysSock.Use=\"off\")\n\
             module(load=\"imtcp\")\ninput(type=\"imtcp\" port=\"{plain_s}\")\n{log_host}"
        );
        let mut log_host = RsyslogDaemon::start(d, "loghost", &log_host);
        log_host.wait_until("the log host's ports", || {
            listening(relp) && listening(plain)
        });
        // The compute node: its socket is private, it has a plain TCP input too, and it sends
        // a heartbeat and retries every second instead of every minute and every ten seconds.
        let socket = d.join("log.sock").display().to_string();
        let node_role = relay_role(
            d,
            "relay-node",
            &[
                ("/etc/mpistat/tls/", certs_dir),
                (
                    "target=`cat /etc/mpistat/log-host` port=\"2514\"",
                    &format!("target=\"127.0.0.1\" port=\"{relp_s}\""),
                ),
                (
                    "/etc/mpistat/log-host",
                    &write_value(d, "log-host", "loghost.cluster"),
                ),
                (
                    "action.resumeInterval=\"10\"",
                    "action.resumeInterval=\"1\"",
                ),
                ("interval=\"60\"", "interval=\"1\""),
            ],
        );
        let compute = shipped_rsyslog_config(
            "mpistat.conf",
            &[
                ("/run/mpistat-syslog.sock", &socket),
                (
                    "/var/log/mpistat/records.log",
                    &d.join("compute-records.log").display().to_string(),
                ),
                ("/etc/mpistat/relay/", &node_role),
            ],
        );
        let compute = format!(
            "module(load=\"imuxsock\" SysSock.Use=\"off\")\nmodule(load=\"imtcp\")\n\
             input(type=\"imtcp\" port=\"{tcp_s}\")\n{compute}"
        );
        let mut compute = RsyslogDaemon::start(d, "compute", &compute);
        let sock = PathBuf::from(&socket);
        compute.wait_until("the compute node's socket and port", || {
            sock.exists() && listening(compute_tcp)
        });
        // nobody runs jobs and may use the socket.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        Chain {
            dir,
            compute,
            log_host,
            compute_tcp,
            relp,
            plain,
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("log.sock")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("records.log")
    }

    /// The log host's file.
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.log())
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Wait until the log host's file holds a record satisfying `pred`; return it.
    fn wait_for(&self, what: &str, pred: impl Fn(&JobRecord) -> bool) -> JobRecord {
        let deadline = Instant::now() + RECORD_WAIT;
        loop {
            let lines = self.lines();
            let decoded = mpistat_record::decode(lines.iter().map(String::as_str));
            if let Some(record) = decoded.records.into_iter().find(&pred) {
                return record;
            }
            assert!(
                Instant::now() < deadline,
                "no record {what} on the log host.\nlog host:\n{}\ncompute:\n{}\nlines:\n{}",
                self.log_host.errors(),
                self.compute.errors(),
                lines.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A site config for jobs on the compute node (readable by nobody).
    fn job_site(&self) -> PathBuf {
        write_site_config(self.dir.path(), &self.socket(), "local5")
    }

    /// Open a RELP session on the log host's TLS port with `openssl s_client` (with a client
    /// certificate `cert` of the test's, or none) and send `message` (a syslog message of
    /// facility local5). Returns whether the TLS handshake succeeded.
    fn relp_send(&self, cert: Option<&str>, message: &str) -> bool {
        let certs = self.dir.path().join("certs");
        let mut cmd = Command::new("openssl");
        cmd.args(["s_client", "-quiet", "-connect"])
            .arg(format!("127.0.0.1:{}", self.relp))
            .current_dir(&certs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(name) = cert {
            cmd.args(["-CAfile", "ca.pem", "-cert"])
                .arg(format!("{name}.pem"))
                .arg("-key")
                .arg(format!("{name}.key"));
        }
        let mut child = cmd.spawn().expect("openssl s_client");
        let frame = |txnr: u32, command: &str, data: &str| {
            format!("{txnr} {command} {} {data}\n", data.len())
        };
        let open = "relp_version=0\nrelp_software=mpistat-test\ncommands=syslog";
        let mut stdin = child.stdin.take().unwrap();
        // The session is refused or answered; either way, the reply (or end) is read below.
        let _ = stdin.write_all(frame(1, "open", open).as_bytes());
        let _ = stdin.write_all(frame(2, "syslog", message).as_bytes());
        let mut stdout = child.stdout.take().unwrap();
        // Wait for the answer to the syslog command ("2 rsp 6 200 OK") or the end.
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        let answered = loop {
            use std::io::Read;
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break false,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if String::from_utf8_lossy(&seen).contains("2 rsp 6 200 OK") {
                break true;
            }
        };
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        answered
    }
}

/// A syslog message (facility local5, RFC 5424) as a forger writes it: `uid=` and all.
fn forged_message(text: &str) -> String {
    format!("<174>1 2026-11-24T10:00:00Z node1 mpistat - - - uid=0 pid=1 {text}")
}

fn hostname() -> String {
    let out = Command::new("hostname").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn report(config: &Path, log: &Path) -> String {
    assert!(mpistat(&["ingest", log.to_str().unwrap()], config)
        .status
        .success());
    let out = mpistat(&["ingest", "--report"], config);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn records_are_relayed_attested_forgeries_rejected_and_nothing_lost_in_a_restart() {
    let _serial = serial();
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to run jobs as nobody");
        return;
    }
    let mut chain = Chain::start();
    let site = chain.job_site();
    let basic = program("basic.c");

    // Real jobs of root and of nobody.
    Job::new(&basic, 2).profiled(&site).assert_success();
    let root = chain.wait_for("of root", |r| r.uid == 0);
    Job::new(&basic, 2)
        .as_user(&User::nobody())
        .profiled(&site)
        .assert_success();
    let nobody = chain.wait_for("of nobody", |r| r.uid == NOBODY);
    assert_eq!(nobody.user, "nobody");

    // nobody sends root's record (another job id) through the relay: attested as nobody's.
    let socket = chain.socket();
    let socket = socket.to_str().unwrap();
    let send = |record: &JobRecord, target: &[&str], uid| {
        for message in mpistat_record::encode(record) {
            logger(target, uid, &message);
        }
    };
    let claims_root = JobRecord {
        job_id: "claims-root-by-nobody".into(),
        ..root.clone()
    };
    send(&claims_root, &["-u", socket], Some(NOBODY));
    // Someone sends one to the compute node's TCP input: relayed, but unattested.
    let unannotated = JobRecord {
        job_id: "unannotated-through-the-relay".into(),
        ..root.clone()
    };
    let compute_tcp = chain.compute_tcp.to_string();
    let tcp = |port| ["-T", "--rfc3164", "-n", "127.0.0.1", "-P", port];
    send(&unannotated, &tcp(&compute_tcp), None);
    // And one straight to the log host's plain syslog port, a uid= in front of the record.
    let direct = JobRecord {
        job_id: "direct-to-the-log-host".into(),
        ..root.clone()
    };
    let plain = chain.plain.to_string();
    for message in mpistat_record::encode(&direct) {
        logger(&tcp(&plain), None, &format!("uid=0 pid=1 {message}"));
    }
    // RELP to the log host without a certificate, and with a self-signed one of a node's name:
    // the TLS handshake fails, nothing is written. With the node's key it works: the key is
    // what a relay is (this line has no record, so ingest passes over it).
    let no_certificate = forged_message("MPISTAT-less line without a certificate");
    assert!(!chain.relp_send(None, &no_certificate));
    let self_signed = forged_message("MPISTAT-less line with a self-signed certificate");
    assert!(!chain.relp_send(Some("rogue"), &self_signed));
    let control = forged_message("MPISTAT-less line with the node's key");
    assert!(chain.relp_send(Some("node"), &control));
    for job in [&claims_root, &unannotated, &direct] {
        chain.wait_for(&job.job_id, |r| r.job_id == job.job_id);
    }

    // The log host stops while a job ends: the compute node keeps the record and delivers it
    // when the log host is back.
    chain.log_host.stop();
    Job::new(&basic, 3).profiled(&site).assert_success();
    Job::new(&basic, 4)
        .as_user(&User::nobody())
        .profiled(&site)
        .assert_success();
    chain.log_host.run();
    let relp = chain.relp;
    chain
        .log_host
        .wait_until("the log host's port after the restart", || listening(relp));
    let after_restart = chain.wait_for("of the job that ended while the log host was down", |r| {
        r.uid == 0 && r.ranks == 3
    });
    assert_eq!(after_restart.user, "root");
    let nobody_after = chain.wait_for("of nobody's job that ended while it was down", |r| {
        r.uid == NOBODY && r.ranks == 4
    });

    // What the log host wrote: real lines from the relay, with this node's name and the
    // attestation; the forgers' lines as they came.
    let lines = chain.lines();
    let of = |job: &JobRecord| -> Vec<&String> {
        lines.iter().filter(|l| l.contains(&job.key())).collect()
    };
    let host = hostname();
    for (job, uid) in [
        (&root, 0),
        (&nobody, NOBODY),
        (&after_restart, 0),
        (&nobody_after, NOBODY),
        (&claims_root, NOBODY),
    ] {
        let attested = format!(" {host} uid={uid} pid=");
        assert!(!of(job).is_empty());
        assert!(
            of(job)
                .iter()
                .all(|l| l.starts_with("relay=127.0.0.1 ") && l.contains(&attested)),
            "{:#?}",
            of(job)
        );
    }
    let unattested = format!(" {host} uid= pid= mpistat: MPISTAT");
    assert!(of(&unannotated)
        .iter()
        .all(|l| l.starts_with("relay=127.0.0.1 ") && l.contains(&unattested)));
    assert!(of(&direct)
        .iter()
        .all(|l| l.starts_with("unrelayed=127.0.0.1 ")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("relay=127.0.0.1 ") && l.contains("with the node's key")));
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("without a certificate") || l.contains("self-signed")),
        "{lines:#?}"
    );
    let errors = chain.log_host.errors();
    assert!(errors.matches("handshake").count() >= 2, "{errors}");

    // Ingest on the log host, trusting the relay.
    let dir = TempDir::new("relay-ingest");
    let log = chain.log();
    let trusting = dir.path().join("trusting.toml");
    std::fs::write(
        &trusting,
        format!(
            "[database]\npath = {:?}\n[ingest]\ntrusted_relays = [\"127.0.0.1\"]\n",
            dir.path().join("trusting.db").display().to_string()
        ),
    )
    .unwrap();
    let text = report(&trusting, &log);
    assert!(text.contains("jobs stored: 4\n"), "{text}");
    // The RELP session may have resent parts it had no answer for: duplicates, never lost.
    let rejected = text.lines().find(|l| l.starts_with("rejected: ")).unwrap();
    assert!(rejected.contains("forged 3"), "{text}");
    let forged = |job: &JobRecord, suffix: &str, detail: &str| {
        let line = format!(
            "forged      {}/{suffix}  {}: job {}: {detail}\n",
            job.key(),
            log.display(),
            job.job_id
        );
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    };
    forged(
        &claims_root,
        "uid 65534",
        "claims uid 0 (root) but uid 65534 sent it (relayed by 127.0.0.1)",
    );
    forged(
        &unannotated,
        "unattested",
        "claims uid 0 (root); relayed by 127.0.0.1 without an attested sender",
    );
    forged(
        &direct,
        "unrelayed",
        "claims uid 0 (root); came from 127.0.0.1 without an authenticated relay",
    );
    // Credited to their users: root's two jobs (2 and 3 ranks), nobody's two (2 and 4).
    let week = this_week();
    for (user, jobs) in [("root", "2 (2-3 ranks)"), ("nobody", "2 (2-4 ranks)")] {
        let out = mpistat(&["digest", "--week", &week, "--user", user], &trusting);
        let mail = String::from_utf8_lossy(&out.stdout);
        assert!(mail.contains(jobs), "{user}: {jobs:?} not in {mail}");
    }

    // A log host that trusts other relays believes none of these.
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        format!(
            "[database]\npath = {:?}\n[ingest]\ntrusted_relays = [\"10.*\", \"node*.cluster\"]\n",
            dir.path().join("other.db").display().to_string()
        ),
    )
    .unwrap();
    let text = report(&other, &log);
    assert!(text.contains("jobs stored: 0\n"), "{text}");
    assert!(text.contains("forged 7"), "{text}");
    assert_eq!(
        text.matches("relayed by 127.0.0.1, not a trusted relay")
            .count(),
        6,
        "{text}"
    );
}
