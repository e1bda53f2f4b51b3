//! `mpistat show` end to end on syslog text: snapshots of both views of a fixed record, and a
//! messy file (a good job, a job missing a part, a duplicate, junk) that still shows the good job.

use mpistat_digest::cli::ShowArgs;
use mpistat_digest::show::{run, Outcome};
use mpistat_record::model::{NodeBytes, RanksPerNode};
use mpistat_record::{encode, Binding, JobRecord, RoutineStats, Stat};
use std::io::Write;
use std::path::PathBuf;

fn stat(sum: u64, min: u64, max: u64, max_rank: u32) -> Stat {
    Stat {
        sum,
        min,
        max,
        max_rank,
    }
}

fn routine(
    name: &str,
    class: &str,
    calls: u64,
    time_ns: Stat,
    bytes: u64,
    hist: Vec<u64>,
) -> RoutineStats {
    RoutineStats {
        name: name.into(),
        class: class.into(),
        calls: stat(calls, calls / 4, calls / 2, 3),
        time_ns,
        count: stat(bytes / 8, 0, bytes / 16, 1),
        bytes: stat(bytes, bytes / 8, bytes / 2, 1),
        hist,
        sync_ns: None,
        counters: Default::default(),
        node_bytes: None,
    }
}

fn fixed_record() -> JobRecord {
    JobRecord {
        version: 1,
        job_id: "4711".into(),
        uid: 1000,
        user: "alice".into(),
        exe: "/home/alice/bin/my solver".into(),
        argv0: "./my solver".into(),
        app: String::new(),
        interpreter: None,
        host: "node017".into(),
        pid: 31337,
        ranks: 4,
        nodes: 2,
        start_unix_ms: 1_795_424_400_000,
        end_unix_ms: 1_795_424_412_345,
        wall_ns: stat(49_000_000_000, 12_100_000_000, 12_345_000_000, 0),
        mpi_ns: stat(11_500_000_000, 2_100_000_000, 3_900_000_000, 2),
        binding: Binding::Fortran,
        thread_level: "funneled".into(),
        mpi_library: "Open MPI v4.1.5, package: Debian OpenMPI".into(),
        env: [("OMPI_MCA_btl".to_string(), "^openib".to_string())].into(),
        user_pmpi_tool: false,
        overhead_ns: stat(4_200_000, 1_000_000, 1_100_000, 1),
        partial: None,
        routines: vec![
            routine(
                "MPI_Send",
                "p2p",
                40_000,
                stat(2_500_000_000, 400_000_000, 900_000_000, 2),
                327_680_000,
                vec![0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 39_990],
            ),
            routine(
                "MPI_Recv",
                "p2p",
                40_000,
                stat(5_000_000_000, 1_000_000_000, 1_600_000_000, 2),
                327_680_000,
                vec![],
            ),
            routine(
                "MPI_Allreduce",
                "collective",
                12_000_000,
                stat(3_999_000_000, 900_000_000, 1_100_000_000, 0),
                96_000_000,
                vec![0, 0, 0, 0, 12_000_000],
            ),
            routine(
                "MPI_Barrier",
                "collective",
                8,
                stat(1_000, 200, 300, 3),
                0,
                vec![],
            ),
        ],
        imbalance: None,
        counters: None,
        trace: None,
        slurm: None,
        host_list: String::new(),
        ranks_per_node: None,
    }
}

/// The fixed record as a version 3 profiler on 2 nodes writes it: hosts, ranks per node, and
/// the bytes that stayed on a node.
fn multi_node_record() -> JobRecord {
    let mut r = fixed_record();
    r.version = mpistat_record::model::MODEL_VERSION;
    r.host_list = "node[017-018]".into();
    r.ranks_per_node = Some(RanksPerNode { min: 1, max: 3 });
    let split = [("MPI_Send", 3), ("MPI_Recv", 3), ("MPI_Allreduce", 0)];
    for (name, quarters_on) in split {
        let routine = r.routines.iter_mut().find(|x| x.name == name).unwrap();
        let on_node = routine.bytes.sum / 4 * quarters_on;
        routine.node_bytes = Some(NodeBytes {
            on_node,
            off_node: routine.bytes.sum - on_node,
        });
    }
    r
}

