//! Writes the halo-exchange example (`examples::halo`) of RANKS ranks and about EVENTS events as
//! trace files into DIR, for `bench/parallel_analysis.sh`.
//!
//! `cargo run --release -p mpistat-analysis --example write_halo -- RANKS EVENTS DIR`

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ranks, events, dir] = args.as_slice() else {
        eprintln!("usage: write_halo RANKS EVENTS DIR");
        std::process::exit(2);
    };
    let trace = mpistat_analysis::examples::halo(
        ranks.parse().expect("RANKS"),
        events.parse().expect("EVENTS"),
    );
    mpistat_trace::tracefile::write_dir(std::path::Path::new(dir), &trace).expect("write");
    println!("{} events", trace.event_count());
}
