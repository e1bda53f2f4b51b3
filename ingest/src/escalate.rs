//! Escalation from the always-on profile to a trace, and the analyses of the traces that come
//! back ("level 6" of Rabenseifner, "Automatic MPI Counter Profiling", made automatic).
//!
//! Ingest judges each job it stores by its index ([`needs_a_look`]: traced, or meeting the
//! site's rule, [`rule_matches`]) and queues those (table `escalation_queue`) in the same
//! transaction, so no record is read for the others. After each ingest run, [`after_ingest`]
//! first files the analyses users sent: the trace of a traced job is analysed as its user, where
//! it is (`mpistat analyze --send`, started by the profiler at the end of the job or by the job
//! script), and the summary arrives as that user's attested record; it is stored for the mail
//! and the job page only when its job is stored, traced, and of the same uid. The digest never
//! opens a path a record names, so it needs no right to read users' files. Then it looks at the
//! queued jobs: a job captured by escalation counts its entry's captures down; a job that meets
//! the rule puts (uid, application: an interpreter's script or module, else the executable) on
//! the escalation list unless it is there. The list is
//! replaced atomically (temporary file, then rename), so the profiler never reads half a list,
//! and the jobs leave the queue after it is written. `mpistat escalate list|add|remove` lets
//! admins edit it.
//!
//! Every rank of every job reads the list, and any user can make her records meet the rule, so
//! the list stays small: an entry's application is at most a record's
//! ([`mpistat_record::limits::PATH_MAX`] bytes, no control characters), a uid has at most
//! [`ENTRIES_PER_UID_MAX`] entries, and the whole list at most
//! [`escalation::LIST_MAX_BYTES`]; what would go beyond is left out, and said.

