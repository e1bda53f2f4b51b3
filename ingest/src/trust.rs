//! Who really sent a syslog line: the uid rsyslog's imuxsock attested (`SCM_CREDENTIALS`), the
//! relay that delivered it to a central log host ([`Relays`]), and whether a record may claim
//! what it claims ([`forgery`]).
//!
//! Any local user can write any syslog message, so the uid inside a record proves nothing. With
//! trusted properties on, rsyslog writes the kernel-attested uid in front of the message as
//! `uid=<n> pid=<n>` (see `etc/rsyslog.d/mpistat.conf`: `<time> <host> uid=<n> pid=<n> <tag><msg>`;
//! the test daemon writes `uid=<n> pid=<n> gid=<n> <tag><msg>`). The sender controls the tag and
//! the message, never what precedes them, so the attestation is only looked for among the first
//! three space-separated fields, as a `uid=` field directly followed by a `pid=` field. A line
//! that rsyslog could not attest (e.g. it came over the network) has `uid=` with an empty value.
//!
//! # Through a relay
//!
//! The attestation exists only on the node where the job ran. A compute node's rsyslogd
//! forwards its line (attestation and its own host name included) over RELP with TLS and a
//! client certificate (`etc/rsyslog/relay-node/`); the log host writes in front of it
//! a field no sender controls (`etc/rsyslog/relay-loghost/`): `relay=<name>` when the
//! line came on the authenticated input (the name is the connection's, rsyslog's `$fromhost`),
//! `unrelayed=<address>` when it came any other way (a plain syslog port, the log host's own
//! socket). So a log-host line is `relay=<name> <time> <host> uid=<n> pid=<n> <tag><msg>`, and
//! the first field alone says how it arrived. A site that lists `[ingest] trusted_relays`
//! believes only attestations those relays delivered; one that lists none believes its own
//! syslogd's (a single host). A line marked `unrelayed=` is never believed.
//!
//! A record is its sender's when it claims the attested uid and, since the weekly mails and the
//! admin pages go by login name, a user name that is that uid's: checked against the ingest
//! host's password database ([`accounts`](super::accounts)). A name is forged when the attested
//! uid has another name there, or the name belongs to another uid there. When the host knows
//! neither the uid nor the name (its password database is not the cluster's), the name cannot be
//! checked and is believed; so is every name when the site turns the check off
//! (`[ingest] check_user_names = false`), and when there is no attested uid to check it against
//! (`require_attested_uid = false`, single host only).

use super::accounts::Known;
use std::collections::HashMap;
use std::sync::Arc;

/// Fields at the start of a line that may hold the attestation: time, host, `uid=`.
const PREFIX_FIELDS: usize = 3;

/// The kernel-attested uid of the line's sender, if the line carries one.
pub fn attested_uid(line: impl AsRef<[u8]>) -> Option<u32> {
    attestation(line.as_ref()).0
}

/// The kernel-attested uid of the line's sender, if the line carries one, and the host rsyslog
/// named in front of it (`<time> <host> uid=...`: the field before `uid=`; none when `uid=`
/// comes first, as in a template without the host).
fn attestation(line: &[u8]) -> (Option<u32>, Option<&[u8]>) {
    let mut fields = line.split(|&b| b == b' ');
    let mut before = None;
    for _ in 0..PREFIX_FIELDS {
        let Some(field) = fields.next() else {
            break;
        };
        if let Some(value) = field.strip_prefix(b"uid=") {
            let followed_by_pid = fields.next().is_some_and(|f| f.starts_with(b"pid="));
            let digits = !value.is_empty() && value.iter().all(u8::is_ascii_digit);
            // ASCII digits.
            let uid = (followed_by_pid && digits)
                .then(|| std::str::from_utf8(value).ok()?.parse().ok())
                .flatten();
            return (uid, before.filter(|host: &&[u8]| !host.is_empty()));
        }
        before = Some(field);
    }
    (None, None)
}

/// How a line reached this host's log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Relay {
    /// Written by the syslogd of the host the job ran on (no relay field).
    Local,
    /// Delivered by this relay, one of the site's trusted relays.
    Trusted(Arc<str>),
    /// Delivered by this relay, which is not one of the site's trusted relays.
    Untrusted(Arc<str>),
    /// Arrived at the log host from this address without an authenticated relay.
    Unrelayed(Arc<str>),
}

