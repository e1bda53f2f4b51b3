//! The command line.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "mpistat",
    version,
    about = "Decode and summarise mpistat job records from syslog"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the job records found in syslog files; problems go to stderr.
    Show(ShowArgs),
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// One JSON object per job and line instead of the readable report.
    #[arg(long)]
    pub json: bool,
    /// Syslog files to read (`-` for standard input).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}
