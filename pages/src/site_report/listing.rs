//! Which part of a long list a page shows (users, critical jobs, a user's jobs): the page
//! length, the sort keys of each list, and the query that picks a page ([`Listing`]).

/// Rows of a long list on one page.
pub const PAGE_ROWS: usize = 100;

/// Which part of a long list a page shows: sorted by `sort` (a column's key; empty: the
/// list's default), from row `from` on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub sort: String,
    pub from: usize,
}

impl Listing {
    /// From a URL's query (`sort=cpu&from=200`); unknown parameters are ignored.
    pub fn of_query(query: &str) -> Listing {
        let mut listing = Listing::default();
        for (name, value) in query.split('&').filter_map(|kv| kv.split_once('=')) {
            match name {
                "sort" => listing.sort = value.to_string(),
                "from" => listing.from = value.parse().unwrap_or(0),
                _ => {}
            }
        }
        listing
    }

    /// The sort key if it is one of `keys`, else the first (the default).
    pub fn sort_among<'k>(&self, keys: &[&'k str]) -> &'k str {
        keys.iter().find(|k| **k == self.sort).unwrap_or(&keys[0])
    }
}

/// The columns of a job list, with their sort keys (see `pages::job_rows`).
pub const JOB_SORTS: [&str; 4] = ["end", "cpu", "mpi", "ranks"];

/// The columns the critical list sorts by (the first is the default).
pub const CRITICAL_SORTS: [&str; 2] = ["cpu", "end"];

/// The columns the users list sorts by (the first is the default).
pub const USER_SORTS: [&str; 5] = ["cpu", "user", "jobs", "mpi", "balance"];
