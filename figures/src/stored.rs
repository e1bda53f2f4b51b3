//! The rollups as the store keeps them: the only code that turns a [`DayRollup`], a user's
//! [`Totals`] or the rest of a [`UserWeek`] into the JSON of a rollup row, and back. The store
//! keeps rows; the mail's and the pages' own types never reach it, so neither wording nor
//! layout changes what a database holds.
//!
//! Version 1 ([`VERSION`]) is the shape mpistat wrote before these types had a crate of their
//! own: plain JSON objects of the fields, with no version in them; databases hold it. A change of
//! shape makes version 2, written with its number in it, and keeps a reader of version 1 here
//! that turns it into the new shape (the fixtures in `tests/fixtures/*-v1.json` were written by
//! the mpistat of version 1 and must stay readable).

use crate::rollup::DayRollup;
use crate::sums::{Totals, UserWeek};

/// The shape of the rollups this mpistat writes.
pub const VERSION: u32 = 1;

/// A stored rollup that is not of a shape this mpistat reads.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Unreadable(#[from] serde_json::Error);

impl From<Unreadable> for mpistat_store::Error {
    fn from(e: Unreadable) -> mpistat_store::Error {
        e.0.into()
    }
}

/// A day's site-wide rollup as stored (`rollup_days`).
pub fn day_json(day: &DayRollup) -> Result<String, Unreadable> {
    Ok(serde_json::to_string(day)?)
}

/// A day's site-wide rollup from its stored JSON.
pub fn day_of_json(json: &str) -> Result<DayRollup, Unreadable> {
    Ok(serde_json::from_str(json)?)
}

/// A user's totals as stored (the `totals` of `rollup_users` and `rollup_user_months`).
pub fn totals_json(totals: &Totals) -> Result<String, Unreadable> {
    Ok(serde_json::to_string(totals)?)
}

/// A user's totals from their stored JSON.
pub fn totals_of_json(json: &str) -> Result<Totals, Unreadable> {
    Ok(serde_json::from_str(json)?)
}

/// The rest of a user's rollup as stored (the `detail` of `rollup_users`: routines and biggest
/// jobs; the totals are apart).
pub fn detail_json(user: &UserWeek) -> Result<String, Unreadable> {
    Ok(serde_json::to_string(user)?)
}

/// A user's whole rollup from its stored `totals` and `detail`.
pub fn user_of_json(totals: &str, detail: &str) -> Result<UserWeek, Unreadable> {
    let mut user: UserWeek = serde_json::from_str(detail)?;
    user.totals = totals_of_json(totals)?;
    Ok(user)
}
