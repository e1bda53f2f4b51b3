//! The rollups as stored by the mpistat of version 1 (written by `mpistat ingest` of that time
//! from `record/tests/fixtures/wire-v1.log`, read back from its database) stay readable, and
//! this mpistat writes them again byte for byte: the stored shape did not change.

use mpistat_figures::stored;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim_end()
        .to_string()
}

#[test]
fn a_day_rollup_of_version_1_reads_and_writes_back_the_same() {
    let json = fixture("day-v1.json");
    let day = stored::day_of_json(&json).unwrap();
    assert_eq!(day.total.jobs, 2);
    assert_eq!(day.total.wall_ns, 96_000_000_000);
    assert_eq!(stored::day_json(&day).unwrap(), json);
}

#[test]
fn a_user_rollup_of_version_1_reads_and_writes_back_the_same() {
    let (totals, detail) = (
        fixture("user-totals-v1.json"),
        fixture("user-detail-v1.json"),
    );
    let user = stored::user_of_json(&totals, &detail).unwrap();
    assert_eq!(user.totals.jobs, 1);
    assert_eq!(user.totals.mpi_ns, 11_232_000_000);
    assert!(user
        .totals
        .rate(mpistat_figures::sums::INSTRUCTIONS)
        .is_some());
    assert_eq!(user.top_jobs().count(), 1);
    assert!(!user.routines.routines.is_empty());
    assert_eq!(stored::totals_json(&user.totals).unwrap(), totals);
    assert_eq!(stored::detail_json(&user).unwrap(), detail);
}

#[test]
fn a_rollup_of_another_shape_is_unreadable_not_a_default() {
    assert!(stored::day_of_json(r#"{"total":{"jobs":"many"}}"#).is_err());
    assert!(stored::user_of_json("{}", "[]").is_err());
}
