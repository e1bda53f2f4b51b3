//! The site as shipped: rsyslogd with `etc/rsyslog.d/mpistat.conf`, unchanged, after the host's
//! own global settings (Debian's `/etc/rsyslog.conf`: file owner, group and modes), the configuration
//! `etc/site.toml` unchanged at `/etc/mpistat/site.toml`, and every service of `systemd/` run
//! with the privileges its unit gives (user `mpistat`, no homes, a read-only system but its state
//! directory; see `tests/src/units.rs`). A user's real job is recorded, ingested by the ingest
//! service, mailed by the digest service, listed by the site-report service and served by the
//! serve service to the proxy's group only.

use mpistat_e2e::rsyslog::{host_rsyslog_globals, RsyslogDaemon};
use mpistat_e2e::units::Unit;
use mpistat_e2e::*;
use mpistat_record::wire;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Where the shipped units expect the command (the `mpistat` package installs it there).
const COMMAND: &str = "/usr/bin/mpistat";
const ONE_WEEK_MS: u64 = 7 * 24 * 3600 * 1000;

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The jobs stored in `db` (0 while it is not made yet), read through the store's read handle.
fn jobs_in(db: &Path) -> u64 {
    mpistat_store::ReadStore::open(db)
        .and_then(|store| store.job_count())
        .unwrap_or(0)
}

/// `GET path` on the serve socket as user `uid`/`gid` (the proxy), with `REMOTE_USER: root`:
/// curl's exit status and the HTTP status line.
fn get_as(uid: u32, gid: u32, socket: &Path, path: &str) -> (bool, String) {
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args(["--clear-groups", "--", "curl", "-sS", "-o", "/dev/null"])
        .args([
            "-w",
            "%{http_code}",
            "-H",
            "REMOTE_USER: root",
            "--unix-socket",
        ])
        .arg(socket)
        .arg(format!("http://localhost/{path}"))
        .output()
        .expect("run curl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_shipped_services_ingest_mail_list_and_serve_a_users_job() {
    let _serial = serial();
    let Some(alice) = User::ensure("mpistat-alice") else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let dir = Scratch::new("units");
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Syslog as shipped: the snippet unchanged, after the host's global settings. The daemon
    // sees the test's directories as /run (its socket) and /var/log (the records file), where
    // the services see /var/log/mpistat too.
    let (rsyslogd, socket, records_log) =
        RsyslogDaemon::shipped_single_host(d, &host_rsyslog_globals());
    let var_log = d.join("var-log");

    // Alice's job, profiled as every job is (the jobs' configuration names the private socket).
    let jobs_site = write_site_config(d, &socket, "local5");
    std::fs::set_permissions(&jobs_site, std::fs::Permissions::from_mode(0o644)).unwrap();
    Job::new(program("basic.c"), 2)
        .as_user(&alice)
        .profiled(&jobs_site)
        .assert_success();
    let decoded = || {
        let text = std::fs::read_to_string(&records_log).unwrap_or_default();
        mpistat_record::decode(text.lines())
    };
    wait_for("the job's record in records.log", || {
        decoded().records.len() == 1
    });
    // Her record once more as if her job had ended a week ago (the weekly mail covers the last
    // complete week), sent by her: the kernel attests her uid as for the real one.
    let mut last_week = decoded().records.remove(0);
    last_week.start_unix_ms -= ONE_WEEK_MS;
    last_week.end_unix_ms -= ONE_WEEK_MS;
    for line in wire::encode(&last_week) {
        logger(&["-u", socket.to_str().unwrap()], Some(alice.uid), &line);
    }

    // The services, each as its unit says, with the shipped site.toml.
    let site_toml = workspace_root().join("etc/site.toml");
    let state = d.join("var-lib-mpistat");
    std::fs::create_dir(&state).unwrap();
    let run_dir = d.join("run-mpistat");
    std::fs::create_dir(&run_dir).unwrap();
    let binary = mpistat_binary();
    let records_dir = var_log.join("mpistat");
    let site: Vec<(&str, &Path)> = vec![
        (COMMAND, &binary),
        ("/etc/mpistat/site.toml", &site_toml),
        ("/var/log/mpistat", &records_dir),
        ("/var/lib/mpistat", &state),
        ("/run/mpistat", &run_dir),
    ];
    let ingest = Unit::shipped("mpistat-ingest.service");
    assert_eq!(ingest.exec_start("")[0], COMMAND);
    let service = ingest.start("", &site);
    let db = state.join("mpistat.db");
    let deadline = Instant::now() + Duration::from_secs(60);
    while jobs_in(&db) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = service.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let listing = Command::new("ls")
        .arg("-la")
        .arg(&records_dir)
        .output()
        .unwrap();
    assert_eq!(
        jobs_in(&db),
        2,
        "the ingest service stored {} of 2 jobs; it said: {stderr}\nrecords:\n{}",
        jobs_in(&db),
        String::from_utf8_lossy(&listing.stdout)
    );
    assert!(!stderr.contains("rror"), "ingest: {stderr}");

    let digest = Unit::shipped("mpistat-digest.service");
    let out = digest.run("", &site);
    assert!(
        out.status.success(),
        "digest: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mails: Vec<_> = std::fs::read_dir(state.join("mail"))
        .expect("the mail directory")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        mails.iter().any(|m| m.ends_with("-mpistat-alice.eml")),
        "mails: {mails:?}"
    );
    // Private to the service under systemd's default umask (0022): a mail tells a user's jobs.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state.join("mail")), 0o700);
    for mail in &mails {
        assert_eq!(mode(&state.join("mail").join(mail)), 0o600, "{mail}");
    }

    let report = Unit::shipped("mpistat-site-report@.service");
    let out = report.run("week", &site);
    assert!(
        out.status.success(),
        "site-report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site_dir = state.join("site");
    let period = std::fs::read_dir(&site_dir)
        .expect("the site directory")
        .next()
        .expect("one period")
        .unwrap()
        .path();
    let users = std::fs::read_to_string(period.join("users.html")).expect("users.html");
    assert!(users.contains("mpistat-alice"), "{users}");

    let serve = Unit::shipped("mpistat-serve.service");
    let service = serve.start("", &site);
    let sock = run_dir.join("serve.sock");
    wait_for("the serve socket", || sock.exists());
    // The proxy (group www-data) may open it; a user may not.
    let www = (33, 33);
    let (ok, status) = get_as(www.0, www.1, &sock, "index.html");
    assert!(ok && status == "200", "as www-data: {status}");
    let (ok, _) = get_as(alice.uid, alice.gid, &sock, "index.html");
    assert!(!ok, "alice reached the serve socket");
    drop(service);
    drop(rsyslogd);
}
