//! Property tests of the wire format: round trips (version 2, and version 1 as earlier profilers
//! write it), message limits, that every single lost, repeated or damaged line is reported and
//! never turns into a wrong record, that the index read without the record is the record's, and
//! that every index that is not is reported; and that stored records read with the thread's
//! reused decompressor as with a fresh one.

use mpistat_testkit::forge as common;

use mpistat_record::limits::{Oversize, RECORD_JSON_MAX};
use mpistat_record::model::{
    CounterEvent, CounterSet, Imbalance, PartitionImbalance, SlurmFacts, TraceInfo,
};
use mpistat_record::model::{IndexImbalance, NodeBytes, RanksPerNode};
use mpistat_record::wire::{stored_json_record, stored_record, Unreadable};
use mpistat_record::wire::{Assembler, IndexedJob, Problem, MAX_MESSAGE};
use mpistat_record::{decode, encode, Binding, JobIndex, JobRecord, RoutineStats, Stat};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Strings users and batch systems produce, including spaces, escapes, control and non-ASCII.
fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_./-]{0,20}",
        ".{0,40}",
        "[ %\\\\\n\t\"=\u{0}\u{7f}é漢🦀]{0,12}",
        "[a-z/ ]{300,700}",
    ]
}

fn stat() -> impl Strategy<Value = Stat> {
    (any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>()).prop_map(
        |(sum, min, max, max_rank)| Stat {
            sum,
            min,
            max,
            max_rank,
        },
    )
}

fn routine() -> impl Strategy<Value = RoutineStats> {
    (
        "MPI_[A-Z][a-z_]{1,20}",
        "[a-z-]{1,10}",
        (stat(), stat(), stat(), stat()),
        prop::collection::vec(any::<u64>(), 0..48),
        prop::option::of(any::<u64>()),
        prop::collection::btree_map("[a-z-]{1,16}", any::<u64>(), 0..3),
        prop::option::of((any::<u64>(), any::<u64>())),
    )
        .prop_map(
            |(name, class, (calls, time_ns, count, bytes), hist, sync_ns, counters, node_bytes)| {
                RoutineStats {
                    name,
                    class,
                    calls,
                    time_ns,
                    count,
                    bytes,
                    hist,
                    sync_ns,
                    counters,
                    node_bytes: node_bytes
                        .map(|(on_node, off_node)| NodeBytes { on_node, off_node }),
                }
            },
        )
}

fn partition() -> impl Strategy<Value = PartitionImbalance> {
    (
        any::<u32>(),
        any::<u32>(),
        prop::array::uniform6(any::<u64>()),
    )
        .prop_map(|(appnum, ranks, v)| PartitionImbalance {
            appnum,
            ranks,
            critical_path_ns: v[0],
            profile_ns: v[1],
            work_max_ns: v[2],
            work_sum_ns: v[3],
            useful_max_ns: v[4],
            useful_sum_ns: v[5],
        })
}

fn counter_set() -> impl Strategy<Value = CounterSet> {
    (
        odd_string(),
        prop::collection::vec(
            (
                "[a-z-]{1,16}",
                any::<u64>(),
                any::<u64>(),
                prop::option::of(odd_string()),
            )
                .prop_map(|(name, app, mpi, unavailable)| CounterEvent {
                    name,
                    app,
                    mpi,
                    unavailable,
                }),
            0..5,
        ),
    )
        .prop_map(|(mode, events)| CounterSet { mode, events })
}

fn imbalance() -> impl Strategy<Value = Imbalance> {
    (
        prop::array::uniform11(any::<u64>()),
        prop::collection::vec(any::<u64>(), 0..60),
        prop::collection::vec(partition(), 0..4),
        prop::option::of(odd_string()),
    )
        .prop_map(|(v, series_ns, partitions, unavailable)| Imbalance {
            supersteps: v[0],
            merge_factor: v[1],
            critical_path_ns: v[2],
            profile_ns: v[3],
            work_max_ns: v[4],
            work_sum_ns: v[5],
            useful_max_ns: v[6],
            useful_sum_ns: v[7],
            other_mpi_ns: v[8],
            inter_partition_ns: v[9],
            series_factor: v[10],
            series_ns,
            partitions,
            unavailable,
        })
}

