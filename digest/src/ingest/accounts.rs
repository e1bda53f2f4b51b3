//! Who is who on the ingest host: login names and uids from its password database (NSS), for
//! checking the user name a record claims (see [`super::trust::forgery`]).
//!
//! [`Accounts`] is the seam: [`System`] asks NSS (`getpwuid_r`, `getpwnam_r`), [`Table`] is a
//! fixed list (tests, and hosts whose users the tests invent). [`Known`] remembers every answer
//! for one ingest run, so a run of a million records of a thousand users asks NSS about a
//! thousand uids and names, not a million times; the next run (`--follow`: every few seconds)
//! asks again, so a new or renamed account is seen.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::Arc;

/// A password database: the login name of a uid, the uid of a login name.
pub trait Accounts: Send + Sync + std::fmt::Debug {
    /// The login name of `uid`; `None` when there is none or it could not be looked up.
    fn name_of(&self, uid: u32) -> Option<String>;
    /// The uid of login `name`; `None` when there is none or it could not be looked up.
    fn uid_of(&self, name: &str) -> Option<u32>;
}

/// The ingest host's password database, through NSS (files, sssd, LDAP, ... as
/// `/etc/nsswitch.conf` says). Reentrant calls: ingest looks up on its reading thread while
/// other threads run. A lookup that fails (not found, or an error such as an unreachable
/// directory server) is "not known".
#[derive(Debug, Clone, Copy)]
pub struct System {
    /// Size of the first buffer for a lookup's strings; doubled while NSS says it is too small.
    first_buffer: usize,
}

/// The largest buffer a lookup may grow to (an entry larger than this is "not known").
const MAX_BUFFER: usize = 1 << 20;

impl Default for System {
    fn default() -> Self {
        // SAFETY: sysconf has no memory effects.
        let suggested = unsafe { libc::sysconf(libc::_SC_GETPW_R_SIZE_MAX) };
        System {
            first_buffer: usize::try_from(suggested)
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or(1024)
                .min(MAX_BUFFER),
        }
    }
}

impl System {
    /// One `getpw*_r` call (`call(pwd, buf, buflen, result)`) with a buffer grown on `ERANGE`,
    /// and `read` of the entry found.
    fn lookup<T>(
        &self,
        call: impl Fn(*mut libc::passwd, *mut c_char, usize, *mut *mut libc::passwd) -> c_int,
        read: impl FnOnce(&libc::passwd) -> T,
    ) -> Option<T> {
        let mut size = self.first_buffer.max(1);
        loop {
            let mut buf: Vec<c_char> = vec![0; size];
            // SAFETY: passwd is plain data (integers and pointers); zeroed is a valid value.
            let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            match call(&mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) {
                libc::ERANGE if size < MAX_BUFFER => size *= 2,
                // Found: `result` points to `pwd`, whose strings are in `buf`, alive here.
                0 if !result.is_null() => return Some(read(&pwd)),
                _ => return None,
            }
        }
    }
}

impl Accounts for System {
    fn name_of(&self, uid: u32) -> Option<String> {
        self.lookup(
            // SAFETY: getpwuid_r writes only into `pwd`, the buffer of `len` bytes and `result`.
            |pwd, buf, len, result| unsafe { libc::getpwuid_r(uid, pwd, buf, len, result) },
            // SAFETY: a found entry's pw_name is a NUL-terminated string in the buffer.
            |pwd| {
                unsafe { CStr::from_ptr(pwd.pw_name) }
                    .to_string_lossy()
                    .into_owned()
            },
        )
    }

    fn uid_of(&self, name: &str) -> Option<u32> {
        // A name with a NUL byte is nobody's.
        let name = CString::new(name).ok()?;
        self.lookup(
            // SAFETY: getpwnam_r reads the NUL-terminated name and writes only into `pwd`, the
            // buffer of `len` bytes and `result`.
            |pwd, buf, len, result| unsafe {
                libc::getpwnam_r(name.as_ptr(), pwd, buf, len, result)
            },
            |pwd| pwd.pw_uid,
        )
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

    /// uid 0 is root on every Unix system; no other account is assumed.
    #[test]
    fn the_system_database_knows_root() {
        let system = System::default();
        assert_eq!(system.name_of(0).as_deref(), Some("root"));
        assert_eq!(system.uid_of("root"), Some(0));
    }

    #[test]
    fn the_system_database_grows_its_buffer_when_nss_asks() {
        // One byte cannot hold any entry: NSS answers ERANGE until the buffer is large enough.
        let tiny = System { first_buffer: 1 };
        assert_eq!(tiny.name_of(0).as_deref(), Some("root"));
        assert_eq!(tiny.uid_of("root"), Some(0));
    }

    #[test]
    fn unknown_and_impossible_names_are_not_known() {
        let system = System::default();
        assert_eq!(system.uid_of("mpistat-no-such-user-4f1c9a"), None);
        assert_eq!(system.uid_of("ro\0ot"), None);
        assert_eq!(system.uid_of(""), None);
    }

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
