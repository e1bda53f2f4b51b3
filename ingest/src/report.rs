//! `mpistat ingest --report`: what the database holds and everything that was not stored as a
//! job, by kind, so that nothing is silently dropped.

use mpistat_store::ReadStore;
use std::collections::BTreeMap;
use std::io::Write;

/// Print the stored jobs, the rejected entries (counted by kind, then one line each) and the
/// read position of every file.
pub fn print(db: &ReadStore, out: &mut impl Write) -> Result<(), crate::Error> {
    writeln!(out, "jobs stored: {}", db.job_count()?)?;
    let rejected = db.rejected()?;
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for (kind, ..) in &rejected {
        *by_kind.entry(kind).or_default() += 1;
    }
    let counts: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let counts = if counts.is_empty() {
        "none".to_string()
    } else {
        counts.join(", ")
    };
    writeln!(out, "rejected: {counts}")?;
    for (kind, reference, source, detail) in &rejected {
        writeln!(out, "  {kind:<11} {reference}  {source}: {detail}")?;
    }
    writeln!(out, "files:")?;
    for (path, offset) in db.position_paths()? {
        writeln!(out, "  {path}: read to byte {offset}")?;
    }
    Ok(())
}
