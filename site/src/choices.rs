//! The settings that take one of a few values, parsed once here into enums: the users of
//! [`crate::SiteConfig`] match on them, never on strings.
//!
//! A value that is none of them is a [`ConfigProblem`] and the setting keeps its default,
//! the rest of the file is still read (the profiler runs on what it can read): the
//! configuration is read with these settings taken leniently ([`or_default`]), and their text
//! is looked at again ([`problems`]) to say which value was not understood.

use crate::ConfigProblem;
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The syslog facility of the records (RFC 5424): `user`, `daemon` or `local0` .. `local7`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Facility {
    User,
    Daemon,
    /// `local0` .. `local7`.
    Local(u8),
}

impl Default for Facility {
    fn default() -> Self {
        Facility::Local(5)
    }
}

impl Facility {
    /// The facility's number, which a syslog priority is made of (`facility * 8 + severity`).
    pub fn code(self) -> u8 {
        match self {
            Facility::User => 1,
            Facility::Daemon => 3,
            Facility::Local(n) => 16 + n,
        }
    }
}

impl FromStr for Facility {
    type Err = ();
    fn from_str(name: &str) -> Result<Self, ()> {
        match name {
            "user" => Ok(Facility::User),
            "daemon" => Ok(Facility::Daemon),
            _ => name
                .strip_prefix("local")
                .and_then(|n| n.parse::<u8>().ok())
                .filter(|n| *n <= 7)
                .map(Facility::Local)
                .ok_or(()),
        }
    }
}

impl fmt::Display for Facility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Facility::User => f.write_str("user"),
            Facility::Daemon => f.write_str("daemon"),
            Facility::Local(n) => write!(f, "local{n}"),
        }
    }
}

/// How `mpistat serve` learns who asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ServeAuth {
    /// The login name is in a header set by a trusted reverse proxy.
    #[default]
    Header,
    /// `Authorization: Bearer <token>`, looked up in the tokens file.
    Token,
}

impl FromStr for ServeAuth {
    type Err = ();
    fn from_str(name: &str) -> Result<Self, ()> {
        match name {
            "header" => Ok(ServeAuth::Header),
            "token" => Ok(ServeAuth::Token),
            _ => Err(()),
        }
    }
}

impl fmt::Display for ServeAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServeAuth::Header => "header",
            ServeAuth::Token => "token",
        })
    }
}

/// Where `mpistat serve` listens: every text names a place (`unix:PATH`, else a TCP address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A Unix socket at this path (`unix:PATH`).
    Unix(PathBuf),
    /// A TCP address (`HOST:PORT`).
    Tcp(String),
}

impl Default for Listen {
    fn default() -> Self {
        Listen::Unix(PathBuf::from("/run/mpistat/serve.sock"))
    }
}

impl Listen {
    pub fn parse(text: &str) -> Listen {
        match text.strip_prefix("unix:") {
            Some(path) => Listen::Unix(PathBuf::from(path)),
            None => Listen::Tcp(text.to_string()),
        }
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
            Listen::Tcp(address) => f.write_str(address),
        }
    }
}

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|text| Listen::parse(&text))
    }
}

/// How the profiler reads its counters when the kernel offers no user-space read (rdpmc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CountersFallback {
    /// read(2) around every outermost MPI call: inside/outside MPI split, some 0.3-0.6 us a call.
    PerCall,
    /// Read at `MPI_Init` and `MPI_Finalize` only: totals, no split.
    #[default]
    Totals,
}

impl FromStr for CountersFallback {
    type Err = ();
    fn from_str(name: &str) -> Result<Self, ()> {
        match name {
            "per-call" => Ok(CountersFallback::PerCall),
            "totals" => Ok(CountersFallback::Totals),
            _ => Err(()),
        }
    }
}

/// A setting of a few values read leniently: text that is none of them gives the default (and
/// [`problems`] says so), so that one bad value costs that setting only.
pub fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr + Default,
{
    Ok(String::deserialize(d)?.parse().unwrap_or_default())
}

/// The text of the few-valued settings that [`or_default`] reads, as the file has it.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Texts {
    profiler: ProfilerTexts,
    syslog: SyslogTexts,
    serve: ServeTexts,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ProfilerTexts {
    counters_fallback: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct SyslogTexts {
    facility: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ServeTexts {
    auth: Option<String>,
}

/// The problems of `text` (a configuration that parsed, read from `path`): each few-valued
/// setting whose value is none of its values.
pub fn problems(text: &str, path: &str) -> Vec<ConfigProblem> {
    let Ok(texts) = basic_toml::from_str::<Texts>(text) else {
        return Vec::new(); // not reached: the configuration itself parsed
    };
    let bad =
        |value: &Option<String>, parses: fn(&str) -> bool| value.clone().filter(|v| !parses(v));
    let path = path.to_string();
    let mut problems = Vec::new();
    if let Some(facility) = bad(&texts.syslog.facility, |v| v.parse::<Facility>().is_ok()) {
        problems.push(ConfigProblem::BadFacility {
            path: path.clone(),
            facility,
        });
    }
    if let Some(auth) = bad(&texts.serve.auth, |v| v.parse::<ServeAuth>().is_ok()) {
        problems.push(ConfigProblem::BadServeAuth {
            path: path.clone(),
            auth,
        });
    }
    if let Some(value) = bad(&texts.profiler.counters_fallback, |v| {
        v.parse::<CountersFallback>().is_ok()
    }) {
        problems.push(ConfigProblem::BadCountersFallback { path, value });
    }
    problems
}
