//! `mpistat serve`: the admin pages of [`crate::site_report`] rendered live from the database for
//! any interval (`?period=2026-W47`, `?period=2026-11`, `?period=2026-11-02..2026-11-08`; default:
//! the last complete week), with access control.
//!
//! Identity comes from one of two sources (`[serve] auth` in site.toml):
//! * `header`: a reverse proxy that authenticated the user puts the login name in a header
//!   (`user_header`, default `REMOTE_USER`). The server must then listen on loopback only, so
//!   that the proxy is the only client; a request without the header gets 401.
//! * `token`: `Authorization: Bearer <token>`, looked up in `tokens_file` (lines `login token`),
//!   which must be owned by root and neither writable by group/others nor readable by others.
//!
//! Admins (`[serve] admins`) see every page; anyone else only their own user page and their own
//! jobs' pages (403 otherwise). The HTTP server is `tiny_http`: synchronous like the SQLite
//! queries behind each page, four worker threads each with its own connection, and a small
//! build (an async stack would add more compile time than these few admins' requests need).

use crate::cli::ServeArgs;
use crate::db::Database;
use crate::mail::content::{digests_over, TracedJob};
use crate::mail::week::IsoWeek;
use crate::site_report::pages::{self, user_slug, Place};
use crate::site_report::period::Period;
use crate::site_report::summary::summarise;
use anyhow::Context;
use mpistat_site::SiteConfig;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

const WORKERS: usize = 4;

/// How the server learns who is asking.
#[derive(Debug, Clone)]
pub enum Auth {
    /// The login name is in this request header (set by a trusted reverse proxy).
    Header(String),
    /// Bearer tokens and their logins.
    Tokens(HashMap<String, String>),
}

/// Parse a tokens file: lines `login token`, `#` comments and blank lines ignored. Returns the
/// tokens and a problem per line that is not of that form (the line is skipped).
pub fn parse_tokens(text: &str) -> (HashMap<String, String>, Vec<String>) {
    let mut tokens = HashMap::new();
    let mut problems = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [login, token] if token.len() >= 16 => {
                if tokens
                    .insert(token.to_string(), login.to_string())
                    .is_some()
                {
                    problems.push(format!("line {}: token used twice (last one wins)", n + 1));
                }
            }
            [_, _] => problems.push(format!(
                "line {}: token shorter than 16 characters (ignored)",
                n + 1
            )),
            _ => problems.push(format!("line {}: not `login token` (ignored)", n + 1)),
        }
    }
    (tokens, problems)
}

/// Read the tokens file, refusing one that others could have written or can read.
pub fn load_tokens(path: &Path) -> anyhow::Result<(HashMap<String, String>, Vec<String>)> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    anyhow::ensure!(
        meta.uid() == 0,
        "{} must be owned by root (it is owned by uid {})",
        path.display(),
        meta.uid()
    );
    anyhow::ensure!(
        meta.mode() & 0o026 == 0,
        "{} must not be writable by group or others, nor readable by others (mode {:o}; use 0640 root:mpistat)",
        path.display(),
        meta.mode() & 0o7777
    );
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(parse_tokens(&text))
}

/// The auth settings of `config` (reading the tokens file for `token`).
pub fn auth_from_site(config: &SiteConfig) -> anyhow::Result<Auth> {
    if config.serve.auth == "token" {
        let (tokens, problems) = load_tokens(&config.serve.tokens_file)?;
        for problem in problems {
            eprintln!(
                "mpistat serve: {}: {problem}",
                config.serve.tokens_file.display()
            );
        }
        Ok(Auth::Tokens(tokens))
    } else {
        Ok(Auth::Header(config.serve.user_header.clone()))
    }
}

/// A response: status, and a body (HTML unless it is an error's plain text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub html: bool,
    pub body: String,
}

impl Reply {
    fn page(body: String) -> Reply {
        Reply {
            status: 200,
            html: true,
            body,
        }
    }

    fn error(status: u16, text: &str) -> Reply {
        Reply {
            status,
            html: false,
            body: format!("{text}\n"),
        }
    }
}

