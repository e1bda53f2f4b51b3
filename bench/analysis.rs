//! Benchmark of the trace analysis (not a test): generates a halo-exchange trace of RANKS ranks
//! with at least EVENTS events (defaults 64 and 10 000 000; override with arguments), then prints
//! bytes per event of the trace format and events per second of decoding and of the analysis.
//!
//! `cargo run --release -p mpistat-analysis --bin mpistat-analysis-bench -- [RANKS] [EVENTS]`

use mpistat_analysis::builder::{ExecutionBuilder, WORLD};
use mpistat_analysis::tracefile::{decode_rank, encode_rank};
use std::time::Instant;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>().expect("numbers: RANKS EVENTS"));
    let ranks = args.next().unwrap_or(64) as u32;
    let target = args.next().unwrap_or(10_000_000) as usize;

    let started = Instant::now();
    let trace = generate(ranks, target);
    let events = trace.event_count();
    println!(
        "generated {events} events on {ranks} ranks in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let files: Vec<Vec<u8>> = trace
        .ranks
        .iter()
        .enumerate()
        .map(|(rank, events)| encode_rank(rank as u32, events).expect("encode"))
        .collect();
    let encode = started.elapsed().as_secs_f64();
    let bytes: usize = files.iter().map(Vec::len).sum();
    println!(
        "trace files: {bytes} bytes, {:.2} bytes/event, encoded at {:.1} M events/s",
        bytes as f64 / events as f64,
        events as f64 / encode / 1e6
    );

    let started = Instant::now();
    for file in &files {
        decode_rank(file, "bench").expect("decode");
    }
    let decode = started.elapsed().as_secs_f64();
    println!(
        "decoded at {:.1} M events/s (one thread)",
        events as f64 / decode / 1e6
    );

    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let analysis = mpistat_analysis::analyze(&trace).expect("analysis");
    let analyze = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    println!(
        "analysed in {analyze:.2} s: {:.1} M events/s on {} threads; waiting {:.3} s, critical path {} segments",
        events as f64 / analyze / 1e6,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        analysis.total_waiting / 1e9,
        analysis.critical_path.len()
    );
    println!(
        "analysis CPU time {cpu:.2} s (all threads): {:.1} M events per CPU second",
        events as f64 / cpu / 1e6
    );
}

/// User plus system CPU time of this process so far (Linux `/proc/self/stat`, 100 ticks/s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or("");
    // utime and stime are fields 14 and 15 of the line: 12th and 13th after the name.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (field(11) + field(12)) / 100.0
}

/// A 1-D halo exchange with uneven, varying work and an allreduce every 10 iterations.
fn generate(ranks: u32, target: usize) -> mpistat_analysis::model::Trace {
    let mut b = ExecutionBuilder::new(ranks);
    let work = b.region("work", "");
    let (send, recv) = (
        b.region("MPI_Send", "halo.c:40"),
        b.region("MPI_Recv", "halo.c:41"),
    );
    let allreduce = b.region("MPI_Allreduce", "halo.c:60");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let per_iteration = ranks as usize * 14;
    for iteration in 0..target.div_ceil(per_iteration) {
        for rank in 0..ranks {
            b.compute(rank, work, 10_000 + random() % 5_000);
        }
        for rank in 0..ranks {
            b.message(
                (rank, send),
                ((rank + 1) % ranks, recv),
                0,
                4096,
                false,
                200,
                300,
            );
        }
        for rank in 0..ranks {
            b.message(
                (rank, send),
                ((rank + ranks - 1) % ranks, recv),
                1,
                4096,
                false,
                200,
                300,
            );
        }
        if iteration % 10 == 9 {
            b.collective(WORLD, allreduce, None, 1_000);
        }
    }
    b.finish()
}
