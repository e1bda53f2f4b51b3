//! The decoder under random and mutated input (a property-based fuzz harness, small enough for
//! CI): random lines, valid records with bytes flipped, part counts forged, payloads and record
//! JSON changed with every checksum made right again (so that the change reaches inflating,
//! parsing and the limits), and floods of incomplete records. Whatever comes in, the decoder
//! does not panic, and the memory it allocates stays bounded: this binary counts every
//! allocation (its own global allocator), and each case's peak above what the input itself
//! takes must stay under [`PEAK_MAX`]. One test only, so that no other test allocates
//! meanwhile. `MPISTAT_FUZZ_CASES` runs more cases (CI runs the default few hundred).

use mpistat_testkit::counting;
use mpistat_testkit::forge as common;

use mpistat_record::limits;
use mpistat_record::model::{JobIndex, JobRecord, RoutineStats, Stat};
use mpistat_record::wire::{Assembler, Problem, PENDING_BYTES_MAX, PENDING_JOBS_MAX};
use mpistat_record::{encode, AnalysisRecord};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Most bytes one case may allocate beyond its input: a record's JSON at its limit parsed
/// (a few times [`limits::RECORD_JSON_MAX`]) plus what an assembler holds at most.
const PEAK_MAX: usize = 8 * limits::RECORD_JSON_MAX + PENDING_BYTES_MAX + (8 << 20);

/// Feed `lines` to an assembler (checking that it keeps its limits) and decode everything.
fn decode_all(lines: &[Vec<u8>]) -> (usize, usize) {
    let mut assembler = Assembler::new();
    let mut held = 0;
    for line in lines {
        assembler.push(line);
        assert!(assembler.pending_jobs() <= PENDING_JOBS_MAX);
        assert!(assembler.pending_bytes() <= PENDING_BYTES_MAX);
        held = held.max(assembler.pending_bytes());
        if let Some(job) = assembler.take_complete().pop() {
            // Both ways ingest reads a job, and the analysis reading.
            let _ = job.indexed();
            let _ = job.decode();
            let _ = job.analysis();
        }
    }
    let decoded = assembler.finish();
    for record in decoded.records {
        // Whatever decodes is within the limits.
        assert_eq!(limits::check_record(&mut record.clone()), Ok(()));
    }
    (decoded.problems.len(), held)
}

