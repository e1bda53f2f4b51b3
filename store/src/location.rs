//! Where the database is, parsed once from `[database]` or `--database`: a file (SQLite) or a
//! PostgreSQL server (a `postgresql://` URL, as libpq writes them).

use crate::{Error, Result};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The URL schemes libpq takes for a server; anything else names a SQLite file.
const POSTGRES_SCHEMES: [&str; 2] = ["postgresql://", "postgres://"];

/// What stands for a password wherever a URL is shown.
const HIDDEN: &str = "***";

/// Where the database is.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PostgresUrl),
}

impl Location {
    /// A `postgresql://` (or `postgres://`) URL names a PostgreSQL database (checked here, not
    /// when first used); any other text a SQLite file.
    pub fn parse(text: &str) -> Result<Location> {
        if text.is_empty() {
            return Err(Error::Location {
                location: String::new(),
                reason: "empty".into(),
            });
        }
        if !POSTGRES_SCHEMES
            .iter()
            .any(|scheme| text.starts_with(scheme))
        {
            return Ok(Location::Sqlite(PathBuf::from(text)));
        }
        let url = PostgresUrl(text.to_owned());
        url.config()?;
        Ok(Location::Postgres(url))
    }
}

/// Shown with its password hidden.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => write!(f, "{url}"),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A PostgreSQL connection URL. It may hold a password: it is only ever shown with the
/// password hidden ([`fmt::Display`], [`fmt::Debug`]).
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(String);

impl PostgresUrl {
    /// The client's settings (the Unix socket's directory as `host`, the role, the database, a
    /// password if the URL has one).
    pub(crate) fn config(&self) -> Result<postgres::Config> {
        postgres::Config::from_str(&self.0).map_err(|e| Error::Location {
            location: self.to_string(),
            reason: e.to_string(),
        })
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&without_password(&self.0))
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// `url` with the password of its user part (`user:password@`) and of a `password=` parameter
/// replaced by [`HIDDEN`].
fn without_password(url: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let (scheme, rest) = url.split_at(scheme_end);
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (user_info, host) = authority.split_at(at);
            match user_info.find(':') {
                Some(colon) => format!("{}:{HIDDEN}{host}", &user_info[..colon]),
                None => authority.to_owned(),
            }
        }
        None => authority.to_owned(),
    };
    let path_and_query = match path_and_query.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if name == "password" => format!("{name}={HIDDEN}"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => path_and_query.to_owned(),
    };
    format!("{scheme}{authority}{path_and_query}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_url_is_a_server_anything_else_a_file() {
        let url = "postgresql://mpistat@/mpistat?host=/run/postgresql";
        assert!(matches!(Location::parse(url), Ok(Location::Postgres(_))));
        assert!(matches!(
            Location::parse("postgres://u:p@db.example:5433/mpistat"),
            Ok(Location::Postgres(_))
        ));
        assert_eq!(
            Location::parse("/var/lib/mpistat/mpistat.db").unwrap(),
            Location::Sqlite(PathBuf::from("/var/lib/mpistat/mpistat.db"))
        );
        // A relative name that is no URL stays a file, even with a colon in it.
        assert_eq!(
            Location::parse("postgresql:mpistat.db").unwrap(),
            Location::Sqlite(PathBuf::from("postgresql:mpistat.db"))
        );
        assert!(Location::parse("").is_err());
        assert!(Location::parse("postgresql://u@/db?bogus_option=1").is_err());
    }

    #[test]
    fn a_password_is_never_shown() {
        for (url, shown) in [
            (
                "postgresql://mpistat:s3cret@db.example:5432/mpistat",
                "postgresql://mpistat:***@db.example:5432/mpistat",
            ),
            (
                "postgresql://mpistat@/mpistat?host=/run/postgresql&password=s3cret",
                "postgresql://mpistat@/mpistat?host=/run/postgresql&password=***",
            ),
            (
                "postgresql://mpistat:p%40ss@/mpistat?host=/tmp",
                "postgresql://mpistat:***@/mpistat?host=/tmp",
            ),
            (
                "postgresql://mpistat@/mpistat?host=/tmp",
                "postgresql://mpistat@/mpistat?host=/tmp",
            ),
        ] {
            let location = Location::parse(url).unwrap();
            assert_eq!(location.to_string(), shown);
            assert_eq!(format!("{location:?}"), shown);
        }
        let bad = Location::parse("postgresql://u:s3cret@/db?bogus_option=1").unwrap_err();
        assert!(!bad.to_string().contains("s3cret"), "{bad}");
    }

    proptest! {
        #[test]
        fn no_password_survives_display(
            user in "[a-z]{1,8}",
            password in "[A-Za-z0-9%]{1,16}",
            host in "[a-z.]{0,12}",
            in_query in any::<bool>(),
        ) {
            let url = if in_query {
                format!("postgresql://{user}@{host}/db?password={password}")
            } else {
                format!("postgresql://{user}:{password}@{host}/db")
            };
            let shown = without_password(&url);
            prop_assert!(!shown.contains(&format!(":{password}@")), "{}", shown);
            prop_assert!(!shown.contains(&format!("={password}")), "{}", shown);
            prop_assert!(shown.contains(&user));
        }
    }
}
