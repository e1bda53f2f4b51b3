//! `mpistat ingest` under random and mutated syslog files (a property-based fuzz harness, small
//! enough for CI): real records of their own users, forged and unattested ones, records cut
//! short, lines with bytes flipped, repeated and reordered, floods of records that never
//! complete, and lines that are not ours at all. Whatever the file holds, a run does not fail
//! or panic, every line of ours is accounted for (its job stored, or a `rejected` row for its
//! job or for the line itself: nothing is dropped silently), and the memory it allocates
//! (counted by this binary's global allocator; SQLite's own is not) stays bounded. One test
//! only, so that nothing else allocates meanwhile. `MPISTAT_FUZZ_CASES` runs more cases.

use mpistat_testkit::counting;
use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;

use common::{syslog_lines, week_of_jobs};
use mpistat_ingest::{run_once, Options};
use mpistat_store::WriteStore;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Most bytes a run over one case's file may allocate at its peak (the reading buffer, the
/// records of a decoder batch, an assembler's incomplete records at their limit).
const PEAK_MAX: usize = 96 << 20;

/// What one line of a generated log is.
#[derive(Debug, Clone)]
enum Piece {
    /// Job `n`'s lines, sent by its own user (`true`) or by another uid.
    Record(u64, bool),
    /// Job `n`'s lines but the last.
    Cut(u64),
    /// Job `n`'s lines with bytes changed: (line, at, byte).
    Damaged(u64, Vec<(usize, usize, u8)>),
    /// `count` lines each the last of a record of `parts` parts that never completes.
    Flood(usize, u32),
    /// A line that is not ours.
    Other(Vec<u8>),
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        (0u64..30, any::<bool>()).prop_map(|(n, own)| Piece::Record(n, own)),
        (0u64..30).prop_map(Piece::Cut),
        (
            0u64..30,
            prop::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 1..4)
        )
            .prop_map(|(n, edits)| Piece::Damaged(n, edits)),
        (
            1usize..3000,
            prop_oneof![Just(2u32), 3u32..5000, Just(10_000)]
        )
            .prop_map(|(count, parts)| Piece::Flood(count, parts)),
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Piece::Other),
    ]
}

const TIME: &str = "2026-11-18T10:00:00.000000+00:00";

fn lines_of(piece: &Piece, jobs: &[mpistat_record::JobRecord]) -> Vec<Vec<u8>> {
    let own = |n: u64| &jobs[n as usize];
    match piece {
        Piece::Record(n, true) => to_bytes(syslog_lines(own(*n), Some(own(*n).uid))),
        Piece::Record(n, false) => to_bytes(syslog_lines(own(*n), Some(4242))),
        Piece::Cut(n) => {
            let mut lines = to_bytes(syslog_lines(own(*n), Some(own(*n).uid)));
            lines.pop();
            lines
        }
        Piece::Damaged(n, edits) => {
            let mut lines = to_bytes(syslog_lines(own(*n), Some(own(*n).uid)));
            for &(line, at, byte) in edits {
                let count = lines.len();
                let line = &mut lines[line % count];
                let at = at % (line.len() - 1); // not the newline
                line[at] = if byte == b'\n' { b' ' } else { byte };
            }
            lines
        }
        Piece::Flood(count, parts) => (0..*count)
            .map(|i| {
                let head = format!(
                    "MPISTAT2 {:016x} {}/{parts} 00000000 ",
                    0xf100d000 + i as u64,
                    parts - 1
                );
                let data = "QUFB";
                let crc = crc32fast::hash(format!("{head}{data}").as_bytes());
                format!("{TIME} node1 uid=1001 pid=7 mpistat: {head}{crc:08x} {data}\n")
                    .into_bytes()
            })
            .collect(),
        Piece::Other(bytes) => {
            let mut line: Vec<u8> = bytes
                .iter()
                .map(|&b| if b == b'\n' { b' ' } else { b })
                .collect();
            line.push(b'\n');
            vec![line]
        }
    }
}

fn to_bytes(lines: Vec<String>) -> Vec<Vec<u8>> {
    lines.into_iter().map(String::into_bytes).collect()
}

