//! Issue 33 §1: the Debian packages, installed and run as a site installs them.
//!
//! `scripts/package.sh --no-build` packages this workspace's release build; a throwaway machine
//! (a copy-on-write view of this host, `tests/src/machine.rs`) gets them with `apt-get install
//! ./….deb`, exactly as README's "How a site deploys it" says, on a single host (jobs and ingest on
//! one machine). There the distribution's own rsyslogd runs with the distribution's own
//! `/etc/rsyslog.conf` (checked unchanged) and the packages' snippet; an unprivileged user made
//! with `useradd` runs MPI jobs of both families through the installed modulefile (`module load
//! mpistat`); the installed ingest unit runs with the privileges it gives (user `mpistat`, as the
//! package made it; `tests/src/units.rs`) and stores every record as its sender's, none rejected.
//! `logrotate -f` with the installed rule rotates the records file while ingest follows it:
//! nothing lost, nothing twice. `apt-get purge` then leaves nothing: no file, no user, no group
//! membership, no rsyslog configuration, and `rsyslogd -N1` stays clean.

use mpistat_e2e::certs::TestCa;
use mpistat_e2e::machine::{Machine, Network};
use mpistat_e2e::units::{ServiceIds, Unit};
use mpistat_e2e::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

const USER: &str = "dplalice";

/// The packages `scripts/package.sh` wrote, built once per test binary from what target/release
/// holds.
fn build_packages() -> Vec<PathBuf> {
    static DEBS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    DEBS.get_or_init(package).clone()
}

