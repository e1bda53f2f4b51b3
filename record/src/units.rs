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

/// Unix milliseconds as ISO 8601 UTC, e.g. `2026-11-23T09:00:00.000Z`.
pub fn utc(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60,
        unix_ms % 1000
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
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
    }
}
