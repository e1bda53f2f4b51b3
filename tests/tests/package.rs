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

use mpistat_e2e::machine::Machine;
use mpistat_e2e::units::{ServiceIds, Unit};
use mpistat_e2e::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const USER: &str = "dplalice";

/// The packages `scripts/package.sh` wrote, built from what target/release holds.
fn build_packages() -> Vec<PathBuf> {
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

/// `sql`'s count in the machine's database `db` (as seen from the host), read from a copy:
/// SQLite resolves the symbolic link `/proc/<pid>/root` in the host's mount namespace, where the
/// machine's files are not.
fn count(db: &Path, sql: &str) -> i64 {
    let copy = TempDir::new("package-db");
    let file = copy.path().join("mpistat.db");
    if std::fs::copy(db, &file).is_err() {
        return 0; // not made yet
    }
    let wal = |p: &Path| PathBuf::from(format!("{}-wal", p.display()));
    let _ = std::fs::copy(wal(db), wal(&file));
    rusqlite::Connection::open(&file)
        .and_then(|c| c.query_row(sql, [], |r| r.get(0)))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
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
    machine.sh(&format!(
        "install -o {USER} -m 0755 {} /home/{USER}/{name}",
        program.display()
    ));
    // A login shell, as the user's job script has: /etc/profile.d/modules.sh defines `module`.
    eprintln!("package test: a job of {mpi:?}");
    let out = machine.sh(&format!(
        "timeout -k 5 120 su - {USER} -s /bin/bash -c \
         'module load mpistat && {launcher} ./{name}' 2>&1"
    ));
    assert!(out.contains(&basic_ok_line(0)), "the job said: {out}");
}

#[test]
fn the_packages_install_record_attested_jobs_ingest_them_rotate_and_purge_cleanly() {
    let _serial = serial();
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root (namespaces, mounts, apt-get in the machine)");
        return;
    }
    let started = Instant::now();
    let debs = build_packages();
    let programs: Vec<(Mpi, PathBuf)> = Mpi::ALL
        .iter()
        .map(|&mpi| (mpi, BASIC.path_for(mpi)))
        .collect();
    let machine = Machine::start(None);
    // The host may hold what other tests made (a user `mpistat`; mount points of
    // tests/src/units.rs at the units' paths while such a test runs): the machine starts as a
    // fresh host would, without them.
    machine.sh(
        "if getent passwd mpistat >/dev/null; then userdel mpistat; fi; \
         if getent group mpistat >/dev/null; then groupdel mpistat; fi; \
         rm -rf /etc/mpistat /var/lib/mpistat /var/log/mpistat /run/mpistat; \
         if ! dpkg -S /usr/bin/mpistat >/dev/null 2>&1; then rm -f /usr/bin/mpistat; fi",
    );
    let debian_conf = std::fs::read("/etc/rsyslog.conf").expect("Debian's /etc/rsyslog.conf");

    eprintln!("package test: installing ({:.1?})", started.elapsed());
    // README step: install the packages (all three: a single host).
    let list: Vec<String> = debs
        .iter()
        .map(|p| format!("./{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    let install = machine.sh(&format!(
        "cd {} && DEBIAN_FRONTEND=noninteractive apt-get install -y {} 2>&1",
        debs[0].parent().unwrap().display(),
        list.join(" ")
    ));
    eprintln!("{install}");
    assert_eq!(
        std::fs::read(machine.path("/etc/rsyslog.conf")).unwrap(),
        debian_conf,
        "the package changed the distribution's rsyslog.conf"
    );
    let n1 = rsyslog_config_is_clean(&machine);
    eprintln!("rsyslogd -N1 after install:\n{n1}");
    // What the maintainer scripts made: the user, in adm, and its private state directory.
    let groups = machine.sh("id -nG mpistat");
    assert!(groups.split_whitespace().any(|g| g == "adm"), "{groups}");
    let state = machine.sh("stat -c '%U:%G %a' /var/lib/mpistat");
    assert_eq!(state.trim(), "mpistat:mpistat 750");
    // The front and every family's profiler in one directory.
    machine.sh("cd /usr/lib/x86_64-linux-gnu && test -f libmpistat.so && \
                test -f libmpistat_openmpi.so && test -f libmpistat_mpich.so");

    eprintln!(
        "package test: starting rsyslogd ({:.1?})",
        started.elapsed()
    );
    // The distribution's rsyslogd as a host without systemd starts it (daemon, /run/rsyslogd.pid).
    machine.sh("rsyslogd </dev/null >/dev/null 2>&1");
    wait_for("rsyslog's sockets", Duration::from_secs(10), || {
        machine.path("/run/mpistat-syslog.sock").exists() && machine.path("/dev/log").exists()
    });
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
    let unit = Unit::read(&machine.path("/lib/systemd/system/mpistat-ingest.service"));
    assert_eq!(unit.exec_start("")[0], "/usr/bin/mpistat");
    let ids = service_ids(&machine, &unit);
    // The service's pid in the machine, for stopping it as systemctl would (SIGTERM to it).
    let mut ingest = machine.command("echo $$ > /run/dpl-ingest.pid; exec \"$@\"");
    ingest
        .args(["ingest", "unshare"])
        .args(unit.confined("", &[], &ids));
    let ingest = ingest
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start ingest");
    let db = machine.path("/var/lib/mpistat/mpistat.db");
    let jobs = || count(&db, "SELECT count(*) FROM jobs");
    let stored = |ingest: &mut Option<std::process::Child>, n: i64, what: &str| {
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
    let rotated = machine.sh("logrotate -f /etc/logrotate.d/mpistat 2>&1; ls /var/log/mpistat");
    assert!(rotated.contains("records.log.1"), "{rotated}");
    job_through_the_module(&machine, Mpi::Mpich, &programs[1].1);
    wait_for(
        "the job after the rotation",
        Duration::from_secs(60),
        || jobs() == 4,
    );
    let again = machine.sh("logrotate -f /etc/logrotate.d/mpistat 2>&1; ls /var/log/mpistat");
    assert!(again.contains("records.log.2.gz"), "{again}");
    job_through_the_module(&machine, Mpi::OpenMpi, &programs[0].1);
    wait_for(
        "the job after the second rotation",
        Duration::from_secs(60),
        || jobs() == 5,
    );
    // A moment more: nothing is stored twice.
    std::thread::sleep(Duration::from_secs(2));
    let said = stop(&machine, ingest.take().unwrap());
    assert_eq!(jobs(), 5, "ingest said: {said}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM rejected"),
        0,
        "rejected: {}",
        machine.sh("mpistat ingest --report 2>&1 || true")
    );
    assert_eq!(
        count(&db, &format!("SELECT count(*) FROM jobs WHERE uid = {uid}")),
        5
    );
    // README step: the check, as the service user.
    let report = machine.sh("su -s /bin/sh mpistat -c 'mpistat ingest --report' 2>&1");
    eprintln!("mpistat ingest --report:\n{report}");

    eprintln!("package test: purge ({:.1?})", started.elapsed());
    // README step: purge, and nothing is left.
    machine.sh("kill $(cat /run/rsyslogd.pid)");
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