fn package() -> Vec<PathBuf> {
    library(); // the release build must exist: the test never builds (it would race the build)
    let started = Instant::now();
    let out = Command::new(workspace_root().join("scripts/package.sh"))
        .arg("--no-build")
        .output()
        .expect("scripts/package.sh");
    assert!(
        out.status.success(),
        "scripts/package.sh: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("packages built in {:.1?}", started.elapsed());
    let dir = workspace_root().join("target/debian");
    let mut debs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("target/debian")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    debs.sort();
    for deb in &debs {
        let size = std::fs::metadata(deb).unwrap().len();
        eprintln!("{}: {} KiB", deb.display(), size / 1024);
    }
    let names: Vec<String> = debs
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for package in ["mpistat_", "mpistat-node_", "mpistat-loghost_"] {
        assert!(
            names.iter().any(|n| n.starts_with(package)),
            "no {package}*.deb in {names:?}"
        );
    }
    debs
}

/// Whether `done` came true within `wait`.
fn within(wait: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + wait;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    true
}

fn wait_for(what: &str, wait: Duration, done: impl FnMut() -> bool) {
    assert!(within(wait, done), "timed out waiting for {what}");
}

/// Stop the ingest service (SIGTERM, as systemctl stop) and return what it said.
fn stop(machine: &Machine, service: std::process::Child) -> String {
    machine.sh("kill -TERM $(cat /run/dpl-ingest.pid)");
    let out = service.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// What the machine's database `db` (as seen from the host) holds, read through the store's
/// read handle from a copy: SQLite resolves the symbolic link `/proc/<pid>/root` in the host's
/// mount namespace, where the machine's files are not.
fn database_of(db: &Path) -> Stored {
    let copy = Scratch::new("package-db");
    let file = copy.path().join("mpistat.db");
    if std::fs::copy(db, &file).is_err() {
        return Stored::default(); // not made yet
    }
    let wal = |p: &Path| PathBuf::from(format!("{}-wal", p.display()));
    let _ = std::fs::copy(wal(db), wal(&file));
    let store = mpistat_store::ReadStore::open(&file).unwrap_or_else(|e| panic!("{e}"));
    Stored {
        uids: store
            .jobs_ended_between(0, i64::MAX as u64)
            .unwrap()
            .into_iter()
            .map(|job| job.uid)
            .collect(),
        rejected: store.rejected().unwrap().len(),
    }
}

/// What a database holds, as the package tests look at it.
#[derive(Debug, Default)]
struct Stored {
    /// The uid of each stored job.
    uids: Vec<u32>,
    /// How many rejected entries.
    rejected: usize,
}

impl Stored {
    fn jobs_of(&self, uid: u32) -> usize {
        self.uids.iter().filter(|u| **u == uid).count()
    }
}

/// `rsyslogd -N1` in the machine: its messages, asserted free of errors and warnings.
fn rsyslog_config_is_clean(machine: &Machine) -> String {
    let out = machine.run("rsyslogd -N1 2>&1");
    let text = out.stdout;
    assert!(
        out.status.success() && !text.contains("error") && !text.contains("warning"),
        "rsyslogd -N1:\n{text}"
    );
    text
}

/// What `id` says of a user in the machine, and the unit's extra groups: who the service runs as.
fn service_ids(machine: &Machine, unit: &Unit) -> ServiceIds {
    let user = unit.value("User").expect("User=");
    let id = |flag: &str| machine.sh(&format!("id {flag} {user}"));
    let mut groups: Vec<u32> = id("-G")
        .split_whitespace()
        .map(|g| g.parse().unwrap())
        .collect();
    for g in unit.values("SupplementaryGroups") {
        let line = machine.sh(&format!("getent group {g}"));
        groups.push(line.trim().split(':').nth(2).unwrap().parse().unwrap());
    }
    ServiceIds {
        uid: id("-u").trim().parse().unwrap(),
        gid: id("-g").trim().parse().unwrap(),
        groups,
    }
}

/// One job of `mpi`'s `basic` program, run by the user through the installed modulefile.
fn job_through_the_module(machine: &Machine, mpi: Mpi, program: &Path) {
    let launcher = match mpi {
        Mpi::OpenMpi => "mpirun.openmpi --oversubscribe -np 2",
        Mpi::Mpich => "mpiexec.mpich -np 2",
    };
    let name = program.file_name().unwrap().to_string_lossy();
    // Copied in, not read where the host has it: the machine's /tmp is its own.
    put(machine, program, &format!("/home/{USER}/{name}"), 0o755);
    machine.sh(&format!("chown {USER} /home/{USER}/{name}"));
    // A login shell, as the user's job script has: /etc/profile.d/modules.sh defines `module`.
    eprintln!("package test: a job of {mpi:?}");
    let out = machine.sh(&format!(
        "timeout -k 5 120 su - {USER} -s /bin/bash -c \
         'module load mpistat && {launcher} ./{name}' 2>&1"
    ));
    assert!(out.contains(&basic_ok_line(0)), "the job said: {out}");
}

/// What other tests may have left on the host (a user `mpistat`; mount points of
/// tests/src/units.rs at the units' paths while such a test runs) removed from the machine: it
/// starts as a fresh host would.
fn fresh_host(machine: &Machine) {
    machine.sh(
        "if getent passwd mpistat >/dev/null; then userdel mpistat; fi; \
         if getent group mpistat >/dev/null; then groupdel mpistat; fi; \
         rm -rf /etc/mpistat /var/lib/mpistat /var/log/mpistat /run/mpistat; \
         if ! dpkg -S /usr/bin/mpistat >/dev/null 2>&1; then rm -f /usr/bin/mpistat; fi",
    );
}

/// Where the packages are copied in a machine (a site copies them onto each host; the
/// workspace itself may lie where the machine has its own tmpfs, e.g. a clone under /tmp).
const DEBS_IN_MACHINE: &str = "/root/mpistat-debs";

/// README's step: `apt-get install ./<deb> ...` where the packages are; apt's output.
fn install(machine: &Machine, debs: &[PathBuf]) -> String {
    let list: Vec<String> = debs
        .iter()
        .map(|deb| {
            let name = deb.file_name().unwrap().to_string_lossy();
            put(machine, deb, &format!("{DEBS_IN_MACHINE}/{name}"), 0o644);
            format!("./{name}")
        })
        .collect();
    machine.sh(&format!(
        "cd {DEBS_IN_MACHINE} && DEBIAN_FRONTEND=noninteractive apt-get install -y {} 2>&1",
        list.join(" ")
    ))
}

/// The packages whose names start with one of `names` (`mpistat_`, `mpistat-node_`, ...).
fn packages(debs: &[PathBuf], names: &[&str]) -> Vec<PathBuf> {
    debs.iter()
        .filter(|p| {
            let file = p.file_name().unwrap().to_string_lossy();
            names.iter().any(|n| file.starts_with(n))
        })
        .cloned()
        .collect()
}

/// The distribution's rsyslogd, as a host without systemd starts it (a daemon with
/// /run/rsyslogd.pid), with the distribution's /etc/rsyslog.conf.
fn start_rsyslogd(machine: &Machine) {
    machine.sh("rsyslogd </dev/null >/dev/null 2>&1");
    wait_for("rsyslog's sockets", Duration::from_secs(10), || {
        machine.path("/run/mpistat-syslog.sock").exists() && machine.path("/dev/log").exists()
    });
}

/// The installed ingest unit's service, run with the privileges it gives. Its pid in the machine
/// is kept for stopping it as systemctl would ([`stop`]).
fn start_ingest(machine: &Machine) -> std::process::Child {
    let unit = Unit::read(&machine.path("/lib/systemd/system/mpistat-ingest.service"));
    assert_eq!(unit.exec_start("")[0], "/usr/bin/mpistat");
    let ids = service_ids(machine, &unit);
    let mut ingest = machine.command("echo $$ > /run/dpl-ingest.pid; exec \"$@\"");
    ingest
        .args(["ingest", "unshare"])
        .args(unit.confined("", &[], &ids));
    ingest
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start ingest")
}

/// The test's lock, its start and the packages; `None` (said on stderr) when not root.
fn set_up() -> Option<(MutexGuard<'static, ()>, Instant, Vec<PathBuf>)> {
    let serial = serial();
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root (namespaces, mounts, apt-get in the machine)");
        return None;
    }
    Some((serial, Instant::now(), build_packages()))
}

#[test]
fn the_packages_install_record_attested_jobs_ingest_them_rotate_and_purge_cleanly() {
    let Some((_serial, started, debs)) = set_up() else {
        return;
    };
    let programs: Vec<(Mpi, PathBuf)> = Mpi::ALL
        .iter()
        .map(|&mpi| (mpi, BASIC.path_for(mpi)))
        .collect();
    let machine = Machine::start(None);
    fresh_host(&machine);
    let debian_conf = std::fs::read("/etc/rsyslog.conf").expect("Debian's /etc/rsyslog.conf");

    eprintln!("package test: installing ({:.1?})", started.elapsed());
    // README step: install the packages (all three: a single host).
    let install = install(&machine, &debs);
    eprintln!("{install}");
    assert_eq!(
        std::fs::read(machine.path("/etc/rsyslog.conf")).unwrap(),
        debian_conf,
        "the package changed the distribution's rsyslog.conf"
    );
    let n1 = rsyslog_config_is_clean(&machine);
    eprintln!("rsyslogd -N1 after install:\n{n1}");
    // What the maintainer scripts made: the user, in adm, and its state directory (others may
    // pass through it to the pages and the escalation list, not list it).
    let groups = machine.sh("id -nG mpistat");
    assert!(groups.split_whitespace().any(|g| g == "adm"), "{groups}");
    let state = machine.sh("stat -c '%U:%G %a' /var/lib/mpistat");
    assert_eq!(state.trim(), "mpistat:mpistat 751");
    // The front and every family's profiler in one directory.
    machine.sh("cd /usr/lib/x86_64-linux-gnu && test -f libmpistat.so && \
                test -f libmpistat_openmpi.so && test -f libmpistat_mpich.so");
    // The Grafana dashboard as shipped, for the site's Grafana (docs/metrics.md).
    assert_eq!(
        std::fs::read(machine.path("/usr/share/mpistat/grafana/mpistat.json")).ok(),
        Some(std::fs::read(workspace_root().join("etc/grafana/mpistat.json")).unwrap()),
        "mpistat-loghost's dashboard"
    );

    eprintln!(
        "package test: starting rsyslogd ({:.1?})",
        started.elapsed()
    );
    start_rsyslogd(&machine);
    machine.sh(&format!("useradd --create-home --shell /bin/bash {USER}"));
    let uid: u32 = machine.sh(&format!("id -u {USER}")).trim().parse().unwrap();

    // README step: `module load mpistat`, and the user's jobs of both families are recorded.
    for (mpi, program) in &programs {
        job_through_the_module(&machine, *mpi, program);
    }
    let records = machine.path("/var/log/mpistat/records.log");
    let decoded = || {
        let text = std::fs::read_to_string(&records).unwrap_or_default();
        mpistat_record::decode(text.lines())
    };
    wait_for("both jobs' records", RECORD_WAIT, || {
        decoded().records.len() == 2
    });
    let text = std::fs::read_to_string(&records).unwrap();
    assert!(
        text.lines()
            .all(|l| l.contains(&format!(" uid={uid} pid="))),
        "every line attested as the user's:\n{text}"
    );
    let mode = machine.sh("stat -c '%U:%G %a' /var/log/mpistat /var/log/mpistat/records.log");
    assert_eq!(mode, "root:adm 750\nroot:adm 640\n");

    eprintln!("package test: ingest ({:.1?})", started.elapsed());
    // README step: the ingest service, as the installed unit runs it.
    let ingest = start_ingest(&machine);
    let db = machine.path("/var/lib/mpistat/mpistat.db");
    let jobs = || database_of(&db).uids.len();
    let stored = |ingest: &mut Option<std::process::Child>, n: usize, what: &str| {
        if !within(Duration::from_secs(60), || jobs() == n) {
            let said = stop(&machine, ingest.take().unwrap());
            panic!(
                "ingest stored {} of {n} jobs ({what}); it said: {said}\nrecords:\n{}",
                jobs(),
                machine.sh("cat /var/log/mpistat/records.log*; ls -la /var/log/mpistat")
            );
        }
    };
    let mut ingest = Some(ingest);
    stored(&mut ingest, 2, "both jobs");

    // logrotate with the installed rule while ingest follows the file, jobs before and after.
    job_through_the_module(&machine, Mpi::OpenMpi, &programs[0].1);
    stored(&mut ingest, 3, "the third job");
    // Each rotation renames the file (the first time to records.log.1, then compressed), and
    // a job ends after it.
    for (jobs_then, (mpi, program), rotated) in [
        (4, &programs[1], "records.log.1"),
        (5, &programs[0], "records.log.2.gz"),
    ] {
        let files = machine.sh("logrotate -f /etc/logrotate.d/mpistat 2>&1; ls /var/log/mpistat");
        assert!(files.contains(rotated), "{files}");
        job_through_the_module(&machine, *mpi, program);
        stored(&mut ingest, jobs_then, "the job after a rotation");
    }
    // A moment more: nothing is stored twice.
    std::thread::sleep(Duration::from_secs(2));
    let said = stop(&machine, ingest.take().unwrap());
    assert_eq!(jobs(), 5, "ingest said: {said}");
    let held = database_of(&db);
    assert_eq!(
        held.rejected,
        0,
        "rejected: {}",
        machine.sh("mpistat ingest --report 2>&1 || true")
    );
    assert_eq!(held.jobs_of(uid), 5);
    // README step: the check, as the service user.
    let report = machine.sh("su -s /bin/sh mpistat -c 'mpistat ingest --report' 2>&1");
    eprintln!("mpistat ingest --report:\n{report}");

    eprintln!("package test: purge ({:.1?})", started.elapsed());
    // README step: purge, and nothing is left.
    // rsyslog stopped: its socket goes, and a job still runs (its record is dropped at once).
    machine.sh("kill $(cat /run/rsyslogd.pid)");
    wait_for(
        "rsyslogd to remove its socket",
        Duration::from_secs(10),
        || !machine.path("/run/mpistat-syslog.sock").exists(),
    );
    job_through_the_module(&machine, Mpi::OpenMpi, &programs[0].1);
    let purge = machine.sh(
        "DEBIAN_FRONTEND=noninteractive apt-get purge -y mpistat mpistat-node mpistat-loghost 2>&1",
    );
    eprintln!("{purge}");
    let left = machine.sh(
        "dpkg -l 'mpistat*' 2>/dev/null | grep '^[a-z][a-z] ' || true; \
         getent passwd mpistat || true; getent group mpistat || true; \
         getent group adm | grep mpistat || true; \
         ls -d /etc/mpistat /etc/rsyslog.d/mpistat.conf /etc/logrotate.d/mpistat \
               /etc/mpich/mpistat-link.conf /var/lib/mpistat /var/log/mpistat \
               /usr/lib/x86_64-linux-gnu/libmpistat* /usr/share/modules/modulefiles/mpistat \
               /usr/lib/mpistat /usr/share/mpistat /lib/systemd/system/mpistat-* 2>/dev/null || true",
    );
    assert_eq!(left, "", "left after purge");
    rsyslog_config_is_clean(&machine);
    eprintln!("the package test took {:.1?}", started.elapsed());
}

/// Copy the host's `file` into the machine as `dest` with `mode` (root's).
fn put(machine: &Machine, file: &Path, dest: &str, mode: u32) {
    let inside = machine.path(dest);
    std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
    std::fs::copy(file, &inside).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A cluster of two: a node with `mpistat` and `mpistat-node`, a log host with `mpistat` and
/// `mpistat-loghost`, each a machine of its own (own files, users, rsyslogd) on one private
/// network. The site's steps of docs/deploy.md ("Single host and cluster"): certificates of a
/// site CA, the one-line value files, the role links. A user's jobs on the node reach the log
/// host over RELP with TLS, attested, and its ingest service stores them as hers.
#[test]
fn a_node_relays_attested_records_to_the_log_host() {
    let Some((_serial, started, debs)) = set_up() else {
        return;
    };
    let certs = Scratch::new("package-certs");
    let ca = TestCa::new(certs.path(), "ca", "mpistat site CA");
    ca.issue("loghost", &["loghost.cluster"]);
    ca.issue("node", &["node1.cluster"]);
    let cert = |name: &str| certs.path().join(name);

    let log_host = Machine::start_on(Some("loghost"), Network::Private);
    let node = Machine::start_on(Some("node1"), Network::Of(&log_host));
    for machine in [&log_host, &node] {
        fresh_host(machine);
        put(machine, &cert("ca.pem"), "/etc/mpistat/tls/ca.pem", 0o644);
    }
    install(
        &log_host,
        &packages(&debs, &["mpistat_", "mpistat-loghost_"]),
    );
    install(&node, &packages(&debs, &["mpistat_", "mpistat-node_"]));

    // The log host: its certificate, the nodes' names, the role; the relay as it names the
    // connection (loopback here: `localhost`) trusted in site.toml.
    put(
        &log_host,
        &cert("loghost.pem"),
        "/etc/mpistat/tls/loghost.pem",
        0o644,
    );
    put(
        &log_host,
        &cert("loghost.key"),
        "/etc/mpistat/tls/loghost.key",
        0o600,
    );
    log_host.sh(
        "printf '%s' '*.cluster' > /etc/mpistat/relay-peers && \
         ln -s /usr/share/mpistat/rsyslog/relay-loghost /etc/mpistat/relay && \
         sed -i 's/^trusted_relays = \\[\\]$/trusted_relays = [\"localhost\"]/' /etc/mpistat/site.toml && \
         grep -q '^trusted_relays = \\[\"localhost\"\\]' /etc/mpistat/site.toml",
    );
    // The node: its certificate, the log host's name (resolved by the site's DNS, here its
    // hosts file), the role.
    put(&node, &cert("node.pem"), "/etc/mpistat/tls/node.pem", 0o644);
    put(&node, &cert("node.key"), "/etc/mpistat/tls/node.key", 0o600);
    node.sh("printf '%s' loghost.cluster > /etc/mpistat/log-host && \
         echo '127.0.0.1 loghost.cluster' >> /etc/hosts && \
         ln -s /usr/share/mpistat/rsyslog/relay-node /etc/mpistat/relay");
    for machine in [&log_host, &node] {
        let n1 = rsyslog_config_is_clean(machine);
        eprintln!("rsyslogd -N1 with a relay role:\n{n1}");
        start_rsyslogd(machine);
    }

    // The same user on both, as a cluster's accounts are.
    node.sh(&format!("useradd --create-home --shell /bin/bash {USER}"));
    let uid: u32 = node.sh(&format!("id -u {USER}")).trim().parse().unwrap();
    log_host.sh(&format!("useradd --uid {uid} --shell /bin/bash {USER}"));
    for mpi in Mpi::ALL {
        job_through_the_module(&node, mpi, &BASIC.path_for(mpi));
    }
    let records = log_host.path("/var/log/mpistat/records.log");
    let relayed = || std::fs::read_to_string(&records).unwrap_or_default();
    assert!(
        within(Duration::from_secs(30), || {
            mpistat_record::decode(relayed().lines()).records.len() == 2
        }),
        "the log host's records:\n{}\nnode's rsyslog:\n{}",
        relayed(),
        node.sh("cat /var/log/syslog")
    );
    assert!(
        relayed()
            .lines()
            .all(|l| l.starts_with("relay=localhost ") && l.contains(&format!(" uid={uid} pid="))),
        "every line relayed and attested:\n{}",
        relayed()
    );

    let ingest = start_ingest(&log_host);
    let db = log_host.path("/var/lib/mpistat/mpistat.db");
    let arrived = within(Duration::from_secs(60), || {
        database_of(&db).jobs_of(uid) == 2
    });
    let said = stop(&log_host, ingest);
    assert!(arrived, "ingest on the log host said: {said}");
    assert_eq!(database_of(&db).rejected, 0, "{said}");
    eprintln!("the relay package test took {:.1?}", started.elapsed());
}
