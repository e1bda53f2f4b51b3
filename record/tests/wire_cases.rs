//! Example-based tests of the wire format: the summary line, lines that are not ours, damaged
//! and forged lines and indexes, unknown versions, version 1 lines of earlier profilers, and
//! taking records while lines still arrive.

use mpistat_testkit::forge as common;

use mpistat_record::limits;
use mpistat_record::wire::{Assembler, IndexedJob, LineRef, PartList, Problem, MAX_MESSAGE};
use mpistat_record::{decode, encode, JobIndex, JobRecord, RoutineStats, Stat};

fn record() -> JobRecord {
    JobRecord {
        version: 1,
        job_id: "123".into(),
        uid: 1000,
        user: "alice".into(),
        exe: "/home/alice/my app%s\n".into(),
        argv0: "./app".into(),
        host: "node1".into(),
        pid: 4242,
        ranks: 4,
        nodes: 1,
        start_unix_ms: 1_795_424_400_000,
        end_unix_ms: 1_795_424_412_300,
        wall_ns: Stat {
            sum: 48_000_000_000,
            min: 11_900_000_000,
            max: 12_300_000_000,
            max_rank: 2,
        },
        mpi_ns: Stat {
            sum: 11_232_000_000,
            min: 2_000_000_000,
            max: 3_500_000_000,
            max_rank: 1,
        },
        partial: Some("MPI_Abort".into()),
        routines: vec![RoutineStats {
            name: "MPI_Send".into(),
            class: "p2p".into(),
            calls: Stat::single(10, 0),
            hist: vec![0, 1, 2, 3],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// `message` with its line checksum recomputed, as a forger (or a buggy writer) would.
fn reseal(message: &str) -> String {
    let fields: Vec<&str> = message.splitn(6, ' ').collect();
    let head = format!("{} {} {} {} ", fields[0], fields[1], fields[2], fields[3]);
    let crc = crc32fast::hash(format!("{head}{}", fields[5]).as_bytes());
    format!("{head}{crc:08x} {}", fields[5])
}

fn decode_all(lines: &[String]) -> mpistat_record::Decoded {
    decode(lines.iter().map(String::as_str))
}

#[test]
fn summary_is_readable_and_escaped() {
    let messages = encode(&record());
    let summary = &messages[0];
    assert!(summary.starts_with(&format!(
        "MPISTAT2 {} 0/{} ",
        record().wire_key(),
        messages.len()
    )));
    assert!(
        summary.ends_with(
            " user=alice uid=1000 exe=/home/alice/my\\x20app\\x25s\\x0a host=node1 ranks=4 nodes=1 \
             wall=12.3s mpi=23.4% job=123 partial=MPI_Abort"
        ),
        "{summary}"
    );
}

#[test]
fn long_values_are_cut_and_messages_stay_short() {
    let mut long = record();
    long.exe = "/ü".repeat(2000);
    long.user = "u".repeat(2000);
    for m in encode(&long) {
        assert!(m.len() <= MAX_MESSAGE);
    }
    assert!(encode(&long)[0].contains("uuu... "));
    // The record itself is cut to its limits (what a decoder takes), saying so.
    let decoded = decode_all(&encode(&long));
    assert_eq!(decoded.problems, vec![]);
    let mut fitted = long.clone();
    limits::fit_record(&mut fitted);
    assert_eq!(decoded.records, vec![fitted.clone()]);
    assert!(fitted.exe.len() <= limits::PATH_MAX && fitted.exe.ends_with("..."));
    assert_eq!(
        fitted.user,
        format!("{}...", "u".repeat(limits::NAME_MAX - 3))
    );
}

#[test]
fn unrelated_lines_are_ignored_silently() {
    let mut lines = vec![
        "Nov 23 09:00:00 node1 sshd[99]: Accepted publickey for alice".to_string(),
        String::new(),
        "MPISTAT is great, says a user".into(),
        "\u{0}\u{ff} binary junk MPISTAT1".into(),
    ];
    lines.extend(
        encode(&record())
            .into_iter()
            .map(|m| format!("<13>Nov 23 node1 mpistat: {m}\r")),
    );
    let decoded = decode_all(&lines);
    assert_eq!(decoded.problems, vec![]);
    assert_eq!(decoded.records, vec![record()]);
}

#[test]
fn truncated_line_is_corrupt_and_its_part_missing() {
    let mut lines = encode(&record());
    let half = lines[1].len() / 2;
    lines[1].truncate(half);
    let decoded = decode_all(&lines);
    assert!(decoded.records.is_empty());
    assert_eq!(
        decoded.problems,
        vec![
            Problem::CorruptLine {
                at: LineRef {
                    source: None,
                    line: 2
                },
                reason: "line checksum mismatch".into()
            },
            Problem::MissingParts {
                key: record().wire_key(),
                missing: PartList::of([1]),
                parts: 2,
                summary: Some(lines[0].splitn(6, ' ').nth(5).unwrap().to_string()),
            }
        ]
    );
    assert!(decoded.problems[1]
        .to_string()
        .contains("missing part(s) 1 of 2 (user=alice"));
}

#[test]
fn forged_line_with_bad_line_checksum_is_corrupt() {
    let mut lines = encode(&record());
    lines[0] = lines[0].replace("user=alice", "user=mallory");
    let decoded = decode_all(&lines);
    assert_eq!(decoded.records, vec![record()]);
    assert!(
        matches!(&decoded.problems[0], Problem::CorruptLine { reason, .. } if reason == "line checksum mismatch")
    );
    assert!(
        matches!(&decoded.problems[1], Problem::MissingParts { missing, .. } if missing.parts().eq([0]))
    );
}

#[test]
fn forged_record_checksum_is_a_mismatch() {
    let lines: Vec<String> = encode(&record())
        .iter()
        .map(|m| {
            let mut fields: Vec<&str> = m.splitn(6, ' ').collect();
            fields[3] = "00000000";
            reseal(&fields.join(" "))
        })
        .collect();
    let decoded = decode_all(&lines);
    assert!(decoded.records.is_empty());
    assert_eq!(
        decoded.problems,
        vec![Problem::ChecksumMismatch {
            key: record().wire_key()
        }]
    );
}

#[test]
fn forged_key_is_a_bad_payload() {
    let lines: Vec<String> = encode(&record())
        .iter()
        .map(|m| reseal(&m.replace(&record().wire_key(), "0123456789abcdef")))
        .collect();
    let decoded = decode_all(&lines);
    assert!(decoded.records.is_empty());
    assert!(
        matches!(&decoded.problems[..], [Problem::BadPayload { key, reason }]
        if key == "0123456789abcdef" && reason.contains("own key"))
    );
}

#[test]
fn conflicting_part_keeps_the_first() {
    let mut lines = encode(&record());
    let forged = reseal(&lines[0].replace("user=alice", "user=mallory"));
    lines.insert(1, forged);
    let decoded = decode_all(&lines);
    assert_eq!(decoded.records, vec![record()]);
    assert_eq!(
        decoded.problems,
        vec![Problem::ConflictingPart {
            key: record().wire_key(),
            part: 0,
            at: LineRef {
                source: None,
                line: 2
            }
        }]
    );
}

#[test]
fn unknown_wire_version_is_reported() {
    let mut lines = encode(&record());
    lines.push(reseal(&lines[1].replacen("MPISTAT2", "MPISTAT3", 1)));
    let decoded = decode_all(&lines);
    assert_eq!(decoded.records, vec![record()]);
    assert_eq!(
        decoded.problems,
        vec![Problem::UnsupportedWireVersion {
            at: LineRef {
                source: None,
                line: 3
            },
            version: "3".into()
        }]
    );
}

#[test]
fn newer_model_version_is_reported() {
    let newest = mpistat_record::model::MODEL_VERSION;
    let future = JobRecord {
        version: newest + 1,
        ..record()
    };
    let decoded = decode_all(&encode(&future));
    assert!(decoded.records.is_empty());
    assert_eq!(
        decoded.problems,
        vec![Problem::UnsupportedModelVersion {
            key: future.wire_key(),
            version: u64::from(newest + 1)
        }]
    );
}

#[test]
fn out_of_range_part_numbers_are_corrupt() {
    let line = reseal(&encode(&record())[1].replacen(" 1/2 ", " 1/4000000000 ", 1));
    let decoded = decode([line.as_str()]);
    assert!(
        matches!(&decoded.problems[..], [Problem::CorruptLine { reason, .. }] if reason.contains("out of range"))
    );
}

#[test]
fn records_can_be_taken_as_soon_as_complete() {
    let mut other = record();
    other.pid += 1;
    let (first, second) = (encode(&record()), encode(&other));
    let mut assembler = Assembler::new();
    assembler.begin_source("/var/log/syslog");
    assembler.push(&second[0]);
    for line in &first {
        assembler.push(line);
    }
    let early = assembler.take_decoded();
    assert_eq!(early.records, vec![record()]);
    assert!(early.problems.is_empty());
    assembler.push(&first[1]);
    let rest = assembler.finish();
    assert!(rest.records.is_empty());
    assert_eq!(rest.problems.len(), 2);
    assert_eq!(
        rest.problems[0].to_string(),
        format!(
            "/var/log/syslog:4: job {}: duplicate of part 1 (ignored)",
            record().wire_key()
        )
    );
    assert!(rest.problems[1]
        .to_string()
        .starts_with(&format!("job {}: missing part(s) 1 of 2", other.wire_key())));
}

#[test]
fn missing_parts_are_listed_as_ranges() {
    assert_eq!(PartList::of([0, 3, 4, 5, 9]).to_string(), "0, 3-5, 9");
    assert_eq!(PartList::of([]).to_string(), "");
}

#[test]
fn version_1_lines_of_earlier_profilers_still_decode() {
    // Written by the version 1 encoder (the release before wire version 2), kept as they were.
    let log = include_str!("fixtures/wire-v1.log");
    let expected: Vec<JobRecord> = include_str!("fixtures/wire-v1.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(expected.len(), 2);
    assert!(log.lines().all(|line| line.contains(" mpistat: MPISTAT1 ")));
    let decoded = decode(log.lines());
    assert_eq!(decoded.problems, vec![]);
    assert_eq!(decoded.records, expected);
    // Version 1 has no index: `indexed` decodes and makes one.
    let mut assembler = Assembler::new();
    for line in log.lines() {
        assembler.push(line);
    }
    let jobs = assembler.take_complete();
    assert_eq!(jobs.len(), 2);
    for (job, record) in jobs.iter().zip(&expected) {
        assert_eq!(job.wire_version(), 1);
        let indexed = job.indexed().unwrap();
        assert_eq!(indexed.index, JobIndex::of(record));
        assert_eq!(indexed.deflated, job.decode().unwrap().deflated);
    }
}

#[test]
fn the_index_is_read_without_the_record_and_checked_against_it_on_decoding() {
    let mut assembler = Assembler::new();
    for line in encode(&record()) {
        assembler.push(line);
    }
    let job = assembler.take_complete().pop().unwrap();
    assert_eq!(job.wire_version(), 2);
    let decoded = job.decode().unwrap();
    assert_eq!(decoded.record, record());
    assert_eq!(
        job.indexed().unwrap(),
        IndexedJob {
            index: JobIndex::of(&record()),
            deflated: decoded.deflated
        }
    );
}

/// A sender (uid 1000) writes the index of its own job around a record claiming uid 0, with
/// every checksum right: filing by the index sees uid 1000, decoding the record reports it.
#[test]
fn a_record_whose_index_is_not_its_own_is_reported_not_decoded() {
    let mut root = record();
    root.uid = 0;
    root.user = "root".into();
    let lines = common::encode_v2_with_index(&root, &JobIndex::of(&record()));
    let mut assembler = Assembler::new();
    for line in &lines {
        assembler.push(line);
    }
    assert_eq!(assembler.take_problems(), vec![]);
    let job = assembler.take_complete().pop().unwrap();
    assert_eq!(job.indexed().unwrap().index.uid, 1000);
    let mismatch = Problem::IndexMismatch {
        key: record().wire_key(),
        differences: vec!["uid: 1000 vs 0".into(), r#"user: "alice" vs "root""#.into()],
    };
    assert_eq!(job.decode().unwrap_err(), mismatch);
    assert_eq!(
        mismatch.to_string(),
        format!(
            "job {}: the index disagrees with the record (index vs record: uid: 1000 vs 0; \
             user: \"alice\" vs \"root\")",
            record().wire_key()
        )
    );
    let decoded = decode_all(&lines);
    assert!(decoded.records.is_empty());
    assert_eq!(decoded.problems, vec![mismatch]);
}

#[test]
fn an_index_that_is_not_json_or_too_new_is_reported() {
    let mut payload = b"{not json\n".to_vec();
    payload.extend(miniz_oxide::deflate::compress_to_vec(b"{}", 6));
    let lines = common::messages(2, &record(), &payload, crc32fast::hash(&payload));
    let decoded = decode_all(&lines);
    assert!(
        matches!(&decoded.problems[..], [Problem::BadPayload { reason, .. }] if reason.starts_with("index JSON")),
        "{:?}",
        decoded.problems
    );
    let future = JobIndex {
        version: 9,
        ..JobIndex::of(&record())
    };
    let decoded = decode_all(&common::encode_v2_with_index(&record(), &future));
    assert_eq!(
        decoded.problems,
        vec![Problem::UnsupportedModelVersion {
            key: record().wire_key(),
            version: 9
        }]
    );
}

#[test]
fn parts_of_one_job_in_two_wire_versions_conflict() {
    let (v1, v2) = (common::encode_v1(&record()), encode(&record()));
    let mut lines = vec![v1[0].clone(), v2[1].clone()];
    lines.extend(v1[1..].iter().cloned());
    let decoded = decode_all(&lines);
    assert_eq!(decoded.records, vec![record()]);
    assert!(
        matches!(
            &decoded.problems[..],
            [Problem::ConflictingPart { part: 1, .. }]
        ),
        "{:?}",
        decoded.problems
    );
}

#[test]
fn lines_are_bytes_and_only_our_message_must_be_ascii() {
    let prefix = b"<13>Nov 23 n\xffde1 mpistat: ".as_slice();
    let messages = encode(&record());
    let lines: Vec<Vec<u8>> = messages
        .iter()
        .map(|m| [prefix, m.as_bytes()].concat())
        .collect();
    let mut assembler = Assembler::new();
    for line in &lines {
        assembler.push(line);
    }
    let decoded = assembler.finish();
    assert_eq!(decoded.problems, vec![]);
    assert_eq!(decoded.records, vec![record()]);
    // A byte outside printable ASCII in a message, with the line checksum made to match it.
    let fields: Vec<&str> = messages[1].splitn(6, ' ').collect();
    let head = format!("{} {} {} {} ", fields[0], fields[1], fields[2], fields[3]);
    let mut data = fields[5].as_bytes().to_vec();
    data[0] = 0xff;
    let crc = crc32fast::hash(&[head.as_bytes(), &data].concat());
    let damaged = [
        prefix,
        head.as_bytes(),
        format!("{crc:08x} ").as_bytes(),
        &data,
    ]
    .concat();
    let mut assembler = Assembler::new();
    assembler.push(&lines[0]);
    assembler.push(&damaged);
    let decoded = assembler.finish();
    assert!(decoded.records.is_empty());
    assert_eq!(
        decoded.problems[0],
        Problem::CorruptLine {
            at: LineRef {
                source: None,
                line: 2
            },
            reason: "data is not printable ASCII".into()
        }
    );
}

/// An analysis of a newer model than this build reads is told as such, by the analysis' own
/// model version (not the job record's, which is higher).
#[test]
fn an_analysis_of_a_newer_model_is_unsupported() {
    use mpistat_record::analysis::{AnalysisRecord, ANALYSIS_MODEL_VERSION};
    let analysis = AnalysisRecord {
        version: ANALYSIS_MODEL_VERSION + 1,
        job_key: "0123456789abcdef".into(),
        ..AnalysisRecord::default()
    };
    // Below the job record's newest, so that only the analysis' own bound refuses it.
    const _: () = assert!(ANALYSIS_MODEL_VERSION < mpistat_record::model::MODEL_VERSION);
    let json = serde_json::to_vec(&analysis).unwrap();
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 6);
    let lines = common::messages_of_kind("MPISTATA1", &analysis.key(), "analysis", &deflated);
    let decoded = decode(lines.iter().map(String::as_str));
    assert!(decoded.analyses.is_empty());
    assert_eq!(
        decoded.problems,
        vec![Problem::UnsupportedModelVersion {
            key: analysis.key(),
            version: u64::from(ANALYSIS_MODEL_VERSION + 1)
        }]
    );
}
