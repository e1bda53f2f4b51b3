//! The trace analysis for its reader, shared by `mpistat analyze` (the digest's binary) and
//! `mpistat-analyze` (the analysis as an MPI program in the job), so that the MPI program links
//! no database, mail or command line of the site side.
//!
//! [`report`] renders an analysis (crate `mpistat-analysis`) as text, HTML, JSON or the mail's
//! [`report::Summary`]; [`perfetto`] writes its timeline as Chrome/Perfetto trace JSON;
//! [`trace_input`] opens the trace (an mpistat trace directory or an OTF2 archive) and exports
//! one as OTF2; [`symbolize`] turns call sites into source lines; [`send`] sends the summary to
//! syslog as the trace owner's record (`--send`). [`run`] is `mpistat analyze` of one process.
//! Nothing here prints: output and problems go to the writers the caller gives.

pub mod error;
pub mod perfetto;
pub mod report;
pub mod send;
pub mod symbolize;
pub mod trace_input;

pub use error::ReportError;

use mpistat_analysis::analysis::{run_passes_on, summarise};
use mpistat_analysis::distributed::wait_states_of;
use mpistat_analysis::memory;
use std::io::Write;
use std::path::PathBuf;

/// What an analysis prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The readable report ([`report::text`]).
    Text,
    /// The analysis as JSON ([`report::json`]).
    Json,
    /// A self-contained HTML page ([`report::html`]).
    Html,
    /// The summary the weekly mail uses and `--send` sends (JSON, [`report::summary`]).
    Summary,
    /// The forward replay's wait states, one per row (JSON).
    WaitStates,
}

impl Format {
    /// Every format with its name on the command line.
    const NAMES: [(&'static str, Format); 5] = [
        ("text", Format::Text),
        ("json", Format::Json),
        ("html", Format::Html),
        ("summary", Format::Summary),
        ("wait-states", Format::WaitStates),
    ];
}

impl std::str::FromStr for Format {
    type Err = ReportError;

    fn from_str(name: &str) -> Result<Format, ReportError> {
        Format::NAMES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|&(_, format)| format)
            .ok_or_else(|| ReportError::UnknownFormat(name.to_string()))
    }
}

/// One analysis of a trace by one process (`mpistat analyze`).
#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    /// The trace: an mpistat trace directory or an OTF2 archive ([`trace_input::open`]).
    pub trace_dir: PathBuf,
    pub format: Format,
    /// Also write the timeline, critical path marked, as Chrome/Perfetto trace JSON here.
    pub perfetto: Option<PathBuf>,
    /// Also write the trace as an OTF2 archive into this new directory.
    pub otf2: Option<PathBuf>,
    /// Memory the analysis may use, in bytes; `None`: the site's `[escalation]
    /// analysis_memory_bytes`, from `config` (see [`memory::limit`]).
    pub memory_limit: Option<u64>,
    /// The site configuration (default: $MPISTAT_CONFIG, else /etc/mpistat/site.toml).
    pub config: Option<PathBuf>,
}

/// Checks the trace's estimated memory need against the limit (see [`memory`]), reads it,
/// analyses it, writes the report to `out` and problems to `err`.
pub fn run(
    options: &AnalyzeOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), ReportError> {
    let setting = options.memory_limit.unwrap_or_else(|| {
        let path = options
            .config
            .clone()
            .unwrap_or_else(mpistat_site::SiteConfig::path_from_env);
        mpistat_site::SiteConfig::load(&path)
            .0
            .escalation
            .analysis_memory_bytes
    });
    let dir = &options.trace_dir;
    if let Some(out) = &options.otf2 {
        // Streamed rank by rank: written even when the analysis is too big for this process.
        trace_input::export(dir, out, None)?;
    }
    let source = trace_input::open(dir)?;
    memory::check_source(source.as_ref(), 1, memory::limit(setting, 1))?;
    let (mut passes, problems) = run_passes_on(source.as_ref(), &mut |_| {})?;
    symbolize::symbolize(&mut passes.definitions, dir);
    for problem in &problems {
        writeln!(err, "{}: {problem}", dir.display())?;
    }
    let analysis = summarise(&passes);
    match options.format {
        Format::Text => out.write_all(report::text(&analysis).as_bytes())?,
        Format::Json => out.write_all(report::json(&analysis)?.as_bytes())?,
        Format::Html => out.write_all(report::html(&analysis).as_bytes())?,
        Format::WaitStates => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&wait_states_of(&passes))?
        )?,
        Format::Summary => writeln!(
            out,
            "{}",
            serde_json::to_string(&report::summary(&analysis, &problems))?
        )?,
    }
    if let Some(path) = &options.perfetto {
        perfetto::write_file(path, &passes, &analysis)?;
    }
    Ok(())
}
