//! `mpistat serve`: the admin pages of [`crate::site_report`] rendered live from the database for
//! any interval (`?period=2026-W47`, `?period=2026-11`, `?period=2026-11-02..2026-11-08`; default:
//! the last complete week), with access control.
//!
//! Identity comes from one of two sources (`[serve] auth` in site.toml):
//! * `header`: a reverse proxy that authenticated the user puts the login name in a header
//!   (`user_header`, default `REMOTE_USER`); a request without the header gets 401. Whoever can
//!   connect can set that header, and loopback is no boundary (every local user can connect), so
//!   header mode needs a guard: a Unix socket (`listen = "unix:PATH"`, the default) of mode 0660
//!   whose group is the proxy's (`socket_group`), and/or a secret the proxy adds to every request
//!   (`proxy_secret_file`, compared in constant time). [`check_guard`] refuses header mode on TCP
//!   without a secret unless the site sets `allow_unguarded_header`.
//! * `token`: `Authorization: Bearer <token>`, looked up in `tokens_file` (lines `login token`),
//!   which must be owned by root and neither writable by group/others nor readable by others.
//!
//! Admins (`[serve] admins`) see every page; anyone else only their own user page and their own
//! jobs' pages (403 otherwise). The connections, and the limits that hold whoever connects, are
//! [`server`]'s; requests and answers on the wire [`http`]'s. Pages are made by four workers,
//! each with its own database connection (the SQLite queries behind a page are synchronous).

pub mod http;
pub mod server;

use crate::metrics;
use crate::site_report::listing::Listing;
use crate::site_report::pages::{self, user_slug, Place};
use crate::site_report::search;
use crate::site_report::summary::{self, summarise};
use crate::{Chain, Error};
use mpistat_figures::period::Period;
use mpistat_figures::rollup;
use mpistat_figures::traced::TracedJob;
use mpistat_figures::week::IsoWeek;
use mpistat_service::private::Group;
use mpistat_site::{Listen, ServeAuth, SiteConfig};
use mpistat_store::{Location, ReadStore};
pub use server::Log;
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

const WORKERS: usize = 4;
/// Identified requests that may wait for a worker before new ones get 503.
const QUEUE_PER_WORKER: usize = 16;
/// File descriptors kept for the database, the listener and standard streams.
const SPARE_FDS: usize = 64;

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

/// The text of a file that holds secrets, refusing one that others could have written or can
/// read: it must be owned by root and neither writable by group/others nor readable by others.
fn read_protected(path: &Path) -> Result<String, Error> {
    let cannot = |doing| {
        move |source| Error::File {
            doing,
            path: path.to_path_buf(),
            source,
        }
    };
    let meta = std::fs::metadata(path).map_err(cannot("read"))?;
    if meta.uid() != 0 {
        return Err(Error::SecretNotRoots {
            path: path.to_path_buf(),
            uid: meta.uid(),
        });
    }
    if meta.mode() & 0o026 != 0 {
        return Err(Error::SecretOpenToOthers {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o7777,
        });
    }
    std::fs::read_to_string(path).map_err(cannot("read"))
}

/// Read the tokens file (see [`read_protected`] for who must own it).
pub fn load_tokens(path: &Path) -> Result<(HashMap<String, String>, Vec<String>), Error> {
    Ok(parse_tokens(&read_protected(path)?))
}

/// The secret the proxy adds to every request: the first line of `path` (see
/// [`read_protected`]), at least 16 characters.
pub fn load_proxy_secret(path: &Path) -> Result<String, Error> {
    let text = read_protected(path)?;
    let secret = text.lines().next().unwrap_or("").trim();
    if secret.len() < 16 {
        return Err(Error::ShortSecret {
            path: path.to_path_buf(),
        });
    }
    Ok(secret.to_string())
}

/// The auth settings of `config` (reading the tokens file for `token`; its problems are said
/// on `err`).
pub fn auth_from_site(config: &SiteConfig, err: &mut impl Write) -> Result<Auth, Error> {
    if config.serve.auth == ServeAuth::Token {
        let (tokens, problems) = load_tokens(&config.serve.tokens_file)?;
        for problem in problems {
            writeln!(
                err,
                "mpistat serve: {}: {problem}",
                config.serve.tokens_file.display()
            )?;
        }
        Ok(Auth::Tokens(tokens))
    } else {
        Ok(Auth::Header(config.serve.user_header.clone()))
    }
}

