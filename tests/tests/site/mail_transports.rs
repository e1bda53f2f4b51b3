//! Issue 33 §2: mail that leaves the host as sites send it, through real servers.
//!
//! - A relay (Debian's aiosmtpd, `mail/tests/smtp_sink.py`) with STARTTLS and a certificate of
//!   a CA the test makes: `mpistat digest --send` delivers through the system's trust store
//!   (`SSL_CERT_FILE` naming a bundle with the CA: the host's store is left alone) and through
//!   `smtp_ca_file`, and refuses a certificate of a CA nobody named, loudly, delivering nothing.
//! - `opportunistic` verifies a relay's certificate and, on loopback, does not start TLS; a relay
//!   name is made to point at 127.0.0.1 by an `/etc/hosts` of the digest's own mount namespace.
//! - A password never crosses a connection without TLS unless the site allows it.
//! - The host's real Postfix, as Debian installs it ("Local only", its self-signed certificate):
//!   the shipped digest unit (`tests/src/units.rs` emulates its privileges) delivers to a local
//!   user's mailbox through `sendmail` with the shipped drop-in, and through SMTP with the shipped
//!   defaults; without the drop-in postdrop hangs and the digest stops it, failing the mails for
//!   the next run. Postfix is started for each of these tests and stopped at its end.

use mpistat_testkit::synthetic;

use mpistat_e2e::certs::{Issued, TestCa};
use mpistat_e2e::units::Unit;
use mpistat_e2e::*;
use mpistat_figures::week::IsoWeek;
use mpistat_ingest::{accounts::Table, run_once, Options};
use mpistat_site::SiteConfig;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The week of `synthetic::week_47_database`: five users, one mail each.
const WEEK: &str = "2026-W47";
const USERS: usize = 5;
/// A relay's name, pointed at 127.0.0.1 by the digest's own `/etc/hosts`.
const RELAY: &str = "relay.mpistat.test";

/// A database of week 47 in a directory of its own.
struct Site {
    dir: Scratch,
    db: PathBuf,
}

impl Site {
    fn new(label: &str) -> Site {
        let dir = Scratch::new(label);
        synthetic::week_47_database(dir.path());
        let db = dir.path().join("db.sqlite");
        Site { dir, db }
    }

    /// `mpistat digest --send` of the week with `[mail]` settings `mail`, the environment `env`
    /// (nothing else of the test's about certificates), and a relay name that resolves to
    /// 127.0.0.1 when `relay_name` (an `/etc/hosts` mounted in a private mount namespace). What it
    /// said on standard error, `Err` when it failed.
    fn send(&self, mail: &str, env: &[(&str, &Path)], relay_name: bool) -> Result<String, String> {
        let config = self.dir.path().join("site.toml");
        std::fs::write(
            &config,
            format!(
                "[database]\npath = {:?}\n[mail]\nrecipient = \"{{user}}@example.org\"\n{mail}",
                self.db
            ),
        )
        .unwrap();
        let binary = mpistat_binary();
        let args = ["digest", "--send", "--week", WEEK, "--config"];
        let mut cmd = if relay_name {
            let hosts = self.dir.path().join("hosts");
            std::fs::write(
                &hosts,
                format!("127.0.0.1 localhost {RELAY}\n::1 localhost\n"),
            )
            .unwrap();
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
                .arg(hosts)
                .arg(binary);
            cmd
        } else {
            Command::new(binary)
        };
        cmd.args(args).arg(&config);
        cmd.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
        for (name, value) in env {
            cmd.env(name, value);
        }
        let out = cmd.output().expect("run mpistat digest");
        eprintln!("digest with {mail:?} {env:?}:");
        outcome(&out)
    }
}

/// What a digest said on standard error (echoed for the test's log), `Err` when it failed.
fn outcome(out: &Output) -> Result<String, String> {
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{said}");
    if out.status.success() {
        Ok(said)
    } else {
        Err(said)
    }
}

/// The sink's options for STARTTLS with `certificate`.
fn tls(certificate: &Issued) -> Vec<&OsStr> {
    vec![
        OsStr::new("--tls"),
        certificate.certificate.as_os_str(),
        certificate.key.as_os_str(),
    ]
}

