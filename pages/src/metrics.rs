//! The site's figures for the dashboards sites already run: `GET /metrics` of `mpistat serve`
//! in the OpenMetrics text format, for Prometheus to scrape and Grafana to draw
//! (`etc/grafana/mpistat.json`; docs/metrics.md lists the series).
//!
//! Every window is whole UTC hours ending where the current hour starts: the last hour, day (24
//! hours) and week (168 hours). So a window's figures are the same whenever they are asked
//! within an hour, change when the hour does (and when a record of one of its hours comes
//! late), and never count an hour half. They are added up from per-hour rows: the rollups
//! (`rollup_hours`, `rollup_hour_groups`: [`mpistat_figures::rollup`]) and the database's own per-hour
//! counts (rejected entries, jobs that met the escalation rule, analyses: [`mpistat_store`]); a
//! scrape reads at most 168 rows of each, and the applications, accounts and partitions of the
//! week (its biggest cost) only when an hour of the week changed since the last scrape
//! ([`TopCache`]).
//!
//! [`gather`] reads the figures ([`Figures`]); [`render`] writes them out and needs nothing
//! else. Label values come from records, which their users wrote: [`label_value`] makes each
//! safe (no control characters, at most [`LABEL_MAX_BYTES`], cut ones end with a hash of the
//! whole), and names that still give the same label are added up, so that no series is ever
//! written twice (an invalid exposition, of which Prometheus would keep one sample silently).

use mpistat_figures::rollup::{self, Dimension, GroupSums, HourSums, Sums, HOUR_MS};
use mpistat_store::ReadStore;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::sync::Mutex;

/// The windows: their label and length in hours.
pub const WINDOWS: [(&str, u64); 3] = [("1h", 1), ("1d", 24), ("7d", 168)];

/// The longest label value written, in bytes (before escaping).
pub const LABEL_MAX_BYTES: usize = 128;

/// The kinds of rejected entries ingest makes ([`mpistat_store::Rejected`]): each is written for
/// every window, 0 when it has none (a kind not listed here is written when it occurs).
const REJECTED_KINDS: [&str; 7] = [
    "conflicting",
    "corrupt",
    "duplicate",
    "forged",
    "incomplete",
    "orphan",
    "unsupported",
];

/// What `/metrics` answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The figures of one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowFigures {
    /// Its label ([`WINDOWS`]).
    pub window: &'static str,
    /// The jobs that ended in it.
    pub site: HourSums,
    /// Of those, the jobs that met the escalation rule, as ingest judged them.
    pub rule_jobs: u64,
    /// The analyses of its jobs traced by escalation: succeeded, failed.
    pub analysed: [u64; 2],
    /// The rejected entries made in it, by kind.
    pub rejected: BTreeMap<String, u64>,
    /// The applications, accounts and partitions with the most MPI time, most first.
    pub top: Vec<Biggest>,
}

/// The applications, accounts or partitions (names and sums) with the most MPI time.
pub type Biggest = (Dimension, Vec<(String, GroupSums)>);

/// Everything `/metrics` says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// When they were taken (unix ms).
    pub now_ms: u64,
    /// Where every window ends: the start of the current hour (hours since the epoch).
    pub end_hour: u64,
    /// One per [`WINDOWS`], in that order.
    pub windows: Vec<WindowFigures>,
    /// The time of the newest line ingest read (unix ms), if it read one with a time it trusts.
    pub newest_line_ms: Option<u64>,
}

/// Every application, account and partition of each window with its sums, kept from one
/// scrape to the next by the server's workers ([`Named`]).
#[derive(Debug, Default)]
pub struct TopCache(Mutex<Option<Named>>);

/// The length of the widest window, in hours.
const WIDEST: u64 = 168;

/// The newest hours whose names are kept as counted, so that a record of one of them that comes
/// late (the usual case: a job that ended just before the hour did) is counted by difference.
const RECENT_HOURS: u64 = 2;

/// Sums by dimension and name.
type GroupRows = HashMap<(Dimension, String), GroupSums>;

/// Every name of each window with its sums, as of the windows' end `end_hour`. Counted once from
/// the rows of the widest window ([`Named::count`]); after that a scrape only adds the hours that
/// came and takes out those that went ([`Named::catch_up`]): a few thousand rows an hour instead
/// of every name of 168 hours at every scrape.
#[derive(Debug)]
struct Named {
    end_hour: u64,
    /// The site's sums of each hour of the widest window when its names were counted: an hour
    /// whose sums differ now got jobs since.
    hours: BTreeMap<u64, HourSums>,
    /// The names of the newest [`RECENT_HOURS`] hours, as counted.
    recent: BTreeMap<u64, GroupRows>,
    /// One per [`WINDOWS`].
    windows: Vec<GroupRows>,
}

