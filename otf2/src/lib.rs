//! OTF2 for mpistat's traces, through libotf2 (Debian's `libopen-trace-format2`): the export of
//! an mpistat trace directory as an OTF2 archive, which Vampir, Scalasca, Score-P's tools,
//! `otf2-print` and Python's `otf2` read ([`export`]), and the import of an OTF2 archive that
//! another tool wrote (Score-P's MPI traces above all) as a source of the analysis ([`import`]).
//!
//! The crate's interface onto the trace and the analysis is narrow: the event model
//! (`mpistat_trace::model`), the trace directory's reader (`mpistat_trace::tracefile::
//! read_dir_ranks_with`) for the export, and
//! `mpistat_analysis::source::TraceSource` for the import; the distributed forms talk through
//! `distributed::Exchange`. Only the site-side binaries (`mpistat`, `mpistat-analyze`) link it,
//! never the in-job library.
//!
//! libotf2 is C: every call's error code becomes a typed [`Otf2Error`] (with what libotf2 said,
//! which it would otherwise print), and no panic crosses its callbacks.

mod collectives;
pub mod error;
pub mod export;
mod ffi;
pub mod import;
mod names;
mod read;
pub mod reference;
pub mod write;

pub use error::Otf2Error;
pub use export::{export_dir, export_dir_distributed, Exported};
pub use import::{find_anchor, Otf2Archive};
pub use write::{anchor_file, ARCHIVE_NAME};