fn count_with(mails: &[String], session: &str) -> usize {
    mails
        .iter()
        .filter(|m| m.starts_with(&format!("X-Sink-Session: {session}\r\n")))
        .count()
}

/// The relay's certificate comes from the site's CA: delivered (and logged in over TLS) when the
/// CA is in the trust store the system's TLS uses, or named by `smtp_ca_file`; refused with a
/// clear error and nothing delivered while the CA is unknown, or another CA is named.
#[test]
fn starttls_to_a_relay_certified_by_the_sites_ca() {
    let certs = Scratch::new("mail-ca-certs");
    let ca = TestCa::new(certs.path(), "site-ca", "mpistat test site CA");
    let relay = ca.issue("relay", &["localhost", RELAY, "127.0.0.1"]);
    let stranger = TestCa::new(certs.path(), "other-ca", "someone else's CA");
    let bundle = ca.bundle_with_system_cas(&certs.path().join("bundle.pem"));
    let password = certs.path().join("password");
    std::fs::write(&password, "secret\n").unwrap();
    let port = free_port();
    let mut options = tls(&relay);
    options.extend(["--login", "mal", "secret"].map(OsStr::new));
    let sink = SmtpSink::start_with(port, &certs.path().join("inbox"), &options);
    let mail = format!(
        "transport = \"smtp\"\nsmtp_host = \"localhost\"\nsmtp_port = {port}\n\
         smtp_starttls = \"required\"\nsmtp_user = \"mal\"\nsmtp_password_file = {password:?}\n"
    );

    let site = Site::new("mail-ca");
    // The host's store does not know the site's CA (the test never adds it there).
    let error = site.send(&mail, &[], false).unwrap_err();
    assert_eq!(
        error.matches("not sent (will retry)").count(),
        USERS,
        "{error}"
    );
    assert!(
        error.contains("invalid peer certificate: UnknownIssuer"),
        "{error}"
    );
    assert!(
        error.contains("must be signed by a CA of the system's trust store"),
        "{error}"
    );
    // Another CA named both ways: still refused.
    let stranger = stranger.certificate();
    let with_stranger = format!("{mail}smtp_ca_file = {stranger:?}\n");
    let error = site
        .send(&with_stranger, &[("SSL_CERT_FILE", &stranger)], false)
        .unwrap_err();
    assert!(error.contains("UnknownIssuer"), "{error}");
    assert!(sink.mails(0).is_empty(), "a mail crossed an unverified TLS");
    assert!(
        sink.logins().is_empty(),
        "a password crossed an unverified TLS"
    );

    // The CA in the system's store (SSL_CERT_FILE): the failed mails go out on the next run.
    let start = Instant::now();
    site.send(&mail, &[("SSL_CERT_FILE", &bundle)], false)
        .unwrap();
    let took = start.elapsed();
    assert_eq!(count_with(&sink.mails(USERS), "tls=yes login=mal"), USERS);
    eprintln!(
        "measured: {USERS} mails by SMTP with STARTTLS and login (aiosmtpd): {:.2} s",
        took.as_secs_f64()
    );

    // The CA named by the site's setting, nothing in the environment.
    let other = Site::new("mail-ca-file");
    let with_ca = format!("{mail}smtp_ca_file = {:?}\n", ca.certificate());
    other.send(&with_ca, &[], false).unwrap();
    assert_eq!(
        count_with(&sink.mails(2 * USERS), "tls=yes login=mal"),
        2 * USERS
    );
    assert!(
        sink.logins().iter().all(|l| l == "mal secret tls=yes ok"),
        "{:?}",
        sink.logins()
    );
}

