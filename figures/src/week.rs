//! ISO 8601 weeks (`2026-W47`): Monday 00:00 UTC to the next Monday, and the calendar days the
//! admin pages' intervals need, both through `chrono`.

use chrono::{Datelike, NaiveDate, Weekday};
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
        if !(1970..=9999).contains(&year) || parsed.monday().is_none() {
            return Err(format!("{text:?}: no such week"));
        }
        Ok(parsed)
    }

    /// The last week that has ended at `now_ms`.
    pub fn last_complete(now_ms: u64) -> IsoWeek {
        IsoWeek::containing_ms(now_ms.saturating_sub(7 * DAY_MS))
    }

    /// The week of the instant `ms` (Unix milliseconds).
    pub fn containing_ms(ms: u64) -> IsoWeek {
        IsoWeek::of_date(date_of_day((ms / DAY_MS) as i64))
    }

    fn of_date(date: NaiveDate) -> IsoWeek {
        let week = date.iso_week();
        IsoWeek {
            year: i64::from(week.year()),
            week: week.week(),
        }
    }

    /// Its Monday, if the week exists.
    fn monday(&self) -> Option<NaiveDate> {
        NaiveDate::from_isoywd_opt(i32::try_from(self.year).ok()?, self.week, Weekday::Mon)
    }

    /// Start and end (exclusive) in Unix milliseconds.
    pub fn range_ms(&self) -> (u64, u64) {
        let monday = self.monday().map_or(0, days_since_epoch);
        let start = monday.max(0) as u64 * DAY_MS;
        (start, start + 7 * DAY_MS)
    }
}

impl fmt::Display for IsoWeek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-W{:02}", self.year, self.week)
    }
}

fn epoch() -> NaiveDate {
    chrono::DateTime::UNIX_EPOCH.date_naive()
}

/// Days since 1970-01-01 of a date.
pub fn days_since_epoch(date: NaiveDate) -> i64 {
    date.signed_duration_since(epoch()).num_days()
}

/// The date `day` days after 1970-01-01 (clamped to chrono's range).
pub fn date_of_day(day: i64) -> NaiveDate {
    epoch()
        .checked_add_signed(chrono::TimeDelta::days(day))
        .unwrap_or(NaiveDate::MAX)
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
        let day = days_since_epoch(NaiveDate::from_ymd_opt(2021, 1, 3).unwrap());
        assert_eq!(
            IsoWeek::containing_ms(day as u64 * DAY_MS).to_string(),
            "2020-W53"
        );
        assert!(IsoWeek::parse("2020-W53").is_ok());
        assert!(IsoWeek::parse("2026-W53").is_ok());
        assert!(IsoWeek::parse("2025-W53").is_err());
        assert!(IsoWeek::parse("2026-47").is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any instant lies in its week's range, the week prints and parses back, and the week
        /// after it starts where it ends.
        #[test]
        fn an_instant_lies_in_its_week(ms in 0u64..253_402_300_799_000) {
            let week = IsoWeek::containing_ms(ms);
            let (from, to) = week.range_ms();
            prop_assert!(from <= ms && ms < to, "{week}: {from}..{to} vs {ms}");
            prop_assert_eq!(IsoWeek::parse(&week.to_string()), Ok(week));
            prop_assert_eq!(IsoWeek::containing_ms(to).range_ms().0, to);
        }
    }
}
