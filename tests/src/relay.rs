//! The relay chain of a cluster with a central log host, with real rsyslogds running the
//! shipped configuration (`etc/rsyslog.d/mpistat.conf` with the relay roles of
//! `etc/rsyslog/relay-node/` and `relay-loghost/`; changed only: paths, ports, the log host's
//! address, and the heartbeat and retry intervals, 1 s): a "compute" one reading a private socket with trusted properties (and, as a site might,
//! a plain TCP input), forwarding over RELP with TLS and a client certificate on 127.0.0.1 to a
//! "log host" one (which also has a plain syslog port). Certificates come from `openssl` into a
//! temporary directory.

use crate::certs::TestCa;
use crate::rsyslog::{shipped_rsyslog_config, RsyslogDaemon};
use crate::syslogd::{write_site_config, RECORD_WAIT};
use crate::workspace::{free_port, read_lines, workspace_root};
use mpistat_record::JobRecord;
use mpistat_testkit::scratch::Scratch;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether something listens on TCP `port` (read from /proc: connecting would be a connection
/// the daemon logs).
pub fn listening(port: u16) -> bool {
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
pub struct Chain {
    pub dir: Scratch,
    pub compute: RsyslogDaemon,
    pub log_host: RsyslogDaemon,
    /// The compute node's extra plain TCP input.
    pub compute_tcp: u16,
    /// The log host's RELP (TLS) port and its plain syslog port.
    pub relp: u16,
    pub plain: u16,
}

impl Chain {
    pub fn start() -> Chain {
        let dir = Scratch::new("relay");
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

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("log.sock")
    }

    pub fn log(&self) -> PathBuf {
        self.dir.path().join("records.log")
    }

    /// The log host's file.
    pub fn lines(&self) -> Vec<String> {
        read_lines(&self.log())
    }

    /// Wait until the log host's file holds a record satisfying `pred`; return it.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&JobRecord) -> bool) -> JobRecord {
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
    pub fn job_site(&self) -> PathBuf {
        write_site_config(self.dir.path(), &self.socket(), "local5")
    }

    /// Open a RELP session on the log host's TLS port with `openssl s_client` (with a client
    /// certificate `cert` of the test's, or none) and send `message` (a syslog message of
    /// facility local5). Returns whether the TLS handshake succeeded.
    pub fn relp_send(&self, cert: Option<&str>, message: &str) -> bool {
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
