//! `mpistat analyze` on the worked example of Böhme et al., "Identifying the root causes of wait
//! states" (Fig. 3), written as a trace directory.

use mpistat_analysis::builder::ExecutionBuilder;
use mpistat_analysis_report::{run, AnalyzeOptions, Format};
use mpistat_trace::model::Cartesian;
use mpistat_trace::tracefile::write_dir;
use std::path::PathBuf;

/// Böhme et al.'s Fig. 3 with one tick per second, on a 1-D process grid.
fn figure_3_dir(name: &str) -> PathBuf {
    let mut b = ExecutionBuilder::new(3);
    let (f, g, h) = (b.region("f", ""), b.region("g", ""), b.region("h", ""));
    let (s3, r3) = (
        b.region("MPI_Send", "fig3.c:30"),
        b.region("MPI_Recv", "fig3.c:31"),
    );
    let (s4, r4) = (
        b.region("MPI_Send", "fig3.c:40"),
        b.region("MPI_Recv", "fig3.c:41"),
    );
    b.set_cartesian(Cartesian {
        dims: vec![3],
        coords: vec![vec![0], vec![1], vec![2]],
    });
    b.compute(0, f, 2);
    b.compute(0, g, 3);
    b.compute(1, f, 1);
    b.compute(1, h, 1);
    b.message((0, s3), (1, r3), 0, 8, false, 0, 1);
    b.compute(1, g, 1);
    b.compute(2, f, 2);
    b.compute(2, h, 1);
    b.compute(2, g, 2);
    b.message((1, s4), (2, r4), 0, 8, false, 0, 1);
    let mut trace = b.finish();
    trace.definitions.ticks_per_second = 1;
    let dir = std::env::temp_dir().join(format!("mpistat-analyze-{name}-{}", std::process::id()));
    write_dir(&dir, &trace).unwrap();
    dir
}

