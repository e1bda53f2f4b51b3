//! The numbers mpistat's weekly mails (crate `mpistat-digest`'s `mail`) and admin pages
//! (`site_report`, `serve`, `metrics`) render from, and nothing else: no wording, no HTML.
//!
//! `week` is the calendar (ISO weeks, day numbers) and `period` the interval a mail or a page
//! covers; `sums` adds up jobs per user and per
//! routine ([`sums::Totals`], [`sums::RoutineSums`], [`sums::UserWeek`]) and makes the routine
//! table's rows; `traced` is a traced job's analysis as shown; `classes` sorts jobs into the pages' classes (size, CPU time, routine group);
//! `rollup` keeps those sums per day, user, month and hour as the jobs arrive, and `stored` is
//! the one place that turns them into the JSON the store keeps, and back (versioned: a
//! database written by an older mpistat stays readable).

pub mod classes;
pub mod period;
pub mod rollup;
pub mod stored;
pub mod sums;
pub mod traced;
pub mod week;

/// Why rollups could not be made, stored or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] mpistat_store::Error),
    #[error(transparent)]
    Stored(#[from] stored::Unreadable),
    #[error("the rebuild of the rollups was stopped")]
    RebuildStopped,
    #[error("another rebuild of the rollups finished this one")]
    RebuildTakenOver,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