fn add(rows: &mut GroupRows, key: (Dimension, String), sums: &GroupSums) {
    rows.entry(key).or_default().merge(sums);
}

fn take_out(rows: &mut GroupRows, key: (Dimension, String), sums: &GroupSums) {
    if let std::collections::hash_map::Entry::Occupied(mut entry) = rows.entry(key) {
        rollup::take_out(entry.get_mut(), sums);
        if entry.get().jobs == 0 {
            entry.remove();
        }
    }
}

/// The names of the hours `[from, to)` by hour.
fn names_of_hours(
    db: &ReadStore,
    from: u64,
    to: u64,
) -> Result<BTreeMap<u64, GroupRows>, crate::Error> {
    let mut by_hour: BTreeMap<u64, GroupRows> = BTreeMap::new();
    for dimension in Dimension::ALL {
        rollup::each_hour_group(db, dimension, from, to, |hour, name, sums| {
            add(
                by_hour.entry(hour).or_default(),
                (dimension, name.to_string()),
                &sums,
            );
        })?;
    }
    Ok(by_hour)
}

impl Named {
    /// Counted from every row of the widest window ending at `end`.
    fn count(db: &ReadStore, end: u64) -> Result<Named, crate::Error> {
        let start = end.saturating_sub(WIDEST);
        let hours = db.hours_between(start, end)?.into_iter().collect();
        let mut windows = vec![GroupRows::new(); WINDOWS.len()];
        let mut recent: BTreeMap<u64, GroupRows> = BTreeMap::new();
        for dimension in Dimension::ALL {
            rollup::each_hour_group(db, dimension, start, end, |hour, name, sums| {
                for (window, (_, length)) in windows.iter_mut().zip(WINDOWS) {
                    if hour >= end.saturating_sub(length) {
                        add(window, (dimension, name.to_string()), &sums);
                    }
                }
                if hour >= end.saturating_sub(RECENT_HOURS) {
                    let rows = recent.entry(hour).or_default();
                    add(rows, (dimension, name.to_string()), &sums);
                }
            })?;
        }
        Ok(Named {
            end_hour: end,
            hours,
            recent,
            windows,
        })
    }

    /// Bring the sums to windows ending at `end` and to the rows as they are now: an hour
    /// counted before whose site sums changed is counted again by difference if it is one of
    /// the recent ones; then each window takes in the hours that came and takes out those that
    /// went. `false` (the sums are then of no use) when that cannot be: an older hour changed,
    /// or the clock went back or on by a week or more.
    fn catch_up(&mut self, db: &ReadStore, end: u64) -> Result<bool, crate::Error> {
        if end < self.end_hour || end - self.end_hour >= WIDEST {
            return Ok(false);
        }
        let old_end = self.end_hour;
        let old_start = old_end.saturating_sub(WIDEST);
        let now: BTreeMap<u64, HourSums> = db.hours_between(old_start, end)?.into_iter().collect();
        let changed: Vec<u64> = now
            .keys()
            .chain(self.hours.keys())
            .copied()
            .filter(|h| *h < old_end && now.get(h) != self.hours.get(h))
            .collect::<BTreeSet<u64>>()
            .into_iter()
            .collect();
        if changed.iter().any(|h| !self.recent.contains_key(h)) {
            return Ok(false);
        }
        for hour in changed {
            let counted = self.recent.remove(&hour).unwrap_or_default();
            let rows = names_of_hours(db, hour, hour + 1)?
                .remove(&hour)
                .unwrap_or_default();
            for (window, (_, length)) in self.windows.iter_mut().zip(WINDOWS) {
                if hour >= old_end.saturating_sub(length) {
                    for (key, sums) in &counted {
                        take_out(window, key.clone(), sums);
                    }
                    for (key, sums) in &rows {
                        add(window, key.clone(), sums);
                    }
                }
            }
            self.recent.insert(hour, rows);
        }
        // The hours each window takes in or out, each read once (the hour that came is every
        // window's).
        let mut hours_moved = BTreeSet::new();
        for (_, length) in WINDOWS {
            hours_moved.extend(old_end.max(end.saturating_sub(length))..end);
            hours_moved.extend(old_end.saturating_sub(length)..end.saturating_sub(length));
        }
        let mut moved: BTreeMap<u64, GroupRows> = BTreeMap::new();
        for hour in hours_moved {
            moved.extend(names_of_hours(db, hour, hour + 1)?);
        }
        for (window, (_, length)) in self.windows.iter_mut().zip(WINDOWS) {
            let (first, old_first) = (end.saturating_sub(length), old_end.saturating_sub(length));
            for (hour, rows) in &moved {
                let came = *hour >= old_end && *hour >= first;
                let went = *hour >= old_first && *hour < first && *hour < old_end;
                for (key, sums) in rows {
                    if came {
                        add(window, key.clone(), sums);
                    } else if went {
                        take_out(window, key.clone(), sums);
                    }
                }
            }
        }
        let recent_from = end.saturating_sub(RECENT_HOURS);
        self.recent.retain(|hour, _| *hour >= recent_from);
        for hour in recent_from..end {
            if let std::collections::btree_map::Entry::Vacant(entry) = self.recent.entry(hour) {
                entry.insert(match moved.remove(&hour) {
                    Some(rows) => rows,
                    None => names_of_hours(db, hour, hour + 1)?
                        .remove(&hour)
                        .unwrap_or_default(),
                });
            }
        }
        let start = end.saturating_sub(WIDEST);
        self.hours = now.into_iter().filter(|(h, _)| *h >= start).collect();
        self.end_hour = end;
        Ok(true)
    }

