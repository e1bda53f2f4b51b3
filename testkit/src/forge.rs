//! Lines the crate's encoder does not write: wire version 1, as the profilers of earlier
//! releases do, and version 2 with any index, as a forger (or a buggy writer) would.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use mpistat_record::{encode, JobIndex, JobRecord};

/// Payload characters per line: short enough for `MAX_MESSAGE` with any part numbers.
const CHUNK: usize = 700;

/// The messages of a record whose payload (before base64) is `payload`, written in wire
/// `version` with `record_crc`, part 0 being the summary the current encoder writes.
pub fn messages(version: u32, record: &JobRecord, payload: &[u8], record_crc: u32) -> Vec<String> {
    let summary = encode(record)[0].splitn(6, ' ').nth(5).unwrap().to_string();
    lines(
        &format!("MPISTAT{version}"),
        &record.wire_key(),
        &summary,
        payload,
        record_crc,
    )
}

/// The messages with marker and version `marker` (e.g. `MPISTAT2`, `MPISTATA1`) of the record
/// with key `key`: part 0 `summary`, then `payload` in base64.
pub fn lines(
    marker: &str,
    key: &str,
    summary: &str,
    payload: &[u8],
    record_crc: u32,
) -> Vec<String> {
    let text = URL_SAFE_NO_PAD.encode(payload);
    let data: Vec<&str> = std::iter::once(summary)
        .chain(
            text.as_bytes()
                .chunks(CHUNK)
                .map(|c| std::str::from_utf8(c).unwrap()),
        )
        .collect();
    let parts = data.len();
    data.iter()
        .enumerate()
        .map(|(part, chunk)| {
            let head = format!("{marker} {key} {part}/{parts} {record_crc:08x} ");
            let line_crc = crc32fast::hash(format!("{head}{chunk}").as_bytes());
            format!("{head}{line_crc:08x} {chunk}")
        })
        .collect()
}

/// An analysis record's messages whose payload is `deflated` (any bytes; its crc right).
pub fn messages_of_kind(marker: &str, key: &str, summary: &str, deflated: &[u8]) -> Vec<String> {
    lines(marker, key, summary, deflated, crc32fast::hash(deflated))
}

/// `record` in wire version 1 (payload: the deflated JSON; record crc: of the JSON).
pub fn encode_v1(record: &JobRecord) -> Vec<String> {
    let json = serde_json::to_vec(record).unwrap();
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 9);
    messages(1, record, &deflated, crc32fast::hash(&json))
}

/// `record` in wire version 2 but with `index` sent as its index, all checksums right.
pub fn encode_v2_with_index(record: &JobRecord, index: &JobIndex) -> Vec<String> {
    let mut payload = serde_json::to_vec(index).unwrap();
    payload.push(b'\n');
    payload.extend(miniz_oxide::deflate::compress_to_vec(
        &serde_json::to_vec(record).unwrap(),
        6,
    ));
    let crc = crc32fast::hash(&payload);
    messages(2, record, &payload, crc)
}
