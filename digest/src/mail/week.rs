//! ISO 8601 weeks (`2026-W47`): Monday 00:00 UTC to the next Monday.

use std::fmt;

const DAY_MS: u64 = 86_400_000;

/// An ISO week.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsoWeek {
    pub year: i64,
    pub week: u32,
}

impl IsoWeek {
    /// Parse `YYYY-Www`.
    pub fn parse(text: &str) -> Result<IsoWeek, String> {
        let bad = || format!("{text:?} is not an ISO week like 2026-W47");
        let (year, week) = text.split_once("-W").ok_or_else(bad)?;
        let year: i64 = year.parse().map_err(|_| bad())?;
        let week: u32 = week.parse().map_err(|_| bad())?;
        let parsed = IsoWeek { year, week };
        if year < 1970 || week == 0 || week > weeks_in(year) {
            return Err(format!("{text:?}: no such week"));
        }
        Ok(parsed)
    }

    /// The last week that has ended at `now_ms`.
    pub fn last_complete(now_ms: u64) -> IsoWeek {
        let today = (now_ms / DAY_MS) as i64;
        let monday = today - weekday(today) - 7;
        IsoWeek::containing(monday)
    }

    /// The week of the instant `ms` (Unix milliseconds).
    pub fn containing_ms(ms: u64) -> IsoWeek {
        IsoWeek::containing((ms / DAY_MS) as i64)
    }

    /// The week of day `day` (days since 1970-01-01).
    fn containing(day: i64) -> IsoWeek {
        let thursday = day - weekday(day) + 3;
        let year = civil_year(thursday);
        let week = (thursday - week_one_monday(year)) / 7 + 1;
        IsoWeek {
            year,
            week: week as u32,
        }
    }

    /// Start and end (exclusive) in Unix milliseconds.
    pub fn range_ms(&self) -> (u64, u64) {
        let monday = week_one_monday(self.year) + 7 * (i64::from(self.week) - 1);
        let start = monday as u64 * DAY_MS;
        (start, start + 7 * DAY_MS)
    }
}

impl fmt::Display for IsoWeek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-W{:02}", self.year, self.week)
    }
}

/// 0 for Monday .. 6 for Sunday (1970-01-01 was a Thursday).
fn weekday(day: i64) -> i64 {
    (day + 3).rem_euclid(7)
}

/// Monday of week 1: the week with the year's first Thursday (the week of 4 January).
fn week_one_monday(year: i64) -> i64 {
    let jan4 = days_from_civil(year, 1, 4);
    jan4 - weekday(jan4)
}

fn weeks_in(year: i64) -> u32 {
    ((week_one_monday(year + 1) - week_one_monday(year)) / 7) as u32
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_year(day: i64) -> i64 {
    let mut year = 1970 + day.div_euclid(366);
    while days_from_civil(year + 1, 1, 1) <= day {
        year += 1;
    }
    year
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn week_47_of_2026() {
        let week = IsoWeek::parse("2026-W47").unwrap();
        // Monday 2026-11-16 00:00 UTC.
        assert_eq!(week.range_ms(), (1_794_787_200_000, 1_795_392_000_000));
        assert_eq!(week.to_string(), "2026-W47");
    }

    #[test]
    fn last_complete_week_and_year_boundaries() {
        // Monday 2026-11-23 09:00 UTC: last complete week is W47.
        assert_eq!(
            IsoWeek::last_complete(1_795_424_400_000).to_string(),
            "2026-W47"
        );
        // 2021-01-03 (a Sunday) belongs to 2020-W53.
        let day = days_from_civil(2021, 1, 3);
        assert_eq!(IsoWeek::containing(day).to_string(), "2020-W53");
        assert!(IsoWeek::parse("2020-W53").is_ok());
        assert!(IsoWeek::parse("2026-W53").is_ok());
        assert!(IsoWeek::parse("2025-W53").is_err());
        assert!(IsoWeek::parse("2026-47").is_err());
    }
}
