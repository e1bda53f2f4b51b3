//! Benchmark of the trace analysis (not a test): generates halo-exchange traces of RANKS ranks,
//! writes them as trace files, and times the whole pipeline (read the files, timeline, matching,
//! forward replay, backward replay, critical path, metrics) per pass, in wall and CPU time.
//! Prints bytes per event of the format, events per second, and a scaling series (the trace at a
//! quarter, half, one and two times EVENTS: time per event should stay flat).
//!
//! `cargo run --release -p mpistat-analysis --bin mpistat-analysis-bench -- [RANKS] [EVENTS] [REPS]`
//! (defaults 64 ranks, 10 000 000 events, 5 repetitions; the best and the median are shown).

use mpistat_analysis::analysis::{run_passes_on_dir, summarise};
use mpistat_analysis::examples::halo;
use mpistat_trace::tracefile::write_dir;
use std::path::Path;
use std::time::Instant;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>().expect("numbers: RANKS EVENTS REPS"));
    let ranks = args.next().unwrap_or(64) as u32;
    let target = args.next().unwrap_or(10_000_000) as usize;
    let reps = args.next().unwrap_or(5).max(1) as usize;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = std::env::temp_dir().join(format!("mpistat-analysis-bench.{}", std::process::id()));

    println!("analysis bench: {ranks} ranks, {threads} threads, best and median of {reps} runs");
    let mut series = Vec::new();
    for (scale, size) in [(1, 4), (1, 2), (1, 1), (2, 1)] {
        let events = measure(
            ranks,
            target * scale / size,
            reps,
            &dir,
            scale == 1 && size == 1,
        );
        series.push(events);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("\nscaling (whole pipeline, best run):");
    println!(
        "{:>12} {:>10} {:>10} {:>12} {:>12} {:>12}",
        "events", "wall s", "CPU s", "ns/event", "CPU ns/ev", "M events/s"
    );
    for (events, wall, cpu) in &series {
        let per = |t: f64| t * 1e9 / *events as f64;
        println!(
            "{events:>12} {wall:>10.3} {cpu:>10.3} {:>12.1} {:>12.1} {:>12.2}",
            per(*wall),
            per(*cpu),
            *events as f64 / wall / 1e6
        );
    }
}

/// Generates and writes a trace of about `target` events, analyses it `reps` times; with
/// `detail`, prints every pass. Returns the events and the best run's wall and CPU seconds.
fn measure(ranks: u32, target: usize, reps: usize, dir: &Path, detail: bool) -> (usize, f64, f64) {
    let trace = halo(ranks, target);
    let events = trace.event_count();
    let _ = std::fs::remove_dir_all(dir);
    write_dir(dir, &trace).expect("write the trace");
    drop(trace);
    let bytes: u64 = std::fs::read_dir(dir)
        .expect("trace dir")
        .map(|e| e.expect("entry").metadata().expect("metadata").len())
        .sum();
    println!(
        "\n{events} events: trace files {bytes} bytes, {:.2} bytes/event",
        bytes as f64 / events as f64
    );

    // Per run: (pass, wall s, CPU s) in pipeline order.
    let mut runs: Vec<Vec<(&'static str, f64, f64)>> = Vec::new();
    for _ in 0..reps {
        let mut laps = Laps::start();
        let (passes, problems) =
            run_passes_on_dir(dir, &mut |pass| laps.lap(pass)).expect("analysis");
        assert!(problems.is_empty(), "{problems:?}");
        let analysis = summarise(&passes);
        laps.lap("metrics");
        assert!(analysis.total_waiting > 0.0 && !analysis.critical_path.is_empty());
        drop((passes, analysis));
        laps.lap("free");
        runs.push(laps.laps);
    }
    let total = |run: &[(&str, f64, f64)]| {
        run.iter()
            .fold((0.0, 0.0), |(w, c), &(_, lw, lc)| (w + lw, c + lc))
    };
    runs.sort_by(|a, b| total(a).0.total_cmp(&total(b).0));
    let (best_wall, best_cpu) = total(&runs[0]);
    let (median_wall, median_cpu) = total(&runs[runs.len() / 2]);
    if detail {
        println!(
            "{:<16} {:>9} {:>9} {:>9} {:>9}   (best run by wall time; median over runs)",
            "pass", "wall ms", "CPU ms", "med wall", "med CPU"
        );
        for (index, &(pass, wall, cpu)) in runs[0].iter().enumerate() {
            let mut walls: Vec<f64> = runs.iter().map(|r| r[index].1).collect();
            let mut cpus: Vec<f64> = runs.iter().map(|r| r[index].2).collect();
            walls.sort_by(f64::total_cmp);
            cpus.sort_by(f64::total_cmp);
            println!(
                "{pass:<16} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                wall * 1e3,
                cpu * 1e3,
                walls[walls.len() / 2] * 1e3,
                cpus[cpus.len() / 2] * 1e3
            );
        }
    }
    println!(
        "pipeline: best {best_wall:.3} s wall ({:.2} M events/s), {best_cpu:.3} s CPU ({:.2} M events per CPU second); median {median_wall:.3} s wall, {median_cpu:.3} s CPU",
        events as f64 / best_wall / 1e6,
        events as f64 / best_cpu / 1e6,
    );
    (events, best_wall, best_cpu)
}

/// Wall and CPU time between successive laps.
struct Laps {
    wall: Instant,
    cpu: f64,
    laps: Vec<(&'static str, f64, f64)>,
}

impl Laps {
    fn start() -> Self {
        Laps {
            wall: Instant::now(),
            cpu: cpu_seconds(),
            laps: Vec::new(),
        }
    }

    fn lap(&mut self, pass: &'static str) {
        let (wall, cpu) = (Instant::now(), cpu_seconds());
        self.laps
            .push((pass, (wall - self.wall).as_secs_f64(), cpu - self.cpu));
        (self.wall, self.cpu) = (wall, cpu);
    }
}

/// User plus system CPU time of this process so far, all threads (finished ones too).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
