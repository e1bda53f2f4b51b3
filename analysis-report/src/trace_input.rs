//! What `mpistat analyze` and `mpistat-analyze` read and write besides mpistat's own trace
//! directories: an OTF2 archive as the trace to analyse (Score-P's traces, or mpistat's own
//! exported), and the export of a trace directory as an OTF2 archive (`--otf2 OUT`), both
//! through crate `mpistat-otf2` (docs/otf2.md).

use crate::error::ReportError;
use crate::symbolize::symbolize;
use mpistat_analysis::distributed::Exchange;
use mpistat_analysis::source::{TraceDir, TraceSource};
use mpistat_otf2::{export_dir, export_dir_distributed, find_anchor, Exported, Otf2Archive};
use std::path::Path;

/// The trace at `path`: an OTF2 archive (its anchor file `*.otf2`, or a directory holding one,
/// as Score-P's experiment directories do), else an mpistat trace directory.
pub fn open(path: &Path) -> Result<Box<dyn TraceSource>, ReportError> {
    Ok(match find_anchor(path) {
        Some(_) => Box::new(Otf2Archive::open(path)?),
        None => Box::new(TraceDir(path.to_path_buf())),
    })
}

/// Writes the mpistat trace in `dir` as an OTF2 archive in the new directory `out`, with call
/// sites as source lines (as the reports show them); `exchange`: the processes of
/// `mpistat-analyze`, which write it together.
pub fn export(
    dir: &Path,
    out: &Path,
    exchange: Option<&dyn Exchange>,
) -> Result<Exported, ReportError> {
    if find_anchor(dir).is_some() {
        return Err(ReportError::AlreadyOtf2(dir.to_path_buf()));
    }
    let mut prepare = |definitions: &mut _| symbolize(definitions, dir);
    Ok(match exchange {
        None => export_dir(dir, out, &mut prepare)?,
        Some(exchange) => export_dir_distributed(dir, out, &mut prepare, exchange)?,
    })
}
