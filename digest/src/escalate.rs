//! Escalation from the always-on profile to a trace, and the analysis of the traces that come
//! back (seed 003's "level 6", made automatic).
//!
//! Ingest judges each job it stores by its index ([`needs_a_look`]: traced, or meeting the
//! site's rule, [`rule_matches`]) and queues those (table `escalation_queue`) in the same
//! transaction, so no record is read for the others. After each ingest run, [`after_ingest`]
//! looks at the queued jobs: a traced job's record is read (and checked against its index) and
//! its trace analysed by `mpistat analyze --format summary` in a child process bounded in time
//! and address space, and the summary goes to table `analyses` (the weekly mail shows it); a job
//! captured by escalation counts its entry's captures down; a job that meets the rule puts (uid,
//! application: an interpreter's script or module, else the executable) on the escalation list
//! unless it is there. The list is replaced atomically
//! (temporary file, then rename), so the profiler never reads half a list, and the jobs leave
//! the queue after it is written. `mpistat escalate list|add|remove` lets admins edit it.

use crate::cli::{EscalateAction, EscalateArgs};
use crate::db::Database;
use anyhow::Context;
use mpistat_record::JobIndex;
use mpistat_site::escalation::{self, Entry};
use mpistat_site::{EscalationConfig, SiteConfig};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The list at `path` (none yet: empty); lines that are not entries are reported and dropped.
fn read_list(path: &Path, err: &mut impl Write) -> anyhow::Result<Vec<Entry>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let (entries, problems) = escalation::parse(&text);
            for p in problems {
                writeln!(err, "mpistat: {}: {p}; dropped", path.display())?;
            }
            Ok(entries)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Replace the list at `path` atomically (readable by every user's profiler).
fn write_list(path: &Path, entries: &[Entry]) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(escalation::encode(entries).as_bytes())?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
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
    job.traced.is_some() || rule_figures(rule, job).is_some()
}

/// Run `mpistat analyze --format summary DIR` with the site's time and memory bounds.
fn analyse(rule: &EscalationConfig, dir: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find mpistat: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args(["analyze", "--format", "summary", dir])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limit = rule.analysis_memory_bytes;
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
        unsafe {
            cmd.pre_exec(move || {
                let rl = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run the analysis: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let (mut out, mut err) = (String::new(), String::new());
        let _ = stdout.read_to_string(&mut out);
        let _ = stderr.read_to_string(&mut err);
        (out, err)
    });
    let deadline = Instant::now() + Duration::from_secs(rule.analysis_timeout_seconds);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the analysis took longer than {} s and was stopped",
                    rule.analysis_timeout_seconds
                ));
            }
        }
    };
    let (out, err) = reader.join().unwrap_or_default();
    if status.success() {
        Ok(out.trim().to_string())
    } else {
        let last = err.lines().last().unwrap_or("").trim();
        Err(format!("the analysis failed ({status}): {last}"))
    }
}

/// Look at the jobs queued since the last call (by ingest: traced, or meeting the rule, see
/// [`needs_a_look`]): analyse traces, count captures down, apply the rule; write the list if it
/// changed, then take them off the queue. The rule is judged on each job's filed index; only the
/// records of traced jobs (the index says so) are read, and checked against the index (a record
/// that disagrees is quarantined, see [`Database::quarantine`], and not analysed). Rows stored
/// before the index had columns are read whole. Problems go to `err`; only database and list IO
/// fail.
pub fn after_ingest(
    config: &SiteConfig,
    db: &Database,
    err: &mut impl Write,
) -> anyhow::Result<()> {
    let rule = &config.escalation;
    let jobs = db.queued_jobs()?;
    if jobs.is_empty() {
        return Ok(());
    }
    let mut entries = read_list(&rule.list, err)?;
    let before = entries.clone();
    let now = now_unix();
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
        let record = if filed.index.traced.is_some() || !filed.complete {
            match db.filed_record(&filed)? {
                Some(record) => Some(record),
                None => continue, // not the record filed: quarantined
            }
        } else {
            None
        };
        if let Some((record, trace)) = record
            .as_ref()
            .and_then(|r| r.trace.as_ref().map(|t| (r, t)))
        {
            let outcome = analyse(rule, &trace.dir);
            if let Err(e) = &outcome {
                writeln!(
                    err,
                    "mpistat: job {}: trace {}: {e}",
                    record.job_id, trace.dir
                )?;
            }
            db.store_analysis(
                record,
                &trace.dir,
                outcome.as_deref().map_err(String::as_str),
            )?;
            if trace.reason == "escalation" {
                if let Some(e) = entries
                    .iter_mut()
                    .find(|e| e.applies(record.uid, record.application(), now))
                {
                    e.captures_left -= 1;
                    if e.captures_left == 0 {
                        listed.remove(&(e.uid, e.exe.clone()));
                    }
                }
            }
            continue;
        }
        let index = match &record {
            Some(record) => JobIndex::of(record),
            None => filed.index,
        };
        let pair = (index.uid, index.application().to_string());
        if listed.contains(&pair) {
            continue;
        }
        if let Some(reason) = rule_matches(rule, &index) {
            entries.push(Entry {
                uid: pair.0,
                exe: pair.1.clone(),
                captures_left: rule.captures,
                expires_unix: now + rule.expiry_days * 86_400,
                reason,
            });
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
fn uid_of(user: &str) -> anyhow::Result<u32> {
    if let Ok(uid) = user.parse() {
        return Ok(uid);
    }
    use crate::ingest::accounts::{Accounts, System};
    System::default()
        .uid_of(user)
        .ok_or_else(|| anyhow::anyhow!("no user {user:?}"))
}

/// `mpistat escalate list|add|remove`.
pub fn command(args: &EscalateArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let path = args
        .config
        .clone()
        .unwrap_or_else(SiteConfig::path_from_env);
    let (config, problems) = SiteConfig::load(&path);
    if path.exists() || args.config.is_some() {
        for p in problems {
            eprintln!("mpistat: {p}");
        }
    }
    let rule = &config.escalation;
    let mut entries = read_list(&rule.list, &mut std::io::stderr())?;
    match &args.action {
        EscalateAction::List => {
            writeln!(out, "{}", rule.list.display())?;
            for e in &entries {
                writeln!(
                    out,
                    "uid {}  {}  {} capture(s) left, expires {} (unix s)  {}",
                    e.uid, e.exe, e.captures_left, e.expires_unix, e.reason
                )?;
            }
        }
        EscalateAction::Add {
            user,
            exe,
            captures,
            days,
        } => {
            let uid = uid_of(user)?;
            entries.retain(|e| !(e.uid == uid && e.exe == *exe));
            entries.push(Entry {
                uid,
                exe: exe.clone(),
                captures_left: captures.unwrap_or(rule.captures),
                expires_unix: now_unix() + days.unwrap_or(rule.expiry_days) * 86_400,
                reason: "admin".into(),
            });
            write_list(&rule.list, &entries)?;
        }
        EscalateAction::Remove { user, exe } => {
            let uid = uid_of(user)?;
            let n = entries.len();
            entries.retain(|e| !(e.uid == uid && exe.as_ref().is_none_or(|x| *x == e.exe)));
            anyhow::ensure!(entries.len() < n, "no entry for {user}");
            write_list(&rule.list, &entries)?;
        }
    }
    Ok(())
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