/// Refuse header mode on TCP without a proxy secret unless the site explicitly allows it:
/// anyone who can reach the port could claim to be anyone.
pub fn check_guard(config: &SiteConfig, listen: &Listen) -> Result<(), Error> {
    let serve = &config.serve;
    let unguarded = serve.auth == ServeAuth::Header
        && matches!(listen, Listen::Tcp(_))
        && serve.proxy_secret_file.is_none();
    if unguarded && !serve.allow_unguarded_header {
        return Err(Error::Unguarded {
            header: serve.user_header.clone(),
        });
    }
    Ok(())
}

/// `a == b` in a time that depends on their lengths only, not on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

/// Bind a Unix socket at `path` that only its owner and `group` (empty: ours) can open (mode
/// 0660; created under umask 0177, so it is never more open than that). A stale socket is
/// replaced; one a live server answers on, or any other file, is an error.
pub fn bind_unix(path: &Path, group: &str) -> Result<UnixListener, Error> {
    let cannot = |doing| {
        move |source| Error::File {
            doing,
            path: path.to_path_buf(),
            source,
        }
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(Error::SocketInUse {
                    path: path.to_path_buf(),
                });
            }
            std::fs::remove_file(path).map_err(cannot("remove the stale socket"))?;
        }
        Ok(_) => {
            return Err(Error::NotASocket {
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(cannot("look at")(e)),
    }
    // SAFETY: umask only swaps the process's file-creation mask (restored right after).
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener = bound.map_err(cannot("listen on"))?;
    let group = Group::named(group).map_err(|source| Error::Group {
        setting: "[serve] socket_group",
        source,
    })?;
    if let Some(group) = group {
        group.give(path)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(cannot("set the mode of"))?;
    Ok(listener)
}

/// A response: status, the body's content type, and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    fn page(body: String) -> Reply {
        Reply {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body,
        }
    }

    fn error(status: u16, text: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{text}\n"),
        }
    }
}

/// What answers requests: the site configuration and who may see what.
pub struct Pages {
    pub config: SiteConfig,
    pub auth: Auth,
    /// The secret every request must carry in `[serve] proxy_secret_header`, if set.
    pub proxy_secret: Option<String>,
    /// What `/metrics` keeps from one scrape to the next.
    metrics: metrics::TopCache,
    /// Where requests that failed are said.
    pub log: Log,
}

impl Pages {
    pub fn new(config: SiteConfig, auth: Auth, proxy_secret: Option<String>, log: Log) -> Pages {
        Pages {
            config,
            auth,
            proxy_secret,
            metrics: metrics::TopCache::default(),
            log,
        }
    }

    /// The login of a request with these headers (name, value), if it has one we trust.
    pub fn identify<'a>(
        &self,
        headers: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Option<String> {
        let headers: Vec<(&str, &str)> = headers.collect();
        let value = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        };
        if let Some(secret) = &self.proxy_secret {
            let sent = value(&self.config.serve.proxy_secret_header).unwrap_or("");
            if !same_secret(sent.trim().as_bytes(), secret.as_bytes()) {
                return None;
            }
        }
        match &self.auth {
            Auth::Header(name) => value(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            Auth::Tokens(tokens) => value("authorization")
                .and_then(|v| v.trim().strip_prefix("Bearer "))
                .and_then(|token| tokens.get(token.trim()).cloned()),
        }
    }

    /// The answer to a request without an identity.
    pub fn unidentified(&self) -> Reply {
        Reply::error(401, "who are you? (no identity: see [serve] in site.toml)")
    }

    fn is_admin(&self, login: &str) -> bool {
        self.config.serve.admins.iter().any(|a| a == login)
    }

    /// The answer to `GET url` by `login` (`None`: not identified).
    pub fn answer(&self, db: &ReadStore, login: Option<&str>, url: &str, now_ms: u64) -> Reply {
        let Some(login) = login else {
            return self.unidentified();
        };
        match self.route(db, login, url, now_ms) {
            Ok(reply) => reply,
            Err(e) => {
                self.log
                    .say(format_args!("mpistat serve: {url}: {}", Chain(&e)));
                Reply::error(500, "internal error (logged)")
            }
        }
    }