/// The first marker in `line` as the wire format defines it (`MPISTAT`, maybe `A`, digits, a
/// space): where the fields after it begin. A line whose marker is damaged is not ours (its
/// record then misses a part, and is reported by its other lines).
fn marker_end(line: &[u8]) -> Option<usize> {
    (0..line.len()).find_map(|at| {
        let rest = line[at..].strip_prefix(b"MPISTAT")?;
        let rest = rest.strip_prefix(b"A").unwrap_or(rest);
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        (digits > 0 && rest.get(digits) == Some(&b' '))
            .then(|| line.len() - rest.len() + digits + 1)
    })
}

/// For each line of ours in `lines`, at its offset: the key field it names.
fn our_lines(lines: &[Vec<u8>]) -> Vec<(u64, Option<String>)> {
    let mut offset = 0u64;
    let mut ours = Vec::new();
    for line in lines {
        if let Some(end) = marker_end(line) {
            let text = String::from_utf8_lossy(&line[end..]);
            let key = text.split(' ').next().map(str::to_string);
            ours.push((offset, key));
        }
        offset += line.len() as u64;
    }
    ours
}

/// Everything of ours in `lines` is either stored or rejected (by job key, or by line).
fn check_accounted(db: &WriteStore, log: &Path, lines: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let first = &lines[0];
    let head = &first[..first.len().min(1024)];
    let file_id = format!("{:08x}", crc32fast::hash(head));
    let mut stored: HashSet<String> = HashSet::new();
    db.each_filed_job_ended_between(0, i64::MAX as u64, |filed, _| {
        stored.insert(filed.key.clone());
    })
    .unwrap();
    let refs: HashSet<String> = db.rejected().unwrap().into_iter().map(|r| r.1).collect();
    for (offset, key) in our_lines(lines) {
        let by_line = refs.contains(&format!("{file_id}:{offset}"));
        // Stored under `<wire key>-<uid>`; rejected under the wire key (and `/<why>`).
        let by_job = key.as_ref().is_some_and(|key| {
            let own = |r: &String| r.split(['/', '-']).next() == Some(key);
            stored.iter().any(own) || refs.iter().any(own)
        });
        prop_assert!(
            by_line || by_job,
            "{}:{offset} (job {key:?}) is neither stored nor rejected",
            log.display()
        );
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("MPISTAT_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24)
}

#[test]
fn any_log_is_ingested_accounting_for_every_line_in_bounded_memory() {
    let dir = Scratch::new("ingest-fuzz");
    let jobs = week_of_jobs(30);
    let mut runner = TestRunner::new(Config::with_cases(cases()));
    let case = std::cell::Cell::new(0);
    let worst = std::cell::Cell::new(0);
    let log_of = |pieces: &[Piece], shuffle: &[(usize, usize)]| {
        let mut lines: Vec<Vec<u8>> =
            vec![format!("{TIME} node1 uid=0 pid=1 kernel: start\n").into_bytes()];
        for piece in pieces {
            lines.extend(lines_of(piece, &jobs));
        }
        for &(a, b) in shuffle {
            let (a, b) = (1 + a % (lines.len() - 1), 1 + b % (lines.len() - 1));
            lines.swap(a, b);
        }
        lines
    };
    runner
        .run(
            &(
                prop::collection::vec(piece(), 1..12),
                prop::collection::vec((any::<usize>(), any::<usize>()), 0..4),
            ),
            |(pieces, shuffle)| {
                case.set(case.get() + 1);
                let lines = log_of(&pieces, &shuffle);
                let log = dir.join(format!("case-{}.log", case.get()));
                std::fs::write(&log, lines.concat()).unwrap();
                let mut db =
                    WriteStore::open(&dir.join(format!("case-{}.sqlite", case.get()))).unwrap();
                let options = Options {
                    // Every incomplete record is reported in this run.
                    grace: Duration::ZERO,
                    ..common::ingest_options(&log)
                };
                let (peak, stats) =
                    counting::peak_of(|| run_once(&mut db, &options, &mut Vec::new()));
                prop_assert!(stats.is_ok(), "{stats:?}");
                worst.set(worst.get().max(peak));
                prop_assert!(peak < PEAK_MAX, "{peak} bytes allocated");
                check_accounted(&db, &log, &lines)?;
                drop(db);
                let _ = std::fs::remove_file(&log);
                Ok(())
            },
        )
        .unwrap();
    eprintln!(
        "{} logs: at most {} bytes allocated by a run",
        case.get(),
        worst.get()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