    /// The `limit` names of each dimension with the most MPI time (ties by name), per window.
    fn biggest(&self, limit: usize) -> Vec<Vec<Biggest>> {
        self.windows
            .iter()
            .map(|window| {
                Dimension::ALL
                    .iter()
                    .map(|dimension| {
                        let mut named: Vec<(String, GroupSums)> = window
                            .iter()
                            .filter(|((d, _), _)| d == dimension)
                            .map(|((_, name), sums)| (name.clone(), *sums))
                            .collect();
                        named.sort_by(|(a, x), (b, y)| {
                            y.mpi_ns.total_cmp(&x.mpi_ns).then_with(|| a.cmp(b))
                        });
                        named.truncate(limit);
                        (*dimension, named)
                    })
                    .collect()
            })
            .collect()
    }
}

/// The figures now (`now_ms`), naming `limit` applications, accounts and partitions per window,
/// read in one snapshot of the database.
pub fn gather(
    db: &ReadStore,
    now_ms: u64,
    limit: usize,
    cache: &TopCache,
) -> Result<Figures, crate::Error> {
    // Every read below sees the same commit of ingest's.
    db.in_snapshot(|db| gather_in(db, now_ms, limit, cache))
}

/// [`gather`] within its snapshot.
fn gather_in(
    db: &ReadStore,
    now_ms: u64,
    limit: usize,
    cache: &TopCache,
) -> Result<Figures, crate::Error> {
    let end = now_ms / HOUR_MS;
    let start = end.saturating_sub(WIDEST);
    let hours = db.hours_between(start, end)?;
    let rule_jobs = db.rule_jobs_per_hour(start, end)?;
    let rejected = db.rejected_per_hour(start, end)?;
    let analysed = db.escalated_analyses_per_hour(start, end)?;
    let newest_line_ms = db.newest_line_ms()?;
    let top = {
        let mut kept = cache.0.lock().unwrap_or_else(|e| e.into_inner());
        let caught_up = match kept.as_mut() {
            Some(named) => named.catch_up(db, end),
            None => Ok(false),
        };
        // A failure half way leaves sums of no use.
        if !matches!(caught_up, Ok(true)) {
            *kept = None;
        }
        caught_up?;
        if kept.is_none() {
            *kept = Some(Named::count(db, end)?);
        }
        kept.as_ref()
            .map(|named| named.biggest(limit))
            .unwrap_or_default()
    };
    let windows = WINDOWS
        .iter()
        .zip(top)
        .map(|(&(window, length), top)| {
            let from = end.saturating_sub(length);
            let within = |hour: u64| hour >= from;
            let mut site = HourSums::default();
            for (_, sums) in hours.iter().filter(|(hour, _)| within(*hour)) {
                site.merge(sums);
            }
            let mut analysed_ok_failed = [0; 2];
            for (_, ok, count) in analysed.iter().filter(|(hour, ..)| within(*hour)) {
                analysed_ok_failed[usize::from(!ok)] += count;
            }
            let mut rejected_by_kind = BTreeMap::new();
            for (_, kind, entries) in rejected.iter().filter(|(hour, ..)| within(*hour)) {
                *rejected_by_kind.entry(kind.clone()).or_default() += entries;
            }
            WindowFigures {
                window,
                site,
                rule_jobs: rule_jobs
                    .iter()
                    .filter(|(hour, _)| within(*hour))
                    .map(|(_, jobs)| jobs)
                    .sum(),
                analysed: analysed_ok_failed,
                rejected: rejected_by_kind,
                top,
            }
        })
        .collect();
    Ok(Figures {
        now_ms,
        end_hour: end,
        windows,
        newest_line_ms,
    })
}

