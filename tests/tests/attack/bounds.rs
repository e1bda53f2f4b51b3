//! Issue 34 §2 and §3 as a hostile local user plays them: users made with `useradd` send
//! records whose content is hostile (each under their own, correctly attested uid) through a
//! real rsyslogd running the shipped `etc/rsyslog.d/mpistat.conf`, and `mpistat ingest`,
//! `site-report` and the escalation run on what it wrote. Each test prints what it measured
//! (time, peak memory of the `mpistat` process, sizes); the figures of the release before the
//! limits are in `docs/limits.md`.
//!
//! * a 20,000,000-bucket histogram, 20 records with a 60 MB environment value: rejected as
//!   `oversized`, never stored, the week's pages small;
//! * a record meeting the escalation rule with a 5 MB executable name: rejected, and the
//!   escalation list every rank reads at `MPI_Init` stays small;
//! * 20,000 and 60,000 lines each the last part of a record that never completes: ingest's
//!   memory stays small, every record has its `rejected` row;
//! * one incomplete record in a live log: given up once the log has gone on for the grace
//!   period after its first line, and the next run reads only what is new.

use mpistat_testkit::forge;

use mpistat_e2e::rsyslog::SingleHost;
use mpistat_e2e::*;
use mpistat_record::model::{Imbalance, RoutineStats, Stat};
use mpistat_record::{JobIndex, JobRecord};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// A private rsyslogd with the shipped configuration, and the site configuration of the
/// `mpistat` commands (database, escalation list, records file in its directory).
struct Site {
    /// Kept running (and its directory) while the site lives.
    _syslog: SingleHost,
    dir: PathBuf,
    socket: PathBuf,
    records: PathBuf,
    config: PathBuf,
}

impl Site {
    /// The site, with `ingest` settings added to the configuration.
    fn start(label: &str, ingest: &str) -> Site {
        let syslog = SingleHost::start(label);
        let d = syslog.dir.path().to_path_buf();
        let config = d.join("site.toml");
        std::fs::write(
            &config,
            format!(
                "[database]\npath = \"{}\"\n[escalation]\nlist = \"{}\"\n[ingest]\n{ingest}\n",
                d.join("mpistat.db").display(),
                d.join("escalation.list").display(),
            ),
        )
        .unwrap();
        Site {
            dir: d,
            socket: syslog.socket(),
            records: syslog.log(),
            config,
            _syslog: syslog,
        }
    }

