//! Writes a syslog file of generated job records, as rsyslog would with the site template (with
//! attested uids), for the benchmarks: `gen_records COUNT USERS FILE` (week 2026-W47, uniform
//! jobs: bench/ingest.sh) or `gen_records COUNT USERS FILE varied [FIRST END]` (November 2026,
//! varied jobs with imbalance, counters and histograms: bench/site_report.sh; jobs FIRST..END
//! of the COUNT only, so that bench/scale.sh makes a big month in parts).

use mpistat_testkit::synthetic as common;

use std::io::{BufWriter, Write};

/// November 2026 (UTC).
const NOVEMBER_START_MS: u64 = 1_793_491_200_000;
const NOVEMBER_MS: u64 = 30 * 86_400_000;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (count, users, file, varied, part) = match &args[..] {
        [_, count, users, file] => (count, users, file, false, None),
        [_, count, users, file, kind] if kind == "varied" => (count, users, file, true, None),
        [_, count, users, file, kind, first, end] if kind == "varied" => {
            (count, users, file, true, Some((first, end)))
        }
        _ => anyhow::bail!("usage: gen_records COUNT USERS FILE [varied [FIRST END]]"),
    };
    let (count, users): (u64, u64) = (count.parse()?, users.parse()?);
    let part = match part {
        Some((first, end)) => first.parse()?..end.parse::<u64>()?.min(count),
        None => 0..count,
    };
    let mut out = BufWriter::new(std::fs::File::create(file)?);
    let records: Box<dyn Iterator<Item = _>> = if varied {
        Box::new(common::varied_jobs_part(
            part,
            count,
            users,
            NOVEMBER_START_MS,
            NOVEMBER_MS,
        ))
    } else {
        Box::new(common::jobs_of_many_users(count, users))
    };
    for record in records {
        for line in common::syslog_lines(&record, Some(record.uid)) {
            out.write_all(line.as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}
