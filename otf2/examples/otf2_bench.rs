//! The export and the reading alone, for `bench/otf2.sh`: prints the events they handled.
//!
//! `otf2_bench export TRACE_DIR OUT` writes the archive (OTF2 events written);
//! `otf2_bench read ARCHIVE` reads every rank's events onto the analysis model (model events).

use mpistat_analysis::source::TraceSource;
use mpistat_otf2::{export_dir, Otf2Archive};
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [command, dir, out] if command == "export" => {
            let exported = export_dir(Path::new(dir), Path::new(out), &mut |_| {})?;
            println!("{} events", exported.events);
        }
        [command, archive] if command == "read" => {
            let archive = Otf2Archive::open(Path::new(archive))?;
            let ranks = archive.survey()?.world;
            let mut events = 0;
            for rank in 0..ranks {
                let mut reader = archive.events(rank)?;
                events += reader.by_ref().count();
                reader.finish()?;
            }
            println!("{events} events");
        }
        _ => {
            eprintln!("usage: otf2_bench export TRACE_DIR OUT | otf2_bench read ARCHIVE");
            std::process::exit(2);
        }
    }
    Ok(())
}