/// The default `opportunistic`: to a relay's name, a certificate that does not verify fails the
/// mail (never a silent fall-back), one that does is used; to localhost (a stock local Postfix
/// with its self-signed certificate) no TLS is started and the mail is delivered.
#[test]
fn opportunistic_starttls_verifies_a_relay_and_stays_local_on_loopback() {
    let certs = Scratch::new("mail-opportunistic-certs");
    let ca = TestCa::new(certs.path(), "site-ca", "mpistat test site CA");
    let relay = ca.issue("relay", &["localhost", RELAY, "127.0.0.1"]);
    let bundle = ca.bundle_with_system_cas(&certs.path().join("bundle.pem"));
    let port = free_port();
    let sink = SmtpSink::start_with(port, &certs.path().join("inbox"), &tls(&relay));

    let local = Site::new("mail-loopback");
    local
        .send(
            &format!("transport = \"smtp\"\nsmtp_port = {port}\n"),
            &[],
            false,
        )
        .unwrap();
    assert_eq!(count_with(&sink.mails(USERS), "tls=no login=-"), USERS);

    let remote = Site::new("mail-relay");
    let mail = format!("transport = \"smtp\"\nsmtp_host = \"{RELAY}\"\nsmtp_port = {port}\n");
    let error = remote.send(&mail, &[], true).unwrap_err();
    assert!(
        error.contains("STARTTLS if offered, certificate verified")
            && error.contains("UnknownIssuer"),
        "{error}"
    );
    assert_eq!(sink.mails(USERS).len(), USERS, "nothing more delivered");
    remote
        .send(&mail, &[("SSL_CERT_FILE", &bundle)], true)
        .unwrap();
    assert_eq!(count_with(&sink.mails(2 * USERS), "tls=yes login=-"), USERS);
}

/// A server that offers AUTH without TLS (as a careless one does): the login is refused before
/// anything is sent, both with `off` (at start) and `opportunistic` (STARTTLS becomes required),
/// until the site sets `smtp_allow_plaintext_login`.
#[test]
fn a_password_never_crosses_a_connection_without_tls_unless_allowed() {
    let dir = Scratch::new("mail-login");
    let password = dir.path().join("password");
    std::fs::write(&password, "secret\n").unwrap();
    let port = free_port();
    let options = ["--login", "mal", "secret", "--login-without-tls"].map(OsStr::new);
    let sink = SmtpSink::start_with(port, &dir.path().join("inbox"), &options);
    let mail = format!(
        "transport = \"smtp\"\nsmtp_port = {port}\nsmtp_user = \"mal\"\n\
         smtp_password_file = {password:?}\n"
    );
    let site = Site::new("mail-login-site");

    let error = site
        .send(&format!("{mail}smtp_starttls = \"off\"\n"), &[], false)
        .unwrap_err();
    assert!(
        error.contains("the password would cross the network in clear")
            && error.contains("smtp_allow_plaintext_login = true"),
        "{error}"
    );

    let error = site.send(&mail, &[], false).unwrap_err();
    assert!(
        error.contains("STARTTLS required because of the login")
            && error.contains("STARTTLS is not supported"),
        "{error}"
    );
    assert!(sink.logins().is_empty(), "{:?}", sink.logins());
    assert!(sink.mails(0).is_empty());

    let allowed = format!("{mail}smtp_allow_plaintext_login = true\n");
    site.send(&allowed, &[], false).unwrap();
    assert_eq!(count_with(&sink.mails(USERS), "tls=no login=mal"), USERS);
    assert!(sink.logins().iter().all(|l| l == "mal secret tls=no ok"));
}

// ---------------------------------------------------------------------------------------------
// The host's Postfix
// ---------------------------------------------------------------------------------------------

/// The host's Postfix (Debian's package, "Local only"), started for a test and stopped at its end.
struct Postfix {
    started: bool,
}

impl Postfix {
    fn start() -> Postfix {
        assert!(
            Path::new("/usr/sbin/postfix").exists(),
            "Postfix is missing: run scripts/prereqs.sh"
        );
        let running = Command::new("postfix")
            .arg("status")
            .output()
            .is_ok_and(|o| o.status.success());
        if !running {
            let out = Command::new("postfix").arg("start").output().unwrap();
            assert!(out.status.success(), "postfix start: {out:?}");
        }
        Postfix { started: !running }
    }
}

impl Drop for Postfix {
    fn drop(&mut self) {
        if self.started {
            let _ = Command::new("postfix").arg("stop").output();
        }
    }
}

