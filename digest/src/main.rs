//! `mpistat`: decode and summarise mpistat job records from syslog.

use clap::Parser;
use mpistat_digest::cli::{Cli, Command, DbAction};
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

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Show(args) => {
            let stdin = std::io::stdin().lock();
            let outcome = mpistat_digest::show::run(
                &args,
                stdin,
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            )?;
            Ok(if outcome.unreadable_inputs > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Ingest(args) => mpistat_digest::ingest::command(&args),
        Command::Digest(args) => mpistat_digest::mail::command(&args),
        Command::SiteReport(args) => mpistat_digest::site_report::command(&args),
        Command::Serve(args) => mpistat_digest::serve::command(&args),
        Command::RebuildRollups(args) => mpistat_digest::rollup::command(&args),
        Command::Db(args) => match args.action {
            DbAction::Migrate(args) => mpistat_digest::site::migrate_command(&args),
            DbAction::Copy { from, to } => mpistat_digest::site::copy_command(&from, &to),
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
            mpistat_digest::send::run(&args.trace_dir, &config, &mut err)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Analyze(args) => {
            let mut err = std::io::stderr().lock();
            mpistat_digest::analyze::run(&args, &mut std::io::stdout().lock(), &mut err)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Escalate(args) => {
            mpistat_digest::escalate::command(&args, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