/// Who a line says delivered and sent it, as far as fields no sender controls tell.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sender {
    pub relay: Relay,
    /// The kernel-attested uid ([`attested_uid`]); `None` for unrelayed lines.
    pub uid: Option<u32>,
    /// The host the line came from, as the rsyslogd of that host wrote it in front of the
    /// attestation (the shipped templates write its own name there, never one from the
    /// message); `None` for unrelayed lines and lines without it.
    pub node: Option<Arc<str>>,
}

impl Sender {
    /// Where the lines came from, as `jobs.origin` keeps it: the host, and ` via <relay>` when
    /// relayed; none when the line names no host.
    pub fn origin(&self) -> Option<String> {
        let node = self.node.as_deref()?;
        Some(match &self.relay {
            Relay::Trusted(relay) | Relay::Untrusted(relay) => format!("{node} via {relay}"),
            Relay::Local | Relay::Unrelayed(_) => node.to_string(),
        })
    }
}

/// The site's trusted relays, and the verdict on every relay name met so far.
#[derive(Debug, Default)]
pub struct Relays {
    patterns: Vec<String>,
    seen: HashMap<Vec<u8>, Relay>,
    /// Every node name met so far (a line's is looked up, not allocated).
    nodes: HashMap<Vec<u8>, Arc<str>>,
}

impl Relays {
    /// Relays matching one of `patterns` (`*`: any run of characters) are trusted; none listed:
    /// only the local syslogd is.
    pub fn new(patterns: Vec<String>) -> Relays {
        Relays {
            patterns,
            seen: HashMap::new(),
            nodes: HashMap::new(),
        }
    }

    /// `line`'s attested uid and node ([`attestation`]).
    fn attested(&mut self, line: &[u8]) -> (Option<u32>, Option<Arc<str>>) {
        let (uid, node) = attestation(line);
        let node = node.map(|name| match self.nodes.get(name) {
            Some(known) => known.clone(),
            None => {
                let text: Arc<str> = String::from_utf8_lossy(name).into();
                self.nodes.insert(name.to_vec(), text.clone());
                text
            }
        });
        (uid, node)
    }

    /// Whether records must come through a trusted relay (some are listed).
    pub fn required(&self) -> bool {
        !self.patterns.is_empty()
    }

    /// Who delivered and sent `line`.
    pub fn sender(&mut self, line: &[u8]) -> Sender {
        let first = line.split(|&b| b == b' ').next().unwrap_or_default();
        let (relayed, name) = if let Some(name) = first.strip_prefix(b"relay=") {
            (true, name)
        } else if let Some(address) = first.strip_prefix(b"unrelayed=") {
            (false, address)
        } else {
            let (uid, node) = self.attested(line);
            return Sender {
                relay: Relay::Local,
                uid,
                node,
            };
        };
        if !self.seen.contains_key(first) {
            let text: Arc<str> = String::from_utf8_lossy(name).into();
            let relay = if !relayed {
                Relay::Unrelayed(text)
            } else if self.patterns.iter().any(|p| matches(p, &text)) {
                Relay::Trusted(text)
            } else {
                Relay::Untrusted(text)
            };
            self.seen.insert(first.to_vec(), relay);
        }
        let relay = self.seen[first].clone();
        let (uid, node) = match relay {
            Relay::Unrelayed(_) => (None, None),
            _ => self.attested(line.get(first.len() + 1..).unwrap_or_default()),
        };
        Sender { relay, uid, node }
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters (also none).
fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole text
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Why a record may not be stored as its sender's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forgery {
    /// What the rejected entry is filed under after the job's key: `<key>/<suffix>`.
    pub suffix: String,
    /// What is wrong, for `mpistat ingest --report`.
    pub detail: String,
}

/// What the site believes about senders.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Records must come through a trusted relay ([`Relays::required`]).
    pub relays_required: bool,
    /// A local line must carry an attestation (relayed ones always must).
    pub require_attested_uid: bool,
}

/// What a record claims about who sent it and from where.
#[derive(Debug, Clone, Copy)]
pub struct Claims<'a> {
    pub uid: u32,
    pub user: &'a str,
    /// The host it says it ran on (rank 0's, or where an analysis ran).
    pub host: &'a str,
}