/// What answers requests: the site configuration and who may see what.
pub struct Pages {
    pub config: SiteConfig,
    pub auth: Auth,
}

impl Pages {
    /// The login of a request with these headers (name, value), if it has one we trust.
    pub fn identify<'a>(
        &self,
        headers: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Option<String> {
        let mut headers = headers;
        match &self.auth {
            Auth::Header(name) => headers
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            Auth::Tokens(tokens) => headers
                .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
                .and_then(|(_, v)| v.trim().strip_prefix("Bearer "))
                .and_then(|token| tokens.get(token.trim()).cloned()),
        }
    }

    fn is_admin(&self, login: &str) -> bool {
        self.config.serve.admins.iter().any(|a| a == login)
    }

    /// The answer to `GET url` by `login` (`None`: not identified).
    pub fn answer(&self, db: &Database, login: Option<&str>, url: &str, now_ms: u64) -> Reply {
        let Some(login) = login else {
            return Reply::error(401, "who are you? (no identity: see [serve] in site.toml)");
        };
        match self.route(db, login, url, now_ms) {
            Ok(reply) => reply,
            Err(e) => {
                eprintln!("mpistat serve: {url}: {e:#}");
                Reply::error(500, "internal error (logged)")
            }
        }
    }

    fn route(&self, db: &Database, login: &str, url: &str, now_ms: u64) -> anyhow::Result<Reply> {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let period = match query
            .split('&')
            .find_map(|kv| kv.strip_prefix("period="))
            .map(percent_decode)
        {
            Some(text) => match Period::parse(&text) {
                Ok(p) => p,
                Err(e) => return Ok(Reply::error(400, &e)),
            },
            None => Period::week(IsoWeek::last_complete(now_ms)),
        };
        let admin = self.is_admin(login);
        let query = period.query();
        let top = Place {
            root: "",
            query: &query,
        };
        let below = Place {
            root: "../",
            query: &query,
        };
        let path = path.trim_start_matches('/');
        if let Some(key) = path
            .strip_prefix("jobs/")
            .and_then(|f| f.strip_suffix(".html"))
        {
            let Some(job) = db.job(key)? else {
                return Ok(Reply::error(404, "no such job"));
            };
            if !admin && job.user != login {
                return Ok(Reply::error(403, "not your job"));
            }
            let traced = db
                .analyses_by_key()?
                .remove(key)
                .map(TracedJob::from_stored);
            return Ok(Reply::page(pages::job(&job, traced.as_ref(), below)));
        }
        if let Some(slug) = path
            .strip_prefix("users/")
            .and_then(|f| f.strip_suffix(".html"))
        {
            if !admin && slug != user_slug(login) {
                return Ok(Reply::error(403, "not your page"));
            }
            let jobs = db.jobs_ended_between(period.from_ms, period.to_ms)?;
            let digests = digests_over(&jobs, &period.label, period.hours(), &self.config.digest);
            let Some(digest) = digests.iter().find(|d| user_slug(&d.user) == slug) else {
                return Ok(Reply::error(404, &format!("no jobs in {}", period.label)));
            };
            let own: Vec<_> = jobs.iter().filter(|j| j.user == digest.user).collect();
            return Ok(Reply::page(pages::user(digest, &own, &period.label, below)));
        }
        let interval_page = matches!(
            path,
            "" | "index.html" | "charts.html" | "tables.html" | "critical.html" | "users.html"
        );
        if !interval_page {
            return Ok(Reply::error(404, "no such page"));
        }
        if !admin {
            return Ok(Reply::error(
                403,
                "only admins see the site pages; yours is users/<login>.html",
            ));
        }
        let jobs = db.jobs_ended_between(period.from_ms, period.to_ms)?;
        let s = summarise(db, &jobs, &period, &self.config)?;
        let config = &self.config;
        Ok(Reply::page(match path {
            "charts.html" => pages::charts(&s, top),
            "tables.html" => pages::tables(&s, config, top),
            "critical.html" => pages::critical(&s, config, top),
            "users.html" => pages::users(&s, top),
            _ => pages::overview(&s, config, top),
        }))
    }
}

