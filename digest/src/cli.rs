//! The command line, and the options each command's arguments make.

use clap::{Args, Parser, Subcommand, ValueEnum};
use mpistat_digest::commands::{Edit, EscalateOptions, IngestOptions};
use mpistat_digest::show::ShowOptions;
use mpistat_service::DatabaseOptions;
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
    /// Store the job records of syslog files (and their rotated siblings) in the database.
    Ingest(IngestArgs),
    /// Build (and with --send, send) every user's weekly mail.
    Digest(DigestArgs),
    /// Write the admin web pages of a week or a month as a static site.
    SiteReport(SiteReportArgs),
    /// Serve the admin web pages live from the database, with access control.
    Serve(ServeArgs),
    /// Analyse a trace directory: wait states, delay costs (root causes), critical path.
    Analyze(AnalyzeArgs),
    /// The escalation list: jobs the profiler traces automatically.
    Escalate(EscalateArgs),
    /// Make the admin pages' rollups (sums per day and user, critical jobs) again from the
    /// stored jobs, exactly (ingest keeps them as jobs arrive).
    RebuildRollups(DatabaseArgs),
    /// The database itself: its schema and stored records.
    Db(DbArgs),
}

#[derive(Args, Debug)]
pub struct DbArgs {
    #[command(subcommand)]
    pub action: DbAction,
}

#[derive(Subcommand, Debug)]
pub enum DbAction {
    /// Create the database or bring its schema up to date, rebuild its rollups if they are out
    /// of date, and move stored records that cannot be used to the rejected entries (reading
    /// every record). Ingest does the first two at its start; readers never change the
    /// database.
    Migrate(DatabaseArgs),
    /// Copy every row of a database into a new one, SQLite into PostgreSQL or back (a site
    /// moving between the backends). FROM and TO are each a SQLite file or a postgresql:// URL;
    /// TO is made (or brought up to date) and must hold no rows.
    Copy { from: String, to: String },
}

#[derive(Args, Debug)]
pub struct EscalateArgs {
    /// The site configuration (default: $MPISTAT_CONFIG, else /etc/mpistat/site.toml).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub action: EscalateAction,
}

#[derive(Subcommand, Debug)]
pub enum EscalateAction {
    /// Print the list's entries.
    List,
    /// Trace the next runs of a user's application.
    Add {
        /// User name or uid.
        user: String,
        /// The application, as the job record's `app` (`mpistat show` prints it): the
        /// executable's absolute path, or an interpreter's script (`/home/alice/run.py`) or
        /// module (`python -m pkg`).
        exe: String,
        /// Traced runs (default: the site's `[escalation] captures`).
        #[arg(long)]
        captures: Option<u32>,
        /// Days until the entry expires (default: the site's `[escalation] expiry_days`).
        #[arg(long)]
        days: Option<u64>,
    },
    /// Remove a user's entries (all of them, or only those for one application).
    Remove {
        /// User name or uid.
        user: String,
        exe: Option<String>,
    },
}

impl EscalateArgs {
    pub fn options(&self) -> EscalateOptions {
        let edit = match &self.action {
            EscalateAction::List => Edit::List,
            EscalateAction::Add {
                user,
                exe,
                captures,
                days,
            } => Edit::Add {
                user: user.clone(),
                exe: exe.clone(),
                captures: *captures,
                days: *days,
            },
            EscalateAction::Remove { user, exe } => Edit::Remove {
                user: user.clone(),
                exe: exe.clone(),
            },
        };
        EscalateOptions {
            config: self.config.clone(),
            edit,
        }
    }
}

/// Settings shared by the commands that use the database.
#[derive(Args, Debug)]
pub struct DatabaseArgs {
    /// The site configuration (default: $MPISTAT_CONFIG, else /etc/mpistat/site.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The database: a SQLite file, or a postgresql:// URL (default: `[database]` of the site
    /// configuration).
    #[arg(long)]
    pub database: Option<String>,
}

impl DatabaseArgs {
    pub fn options(&self) -> DatabaseOptions {
        DatabaseOptions {
            config: self.config.clone(),
            database: self.database.clone(),
        }
    }
}

#[derive(Args, Debug)]
pub struct IngestArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Keep reading as the files grow (and are rotated), every few seconds.
    #[arg(long)]
    pub follow: bool,
    /// Afterwards, print the stored jobs and everything rejected (forged, incomplete, corrupt...).
    #[arg(long)]
    pub report: bool,
    /// Lines read between two commits (for tests: more, smaller commits; default: ingest's).
    #[arg(long, hide = true)]
    pub batch_lines: Option<u64>,
    /// The logs rsyslog writes (rotated `FILE.*`/`FILE-*`, also `.gz`, are read too). With
    /// --report alone, none are needed.
    #[arg(required_unless_present = "report")]
    pub files: Vec<PathBuf>,
}

impl IngestArgs {
    pub fn options(&self) -> IngestOptions {
        IngestOptions {
            database: self.db.options(),
            follow: self.follow,
            report: self.report,
            batch_lines: self.batch_lines,
            files: self.files.clone(),
        }
    }
}