#[test]
fn text_view_of_a_multi_node_job() {
    let (out, err, _) = show(false, &syslog(&encode(&multi_node_record())));
    assert_eq!(err, "1 records, 0 problems\n");
    assert!(out.lines().all(|l| l.len() <= 100), "{out}");
    for line in [
        "  ranks       4 on 2 node(s), 1-3 per node",
        "  hosts       node[017-018]",
    ] {
        assert!(out.lines().any(|l| l == line), "no {line:?} in:\n{out}");
    }
    insta::assert_snapshot!(out);
}

fn syslog(messages: &[String]) -> String {
    messages
        .iter()
        .map(|m| format!("2026-11-23T09:00:13+00:00 node017 mpistat[31337]: {m}\n"))
        .collect()
}

fn show(json: bool, input: &str) -> (String, String, Outcome) {
    let args = ShowArgs {
        json,
        files: vec![PathBuf::from("-")],
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let outcome = run(&args, input.as_bytes(), &mut out, &mut err).unwrap();
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
        outcome,
    )
}

#[test]
fn text_view() {
    let (out, err, _) = show(false, &syslog(&encode(&fixed_record())));
    assert_eq!(err, "1 records, 0 problems\n");
    assert!(out.lines().all(|l| l.len() <= 100), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn json_view() {
    let mut partial = fixed_record();
    partial.partial = Some("MPI_Abort".into());
    partial.binding = Binding::C;
    let (out, err, _) = show(true, &syslog(&encode(&partial)));
    assert_eq!(err, "1 records, 0 problems\n");
    let job: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(job["binding"], "C");
    assert_eq!(job["partial"], true);
    assert_eq!(job["wall_s"], 12.345);
    assert_eq!(job["mpi_s"], 11.5);
    assert_eq!(job["routines"]["MPI_Send"]["calls"], 40_000);
    assert_eq!(job["routines"]["MPI_Send"]["bytes"], 327_680_000);
    assert_eq!(job["routines"]["MPI_Send"]["time_s"], 2.5);
    insta::assert_snapshot!(out);
}

#[test]
fn messy_file_shows_the_good_job_and_reports_the_rest() {
    let good = fixed_record();
    let mut broken = fixed_record();
    broken.job_id = "4712".into();
    let good_lines = encode(&good);
    let mut broken_lines = encode(&broken);
    broken_lines.remove(1);
    let mut lines = vec!["Nov 23 09:00:00 node017 kernel: eth0 link up".to_string()];
    lines.extend(broken_lines);
    lines.extend(good_lines.iter().cloned());
    lines.push(good_lines[1].clone());
    lines.push("MPISTAT1 garbage".into());
    let (out, err, outcome) = show(false, &syslog(&lines));
    assert!(out.starts_with("job 4711 "), "{out}");
    assert!(!out.contains("job 4712"));
    assert_eq!(
        outcome,
        Outcome {
            records: 1,
            problems: 3,
            unreadable_inputs: 0
        }
    );
    let err: Vec<&str> = err.lines().collect();
    assert_eq!(err.len(), 4, "{err:#?}");
    assert!(err[0].starts_with("mpistat: -:"), "{}", err[0]);
    assert!(err.iter().any(|l| l.contains("duplicate of part 1")));
    assert!(err.iter().any(|l| l.contains("corrupt mpistat line")));
    assert!(err
        .iter()
        .any(|l| l.contains(&format!("job {}: missing part(s) 1 of", broken.wire_key()))));
    assert_eq!(err[3], "1 records, 3 problems");
}

#[test]
fn unreadable_file_is_reported_and_others_still_shown() {
    let mut file = tempfile_in_target("one_job.log");
    file.1
        .write_all(syslog(&encode(&fixed_record())).as_bytes())
        .unwrap();
    let args = ShowArgs {
        json: true,
        files: vec![PathBuf::from("/nonexistent/syslog"), file.0.clone()],
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let outcome = run(&args, std::io::empty(), &mut out, &mut err).unwrap();
    assert_eq!(
        outcome,
        Outcome {
            records: 1,
            problems: 0,
            unreadable_inputs: 1
        }
    );
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.starts_with("mpistat: cannot read /nonexistent/syslog: "),
        "{err}"
    );
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
}

/// A fresh file under the target directory (no temp-file crate needed).
fn tempfile_in_target(name: &str) -> (PathBuf, std::fs::File) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    (path, file)
}
