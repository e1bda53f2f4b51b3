//! The archives of the seed patterns as the reference tools read them: `otf2-print` reads
//! every event, and Python's `otf2` finds mpistat's own trace in them, event by event, with
//! every message matched.

mod common;

use mpistat_analysis::examples;
use mpistat_otf2::reference::{otf2_print_events, python_check};
use mpistat_otf2::{anchor_file, export_dir};
use mpistat_trace::model::Trace;
use mpistat_trace::tracefile::{read_dir, write_dir};

fn check(name: &str, trace: &Trace) {
    let base = std::env::temp_dir().join(format!("mpistat-otf2-ref-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (dir, out) = (base.join("mpt"), base.join("otf2"));
    write_dir(&dir, trace).unwrap();
    let exported = export_dir(&dir, &out, &mut |_| {}).unwrap();
    let printed = otf2_print_events(&anchor_file(&out)).unwrap();
    assert_eq!(
        printed, exported.events,
        "{name}: otf2-print reads every event"
    );
    let (own, _) = read_dir(&dir).unwrap();
    let said = python_check(&out, &own, true).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(said.starts_with("ok: "), "{said}");
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn the_papers_examples() {
    check("fig2", &examples::topc_figure_2().finish());
    check("fig3", &examples::topc_figure_3().finish());
}

#[test]
fn a_halo_exchange_and_mixed_collectives() {
    check("halo", &examples::halo(6, 3_000));
    check("mixed", &examples::mixed(5, 300, 7));
}

#[test]
fn requests_partitions_and_a_topology() {
    check("requests", &common::requests_and_topology());
}