/// A figure of each window: its name, help, and value (`None`: the window has none, e.g. a
/// share of no time).
type WindowFigure = (
    &'static str,
    &'static str,
    fn(&WindowFigures) -> Option<f64>,
);

/// The site's figures of each window, in the order written.
const SITE_FIGURES: [WindowFigure; 8] = [
    (
        "mpistat_jobs",
        "MPI jobs profiled that ended in the window (whole hours up to the current one)",
        |w| Some(w.site.jobs as f64),
    ),
    (
        "mpistat_cpu_seconds",
        "CPU time of the window's jobs: wall time summed over their ranks",
        |w| Some(w.site.wall_ns / 1e9),
    ),
    (
        "mpistat_mpi_cpu_seconds",
        "Time the window's jobs spent in MPI, summed over their ranks",
        |w| Some(w.site.mpi_ns / 1e9),
    ),
    (
        "mpistat_mpi_cpu_ratio",
        "MPI share of the window's CPU time",
        |w| ratio(w.site.mpi_ns, w.site.wall_ns),
    ),
    (
        "mpistat_critical_path_imbalance_ratio",
        "Critical-path imbalance (time on the critical path lost to imbalance over the slowest \
         rank's wall time) of the window's jobs that have the figure, weighted by CPU time",
        |w| ratio(w.site.imbalance_weighted / 100.0, w.site.imbalance_wall_ns),
    ),
    (
        "mpistat_critical_path_imbalance_jobs",
        "Jobs of the window with a critical-path imbalance figure",
        |w| Some(w.site.imbalance_jobs as f64),
    ),
    (
        "mpistat_escalation_rule_jobs",
        "Jobs of the window that met the escalation rule ([escalation] in site.toml) when \
         ingest stored them",
        |w| Some(w.rule_jobs as f64),
    ),
    (
        "mpistat_escalated_traces",
        "Jobs of the window traced because the escalation rule put their application on the \
         escalation list",
        |w| Some(w.site.escalated_traces as f64),
    ),
];

fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| part / whole)
}