/// Records as the profiler sends them: [`any_job_record`] cut to the limits, as the encoder
/// does (what decoders take whole).
pub fn job_record() -> impl Strategy<Value = JobRecord> {
    any_job_record().prop_map(|mut record| {
        mpistat_record::limits::fit_record(&mut record);
        record
    })
}

prop_compose! {
    /// Any record, some of whose texts are longer than the limits.
    pub fn any_job_record()(
        (job_id, user, exe, argv0, host) in (odd_string(), odd_string(), odd_string(), odd_string(), odd_string()),
        (uid, pid, ranks, nodes) in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (start_unix_ms, end_unix_ms) in (any::<u64>(), any::<u64>()),
        (wall_ns, mpi_ns, overhead_ns) in (stat(), stat(), stat()),
        fortran in any::<bool>(),
        (thread_level, mpi_library) in (odd_string(), odd_string()),
        env in prop::collection::btree_map(odd_string(), odd_string(), 0..4),
        user_pmpi_tool in any::<bool>(),
        partial in prop::option::of(odd_string()),
        routines in prop::collection::vec(routine(), 0..40),
        imbalance in prop::option::of(imbalance()),
        counters in prop::option::of(counter_set()),
        trace in prop::option::of(trace_info()),
        (app, interpreter, slurm) in (odd_string(), prop::option::of(odd_string()), prop::option::of(slurm_facts())),
        (host_list, ranks_per_node) in (odd_string(), prop::option::of((any::<u32>(), any::<u32>()))),
    ) -> JobRecord {
        JobRecord {
            version: mpistat_record::model::MODEL_VERSION,
            job_id, uid, user, exe, argv0, host, pid, ranks, nodes, start_unix_ms, end_unix_ms,
            wall_ns, mpi_ns,
            binding: if fortran { Binding::Fortran } else { Binding::C },
            thread_level, mpi_library, env: env.into_iter().collect::<BTreeMap<_, _>>(),
            user_pmpi_tool, overhead_ns, partial, routines, imbalance, counters, trace,
            app, interpreter, slurm, host_list,
            ranks_per_node: ranks_per_node.map(|(min, max)| RanksPerNode { min, max }),
        }
    }
}

prop_compose! {
    fn slurm_facts()(
        job_id in odd_string(),
        strings in prop::array::uniform10(prop::option::of(odd_string())),
        nodes in prop::option::of(any::<u32>()),
        times in prop::array::uniform3(prop::option::of(any::<u64>())),
    ) -> SlurmFacts {
        let [step_id, array_job_id, array_task_id, job_name, cluster, account, partition, qos,
            node_list, cpus_per_node] = strings;
        let [time_limit_s, submit_unix_s, start_unix_s] = times;
        SlurmFacts {
            job_id, step_id, array_job_id, array_task_id, job_name, cluster, account, partition,
            qos, node_list, nodes, cpus_per_node, time_limit_s, submit_unix_s, start_unix_s,
        }
    }
}

prop_compose! {
    fn trace_info()(
        (dir, reason) in (odd_string(), odd_string()),
        (events, ranks_written, overhead_ns) in (any::<u64>(), any::<u32>(), any::<u64>()),
        stopped in prop::option::of(odd_string()),
    ) -> TraceInfo {
        TraceInfo { dir, reason, events, ranks_written, stopped, overhead_ns }
    }
}

/// Lines as syslog writes them.
fn syslog_lines(record: &JobRecord) -> Vec<String> {
    as_syslog(encode(record))
}

fn as_syslog(messages: Vec<String>) -> Vec<String> {
    messages
        .into_iter()
        .map(|m| format!("2026-11-23T09:00:01+00:00 node1 mpistat[1234]: {m}"))
        .collect()
}

