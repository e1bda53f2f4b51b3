//! `mpistat show --json`: the imbalance fields under the names the interface promises.

use mpistat_digest::json::render;
use mpistat_record::model::{Imbalance, PartitionImbalance};
use mpistat_record::{JobRecord, RoutineStats, Stat};

#[test]
fn imbalance_fields_have_their_documented_names() {
    let record = JobRecord {
        version: 1,
        ranks: 4,
        wall_ns: Stat {
            sum: 8_000_000_000,
            min: 2_000_000_000,
            max: 2_000_000_000,
            max_rank: 0,
        },
        routines: vec![RoutineStats {
            name: "MPI_Allreduce".into(),
            class: "collective".into(),
            calls: Stat::single(400, 0),
            sync_ns: Some(1_000_000_000),
            ..Default::default()
        }],
        imbalance: Some(Imbalance {
            supersteps: 101,
            merge_factor: 2,
            critical_path_ns: 250_000_000,
            profile_ns: 250_000_000,
            work_max_ns: 1_250_000_000,
            work_sum_ns: 4_000_000_000,
            useful_max_ns: 1_600_000_000,
            useful_sum_ns: 5_600_000_000,
            inter_partition_ns: 200_000_000,
            partitions: vec![PartitionImbalance {
                appnum: 1,
                ranks: 2,
                critical_path_ns: 50_000_000,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let v: serde_json::Value = serde_json::from_str(&render(&record)).unwrap();
    let i = &v["imbalance"];
    let f = |name: &str| {
        i[name]
            .as_f64()
            .unwrap_or_else(|| panic!("imbalance.{name} in {i}"))
    };
    assert_eq!(f("critical_path_s"), 0.25);
    assert_eq!(f("profile_s"), 0.25);
    assert_eq!(f("critical_path_percent_of_work"), 25.0);
    assert_eq!(f("load_balance"), 0.875);
    assert_eq!(f("comm_efficiency"), 0.8);
    assert!((f("parallel_efficiency") - 0.7).abs() < 1e-12);
    assert_eq!(f("merge_factor"), 2.0);
    assert_eq!(i["lower_bound"], true);
    assert_eq!(f("inter_partition_s"), 0.2);
    assert_eq!(i["partitions"][0]["appnum"], 1);
    assert_eq!(v["routines"]["MPI_Allreduce"]["sync_s"], 1.0);
}

#[test]
fn records_without_estimates_have_no_imbalance_fields() {
    let v: serde_json::Value = serde_json::from_str(&render(&JobRecord::default())).unwrap();
    assert!(v.get("imbalance").is_none());
}