fn analyze(name: &str, format: Format, perfetto: Option<PathBuf>) -> (String, String) {
    let dir = figure_3_dir(name);
    let args = AnalyzeOptions {
        config: None,
        memory_limit: None,
        format,
        perfetto,
        otf2: None,
        trace_dir: dir.clone(),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    run(&args, &mut out, &mut err).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn text_report_of_figure_3() {
    let (out, err) = analyze("text", Format::Text, None);
    assert_eq!(err, "");
    insta::assert_snapshot!(out);
}

#[test]
fn json_and_html_reports() {
    let (json, _) = analyze("json", Format::Json, None);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["total_waiting"], 5.0);
    let (html, _) = analyze("html", Format::Html, None);
    assert!(
        html.starts_with("<!DOCTYPE html>")
            && html.contains("<table>")
            && html.contains("Late Sender")
    );
}

#[test]
fn perfetto_export_marks_the_critical_path() {
    let path = std::env::temp_dir().join(format!(
        "mpistat-analyze-perfetto-{}.json",
        std::process::id()
    ));
    analyze("perfetto", Format::Text, Some(path.clone()));
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    std::fs::remove_file(path).unwrap();
    let events = value["traceEvents"].as_array().unwrap();
    let critical: Vec<_> = events.iter().filter(|e| e["cat"] == "critical").collect();
    assert_eq!(critical.len(), 3);
    assert_eq!(
        critical
            .iter()
            .map(|e| e["dur"].as_f64().unwrap())
            .sum::<f64>(),
        8e6
    );
    assert_eq!(events.iter().filter(|e| e["cat"] == "wait").count(), 2);
}

/// `--otf2 OUT` writes the archive; `mpistat analyze OUT` reads it back: the same report, to
/// the byte, in every format.
#[test]
fn an_exported_archive_analysed_again_gives_the_same_report() {
    let dir = figure_3_dir("otf2");
    let out = dir.with_extension("otf2");
    let run_on = |trace_dir: PathBuf, format, otf2: Option<PathBuf>| {
        let args = AnalyzeOptions {
            config: None,
            memory_limit: None,
            format,
            perfetto: None,
            otf2,
            trace_dir,
        };
        let (mut report, mut err) = (Vec::new(), Vec::new());
        run(&args, &mut report, &mut err).unwrap();
        assert_eq!(String::from_utf8(err).unwrap(), "");
        String::from_utf8(report).unwrap()
    };
    let text = run_on(dir.clone(), Format::Text, Some(out.clone()));
    assert!(out.join("traces.otf2").is_file());
    assert_eq!(run_on(out.clone(), Format::Text, None), text);
    for format in [Format::Json, Format::WaitStates, Format::Summary] {
        assert_eq!(
            run_on(out.clone(), format, None),
            run_on(dir.clone(), format, None),
            "{format:?}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(out).unwrap();
}

#[test]
fn a_missing_directory_is_a_clear_error() {
    let analyze = |dir: &std::path::Path| {
        let args = AnalyzeOptions {
            config: None,
            memory_limit: None,
            format: Format::Text,
            perfetto: None,
            otf2: None,
            trace_dir: dir.to_path_buf(),
        };
        run(&args, &mut Vec::new(), &mut Vec::new())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        analyze(std::path::Path::new("/nonexistent/trace")),
        "/nonexistent/trace: No such file or directory (os error 2)"
    );
    let empty = std::env::temp_dir().join(format!("mpistat-empty-trace-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let err = analyze(&empty);
    std::fs::remove_dir_all(&empty).unwrap();
    assert_eq!(
        err,
        format!(
            "{}: no definitions file `definitions.mpt` (nor the profiler's local-NNNNNN.mpt files)",
            empty.display()
        )
    );
}

#[inline(never)]
fn a_call_site() -> u32 {
    std::hint::black_box(42)
}

/// The label `mpistat analyze` gives a call site in this test binary (at `a_call_site`),
/// recorded with `build_id`, in a profiler-written directory (local definitions).
fn label_of_own_call_site(build_id: &str) -> String {
    use mpistat_trace::model::{
        Communicator, Event, EventKind, LocalDefinitions, Module, MpiClass, Region, RegionRole,
    };
    use mpistat_trace::tracefile::{encode_local, encode_rank, local_file_name, rank_file_name};
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    let addr = a_call_site as *const () as usize;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    assert_ne!(
        unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) },
        0
    );
    // Sites are return addresses: the analysis looks up the byte before.
    let offset = addr - info.dli_fbase as usize + 1;
    let dir = std::env::temp_dir().join(format!(
        "mpistat-own-site-{}-{build_id}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let local = LocalDefinitions {
        rank: 0,
        world_size: 1,
        ticks_per_second: 1_000_000_000,
        regions: vec![Region {
            name: "MPI_Barrier".into(),
            site: format!("{name}+{offset:#x}"),
            role: RegionRole::Mpi(MpiClass::Barrier),
        }],
        communicators: vec![Communicator { members: vec![0] }],
        modules: vec![Module {
            path: exe.display().to_string(),
            build_id: build_id.into(),
            load_address: info.dli_fbase as u64,
        }],
        ..Default::default()
    };
    std::fs::write(dir.join(local_file_name(0)), encode_local(&local)).unwrap();
    let events = [
        Event {
            time: 1,
            kind: EventKind::Enter { region: 0 },
        },
        Event {
            time: 2,
            kind: EventKind::CollectiveExit {
                comm: 0,
                root: None,
                sent: 0,
                received: 0,
            },
        },
    ];
    std::fs::write(
        dir.join(rank_file_name(0)),
        encode_rank(0, &events).unwrap(),
    )
    .unwrap();
    let args = AnalyzeOptions {
        config: None,
        memory_limit: None,
        format: Format::Json,
        perfetto: None,
        otf2: None,
        trace_dir: dir.clone(),
    };
    let mut out = Vec::new();
    run(&args, &mut out, &mut Vec::new()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    String::from_utf8(out).unwrap()
}

/// Call sites become source lines only for the build the trace ran: a rebuilt object (another
/// build-id) keeps `object+0xOFFSET`, never a wrong line.
#[test]
fn call_sites_are_symbolised_only_for_the_same_build() {
    let exe = std::env::current_exe().unwrap();
    let notes = std::process::Command::new("readelf")
        .arg("-n")
        .arg(&exe)
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&notes.stdout).into_owned();
    let build_id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID:"))
        .expect("the test binary has a build-id")
        .trim()
        .to_string();
    // Symbolised: `file.rs:LINE` (the first instruction may be inlined from std).
    let same = label_of_own_call_site(&build_id);
    assert!(same.contains(".rs:") && !same.contains("+0x"), "{same}");
    let rebuilt = label_of_own_call_site(&"00".repeat(20));
    assert!(
        !rebuilt.contains(".rs:") && rebuilt.contains("+0x"),
        "{rebuilt}"
    );
}