    fn route(&self, db: &ReadStore, login: &str, url: &str, now_ms: u64) -> Result<Reply, Error> {
        let (path, query_text) = url.split_once('?').unwrap_or((url, ""));
        let admin = self.is_admin(login);
        if path == "/metrics" {
            if !admin {
                return Ok(Reply::error(403, "only admins may scrape the metrics"));
            }
            let limit = self.config.serve.metrics_top;
            let figures = metrics::gather(db, now_ms, limit, &self.metrics)?;
            return Ok(Reply {
                status: 200,
                content_type: metrics::CONTENT_TYPE,
                body: metrics::render(&figures),
            });
        }
        let period = match query_text
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
        let query = period.query();
        let top = Place {
            root: "",
            query: &query,
            site: None,
        };
        let below = Place { root: "../", ..top };
        let listing = Listing::of_query(query_text);
        let path = path.trim_start_matches('/');
        if let Some(key) = path
            .strip_prefix("jobs/")
            .and_then(|f| f.strip_suffix(".html"))
        {
            // Links name the job's end time: then its row is found by the unique index.
            let end = query_text
                .split('&')
                .find_map(|kv| kv.strip_prefix("end="))
                .and_then(|end| end.parse().ok());
            let job = match end {
                Some(end_ms) => db.job_ended_at(end_ms, key)?,
                None => db.job(key)?,
            };
            let Some(job) = job else {
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
            let users = rollup::users_of_period(db, period.from_ms, period.to_ms)?;
            let Some((user, totals)) = users.iter().find(|(u, _)| user_slug(u) == slug) else {
                return Ok(Reply::error(404, &format!("no jobs in {}", period.label)));
            };
            let (user, mpi_ns, user_jobs) = (user.clone(), totals.mpi_ns, totals.jobs);
            let digests = mpistat_render::user::user_digests_among(
                db,
                &period,
                &self.config,
                users,
                Some(&user),
            )?;
            let Some(digest) = digests.first() else {
                return Ok(Reply::error(404, &format!("no jobs in {}", period.label)));
            };
            let jobs = summary::user_jobs(db, &user, &period, &listing)?;
            return Ok(Reply::page(pages::user(
                digest,
                mpi_ns,
                &jobs,
                user_jobs,
                &listing,
                &period.label,
                below,
            )));
        }
        let interval_page = matches!(
            path,
            "" | "index.html"
                | "charts.html"
                | "tables.html"
                | "critical.html"
                | "users.html"
                | "search.html"
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
        if path == "search.html" {
            let text = query_text
                .split('&')
                .find_map(|kv| kv.strip_prefix("q="))
                .map(percent_decode)
                .unwrap_or_default();
            let found = search::search(db, &period, text.trim())?;
            return Ok(Reply::page(pages::search(&found, &period.label, top)));
        }
        let s = summarise(db, &period, &self.config)?;
        let config = &self.config;
        Ok(Reply::page(match path {
            "charts.html" => pages::charts(&s, top),
            "tables.html" => pages::tables(&s, top),
            "critical.html" => {
                let jobs = summary::critical_page(db, &period, &listing, s.critical_jobs)?;
                let (traced, count) = summary::traced_jobs(db, &period)?;
                pages::critical(&s, config, &jobs, (&traced, count), &listing, top)
            }
            "users.html" => pages::users(&s, &listing, top),
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

impl Pages {
    /// The bytes of `reply` on the wire, with the headers every page gets.
    fn encode(&self, reply: &Reply, head_only: bool) -> Vec<u8> {
        let mut headers = vec![
            ("Content-Type", reply.content_type),
            // The pages need no scripts and no external anything: forbid them outright.
            (
                "Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
            ),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cache-Control", "private, no-store"),
        ];
        if reply.status == 401 && matches!(self.auth, Auth::Tokens(_)) {
            headers.push(("WWW-Authenticate", "Bearer realm=\"mpistat\""));
        }
        http::answer(reply.status, &headers, reply.body.as_bytes(), head_only)
    }
}

/// The pages and the database they are made from: what [`server::run`] serves.
struct Served {
    pages: Pages,
    database: Location,
}

impl server::Site for Served {
    type Worker = ReadStore;

    /// A read handle: serving a page never writes the database.
    fn worker(&self) -> Result<ReadStore, mpistat_store::Error> {
        ReadStore::open_at(&self.database)
    }

    fn log(&self) -> &Log {
        &self.pages.log
    }

    fn identify(&self, request: &http::Request) -> Option<String> {
        let headers = request.headers.iter();
        self.pages
            .identify(headers.map(|(name, value)| (name.as_str(), value.as_str())))
    }

    fn unidentified(&self, head_only: bool) -> Vec<u8> {
        self.pages.encode(&self.pages.unidentified(), head_only)
    }

    fn answer(&self, db: &mut ReadStore, login: &str, request: &http::Request) -> Vec<u8> {
        if let Err(e) = db.refresh() {
            self.pages.log.say(format_args!("mpistat serve: {e}"));
        }
        let reply = self
            .pages
            .answer(db, Some(login), &request.target, now_ms());
        let _ = db.report_quarantined(&mut *self.pages.log.writer());
        self.pages.encode(&reply, request.head_only)
    }
}

/// The limits of `[serve]`, with `max_connections` lowered to what the process's file
/// descriptors allow (their soft limit is raised to the hard one as far as needed).
/// Connections given up for the file descriptor limit are said on `log`.
pub fn limits(config: &mpistat_site::ServeConfig, log: &Log) -> server::Limits {
    let wanted = config.max_connections + SPARE_FDS;
    // SAFETY: getrlimit and setrlimit only read and write `limit`.
    let available = unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            wanted as libc::rlim_t
        } else {
            if limit.rlim_cur < wanted as libc::rlim_t {
                let raised = libc::rlimit {
                    rlim_cur: limit.rlim_max.min(wanted as libc::rlim_t),
                    rlim_max: limit.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit = raised;
                }
            }
            limit.rlim_cur
        }
    };
    let max_connections = config
        .max_connections
        .min((available as usize).saturating_sub(SPARE_FDS))
        .max(1);
    if max_connections < config.max_connections {
        log.say(format_args!(
            "mpistat serve: only {max_connections} connections (of max_connections = {}): the \
             file descriptor limit is {available} (LimitNOFILE=)",
            config.max_connections
        ));
    }
    server::Limits {
        max_connections,
        max_connections_per_peer: config.max_connections_per_peer.clamp(1, max_connections),
        request_timeout: Duration::from_secs(config.request_timeout_s.max(1)),
        response_timeout: Duration::from_secs(config.response_timeout_s.max(1)),
        queue: WORKERS * QUEUE_PER_WORKER,
    }
}

/// Serve on `listen` until killed, `WORKERS` threads each with its own database connection
/// (what it does is said on `pages.log`).
pub fn serve(pages: Pages, database: Location, listen: &Listen) -> Result<(), Error> {
    let (listener, place) = match listen {
        Listen::Unix(path) => {
            let group = &pages.config.serve.socket_group;
            let listener = bind_unix(path, group)?;
            let group = if group.is_empty() { "ours" } else { group };
            let place = format!("unix:{} (mode 0660, group {group})", path.display());
            (server::Listener::Unix(listener), place)
        }
        Listen::Tcp(address) => {
            let listener =
                std::net::TcpListener::bind(address).map_err(|source| Error::Listen {
                    address: address.clone(),
                    source,
                })?;
            (server::Listener::Tcp(listener), address.clone())
        }
    };
    let limits = limits(&pages.config.serve, &pages.log);
    let secret = if pages.proxy_secret.is_some() {
        ", proxy secret required"
    } else {
        ""
    };
    pages.log.say(format_args!(
        "mpistat serve: listening on {place} (auth: {}{secret}); at most {} connections, {} per \
         peer; a request within {} s, its answer taken within {} s",
        pages.config.serve.auth,
        limits.max_connections,
        limits.max_connections_per_peer,
        limits.request_timeout.as_secs(),
        limits.response_timeout.as_secs(),
    ));
    server::run(Served { pages, database }, listener, limits, WORKERS)?;
    Ok(())
}

/// What `mpistat serve` serves: the database, and where it listens.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub db: mpistat_service::DatabaseOptions,
    /// `ADDR:PORT` or `unix:PATH`; `[serve] listen` if `None`.
    pub listen: Option<String>,
}

/// `mpistat serve [--listen ADDR|unix:PATH]`: serves until killed, saying what it does on `log`.
pub fn command(args: &Options, log: Log) -> Result<(), Error> {
    let (config, db) = mpistat_service::load(&args.db, &mut *log.writer())?;
    let database = db.location().ok_or(Error::InMemory)?;
    drop(db);
    let listen = args
        .listen
        .as_deref()
        .map_or_else(|| config.serve.listen.clone(), Listen::parse);
    check_guard(&config, &listen)?;
    let auth = auth_from_site(&config, &mut *log.writer())?;
    let proxy_secret = match &config.serve.proxy_secret_file {
        Some(path) => Some(load_proxy_secret(path)?),
        None => None,
    };
    let pages = Pages::new(config, auth, proxy_secret, log);
    serve(pages, database, &listen)
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
        let header = Pages::new(
            SiteConfig::default(),
            Auth::Header("REMOTE_USER".into()),
            None,
            Log::new(std::io::sink()),
        );
        let got = header.identify([("remote_user", " alice ")].into_iter());
        assert_eq!(got.as_deref(), Some("alice"));
        assert_eq!(header.identify([("X-Other", "alice")].into_iter()), None);
        let tokens = Pages::new(
            SiteConfig::default(),
            Auth::Tokens(HashMap::from([("t".repeat(20), "bob".into())])),
            None,
            Log::new(std::io::sink()),
        );
        let bearer = format!("Bearer {}", "t".repeat(20));
        let got = tokens.identify([("Authorization", bearer.as_str())].into_iter());
        assert_eq!(got.as_deref(), Some("bob"));
        assert_eq!(
            tokens.identify([("Authorization", "Bearer nope")].into_iter()),
            None
        );
        assert_eq!(tokens.identify([("REMOTE_USER", "root")].into_iter()), None);
    }

    #[test]
    fn a_proxy_secret_is_required_when_set() {
        let secret = "s3cret-of-the-proxy-0123";
        let pages = Pages::new(
            SiteConfig::default(),
            Auth::Header("REMOTE_USER".into()),
            Some(secret.into()),
            Log::new(std::io::sink()),
        );
        let as_root = ("REMOTE_USER", "root");
        assert_eq!(pages.identify([as_root].into_iter()), None);
        for wrong in ["", "s3cret-of-the-proxy-012", "s3cret-of-the-proxy-0124"] {
            let sent = ("x-mpistat-proxy-secret", wrong);
            assert_eq!(pages.identify([as_root, sent].into_iter()), None, "{wrong}");
        }
        let sent = ("X-Mpistat-Proxy-Secret", secret);
        assert_eq!(
            pages.identify([sent, as_root].into_iter()).as_deref(),
            Some("root")
        );
    }

    #[test]
    fn header_mode_on_tcp_needs_a_guard() {
        let tcp = Listen::parse("127.0.0.1:8080");
        let unix = Listen::parse("unix:/run/mpistat/serve.sock");
        assert_eq!(unix, Listen::Unix("/run/mpistat/serve.sock".into()));
        let mut config = SiteConfig::default();
        assert_eq!(config.serve.listen, unix, "safe default");
        assert!(check_guard(&config, &unix).is_ok());
        let err = check_guard(&config, &tcp).unwrap_err().to_string();
        assert!(err.contains("allow_unguarded_header"), "{err}");
        config.serve.proxy_secret_file = Some("/etc/mpistat/proxy-secret".into());
        assert!(check_guard(&config, &tcp).is_ok());
        config.serve.proxy_secret_file = None;
        config.serve.allow_unguarded_header = true;
        assert!(check_guard(&config, &tcp).is_ok());
        config.serve.allow_unguarded_header = false;
        config.serve.auth = ServeAuth::Token;
        assert!(check_guard(&config, &tcp).is_ok());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abcdef", b"abcdef"));
        assert!(!same_secret(b"abcdef", b"abcdeg"));
        assert!(!same_secret(b"abcdef", b"abcde"));
        assert!(!same_secret(b"", b"a"));
    }
}
