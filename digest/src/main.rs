//! `mpistat`: decode and summarise mpistat job records from syslog.

use clap::Parser;
use mpistat_digest::cli::{Cli, Command, DbAction};
use mpistat_digest::commands;
use mpistat_digest::site::ConfigError;
use std::process::ExitCode;

/// sysexits.h's `EX_CONFIG`: a site-side command refused its configuration (a unit can stop
/// restarting on it with `RestartPreventExitStatus=78`).
const EX_CONFIG: u8 = 78;

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mpistat: {e:#}");
            if e.downcast_ref::<ConfigError>().is_some() {
                ExitCode::from(EX_CONFIG)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `show` and `ingest` fail when an input could not be read (after doing what they could).
fn failed_if_unread(some_unread: bool) -> ExitCode {
    if some_unread {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Show(args) => {
            let stdin = std::io::stdin().lock();
            let outcome = mpistat_digest::show::run(
                &args.options(),
                stdin,
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            )?;
            Ok(failed_if_unread(outcome.unreadable_inputs > 0))
        }
        Command::Ingest(args) => {
            let outcome = commands::ingest(
                &args.options(),
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            )?;
            Ok(failed_if_unread(outcome.unreadable > 0))
        }
        Command::Digest(args) => mpistat_digest::mail::command(&args.options()),
        Command::SiteReport(args) => mpistat_digest::site_report::command(&args.options()),
        Command::Serve(args) => mpistat_digest::serve::command(&args.options()),
        Command::RebuildRollups(args) => {
            commands::rebuild_rollups(&args.options(), &mut std::io::stderr().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Db(args) => match args.action {
            DbAction::Migrate(args) => {
                commands::migrate(&args.options(), &mut std::io::stderr().lock())?;
                Ok(ExitCode::SUCCESS)
            }
            DbAction::Copy { from, to } => {
                commands::copy(&from, &to, &mut std::io::stderr().lock())?;
                Ok(ExitCode::SUCCESS)
            }
        },
        Command::Analyze(args) if args.send => {
            let path = args
                .config
                .clone()
                .unwrap_or_else(mpistat_site::SiteConfig::path_from_env);
            let (config, problems) = mpistat_site::SiteConfig::load(&path);
            let mut err = std::io::stderr().lock();
            for p in problems.iter().filter(|_| path.exists()) {
                eprintln!("mpistat: {p}");
            }
            mpistat_analysis_report::send::run(&args.trace_dir, &config, &mut err)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Analyze(args) => {
            let mut err = std::io::stderr().lock();
            let options = (&args).into();
            mpistat_analysis_report::run(&options, &mut std::io::stdout().lock(), &mut err)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Escalate(args) => {
            commands::escalate(
                &args.options(),
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
