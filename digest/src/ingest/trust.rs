//! Who really sent a syslog line: the uid rsyslog's imuxsock attested (`SCM_CREDENTIALS`), and
//! whether a record may claim what it claims ([`forgery`]).
//!
//! Any local user can write any syslog message, so the uid inside a record proves nothing. With
//! trusted properties on, rsyslog writes the kernel-attested uid in front of the message as
//! `uid=<n> pid=<n>` (see `etc/rsyslog.d/mpistat.conf`: `<time> <host> uid=<n> pid=<n> <tag><msg>`;
//! the test daemon writes `uid=<n> pid=<n> gid=<n> <tag><msg>`). The sender controls the tag and
//! the message, never what precedes them, so the attestation is only looked for among the first
//! three space-separated fields, as a `uid=` field directly followed by a `pid=` field. A line
//! that rsyslog could not attest (e.g. it came over the network) has `uid=` with an empty value.
//!
//! A record is its sender's when it claims the attested uid and, since the weekly mails and the
//! admin pages go by login name, a user name that is that uid's: checked against the ingest
//! host's password database ([`accounts`](super::accounts)). A name is forged when the attested
//! uid has another name there, or the name belongs to another uid there. When the host knows
//! neither the uid nor the name (its password database is not the cluster's), the name cannot be
//! checked and is believed; so is every name when the site turns the check off
//! (`[ingest] check_user_names = false`), and when there is no attested uid to check it against
//! (`require_attested_uid = false`).

use super::accounts::Known;

/// Fields at the start of a line that may hold the attestation: time, host, `uid=`.
const PREFIX_FIELDS: usize = 3;

/// The kernel-attested uid of the line's sender, if the line carries one.
pub fn attested_uid(line: impl AsRef<[u8]>) -> Option<u32> {
    let mut fields = line.as_ref().split(|&b| b == b' ');
    for _ in 0..PREFIX_FIELDS {
        let field = fields.next()?;
        if let Some(value) = field.strip_prefix(b"uid=") {
            let followed_by_pid = fields.next().is_some_and(|f| f.starts_with(b"pid="));
            if !followed_by_pid || value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // ASCII digits.
            return std::str::from_utf8(value).ok()?.parse().ok();
        }
    }
    None
}

/// Why a record may not be stored as its sender's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forgery {
    /// What the rejected entry is filed under after the job's key: `<key>/<suffix>`.
    pub suffix: String,
    /// What is wrong, for `mpistat ingest --report`.
    pub detail: String,
}

