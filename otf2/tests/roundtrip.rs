//! An mpistat trace exported as OTF2 and read back gives the same events, rank by rank, and
//! the same analysis, bit for bit.

mod common;

use common::requests_and_topology;
use mpistat_analysis::analysis::{run_passes_on, run_passes_on_dir, summarise};
use mpistat_analysis::examples;
use mpistat_otf2::{export_dir, Otf2Archive};
use mpistat_trace::model::{Event, Trace};
use mpistat_trace::tracefile::{read_dir, write_dir};
use proptest::prelude::*;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpistat-otf2-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Writes `trace`, exports it, reads the archive back: the trace's events and the archive's,
/// rank by rank, and both analyses.
fn round_trip(name: &str, trace: &Trace) {
    let base = scratch(name);
    let (dir, out) = (base.join("mpt"), base.join("otf2"));
    write_dir(&dir, trace).unwrap();
    let exported = export_dir(&dir, &out, &mut |_| {}).unwrap();
    assert_eq!(exported.ranks as usize, trace.ranks.len());
    let archive = Otf2Archive::open(&out).unwrap();
    let (read, _) = read_dir(&dir).unwrap();
    assert_eq!(
        archive.definitions(),
        &read.definitions,
        "{name}: definitions"
    );
    for (rank, expected) in read.ranks.iter().enumerate() {
        let mut events = archive.events(rank as u32).unwrap();
        let got: Vec<Event> = events.by_ref().collect();
        assert_eq!(events.finish().unwrap(), 0, "{name}: nothing skipped");
        assert_eq!(&got, expected, "{name}: rank {rank}'s events");
    }
    let (mpistat, _) = run_passes_on_dir(&dir, &mut |_| {}).unwrap();
    let (otf2, problems) = run_passes_on(&archive, &mut |_| {}).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        summarise(&otf2),
        summarise(&mpistat),
        "{name}: the analysis"
    );
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn the_papers_examples_come_back_the_same() {
    round_trip("fig2", &examples::topc_figure_2().finish());
    round_trip("fig3", &examples::topc_figure_3().finish());
}

#[test]
fn a_halo_exchange_comes_back_the_same() {
    round_trip("halo", &examples::halo(8, 20_000));
}

#[test]
fn requests_and_topologies_come_back_the_same() {
    round_trip("requests", &requests_and_topology());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn mixed_executions_come_back_the_same(ranks in 1u32..7, steps in 0usize..120, seed: u64) {
        round_trip(&format!("mixed-{seed}"), &examples::mixed(ranks, steps, seed));
    }
}