/// The OpenMetrics text of `figures`. Every family is written, with its help, even when it has
/// no sample.
pub fn render(figures: &Figures) -> String {
    let mut out = Exposition::default();
    for (name, help, value) in SITE_FIGURES {
        out.family(name, help);
        for w in &figures.windows {
            if let Some(v) = value(w) {
                out.sample(name, &[("window", w.window)], v);
            }
        }
    }
    let name = "mpistat_escalated_traces_analysed";
    out.family(
        name,
        "Analyses of the window's escalated traces that came back, by whether they succeeded",
    );
    for w in &figures.windows {
        for (status, count) in ["ok", "failed"].iter().zip(w.analysed) {
            out.sample(
                name,
                &[("window", w.window), ("status", status)],
                count as f64,
            );
        }
    }
    let name = "mpistat_records_rejected";
    out.family(
        name,
        "Entries ingest rejected in the window (when it read them), by reason: see \
         mpistat ingest --report",
    );
    let by_label: Vec<BTreeMap<String, u64>> = figures
        .windows
        .iter()
        .map(|w| {
            let mut labelled = BTreeMap::new();
            for (kind, count) in &w.rejected {
                *labelled.entry(label_value(kind)).or_default() += count;
            }
            labelled
        })
        .collect();
    // Every reason in each window (0 where it had none), so that a reason's series does not
    // come and go.
    let known: Vec<String> = REJECTED_KINDS.iter().map(|k| k.to_string()).collect();
    let reasons: BTreeSet<&String> = known
        .iter()
        .chain(by_label.iter().flat_map(|r| r.keys()))
        .collect();
    for (w, rejected) in figures.windows.iter().zip(&by_label) {
        for reason in &reasons {
            let count = rejected.get(*reason).copied().unwrap_or(0);
            out.sample(
                name,
                &[("window", w.window), ("reason", reason)],
                count as f64,
            );
        }
    }
    for dimension in Dimension::ALL {
        let label = dimension.name();
        let mpi = format!("mpistat_{label}_mpi_cpu_seconds");
        let cpu = format!("mpistat_{label}_cpu_seconds");
        out.family(
            &mpi,
            &format!(
                "MPI time (summed over ranks) of the window's {label}s with the most of it \
                 ([serve] metrics_top)"
            ),
        );
        let tops: Vec<(&str, Vec<(String, GroupSums)>)> = figures
            .windows
            .iter()
            .map(|w| {
                let groups = w.top.iter().find(|(d, _)| *d == dimension);
                (w.window, labelled(groups.map_or(&[][..], |(_, g)| g)))
            })
            .collect();
        for (window, groups) in &tops {
            for (name, sums) in groups {
                out.sample(
                    &mpi,
                    &[("window", window), (label, name)],
                    sums.mpi_ns / 1e9,
                );
            }
        }
        out.family(
            &cpu,
            &format!("CPU time of the same {label}s in the window"),
        );
        for (window, groups) in &tops {
            for (name, sums) in groups {
                out.sample(
                    &cpu,
                    &[("window", window), (label, name)],
                    sums.wall_ns / 1e9,
                );
            }
        }
    }
    let lag = "mpistat_ingest_lag_seconds";
    let newest = "mpistat_ingest_newest_line_timestamp_seconds";
    out.family(
        lag,
        "How long ago the newest syslog line ingest has read was written (rsyslog's time)",
    );
    if let Some(line_ms) = figures.newest_line_ms {
        out.sample(
            lag,
            &[],
            figures.now_ms.saturating_sub(line_ms) as f64 / 1e3,
        );
    }
    out.family(
        newest,
        "When the newest syslog line ingest has read was written",
    );
    if let Some(line_ms) = figures.newest_line_ms {
        out.sample(newest, &[], line_ms as f64 / 1e3);
    }
    let end = "mpistat_window_end_timestamp_seconds";
    out.family(
        end,
        "Where every window ends: the start of the current hour (windows are whole hours)",
    );
    out.sample(end, &[], (figures.end_hour * HOUR_MS) as f64 / 1e3);
    out.finish()
}

/// `groups` with their names made labels ([`label_value`]), those that give the same label
/// added up, most MPI time first.
fn labelled(groups: &[(String, GroupSums)]) -> Vec<(String, GroupSums)> {
    let mut by_label: BTreeMap<String, GroupSums> = BTreeMap::new();
    for (name, sums) in groups {
        by_label.entry(label_value(name)).or_default().merge(sums);
    }
    let mut out: Vec<_> = by_label.into_iter().collect();
    out.sort_by(|(a, x), (b, y)| y.mpi_ns.total_cmp(&x.mpi_ns).then_with(|| a.cmp(b)));
    out
}

/// A name from a record as a label value: control characters (line feeds included) replaced
/// by U+FFFD, and if longer than [`LABEL_MAX_BYTES`] cut, ending with `…` and a hash of the whole
/// name (its CRC-32: the same from one mpistat to the next), so that names cut alike stay apart.
/// Not yet escaped (the exposition does that).
pub fn label_value(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect();
    if clean.len() <= LABEL_MAX_BYTES {
        return clean;
    }
    let suffix = format!("…{:08x}", crc32fast::hash(name.as_bytes()));
    let mut cut = LABEL_MAX_BYTES - suffix.len();
    while !clean.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &clean[..cut])
}

