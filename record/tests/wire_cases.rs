//! Example-based tests of the wire format: the summary line, lines that are not ours, damaged
//! and forged lines, unknown versions, and taking records while lines still arrive.

use mpistat_record::wire::{Assembler, LineRef, PartList, Problem, MAX_MESSAGE};
use mpistat_record::{decode, encode, JobRecord, RoutineStats, Stat};

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
        "MPISTAT1 {} 0/{} ",
        record().key(),
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
    assert_eq!(decode_all(&encode(&long)).records, vec![long]);
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
                key: record().key(),
                missing: PartList(vec![1]),
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
        matches!(&decoded.problems[1], Problem::MissingParts { missing, .. } if missing.0 == [0])
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
            key: record().key()
        }]
    );
}

#[test]
fn forged_key_is_a_bad_payload() {
    let lines: Vec<String> = encode(&record())
        .iter()
        .map(|m| reseal(&m.replace(&record().key(), "0123456789abcdef")))
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
            key: record().key(),
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
    lines.push(reseal(&lines[1].replacen("MPISTAT1", "MPISTAT2", 1)));
    let decoded = decode_all(&lines);
    assert_eq!(decoded.records, vec![record()]);
    assert_eq!(
        decoded.problems,
        vec![Problem::UnsupportedWireVersion {
            at: LineRef {
                source: None,
                line: 3
            },
            version: "2".into()
        }]
    );
}

#[test]
fn newer_model_version_is_reported() {
    let future = JobRecord {
        version: 2,
        ..record()
    };
    let decoded = decode_all(&encode(&future));
    assert!(decoded.records.is_empty());
    assert_eq!(
        decoded.problems,
        vec![Problem::UnsupportedModelVersion {
            key: future.key(),
            version: 2
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
            record().key()
        )
    );
    assert!(rest.problems[1]
        .to_string()
        .starts_with(&format!("job {}: missing part(s) 1 of 2", other.key())));
}

#[test]
fn missing_parts_are_listed_as_ranges() {
    assert_eq!(PartList(vec![0, 3, 4, 5, 9]).to_string(), "0, 3-5, 9");
    assert_eq!(PartList(vec![]).to_string(), "");
}
