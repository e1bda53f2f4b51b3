//! The limits of what a record may carry (`mpistat_record::limits`): how large real and
//! largest possible records are next to them, that the encoder cuts any record to them and
//! decoders take it whole, and that records beyond them (the attacks of issue 34 §2, written
//! as a forger writes them) are reported as oversized, never decoded.

use mpistat_testkit::forge as common;

use mpistat_record::limits::{self, Oversize};
use mpistat_record::model::{
    CounterEvent, CounterSet, Imbalance, NodeBytes, PartitionImbalance, RanksPerNode, SlurmFacts,
    TraceInfo, HIST_BUCKETS, HOST_LIST_MAX,
};
use mpistat_record::wire::{self, Problem};
use mpistat_record::{decode, encode, JobIndex, JobRecord, RoutineStats, Stat};
use std::collections::BTreeMap;

/// Routines of MPICH 4.0's table (the larger family's): a job calls at most these.
const MPICH_ROUTINES: usize = 613;

fn stat(sum: u64, ranks: u64) -> Stat {
    Stat {
        sum,
        min: sum / ranks / 2,
        max: sum / ranks * 2,
        max_rank: (ranks - 1) as u32,
    }
}

/// Figures of about `magnitude` that differ as measured ones do (xorshift), so that the record
/// compresses as a real one.
fn figures(seed: u64, magnitude: u64) -> impl FnMut() -> u64 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        magnitude / 2 + state % magnitude
    }
}