/// Whether a record making `claims`, whose lines came from `sender`, is forged.
/// It is when it came from an untrusted relay, unrelayed, or locally where relays are
/// required. Without an attested sender it is when relayed or `require_attested_uid`, else
/// only its name is checked ([`name_problem`]). With one, it is when the uids differ, when the
/// host it claims is not the one its line came from ([`same_host`]), when its name is not a
/// login name ([`name_problem`]), and (when `accounts` is given) when the sender's uid has
/// another name, or the name another uid, in `accounts`, or the name is unknown there but a
/// case variant of another uid's name.
pub fn forgery(
    sender: &Sender,
    claims: Claims<'_>,
    policy: Policy,
    accounts: Option<&mut Known>,
) -> Option<Forgery> {
    let Claims {
        uid,
        user: name,
        host,
    } = claims;
    let describe = || format!("claims uid {uid} ({name})");
    let forged = |suffix: String, detail: String| Some(Forgery { suffix, detail });
    let by = match &sender.relay {
        Relay::Unrelayed(address) => {
            return forged(
                "unrelayed".into(),
                format!(
                    "{}; came from {address} without an authenticated relay",
                    describe()
                ),
            )
        }
        Relay::Local if policy.relays_required => {
            return forged(
                "unrelayed".into(),
                format!(
                    "{}; no relay delivered it (a log host needs one)",
                    describe()
                ),
            )
        }
        Relay::Untrusted(relay) => {
            return forged(
                format!("relay {relay}"),
                format!("{}; relayed by {relay}, not a trusted relay", describe()),
            )
        }
        Relay::Trusted(relay) => Some(relay),
        Relay::Local => None,
    };
    let via = by
        .map(|relay| format!(" (relayed by {relay})"))
        .unwrap_or_default();
    let attested = match sender.uid {
        Some(sender) if sender != uid => {
            return forged(
                format!("uid {sender}"),
                format!("{} but uid {sender} sent it{via}", describe()),
            )
        }
        Some(_) => true,
        None if by.is_some() || policy.require_attested_uid => {
            let detail = match by {
                Some(relay) => format!(
                    "{}; relayed by {relay} without an attested sender",
                    describe()
                ),
                None => format!("{}; syslog attested no sender", describe()),
            };
            return forged("unattested".into(), detail);
        }
        None => false,
    };
    if let Some(node) = sender.node.as_deref().filter(|node| !same_host(host, node)) {
        return forged(
            format!("host {host}"),
            format!("claims host {host} but its line came from {node}{via}"),
        );
    }
    if let Some(problem) = name_problem(name) {
        return forged(
            format!("user {name:?}"),
            format!("claims user {name:?}: {problem}"),
        );
    }
    let accounts = accounts.filter(|_| attested)?;
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
        Some(_) => None,
        None => {
            let lower = name.to_lowercase();
            let other = accounts.uid_of(&lower).filter(|&other| other != uid)?;
            forged(
                format!("user {name:?}"),
                format!("claims user {name:?}: a case variant of user {lower} (uid {other})"),
            )
        }
    }
}

pub use mpistat_record::limits::name_problem;

