//! The interval an admin page covers: an ISO week (`2026-W47`), a calendar month (`2026-11`) or
//! any range of days (`mpistat serve`'s `from`/`to`), all in UTC, with the intervals before it
//! for the trend.

use crate::week::{days_since_epoch, IsoWeek};
use chrono::NaiveDate;

const DAY_MS: u64 = 86_400_000;

/// What an interval is, so that the one before it has the same kind and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Week,
    Month { year: i64, month: i64 },
    Days,
}

/// A half-open interval `[from_ms, to_ms)` of Unix milliseconds with its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    pub label: String,
    pub from_ms: u64,
    pub to_ms: u64,
    kind: Kind,
}

impl Period {
    pub fn week(week: IsoWeek) -> Period {
        let (from_ms, to_ms) = week.range_ms();
        Period {
            label: week.to_string(),
            from_ms,
            to_ms,
            kind: Kind::Week,
        }
    }

    /// Parse `YYYY-MM`.
    pub fn month(text: &str) -> Result<Period, String> {
        let bad = || format!("{text:?} is not a month like 2026-11");
        let (year, month) = text.split_once('-').ok_or_else(bad)?;
        let year: i64 = year.parse().map_err(|_| bad())?;
        let month: i64 = month.parse().map_err(|_| bad())?;
        if !(1970..=9999).contains(&year) || !(1..=12).contains(&month) {
            return Err(bad());
        }
        Ok(Period::of_month(year, month))
    }

    fn of_month(year: i64, month: i64) -> Period {
        let (next_year, next_month) = if month == 12 {
            (year + 1, 1)
        } else {
            (year, month + 1)
        };
        Period {
            label: format!("{year:04}-{month:02}"),
            from_ms: first_day(year, month),
            to_ms: first_day(next_year, next_month),
            kind: Kind::Month { year, month },
        }
    }

    /// The days `from` to `to` (both `YYYY-MM-DD`, inclusive).
    pub fn days(from: &str, to: &str) -> Result<Period, String> {
        let from_day = parse_day(from)?;
        let to_day = parse_day(to)?;
        if to_day < from_day {
            return Err(format!("{to} is before {from}"));
        }
        Ok(Period {
            label: format!("{from} to {to}"),
            from_ms: from_day as u64 * DAY_MS,
            to_ms: (to_day + 1) as u64 * DAY_MS,
            kind: Kind::Days,
        })
    }

    /// Parse `2026-W47`, `2026-11` or `2026-11-01..2026-11-30`.
    pub fn parse(text: &str) -> Result<Period, String> {
        if text.contains("-W") {
            IsoWeek::parse(text).map(Period::week)
        } else if let Some((from, to)) = text.split_once("..") {
            Period::days(from, to)
        } else {
            Period::month(text)
        }
    }

    pub fn hours(&self) -> f64 {
        (self.to_ms - self.from_ms) as f64 / 3.6e6
    }

    /// The interval just before this one, of the same kind and length (`None` before 1970).
    pub fn previous(&self) -> Option<Period> {
        if self.from_ms == 0 {
            return None;
        }
        Some(match self.kind {
            Kind::Month { year, month: 1 } => Period::of_month(year - 1, 12),
            Kind::Month { year, month } => Period::of_month(year, month - 1),
            Kind::Week | Kind::Days => {
                let len = self.to_ms - self.from_ms;
                // None rather than a shorter interval at the start of time.
                let from_ms = self.from_ms.checked_sub(len)?;
                Period {
                    label: if self.kind == Kind::Week {
                        IsoWeek::containing_ms(from_ms).to_string()
                    } else {
                        format!("{} to {}", day(from_ms), day(self.from_ms - DAY_MS))
                    },
                    from_ms,
                    to_ms: self.from_ms,
                    kind: self.kind,
                }
            }
        })
    }

    /// A query string naming this interval, for links of `mpistat serve`.
    pub fn query(&self) -> String {
        match self.kind {
            Kind::Week | Kind::Month { .. } => format!("?period={}", self.label),
            Kind::Days => format!(
                "?period={}..{}",
                day(self.from_ms),
                day(self.to_ms - DAY_MS)
            ),
        }
    }
}

/// Unix milliseconds of the first day of a month (years 1970 to 10000, months 1 to 12).
fn first_day(year: i64, month: i64) -> u64 {
    let date = i32::try_from(year)
        .ok()
        .zip(u32::try_from(month).ok())
        .and_then(|(y, m)| NaiveDate::from_ymd_opt(y, m, 1));
    date.map_or(0, |d| days_since_epoch(d).max(0) as u64 * DAY_MS)
}

fn day(ms: u64) -> String {
    mpistat_record::units::utc(ms)[..10].to_string()
}

fn parse_day(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a day like 2026-11-01");
    let mut parts = text
        .splitn(3, '-')
        .map(|p| p.parse::<i64>().map_err(|_| bad()));
    let (y, m, d) = (
        parts.next().ok_or_else(bad)??,
        parts.next().ok_or_else(bad)??,
        parts.next().ok_or_else(bad)??,
    );
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let date = NaiveDate::from_ymd_opt(y as i32, m as u32, d as u32)
        .ok_or_else(|| format!("{text:?}: no such day"))?;
    Ok(days_since_epoch(date))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn month_and_previous() {
        let nov = Period::month("2026-11").unwrap();
        assert_eq!(day(nov.from_ms), "2026-11-01");
        assert_eq!(day(nov.to_ms), "2026-12-01");
        assert_eq!(nov.hours(), 30.0 * 24.0);
        let jan = Period::month("2027-01").unwrap().previous().unwrap();
        assert_eq!(jan.label, "2026-12");
        assert!(Period::month("2026-13").is_err());
    }

    #[test]
    fn week_days_and_queries() {
        let w = Period::parse("2026-W47").unwrap();
        assert_eq!(w.previous().unwrap().label, "2026-W46");
        assert_eq!(w.query(), "?period=2026-W47");
        let d = Period::parse("2026-11-02..2026-11-03").unwrap();
        assert_eq!(d.hours(), 48.0);
        assert_eq!(d.query(), "?period=2026-11-02..2026-11-03");
        assert_eq!(Period::parse(&d.query()[8..]).unwrap(), d);
        assert_eq!(d.previous().unwrap().label, "2026-10-31 to 2026-11-01");
        assert!(Period::parse("2026-02-30..2026-03-01").is_err());
    }
}
