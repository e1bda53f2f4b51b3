//! Several log hosts, one PostgreSQL (issue 35 §2): three `mpistat ingest` processes, each on a
//! log host of its own (its own UTS namespace and host name, as each cluster's log host is a
//! machine of its own) and its own syslog file, write into one database at once. The three
//! files begin alike (a job every relay forwarded to every log host), so read positions that
//! were not the host's own would resume one host's file where another's stopped. One ingest is
//! SIGKILLed once its first commit is visible, part way through its file, and started again.
//! Then every job is stored once, every forged record rejected once, every file read to its
//! end, and the reports, mails and pages are byte for byte those of a database the same three
//! logs went into one after another, undisturbed.

use mpistat_e2e::postgresql::{PostgresServer, WRITER};
use mpistat_e2e::*;
use mpistat_record::JobRecord;
use mpistat_testkit::synthetic;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// November 2026 (UTC), the synthetic jobs' month.
const NOVEMBER_START_MS: u64 = 1_793_491_200_000;
/// Lines between two commits: many commits per file.
const BATCH_LINES: &str = "1000";
/// The jobs of each host's log (the one killed has the most, to be killed part way).
const JOBS: [u64; 3] = [4_000, 16_000, 4_000];
/// Which host's ingest is killed.
const VICTIM: usize = 1;
/// Every this many jobs one has lines no sender was attested for (rejected as forged).
const FORGED_EVERY: u64 = 500;

/// `mpistat ingest LOG` on log host `host` (a UTS namespace of its own named so).
fn ingest_on(host: &str, config: &Path, log: &Path) -> Child {
    Command::new("unshare")
        .args([
            "--uts",
            "--",
            "sh",
            "-c",
            "hostname \"$0\" && exec \"$@\"",
            host,
        ])
        .arg(mpistat_binary())
        .args(["ingest", "--batch-lines", BATCH_LINES, "--config"])
        .arg(config)
        .arg(log)
        .stdout(Stdio::null())
        .spawn()
        .expect("run unshare")
}

fn wait_ok(mut child: Child, what: &str) {
    let status = child.wait().unwrap();
    assert!(status.success(), "{what}: {status}");
}

/// The three logs: each begins with the same job, then its own jobs.
fn write_logs(dir: &Path) -> (Vec<PathBuf>, u64, u64) {
    let total: u64 = JOBS.iter().sum();
    let all: Vec<JobRecord> =
        synthetic::varied_jobs(total + 1, 200, NOVEMBER_START_MS, 25 * 86_400_000).collect();
    let (shared, own) = all.split_first().unwrap();
    let (mut from, mut forged) = (0, 0);
    let mut logs = Vec::new();
    for (host, &count) in JOBS.iter().enumerate() {
        let mut text: String = synthetic::syslog_lines(shared, Some(shared.uid))
            .into_iter()
            .collect();
        for (n, job) in own[from..from + count as usize].iter().enumerate() {
            let attested = (n as u64 % FORGED_EVERY != FORGED_EVERY - 1).then_some(job.uid);
            forged += u64::from(attested.is_none());
            text.extend(synthetic::syslog_lines(job, attested));
        }
        from += count as usize;
        let log = dir.join(format!("host{host}.log"));
        std::fs::write(&log, text).unwrap();
        logs.push(log);
    }
    (logs, 1 + total - forged, forged)
}

/// A site configuration on database `url`.
fn config(dir: &Path, name: &str, url: &str) -> PathBuf {
    let config = dir.join(format!("{name}.toml"));
    // The synthetic users are invented (uid 2000.. may be someone else here): names not checked.
    std::fs::write(
        &config,
        format!("[database]\nurl = {url:?}\n[ingest]\ncheck_user_names = false\n"),
    )
    .unwrap();
    config
}