    /// Send `messages` as `user` with `logger` (one process, the messages on its standard
    /// input), and wait until rsyslog wrote them.
    fn send(&self, user: &User, messages: &[String]) {
        let before = self.lines();
        let mut child = Command::new("logger")
            .args(["--size", "8192", "-u"])
            .arg(&self.socket)
            .args(["-p", "local5.info", "-t", "mpistat"])
            .uid(user.uid)
            .gid(user.gid)
            .stdin(Stdio::piped())
            .spawn()
            .expect("run logger");
        let mut stdin = child.stdin.take().unwrap();
        for message in messages {
            writeln!(stdin, "{message}").unwrap();
        }
        drop(stdin);
        assert!(child.wait().unwrap().success());
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.lines() < before + messages.len() {
            assert!(Instant::now() < deadline, "rsyslog did not write them all");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn lines(&self) -> usize {
        std::fs::read(&self.records)
            .map(|text| text.iter().filter(|&&b| b == b'\n').count())
            .unwrap_or(0)
    }

    /// `mpistat ARGS --config site.toml` under `/usr/bin/time`: its output, wall time and peak
    /// memory (maximum resident set, bytes).
    fn mpistat(&self, args: &[&str]) -> (Output, f64, u64) {
        let times = self.dir.join("time.out");
        let output = Command::new("/usr/bin/time")
            .arg("-o")
            .arg(&times)
            .args(["-f", "%e %M"])
            .arg(mpistat_binary())
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .output()
            .expect("run mpistat under /usr/bin/time");
        let measured = std::fs::read_to_string(&times).unwrap();
        let mut fields = measured.split_whitespace().rev().take(2);
        let (peak_kb, seconds): (u64, f64) = (
            fields.next().unwrap().parse().unwrap(),
            fields.next().unwrap().parse().unwrap(),
        );
        (output, seconds, peak_kb * 1024)
    }

    /// `mpistat ingest` of the records file; asserts it succeeded.
    fn ingest(&self) -> (String, f64, u64) {
        let records = self.records.to_str().unwrap().to_string();
        let (output, seconds, peak) = self.mpistat(&["ingest", &records]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        (stderr, seconds, peak)
    }

    fn db(&self) -> mpistat_store::ReadStore {
        mpistat_store::ReadStore::open(&self.dir.join("mpistat.db")).unwrap()
    }

    fn jobs(&self) -> u64 {
        self.db().job_count().unwrap()
    }

    /// The rejected rows of `kind` (reference, detail).
    fn rejected(&self, kind: &str) -> Vec<(String, String)> {
        let rows = self.db().rejected().unwrap().into_iter();
        rows.filter(|(k, ..)| k == kind)
            .map(|(_, reference, _, detail)| (reference, detail))
            .collect()
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// Bytes of all files under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => bytes_under(&e.path()),
                    _ => e.metadata().map_or(0, |m| m.len()),
                })
                .sum()
        })
        .unwrap_or(0)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// This host's name, as rsyslog writes it on the lines (a record must name the host its line
/// came from).
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// A record of `user`'s that ended a moment ago on this host: 64 ranks for an hour, 40 % in MPI,
/// 25 % critical-path imbalance (it meets the site's escalation rule), one routine.
fn record_of(user: &User, n: u32) -> JobRecord {
    let wall = 3_600_000_000_000u64;
    let work = wall * 60 / 100;
    let end = now_ms() - 1000;
    JobRecord {
        version: mpistat_record::model::MODEL_VERSION,
        job_id: format!("{}{n}", user.uid),
        uid: user.uid,
        user: user.name.clone(),
        exe: format!("{}/solver", user.home.display()),
        argv0: "solver".into(),
        host: this_host(),
        pid: 1000 + n,
        ranks: 64,
        nodes: 1,
        start_unix_ms: end - 3_600_000,
        end_unix_ms: end,
        wall_ns: Stat {
            sum: wall * 64,
            min: wall,
            max: wall,
            max_rank: 0,
        },
        mpi_ns: Stat {
            sum: wall * 64 * 40 / 100,
            ..Default::default()
        },
        thread_level: "single".into(),
        routines: vec![RoutineStats {
            name: "MPI_Send".into(),
            class: "p2p".into(),
            calls: Stat::single(10, 0),
            hist: vec![0, 10],
            ..Default::default()
        }],
        imbalance: Some(Imbalance {
            work_sum_ns: work * 64,
            critical_path_ns: work * 25 / 100,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The messages of `record` as a forger writes them (version 2, not cut to the limits).
fn forged(record: &JobRecord) -> Vec<String> {
    forge::encode_v2_with_index(record, &JobIndex::of(record))
}

/// The attacker, made with `useradd` (needs root).
fn attacker(name: &str) -> Option<User> {
    let user = User::ensure(name);
    if user.is_none() {
        eprintln!("SKIPPED: needs root to make users");
    }
    user
}

#[test]
fn oversized_records_are_rejected_and_the_weeks_pages_stay_small() {
    let _serial = serial();
    let Some(mallory) = attacker("bndhist") else {
        return;
    };
    let Some(eve) = attacker("bndenv") else {
        return;
    };
    let site = Site::start("bounds-oversized", "");
    // A 55 kB record with a histogram of 20,000,000 buckets (the profiler writes 48).
    let mut histogram = record_of(&mallory, 1);
    histogram.routines[0].hist = vec![0; 20_000_000];
    histogram.routines[0].hist.push(1);
    let lines = forged(&histogram);
    eprintln!(
        "histogram record: {} bytes in {} lines",
        lines.iter().map(String::len).sum::<usize>(),
        lines.len()
    );
    site.send(&mallory, &lines);
    // 20 records, each with an environment value of 60 MB.
    let mut sent = Vec::new();
    let mut environments = Vec::new();
    for n in 0..20 {
        let mut record = record_of(&eve, n);
        record
            .env
            .insert("OMPI_MCA_btl".into(), "A".repeat(60_000_000));
        sent.extend(forged(&record));
        environments.push(record.wire_key());
    }
    eprintln!(
        "20 environment records: {} bytes in {} lines",
        sent.iter().map(String::len).sum::<usize>(),
        sent.len()
    );
    site.send(&eve, &sent);

    let (_, seconds, peak) = site.ingest();
    eprintln!("ingest: {seconds:.2} s, peak {}", mb(peak));
    let oversized = site.rejected("oversized");
    eprintln!("{:#?}", &oversized[..2.min(oversized.len())]);
    assert_eq!(site.jobs(), 0, "none of them is stored");
    assert_eq!(oversized.len(), 21, "{oversized:#?}");
    let reason = |key: &str| {
        let row = oversized.iter().find(|(r, _)| r == key);
        row.unwrap_or_else(|| panic!("{key}: {oversized:#?}"))
            .1
            .clone()
    };
    let limit = mpistat_record::limits::RECORD_JSON_MAX;
    assert!(reason(&histogram.wire_key()).ends_with(&format!(
        "oversized: record JSON of more than {limit} bytes"
    )));
    for key in &environments {
        assert!(reason(key).contains("oversized: record JSON of more than"));
    }

    // The week's pages, as the admin's timer makes them.
    let out = site.dir.join("site");
    let week = this_week();
    let (output, seconds, peak) = site.mpistat(&[
        "site-report",
        "--week",
        &week,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = bytes_under(&out);
    eprintln!(
        "site-report --week {week}: {seconds:.2} s, peak {}, {} written",
        mb(peak),
        mb(written)
    );
    assert!(written < 5_000_000, "{written} bytes of pages");
}

#[test]
fn an_over_long_executable_never_reaches_the_escalation_list() {
    let _serial = serial();
    let Some(mallory) = attacker("bndesc") else {
        return;
    };
    let site = Site::start("bounds-escalation", "");
    // Wire version 1 (no index): the 5 MB name deflates to a few kB.
    let mut attack = record_of(&mallory, 1);
    attack.exe = format!("/{}", "x".repeat(5_000_000));
    let lines = forge::encode_v1(&attack);
    eprintln!(
        "a 5 MB executable: {} bytes in {} lines",
        lines.iter().map(String::len).sum::<usize>(),
        lines.len()
    );
    site.send(&mallory, &lines);
    // And a record of hers as the profiler sends it, meeting the rule too: listed.
    let fair = record_of(&mallory, 2);
    site.send(&mallory, &mpistat_record::encode(&fair));
    let (stderr, seconds, peak) = site.ingest();
    eprintln!(
        "ingest and escalation: {seconds:.2} s, peak {}\n{stderr}",
        mb(peak)
    );
    let oversized = site.rejected("oversized");
    assert_eq!(oversized.len(), 1, "{oversized:#?}");
    assert_eq!(oversized[0].0, attack.wire_key());
    assert!(oversized[0]
        .1
        .contains("oversized: record JSON of more than"));
    assert_eq!(site.jobs(), 1);
    let list = std::fs::read_to_string(site.dir.join("escalation.list")).unwrap();
    eprintln!("escalation.list: {} bytes", list.len());
    assert!(list.len() < 1024, "{} bytes", list.len());
    assert!(list.contains(&format!(
        "{}\t{}/solver\t",
        mallory.uid,
        mallory.home.display()
    )));
}

/// `count` lines, each the last part of a record (key `base + i`) announcing `parts` parts,
/// every checksum right.
fn announcing(count: usize, parts: u32, base: u64) -> Vec<String> {
    (0..count)
        .map(|i| {
            let head = format!(
                "MPISTAT2 {:016x} {}/{parts} 0badc0de ",
                base + i as u64,
                parts - 1
            );
            let data = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB";
            let crc = crc32fast::hash(format!("{head}{data}").as_bytes());
            format!("{head}{crc:08x} {data}")
        })
        .collect()
}

#[test]
fn records_that_never_complete_keep_ingest_small() {
    let _serial = serial();
    let Some(mallory) = attacker("bndflood") else {
        return;
    };
    let site = Site::start("bounds-flood", "grace_seconds = 0");
    let mut total = 0;
    let mut peaks = Vec::new();
    for (count, parts, base) in [
        (20_000, 10_000, 0x1000_0000),
        (20_000, 5_000, 0x2000_0000),
        (60_000, 5_000, 0x3000_0000),
    ] {
        site.send(&mallory, &announcing(count, parts, base));
        total += count;
        let size = std::fs::metadata(&site.records).unwrap().len();
        let (_, seconds, peak) = site.ingest();
        let rejected = site.db().rejected().unwrap().len();
        eprintln!(
            "{count} lines announcing {parts} parts each (log now {}): ingest {seconds:.2} s, \
             peak {}; {rejected} rejected rows in all",
            mb(size),
            mb(peak)
        );
        assert_eq!(
            rejected, total,
            "one row a line (corrupt) or record (incomplete)"
        );
        peaks.push(peak);
    }
    assert!(
        peaks.iter().all(|&peak| peak < 200_000_000),
        "ingest peaked at {peaks:?} bytes"
    );
    assert_eq!(
        site.rejected("corrupt").len(),
        20_000,
        "10,000 parts: more than a record has"
    );
    let incomplete = site.rejected("incomplete");
    assert_eq!(incomplete.len(), 80_000);
    assert!(incomplete
        .iter()
        .any(|(_, detail)| detail.contains("given up: more than 256 records of this sender")));
}

#[test]
fn an_incomplete_record_does_not_pin_a_live_log() {
    let _serial = serial();
    let Some(mallory) = attacker("bndpin") else {
        return;
    };
    let Some(alice) = attacker("bndalice") else {
        return;
    };
    let site = Site::start("bounds-pin", "grace_seconds = 2");
    // Her record without its last part, then (the grace later) 50,000 lines of other jobs.
    let mut lines = mpistat_record::encode(&record_of(&mallory, 1));
    lines.pop();
    site.send(&mallory, &lines);
    std::thread::sleep(Duration::from_secs(3));
    let filler: Vec<String> = (0..25_000)
        .flat_map(|n| mpistat_record::encode(&record_of(&alice, n)))
        .collect();
    site.send(&alice, &filler);
    let (first, first_s, first_peak) = site.ingest();
    eprintln!("{}", first.trim());
    let incomplete = site.rejected("incomplete");
    eprintln!(
        "first run: {first_s:.2} s, peak {}; {} incomplete",
        mb(first_peak),
        incomplete.len()
    );
    // One more line (the log lives on), and the next run reads only it.
    site.send(&alice, &["a line that is not a record".to_string()]);
    let (stderr, second_s, second_peak) = site.ingest();
    eprintln!(
        "second run: {second_s:.2} s, peak {}: {}",
        mb(second_peak),
        stderr.trim()
    );
    assert_eq!(
        incomplete.len(),
        1,
        "her record's grace is over: {incomplete:#?}"
    );
    assert!(stderr.contains(" 1 lines:"), "{stderr}");
}
