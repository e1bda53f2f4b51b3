//! Who really sent a syslog line: the uid rsyslog's imuxsock attested (`SCM_CREDENTIALS`).
//!
//! Any local user can write any syslog message, so the uid inside a record proves nothing. With
//! trusted properties on, rsyslog writes the kernel-attested uid in front of the message as
//! `uid=<n> pid=<n>` (see `etc/rsyslog.d/mpistat.conf`: `<time> <host> uid=<n> pid=<n> <tag><msg>`;
//! the test daemon writes `uid=<n> pid=<n> gid=<n> <tag><msg>`). The sender controls the tag and
//! the message, never what precedes them, so the attestation is only looked for among the first
//! three space-separated fields, as a `uid=` field directly followed by a `pid=` field. A line
//! that rsyslog could not attest (e.g. it came over the network) has `uid=` with an empty value.

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

#[cfg(test)]
mod tests {
    use super::attested_uid;

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
}