/// Whether a record claiming `uid` and user `name`, whose lines were attested as sent by
/// `sender`, is forged. Without an attested sender it is when `require_attested_uid`, else
/// nothing can be checked. With one, it is when the uids differ, and (when `accounts` is given)
/// when the sender's uid has another name, or `name` another uid, in `accounts`.
pub fn forgery(
    sender: Option<u32>,
    uid: u32,
    name: &str,
    require_attested_uid: bool,
    accounts: Option<&mut Known>,
) -> Option<Forgery> {
    let Some(sender) = sender else {
        return require_attested_uid.then(|| Forgery {
            suffix: "unattested".into(),
            detail: format!("claims uid {uid} ({name}); syslog attested no sender"),
        });
    };
    if sender != uid {
        return Some(Forgery {
            suffix: format!("uid {sender}"),
            detail: format!("claims uid {uid} ({name}) but uid {sender} sent it"),
        });
    }
    let accounts = accounts?;
    let name_forged = |detail| {
        Some(Forgery {
            suffix: format!("user {name}"),
            detail,
        })
    };
    if let Some(own) = accounts.name_of(uid).filter(|own| *own != name) {
        return name_forged(format!("claims user {name} but uid {uid} is {own}"));
    }
    match accounts.uid_of(name) {
        Some(other) if other != uid => name_forged(format!(
            "claims user {name} (uid {uid}) but user {name} is uid {other}"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::accounts::Table;
    use std::sync::Arc;

    #[test]
    fn site_template_and_test_daemon_template() {
        let site = "2026-11-23T09:00:00.123+00:00 node1 uid=1000 pid=42 mpistat: MPISTAT1 ab";
        assert_eq!(attested_uid(site), Some(1000));
        assert_eq!(
            attested_uid("uid=0 pid=1 gid=0 mpistat: MPISTAT1 x"),
            Some(0)
        );
    }

    #[test]
    fn no_attestation() {
        assert_eq!(
            attested_uid("2026-11-23T09:00:00 node1 uid= pid= mpistat: x"),
            None
        );
        assert_eq!(
            attested_uid("2026-11-23T09:00:00 node1 mpistat: MPISTAT1 x"),
            None
        );
        assert_eq!(attested_uid(""), None);
    }

    #[test]
    fn a_sender_cannot_write_its_own_attestation() {
        // Without rsyslog's prefix, a uid= in the tag or message is not believed.
        let forged = "2026-11-23T09:00:00 node1 mpistat: uid=0 pid=1 MPISTAT1 x";
        assert_eq!(attested_uid(forged), None);
        // The record summary's own `uid=` is followed by `exe=`, not `pid=`.
        assert_eq!(attested_uid("user=root uid=0 exe=/x"), None);
    }

    /// alice (1001) and bob (1002) are known; 1003 and carol are not.
    fn known() -> Known {
        Known::new(Arc::new(Table::new([("alice", 1001), ("bob", 1002)])))
    }

    fn check(sender: Option<u32>, uid: u32, name: &str) -> Option<Forgery> {
        forgery(sender, uid, name, true, Some(&mut known()))
    }

    #[test]
    fn a_name_that_is_the_senders_is_believed() {
        assert_eq!(check(Some(1001), 1001, "alice"), None);
        assert_eq!(check(Some(1002), 1002, "bob"), None);
    }

    #[test]
    fn a_name_that_is_not_the_senders_uids_is_forged() {
        // bob sends a record of his own uid that claims alice's name.
        let forged = check(Some(1002), 1002, "alice").expect("forged");
        assert_eq!(forged.suffix, "user alice");
        assert_eq!(forged.detail, "claims user alice but uid 1002 is bob");
        // A name unknown here is forged too when the sender's uid has a name.
        let forged = check(Some(1001), 1001, "carol").expect("forged");
        assert_eq!(forged.detail, "claims user carol but uid 1001 is alice");
    }

    #[test]
    fn a_name_of_another_uid_is_forged() {
        // uid 1003 has no name here, but alice is uid 1001.
        let forged = check(Some(1003), 1003, "alice").expect("forged");
        assert_eq!(forged.suffix, "user alice");
        assert_eq!(
            forged.detail,
            "claims user alice (uid 1003) but user alice is uid 1001"
        );
    }

    #[test]
    fn a_uid_and_name_both_unknown_here_are_believed() {
        assert_eq!(check(Some(1003), 1003, "carol"), None);
    }

    #[test]
    fn without_attestation_no_name_is_checked() {
        let mut known = known();
        let lenient = forgery(None, 1002, "alice", false, Some(&mut known));
        assert_eq!(lenient, None);
        let strict = forgery(None, 1002, "alice", true, Some(&mut known)).expect("forged");
        assert_eq!(strict.suffix, "unattested");
        assert_eq!(
            strict.detail,
            "claims uid 1002 (alice); syslog attested no sender"
        );
    }

    #[test]
    fn a_uid_not_the_senders_is_forged_whatever_the_name() {
        let forged = check(Some(1002), 1001, "alice").expect("forged");
        assert_eq!(forged.suffix, "uid 1002");
        assert_eq!(
            forged.detail,
            "claims uid 1001 (alice) but uid 1002 sent it"
        );
    }

    #[test]
    fn names_are_not_checked_when_the_site_says_so() {
        assert_eq!(forgery(Some(1002), 1002, "alice", true, None), None);
    }
}
