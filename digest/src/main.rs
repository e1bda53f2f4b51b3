//! `mpistat`: decode and summarise mpistat job records from syslog.

mod cli;

use clap::Parser;
use cli::{Cli, Command, DbAction};
use mpistat_digest::commands;
use mpistat_service::{ConfigError, OpenError};
use std::process::ExitCode;

/// sysexits.h's `EX_CONFIG`: a site-side command refused its configuration (a unit can stop
/// restarting on it with `RestartPreventExitStatus=78`).
const EX_CONFIG: u8 = 78;

/// Ingest allocates and frees each record's strings and maps on its decoder threads; glibc's
/// malloc spent a quarter of ingest's CPU on them (bench/SCALE.md, "Ingest's CPU a job").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mpistat: {e:#}");
            if refused_config(&e) {
                ExitCode::from(EX_CONFIG)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Whether `e` is a site configuration refused ([`ConfigError`]), as it is or as the library
/// that opened it (through [`OpenError`]) returned it.
fn refused_config(e: &anyhow::Error) -> bool {
    let opened = e
        .downcast_ref::<OpenError>()
        .or_else(|| match e.downcast_ref::<mpistat_mail::Error>() {
            Some(mpistat_mail::Error::Open(open)) => Some(open),
            _ => None,
        })
        .or_else(|| match e.downcast_ref::<mpistat_pages::Error>() {
            Some(mpistat_pages::Error::Open(open)) => Some(open),
            _ => None,
        });
    e.downcast_ref::<ConfigError>().is_some() || matches!(opened, Some(OpenError::Config(_)))
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
        Command::Digest(args) => {
            let stats = mpistat_mail::command(
                &args.options(),
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            )?;
            Ok(if stats.failed > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::SiteReport(args) => {
            mpistat_pages::site_report::command(&args.options(), &mut std::io::stderr().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let log = mpistat_pages::serve::Log::new(std::io::stderr());
            mpistat_pages::serve::command(&args.options(), log)?;
            Ok(ExitCode::SUCCESS)
        }
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
