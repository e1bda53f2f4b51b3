//! `mpistat-analyze TRACE_DIR`: the trace analysis as an MPI program (`mpirun -n N
//! mpistat-analyze DIR`). Each process reads only its block of ranks; the processes exchange what
//! the traced messages and collectives carried (crate `mpistat-analysis`, modules `distributed`
//! and `distributed_replay`), and process 0 prints the report, the same as `mpistat analyze`
//! prints (`--format text`, `json`, `html` and `wait-states`, rendered by the same code).

mod mpi;

use clap::{Parser, ValueEnum};
use mpistat_analysis::distributed::{forward_on_dir, gather_wait_states, Exchange};
use mpistat_analysis::distributed_replay::analyze;
use mpistat_analysis::error::{AnalysisError, AnalyzeDirError};
use mpistat_analysis::tracefile::modules_of_dir;
use mpistat_digest::analyze::{html, json, symbolize, text};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Html,
    /// The forward replay's wait states, one per row (JSON).
    WaitStates,
}

/// The mpistat trace analysis as an MPI program: start it with `mpirun -n N` or `srun -n N`.
#[derive(Parser, Debug)]
#[command(name = "mpistat-analyze", version)]
struct Args {
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Directory with `definitions.mpt` (or the profiler's `local-NNNNNN.mpt`) and one
    /// `rank-NNNNNN.mpt` per rank.
    trace_dir: PathBuf,
}

fn run(args: &Args, world: &mpi::World) -> anyhow::Result<()> {
    let (mut local, problems) = forward_on_dir(&args.trace_dir, world)?;
    for problem in problems {
        eprintln!("{}: {problem}", args.trace_dir.display());
    }
    if world.process() == 0 {
        // Call sites as source lines, as `mpistat analyze` shows them.
        symbolize(&mut local.definitions, &modules_of_dir(&args.trace_dir));
    }
    let report = match args.format {
        Format::WaitStates => gather_wait_states(&local, world)
            .map(|report| serde_json::to_string_pretty(&report).map(|json| json + "\n"))
            .transpose()?,
        format => match analyze(&local, world)? {
            Some(analysis) => Some(match format {
                Format::Json => json(&analysis)?,
                Format::Html => html(&analysis),
                _ => text(&analysis),
            }),
            None => None,
        },
    };
    if let Some(report) = report {
        std::io::stdout().lock().write_all(report.as_bytes())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let world = match mpi::World::init() {
        Ok(world) => world,
        Err(error) => {
            eprintln!("mpistat-analyze: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args, &world) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Every process fails together; the one that knows why says so.
            let elsewhere = matches!(
                error.downcast_ref::<AnalyzeDirError>(),
                Some(AnalyzeDirError::Analysis(
                    AnalysisError::ElsewhereFailed { .. }
                ))
            );
            if !elsewhere {
                eprintln!("mpistat-analyze: {error:#}");
            }
            ExitCode::FAILURE
        }
    }
}
