//! The rollups as stored by the mpistat of version 1 (written by `mpistat ingest` of that time
//! from `record/tests/fixtures/wire-v1.log`, read back from its database) stay readable, and
//! this mpistat writes them again in the same shape: the same fields, nested the same way, with
//! the same values. (Not always the same bytes: serde_json reads a float to within an ulp, as
//! the mpistat of version 1 did when it added a day's jobs to a stored rollup.)

use mpistat_figures::stored;
use serde_json::Value;

/// `written` holds all of `stored` again: every field, nested the same way, with the same value
/// (numbers as serde_json reads them); a field added since (read with its default) may be more.
fn assert_same_shape(written: &str, stored: &str) {
    let (written, stored): (Value, Value) = (
        serde_json::from_str(written).unwrap(),
        serde_json::from_str(stored).unwrap(),
    );
    assert_holds(&written, &stored, "");
}

fn assert_holds(written: &Value, stored: &Value, at: &str) {
    match (written, stored) {
        (Value::Object(written), Value::Object(stored)) => {
            for (key, value) in stored {
                let Some(again) = written.get(key) else {
                    panic!("{at}.{key} is no longer written");
                };
                assert_holds(again, value, &format!("{at}.{key}"));
            }
        }
        (Value::Array(written), Value::Array(stored)) => {
            assert_eq!(written.len(), stored.len(), "{at}");
            for (n, (again, value)) in written.iter().zip(stored).enumerate() {
                assert_holds(again, value, &format!("{at}[{n}]"));
            }
        }
        _ => assert_eq!(written, stored, "{at}"),
    }
}

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
    assert_same_shape(&stored::day_json(&day).unwrap(), &json);
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
    assert_same_shape(&stored::totals_json(&user.totals).unwrap(), &totals);
    assert_same_shape(&stored::detail_json(&user).unwrap(), &detail);
}

#[test]
fn a_rollup_of_another_shape_is_unreadable_not_a_default() {
    assert!(stored::day_of_json(r#"{"total":{"jobs":"many"}}"#).is_err());
    assert!(stored::user_of_json("{}", "[]").is_err());
}
