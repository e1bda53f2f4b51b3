//! Writes a syslog file of generated job records, as rsyslog would with the site template (with
//! attested uids), for the ingest benchmark: `gen_records COUNT USERS FILE`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufWriter, Write};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, count, users, file] = &args[..] else {
        anyhow::bail!("usage: gen_records COUNT USERS FILE");
    };
    let mut out = BufWriter::new(std::fs::File::create(file)?);
    for record in common::jobs_of_many_users(count.parse()?, users.parse()?) {
        for line in common::syslog_lines(&record, Some(record.uid)) {
            out.write_all(line.as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}
