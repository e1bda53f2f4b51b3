//! Where a user's opt-in output goes: `MPISTAT_DETAIL=stderr|stdout|<path>`.

use std::io::Write;
use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    Stderr,
    /// Appended to, so several jobs (or ranks, for `MPI_Pcontrol(2)`) never overwrite each other.
    File(PathBuf),
}

impl Destination {
    /// The destination the user asked for, if any.
    pub fn from_env() -> Option<Destination> {
        let v = std::env::var_os("MPISTAT_DETAIL")?;
        Some(match v.to_str() {
            Some("") | Some("0") | Some("no") | Some("off") => return None,
            Some("stderr") | Some("1") | Some("yes") | Some("on") => Destination::Stderr,
            Some("stdout") => Destination::Stdout,
            _ => Destination::File(PathBuf::from(v)),
        })
    }

    /// Write `text` in one piece (best effort: the user's job never fails because of it).
    pub fn write(&self, text: &str) {
        let _ = match self {
            Destination::Stdout => std::io::stdout().lock().write_all(text.as_bytes()),
            Destination::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
            Destination::File(p) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .and_then(|mut f| f.write_all(text.as_bytes())),
        };
    }
}
