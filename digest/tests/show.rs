//! `mpistat show` end to end on syslog text: snapshots of both views of a fixed record, and a
//! messy file (a good job, a job missing a part, a duplicate, junk) that still shows the good job.

use mpistat_digest::show::{run, Outcome, ShowOptions};
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
    let args = ShowOptions {
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
    let args = ShowOptions {
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

/// A record with everything the text view can show (Slurm facts, a trace, an interpreter, a
/// partial end at the time limit, supersteps of two partitions, counters, node bytes), whose
/// values all depend on `k`: two of them (`k` = 1, 2) have the same shape and different values.
fn everything(k: u64) -> JobRecord {
    use mpistat_record::model::{
        CounterEvent, CounterSet, Imbalance, PartitionImbalance, SlurmFacts, TraceInfo,
    };
    let mut r = multi_node_record();
    let k32 = k as u32;
    r.job_id = format!("{k}4711.{k}");
    r.uid = 1000 + k32;
    r.user = format!("alice{k}");
    r.exe = format!("/usr/bin/python3.1{k}");
    r.app = format!("/home/alice{k}/run{k}.py");
    r.interpreter = Some(format!("python3.1{k}"));
    r.argv0 = format!("python{k}");
    r.host = format!("node0{k}7");
    r.pid = 31337 + k32;
    r.ranks = 4 * k32;
    r.nodes = 1 + k32;
    r.host_list = format!("node[0{k}7-0{k}8]");
    r.ranks_per_node = Some(RanksPerNode {
        min: k32,
        max: 2 * k32 + 1,
    });
    r.wall_ns = stat(
        40_000_000_000 + k * 3_100_000_000,
        9_100_000_000 + k * 1_000_000_000,
        12_345_000_000 + k * 2_300_000_000,
        k32,
    );
    r.mpi_ns = stat(
        9_500_000_000 + k * 4_000_000_000,
        1_100_000_000 + k * 500_000_000,
        3_100_000_000 + k * 700_000_000,
        2 + k32,
    );
    r.thread_level = format!("funneled{k}");
    r.mpi_library = format!("Open MPI v4.1.{k}, package: Debian OpenMPI");
    r.env = [(format!("OMPI_MCA_btl{k}"), format!("^openib{k}"))].into();
    r.user_pmpi_tool = true;
    r.overhead_ns = stat(4_200_000 * k + 1_300_000, 1_000_000, 1_100_000, 1);
    r.partial = Some(format!("SIGTERM{k}"));
    for (n, routine) in r.routines.iter_mut().enumerate() {
        let n = n as u64 + 1;
        routine.calls = stat(
            40_000 * n + 7 * k,
            1_000 * n + k,
            2_000 * n + k,
            n as u32 + k32,
        );
        routine.time_ns = stat(
            2_500_000_000 * n + k * 900_000_000,
            400_000_000 * n + k * 30_000_000,
            900_000_000 * n + k * 70_000_000,
            k32 + n as u32,
        );
        routine.bytes = stat(
            327_680_000 * n + k * 1_000_000_000,
            10_000 * k,
            20_000_000 * n * k,
            k32,
        );
        routine.count = stat(81_920_000 * n + k * 20_000_000, 10 * k, 2_000 * k, k32);
        if !routine.hist.is_empty() {
            routine.hist = routine
                .hist
                .iter()
                .map(|&m| m * (k + 1) + k * (m > 0) as u64)
                .collect();
        }
        if let Some(b) = &mut routine.node_bytes {
            b.on_node = routine.bytes.sum / (2 + k) * 2;
            b.off_node = routine.bytes.sum - b.on_node;
        }
        routine.counters = [(format!("instructions{k}"), 123_456_789 * n * k)].into();
    }
    let allreduce = r
        .routines
        .iter_mut()
        .find(|x| x.name == "MPI_Allreduce")
        .unwrap();
    allreduce.sync_ns = Some(1_500_000_000 + k * 400_000_000);
    r.imbalance = Some(Imbalance {
        supersteps: 1000 * k + 7,
        merge_factor: 2 + k,
        critical_path_ns: 2_000_000_000 + k * 1_300_000_000,
        profile_ns: 500_000_000 + k * 100_000_000,
        work_max_ns: 11_000_000_000 + k * 1_000_000_000,
        work_sum_ns: 39_000_000_000 + k * 7_000_000_000,
        useful_max_ns: 9_000_000_000 + k * 1_100_000_000,
        useful_sum_ns: 30_000_000_000 + k * 3_000_000_000,
        other_mpi_ns: 100_000_000 * k,
        inter_partition_ns: 300_000_000 + k * 200_000_000,
        series_ns: vec![10 * k, 70 * k, 140 * k],
        series_factor: 3 + k,
        partitions: (0..2)
            .map(|appnum| PartitionImbalance {
                appnum: appnum + 3 * k32,
                ranks: 2 * k32 + appnum,
                critical_path_ns: 700_000_000 + k * 110_000_000 + u64::from(appnum),
                profile_ns: 200_000_000 + k * 30_000_000 + u64::from(appnum),
                work_max_ns: 5_000_000_000 + k * 100_000_000,
                work_sum_ns: 19_000_000_000 + k * 3_000_000_000,
                useful_max_ns: 4_000_000_000,
                useful_sum_ns: 15_000_000_000,
            })
            .collect(),
        unavailable: None,
    });
    r.counters = Some(CounterSet {
        mode: format!("per-call read{k}"),
        events: vec![CounterEvent {
            name: format!("instructions{k}"),
            app: 80_100_000_000 + k * 9_000_000_000,
            mpi: 1_230_000_000 * k + 1,
            unavailable: None,
        }],
    });
    r.trace = Some(TraceInfo {
        dir: format!("/scratch/alice{k}/.mpistat/traces/{k}4711"),
        reason: format!("escalation{k}"),
        events: 1_234_567 * k,
        ranks_written: 3 + k32,
        stopped: Some(format!("budget reached at event {k}000")),
        overhead_ns: 12_345_000 * k,
    });
    let end_s = r.end_unix_ms / 1000;
    r.slurm = Some(SlurmFacts {
        job_id: format!("{k}12"),
        step_id: Some(format!("{k}")),
        array_job_id: Some(format!("{k}11")),
        array_task_id: Some(format!("{k}2")),
        job_name: Some(format!("solver{k}")),
        cluster: Some(format!("cluster{k}")),
        account: Some(format!("physics{k}")),
        partition: Some(format!("debug{k}")),
        qos: Some(format!("normal{k}")),
        node_list: Some(format!("n[0{k}-0{}]", k + 1)),
        nodes: Some(1 + k32),
        cpus_per_node: Some(format!("{}(x2)", 4 * k)),
        time_limit_s: Some(30 + k),
        submit_unix_s: Some(end_s - 1000 - 17 * k),
        start_unix_s: Some(end_s - 70 - 13 * k),
    });
    r
}

/// The words of a line of the text view: split at blanks and at the punctuation that separates
/// values in it (times keep their `:` and numbers their `.`; `=` separates a name from a value).
fn words(line: &str) -> Vec<&str> {
    line.split(|c: char| c.is_whitespace() || ",;()\"=`".contains(c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The parts of a word that joins values with `:` or `-` (`8KiB:79981`, `1-3`, `0:00:31`).
fn parts(word: &str) -> impl Iterator<Item = &str> {
    word.split([':', '-']).filter(|p| !p.is_empty())
}

/// The number a word of the text view stands for, in the JSON's units (seconds, bytes, events),
/// and how far from it rounding may have put the word: `12.3ms` is 0.0123 ± 0.00005.
fn number_of(word: &str) -> Option<(f64, f64)> {
    let word = word.trim_end_matches(['%', ':']);
    let end = word
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(word.len());
    let (digits, unit) = word.split_at(end);
    let value: f64 = digits.parse().ok()?;
    let scale = match unit.trim_end_matches("/s") {
        "" | "s" | "B" => 1.0,
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let decimals = digits.split_once('.').map_or(0, |(_, d)| d.len());
    let half_step = 0.5 * 10f64.powi(-(decimals as i32));
    Some((value * scale, half_step * scale))
}

/// Every string (keys too) and number in a JSON value.
fn leaves(value: &serde_json::Value, strings: &mut Vec<String>, numbers: &mut Vec<f64>) {
    match value {
        serde_json::Value::String(s) => strings.push(s.clone()),
        serde_json::Value::Number(n) => numbers.extend(n.as_f64()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| leaves(v, strings, numbers)),
        serde_json::Value::Object(fields) => {
            for (key, v) in fields {
                strings.push(key.clone());
                leaves(v, strings, numbers);
            }
        }
        _ => {}
    }
}

/// Whether `word` of the text view is in the JSON: within a string, or a number equal to one
/// of the JSON's up to the word's rounding (a percentage may be a fraction there).
fn in_json(word: &str, strings: &[String], numbers: &[f64]) -> bool {
    if strings.iter().any(|s| s.contains(word)) {
        return true;
    }
    let Some((value, slack)) = number_of(word) else {
        return false;
    };
    let close = |n: f64| (n - value).abs() <= slack * 1.000_001;
    numbers.iter().any(|&n| close(n) || close(100.0 * n))
}

/// `mpistat show --json` carries every value `mpistat show` prints. The text's values are found
/// by rendering two records of the same shape and different values: whatever differs between
/// the two texts is a value, and must be in that record's JSON (a string containing it, or a
/// number it rounds); what stays the same is the layout. So a field added to the text and
/// forgotten in the JSON fails here without a list of fields to keep up to date.
#[test]
fn json_has_every_value_the_text_shows() {
    let records = [everything(1), everything(2)];
    let texts = records.each_ref().map(mpistat_record::report::render);
    let lines = texts.each_ref().map(|t| t.lines().collect::<Vec<_>>());
    assert_eq!(
        lines[0].len(),
        lines[1].len(),
        "same shape:\n{}\n{}",
        texts[0],
        texts[1]
    );
    let mut missing = Vec::new();
    let mut values = 0;
    for (this, record) in records.iter().enumerate() {
        let json: serde_json::Value =
            serde_json::from_str(&mpistat_digest::json::render(record)).unwrap();
        let (mut strings, mut numbers) = (Vec::new(), Vec::new());
        leaves(&json, &mut strings, &mut numbers);
        for (line, other_line) in lines[this].iter().zip(&lines[1 - this]) {
            let (words, other_words) = (words(line), words(other_line));
            assert_eq!(words.len(), other_words.len(), "same shape: {line:?}");
            for (word, other_word) in words.iter().zip(&other_words) {
                for (part, other_part) in parts(word).zip(parts(other_word)) {
                    if part == other_part {
                        continue;
                    }
                    values += 1;
                    if !in_json(word, &strings, &numbers) && !in_json(part, &strings, &numbers) {
                        missing.push(format!("{part:?} of {word:?} in {line:?}"));
                    }
                }
            }
        }
    }
    eprintln!("{values} values of the text view checked");
    assert!(
        missing.is_empty(),
        "not in the JSON:\n{}",
        missing.join("\n")
    );
}