/// `index` with one field changed (`which` picks it).
fn tampered(index: &JobIndex, which: usize) -> JobIndex {
    let mut t = index.clone();
    match which % 13 {
        0 => t.uid = t.uid.wrapping_add(1),
        1 => {
            // Changed within its limit.
            if t.user.pop().is_none() {
                t.user.push('x');
            }
        }
        2 => t.exe.push('/'),
        3 => t.ranks = t.ranks.wrapping_add(1),
        4 => t.end_unix_ms = t.end_unix_ms.wrapping_add(1),
        5 => t.wall_ns_sum = t.wall_ns_sum.wrapping_add(1),
        6 => t.wall_ns_max = t.wall_ns_max.wrapping_sub(1),
        7 => t.mpi_ns_sum = t.mpi_ns_sum.wrapping_add(1),
        8 => {
            t.partial = if t.partial.is_some() {
                None
            } else {
                Some("MPI_Abort".into())
            }
        }
        9 => {
            t.imbalance = match t.imbalance {
                Some(_) => None,
                None => Some(IndexImbalance::default()),
            }
        }
        10 => {
            t.traced = if t.traced.is_some() {
                None
            } else {
                Some("user".into())
            }
        }
        11 => t.app.push('x'),
        _ => t.version = t.version.saturating_sub(1),
    }
    t
}

