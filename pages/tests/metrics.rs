//! The figures of `/metrics` (`mpistat_pages::metrics`) from jobs a real ingest stored, against
//! sums worked out by hand: each window is its whole hours, a job of the current hour is in
//! none, a record of a past hour that comes late changes the figures; a rebuild of the rollups
//! gives the same figures; rejected entries are counted in the hour they were made and no longer
//! once withdrawn; and every query of the shipped Grafana dashboard names a series `/metrics`
//! writes.

use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;
use mpistat_testkit::{dashboard, known};

use common::{append_log, syslog_lines, week_of_jobs, USERS};
use known::Known;
use mpistat_figures::rollup::{ensure_built, rebuild, Dimension, HOUR_MS};
use mpistat_ingest::accounts::Table;
use mpistat_ingest::{run_once, Options};
use mpistat_pages::metrics::{self, Figures, TopCache, WindowFigures};
use mpistat_record::{AnalysisRecord, JobIndex, JobRecord};
use mpistat_site::SiteConfig;
use mpistat_store::WriteStore;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Thursday 2026-11-19, 10:30 UTC: the windows end at 10:00.
const NOW_MS: u64 = 1_795_084_200_000;
const MINUTE_MS: u64 = 60_000;

fn temp_dir(label: &str) -> Scratch {
    Scratch::new(&format!("metrics-{label}"))
}

// The test's users: alice, bob and carol of `options`'s accounts, on node1 (the kit's `Owner`
// for `&str`).

const HOUR_START_MS: u64 = NOW_MS / HOUR_MS * HOUR_MS;

/// The jobs, and where they fall (the windows end at 10:00 on Thursday):
/// 1: 09:30, in all three; meets the escalation rule (MPI 50 %, imbalance of the rule 40 %, 4
///    CPU hours), traced by escalation, its analysis came back.
/// 2: 09:59:59.999, in all three; no imbalance figures; traced by its user.
/// 3: 10:05, in the current hour: in none.
/// 4: Wednesday 12:00, in the day and the week.
/// 5: five days before, without Slurm facts: in the week only.
/// 6: eight days before: in none.
fn known_jobs() -> Vec<Known<'static, &'static str>> {
    let lammps = "/apps/lammps/bin/lmp";
    let gromacs = "/apps/gromacs/bin/gmx";
    vec![
        Known {
            n: 1,
            user: "alice",
            exe: lammps,
            slurm: Some(("chem", "compute")),
            end_ms: HOUR_START_MS - 30 * MINUTE_MS,
            ranks: 4,
            wall_s: 3600,
            mpi_percent: 50,
            critical_path_s: Some(720),
            traced: Some("escalation"),
        },
        Known {
            n: 2,
            user: "bob",
            exe: gromacs,
            slurm: Some(("bio", "gpu")),
            end_ms: HOUR_START_MS - 1,
            ranks: 2,
            wall_s: 1800,
            mpi_percent: 10,
            critical_path_s: None,
            traced: Some("user"),
        },
        Known {
            n: 3,
            user: "alice",
            exe: lammps,
            slurm: Some(("chem", "compute")),
            end_ms: HOUR_START_MS + 5 * MINUTE_MS,
            ranks: 64,
            wall_s: 7200,
            mpi_percent: 90,
            critical_path_s: Some(3600),
            traced: None,
        },
        Known {
            n: 4,
            user: "bob",
            exe: gromacs,
            slurm: Some(("bio", "gpu")),
            end_ms: HOUR_START_MS - 22 * 60 * MINUTE_MS,
            ranks: 8,
            wall_s: 3600,
            mpi_percent: 25,
            critical_path_s: Some(360),
            traced: None,
        },
        Known {
            n: 5,
            user: "carol",
            exe: "/home/carol/a.out",
            slurm: None,
            end_ms: NOW_MS - 5 * 24 * HOUR_MS,
            ranks: 1,
            wall_s: 600,
            mpi_percent: 0,
            critical_path_s: None,
            traced: None,
        },
        Known {
            n: 6,
            user: "carol",
            exe: "/home/carol/a.out",
            slurm: None,
            end_ms: NOW_MS - 8 * 24 * HOUR_MS,
            ranks: 1,
            wall_s: 600,
            mpi_percent: 0,
            critical_path_s: None,
            traced: None,
        },
    ]
}