/// The text being written.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}.");
        let _ = writeln!(self.0, "# TYPE {name} gauge");
    }

    /// A sample; label values are escaped here (backslash and double quote: they hold no line
    /// feed, [`label_value`]).
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
                let _ = write!(self.0, "{label}=\"{escaped}\"");
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    fn finish(mut self) -> String {
        self.0.push_str("# EOF\n");
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_names_stay_as_they_are() {
        assert_eq!(label_value("/usr/bin/lmp"), "/usr/bin/lmp");
        assert_eq!(label_value("a\"b\\c"), "a\"b\\c");
        assert_eq!(
            label_value("two\nlines\r\0"),
            "two\u{FFFD}lines\u{FFFD}\u{FFFD}"
        );
    }

    #[test]
    fn long_names_are_cut_and_told_apart() {
        let a = format!("{}a", "x".repeat(300));
        let b = format!("{}b", "x".repeat(300));
        let (la, lb) = (label_value(&a), label_value(&b));
        assert!(la.len() <= LABEL_MAX_BYTES && lb.len() <= LABEL_MAX_BYTES);
        assert_ne!(la, lb);
        assert!(la.starts_with("xxxx") && la.contains('…'), "{la}");
        // Cut on a character boundary.
        let wide = "é".repeat(200);
        assert!(label_value(&wide).len() <= LABEL_MAX_BYTES);
    }

    proptest! {
        #[test]
        fn a_label_is_short_and_has_no_control_character(name in ".{0,400}") {
            let label = label_value(&name);
            prop_assert!(label.len() <= LABEL_MAX_BYTES);
            prop_assert!(!label.chars().any(char::is_control));
            if name.len() <= LABEL_MAX_BYTES && !name.chars().any(char::is_control) {
                prop_assert_eq!(label, name);
            }
        }

        /// Whatever the names, no series is written twice and every sample line is whole
        /// (short names of a few characters, line feeds among them, often give one label).
        #[test]
        fn no_series_twice(
            names in proptest::collection::vec("[ab\n\u{FFFD}]{0,3}|.{0,300}", 0..20)
        ) {
            let sums = GroupSums { jobs: 1, wall_ns: 2e9, mpi_ns: 1e9 };
            let mut figures = figures_of(names.iter().map(|n| (n.clone(), sums)).collect());
            figures.windows[0].rejected = names.iter().map(|n| (n.clone(), 1)).collect();
            let text = render(&figures);
            let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
            let series: BTreeSet<&str> =
                samples.iter().map(|l| l.rsplit_once(' ').unwrap().0).collect();
            prop_assert_eq!(series.len(), samples.len(), "{}", text);
            prop_assert!(text.ends_with("# EOF\n"));
        }
    }

    /// Figures whose every window names `groups` for every dimension.
    fn figures_of(groups: Vec<(String, GroupSums)>) -> Figures {
        Figures {
            now_ms: 1_796_099_108_000,
            end_hour: 1_796_099_108_000 / HOUR_MS,
            windows: WINDOWS
                .iter()
                .map(|(window, _)| WindowFigures {
                    window,
                    top: Dimension::ALL
                        .iter()
                        .map(|d| (*d, groups.clone()))
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            newest_line_ms: None,
        }
    }

    #[test]
    fn names_that_give_one_label_are_added_up() {
        let long = "y".repeat(200);
        let sums = |mpi_s: f64| GroupSums {
            jobs: 1,
            wall_ns: 2.0 * mpi_s * 1e9,
            mpi_ns: mpi_s * 1e9,
        };
        // A name with a line feed and one with U+FFFD in its place give the same label.
        let text = render(&figures_of(vec![
            ("evil\nname".into(), sums(3.0)),
            ("evil\u{FFFD}name".into(), sums(4.0)),
            (long.clone(), sums(1.0)),
        ]));
        assert!(
            text.contains("mpistat_application_mpi_cpu_seconds{window=\"1h\",application=\"evil\u{FFFD}name\"} 7\n"),
            "{text}"
        );
        assert!(text.contains(&label_value(&long)), "{text}");
    }

    #[test]
    fn the_exposition() {
        let window = |window, n: u64| WindowFigures {
            window,
            site: HourSums {
                jobs: 3 * n,
                wall_ns: 46_800e9 * n as f64,
                mpi_ns: 14_760e9 * n as f64,
                imbalance_jobs: 2 * n,
                imbalance_weighted: 576_000e9 * n as f64,
                imbalance_wall_ns: 43_200e9 * n as f64,
                escalated_traces: n,
            },
            rule_jobs: n,
            analysed: [n, 0],
            rejected: BTreeMap::from([("forged".to_string(), n)]),
            top: vec![
                (
                    Dimension::Application,
                    vec![
                        (
                            "/apps/gromacs \"2024\"".into(),
                            GroupSums {
                                jobs: 2,
                                wall_ns: 32_400e9,
                                mpi_ns: 7_560e9,
                            },
                        ),
                        (
                            "/apps/lammps".into(),
                            GroupSums {
                                jobs: 1,
                                wall_ns: 14_400e9,
                                mpi_ns: 7_200e9,
                            },
                        ),
                    ],
                ),
                (Dimension::Account, vec![]),
            ],
        };
        let figures = Figures {
            now_ms: 1_796_099_108_000,
            end_hour: 1_796_099_108_000 / HOUR_MS,
            windows: vec![window("1h", 1), window("1d", 2), window("7d", 0)],
            newest_line_ms: Some(1_796_099_100_500),
        };
        insta::assert_snapshot!(render(&figures));
    }
}