/// Whether the host a record names is `node`, the one its line came from: their first labels
/// agree, ignoring case (a profiler writes the kernel's host name, which may be the full name;
/// rsyslog writes the short one unless told to keep the domain).
pub fn same_host(claimed: &str, node: &str) -> bool {
    let first = |name: &str| {
        name.split('.')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    first(claimed) == first(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::Table;
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

    const SINGLE_HOST: Policy = Policy {
        relays_required: false,
        require_attested_uid: true,
    };

    fn local(uid: Option<u32>) -> Sender {
        Sender {
            relay: Relay::Local,
            uid,
            node: None,
        }
    }

    fn claims(uid: u32, user: &str) -> Claims<'_> {
        Claims {
            uid,
            user,
            host: "node1",
        }
    }

    fn check(sender: Option<u32>, uid: u32, name: &str) -> Option<Forgery> {
        forgery(
            &local(sender),
            claims(uid, name),
            SINGLE_HOST,
            Some(&mut known()),
        )
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
        let lenient = Policy {
            require_attested_uid: false,
            ..SINGLE_HOST
        };
        let lenient = forgery(
            &local(None),
            claims(1002, "alice"),
            lenient,
            Some(&mut known),
        );
        assert_eq!(lenient, None);
        let strict = forgery(
            &local(None),
            claims(1002, "alice"),
            SINGLE_HOST,
            Some(&mut known),
        );
        let strict = strict.expect("forged");
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
        let sender = local(Some(1002));
        assert_eq!(
            forgery(&sender, claims(1002, "alice"), SINGLE_HOST, None),
            None
        );
    }

    const LOG_HOST: Policy = Policy {
        relays_required: true,
        require_attested_uid: false,
    };

    fn log_host() -> Relays {
        Relays::new(vec!["node*.cluster".into(), "10.1.2.3".into()])
    }

    #[test]
    fn relay_patterns() {
        assert!(matches("node*.cluster", "node001.cluster"));
        assert!(matches("node*.cluster", "node.cluster"));
        assert!(!matches("node*.cluster", "node001.cluster.evil"));
        assert!(!matches("node*.cluster", "login1.cluster"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "aXbYbc"));
        assert!(!matches("a*b*c", "ac"));
        assert!(matches("10.1.2.3", "10.1.2.3"));
        assert!(!matches("10.1.2.3", "10.1.2.33"));
        assert!(!matches("ab*ba", "aba"));
    }

    #[test]
    fn a_relayed_line_is_read_after_the_relay_field() {
        let mut relays = log_host();
        let line =
            b"relay=node7.cluster 2026-11-24T10:00:00Z node7 uid=1001 pid=9 mpistat: MPISTAT2 x";
        let sender = relays.sender(line);
        assert_eq!(sender.relay, Relay::Trusted("node7.cluster".into()));
        assert_eq!(sender.uid, Some(1001));
        // Asked again: the same verdict, from the cache.
        assert_eq!(relays.sender(line), sender);
        let other = relays.sender(b"relay=10.1.2.3 t h uid=0 pid=1 mpistat: x");
        assert_eq!(
            (other.relay, other.uid),
            (Relay::Trusted("10.1.2.3".into()), Some(0))
        );
        let untrusted = relays.sender(b"relay=login1.cluster t login1 uid=0 pid=1 mpistat: x");
        assert_eq!(untrusted.relay, Relay::Untrusted("login1.cluster".into()));
        // The attestation is in the relayed line's own first fields, never further on.
        let late = relays.sender(b"relay=node1.cluster t h mpistat: uid=0 pid=1 MPISTAT2 x");
        assert_eq!(late.uid, None);
        assert_eq!(relays.sender(b"relay=node1.cluster").uid, None);
    }

    #[test]
    fn a_line_the_log_host_marked_unrelayed_carries_no_attestation() {
        // What a forger wrote on the log host's plain syslog port, uid= and all.
        let line = b"unrelayed=10.9.9.9 uid=0 pid=1 mpistat: MPISTAT2 x";
        let sender = log_host().sender(line);
        assert_eq!(sender.relay, Relay::Unrelayed("10.9.9.9".into()));
        assert_eq!(sender.uid, None);
        // Also on a host that trusts no relay: the first field decides.
        assert_eq!(Relays::new(Vec::new()).sender(line).uid, None);
        assert!(!Relays::new(Vec::new()).required());
        assert!(log_host().required());
    }

    fn judge(line: &[u8], policy: Policy) -> Option<Forgery> {
        let sender = log_host().sender(line);
        forgery(&sender, claims(0, "root"), policy, Some(&mut known()))
    }

    #[test]
    fn on_a_log_host_only_attestations_of_trusted_relays_are_believed() {
        let good = b"relay=node1.cluster t node1 uid=0 pid=7 mpistat: MPISTAT2 x";
        assert_eq!(judge(good, LOG_HOST), None);
        let forged = judge(b"unrelayed=10.9.9.9 uid=0 pid=1 mpistat: x", LOG_HOST).unwrap();
        assert_eq!(forged.suffix, "unrelayed");
        assert_eq!(
            forged.detail,
            "claims uid 0 (root); came from 10.9.9.9 without an authenticated relay"
        );
        let local = judge(b"t loghost uid=0 pid=1 mpistat: x", LOG_HOST).unwrap();
        assert_eq!(local.suffix, "unrelayed");
        let untrusted = judge(b"relay=login1.cluster t h uid=0 pid=1 mpistat: x", LOG_HOST);
        let untrusted = untrusted.unwrap();
        assert_eq!(untrusted.suffix, "relay login1.cluster");
        assert_eq!(
            untrusted.detail,
            "claims uid 0 (root); relayed by login1.cluster, not a trusted relay"
        );
        // Relayed without an attestation: forged, whatever require_attested_uid says.
        let bare = judge(
            b"relay=node1.cluster t node1 uid= pid= mpistat: x",
            LOG_HOST,
        );
        let bare = bare.unwrap();
        assert_eq!(bare.suffix, "unattested");
        assert_eq!(
            bare.detail,
            "claims uid 0 (root); relayed by node1.cluster without an attested sender"
        );
        let other = judge(
            b"relay=node1.cluster t node1 uid=1001 pid=7 mpistat: x",
            LOG_HOST,
        );
        let other = other.unwrap();
        assert_eq!(other.suffix, "uid 1001");
        assert_eq!(
            other.detail,
            "claims uid 0 (root) but uid 1001 sent it (relayed by node1.cluster)"
        );
    }

    #[test]
    fn a_single_host_rejects_relayed_and_unrelayed_lines() {
        let mut relays = Relays::new(Vec::new());
        let relayed = relays.sender(b"relay=node1.cluster t node1 uid=0 pid=7 mpistat: x");
        let forged = forgery(&relayed, claims(0, "root"), SINGLE_HOST, None).unwrap();
        assert_eq!(forged.suffix, "relay node1.cluster");
        let own = relays.sender(b"t node1 uid=0 pid=7 mpistat: x");
        assert_eq!(forgery(&own, claims(0, "root"), SINGLE_HOST, None), None);
    }

    #[test]
    fn the_node_is_the_field_rsyslog_wrote_before_the_attestation() {
        let mut relays = Relays::new(Vec::new());
        let site = relays.sender(b"2026-11-23T09:00:00Z node1 uid=1001 pid=42 mpistat: x");
        assert_eq!(
            (site.uid, site.node.as_deref()),
            (Some(1001), Some("node1"))
        );
        // The test daemon's template has no host; a message's own words are never one.
        let bare = relays.sender(b"uid=1001 pid=42 gid=7 mpistat: node9 x");
        assert_eq!((bare.uid, bare.node), (Some(1001), None));
        let mut log_host = log_host();
        let relayed = log_host.sender(b"relay=10.1.2.3 t node7 uid=0 pid=1 mpistat: x");
        assert_eq!(relayed.node.as_deref(), Some("node7"));
        let unrelayed = log_host.sender(b"unrelayed=10.9.9.9 t node7 uid=0 pid=1 mpistat: x");
        assert_eq!(unrelayed.node, None);
    }

    #[test]
    fn a_record_names_the_host_its_line_came_from() {
        let sender = Relays::new(Vec::new()).sender(b"t node1 uid=1001 pid=9 mpistat: x");
        let at = |host| Claims {
            uid: 1001,
            user: "alice",
            host,
        };
        for same in ["node1", "NODE1", "node1.cluster.example"] {
            assert_eq!(
                forgery(&sender, at(same), SINGLE_HOST, None),
                None,
                "{same}"
            );
        }
        let forged = forgery(&sender, at("node017"), SINGLE_HOST, None).unwrap();
        assert_eq!(forged.suffix, "host node017");
        assert_eq!(
            forged.detail,
            "claims host node017 but its line came from node1"
        );
        let relayed = log_host().sender(b"relay=10.1.2.3 t node1 uid=1001 pid=9 mpistat: x");
        let forged = forgery(&relayed, at("node017"), LOG_HOST, None).unwrap();
        assert_eq!(
            forged.detail,
            "claims host node017 but its line came from node1 (relayed by 10.1.2.3)"
        );
    }

    #[test]
    fn names_no_password_database_gives_are_forged_even_unknown_here() {
        // uids 4001-4004 are unknown here.
        for (uid, name, detail) in [
            (
                4001,
                " root",
                "claims user \" root\": a name with surrounding space",
            ),
            (
                4002,
                "root\n",
                "claims user \"root\\n\": a name with surrounding space",
            ),
            (
                4003,
                "ro\u{7}ot",
                "claims user \"ro\\u{7}ot\": a name with a control character",
            ),
            (4004, "", "claims user \"\": an empty name"),
        ] {
            let forged = check(Some(uid), uid, name).expect(name);
            assert_eq!(forged.detail, detail);
            // Also where names are not looked up.
            let unchecked = forgery(&local(Some(uid)), claims(uid, name), SINGLE_HOST, None);
            assert_eq!(unchecked.unwrap().detail, detail);
        }
    }

    #[test]
    fn a_case_variant_of_a_known_name_is_forged() {
        let forged = check(Some(4001), 4001, "ALICE").expect("forged");
        assert_eq!(forged.suffix, "user \"ALICE\"");
        assert_eq!(
            forged.detail,
            "claims user \"ALICE\": a case variant of user alice (uid 1001)"
        );
        // Alice's own uid claiming it: not her name.
        let own = check(Some(1001), 1001, "Alice").expect("forged");
        assert_eq!(own.detail, "claims user Alice but uid 1001 is alice");
        assert_eq!(check(Some(4001), 4001, "carol"), None);
    }
}
