//! `mpistat-analyze TRACE_DIR`: the trace analysis as an MPI program (`mpirun -n N
//! mpistat-analyze DIR`). Each process reads only its block of ranks; the processes exchange what
//! the traced messages and collectives carried (crate `mpistat-analysis`, module `distributed`),
//! and process 0 prints the report, the same as `mpistat analyze` prints.
//!
//! First milestone: the forward replay's wait states (`--format wait-states`, as `mpistat analyze
//! --format wait-states`).
//!
//! Before reading, every process checks the trace's estimated memory need against its limit
//! (`mpistat_analysis::memory`; all come to the same verdict from the same directory) and, if
//! over, process 0 says so with the numbers and how many processes would do. `--send` (in the
//! job's allocation, as the job's user: the batch script's last step or a Slurm TaskEpilog)
//! sends the summary (`summary.rs`) to syslog as the user's record of the traced job, with
//! digest's `send::send_outcome`, exactly as `mpistat analyze --send` does.

mod mpi;
mod summary;

use clap::{Parser, ValueEnum};
use mpistat_analysis::distributed::{forward_on_dir, gather_wait_states, Exchange};
use mpistat_analysis::error::{AnalysisError, AnalyzeDirError};
use mpistat_analysis::memory;
use mpistat_analysis::tracefile::modules_of_dir;
use mpistat_digest::analyze::symbolize;
use mpistat_digest::send::{job_key_of, send_outcome};
use mpistat_site::SiteConfig;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// The forward replay's wait states, one per row (JSON).
    WaitStates,
}

/// The mpistat trace analysis as an MPI program: start it with `mpirun -n N` or `srun -n N`.
#[derive(Parser, Debug)]
#[command(name = "mpistat-analyze", version)]
struct Args {
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::WaitStates)]
    format: Format,
    /// Send the summary to syslog as your record of the traced job (for its weekly mail and job
    /// page), as `mpistat analyze --send` does, instead of printing a report; the directory must
    /// be yours, as the profiler wrote it. For the batch script's last step or a TaskEpilog.
    #[arg(long, conflicts_with = "format")]
    send: bool,
    /// The site configuration for `--send` and the memory limit (default: $MPISTAT_CONFIG, else
    /// /etc/mpistat/site.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Memory each process may use, in bytes (default: the site's `[escalation]
    /// analysis_memory_bytes`; 0 there: 3/4 of the node's or the cgroup's memory, shared by the
    /// processes on the node). A trace whose estimated need is more fails before it is read.
    #[arg(long)]
    memory_limit: Option<u64>,
    /// Directory with `definitions.mpt` (or the profiler's `local-NNNNNN.mpt`) and one
    /// `rank-NNNNNN.mpt` per rank.
    trace_dir: PathBuf,
}

/// An error every process came to alike (from the same directory): process 0 says it, the
/// others stay quiet.
fn alike(world: &mpi::World, error: impl Into<anyhow::Error>) -> anyhow::Error {
    if world.process() == 0 {
        error.into()
    } else {
        AnalyzeDirError::from(AnalysisError::ElsewhereFailed { process: 0 }).into()
    }
}

fn run(args: &Args, world: &mpi::World) -> anyhow::Result<()> {
    let dir = &args.trace_dir;
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(SiteConfig::path_from_env);
    let (config, _) = SiteConfig::load(&config_path);
    let job_key = match args.send {
        true => Some(job_key_of(dir).map_err(|e| alike(world, e))?),
        false => None,
    };
    // Sends the outcome as the user's record (process 0), when asked to.
    let send = |outcome: Result<String, String>| -> anyhow::Result<()> {
        match &job_key {
            Some(key) if world.process() == 0 => {
                send_outcome(&config, key.clone(), dir, outcome, &mut std::io::stderr())
            }
            _ => Ok(()),
        }
    };
    let setting = args
        .memory_limit
        .unwrap_or(config.escalation.analysis_memory_bytes);
    let limit = memory::limit(setting, world.node_size());
    if let Err(error) = memory::check(dir, world.processes(), limit) {
        send(Err(error.to_string()))?;
        return Err(alike(world, error));
    }
    let (mut local, problems) = match forward_on_dir(dir, world) {
        Ok(done) => done,
        Err(error) => {
            send(Err(format!("the analysis failed: {error}")))?;
            return Err(error.into());
        }
    };
    if world.process() == 0 {
        // Call sites as source lines, as `mpistat analyze` shows them.
        symbolize(&mut local.definitions, &modules_of_dir(dir));
    }
    if args.send {
        if let Some(summary) = summary::gather(&local, &problems, world) {
            send(Ok(serde_json::to_string(&summary)?))?;
        }
        return Ok(());
    }
    for problem in problems {
        eprintln!("{}: {problem}", dir.display());
    }
    if let Some(report) = gather_wait_states(&local, world) {
        let mut out = std::io::stdout().lock();
        match args.format {
            Format::WaitStates => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        }
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