fn decode_lines(lines: &[String]) -> mpistat_record::Decoded {
    decode(lines.iter().map(String::as_str))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn round_trips_within_message_limits(record in job_record()) {
        let messages = encode(&record);
        prop_assert!(messages.len() >= 2);
        for m in &messages {
            prop_assert!(m.len() <= MAX_MESSAGE, "{} bytes", m.len());
            prop_assert!(m.bytes().all(|b| (0x20..0x7f).contains(&b)), "{m:?}");
        }
        let decoded = decode_lines(&syslog_lines(&record));
        prop_assert_eq!(decoded.problems, vec![]);
        prop_assert_eq!(decoded.records, vec![record]);
    }

    #[test]
    fn any_record_is_sent_cut_to_the_limits_and_taken_whole(record in any_job_record()) {
        let mut fitted = record.clone();
        mpistat_record::limits::fit_record(&mut fitted);
        prop_assert_eq!(mpistat_record::limits::check_record(&mut fitted.clone()), Ok(()));
        let mut again = fitted.clone();
        mpistat_record::limits::fit_record(&mut again);
        prop_assert_eq!(&again, &fitted, "cutting twice cuts nothing more");
        if mpistat_record::limits::check_record(&mut record.clone()).is_ok() {
            prop_assert_eq!(&fitted, &record, "a record within the limits is sent as it is");
        }
        let decoded = decode_lines(&syslog_lines(&record));
        prop_assert_eq!(decoded.problems, vec![]);
        prop_assert_eq!(decoded.records, vec![fitted]);
    }

    #[test]
    fn encoding_in_steps_stops_once_and_gives_the_same_lines(record in any_job_record()) {
        let mut stops = 0;
        let lines = mpistat_record::wire::encode_fitting_in_steps(&mut record.clone(), &mut || stops += 1);
        prop_assert_eq!(stops, 1);
        prop_assert_eq!(lines, encode(&record));
    }

    #[test]
    fn every_missing_line_is_reported(record in job_record(), pick in any::<prop::sample::Index>()) {
        let mut lines = syslog_lines(&record);
        let dropped = pick.index(lines.len()) as u32;
        lines.remove(dropped as usize);
        let decoded = decode_lines(&lines);
        let missing = decoded.problems.iter().any(|p| matches!(p,
            Problem::MissingParts { missing, .. } if missing.parts().eq([dropped])));
        prop_assert!(missing, "{:?}", decoded.problems);
        prop_assert_eq!(decoded.problems.len(), 1);
        if dropped == 0 {
            prop_assert_eq!(decoded.records, vec![record]);
        } else {
            prop_assert_eq!(decoded.records, vec![]);
        }
    }

    #[test]
    fn every_duplicate_line_is_reported_and_tolerated(
        record in job_record(),
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
    ) {
        let mut lines = syslog_lines(&record);
        let repeated = pick.index(lines.len());
        let copy = lines[repeated].clone();
        lines.insert(at.index(lines.len() + 1), copy);
        let decoded = decode_lines(&lines);
        prop_assert!(matches!(&decoded.problems[..],
            [Problem::DuplicatePart { part, .. }] if *part == repeated as u32), "{:?}", decoded.problems);
        prop_assert_eq!(decoded.records, vec![record]);
    }

    #[test]
    fn every_corrupted_line_is_detected(
        record in job_record(),
        pick_line in any::<prop::sample::Index>(),
        pick_char in any::<prop::sample::Index>(),
        replacement in any::<char>(),
    ) {
        let messages = encode(&record);
        let damaged_line = pick_line.index(messages.len());
        let original = &messages[damaged_line];
        let at = pick_char.index(original.len());
        let replaced = original.as_bytes()[at] as char;
        let replacement = if replacement == replaced { (replaced as u8 ^ 1) as char } else { replacement };
        let mut damaged: String = original.clone();
        damaged.replace_range(at..at + 1, &replacement.to_string());
        let mut lines = messages.clone();
        lines[damaged_line] = damaged;
        let decoded = decode_lines(&lines);
        prop_assert!(!decoded.problems.is_empty());
        // Only a damaged summary may leave the record decodable, and then it is the right one.
        prop_assert!(decoded.records.is_empty() || (damaged_line == 0 && decoded.records == vec![record]),
            "{:?}", decoded.problems);
    }

    #[test]
    fn interleaved_and_shuffled_jobs_decode_to_the_same_records(
        records in prop::collection::vec(job_record(), 1..6),
        seed in any::<u64>(),
    ) {
        // Distinct keys: proptest rarely produces two equal ones, but make sure.
        let mut records = records;
        for (i, r) in records.iter_mut().enumerate() {
            r.pid = i as u32;
        }
        let mut lines: Vec<String> = records.iter().flat_map(syslog_lines).collect();
        lines.push("Nov 23 09:00:02 node1 kernel: unrelated line".into());
        shuffle(&mut lines, seed);
        let decoded = decode_lines(&lines);
        prop_assert_eq!(decoded.problems, vec![]);
        let key = |r: &JobRecord| r.wire_key();
        let mut got = decoded.records;
        got.sort_by_key(key);
        records.sort_by_key(key);
        prop_assert_eq!(got, records);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn version_1_lines_still_round_trip(record in job_record()) {
        let lines = as_syslog(common::encode_v1(&record));
        for line in &lines {
            prop_assert!(line.contains(" MPISTAT1 "));
        }
        let decoded = decode_lines(&lines);
        prop_assert_eq!(decoded.problems, vec![]);
        prop_assert_eq!(decoded.records, vec![record]);
    }

    #[test]
    fn the_index_read_without_the_record_is_the_records(record in job_record(), v1 in any::<bool>()) {
        let messages = if v1 { common::encode_v1(&record) } else { encode(&record) };
        let mut assembler = Assembler::new();
        for line in as_syslog(messages) {
            assembler.push(line);
        }
        let job = assembler.take_complete().pop().unwrap();
        let decoded = job.decode().unwrap();
        prop_assert_eq!(&decoded.record, &record);
        prop_assert_eq!(
            job.indexed().unwrap(),
            IndexedJob { index: JobIndex::of(&record), deflated: decoded.deflated }
        );
        prop_assert_eq!(JobIndex::of(&record).key(), record.key());
        prop_assert_eq!(JobIndex::of(&record).wire_key(), job.key.clone());
    }

    #[test]
    fn every_index_that_is_not_the_records_is_reported(record in job_record(), which in any::<usize>()) {
        let forged = tampered(&JobIndex::of(&record), which);
        let decoded = decode_lines(&as_syslog(common::encode_v2_with_index(&record, &forged)));
        prop_assert_eq!(decoded.records, vec![]);
        let mismatch = matches!(&decoded.problems[..],
            [Problem::IndexMismatch { differences, .. }] if differences.len() == 1);
        prop_assert!(mismatch, "{:?}", decoded.problems);
    }
}

/// Fisher–Yates with a tiny xorshift, so a failing case replays from its seed.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed | 1;
    for i in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        items.swap(i, (state % (i as u64 + 1)) as usize);
    }
}

