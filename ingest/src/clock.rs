//! When a record's first line was written, and how far the log has moved on since: what ingest
//! judges an incomplete record's grace period by (not the file's modification time, which any
//! new line of a live log renews).
//!
//! rsyslog writes the time it received a message at the start of every line
//! (`etc/rsyslog.d/mpistat.conf`: `%TIMESTAMP:::date-rfc3339%`; imuxsock takes its own clock,
//! not the sender's, as its `IgnoreTimestamp` is on by default); on a log host the line begins
//! `relay=<name>` and the compute node's rsyslog wrote the time after it
//! (`etc/rsyslog/relay-loghost/defs.conf`). A line that came any other way (`unrelayed=`) begins
//! with what its sender wrote: its time is not believed, nor a time that lies in the future.

use super::trust::{Relay, Sender};
use std::time::SystemTime;

/// The time rsyslog wrote on `line`, in milliseconds since the epoch: its first field, or the
/// second after `relay=<name>`. `None` when the line has no such time (another template, or an
/// `unrelayed=` line, whose time is its sender's).
pub fn line_time(line: &[u8]) -> Option<u64> {
    let mut fields = line.split(|&b| b == b' ');
    let mut first = fields.next()?;
    if first.starts_with(b"unrelayed=") {
        return None;
    }
    if first.starts_with(b"relay=") {
        first = fields.next()?;
    }
    rfc3339_ms(first)
}

/// Whether the time on a line of `sender` shows how far ingest has read (the metrics' ingest
/// lag): an attested sender that came the way the site trusts (its own syslogd, unless relays
/// are required; else a trusted relay). A line that came another way could hide a stopped ingest
/// behind a time its sender chose.
pub fn shows_ingest_lag(sender: &Sender, relays_required: bool) -> bool {
    sender.uid.is_some()
        && match sender.relay {
            Relay::Local => !relays_required,
            Relay::Trusted(_) => true,
            Relay::Untrusted(_) | Relay::Unrelayed(_) => false,
        }
}

/// An RFC 3339 time (`2026-11-29T02:13:00.123456+00:00`, as rsyslog's `date-rfc3339`) in
/// milliseconds since the epoch; `None` for anything else, and for times before 1970.
fn rfc3339_ms(text: &[u8]) -> Option<u64> {
    // Longer is not a time: do not hand the parser a whole line.
    if text.len() > 40 {
        return None;
    }
    let time = chrono::DateTime::parse_from_rfc3339(std::str::from_utf8(text).ok()?).ok()?;
    u64::try_from(time.timestamp_millis()).ok()
}

/// Milliseconds since the epoch now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The log's own clock: the latest believed time of the lines read so far, never later than
/// now (a node whose clock runs ahead cannot make other records overdue early).
#[derive(Debug, Default, Clone, Copy)]
pub struct LogClock {
    latest_ms: Option<u64>,
}

impl LogClock {
    /// A line written at `time_ms` was read.
    pub fn saw(&mut self, time_ms: u64) {
        self.latest_ms = self.latest_ms.max(Some(time_ms));
    }

    /// How long after `first_ms` the log has gone on (zero when it has not, or `first_ms` is
    /// later than it), as of `now_ms`.
    pub fn since(&self, first_ms: u64, now_ms: u64) -> u64 {
        self.latest_ms
            .map_or(0, |latest| latest.min(now_ms).saturating_sub(first_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rsyslogs_times_are_read_on_local_and_relayed_lines_only() {
        let ms = 1_795_745_580_123; // 2026-11-27T02:13:00.123Z
        let local = b"2026-11-27T02:13:00.123456+00:00 node1 uid=1000 pid=7 mpistat: MPISTAT2 x";
        assert_eq!(line_time(local), Some(ms));
        let relayed = b"relay=node1.cluster 2026-11-27T03:13:00.123+01:00 node1 uid=1000 pid=7 x";
        assert_eq!(line_time(relayed), Some(ms));
        let unrelayed = b"unrelayed=10.0.0.9 2026-11-27T02:13:00.123+00:00 node1 mpistat: x";
        assert_eq!(line_time(unrelayed), None);
        assert_eq!(
            line_time(b"uid=1000 pid=7 gid=1000 mpistat: MPISTAT2 x"),
            None
        );
        assert_eq!(line_time(b"1969-12-31T23:59:59Z x"), None);
        assert_eq!(line_time(b""), None);
    }

    #[test]
    fn the_log_clock_goes_by_the_latest_line_but_not_beyond_now() {
        let mut clock = LogClock::default();
        assert_eq!(clock.since(1_000, 5_000), 0, "nothing read yet");
        clock.saw(3_000);
        clock.saw(2_000);
        assert_eq!(clock.since(1_000, 5_000), 2_000);
        assert_eq!(
            clock.since(4_000, 5_000),
            0,
            "a first line after the latest"
        );
        clock.saw(9_000_000);
        assert_eq!(
            clock.since(1_000, 5_000),
            4_000,
            "a clock ahead counts as now"
        );
    }

    proptest! {
        #[test]
        fn any_line_start_is_read_without_panicking(line in prop::collection::vec(any::<u8>(), 0..80)) {
            let _ = line_time(&line);
        }

        #[test]
        fn times_rsyslog_writes_are_read_back(ms in 0u64..4_102_444_800_000, offset_min in -720i32..=840) {
            let offset = chrono::FixedOffset::east_opt(offset_min * 60).unwrap();
            let time = chrono::DateTime::from_timestamp_millis(ms as i64).unwrap().with_timezone(&offset);
            let text = time.format("%Y-%m-%dT%H:%M:%S%.6f%:z node1 x").to_string();
            prop_assert_eq!(line_time(text.as_bytes()), Some(ms));
        }
    }
}