/// What a Postfix test has: the host's Postfix to itself (the other test of this binary waits),
/// running, and the empty mailbox of the local user `malpost`. Fields drop in order: the mailbox
/// is removed and Postfix stopped before the next test may start it.
struct PostfixTest {
    mailbox: Mailbox,
    _postfix: Postfix,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl PostfixTest {
    /// `None` (said on stderr) when not root.
    fn start() -> Option<PostfixTest> {
        let serial = serial();
        let Some(recipient) = User::ensure("malpost") else {
            eprintln!("SKIPPED: needs root to make users");
            return None;
        };
        let postfix = Postfix::start();
        Some(PostfixTest {
            mailbox: Mailbox::of(&recipient),
            _postfix: postfix,
            _serial: serial,
        })
    }
}

/// A local user's mailbox as Postfix's local delivery writes it; emptied at the start and end.
struct Mailbox(PathBuf);

impl Mailbox {
    fn of(user: &User) -> Mailbox {
        let path = Path::new("/var/mail").join(&user.name);
        let _ = std::fs::remove_file(&path);
        Mailbox(path)
    }

    fn delivered(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.0).unwrap_or_default();
        text.split("\nFrom ")
            .filter(|m| m.contains("\nSubject: mpistat: your MPI jobs in week "))
            .map(str::to_string)
            .collect()
    }