/// What reading a stored record gave when every record had a decompressor and buffer of its
/// own (`decompress_to_vec_with_limit`), for [`stored_record`]'s reused one to be held to.
fn stored_record_fresh(deflated: &[u8]) -> Result<JobRecord, Unreadable> {
    use miniz_oxide::inflate::{decompress_to_vec_with_limit, TINFLStatus};
    let json =
        decompress_to_vec_with_limit(deflated, RECORD_JSON_MAX).map_err(|e| match e.status {
            TINFLStatus::HasMoreOutput => {
                Unreadable::Oversized(Oversize::cut_off("record JSON", RECORD_JSON_MAX))
            }
            _ => Unreadable::Deflate(e.to_string()),
        })?;
    stored_json_record(&json)
}

/// A record's deflated JSON, damaged or not: `damage` 0 keeps it, 1 flips a bit, 2 cuts it
/// short, 3 appends bytes, else it is replaced by random bytes.
fn damaged(mut deflated: Vec<u8>, damage: u8, at: prop::sample::Index, bytes: Vec<u8>) -> Vec<u8> {
    match damage % 5 {
        0 => {}
        1 if !deflated.is_empty() => {
            let i = at.index(deflated.len());
            deflated[i] ^= 1 << (bytes.len() % 8);
        }
        2 => deflated.truncate(at.index(deflated.len() + 1)),
        3 => deflated.extend(bytes),
        _ => deflated = bytes,
    }
    deflated
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The thread's reused decompressor (one after another, large and small, broken and not)
    /// reads every stored record as a fresh one did, and refuses what it refused, saying the same.
    #[test]
    fn stored_records_read_with_the_reused_decompressor_as_with_a_fresh_one(
        record in job_record(),
        damage in any::<u8>(),
        at in any::<prop::sample::Index>(),
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let json = serde_json::to_vec(&record).unwrap();
        let deflated = damaged(miniz_oxide::deflate::compress_to_vec(&json, 6), damage, at, bytes);
        prop_assert_eq!(stored_record(&deflated), stored_record_fresh(&deflated));
    }
}

/// Inflating to exactly the limit is read, a byte more is oversized, as before; between and
/// after, small records still read (the buffer grown for the large ones is reused or given back).
#[test]
fn stored_records_at_the_inflate_limit_read_as_with_a_fresh_decompressor() {
    let small = miniz_oxide::deflate::compress_to_vec(b"{}", 6);
    for size in [
        RECORD_JSON_MAX - 1,
        RECORD_JSON_MAX,
        RECORD_JSON_MAX + 1,
        3 * RECORD_JSON_MAX,
    ] {
        let mut json = vec![b' '; size];
        json[0] = b'{';
        json[size - 1] = b'}';
        let deflated = miniz_oxide::deflate::compress_to_vec(&json, 6);
        let read = stored_record(&deflated);
        assert_eq!(read, stored_record_fresh(&deflated), "{size} bytes");
        let oversized = matches!(read, Err(Unreadable::Oversized(_)));
        assert_eq!(oversized, size > RECORD_JSON_MAX, "{size} bytes: {read:?}");
        assert_eq!(stored_record(&small), stored_record_fresh(&small));
    }
}
