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

use mpistat_e2e::relay::{listening, Chain};
use mpistat_e2e::*;
use mpistat_record::JobRecord;
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;

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
        lines
            .iter()
            .filter(|l| l.contains(&job.wire_key()))
            .collect()
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
    let dir = Scratch::new("relay-ingest");
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
            job.wire_key(),
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