    /// The mails delivered once `n` are (or after 60 s).
    fn wait_for(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.delivered().len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.delivered()
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The digest service's state directory in `dir`: a database of the last complete week with one
/// job of each of `users` users, given to the service's user.
fn state_of_last_week(dir: &Path, label: &str, users: u64, service: &User) -> PathBuf {
    let state = dir.join(label);
    std::fs::create_dir(&state).unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let (monday, _) = IsoWeek::last_complete(now_ms).range_ms();
    let shift = |ms: u64| ms + monday - synthetic::WEEK_47_START_MS;
    let records: Vec<_> = synthetic::jobs_of_many_users(users, users)
        .map(|mut r| {
            r.start_unix_ms = shift(r.start_unix_ms);
            r.end_unix_ms = shift(r.end_unix_ms);
            r
        })
        .collect();
    let log = dir.join(format!("{label}.log"));
    synthetic::append_log(&log, &records);
    let names: Vec<(String, u32)> = (0..users)
        .map(|u| (format!("user{u}"), 2000 + u as u32))
        .collect();
    let mut db = mpistat_store::WriteStore::open(&state.join("mpistat.db")).unwrap();
    let options = Options {
        accounts: Some(std::sync::Arc::new(Table::new(
            names.iter().map(|(n, u)| (n.as_str(), *u)),
        ))),
        ..Options::from_site(vec![log], &SiteConfig::default())
    };
    run_once(&mut db, &options, &mut Vec::new()).unwrap();
    assert_eq!(db.job_count().unwrap(), users);
    drop(db);
    service.own(&state);
    state
}

/// The site's configuration: `[mail]` settings `mail`, readable by the service.
fn site_toml(dir: &Path, mail: &str) -> PathBuf {
    let path = dir.join("site.toml");
    std::fs::write(
        &path,
        format!("[mail]\nrecipient = \"malpost@localhost\"\n{mail}"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

/// A directory the service's user can enter.
fn open_temp_dir(label: &str) -> Scratch {
    let dir = Scratch::new(label);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Run the digest `unit` with the site's `config` and `state` (at most 5 minutes): its
/// [`outcome`] and how long it took.
fn run_digest(unit: &Unit, config: &Path, state: &Path) -> (Result<String, String>, Duration) {
    let binary = mpistat_binary();
    let command = unit.exec_start("")[0].clone();
    let site: Vec<(&str, &Path)> = vec![
        (&command, &binary),
        ("/etc/mpistat/site.toml", config),
        ("/var/lib/mpistat", state),
    ];
    let start = Instant::now();
    let out = unit
        .run_within("", &site, Duration::from_secs(300))
        .expect("the digest service ended within 5 minutes");
    let took = start.elapsed();
    eprintln!("digest service:");
    (outcome(&out), took)
}

/// Processes named `name` of user `user` still running (zombies are dead: the test machine's
/// init may reap them late).
fn running(name: &str, user: &User) -> Vec<String> {
    let out = Command::new("ps")
        .args(["-o", "pid=,stat=,comm=", "-u", &user.name])
        .output()
        .expect("ps (procps)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            fields.get(2) == Some(&name) && !fields[1].starts_with('Z')
        })
        .map(str::to_string)
        .collect()
}

/// `transport = "sendmail"` through Debian's Postfix under the shipped digest unit. Without the
/// drop-in, postdrop cannot write the queue and retries for ever: the digest stops it after
/// `sendmail_timeout_seconds`, and the mails fail for the next run. With the drop-in they are
/// delivered to the local user's mailbox.
#[test]
fn postfix_sendmail_under_the_shipped_digest_unit() {
    let Some(postfix) = PostfixTest::start() else {
        return;
    };
    let mailbox = &postfix.mailbox;
    let dir = open_temp_dir("mail-sendmail");
    let d = dir.path();
    let bare = Unit::shipped("mpistat-digest.service");
    let service = bare.user();
    let config = site_toml(
        d,
        "transport = \"sendmail\"\nsendmail_timeout_seconds = 3\n",
    );
    let state = state_of_last_week(d, "var-lib-mpistat", 2, &service);

    let error = run_digest(&bare, &config, &state).0.unwrap_err();
    assert_eq!(
        error
            .matches("/usr/sbin/sendmail did not finish within 3 s and was stopped")
            .count(),
        2,
        "{error}"
    );
    assert!(error.contains("postdrop: warning: mail_queue_enter: create file maildrop/"));
    assert!(error.contains("0 sent, 0 sent before, 2 failed"), "{error}");
    assert_eq!(
        running("postdrop", &service),
        Vec::<String>::new(),
        "postdrop left running"
    );
    assert!(mailbox.delivered().is_empty());

    let unit = Unit::shipped_with("mpistat-digest.service", "postfix-sendmail.conf");
    let said = run_digest(&unit, &config, &state).0.unwrap();
    assert!(said.contains("2 sent, 0 sent before, 0 failed"), "{said}");
    let mails = mailbox.wait_for(2);
    assert_eq!(mails.len(), 2, "{mails:?}");
    assert!(mails.iter().all(|m| m.contains("\nTo: malpost@localhost")));

    let users = 50;
    let many = state_of_last_week(d, "many", users, &service);
    let (outcome, took) = run_digest(&unit, &config, &many);
    outcome.unwrap();
    assert_eq!(
        mailbox.wait_for(2 + users as usize).len(),
        2 + users as usize
    );
    eprintln!(
        "measured: digest of {users} mails through Postfix's sendmail (service run): {:.2} s",
        took.as_secs_f64()
    );
}

/// The shipped defaults but `transport = "smtp"` (localhost:25, STARTTLS opportunistic) against
/// Debian's Postfix, which offers STARTTLS with its self-signed snakeoil certificate: delivered,
/// under the shipped unit as it is (SMTP needs no drop-in).
#[test]
fn the_shipped_smtp_defaults_deliver_to_stock_postfix() {
    let Some(postfix) = PostfixTest::start() else {
        return;
    };
    let offers = Command::new("postconf")
        .args(["-h", "smtpd_tls_security_level"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&offers.stdout).trim(), "may");
    let mailbox = &postfix.mailbox;
    let dir = open_temp_dir("mail-postfix-smtp");
    let unit = Unit::shipped("mpistat-digest.service");
    let users = 50;
    let state = state_of_last_week(dir.path(), "var-lib-mpistat", users, &unit.user());
    let config = site_toml(dir.path(), "transport = \"smtp\"\n");
    let (outcome, took) = run_digest(&unit, &config, &state);
    outcome.unwrap();
    assert_eq!(mailbox.wait_for(users as usize).len(), users as usize);
    eprintln!(
        "measured: digest of {users} mails by SMTP to Postfix (service run): {:.2} s",
        took.as_secs_f64()
    );
}
