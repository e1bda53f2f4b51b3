//! `mpistat digest`: one mail per user who ran jobs in a week, built from the database.
//!
//! What a mail says is computed in [`mpistat_render::user`] (from the week's rollups, crate
//! `mpistat-figures`, which also has the ISO weeks); `text` and `html` lay it out (`chart` draws
//! the HTML's images). With
//! `--send` every (user, week) is sent at most once: the outcome is recorded in the database's
//! `mails` table, and mails that failed (of any week) are tried again on every `--send` run until
//! they go out.

pub mod chart;
pub mod html;
pub mod text;

use mpistat_figures::week::IsoWeek;
use mpistat_mailer::{Image, Mail, Mailer};
use mpistat_site::SiteConfig;
use mpistat_store::{MailStatus, ReadStore, WriteStore};
use std::io::Write;

/// Why the mails could not be made or sent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Open(#[from] mpistat_service::OpenError),
    #[error(transparent)]
    Store(#[from] mpistat_store::Error),
    #[error(transparent)]
    Render(#[from] mpistat_render::Error),
    #[error(transparent)]
    Figures(#[from] mpistat_figures::Error),
    #[error(transparent)]
    Mailer(#[from] mpistat_mailer::MailerError),
    /// A week given (`--week`), or stored with a failed mail, is not an ISO week.
    #[error("{0}")]
    Week(String),
    #[error(transparent)]
    Clock(#[from] std::time::SystemTimeError),
    /// What the command reports could not be written.
    #[error(transparent)]
    Report(#[from] std::io::Error),
}

/// The mails of `week`, one per user (only `user`'s when given).
pub fn mails(
    db: &ReadStore,
    config: &SiteConfig,
    week: IsoWeek,
    user: Option<&str>,
) -> Result<Vec<Mail>, Error> {
    let (from, to) = week.range_ms();
    let week_name = week.to_string();
    // From the week's rollups (sums per day and user, kept by ingest): no record is read.
    let period = mpistat_figures::period::Period::week(week);
    let mut digests = mpistat_render::user::user_digests(db, &period, config, user)?;
    for d in &mut digests {
        d.traced = db
            .analyses_between(&d.user, from, to)?
            .into_iter()
            .map(mpistat_figures::traced::TracedJob::from_stored)
            .collect();
    }
    let week = week_name;
    Ok(digests
        .into_iter()
        .map(|d| Mail {
            user: d.user.clone(),
            tag: week.clone(),
            subject: format!("mpistat: your MPI jobs in week {week}"),
            text: text::render(&d),
            html: html::render(&d),
            images: vec![
                Image {
                    cid: html::MPI_SHARE_CID.into(),
                    png: chart::mpi_share_strip(&d),
                },
                Image {
                    cid: html::ROUTINES_CID.into(),
                    png: chart::routine_bars(&d),
                },
            ],
        })
        .collect())
}

/// What a `--send` run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SendStats {
    pub sent: usize,
    pub already_sent: usize,
    pub failed: usize,
}

/// Send the mails of `week` and retry every earlier failure; each (user, week) at most once.
pub fn send(
    db: &WriteStore,
    config: &SiteConfig,
    mailer: &Mailer,
    week: IsoWeek,
    user: Option<&str>,
    err: &mut impl Write,
) -> Result<SendStats, Error> {
    let mut weeks = vec![week];
    for failed in db.failed_mail_weeks()? {
        let failed = IsoWeek::parse(&failed).map_err(Error::Week)?;
        if !weeks.contains(&failed) {
            weeks.push(failed);
        }
    }
    let mut stats = SendStats::default();
    for week in weeks {
        for mail in mails(db, config, week, user)? {
            // Ingest rejects such names; jobs stored before it did are not mailed either.
            if let Some(problem) = mpistat_record::limits::name_problem(&mail.user) {
                writeln!(
                    err,
                    "mpistat: no mail of {:?} for {}: {problem}",
                    mail.user, mail.tag
                )?;
                continue;
            }
            match db.mail_status(&mail.user, &mail.tag)? {
                Some(MailStatus::Sent) => {
                    stats.already_sent += 1;
                    continue;
                }
                Some(MailStatus::Failed { .. }) | None => {}
            }
            let recipient = mailer.recipient(&mail.user);
            match mailer.send(&mail) {
                Ok(_) => {
                    db.record_mail(&mail.user, &mail.tag, &recipient, Ok(()))?;
                    stats.sent += 1;
                }
                Err(e) => {
                    let error = e.to_string();
                    writeln!(
                        err,
                        "mpistat: mail of {} for {} to {recipient} not sent (will retry): {error}",
                        mail.user, mail.tag
                    )?;
                    db.record_mail(&mail.user, &mail.tag, &recipient, Err(&error))?;
                    stats.failed += 1;
                }
            }
        }
    }
    Ok(stats)
}

/// What `mpistat digest` does: which week and user, and whether to send.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub db: mpistat_service::DatabaseOptions,
    /// The ISO week (`2026-W47`); the last complete one if `None`.
    pub week: Option<String>,
    /// Only this user's mail.
    pub user: Option<String>,
    /// Send the mails (else print their text).
    pub send: bool,
}

/// `mpistat digest`: print the mails' text on `out` (default, `--dry-run`) or send them
/// (`--send`, saying what was sent on `err`; the binary fails when some failed).
pub fn command(
    args: &Options,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<SendStats, Error> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    let week = match &args.week {
        Some(text) => IsoWeek::parse(text).map_err(Error::Week)?,
        None => IsoWeek::last_complete(now_ms),
    };
    let user = args.user.as_deref();
    if !args.send {
        let (config, db) = mpistat_service::load(&args.db, err)?;
        for (n, mail) in mails(&db, &config, week, user)?.iter().enumerate() {
            if n > 0 {
                writeln!(out, "\n{}\n", "=".repeat(78))?;
            }
            writeln!(out, "To: {}\nSubject: {}\n", mail.user, mail.subject)?;
            write!(out, "{}", mail.text)?;
        }
        db.report_quarantined(err)?;
        return Ok(SendStats::default());
    }
    let (config, db) = mpistat_service::load_writer(&args.db)?;
    mpistat_service::say_if_rollups_out_of_date(&db, &config, err)?;
    let mailer = Mailer::from_site(&config.mail)?;
    let stats = send(&db, &config, &mailer, week, user, err)?;
    writeln!(
        err,
        "{week}: {} sent, {} sent before, {} failed",
        stats.sent, stats.already_sent, stats.failed
    )?;
    db.report_quarantined(err)?;
    Ok(stats)
}
