//! Who is who on this host: login names and uids from its password database (NSS), for the
//! digest's check of the user name a record claims and for the analysis record a user sends.

use std::ffi::{c_char, c_int, CStr, CString};

/// This host's password database, through NSS (files, sssd, LDAP, ... as
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

    /// The login name of `uid`; `None` when there is none or it could not be looked up.
    pub fn name_of(&self, uid: u32) -> Option<String> {
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

    /// The uid of login `name`; `None` when there is none or it could not be looked up.
    pub fn uid_of(&self, name: &str) -> Option<u32> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
