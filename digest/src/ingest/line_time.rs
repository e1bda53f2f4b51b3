//! The time of the newest line ingest read, for the ingest lag of the metrics
//! ([`crate::metrics`]): rsyslog writes it first on every line (`etc/rsyslog.d/mpistat.conf`:
//! `%TIMESTAMP:::date-rfc3339%`, the time its input received the message; on a log host after
//! the `relay=<name>` field, and then the node's rsyslog's). Only lines whose sender the site
//! trusts give their time ([`NewestLine::saw`]): a line that came another way (a network input)
//! may carry a time its sender chose, and would hide a stopped ingest.

use super::trust::{Relay, Sender};

/// Whether the time on a line from `sender` is rsyslog's own: an attested sender that came the
/// way the site trusts (its own syslogd, when `relays_required` is not; else a trusted relay).
pub fn trusted(sender: &Sender, relays_required: bool) -> bool {
    sender.uid.is_some()
        && match sender.relay {
            Relay::Local => !relays_required,
            Relay::Trusted(_) => true,
            Relay::Untrusted(_) | Relay::Unrelayed(_) => false,
        }
}

/// Longest time field kept (`2026-11-29T04:25:08.123456789+00:00` is 35 bytes).
const TIME_FIELD_MAX: usize = 40;

/// The time field of the last trusted line read, kept as bytes (copied, not parsed, per line).
#[derive(Debug, Clone)]
pub struct NewestLine {
    field: [u8; TIME_FIELD_MAX],
    len: usize,
}

impl Default for NewestLine {
    fn default() -> Self {
        NewestLine {
            field: [0; TIME_FIELD_MAX],
            len: 0,
        }
    }
}

impl NewestLine {
    /// A line was read from a sender the site trusts: its time is the newest so far.
    pub fn saw(&mut self, line: &[u8]) {
        let mut fields = line.split(|&b| b == b' ');
        let first = fields.next().unwrap_or_default();
        let time = if first.starts_with(b"relay=") {
            fields.next().unwrap_or_default()
        } else {
            first
        };
        // Too long for a time: not one (and nothing kept from before either).
        self.len = if time.len() <= TIME_FIELD_MAX {
            time.len()
        } else {
            0
        };
        self.field[..self.len].copy_from_slice(&time[..self.len]);
    }

    /// The time (unix ms) of the last trusted line read, if it has an RFC 3339 one; never later
    /// than `now_ms` (a node whose clock is ahead).
    pub fn ms(&self, now_ms: u64) -> Option<u64> {
        let text = std::str::from_utf8(&self.field[..self.len]).ok()?;
        let time = chrono::DateTime::parse_from_rfc3339(text).ok()?;
        let ms = u64::try_from(time.timestamp_millis()).ok()?;
        Some(ms.min(now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn newest(lines: &[&str]) -> Option<u64> {
        let mut newest = NewestLine::default();
        for line in lines {
            newest.saw(line.as_bytes());
        }
        newest.ms(u64::MAX)
    }

    #[test]
    fn the_time_of_the_last_line() {
        let line = "2026-11-29T04:25:08.123456+00:00 node1 uid=1001 pid=7 mpistat: x";
        assert_eq!(newest(&[line]), Some(1_795_926_308_123));
        let relayed = "relay=node1 2026-11-29T05:25:08.5+01:00 node1 uid=1001 pid=7 mpistat: x";
        assert_eq!(newest(&[line, relayed]), Some(1_795_926_308_500));
        // A line without a time (another template) leaves none.
        assert_eq!(newest(&[line, "uid=1001 pid=7 gid=7 mpistat: x"]), None);
        assert_eq!(newest(&[]), None);
    }

    #[test]
    fn never_later_than_now() {
        let mut newest = NewestLine::default();
        newest.saw(b"2030-01-01T00:00:00Z host uid=1 pid=1 mpistat: x");
        assert_eq!(newest.ms(1_000), Some(1_000));
    }

    proptest! {
        #[test]
        fn any_line_is_read_safely(line in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut newest = NewestLine::default();
            newest.saw(&line);
            let _ = newest.ms(u64::MAX);
        }
    }
}