/// `%XX` and `+` of a query value.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', high, low]) => hex(*high).zip(hex(*low)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn respond(pages: &Pages, db: &Database, request: tiny_http::Request) {
    let method = request.method().clone();
    let reply = if !matches!(method, tiny_http::Method::Get | tiny_http::Method::Head) {
        Reply::error(405, "only GET")
    } else {
        let login = pages.identify(
            request
                .headers()
                .iter()
                .map(|h| (h.field.as_str().as_str(), h.value.as_str())),
        );
        pages.answer(db, login.as_deref(), request.url(), now_ms())
    };
    let content_type = if reply.html {
        "text/html; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut response = tiny_http::Response::from_string(reply.body).with_status_code(reply.status);
    let mut headers = vec![
        ("Content-Type", content_type),
        // The pages need no scripts and no external anything: forbid them outright.
        (
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
        ),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "private, no-store"),
    ];
    if reply.status == 401 && matches!(pages.auth, Auth::Tokens(_)) {
        headers.push(("WWW-Authenticate", "Bearer realm=\"mpistat\""));
    }
    for (name, value) in headers {
        if let Ok(header) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(header);
        }
    }
    let _ = request.respond(response);
}

/// Serve on `listen` until killed, `WORKERS` threads each with its own database connection.
pub fn serve(pages: Pages, database: PathBuf, listen: &str) -> anyhow::Result<()> {
    let server = tiny_http::Server::http(listen)
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    eprintln!(
        "mpistat serve: listening on {listen} (auth: {})",
        pages.config.serve.auth
    );
    let server = Arc::new(server);
    let pages = Arc::new(pages);
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (server, pages, database) = (server.clone(), pages.clone(), database.clone());
            std::thread::spawn(move || -> anyhow::Result<()> {
                let db = Database::open(&database)?;
                for request in server.incoming_requests() {
                    respond(&pages, &db, request);
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker
            .join()
            .map_err(|_| anyhow::anyhow!("a worker panicked"))??;
    }
    Ok(())
}

/// `mpistat serve [--listen ADDR]`.
pub fn command(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let (config, db) = crate::site::load(&args.db)?;
    let database = args
        .db
        .database
        .clone()
        .unwrap_or_else(|| config.database.path.clone());
    drop(db);
    let auth = auth_from_site(&config)?;
    let listen = args
        .listen
        .clone()
        .unwrap_or_else(|| config.serve.listen.clone());
    serve(Pages { config, auth }, database, &listen)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_file_lines_and_problems() {
        let (tokens, problems) = parse_tokens(
            "# admins\nroot 0123456789abcdef0123\n\nalice aaaaaaaaaaaaaaaaaaaa\nbob short\njunk\n",
        );
        assert_eq!(tokens["0123456789abcdef0123"], "root");
        assert_eq!(tokens["aaaaaaaaaaaaaaaaaaaa"], "alice");
        assert_eq!(tokens.len(), 2);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("line 5:"), "{problems:?}");
    }

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(
            percent_decode("2026-11-01..2026-11-02"),
            "2026-11-01..2026-11-02"
        );
        assert_eq!(percent_decode("2026%2DW47"), "2026-W47");
        assert_eq!(percent_decode("a+b%"), "a b%");
    }

    #[test]
    fn identity_from_header_or_token() {
        let header = Pages {
            config: SiteConfig::default(),
            auth: Auth::Header("REMOTE_USER".into()),
        };
        let got = header.identify([("remote_user", " alice ")].into_iter());
        assert_eq!(got.as_deref(), Some("alice"));
        assert_eq!(header.identify([("X-Other", "alice")].into_iter()), None);
        let tokens = Pages {
            config: SiteConfig::default(),
            auth: Auth::Tokens(HashMap::from([("t".repeat(20), "bob".into())])),
        };
        let bearer = format!("Bearer {}", "t".repeat(20));
        let got = tokens.identify([("Authorization", bearer.as_str())].into_iter());
        assert_eq!(got.as_deref(), Some("bob"));
        assert_eq!(
            tokens.identify([("Authorization", "Bearer nope")].into_iter()),
            None
        );
        assert_eq!(tokens.identify([("REMOTE_USER", "root")].into_iter()), None);
    }
}
