//! The record's deflater (`mpistat_record::deflate`): whatever it is given, the site side's
//! decoder (miniz_oxide's inflate) gives it back exactly, never larger than stored; and on
//! records it compresses about as well as miniz_oxide at level 9, which it replaced.

use miniz_oxide::inflate::decompress_to_vec;
use mpistat_record::deflate::{compress, stored_len};
use mpistat_record::limits::RECORD_JSON_MAX;
use mpistat_record::{JobRecord, RoutineStats, Stat};
use proptest::prelude::*;

fn round_trip(data: &[u8]) {
    let deflated = compress(data);
    let inflated = decompress_to_vec(&deflated).expect("a valid DEFLATE stream");
    assert!(
        inflated == data,
        "{} bytes came back as {} others",
        data.len(),
        inflated.len()
    );
    assert!(
        deflated.len() <= stored_len(data.len()),
        "{} bytes deflated to {}",
        data.len(),
        deflated.len()
    );
}

/// Bytes no compressor shrinks (a xorshift stream).
fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// JSON-like text: fragments of a record's vocabulary, numbers and a few odd bytes.
fn record_like() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(b"{\"name\":\"MPI_".to_vec()),
        Just(b"\",\"class\":\"collective\",\"calls\":{\"sum\":".to_vec()),
        Just(b",\"min\":".to_vec()),
        Just(b",\"max\":".to_vec()),
        Just(b",\"max_rank\":0},".to_vec()),
        Just(b"Allreduce".to_vec()),
        Just(b"Send".to_vec()),
        any::<u64>().prop_map(|n| n.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..8),
    ];
    prop::collection::vec(fragment, 0..600).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_bytes_come_back_exactly(data in prop::collection::vec(any::<u8>(), 0..5000)) {
        round_trip(&data);
    }

    #[test]
    fn few_distinct_bytes_come_back_exactly(
        data in prop::collection::vec(prop::sample::select(b"ab{}".to_vec()), 0..20_000),
    ) {
        round_trip(&data);
    }

    #[test]
    fn record_like_text_comes_back_exactly(data in record_like()) {
        round_trip(&data);
    }

    #[test]
    fn far_repeats_come_back_exactly(
        head in prop::collection::vec(any::<u8>(), 1..300),
        gap in 0usize..70_000,
        seed in any::<u64>(),
    ) {
        // A repeat at or just beyond the farthest distance a match may reach (32,768).
        let mut data = head.clone();
        data.extend(incompressible(gap, seed));
        data.extend(&head);
        round_trip(&data);
    }
}

#[test]
fn edge_inputs_come_back_exactly() {
    round_trip(b"");
    round_trip(b"x");
    round_trip(b"xy");
    round_trip(b"xyz");
    for len in [
        3, 4, 257, 258, 259, 260, 32_768, 32_769, 65_535, 65_536, 200_000,
    ] {
        round_trip(&vec![b'a'; len]);
        round_trip(&incompressible(len, len as u64));
    }
    for len in [RECORD_JSON_MAX - 1, RECORD_JSON_MAX, RECORD_JSON_MAX + 1] {
        round_trip(&incompressible(len, 7));
        round_trip(&vec![0; len]);
        let text: Vec<u8> = (0..len).map(|at| b"{\"calls\":12345}"[at % 15]).collect();
        round_trip(&text);
    }
}

#[test]
fn the_empty_input_is_the_smallest_stream() {
    // A final fixed block with only its end: 10 bits.
    assert_eq!(compress(b"").len(), 2);
}

fn stat(sum: u64) -> Stat {
    Stat {
        sum,
        min: sum / 7,
        max: sum / 3,
        max_rank: (sum % 1000) as u32,
    }
}

/// Records as the profiler writes them: the synthetic week's jobs, one with 150 routines
/// (histograms included) and one with a 1,000-rank host list that does not fold into a range.
fn records() -> Vec<(String, JobRecord)> {
    let mut records: Vec<(String, JobRecord)> = (0..5)
        .map(|n| {
            (
                format!("synthetic job {n}"),
                mpistat_testkit::synthetic::job(
                    n,
                    "alice",
                    1000 + n as u32,
                    1_764_000_000_000,
                    64,
                    3600,
                    30,
                ),
            )
        })
        .collect();
    let mut many = records[0].1.clone();
    many.routines = (0..150u64)
        .map(|n| RoutineStats {
            name: format!("MPI_Routine_{n}"),
            class: ["p2p", "collective", "io", "misc"][n as usize % 4].into(),
            calls: stat(1000 + n * 37),
            time_ns: stat(123_456_789 * (n + 1)),
            count: stat(4096 * n),
            bytes: stat(32_768 * n + 17),
            hist: (0..(n % 24)).map(|b| b * 1000 + n).collect(),
            ..Default::default()
        })
        .collect();
    records.push(("150 routines".into(), many));
    let mut hosts = records[0].1.clone();
    let names: Vec<String> = (0..1000)
        .map(|n| format!("cn{:04}", n * 3 + n % 2))
        .collect();
    hosts.host_list = mpistat_record::hostlist::compress(&names, 64 * 1024);
    hosts.ranks = 1000;
    records.push(("1,000-rank host list".into(), hosts));
    records
}

#[test]
fn records_compress_about_as_well_as_miniz_level_9() {
    let (mut ours_total, mut miniz_total) = (0, 0);
    for (what, record) in records() {
        let json = serde_json::to_vec(&record).unwrap();
        let ours = compress(&json);
        let miniz = miniz_oxide::deflate::compress_to_vec(&json, 9);
        round_trip(&json);
        println!(
            "{what}: JSON {} bytes, ours {} ({:.3} of miniz), miniz level 9 {}",
            json.len(),
            ours.len(),
            ours.len() as f64 / miniz.len() as f64,
            miniz.len()
        );
        ours_total += ours.len();
        miniz_total += miniz.len();
    }
    let ratio = ours_total as f64 / miniz_total as f64;
    println!("all: ours {ours_total}, miniz {miniz_total}: {ratio:.3}");
    assert!(ratio <= 1.05, "{ratio:.3} of miniz level 9's size");
}
