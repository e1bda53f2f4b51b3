//! `mpistat serve` attacked by a local user: `srv-mallory` (made with `useradd`) runs
//! `tests/bin/serve-attacker.py` against the server, which runs as the service user `srv-svc`,
//! on TCP with bearer tokens (any local user can connect) and on the Unix socket with the proxy
//! header (`srv-mallory` in the proxy's group `srv-web`, as a compromised proxy account would
//! be). The attacks: 512 MiB without a newline on one connection, 256 MiB of header fields,
//! 2,000 idle connections held 15 s, 600 connections sending their request one byte a second.
//! Meanwhile an authorised client's requests are all answered (200), and the server's memory
//! and thread count stay bounded; the figures are printed (`--nocapture`).

use mpistat_e2e::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SERVICE: &str = "srv-svc";
const ATTACKER: &str = "srv-mallory";
const PROXY_GROUP: &str = "srv-web";
/// The admin's token (TCP) and login (both).
const ADMIN_TOKEN: &str = "srv-admin-token-0123456789";
const ADMIN: &str = "srv-admin";
/// The most memory (peak resident set) and threads the server may have under any attack: its
/// own four workers and the connections' thread (plus slack), and its page cache and buffers.
const MAX_RSS_KIB: u64 = 96 * 1024;
const MAX_THREADS: u64 = 8;

#[derive(Clone, Debug)]
enum Target {
    Tcp(u16),
    Unix(PathBuf),
}

impl Target {
    fn arg(&self) -> String {
        match self {
            Target::Tcp(port) => format!("127.0.0.1:{port}"),
            Target::Unix(path) => format!("unix:{}", path.display()),
        }
    }

    fn connect(&self) -> std::io::Result<Box<dyn ReadWrite>> {
        let timeout = Some(Duration::from_secs(30));
        Ok(match self {
            Target::Tcp(port) => {
                let s = std::net::TcpStream::connect(("127.0.0.1", *port))?;
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)?;
                Box::new(s)
            }
            Target::Unix(path) => {
                let s = UnixStream::connect(path)?;
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)?;
                Box::new(s)
            }
        })
    }

    /// `GET path` with `headers`: the status (an error if none came in 30 s).
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> std::io::Result<u16> {
        let mut stream = self.connect()?;
        let mut request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for (name, value) in headers {
            request += &format!("{name}: {value}\r\n");
        }
        stream.write_all(format!("{request}\r\n").as_bytes())?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let text = String::from_utf8_lossy(&response);
        text.get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no status in {text:?}")))
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// The group `name` with `members` (made with `groupadd`/`usermod` when missing): its gid.
fn ensure_group(name: &str, members: &[&User]) -> u32 {
    let _ = Command::new("groupadd").args(["-f", name]).status();
    for user in members {
        let _ = Command::new("usermod")
            .args(["-a", "-G", name, &user.name])
            .status();
    }
    let out = Command::new("getent")
        .args(["group", name])
        .output()
        .unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    line.trim().split(':').nth(2).unwrap().parse().unwrap()
}

/// `program` as `user` with the supplementary group `gid`.
fn as_user_in_group(user: &User, gid: u32, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={}", user.uid))
        .arg(format!("--regid={}", user.gid))
        .arg(format!("--groups={gid}"))
        .arg("--")
        .arg(program);
    cmd
}

/// Resident memory (KiB) and threads of process `pid` now.
fn usage(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("Threads:")?))
}

/// The most memory and threads process `pid` had while `during` ran (sampled every 20 ms).
fn peak_usage<T>(pid: u32, during: impl FnOnce() -> T) -> (T, u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut rss, mut threads) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                if let Some((r, t)) = usage(pid) {
                    rss = rss.max(r);
                    threads = threads.max(t);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (rss, threads)
        })
    };
    let result = during();
    stop.store(true, Ordering::Relaxed);
    let (rss, threads) = sampler.join().unwrap();
    (result, rss, threads)
}

/// The server as the service user, killed on drop.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The attack: its arguments to the attacker script and how long it may take at most.
struct Attack {
    name: &'static str,
    args: &'static [&'static str],
    /// Whether it holds connections (then the authorised client asks once they are open).
    holds: bool,
}

const ATTACKS: [Attack; 4] = [
    Attack {
        name: "512 MiB without a newline",
        args: &["flood", "512"],
        holds: false,
    },
    Attack {
        name: "256 MiB of header fields",
        args: &["fields", "256"],
        holds: false,
    },
    Attack {
        name: "2000 idle connections",
        args: &["idle", "2000", "15"],
        holds: true,
    },
    Attack {
        name: "600 connections, a byte a second",
        args: &["slow", "600", "15"],
        holds: true,
    },
];