fn record(routines: usize, hist: usize, text: &str) -> JobRecord {
    JobRecord {
        version: mpistat_record::model::MODEL_VERSION,
        job_id: text.into(),
        uid: 1000,
        user: "mallory".into(),
        exe: format!("/home/mallory/{text}"),
        host: "node1".into(),
        ranks: 4,
        env: [("OMPI_MCA_btl".to_string(), text.to_string())].into(),
        routines: (0..routines)
            .map(|i| RoutineStats {
                name: format!("MPI_Routine_{i}"),
                class: "p2p".into(),
                calls: Stat::single(i as u64, 0),
                hist: (0..hist as u64).collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// A valid record's lines.
fn valid_lines() -> impl Strategy<Value = (JobRecord, Vec<String>)> {
    (
        0usize..40,
        0usize..60,
        "[a-z/ \\x00-\\x1f]{0,300}",
        any::<bool>(),
    )
        .prop_map(|(routines, hist, text, v1)| {
            let record = record(routines, hist, &text);
            let lines = if v1 {
                common::encode_v1(&record)
            } else {
                encode(&record)
            };
            (record, lines)
        })
}

/// `lines` with the line checksum of every line made right again.
fn resealed(lines: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    lines
        .into_iter()
        .map(|line| {
            let text = String::from_utf8_lossy(&line).into_owned();
            let fields: Vec<&str> = text.splitn(6, ' ').collect();
            if fields.len() < 6 {
                return line;
            }
            let head = format!("{} {} {} {} ", fields[0], fields[1], fields[2], fields[3]);
            let crc = crc32fast::hash(format!("{head}{}", fields[5]).as_bytes());
            format!("{head}{crc:08x} {}", fields[5]).into_bytes()
        })
        .collect()
}

/// Ways to damage a record's lines.
#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite, insert or delete bytes of lines (line checksums are then wrong, mostly).
    Bytes(Vec<(usize, usize, u8, u8)>),
    /// Claim another part count `n` (checksums made right).
    PartCount(u32),
    /// Change bytes of the payload before base64 (index or deflated record; checksums right).
    Payload(Vec<(usize, u8)>),
    /// Replace the record's JSON by this one, deflated (checksums right).
    Json(String),
    /// Repeat, drop and reorder lines.
    Lines(Vec<(usize, usize)>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        prop::collection::vec((any::<usize>(), any::<usize>(), 0u8..3, any::<u8>()), 1..8)
            .prop_map(Mutation::Bytes),
        prop_oneof![
            Just(1u32),
            Just(2),
            3u32..20,
            Just(limits_parts()),
            Just(10_000),
            Just(u32::MAX)
        ]
        .prop_map(Mutation::PartCount),
        prop::collection::vec((any::<usize>(), any::<u8>()), 1..8).prop_map(Mutation::Payload),
        json_mutation().prop_map(Mutation::Json),
        prop::collection::vec((any::<usize>(), any::<usize>()), 1..6).prop_map(Mutation::Lines),
    ]
}

fn limits_parts() -> u32 {
    mpistat_record::wire::MAX_PARTS
}

/// Record JSON a forger might send: huge lists and texts, deep nesting, wrong types, unknown
/// fields.
fn json_mutation() -> impl Strategy<Value = String> {
    prop_oneof![
        (1usize..3_000_000).prop_map(|n| format!(
            r#"{{"version":3,"routines":[{{"name":"MPI_Send","hist":[{}1]}}]}}"#,
            "0,".repeat(n / 2)
        )),
        (1usize..3_000_000).prop_map(|n| format!(r#"{{"version":3,"exe":"{}"}}"#, "A".repeat(n))),
        (1usize..100_000).prop_map(|n| format!(
            r#"{{"version":3,"junk":{}1{}}}"#,
            "[".repeat(n),
            "]".repeat(n)
        )),
        (1usize..200_000).prop_map(|n| format!(
            r#"{{"version":3,"env":{{{}"x":"y"}}}}"#,
            (0..n / 10)
                .map(|i| format!(r#""k{i}":"","#))
                .collect::<String>()
        )),
        "\\PC{0,200}",
    ]
}

fn apply(record: &JobRecord, lines: &[String], mutation: &Mutation) -> Vec<Vec<u8>> {
    let mut bytes: Vec<Vec<u8>> = lines.iter().map(|l| l.clone().into_bytes()).collect();
    match mutation {
        Mutation::Bytes(edits) => {
            for &(line, at, how, byte) in edits {
                let line = &mut bytes[line % lines.len()];
                let at = at % (line.len() + 1);
                match how {
                    0 if at < line.len() => line[at] = byte,
                    1 => line.insert(at, byte),
                    _ if at < line.len() => {
                        line.remove(at);
                    }
                    _ => {}
                }
            }
            bytes
        }
        Mutation::PartCount(n) => resealed(
            lines
                .iter()
                .map(|l| {
                    let fields: Vec<&str> = l.splitn(4, ' ').collect();
                    let part = fields[2].split('/').next().unwrap();
                    format!("{} {} {part}/{n} {}", fields[0], fields[1], fields[3]).into_bytes()
                })
                .collect(),
        ),
        Mutation::Payload(edits) => {
            let mut payload = serde_json::to_vec(&JobIndex::of(record)).unwrap();
            payload.push(b'\n');
            payload.extend(miniz_oxide::deflate::compress_to_vec(
                &serde_json::to_vec(record).unwrap(),
                6,
            ));
            for &(at, byte) in edits {
                let at = at % payload.len();
                payload[at] ^= byte | 1;
            }
            let crc = crc32fast::hash(&payload);
            to_bytes(common::messages(2, record, &payload, crc))
        }
        Mutation::Json(json) => {
            let deflated = miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6);
            let mut payload = serde_json::to_vec(&JobIndex::of(record)).unwrap();
            payload.push(b'\n');
            payload.extend(&deflated);
            let crc = crc32fast::hash(&payload);
            let mut forged = to_bytes(common::messages(2, record, &payload, crc));
            // The same JSON as version 1 and as an analysis too.
            forged.extend(to_bytes(common::messages(
                1,
                record,
                &deflated,
                crc32fast::hash(json.as_bytes()),
            )));
            let analysis = AnalysisRecord::default();
            forged.extend(to_bytes(common::messages_of_kind(
                "MPISTATA1",
                &analysis.key(),
                "x",
                &deflated,
            )));
            forged
        }
        Mutation::Lines(moves) => {
            for &(from, to) in moves {
                let line = bytes[from % bytes.len()].clone();
                let to = to % (bytes.len() + 1);
                if to.is_multiple_of(3) && bytes.len() > 1 {
                    bytes.remove(from % bytes.len());
                } else {
                    bytes.insert(to, line);
                }
            }
            bytes
        }
    }
}

fn to_bytes(lines: Vec<String>) -> Vec<Vec<u8>> {
    lines.into_iter().map(String::into_bytes).collect()
}

/// Lines that each begin a record (`parts` parts, this line its last) which never completes.
fn flood(count: usize, parts: u32, data: usize) -> Vec<Vec<u8>> {
    let payload = "A".repeat(data);
    resealed(
        (0..count)
            .map(|i| {
                format!(
                    "MPISTAT2 {i:016x} {}/{parts} 00000000 00000000 {payload}",
                    parts - 1
                )
                .into_bytes()
            })
            .collect(),
    )
}

fn cases() -> u32 {
    std::env::var("MPISTAT_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

#[test]
fn random_and_mutated_input_never_panics_and_stays_bounded() {
    let mut runner = TestRunner::new(Config::with_cases(cases()));
    let worst = std::cell::Cell::new(0);
    // Random lines, some with our marker.
    let random = prop::collection::vec(
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            "MPISTATA?[0-9]{1,3} [0-9a-f]{16} [0-9]{1,5}/[0-9]{1,6} [0-9a-f]{8} [0-9a-f]{8} [ -~]{0,200}"
                .prop_map(String::into_bytes),
        ],
        0..40,
    );
    runner
        .run(&random, |lines| {
            let (peak, _) = counting::peak_of(|| decode_all(&lines));
            worst.set(worst.get().max(peak));
            prop_assert!(peak < PEAK_MAX, "{peak} bytes");
            Ok(())
        })
        .unwrap();
    eprintln!(
        "random lines: at most {} bytes allocated in a case",
        worst.get()
    );

    let mut runner = TestRunner::new(Config::with_cases(cases()));
    worst.set(0);
    runner
        .run(
            &(valid_lines(), mutation()),
            |((record, lines), mutation)| {
                let damaged = apply(&record, &lines, &mutation);
                let (peak, _) = counting::peak_of(|| decode_all(&damaged));
                worst.set(worst.get().max(peak));
                prop_assert!(peak < PEAK_MAX, "{peak} bytes for {mutation:?}");
                Ok(())
            },
        )
        .unwrap();
    eprintln!(
        "mutated records: at most {} bytes allocated in a case",
        worst.get()
    );

    // Floods of records that never complete: the assembler holds at most its limits, and
    // reports every record it gives up.
    for (count, parts, data) in [
        (20_000, 3_000, 100),
        (2_000, 5_000, 7_600),
        (20_000, 10_000, 100),
    ] {
        let lines = flood(count, parts, data);
        let (peak, (problems, held)) = counting::peak_of(|| decode_all(&lines));
        eprintln!(
            "{count} lines, each the last of {parts} parts with {data} bytes of data: \
             at most {held} bytes held, {peak} allocated at the peak, {problems} problems"
        );
        assert_eq!(problems, count, "one problem a record (or line)");
        assert!(peak < PEAK_MAX, "{peak} bytes");
    }
    // The oldest are given up first, each reported once, saying why.
    let mut assembler = Assembler::new();
    for line in flood(PENDING_JOBS_MAX + 10, 5, 10) {
        assembler.push(line);
    }
    let problems = assembler.take_problems();
    assert_eq!(problems.len(), 10);
    let Problem::Evicted {
        key,
        reason,
        parts: 5,
        ..
    } = &problems[0]
    else {
        panic!("{:?}", problems[0]);
    };
    assert_eq!(key, &format!("{:016x}", 0));
    let why = format!("more than {PENDING_JOBS_MAX} records of this sender were waiting for parts");
    assert_eq!(reason, &why);
    assert_eq!(assembler.finish().problems.len(), PENDING_JOBS_MAX);
}
