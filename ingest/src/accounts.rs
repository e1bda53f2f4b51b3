//! Who is who on the ingest host: login names and uids from its password database (NSS), for
//! checking the user name a record claims (see [`super::trust::forgery`]).
//!
//! [`Accounts`] is the seam: [`System`] asks NSS (`getpwuid_r`, `getpwnam_r`), [`Table`] is a
//! fixed list (tests, and hosts whose users the tests invent). [`Known`] remembers every answer
//! for one ingest run, so a run of a million records of a thousand users asks NSS about a
//! thousand uids and names, not a million times; the next run (`--follow`: every few seconds)
//! asks again, so a new or renamed account is seen.

pub use mpistat_site::accounts::System;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A password database: the login name of a uid, the uid of a login name.
pub trait Accounts: Send + Sync + std::fmt::Debug {
    /// The login name of `uid`; `None` when there is none or it could not be looked up.
    fn name_of(&self, uid: u32) -> Option<String>;
    /// The uid of login `name`; `None` when there is none or it could not be looked up.
    fn uid_of(&self, name: &str) -> Option<u32>;
}

/// The ingest host's password database, through NSS ([`mpistat_site::accounts::System`]).
impl Accounts for System {
    fn name_of(&self, uid: u32) -> Option<String> {
        System::name_of(self, uid)
    }

    fn uid_of(&self, name: &str) -> Option<u32> {
        System::uid_of(self, name)
    }
}

/// A fixed password database: (name, uid) entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    names: BTreeMap<u32, String>,
    uids: BTreeMap<String, u32>,
}

impl Table {
    /// The accounts `entries` (name, uid); for a name or uid given twice, the first one counts
    /// (as in a password file).
    pub fn new<'a>(entries: impl IntoIterator<Item = (&'a str, u32)>) -> Table {
        let mut table = Table::default();
        for (name, uid) in entries {
            table.names.entry(uid).or_insert_with(|| name.to_string());
            table.uids.entry(name.to_string()).or_insert(uid);
        }
        table
    }
}

impl Accounts for Table {
    fn name_of(&self, uid: u32) -> Option<String> {
        self.names.get(&uid).cloned()
    }

    fn uid_of(&self, name: &str) -> Option<u32> {
        self.uids.get(name).copied()
    }
}

/// [`Accounts`] asked at most once per uid and per name (for one ingest run).
#[derive(Debug)]
pub struct Known {
    accounts: Arc<dyn Accounts>,
    names: HashMap<u32, Option<String>>,
    uids: HashMap<String, Option<u32>>,
}

impl Known {
    pub fn new(accounts: Arc<dyn Accounts>) -> Known {
        Known {
            accounts,
            names: HashMap::new(),
            uids: HashMap::new(),
        }
    }

    /// [`Accounts::name_of`], remembered.
    pub fn name_of(&mut self, uid: u32) -> Option<&str> {
        let accounts = &self.accounts;
        self.names
            .entry(uid)
            .or_insert_with(|| accounts.name_of(uid))
            .as_deref()
    }

    /// [`Accounts::uid_of`], remembered.
    pub fn uid_of(&mut self, name: &str) -> Option<u32> {
        if let Some(&uid) = self.uids.get(name) {
            return uid;
        }
        let uid = self.accounts.uid_of(name);
        self.uids.insert(name.to_string(), uid);
        uid
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn a_table_keeps_the_first_of_duplicates() {
        let table = Table::new([("alice", 1001), ("alice2", 1001), ("alice", 1002)]);
        assert_eq!(table.name_of(1001).as_deref(), Some("alice"));
        assert_eq!(table.uid_of("alice"), Some(1001));
        assert_eq!(table.uid_of("alice2"), Some(1001));
        // The second alice's uid has that name, but the name is the first alice's.
        assert_eq!(table.name_of(1002).as_deref(), Some("alice"));
    }

    /// A table that counts the questions it is asked.
    #[derive(Debug)]
    struct Counting {
        table: Table,
        asked: AtomicU64,
    }

    impl Accounts for Counting {
        fn name_of(&self, uid: u32) -> Option<String> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            self.table.name_of(uid)
        }
        fn uid_of(&self, name: &str) -> Option<u32> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            self.table.uid_of(name)
        }
    }

    /// Half a million records of a thousand users (half of them unknown): each uid and each name
    /// is asked about once.
    #[test]
    fn each_uid_and_name_is_asked_about_once() {
        let users: Vec<(String, u32)> = (0..1000).map(|u| (format!("user{u}"), 2000 + u)).collect();
        let known_users = users.iter().take(500).map(|(n, u)| (n.as_str(), *u));
        let counting = Arc::new(Counting {
            table: Table::new(known_users),
            asked: AtomicU64::new(0),
        });
        let mut known = Known::new(counting.clone());
        for n in 0..500_000 {
            let (name, uid) = &users[n % users.len()];
            let expected = (n % users.len() < 500).then_some(name.as_str());
            assert_eq!(known.name_of(*uid), expected);
            assert_eq!(known.uid_of(name), expected.map(|_| *uid));
        }
        assert_eq!(counting.asked.load(Ordering::Relaxed), 2000);
    }
}