#[derive(Args, Debug)]
pub struct DigestArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// ISO week, e.g. 2026-W47 (default: the last complete week).
    #[arg(long)]
    pub week: Option<String>,
    /// Only this user's mail.
    #[arg(long)]
    pub user: Option<String>,
    /// Print the mails instead of sending them (the default).
    #[arg(long, conflicts_with = "send")]
    pub dry_run: bool,
    /// Send the mails with the site's transport; each (user, week) at most once.
    #[arg(long)]
    pub send: bool,
}

#[derive(Args, Debug)]
pub struct SiteReportArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// ISO week, e.g. 2026-W47, or `last` (the last complete week).
    #[arg(long, required_unless_present = "month", conflicts_with = "month")]
    pub week: Option<String>,
    /// Calendar month (UTC), e.g. 2026-11, or `last` (the last complete month).
    #[arg(long)]
    pub month: Option<String>,
    /// Directory the pages are written to (created if needed); `{period}` in it becomes the
    /// interval's name, e.g. `/var/lib/mpistat/site/{period}`.
    #[arg(long)]
    pub out: PathBuf,
    /// Also write the page of this job (by key, as `mpistat show` prints it; repeatable): the
    /// site has pages of the jobs it lists (critical, traced) only.
    #[arg(long = "job")]
    pub jobs: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// `HOST:PORT` or `unix:PATH` to listen on (default: `[serve] listen` of the site
    /// configuration).
    #[arg(long)]
    pub listen: Option<String>,
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

impl ShowArgs {
    pub fn options(&self) -> ShowOptions {
        ShowOptions {
            json: self.json,
            files: self.files.clone(),
        }
    }
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Report format.
    #[arg(long, value_enum, default_value_t = AnalyzeFormat::Text)]
    pub format: AnalyzeFormat,
    /// Also write the timeline, critical path marked, as Chrome/Perfetto trace JSON here.
    #[arg(long, conflicts_with = "send")]
    pub perfetto: Option<PathBuf>,
    /// Also write the trace as an OTF2 archive into this new directory (OUT/traces.otf2), for
    /// Vampir, Scalasca, Score-P's tools and Python's otf2; times as the analysis uses them.
    #[arg(long, value_name = "OUT", conflicts_with = "send")]
    pub otf2: Option<PathBuf>,
    /// Send the summary to syslog as your record of the traced job (for its weekly mail and job
    /// page) instead of printing a report; the directory must be yours, as the profiler wrote
    /// it. Run by the profiler at the end of a traced job, or by a job script or TaskEpilog.
    #[arg(long, conflicts_with = "format")]
    pub send: bool,
    /// The site configuration for `--send` and the memory limit (default: $MPISTAT_CONFIG, else
    /// /etc/mpistat/site.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Memory the analysis may use, in bytes (default: the site's `[escalation]
    /// analysis_memory_bytes`; 0 there: 3/4 of the node's or the cgroup's memory). A trace whose
    /// estimated need is more fails before it is read, saying how many processes of
    /// `mpistat-analyze` would do.
    #[arg(long)]
    pub memory_limit: Option<u64>,
    /// Directory with `definitions.mpt` (or the profiler's `local-NNNNNN.mpt`) and one
    /// `rank-NNNNNN.mpt` per rank; or an OTF2 archive (Score-P's): its `traces.otf2` or the
    /// directory holding it.
    pub trace_dir: PathBuf,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnalyzeFormat {
    Text,
    Json,
    Html,
    /// The short summary the weekly mail uses (JSON).
    Summary,
    /// The forward replay's wait states, one per row (JSON). `mpistat-analyze` (the analysis as
    /// an MPI program) prints the same, and the same text, JSON and HTML reports.
    WaitStates,
}

impl DigestArgs {
    pub fn options(&self) -> mpistat_mail::Options {
        mpistat_mail::Options {
            db: self.db.options(),
            week: self.week.clone(),
            user: self.user.clone(),
            send: self.send,
        }
    }
}

impl SiteReportArgs {
    pub fn options(&self) -> mpistat_pages::site_report::Options {
        mpistat_pages::site_report::Options {
            db: self.db.options(),
            week: self.week.clone(),
            month: self.month.clone(),
            out: self.out.clone(),
            jobs: self.jobs.clone(),
        }
    }
}

impl ServeArgs {
    pub fn options(&self) -> mpistat_pages::serve::Options {
        mpistat_pages::serve::Options {
            db: self.db.options(),
            listen: self.listen.clone(),
        }
    }
}

impl From<&AnalyzeArgs> for mpistat_analysis_report::AnalyzeOptions {
    fn from(args: &AnalyzeArgs) -> Self {
        use mpistat_analysis_report::Format;
        mpistat_analysis_report::AnalyzeOptions {
            trace_dir: args.trace_dir.clone(),
            format: match args.format {
                AnalyzeFormat::Text => Format::Text,
                AnalyzeFormat::Json => Format::Json,
                AnalyzeFormat::Html => Format::Html,
                AnalyzeFormat::Summary => Format::Summary,
                AnalyzeFormat::WaitStates => Format::WaitStates,
            },
            perfetto: args.perfetto.clone(),
            otf2: args.otf2.clone(),
            memory_limit: args.memory_limit,
            config: args.config.clone(),
        }
    }
}
