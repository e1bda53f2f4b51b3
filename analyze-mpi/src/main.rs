//! `mpistat-analyze TRACE_DIR`: the trace analysis as an MPI program (`mpirun -n N
//! mpistat-analyze DIR`). Each process reads only its block of ranks; the processes exchange what
//! the traced messages and collectives carried (crate `mpistat-analysis`, modules `distributed`
//! and `distributed_replay`), and process 0 prints the report, the same as `mpistat analyze`
//! prints (`--format text`, `json`, `html`, `summary` and `wait-states`, rendered by the same
//! code).
//!
//! Before reading, every process checks the trace's estimated memory need against its limit
//! (`mpistat_analysis::memory`; all come to the same verdict from the same directory) and, if
//! over, process 0 says so with the numbers and how many processes would do. `--send` (in the
//! job's allocation, as the job's user: the batch script's last step or a Slurm TaskEpilog)
//! sends the summary to syslog as the user's record of the traced job, with digest's
//! `send::send_outcome`, exactly as `mpistat analyze --send` does.
//!
//! The trace may be an OTF2 archive too (Score-P's), which every process reads its block of
//! ranks of; `--otf2 OUT` writes an mpistat trace as an OTF2 archive, each process its own
//! ranks (crate `mpistat-otf2`, docs/otf2.md).

mod mpi;

use clap::{Parser, ValueEnum};
use mpistat_analysis::distributed::{forward_on, gather_wait_states, Exchange};
use mpistat_analysis::distributed_replay::analyze;
use mpistat_analysis::error::{AnalysisError, AnalyzeDirError};
use mpistat_analysis::memory;
use mpistat_digest::analyze::{html, json, summary, symbolize, text};
use mpistat_digest::perfetto::write_file_distributed;
use mpistat_digest::send::{job_key_of, send_outcome};
use mpistat_digest::trace_input;
use mpistat_otf2::Otf2Error;
use mpistat_site::SiteConfig;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Html,
    /// The summary `--send` sends (JSON), as `mpistat analyze --format summary`.
    Summary,
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
    /// Also write the timeline, critical path marked, as Chrome/Perfetto trace JSON here (each
    /// process its ranks' tracks, the same file as `mpistat analyze --perfetto` writes).
    #[arg(long, conflicts_with = "send")]
    perfetto: Option<PathBuf>,
    /// Also write the trace as an OTF2 archive into this new directory (OUT/traces.otf2), each
    /// process its own ranks, as `mpistat analyze --otf2` writes it.
    #[arg(long, value_name = "OUT", conflicts_with = "send")]
    otf2: Option<PathBuf>,
    /// Directory with `definitions.mpt` (or the profiler's `local-NNNNNN.mpt`) and one
    /// `rank-NNNNNN.mpt` per rank; or an OTF2 archive (Score-P's): its `traces.otf2` or the
    /// directory holding it.
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

/// Every process's reading problems, in process order (= rank order, as one process reads
/// them), on process 0; the others get `None`. A problem of the directory itself (a stray file)
/// is seen by every process and kept once, as one process reports it; a rank file's problem
/// names its file, so no two are alike.
fn gather_problems(problems: &[String], world: &mpi::World) -> Option<Vec<String>> {
    let mut outgoing = vec![Vec::new(); world.processes()];
    outgoing[0] = serde_json::to_vec(problems).expect("plain strings");
    let incoming = world.all_to_all(outgoing);
    (world.process() == 0).then(|| {
        let mut seen = std::collections::HashSet::new();
        incoming
            .iter()
            .flat_map(|bytes| {
                serde_json::from_slice::<Vec<String>>(bytes).expect("strings this program encoded")
            })
            .filter(|problem| seen.insert(problem.clone()))
            .collect()
    })
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
    if let Some(out) = &args.otf2 {
        // Each process writes its own ranks, streamed: before the memory check, which is the
        // analysis's.
        trace_input::export(dir, out, Some(world))?;
    }
    let source = trace_input::open(dir).map_err(|e| alike(world, e))?;
    if let Err(error) = memory::check_source(source.as_ref(), world.processes(), limit) {
        send(Err(error.to_string()))?;
        return Err(alike(world, error));
    }
    let (mut local, problems) = match forward_on(source.as_ref(), world) {
        Ok(done) => done,
        Err(error) => {
            send(Err(format!("the analysis failed: {error}")))?;
            return Err(error.into());
        }
    };
    if world.process() == 0 {
        // Call sites as source lines, as `mpistat analyze` shows them.
        symbolize(&mut local.definitions, dir);
    }
    if !args.send {
        for problem in &problems {
            eprintln!("{}: {problem}", dir.display());
        }
    }
    let format = if args.send {
        Format::Summary
    } else {
        args.format
    };
    let report = match format {
        Format::WaitStates => {
            let report = gather_wait_states(&local, world)
                .map(|report| serde_json::to_string_pretty(&report).map(|json| json + "\n"))
                .transpose()?;
            if let Some(path) = &args.perfetto {
                let analysis = analyze(&local, world)?;
                write_file_distributed(path, &local, analysis.as_ref(), world)?;
            }
            report
        }
        format => {
            let all_problems = gather_problems(&problems, world);
            let analysis = match analyze(&local, world) {
                Ok(analysis) => analysis,
                Err(error) => {
                    send(Err(format!("the analysis failed: {error}")))?;
                    return Err(error.into());
                }
            };
            if let Some(path) = &args.perfetto {
                write_file_distributed(path, &local, analysis.as_ref(), world)?;
            }
            match (analysis, all_problems) {
                (Some(analysis), Some(problems)) => Some(match format {
                    Format::Json => json(&analysis)?,
                    Format::Html => html(&analysis),
                    Format::Summary => {
                        serde_json::to_string(&summary(&analysis, &problems))? + "\n"
                    }
                    _ => text(&analysis),
                }),
                _ => None,
            }
        }
    };
    match (report, args.send) {
        (Some(summary), true) => send(Ok(summary.trim_end().to_string()))?,
        (Some(report), false) => std::io::stdout().lock().write_all(report.as_bytes())?,
        (None, _) => {}
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
            ) || matches!(
                error.downcast_ref::<Otf2Error>(),
                Some(Otf2Error::ElsewhereFailed { .. })
            );
            if !elsewhere {
                eprintln!("mpistat-analyze: {error:#}");
            }
            ExitCode::FAILURE
        }
    }
}
