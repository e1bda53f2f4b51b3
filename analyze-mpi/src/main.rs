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
//! sends the summary to syslog as the user's record of the traced job, with
//! `send::send_outcome` of crate `mpistat-analysis-report`, exactly as `mpistat analyze --send`
//! does. The reports, the timeline and the trace input are that crate's too: this program links
//! none of the site side (database, mail, pages, command line of `mpistat`).
//!
//! The trace may be an OTF2 archive too (Score-P's), which every process reads its block of
//! ranks of; `--otf2 OUT` writes an mpistat trace as an OTF2 archive, each process its own
//! ranks (crate `mpistat-otf2`, docs/otf2.md).

mod args;
mod mpi;

use args::{Args, NotRun};
use mpistat_analysis::distributed::{forward_on, gather_wait_states, Exchange};
use mpistat_analysis::distributed_replay::analyze;
use mpistat_analysis::error::{AnalysisError, AnalyzeDirError};
use mpistat_analysis::memory;
use mpistat_analysis_report::perfetto::write_file_distributed;
use mpistat_analysis_report::report::{html, json, summary, text};
use mpistat_analysis_report::send::{job_key_of, send_outcome};
use mpistat_analysis_report::symbolize::symbolize;
use mpistat_analysis_report::{trace_input, Format, ReportError};
use mpistat_site::SiteConfig;
use std::io::Write;
use std::process::ExitCode;

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
    let options = &args.options;
    let dir = &options.trace_dir;
    let config_path = options
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
            Some(key) if world.process() == 0 => Ok(send_outcome(
                &config,
                key.clone(),
                dir,
                outcome,
                &mut std::io::stderr(),
            )?),
            _ => Ok(()),
        }
    };
    let setting = options
        .memory_limit
        .unwrap_or(config.escalation.analysis_memory_bytes);
    let limit = memory::limit(setting, world.node_size());
    if let Some(out) = &options.otf2 {
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
        options.format
    };
    let report = match format {
        Format::WaitStates => {
            let report = gather_wait_states(&local, world)
                .map(|report| serde_json::to_string_pretty(&report).map(|json| json + "\n"))
                .transpose()?;
            if let Some(path) = &options.perfetto {
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
            if let Some(path) = &options.perfetto {
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
    let args = match args::parse(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(NotRun::Help) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(NotRun::Version) => {
            println!("mpistat-analyze {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(NotRun::Wrong(what)) => {
            eprintln!("mpistat-analyze: {what}\n\nUsage: mpistat-analyze [OPTIONS] <TRACE_DIR>\n\nFor more information, try '--help'.");
            return ExitCode::from(2);
        }
    };
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
            ) || error
                .downcast_ref::<ReportError>()
                .is_some_and(ReportError::failed_elsewhere);
            if !elsewhere {
                eprintln!("mpistat-analyze: {error:#}");
            }
            ExitCode::FAILURE
        }
    }
}
