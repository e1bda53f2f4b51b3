//! mpistat's admin pages: `site_report` writes them as static files for a week or a month,
//! `serve` serves them live with access control (and `/metrics`), `metrics` counts the site's
//! figures for Prometheus. They render from crate `mpistat-figures` and crate `mpistat-render`,
//! never from the mail's code.

pub mod metrics;
pub mod serve;
pub mod site_report;

use mpistat_service::private::PrivateError;
use std::path::PathBuf;

/// Why pages could not be written or served.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Open(#[from] mpistat_service::OpenError),
    #[error(transparent)]
    Store(#[from] mpistat_store::Error),
    #[error(transparent)]
    Figures(#[from] mpistat_figures::Error),
    #[error(transparent)]
    Render(#[from] mpistat_render::Error),
    #[error(transparent)]
    Private(#[from] PrivateError),
    /// A group named in the site configuration (`[site_report] group`, `[serve] socket_group`).
    #[error("{setting}")]
    Group {
        setting: &'static str,
        source: PrivateError,
    },
    /// `--week`, `--month`: not a period, or none given.
    #[error("{0}")]
    Period(String),
    #[error("no job {0}")]
    NoJob(String),
    #[error("a user page panicked")]
    UserPagePanicked,
    #[error(transparent)]
    Clock(#[from] std::time::SystemTimeError),
    /// A file or socket could not be read, made or set up (`doing` says what was tried).
    #[error("cannot {doing} {}", .path.display())]
    File {
        doing: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {address}")]
    Listen {
        address: String,
        source: std::io::Error,
    },
    /// A file of secrets (tokens, the proxy's secret) others could have written or can read.
    #[error("{} must be owned by root (it is owned by uid {uid})", .path.display())]
    SecretNotRoots { path: PathBuf, uid: u32 },
    #[error(
        "{} must not be writable by group or others, nor readable by others (mode {mode:o}; use \
         0640 root:mpistat)",
        .path.display()
    )]
    SecretOpenToOthers { path: PathBuf, mode: u32 },
    #[error("{}: the secret must be at least 16 characters on the first line", .path.display())]
    ShortSecret { path: PathBuf },
    #[error(
        "refusing to trust the {header} header on a TCP address without a guard: any local user \
         could send it. Listen on a Unix socket (listen = \"unix:/run/mpistat/serve.sock\"), set \
         [serve] proxy_secret_file, or, if only the proxy can reach this address, set [serve] \
         allow_unguarded_header = true"
    )]
    Unguarded { header: String },
    #[error("{}: another server is listening there", .path.display())]
    SocketInUse { path: PathBuf },
    #[error("{} exists and is not a socket", .path.display())]
    NotASocket { path: PathBuf },
    #[error("a database in memory cannot be served")]
    InMemory,
    #[error(transparent)]
    Server(#[from] serve::server::ServeError),
    /// What the command reports could not be written.
    #[error(transparent)]
    Report(#[from] std::io::Error),
}

/// An error and its sources, `: ` between them (what `{:#}` shows of an `anyhow::Error`), for the
/// lines the server logs.
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(e) = source {
            write!(f, ": {e}")?;
            source = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_shows_every_source_once() {
        let e = Error::Group {
            setting: "[serve] socket_group",
            source: PrivateError::Io {
                path: "/run/mpistat".into(),
                source: std::io::Error::other("denied"),
            },
        };
        assert_eq!(
            Chain(&e).to_string(),
            "[serve] socket_group: /run/mpistat: denied"
        );
        let transparent = Error::Store(mpistat_store::Error::Data("bad JSON".into()));
        assert_eq!(Chain(&transparent).to_string(), "stored data: bad JSON");
    }
}