#[test]
fn serve_keeps_answering_while_a_local_user_attacks_it() {
    let _serial = serial();
    let Some(service) = User::ensure(SERVICE) else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let attacker = User::ensure(ATTACKER).unwrap();
    let proxy_gid = ensure_group(PROXY_GROUP, &[&service, &attacker]);
    let dir = Scratch::new("serve-attack");
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = d.join("state");
    std::fs::create_dir(&state).unwrap();
    service.own(&state);
    let script = d.join("serve-attacker.py");
    std::fs::copy(
        workspace_root().join("tests/bin/serve-attacker.py"),
        &script,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The tokens file as docs/admin-guide.md says: root's, readable by the service's group only.
    let tokens = d.join("tokens");
    std::fs::write(&tokens, format!("{ADMIN} {ADMIN_TOKEN}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&tokens, Some(0), Some(service.gid)).unwrap();

    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let modes = [
        (
            "TCP, tokens",
            Target::Tcp(free_port()),
            format!(
                "auth = \"token\"\ntokens_file = {:?}\n",
                tokens.display().to_string()
            ),
            ("Authorization", bearer.as_str()),
        ),
        (
            "Unix socket, proxy header",
            Target::Unix(state.join("serve.sock")),
            format!("socket_group = {PROXY_GROUP:?}\n"),
            ("REMOTE_USER", ADMIN),
        ),
    ];
    let mut figures = Vec::new();
    for (mode, target, serve_settings, credential) in &modes {
        let config = d.join("site.toml");
        std::fs::write(
            &config,
            format!(
                "[database]\npath = {:?}\n[serve]\nadmins = [{ADMIN:?}]\n{serve_settings}",
                state.join("mpistat.db").display().to_string()
            ),
        )
        .unwrap();
        // The database is made by the write side (serve only reads), as an admin would.
        let migrated = as_user_in_group(&service, proxy_gid, mpistat_binary())
            .args(["db", "migrate", "--config"])
            .arg(&config)
            .status()
            .unwrap();
        assert!(migrated.success(), "mpistat db migrate");
        let log = std::fs::File::create(d.join("serve.log")).unwrap();
        let child = as_user_in_group(&service, proxy_gid, mpistat_binary())
            .args(["serve", "--listen", &target.arg(), "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut server = Server { child };
        let ask = || target.get("/?period=2026-W47", &[*credential]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while ask().is_err() {
            assert!(server.child.try_wait().unwrap().is_none(), "serve ended");
            assert!(Instant::now() < deadline, "serve does not answer");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(ask().unwrap(), 200);
        assert_eq!(target.get("/", &[]).unwrap(), 401);
        let (rss, threads) = usage(pid).unwrap();
        figures.push(format!(
            "{mode}: at rest: {rss} KiB resident, {threads} threads"
        ));

        for attack in &ATTACKS {
            let ((said, answers), rss, threads) = peak_usage(pid, || {
                let mut child = as_user_in_group(&attacker, proxy_gid, &script)
                    .arg(target.arg())
                    .args(attack.args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .unwrap();
                let mut out = BufReader::new(child.stdout.take().unwrap());
                let mut said = String::new();
                if attack.holds {
                    out.read_line(&mut said).unwrap();
                    assert!(said.starts_with("ready"), "{said}");
                } else {
                    // Let the flood start.
                    std::thread::sleep(Duration::from_millis(300));
                }
                // The authorised client, while it goes on.
                let answers: Vec<(std::io::Result<u16>, Duration)> = (0..5)
                    .map(|_| {
                        let start = Instant::now();
                        let status = ask();
                        let took = start.elapsed();
                        std::thread::sleep(Duration::from_millis(200));
                        (status, took)
                    })
                    .collect();
                out.read_to_string(&mut said).unwrap();
                assert!(
                    child.wait().unwrap().success(),
                    "the attacker failed: {said}"
                );
                (said, answers)
            });
            let slowest = answers.iter().map(|(_, t)| *t).max().unwrap();
            figures.push(format!(
                "{mode}: {}: peak {rss} KiB resident, {threads} threads; the admin's 5 requests: \
                 {:?}, slowest {slowest:.2?}; attacker: {}",
                attack.name,
                answers
                    .iter()
                    .map(|(s, _)| s.as_ref().map_err(|e| e.kind()))
                    .collect::<Vec<_>>(),
                said.trim().replace('\n', "; ")
            ));
            eprintln!("{}", figures.last().unwrap());
            for (status, _) in &answers {
                assert!(
                    matches!(status, Ok(200)),
                    "{mode}, {}: the admin got {status:?}",
                    attack.name
                );
            }
            assert!(rss <= MAX_RSS_KIB, "{}", figures.last().unwrap());
            assert!(threads <= MAX_THREADS, "{}", figures.last().unwrap());
            assert!(server.child.try_wait().unwrap().is_none(), "serve ended");
        }
        drop(server);
        eprintln!(
            "serve said:\n{}",
            std::fs::read_to_string(d.join("serve.log")).unwrap()
        );
    }
    eprintln!("\n{}", figures.join("\n"));
}

/// `cat path` as `user` (with the supplementary group `gid`): whether it could read it.
fn can_read(user: &User, gid: u32, path: &Path) -> bool {
    as_user_in_group(user, gid, "cat")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// `mpistat args --config config` as `user` in group `gid`, under systemd's default umask 0022.
fn mpistat_with_umask_0022(user: &User, gid: u32, args: &[&str], config: &Path) -> Child {
    let mut setpriv = as_user_in_group(user, gid, mpistat_binary());
    setpriv.args(args).arg("--config").arg(config);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "umask 022 && exec \"$@\"", "sh"])
        .arg(setpriv.get_program())
        .args(setpriv.get_args())
        .stdin(Stdio::null());
    cmd.spawn().unwrap()
}

/// With systemd's default umask (0022), the database (and its `-wal` and `-shm` while the server
/// has it open) is the service's alone, and the static pages are the service's and the web
/// server's group's (`[site_report] group`): another local user reads none of them. A database
/// an older mpistat left 0644 is made 0600 when opened.
#[test]
fn the_database_and_pages_are_private_whatever_the_umask() {
    let _serial = serial();
    let Some(service) = User::ensure(SERVICE) else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let alice = User::ensure("srv-alice").unwrap();
    let eve = User::ensure("srv-eve").unwrap();
    let www = User::ensure("srv-www").unwrap();
    let web_gid = ensure_group(PROXY_GROUP, &[&service, &www]);
    let dir = Scratch::new("serve-modes");
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    // As systemd's StateDirectory= makes it: the service's, mode 0755.
    let state = d.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    service.own(&state);

    // Alice's job record, sent by her through a real rsyslogd.
    let syslogd = Syslogd::start();
    let end_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let record = mpistat_record::JobRecord {
        job_id: "4711".into(),
        uid: alice.uid,
        user: alice.name.clone(),
        exe: "/home/srv-alice/secret-project/solver".into(),
        host: "node1".into(),
        pid: 4242,
        ranks: 2,
        nodes: 1,
        start_unix_ms: end_ms - 60_000,
        end_unix_ms: end_ms,
        ..Default::default()
    };
    let lines = mpistat_record::wire::encode(&record);
    for line in &lines {
        logger(
            &["-u", syslogd.socket().to_str().unwrap()],
            Some(alice.uid),
            line,
        );
    }
    syslogd.wait_for_lines(|l| l.len() >= lines.len());
    let log = d.join("records.log");
    write_trusted_log(&syslogd, &log);
    let config = d.join("site.toml");
    let db = state.join("mpistat.db");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {:?}\n[site_report]\ngroup = {PROXY_GROUP:?}\n\
             [serve]\nsocket_group = {PROXY_GROUP:?}\n",
            db.display().to_string()
        ),
    )
    .unwrap();

    let run = |args: &[&str]| {
        let status = mpistat_with_umask_0022(&service, web_gid, args, &config)
            .wait()
            .unwrap();
        assert!(status.success(), "mpistat {args:?}");
    };
    run(&["ingest", log.to_str().unwrap()]);
    let week = this_week();
    let site = state.join("site/{period}");
    run(&[
        "site-report",
        "--week",
        &week,
        "--out",
        site.to_str().unwrap(),
    ]);

    // The server holds the database open: its -wal and -shm are there.
    let socket = state.join("serve.sock");
    let listen = format!("unix:{}", socket.display());
    let mut serve =
        mpistat_with_umask_0022(&service, web_gid, &["serve", "--listen", &listen], &config);
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(&socket).is_err() {
        assert!(serve.try_wait().unwrap().is_none(), "serve ended");
        assert!(Instant::now() < deadline, "serve does not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    let database_files = ["", "-wal", "-shm"].map(|s| state.join(format!("mpistat.db{s}")));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    for file in &database_files {
        let (m, readers) = (mode(file), [&eve, &www].map(|u| can_read(u, web_gid, file)));
        eprintln!(
            "{}: mode {m:o}; read by srv-eve, srv-www: {readers:?}",
            file.display()
        );
        assert_eq!(m, 0o600, "{}", file.display());
        assert_eq!(readers, [false, false], "{}", file.display());
    }
    let _ = serve.kill();
    let _ = serve.wait();

    let pages = state.join(format!("site/{week}"));
    let index = pages.join("users.html");
    assert!(std::fs::read_to_string(&index)
        .unwrap()
        .contains("srv-alice"));
    let mut checked = 0;
    for path in walk(&state.join("site")) {
        let meta = std::fs::metadata(&path).unwrap();
        let expected = if meta.is_dir() { 0o750 } else { 0o640 };
        assert_eq!(mode(&path), expected, "{}", path.display());
        assert_eq!(
            meta.gid(),
            web_gid,
            "{} is the web server's group's",
            path.display()
        );
        checked += 1;
    }
    eprintln!("{checked} pages and directories: 0640/0750, group {PROXY_GROUP}");
    assert!(!can_read(&eve, eve.gid, &index), "srv-eve reads the pages");
    assert!(
        can_read(&www, web_gid, &index),
        "the web server cannot read the pages"
    );

    // A database an older mpistat left open to everyone is closed when next opened.
    for file in &database_files[..1] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    run(&["ingest", log.to_str().unwrap()]);
    assert_eq!(mode(&db), 0o600);
    assert!(!can_read(&eve, eve.gid, &db));
}

/// Every file and directory below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}