fn options(log: &Path) -> Options {
    Options {
        accounts: Some(Arc::new(Table::new([
            ("alice", 1001),
            ("bob", 1002),
            ("carol", 1003),
        ]))),
        ..Options::from_site(vec![log.to_path_buf()], &SiteConfig::default())
    }
}

fn ingest(db: &mut WriteStore, log: &Path) {
    let mut err = Vec::new();
    run_once(db, &options(log), &mut err).unwrap();
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
}

/// The database of the known jobs, job 1's analysis stored as the escalation would.
fn known_database(dir: &Path) -> (WriteStore, PathBuf) {
    let records: Vec<JobRecord> = known_jobs().iter().map(Known::record).collect();
    let log = dir.join("records.log");
    append_log(&log, &records);
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    ingest(&mut db, &log);
    assert_eq!(db.job_count().unwrap(), 6);
    let analysis = AnalysisRecord {
        job_key: records[0].key(),
        uid: 1001,
        user: "alice".into(),
        dir: "/home/alice/.mpistat/traces/1".into(),
        summary: Some("{}".into()),
        ..Default::default()
    };
    db.store_analysis(&JobIndex::of(&records[0]), &analysis)
        .unwrap();
    (db, log)
}

/// The value of the sample `series` (name and labels as written) in the exposition `text`.
fn sample(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series))
        .unwrap_or_else(|| panic!("no {series} in {text}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

fn window<'a>(figures: &'a Figures, name: &str) -> &'a WindowFigures {
    figures.windows.iter().find(|w| w.window == name).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// (name, MPI s, CPU s) of a window's biggest of `dimension`.
fn top(w: &WindowFigures, dimension: Dimension) -> Vec<(String, f64, f64)> {
    let groups = &w.top.iter().find(|(d, _)| *d == dimension).unwrap().1;
    groups
        .iter()
        .map(|(name, g)| (name.clone(), g.mpi_ns / 1e9, g.wall_ns / 1e9))
        .collect()
}

fn named(list: &[(&str, f64, f64)]) -> Vec<(String, f64, f64)> {
    list.iter()
        .map(|(n, m, c)| (n.to_string(), *m, *c))
        .collect()
}

#[test]
fn each_window_adds_up_its_whole_hours() {
    let dir = temp_dir("windows");
    let (db, _) = known_database(&dir);
    let figures = metrics::gather(&db, NOW_MS, 10, &TopCache::default()).unwrap();
    assert_eq!(figures.end_hour * HOUR_MS, HOUR_START_MS);

    // The last hour: jobs 1 and 2. CPU 4 x 3600 + 2 x 1800 = 18,000 s; MPI 7,200 + 360 s;
    // imbalance (the pages': critical path over the slowest rank's wall time) only job 1's,
    // 720 / 3600 = 20 %.
    let hour = window(&figures, "1h");
    assert_eq!(hour.site.jobs, 2);
    assert!(close(hour.site.wall_ns / 1e9, 18_000.0));
    assert!(close(hour.site.mpi_ns / 1e9, 7_560.0));
    assert_eq!(hour.site.imbalance_jobs, 1);
    assert!(close(
        hour.site.imbalance_weighted / hour.site.imbalance_wall_ns,
        20.0
    ));
    assert_eq!(hour.rule_jobs, 1);
    assert_eq!(hour.site.escalated_traces, 1);
    assert_eq!(hour.analysed, [1, 0]);
    let lammps = "/apps/lammps/bin/lmp";
    let gromacs = "/apps/gromacs/bin/gmx";
    assert_eq!(
        top(hour, Dimension::Application),
        named(&[(lammps, 7_200.0, 14_400.0), (gromacs, 360.0, 3_600.0)])
    );
    assert_eq!(
        top(hour, Dimension::Account),
        named(&[("chem", 7_200.0, 14_400.0), ("bio", 360.0, 3_600.0)])
    );

    // The day adds job 4: 8 x 3600 = 28,800 s CPU, 7,200 s MPI, imbalance 10 %, so
    // (20 x 14,400 + 10 x 28,800) / 43,200 = 13.33 %; gromacs now has the most MPI time.
    let day = window(&figures, "1d");
    assert_eq!(day.site.jobs, 3);
    assert!(close(day.site.wall_ns / 1e9, 46_800.0));
    assert!(close(day.site.mpi_ns / 1e9, 14_760.0));
    assert!(close(
        day.site.imbalance_weighted / day.site.imbalance_wall_ns,
        40.0 / 3.0
    ));
    assert_eq!(day.rule_jobs, 1, "job 4 has 25 % MPI, under the rule's 30");
    assert_eq!(
        top(day, Dimension::Partition),
        named(&[("gpu", 7_560.0, 32_400.0), ("compute", 7_200.0, 14_400.0)])
    );

    // The week adds job 5 (no Slurm facts: no account or partition).
    let week = window(&figures, "7d");
    assert_eq!(week.site.jobs, 4);
    assert!(close(week.site.wall_ns / 1e9, 47_400.0));
    assert_eq!(
        top(week, Dimension::Application),
        named(&[
            (gromacs, 7_560.0, 32_400.0),
            (lammps, 7_200.0, 14_400.0),
            ("/home/carol/a.out", 0.0, 600.0)
        ])
    );
    assert_eq!(top(week, Dimension::Account).len(), 2);

    // The lines' time (common::syslog_lines: 2026-11-18T10:00:00Z), trusted: attested, local.
    assert_eq!(figures.newest_line_ms, Some(1_794_996_000_000));
    let text = metrics::render(&figures);
    assert_eq!(sample(&text, "mpistat_ingest_lag_seconds"), 88_200.0);
    assert!(close(
        sample(&text, "mpistat_mpi_cpu_ratio{window=\"1h\"}"),
        0.42
    ));
    assert!(close(
        sample(
            &text,
            "mpistat_critical_path_imbalance_ratio{window=\"1d\"}"
        ),
        2.0 / 15.0
    ));

    // At most `limit` of each.
    let one = metrics::gather(&db, NOW_MS, 1, &TopCache::default()).unwrap();
    assert_eq!(
        top(window(&one, "7d"), Dimension::Application),
        named(&[(gromacs, 7_560.0, 32_400.0)])
    );
}

#[test]
fn a_late_record_and_a_rebuild() {
    let dir = temp_dir("late");
    let (mut db, log) = known_database(&dir);
    let cache = TopCache::default();
    let before = metrics::gather(&db, NOW_MS, 10, &cache).unwrap();
    assert_eq!(metrics::gather(&db, NOW_MS, 10, &cache).unwrap(), before);

    // A job of 09:10 whose record comes only now: the last hour's figures change, and its
    // application is named.
    let late = Known {
        n: 7,
        user: "carol",
        exe: "/apps/nwchem",
        slurm: Some(("chem", "compute")),
        end_ms: HOUR_START_MS - 50 * MINUTE_MS,
        ranks: 16,
        wall_s: 3600,
        mpi_percent: 75,
        critical_path_s: None,
        traced: None,
    };
    append_log(&log, &[late.record()]);
    ingest(&mut db, &log);
    let after = metrics::gather(&db, NOW_MS, 10, &cache).unwrap();
    let hour = window(&after, "1h");
    assert_eq!(hour.site.jobs, 3);
    assert_eq!(
        top(hour, Dimension::Application)[0],
        ("/apps/nwchem".to_string(), 43_200.0, 57_600.0)
    );
    assert_eq!(
        top(hour, Dimension::Account)[0],
        ("chem".to_string(), 50_400.0, 72_000.0)
    );

    // The rollups made again from the jobs give the same figures (the jobs meeting the rule
    // are ingest's own count, which a rebuild leaves alone).
    rebuild(&db, &SiteConfig::default().site_report).unwrap();
    let rebuilt = metrics::gather(&db, NOW_MS, 10, &TopCache::default()).unwrap();
    assert_eq!(rebuilt, after);
}

/// The hour (unix ms / 1 h) the newest rejected entry was made in.
fn rejected_hour(db: &WriteStore) -> u64 {
    let ms: u64 = db.column("SELECT max(rejected_ms) FROM rejected").unwrap()[0]
        .parse()
        .unwrap();
    ms / HOUR_MS
}

#[test]
fn rejected_entries_are_counted_in_the_hour_they_were_made() {
    let dir = temp_dir("rejected");
    let log = dir.join("records.log");
    let jobs = week_of_jobs(3);
    // Sent by uid 1002 (bob) but claiming uid 0: forged.
    let mut root = jobs[0].clone();
    root.uid = 0;
    root.user = "root".into();
    let mut text = syslog_lines(&root, Some(1002)).concat();
    // A damaged line: corrupt, and its job incomplete.
    let mut damaged = syslog_lines(&jobs[1], Some(jobs[1].uid));
    let cut_at = damaged[1].len() - 2;
    damaged[1].replace_range(cut_at.., "#\n");
    text += &damaged.concat();
    // A job missing its last part: incomplete.
    let whole = syslog_lines(&jobs[2], Some(jobs[2].uid));
    text += &whole[..whole.len() - 1].concat();
    std::fs::write(&log, &text).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let options = |log: &Path| Options {
        accounts: Some(Arc::new(Table::new(USERS))),
        grace: std::time::Duration::ZERO,
        ..Options::from_site(vec![log.to_path_buf()], &SiteConfig::default())
    };
    run_once(&mut db, &options(&log), &mut Vec::new()).unwrap();
    let expected = [("corrupt", 1), ("forged", 1), ("incomplete", 2)];

    // Looked at once the hour they were made in is over: in every window.
    let hour = rejected_hour(&db);
    let at = (hour + 1) * HOUR_MS;
    let counted = |figures: &Figures, window: &str| -> Vec<(String, u64)> {
        let rejected = &figures
            .windows
            .iter()
            .find(|w| w.window == window)
            .unwrap()
            .rejected;
        rejected.iter().map(|(k, n)| (k.clone(), *n)).collect()
    };
    let expect = |list: &[(&str, u64)]| -> Vec<(String, u64)> {
        list.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    let figures = metrics::gather(&db, at, 10, &TopCache::default()).unwrap();
    for (window, _) in metrics::WINDOWS {
        assert_eq!(counted(&figures, window), expect(&expected), "{window}");
    }
    let text = metrics::render(&figures);
    assert!(
        text.contains("mpistat_records_rejected{window=\"7d\",reason=\"incomplete\"} 2\n"),
        "{text}"
    );
    // Not yet within the hour they were made in, and no longer a week after it.
    let now = metrics::gather(&db, hour * HOUR_MS + 1, 10, &TopCache::default()).unwrap();
    assert!(now.windows.iter().all(|w| w.rejected.is_empty()));
    let later = metrics::gather(&db, at + 168 * HOUR_MS, 10, &TopCache::default()).unwrap();
    assert!(later.windows.iter().all(|w| w.rejected.is_empty()));

    // The job missing its part comes whole (a late copy in another file): its incomplete entry
    // is withdrawn, and no longer counted.
    let other = dir.join("late.log");
    let unrelated = "2026-11-18T10:00:00.000000+00:00 node1 uid=0 pid=1 kernel: hello\n";
    std::fs::write(&other, format!("{unrelated}{}", whole.concat())).unwrap();
    run_once(&mut db, &options(&other), &mut Vec::new()).unwrap();
    assert_eq!(db.job_count().unwrap(), 1);
    let figures = metrics::gather(&db, at, 10, &TopCache::default()).unwrap();
    assert_eq!(
        counted(&figures, "1h"),
        expect(&[("corrupt", 1), ("forged", 1), ("incomplete", 1)])
    );
}

#[test]
fn every_query_of_the_dashboard_names_an_exported_series() {
    // The families /metrics writes (every one, even without samples).
    let text = metrics::render(&Figures::default());
    let exported: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let exprs = dashboard::exprs();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let mut used = BTreeSet::new();
    for expr in &exprs {
        let names = dashboard::series_in(expr);
        assert!(!names.is_empty(), "{expr:?} names no series of mpistat");
        for name in names {
            assert!(
                exported.contains(name.as_str()),
                "the dashboard asks for {name}, which /metrics does not export: {expr:?}"
            );
            used.insert(name);
        }
    }
    eprintln!(
        "{} queries use {} of {} series",
        exprs.len(),
        used.len(),
        exported.len()
    );
}

/// The names `/metrics` keeps from one scrape to the next ([`TopCache`]: moved on by the hours
/// that come and go, a recent hour's late records counted by difference) are always those
/// counted afresh, as the clock moves on by an hour, by several, by more than a week, and as
/// late records come for recent and for older hours.
#[test]
fn the_names_kept_between_scrapes_are_those_counted_afresh() {
    let dir = temp_dir("kept");
    let log = dir.join("records.log");
    let apps = ["/apps/a", "/apps/b", "/apps/c", "/apps/d", "/apps/e"];
    let accounts = [("chem", "compute"), ("bio", "gpu"), ("phys", "compute")];
    let job = |n: u32, end_ms: u64| Known {
        n,
        user: ["alice", "bob", "carol"][n as usize % 3],
        exe: apps[(n as usize * 7) % apps.len()],
        slurm: (!n.is_multiple_of(4)).then(|| accounts[n as usize % accounts.len()]),
        end_ms,
        ranks: 1 + n % 8,
        wall_s: 60 + u64::from(n % 50) * 60,
        mpi_percent: u64::from(n * 13 % 90),
        critical_path_s: None,
        traced: None,
    };
    // A job every 37 minutes over the ten days before NOW.
    let first = NOW_MS - 10 * 24 * HOUR_MS;
    let records: Vec<JobRecord> = (0..390)
        .map(|n| job(n, first + u64::from(n) * 37 * MINUTE_MS).record())
        .collect();
    append_log(&log, &records);
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    ingest(&mut db, &log);
    let kept = TopCache::default();
    let mut n = 1000;
    let mut at = NOW_MS;
    // (hours the clock moves on, hours back a late record's job ended: none, or 0 for the last
    // complete hour)
    let steps: [(u64, Option<u64>); 12] = [
        (0, None),
        (0, Some(0)),
        (1, None),
        (1, Some(0)),
        (0, Some(1)),
        (3, Some(1)),
        (0, Some(30)),
        (2, None),
        (25, Some(0)),
        (170, None),
        (1, Some(0)),
        (0, Some(100)),
    ];
    for (hours, late) in steps {
        at += hours * HOUR_MS;
        if let Some(back) = late {
            let end_hour_ms = at / HOUR_MS * HOUR_MS;
            n += 1;
            append_log(
                &log,
                &[job(n, end_hour_ms - back * HOUR_MS - 7 * MINUTE_MS).record()],
            );
            ingest(&mut db, &log);
        }
        let moved_on = metrics::gather(&db, at, 3, &kept).unwrap();
        let afresh = metrics::gather(&db, at, 3, &TopCache::default()).unwrap();
        assert_eq!(moved_on, afresh, "{hours} h on, late {late:?}");
        assert!(
            moved_on.windows.iter().any(|w| !w.top[0].1.is_empty()) || hours >= 168,
            "the windows name nothing"
        );
    }
}

/// A database of the schema before the hour rollups (as the mpistat before left it: its jobs,
/// an analysis, no hour rollups or metrics counts) gets them when it is migrated: its windows give
/// the figures of a database kept by ingest, but for the jobs meeting the escalation rule,
/// counted only as ingest stores jobs (docs/metrics.md, "Upgrading").
#[test]
fn an_older_database_gets_its_hour_rollups() {
    use mpistat_store::test_support::{column, execute_batch};
    use mpistat_store::MIGRATIONS;
    let dir = temp_dir("upgrade");
    std::fs::create_dir(dir.join("current")).unwrap();
    let (db, _) = known_database(&dir.join("current"));
    let kept = metrics::gather(&db, NOW_MS, 10, &TopCache::default()).unwrap();
    assert!(window(&kept, "1d").rule_jobs > 0);
    drop(db);

    let before = MIGRATIONS
        .iter()
        .position(|m| m.contains("CREATE TABLE rollup_hours"))
        .unwrap();
    let old_path = dir.join("old.sqlite");
    execute_batch(
        &old_path,
        &format!(
            "{} PRAGMA user_version = {before}",
            MIGRATIONS[..before].concat()
        ),
    )
    .unwrap();
    for table in ["jobs", "analyses", "rejected"] {
        let columns = column(
            &old_path,
            &format!("SELECT name FROM pragma_table_info('{table}', 'main')"),
        )
        .unwrap()
        .join(", ");
        execute_batch(
            &old_path,
            &format!(
                "ATTACH '{}' AS current;
                 INSERT INTO main.{table} ({columns}) SELECT {columns} FROM current.{table}",
                dir.join("current/db.sqlite").display()
            ),
        )
        .unwrap();
    }

    // As the write side's explicit step opens it (ingest's start, `mpistat db migrate`).
    let upgraded = WriteStore::open(&old_path).unwrap();
    ensure_built(&upgraded, &SiteConfig::default().site_report).unwrap();
    let figures = metrics::gather(&upgraded, NOW_MS, 10, &TopCache::default()).unwrap();
    for (got, want) in figures.windows.iter().zip(&kept.windows) {
        assert_eq!(got.site, want.site, "{}", want.window);
        assert_eq!(got.top, want.top, "{}", want.window);
        assert_eq!(got.analysed, want.analysed, "{}", want.window);
        assert_eq!(got.rule_jobs, 0, "{}", want.window);
    }
    assert!(window(&figures, "7d").site.jobs > 0);
}