/// What a 1,024-rank job of an hour that called 150 routines sends: every figure as large as
/// such a job makes it, full histograms and counters, a 1 kB host list, 20 environment
/// variables, Slurm's facts.
fn real_big_record() -> JobRecord {
    let ranks = 1024;
    let hour_ns = 3_600_000_000_000u64;
    let mut figure = figures(42, 1 << 20);
    let mut about = |magnitude: u64| magnitude / (1 << 20) * figure();
    let routines = (0..150)
        .map(|i| RoutineStats {
            name: format!("MPI_Ineighbor_alltoall_{i:03}"),
            class: "collective".into(),
            calls: stat(about(1_000_000_000), ranks),
            time_ns: stat(about(hour_ns * ranks / 7), ranks),
            count: stat(about(1_000_000_000_000_000), ranks),
            bytes: stat(about(8_000_000_000_000_000), ranks),
            hist: (0..HIST_BUCKETS).map(|_| about(1_000_000_000)).collect(),
            sync_ns: Some(about(hour_ns * 100)),
            counters: ["instructions", "cycles", "fp-ops", "llc-misses"]
                .iter()
                .map(|e| (e.to_string(), about(10_000_000_000_000_000)))
                .collect(),
            node_bytes: Some(NodeBytes {
                on_node: about(4_000_000_000_000_000),
                off_node: about(4_000_000_000_000_000),
            }),
        })
        .collect();
    JobRecord {
        version: mpistat_record::model::MODEL_VERSION,
        job_id: "4711234".into(),
        uid: 12345,
        user: "alice.longname".into(),
        exe: "/scratch/projects/climate/alice/builds/icon-2.6.6/bin/icon".into(),
        argv0: "/scratch/projects/climate/alice/builds/icon-2.6.6/bin/icon".into(),
        host: "node0001.cluster.example.org".into(),
        pid: 1_234_567,
        ranks: ranks as u32,
        nodes: 16,
        host_list: "x".repeat(HOST_LIST_MAX),
        ranks_per_node: Some(RanksPerNode { min: 64, max: 64 }),
        start_unix_ms: 1_795_424_400_000,
        end_unix_ms: 1_795_428_000_000,
        wall_ns: stat(hour_ns * ranks, ranks),
        mpi_ns: stat(hour_ns * ranks / 3, ranks),
        thread_level: "multiple".into(),
        mpi_library:
            "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
                .into(),
        env: (0..20)
            .map(|i| {
                (
                    format!("OMPI_MCA_btl_tcp_option_{i}"),
                    "^openib,self,vader".repeat(4),
                )
            })
            .collect(),
        overhead_ns: stat(123_456_789_012, ranks),
        routines,
        imbalance: Some(Imbalance {
            supersteps: 1_000_000,
            merge_factor: 2048,
            critical_path_ns: hour_ns,
            series_ns: vec![123_456_789_012; 60],
            series_factor: 16_667,
            ..Default::default()
        }),
        counters: Some(CounterSet {
            mode: "per-call read".into(),
            events: ["instructions", "cycles", "fp-ops", "llc-misses"]
                .iter()
                .map(|e| CounterEvent {
                    name: e.to_string(),
                    app: 12_345_678_901_234_567,
                    mpi: 12_345_678_901_234_567,
                    unavailable: None,
                })
                .collect(),
        }),
        slurm: Some(SlurmFacts {
            job_id: "4711234".into(),
            step_id: Some("0".into()),
            job_name: Some("icon-r2b8-1024".into()),
            cluster: Some("hpc1".into()),
            account: Some("climate".into()),
            partition: Some("compute".into()),
            qos: Some("normal".into()),
            node_list: Some("node[0001-0016]".into()),
            nodes: Some(16),
            cpus_per_node: Some("64(x16)".into()),
            time_limit_s: Some(86_400),
            submit_unix_s: Some(1_795_420_000),
            start_unix_s: Some(1_795_424_400),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The largest record mpistat's profiler can write: every text a user controls at its limit
/// and made of control characters (six bytes each in JSON), every routine of MPICH's table
/// with every figure at its widest, as many environment variables, counter events and
/// partitions as the limits allow.
fn largest_record(routines: usize) -> JobRecord {
    let text = |n: usize| "\u{1}".repeat(n);
    let widest = Stat {
        sum: u64::MAX,
        min: u64::MAX,
        max: u64::MAX,
        max_rank: u32::MAX,
    };
    let events: BTreeMap<String, u64> = (0..10)
        .map(|e| (format!("event-{e:02}-named-long"), u64::MAX))
        .collect();
    let env_value = text(limits::ENV_BYTES_MAX / limits::ENV_ENTRIES_MAX - 24);
    let mut record = JobRecord {
        version: mpistat_record::model::MODEL_VERSION,
        job_id: text(limits::NAME_MAX),
        uid: u32::MAX,
        user: text(limits::NAME_MAX),
        exe: text(limits::PATH_MAX),
        argv0: text(limits::PATH_MAX),
        app: text(limits::PATH_MAX),
        interpreter: Some(text(limits::PATH_MAX)),
        host: text(limits::NAME_MAX),
        pid: u32::MAX,
        ranks: u32::MAX,
        nodes: u32::MAX,
        host_list: text(HOST_LIST_MAX),
        ranks_per_node: Some(RanksPerNode {
            min: u32::MAX,
            max: u32::MAX,
        }),
        start_unix_ms: u64::MAX,
        end_unix_ms: u64::MAX,
        wall_ns: widest,
        mpi_ns: widest,
        thread_level: "serialized".into(),
        mpi_library: text(limits::TEXT_MAX),
        env: (0..limits::ENV_ENTRIES_MAX)
            .map(|i| (format!("OMPI_MCA_{i:015}"), env_value.clone()))
            .collect(),
        user_pmpi_tool: true,
        overhead_ns: widest,
        partial: Some(text(limits::TEXT_MAX)),
        routines: (0..routines)
            .map(|i| RoutineStats {
                name: format!("MPI_Neighbor_alltoallw_init_c{i:04}"),
                class: "collective".into(),
                calls: widest,
                time_ns: widest,
                count: widest,
                bytes: widest,
                hist: vec![u64::MAX; HIST_BUCKETS],
                sync_ns: Some(u64::MAX),
                counters: events.clone(),
                node_bytes: Some(NodeBytes {
                    on_node: u64::MAX,
                    off_node: u64::MAX,
                }),
            })
            .collect(),
        imbalance: Some(Imbalance {
            series_ns: vec![u64::MAX; limits::SERIES_MAX],
            partitions: vec![
                PartitionImbalance {
                    appnum: u32::MAX,
                    ranks: u32::MAX,
                    critical_path_ns: u64::MAX,
                    profile_ns: u64::MAX,
                    work_max_ns: u64::MAX,
                    work_sum_ns: u64::MAX,
                    useful_max_ns: u64::MAX,
                    useful_sum_ns: u64::MAX,
                };
                limits::PARTITIONS_MAX
            ],
            unavailable: Some(text(limits::TEXT_MAX)),
            ..Default::default()
        }),
        counters: Some(CounterSet {
            mode: text(limits::NAME_MAX),
            events: (0..limits::COUNTER_EVENTS_MAX)
                .map(|_| CounterEvent {
                    name: text(limits::ROUTINE_NAME_MAX),
                    app: u64::MAX,
                    mpi: u64::MAX,
                    unavailable: Some(text(limits::TEXT_MAX)),
                })
                .collect(),
        }),
        trace: Some(TraceInfo {
            dir: text(limits::PATH_MAX),
            reason: text(limits::NAME_MAX),
            events: u64::MAX,
            ranks_written: u32::MAX,
            stopped: Some(text(limits::TEXT_MAX)),
            overhead_ns: u64::MAX,
        }),
        slurm: Some(SlurmFacts {
            job_id: text(limits::NAME_MAX),
            step_id: Some(text(limits::NAME_MAX)),
            array_job_id: Some(text(limits::NAME_MAX)),
            array_task_id: Some(text(limits::NAME_MAX)),
            job_name: Some(text(limits::NAME_MAX)),
            cluster: Some(text(limits::NAME_MAX)),
            account: Some(text(limits::NAME_MAX)),
            partition: Some(text(limits::NAME_MAX)),
            qos: Some(text(limits::NAME_MAX)),
            node_list: Some(text(limits::PATH_MAX)),
            nodes: Some(u32::MAX),
            cpus_per_node: Some(text(limits::TEXT_MAX)),
            time_limit_s: Some(u64::MAX),
            submit_unix_s: Some(u64::MAX),
            start_unix_s: Some(u64::MAX),
        }),
        ..Default::default()
    };
    record.routines.truncate(routines);
    record
}

fn json_len(record: &JobRecord) -> usize {
    serde_json::to_vec(record).unwrap().len()
}

#[test]
fn real_and_largest_records_fit_the_json_limit() {
    let real = real_big_record();
    assert_eq!(limits::check_record(&mut real.clone()), Ok(()));
    let lines = encode(&real);
    let deflated = miniz_oxide::deflate::compress_to_vec(&serde_json::to_vec(&real).unwrap(), 9);
    eprintln!(
        "a 1,024-rank job calling 150 routines: record JSON {} bytes, deflated {} bytes, {} syslog lines",
        json_len(&real),
        deflated.len(),
        lines.len()
    );
    assert_eq!(decode(lines.iter().map(String::as_str)).records, vec![real]);

    let mut largest = largest_record(MPICH_ROUTINES);
    assert_eq!(limits::check_record(&mut largest), Ok(()));
    let largest_len = json_len(&largest);
    eprintln!(
        "the largest record the profiler can write ({MPICH_ROUTINES} routines): JSON {largest_len} bytes \
         (limit {})",
        limits::RECORD_JSON_MAX
    );
    assert!(largest_len <= limits::RECORD_JSON_MAX);
    // It still comes back whole over the wire.
    let decoded = decode(encode(&largest).iter().map(String::as_str));
    assert_eq!(decoded.problems, vec![]);
    assert_eq!(decoded.records, vec![largest]);
    let all = largest_record(limits::ROUTINES_MAX);
    eprintln!(
        "with {} routines (the routine limit) it would be {} bytes",
        limits::ROUTINES_MAX,
        json_len(&all)
    );
}

/// Lines of `record` as a forger writes them: uncut, index and checksums right.
fn forged(record: &JobRecord) -> Vec<String> {
    common::encode_v2_with_index(record, &JobIndex::of(record))
}

/// The one problem decoding `lines` gives, which must be that the record is oversized.
fn oversize_of(lines: &[String]) -> Oversize {
    let decoded = decode(lines.iter().map(String::as_str));
    assert_eq!(decoded.records, vec![]);
    match &decoded.problems[..] {
        [Problem::Oversized { oversize, .. }] => oversize.clone(),
        other => panic!(
            "{} problems: {:?}",
            other.len(),
            &other[..other.len().min(3)]
        ),
    }
}

fn small_record() -> JobRecord {
    JobRecord {
        version: mpistat_record::model::MODEL_VERSION,
        job_id: "7".into(),
        uid: 1000,
        user: "mallory".into(),
        exe: "/home/mallory/a.out".into(),
        host: "node1".into(),
        ranks: 2,
        routines: vec![RoutineStats {
            name: "MPI_Send".into(),
            class: "p2p".into(),
            calls: Stat::single(1, 0),
            hist: vec![0, 1],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn a_histogram_of_twenty_million_buckets_is_oversized() {
    let mut attack = small_record();
    attack.routines[0].hist = vec![0; 20_000_000];
    attack.routines[0].hist.push(1);
    let lines = forged(&attack);
    let sent: usize = lines.iter().map(String::len).sum();
    eprintln!(
        "20,000,001 buckets: {} lines, {sent} bytes sent",
        lines.len()
    );
    // Its JSON is 40 MB: cut off at the JSON limit before it is parsed.
    let oversize = oversize_of(&lines);
    assert_eq!(
        oversize.to_string(),
        format!("record JSON of more than {} bytes", limits::RECORD_JSON_MAX)
    );
    // A histogram small enough for the JSON limit is still one no profiler writes.
    attack.routines[0].hist = vec![1; 1000];
    let oversize = oversize_of(&forged(&attack));
    assert_eq!(
        oversize.to_string(),
        "\"MPI_Send\"'s histogram of 1000 buckets > 48"
    );
}

#[test]
fn long_environment_values_names_and_executables_are_oversized() {
    let mut attack = small_record();
    attack
        .env
        .insert("OMPI_MCA_x".into(), "A".repeat(60_000_000));
    let lines = forged(&attack);
    eprintln!(
        "a 60 MB environment value: {} bytes sent",
        lines.iter().map(String::len).sum::<usize>()
    );
    assert!(oversize_of(&lines)
        .to_string()
        .starts_with("record JSON of more than"));
    attack.env.insert("OMPI_MCA_x".into(), "A".repeat(100_000));
    assert_eq!(
        oversize_of(&forged(&attack)).to_string(),
        "environment value \"OMPI_MCA_x\" of 100000 bytes > 1024"
    );

    // An executable of 5 MB: version 1 (no index) inflates the record; in version 2 the index
    // (not compressed) would need more parts than a record has, and a shorter one is cut off
    // at the index's limit.
    let mut attack = small_record();
    attack.exe = "/".repeat(5_000_000);
    let v1 = common::encode_v1(&attack);
    eprintln!(
        "a 5 MB executable name in wire version 1: {} bytes sent",
        v1.iter().map(String::len).sum::<usize>()
    );
    assert!(oversize_of(&v1)
        .to_string()
        .starts_with("record JSON of more than"));
    let decoded = decode(forged(&attack).iter().map(String::as_str));
    assert!(decoded.records.is_empty());
    assert!(decoded
        .problems
        .iter()
        .all(|p| matches!(p, Problem::CorruptLine { reason, .. }
        if reason.ends_with(&format!("out of range (at most {} parts)", wire::MAX_PARTS)))));
    attack.exe = "/".repeat(100_000);
    assert_eq!(
        oversize_of(&forged(&attack)).to_string(),
        format!("index JSON of more than {} bytes", limits::INDEX_JSON_MAX)
    );
    attack.exe = "/".repeat(5_000);
    assert_eq!(
        oversize_of(&common::encode_v1(&attack)).to_string(),
        "exe of 5000 bytes > 4096"
    );
    assert_eq!(
        oversize_of(&forged(&attack)).to_string(),
        "exe of 5000 bytes > 4096"
    );
}

#[test]
fn a_stored_record_beyond_the_limits_is_not_read() {
    let mut attack = small_record();
    attack.routines[0].hist = vec![7; 49];
    let json = serde_json::to_vec(&attack).unwrap();
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 6);
    let reason = wire::stored_record(&deflated).unwrap_err().to_string();
    assert_eq!(
        reason,
        "oversized: \"MPI_Send\"'s histogram of 49 buckets > 48"
    );
    assert_eq!(
        wire::stored_json_record(&json).unwrap_err().to_string(),
        reason
    );
    let bomb = miniz_oxide::deflate::compress_to_vec(&vec![b' '; 64 << 20], 9);
    eprintln!("64 MiB of spaces deflate to {} bytes", bomb.len());
    assert_eq!(
        wire::stored_record(&bomb).unwrap_err().to_string(),
        format!(
            "oversized: record JSON of more than {} bytes",
            limits::RECORD_JSON_MAX
        )
    );
    assert_eq!(
        wire::stored_record(&deflated[..10]).map_err(|e| e.to_string().starts_with("deflate")),
        Err(true)
    );
    // Within the limits it is read.
    attack.routines[0].hist.pop();
    let deflated = miniz_oxide::deflate::compress_to_vec(&serde_json::to_vec(&attack).unwrap(), 6);
    assert_eq!(wire::stored_record(&deflated), Ok(attack));
}

#[test]
fn an_analysis_beyond_its_limits_is_oversized() {
    use mpistat_record::analysis::{AnalysisRecord, ANALYSIS_MODEL_VERSION};
    let mut analysis = AnalysisRecord {
        version: ANALYSIS_MODEL_VERSION,
        job_key: "0123456789abcdef".into(),
        uid: 1000,
        user: "mallory".into(),
        host: "node1".into(),
        dir: "/home/mallory/.mpistat/traces/1".into(),
        summary: Some("x".repeat(limits::ANALYSIS_SUMMARY_MAX + 1)),
        error: None,
        analysed_unix_ms: 1,
    };
    // The encoder cuts it; a forger's copy is refused.
    let decoded = decode(
        mpistat_record::encode_analysis(&analysis)
            .iter()
            .map(String::as_str),
    );
    assert_eq!(decoded.problems, vec![]);
    let summary = decoded.analyses[0].summary.as_deref().unwrap();
    assert!(summary.len() == limits::ANALYSIS_SUMMARY_MAX && summary.ends_with("..."));
    let json = serde_json::to_vec(&analysis).unwrap();
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 6);
    let lines = common::messages_of_kind("MPISTATA1", &analysis.key(), "analysis", &deflated);
    let decoded = decode(lines.iter().map(String::as_str));
    assert!(decoded.analyses.is_empty());
    assert!(
        matches!(&decoded.problems[..], [Problem::Oversized { oversize, .. }]
            if oversize.to_string() == format!("summary of {} bytes > {}", limits::ANALYSIS_SUMMARY_MAX + 1, limits::ANALYSIS_SUMMARY_MAX)),
        "{:?}",
        decoded.problems
    );
    analysis.summary = None;
    assert_eq!(limits::check_analysis(&mut analysis), Ok(()));
}

#[test]
fn environment_beyond_its_limits_is_cut_saying_how_much() {
    let mut record = small_record();
    record.env = (0..300)
        .map(|i| (format!("OMPI_MCA_{i:03}"), "v".repeat(200)))
        .collect();
    limits::fit_record(&mut record);
    assert_eq!(limits::check_record(&mut record.clone()), Ok(()));
    let more = &record.env[limits::ENV_MORE_KEY];
    let kept = record.env.len() - 1;
    assert_eq!(*more, format!("{} more not recorded", 300 - kept));
    let bytes: usize = record.env.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(
        bytes <= limits::ENV_BYTES_MAX && kept > 100,
        "{bytes} bytes, {kept} kept"
    );
}
