//! Numbers for people: durations, byte sizes, counts and UTC times, in at most a few characters.

/// Seconds of a nanosecond count (a division, so that e.g. 4200000 ns is exactly `0.0042`).
pub fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Three significant digits of `value` (≥ 1) followed by `unit`, e.g. `1.23`, `12.3`, `123`.
fn three_digits(value: f64, unit: &str) -> String {
    if value < 9.995 {
        format!("{value:.2}{unit}")
    } else if value < 99.95 {
        format!("{value:.1}{unit}")
    } else {
        format!("{value:.0}{unit}")
    }
}

/// A duration in ns, us, ms or s, e.g. `850ns`, `12.3us`, `4.56ms`, `1234s`.
pub fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 999.5e3 {
        three_digits(ns / 1e3, "us")
    } else if ns < 999.5e6 {
        three_digits(ns / 1e6, "ms")
    } else if ns < 999.5e9 {
        three_digits(ns / 1e9, "s")
    } else {
        format!("{:.0}s", ns / 1e9)
    }
}

/// A byte count with a binary unit, e.g. `512B`, `1.50KiB`, `12.3MiB`.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1023.5 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0}B")
    } else {
        three_digits(value, UNITS[unit])
    }
}

/// A count, exact below ten million, else with a decimal unit, e.g. `9999999`, `12.3M`, `4.56G`.
pub fn count(n: u64) -> String {
    if n < 10_000_000 {
        return n.to_string();
    }
    const UNITS: [&str; 6] = ["k", "M", "G", "T", "P", "E"];
    let mut value = n as f64 / 1e3;
    let mut unit = 0;
    while value >= 999.5 && unit + 1 < UNITS.len() {
        value /= 1e3;
        unit += 1;
    }
    three_digits(value, UNITS[unit])
}

/// Events per second with a decimal unit and three significant digits, e.g. `850/s`, `12.3k/s`,
/// `1.23G/s`.
pub fn rate(per_s: f64) -> String {
    if per_s < 999.5 {
        return format!("{per_s:.0}/s");
    }
    const UNITS: [&str; 6] = ["k/s", "M/s", "G/s", "T/s", "P/s", "E/s"];
    let mut value = per_s / 1e3;
    let mut unit = 0;
    while value >= 999.5 && unit + 1 < UNITS.len() {
        value /= 1e3;
        unit += 1;
    }
    three_digits(value, UNITS[unit])
}

/// Unix milliseconds as ISO 8601 UTC, e.g. `2026-11-23T09:00:00.000Z` (`chrono`; an instant past
/// its range, about 262,000 years, reads as the latest it has).
pub fn utc(unix_ms: u64) -> String {
    let ms = i64::try_from(unix_ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(0), "0ns");
        assert_eq!(duration(850), "850ns");
        assert_eq!(duration(12_345), "12.3us");
        assert_eq!(duration(4_560_000), "4.56ms");
        assert_eq!(duration(999_999_999), "1.00s");
        assert_eq!(duration(1_234_000_000_000), "1234s");
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(bytes(0.0), "0B");
        assert_eq!(bytes(1023.0), "1023B");
        assert_eq!(bytes(1536.0), "1.50KiB");
        assert_eq!(bytes(12.3 * 1024.0 * 1024.0), "12.3MiB");
        assert_eq!(bytes(u64::MAX as f64), "16.0EiB");
    }

    #[test]
    fn counts() {
        assert_eq!(count(9_999_999), "9999999");
        assert_eq!(count(12_345_678), "12.3M");
        assert_eq!(count(u64::MAX), "18.4E");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(0.0), "0/s");
        assert_eq!(rate(850.0), "850/s");
        assert_eq!(rate(12_345.0), "12.3k/s");
        assert_eq!(rate(1.234e9), "1.23G/s");
        assert_eq!(rate(999.6e6), "1.00G/s");
    }

    #[test]
    fn utc_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc(1_795_424_400_000), "2026-11-23T09:00:00.000Z");
        assert!(utc(u64::MAX).starts_with("+262"));
    }
}