fn report(config: &Path) -> String {
    let out = mpistat(&["ingest", "--report"], config);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `ingest --report`, the week's mails (printed) and the month's static site.
fn outputs(config: &Path, out: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut found = BTreeMap::new();
    // The files are listed in the order their positions were first saved: which ingest
    // committed first. The same files at the same positions in any order, then.
    let report = report(config);
    let (counts, files) = report.split_once("files:\n").expect("a list of files");
    let mut files: Vec<&str> = files.lines().collect();
    files.sort_unstable();
    found.insert("ingest --report".to_string(), counts.as_bytes().to_vec());
    found.insert(
        "ingest --report: files".to_string(),
        files.join("\n").into_bytes(),
    );
    let mails = mpistat(&["digest", "--week", "2026-W47"], config);
    assert!(mails.status.success(), "{mails:?}");
    found.insert("digest".to_string(), mails.stdout);
    let site = mpistat(
        &[
            "site-report",
            "--month",
            "2026-11",
            "--out",
            out.to_str().unwrap(),
        ],
        config,
    );
    assert!(site.status.success(), "{site:?}");
    found.extend(files_under(out));
    found
}

#[test]
fn three_ingests_at_once_one_killed_mid_batch_lose_nothing_and_count_nothing_twice() {
    let Some(server) = PostgresServer::start_site("ci-postgres") else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let dir = Scratch::new("concurrent-ingest");
    let (logs, jobs, forged) = write_logs(dir.path());
    let hosts = ["loghost-a", "loghost-b", "loghost-c"];
    let site = config(dir.path(), "site", &server.site_url(WRITER));
    // The schema first (as `mpistat db migrate` at installation): the kill is to come in a
    // batch, not in the migration.
    let migrate = mpistat(&["db", "migrate"], &site);
    assert!(migrate.status.success(), "{migrate:?}");

    let started = Instant::now();
    let mut running: Vec<Option<Child>> = hosts
        .iter()
        .zip(&logs)
        .map(|(host, log)| Some(ingest_on(host, &site, log)))
        .collect();
    // The victim's first commit is visible once its file has a read position.
    let victim_log = logs[VICTIM].display().to_string();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !report(&site).contains(&format!("  {victim_log}: read to byte ")) {
        assert!(Instant::now() < deadline, "no commit of the victim's");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut victim = running[VICTIM].take().unwrap();
    victim.kill().unwrap();
    let killed = victim.wait().unwrap();
    eprintln!(
        "killed the ingest of {} after {:.2} s: {killed}",
        hosts[VICTIM],
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed),
        Some(libc::SIGKILL),
        "the victim had finished before it was killed"
    );
    let size = std::fs::metadata(&logs[VICTIM]).unwrap().len();
    let at_kill = report(&site);
    assert!(
        !at_kill.contains(&format!("  {victim_log}: read to byte {size}\n")),
        "killed after it had read its whole file: {at_kill}"
    );
    running[VICTIM] = Some(ingest_on(hosts[VICTIM], &site, &logs[VICTIM]));
    for (child, host) in running.into_iter().zip(hosts) {
        wait_ok(child.unwrap(), host);
    }
    eprintln!(
        "{jobs} jobs ingested by three processes (one killed and started again) in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    let after = report(&site);
    assert!(after.contains(&format!("jobs stored: {jobs}\n")), "{after}");
    assert!(
        after.contains(&format!("rejected: forged {forged}\n")),
        "{after}"
    );
    assert_eq!(
        after.matches("\n  forged ").count() as u64,
        forged,
        "{after}"
    );
    for log in &logs {
        let size = std::fs::metadata(log).unwrap().len();
        let line = format!("  {}: read to byte {size}\n", log.display());
        assert_eq!(after.matches(&line).count(), 1, "{line:?} not in {after}");
    }

    // The same logs one after another into a database of their own, undisturbed.
    server.psql(
        "postgres",
        &format!("CREATE DATABASE reference OWNER {WRITER}"),
    );
    let reference_url = server.site_url(WRITER).replace("/mpistat?", "/reference?");
    let reference = config(dir.path(), "reference", &reference_url);
    for (host, log) in hosts.iter().zip(&logs) {
        wait_ok(ingest_on(host, &reference, log), host);
    }
    let expected = outputs(&reference, &dir.path().join("reference-site"));
    let found = outputs(&site, &dir.path().join("site"));
    assert!(expected.len() > 20, "{:?}", expected.keys());
    assert_same_outputs(["undisturbed", "killed"], &expected, &found);
}