use mpistat_record::limits::PATH_MAX;
use mpistat_record::JobIndex;
use mpistat_site::escalation::{self, Entry, LIST_MAX_BYTES};
use mpistat_site::{EscalationConfig, SiteConfig};
use mpistat_store::WriteStore;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why the escalation list could not be read, written or changed.
#[derive(Debug, thiserror::Error)]
pub enum EscalateError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no user {0:?}")]
    NoUser(String),
    #[error("cannot list {entry}: {why}")]
    Refused { entry: String, why: String },
    #[error("no entry for {0}")]
    NoEntry(String),
    #[error(transparent)]
    Store(#[from] mpistat_store::Error),
    /// Writing a problem or the list to the output failed.
    #[error(transparent)]
    Output(#[from] std::io::Error),
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Entries one uid may have on the list: a user can write any figures into her own records,
/// and takes no more of the list than this.
pub const ENTRIES_PER_UID_MAX: usize = 8;

/// Why `entry` may not join `listed` on the list, if it may not: an application longer than a
/// record's or with a control character, [`ENTRIES_PER_UID_MAX`] entries of its uid listed
/// already, or a list that would grow beyond [`LIST_MAX_BYTES`].
fn refusal(entry: &Entry, listed: &[Entry]) -> Option<String> {
    let app = &entry.exe;
    if app.len() > PATH_MAX {
        return Some(format!(
            "its application is {} bytes long (at most {PATH_MAX})",
            app.len()
        ));
    }
    if app.chars().any(char::is_control) {
        return Some("its application has a control character".into());
    }
    if listed.iter().filter(|e| e.uid == entry.uid).count() >= ENTRIES_PER_UID_MAX {
        return Some(format!(
            "uid {} has {ENTRIES_PER_UID_MAX} entries already",
            entry.uid
        ));
    }
    let size = escalation::encode(listed).len()
        + escalation::encode(std::slice::from_ref(entry)).len()
        - escalation::encode(&[]).len();
    (size > LIST_MAX_BYTES)
        .then(|| format!("the list would be {size} bytes (at most {LIST_MAX_BYTES})"))
}

/// What an entry is, for a message: its uid and the start of its application.
fn described(entry: &Entry) -> String {
    let app: String = entry.exe.chars().take(80).collect();
    let cut = if app.len() < entry.exe.len() {
        "..."
    } else {
        ""
    };
    format!("uid {} {app:?}{cut}", entry.uid)
}

/// The list at `path` (none yet: empty); lines that are not entries, and entries the list may
/// not have ([`refusal`]: e.g. from a list written before the limits), are reported and
/// dropped.
fn read_list(path: &Path, err: &mut impl Write) -> Result<Vec<Entry>, EscalateError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let (entries, problems) = escalation::parse(&text);
            for p in problems {
                writeln!(err, "mpistat: {}: {p}; dropped", path.display())?;
            }
            let mut kept = Vec::with_capacity(entries.len());
            for entry in entries {
                match refusal(&entry, &kept) {
                    None => kept.push(entry),
                    Some(why) => writeln!(
                        err,
                        "mpistat: {}: entry of {}: {why}; dropped",
                        path.display(),
                        described(&entry)
                    )?,
                }
            }
            Ok(kept)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(EscalateError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replace the list at `path` atomically (readable by every user's profiler).
fn write_list(path: &Path, entries: &[Entry]) -> Result<(), EscalateError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|source| EscalateError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(escalation::encode(entries).as_bytes())?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        EscalateError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Why a job deserves a trace under the site's rule, if it does: judged from its index alone
/// (`JobIndex::of` a record, or as filed), so looking at new jobs reads no record.
pub fn rule_matches(rule: &EscalationConfig, job: &JobIndex) -> Option<String> {
    let (mpi_percent, imbalance_percent, cpu_hours) = rule_figures(rule, job)?;
    Some(format!(
        "job {}: MPI {mpi_percent:.0} %, critical-path imbalance {imbalance_percent:.0} %, {cpu_hours:.2} CPU hours",
        job.job_id
    ))
}

/// The rule: MPI share, critical-path imbalance (both %) and CPU hours of a job that meets it.
fn rule_figures(rule: &EscalationConfig, job: &JobIndex) -> Option<(f64, f64, f64)> {
    if job.partial.is_some() || job.wall_ns_sum == 0 {
        return None;
    }
    let mpi_percent = 100.0 * job.mpi_ns_sum as f64 / job.wall_ns_sum as f64;
    let imbalance_percent = job.critical_path_imbalance_percent()?;
    let cpu_hours = f64::from(job.ranks) * job.wall_ns_max as f64 / 3.6e12;
    (mpi_percent >= rule.mpi_percent_min
        && imbalance_percent >= rule.critical_path_imbalance_percent_min
        && cpu_hours >= rule.cpu_hours_min)
        .then_some((mpi_percent, imbalance_percent, cpu_hours))
}

/// Whether the escalation rules are to look at a job after it is stored: it is traced (its
/// trace is analysed) or meets the rule. Judged on the index when ingest files the job, so that
/// only these are queued (table `escalation_queue`) and looked at by [`after_ingest`].
pub fn needs_a_look(rule: &EscalationConfig, job: &JobIndex) -> bool {
    job.traced.is_some() || meets_rule(rule, job)
}

/// Whether a job meets the rule ([`rule_matches`] without saying why).
pub fn meets_rule(rule: &EscalationConfig, job: &JobIndex) -> bool {
    rule_figures(rule, job).is_some()
}

/// How long an analysis may wait for its job's record before it is rejected as an orphan.
const ORPHAN_AFTER_MS: u64 = 7 * 86_400_000;

/// Match the analyses ingest filed to their jobs: one is stored (table `analyses`, for the mail
/// and the job page) only when its job is stored, was traced and has the analysis' uid, which
/// ingest checked is the uid that sent it; else it is rejected as `forged`. One whose job has
/// not come for [`ORPHAN_AFTER_MS`] is rejected as `orphan`; until then it is looked for only
/// among the jobs stored since the last look (many waiting analyses cost little).
fn file_analyses(db: &WriteStore, now_ms: u64, err: &mut impl Write) -> Result<(), EscalateError> {
    for received in db.analysis_inbox()? {
        let analysis = &received.analysis;
        let Some(job) = db.job_of_analysis(&received)? else {
            if now_ms.saturating_sub(received.received_ms) > ORPHAN_AFTER_MS {
                db.reject_analysis(&received, "orphan", "no such job arrived")?;
            }
            continue;
        };
        let index = &job.index;
        let wrong = if index.uid != analysis.uid {
            Some(format!(
                "job {} is uid {}'s, not the sender's",
                index.job_id, index.uid
            ))
        } else if index.traced.is_none() && job.complete {
            Some(format!("job {} was not traced", index.job_id))
        } else {
            None
        };
        match wrong {
            Some(detail) => {
                writeln!(
                    err,
                    "mpistat: analysis of job {} sent by uid {}: {detail}; rejected as forged",
                    analysis.job_key, analysis.uid
                )?;
                db.reject_analysis(&received, "forged", &detail)?;
            }
            None => db.store_analysis(index, analysis)?,
        }
    }
    Ok(())
}

/// File the analyses users sent ([`file_analyses`]), then look at the jobs queued since the
/// last call (by ingest: traced, or meeting the rule, see [`needs_a_look`]): count captures
/// down for jobs traced by escalation, apply the rule to the others; write the list if it
/// changed, then take them off the queue. Judged on each job's filed index: no record is read
/// (but those of rows stored before the index had columns, checked against the row; one that
/// disagrees is quarantined, see [`WriteStore::quarantine`]), and no trace: the analysis is the
/// job's user's to run and send (`mpistat analyze --send`). Problems go to `err`; only
/// database and list IO fail.
pub fn after_ingest(
    config: &SiteConfig,
    db: &WriteStore,
    err: &mut impl Write,
) -> Result<(), EscalateError> {
    let rule = &config.escalation;
    let now = now_unix();
    file_analyses(db, now * 1000, err)?;
    let jobs = db.queued_jobs()?;
    if jobs.is_empty() {
        return Ok(());
    }
    let mut entries = read_list(&rule.list, err)?;
    let before = entries.clone();
    // (uid, application) of the entries that apply: at most one each (a pair gets a new entry
    // only when none applies).
    let mut listed: HashSet<(u32, String)> = entries
        .iter()
        .filter(|e| e.applies(e.uid, &e.exe, now))
        .map(|e| (e.uid, e.exe.clone()))
        .collect();
    for queued in &jobs {
        // A job that is not traced matters only if its (uid, application) is not listed.
        if queued.traced == Some(false) && listed.contains(&(queued.uid, queued.app.clone())) {
            continue;
        }
        let Some(filed) = db.filed_job(queued.id)? else {
            continue; // quarantined since
        };
        let index = if filed.complete {
            filed.index
        } else {
            match db.filed_record(&filed)? {
                Some(record) => JobIndex::of(&record),
                None => continue, // not the record filed: quarantined
            }
        };
        if let Some(reason) = &index.traced {
            if reason == "escalation" {
                if let Some(e) = entries
                    .iter_mut()
                    .find(|e| e.applies(index.uid, index.application(), now))
                {
                    e.captures_left -= 1;
                    if e.captures_left == 0 {
                        listed.remove(&(e.uid, e.exe.clone()));
                    }
                }
            }
            continue;
        }
        let pair = (index.uid, index.application().to_string());
        if listed.contains(&pair) {
            continue;
        }
        if let Some(reason) = rule_matches(rule, &index) {
            let entry = Entry {
                uid: pair.0,
                exe: pair.1.clone(),
                captures_left: rule.captures,
                expires_unix: now + rule.expiry_days * 86_400,
                reason,
            };
            match refusal(&entry, &entries) {
                None => entries.push(entry),
                Some(why) => writeln!(
                    err,
                    "mpistat: job {} meets the escalation rule, but {} is not listed: {why}",
                    index.job_id,
                    described(&entry)
                )?,
            }
            // Judged once a run, listed or not.
            listed.insert(pair);
        }
    }
    // Spent and expired entries leave the list.
    entries.retain(|e| e.captures_left > 0 && e.expires_unix > now);
    if entries != before {
        write_list(&rule.list, &entries)?;
    }
    db.unqueue(jobs.iter().map(|queued| queued.id))?;
    Ok(())
}

/// A uid from a user name or number.
fn uid_of(user: &str) -> Result<u32, EscalateError> {
    if let Ok(uid) = user.parse() {
        return Ok(uid);
    }
    use crate::accounts::System;
    System::default()
        .uid_of(user)
        .ok_or_else(|| EscalateError::NoUser(user.to_string()))
}

/// `mpistat escalate list`: the list's path and its entries to `out` (problems with it to
/// `err`).
pub fn list(
    rule: &EscalationConfig,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), EscalateError> {
    let entries = read_list(&rule.list, err)?;
    writeln!(out, "{}", rule.list.display())?;
    for e in &entries {
        writeln!(
            out,
            "uid {}  {}  {} capture(s) left, expires {} (unix s)  {}",
            e.uid, e.exe, e.captures_left, e.expires_unix, e.reason
        )?;
    }
    Ok(())
}

/// `mpistat escalate add`: trace the next `captures` runs (`None`: the site's `[escalation]
/// captures`) within `days` (`None`: its `expiry_days`) of `user`'s (a name or uid)
/// application `exe` (as the job record's `app`); replaces the user's entry for it.
pub fn add(
    rule: &EscalationConfig,
    user: &str,
    exe: &str,
    captures: Option<u32>,
    days: Option<u64>,
    err: &mut impl Write,
) -> Result<(), EscalateError> {
    let mut entries = read_list(&rule.list, err)?;
    let uid = uid_of(user)?;
    entries.retain(|e| !(e.uid == uid && e.exe == exe));
    let entry = Entry {
        uid,
        exe: exe.to_string(),
        captures_left: captures.unwrap_or(rule.captures),
        expires_unix: now_unix() + days.unwrap_or(rule.expiry_days) * 86_400,
        reason: "admin".into(),
    };
    if let Some(why) = refusal(&entry, &entries) {
        return Err(EscalateError::Refused {
            entry: described(&entry),
            why,
        });
    }
    entries.push(entry);
    write_list(&rule.list, &entries)
}

/// `mpistat escalate remove`: `user`'s entries, all of them or those for the application `exe`.
pub fn remove(
    rule: &EscalationConfig,
    user: &str,
    exe: Option<&str>,
    err: &mut impl Write,
) -> Result<(), EscalateError> {
    let mut entries = read_list(&rule.list, err)?;
    let uid = uid_of(user)?;
    let n = entries.len();
    entries.retain(|e| !(e.uid == uid && exe.is_none_or(|x| x == e.exe)));
    if entries.len() == n {
        return Err(EscalateError::NoEntry(user.to_string()));
    }
    write_list(&rule.list, &entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpistat_record::model::{Imbalance, Stat};
    use mpistat_record::JobRecord;

    fn job(ranks: u32, wall_s: u64, mpi_percent: u64, imbalance_percent: u64) -> JobIndex {
        JobIndex::of(&record(ranks, wall_s, mpi_percent, imbalance_percent))
    }

    fn record(ranks: u32, wall_s: u64, mpi_percent: u64, imbalance_percent: u64) -> JobRecord {
        let wall = wall_s * 1_000_000_000;
        let work = wall * (100 - mpi_percent) / 100;
        JobRecord {
            job_id: "7".into(),
            ranks,
            wall_ns: Stat {
                sum: wall * u64::from(ranks),
                min: wall,
                max: wall,
                max_rank: 0,
            },
            mpi_ns: Stat {
                sum: wall * u64::from(ranks) * mpi_percent / 100,
                ..Default::default()
            },
            imbalance: Some(Imbalance {
                work_sum_ns: work * u64::from(ranks),
                critical_path_ns: work * imbalance_percent / 100,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_list_stays_within_its_size() {
        let entry = |uid: u32| Entry {
            uid,
            exe: format!("/home/u{uid}/{}", "a".repeat(4000)),
            captures_left: 1,
            expires_unix: u64::MAX,
            reason: "rule".into(),
        };
        let mut listed = Vec::new();
        let mut uid = 0;
        while refusal(&entry(uid), &listed).is_none() {
            listed.push(entry(uid));
            uid += 1;
        }
        let size = escalation::encode(&listed).len();
        assert!(
            size <= LIST_MAX_BYTES && size + 4100 > LIST_MAX_BYTES,
            "{size}"
        );
        let why = refusal(&entry(uid), &listed).unwrap();
        assert!(why.starts_with("the list would be "), "{why}");
        let control = Entry {
            exe: "/home/u1/a\tb".into(),
            ..entry(1)
        };
        assert_eq!(
            refusal(&control, &[]).as_deref(),
            Some("its application has a control character")
        );
    }

    #[test]
    fn the_rule_needs_all_three_thresholds() {
        let rule = EscalationConfig::default(); // 30 % MPI, 20 % imbalance, 1 CPU hour
        assert!(rule_matches(&rule, &job(64, 3600, 40, 25)).is_some());
        assert!(
            rule_matches(&rule, &job(64, 3600, 20, 25)).is_none(),
            "MPI share"
        );
        assert!(
            rule_matches(&rule, &job(64, 3600, 40, 10)).is_none(),
            "imbalance"
        );
        assert!(
            rule_matches(&rule, &job(4, 60, 40, 25)).is_none(),
            "CPU hours"
        );
        let partial = JobRecord {
            partial: Some("MPI_Abort".into()),
            ..record(64, 3600, 40, 25)
        };
        assert!(rule_matches(&rule, &JobIndex::of(&partial)).is_none());
        let without_estimates = JobRecord {
            imbalance: None,
            ..record(64, 3600, 40, 25)
        };
        assert!(rule_matches(&rule, &JobIndex::of(&without_estimates)).is_none());
    }
}
