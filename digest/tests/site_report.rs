//! The admin pages: a snapshot of the overview of a fixed data set; the static site of a
//! synthetic month (3000 jobs, 100 users, and a job whose executable is
//! `<script>alert(1)</script>`) has charts, no broken internal link and nothing unescaped; and
//! `mpistat serve` (the real binary over HTTP) answers 401 without identity, 403 for another
//! user's pages and jobs, and everything to admins, with a proxy header or bearer tokens; in the
//! default set-up (header mode on a Unix socket) an unprivileged local user (`nobody`, through
//! `setpriv`, with `curl`) can neither open the socket nor use the header trick on TCP (serve
//! refuses to start there unguarded), the proxy's group can; with a proxy secret on TCP, a
//! request without it gets 401.

use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;

use common::{append_log, varied_jobs, week_of_jobs, WEEK_47_START_MS};
use mpistat_figures::period::Period;
use mpistat_figures::rollup::{ensure_built, rebuild, rebuild_in_steps, Progress};
use mpistat_ingest::accounts::Table;
use mpistat_ingest::{run_once, Options};
use mpistat_pages::site_report::listing::{self, Listing};
use mpistat_pages::site_report::pages::{self, Place, StaticJobs};
use mpistat_pages::site_report::summary::{self, summarise};
use mpistat_pages::site_report::write_site;
use mpistat_record::{AnalysisRecord, JobIndex, JobRecord};
use mpistat_site::{SiteConfig, SiteReportConfig};
use mpistat_store::test_support::{column, execute_batch};
use mpistat_store::{inflated_record, WriteStore};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const XSS: &str = "<script>alert(1)</script>";
const DAY_MS: u64 = 86_400_000;
/// November 2026 (UTC).
const NOVEMBER_START_MS: u64 = 1_793_491_200_000;

fn temp_dir(label: &str) -> Scratch {
    Scratch::new(&format!("site-{label}"))
}

/// A database of `records`, ingested from their syslog lines like the real thing.
fn database(dir: &Path, records: &[JobRecord]) -> WriteStore {
    let log = dir.join("records.log");
    append_log(&log, records);
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let options = Options {
        // Names are checked against the records' own (invented) users, not the machine's.
        accounts: Some(Arc::new(Table::new(
            records.iter().map(|r| (r.user.as_str(), r.uid)),
        ))),
        ..Options::from_site(vec![log], &SiteConfig::default())
    };
    run_once(&mut db, &options, &mut Vec::new()).unwrap();
    assert_eq!(db.job_count().unwrap(), records.len() as u64);
    db
}

/// 3000 varied jobs of 100 users in November, and `user7`'s job with a hostile executable name.
fn synthetic_month() -> Vec<JobRecord> {
    let mut records: Vec<JobRecord> =
        varied_jobs(3000, 100, NOVEMBER_START_MS, 29 * 86_400_000).collect();
    let mut hostile = records[7].clone();
    hostile.job_id = "xss-1".into();
    hostile.exe = format!("/home/user7/{XSS}");
    hostile.argv0 = XSS.into();
    hostile.env.insert("OMPI_MCA_btl".into(), XSS.into());
    hostile.user_pmpi_tool = true;
    // The biggest critical job: on the first page of the critical list, with a page of its own.
    hostile.wall_ns.sum *= 1000;
    hostile.mpi_ns.sum = hostile.wall_ns.sum / 2;
    records.push(hostile);
    records
}

#[test]
fn overview_of_a_fixed_week() {
    let dir = temp_dir("snapshot");
    // 40 jobs of five users (most with superstep figures and counters) and 20 varied ones in week
    // 47, and 20 varied ones in the four weeks before (the trend).
    let mut records = week_of_jobs(40);
    records.extend(varied_jobs(20, 4, WEEK_47_START_MS + DAY_MS, 5 * DAY_MS));
    records.extend(varied_jobs(
        20,
        4,
        WEEK_47_START_MS - 28 * DAY_MS,
        28 * DAY_MS,
    ));
    let db = database(&dir, &records);
    let period = Period::parse("2026-W47").unwrap();
    let config = SiteConfig::default();
    let summary = summarise(&db, &period, &config).unwrap();
    let html = pages::overview(&summary, &config, static_place(&StaticJobs::default()));
    assert!(html.contains("<svg"), "the trend chart");
    insta::assert_snapshot!("overview", html);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The top of a static site.
fn static_place(site: &StaticJobs) -> Place<'_> {
    Place {
        root: "",
        query: "",
        site: Some(site),
    }
}

/// Every page of `period` as the server shows it to an admin, sorted in every way, and as the
/// static site has it, by name.
fn every_page(db: &WriteStore, period: &Period) -> BTreeMap<String, String> {
    let config = SiteConfig::default();
    let s = summarise(db, period, &config).unwrap();
    let live = Place {
        root: "",
        query: "?period=x",
        site: None,
    };
    let mut pages = BTreeMap::new();
    pages.insert("index".to_string(), pages::overview(&s, &config, live));
    pages.insert("charts".into(), pages::charts(&s, live));
    pages.insert("tables".into(), pages::tables(&s, live));
    let traced = summary::traced_jobs(db, period).unwrap();
    for sort in listing::CRITICAL_SORTS {
        for from in [0, listing::PAGE_ROWS] {
            let listing = Listing {
                sort: sort.into(),
                from,
            };
            let jobs = summary::critical_page(db, period, &listing, s.critical_jobs).unwrap();
            let html = pages::critical(&s, &config, &jobs, (&traced.0, traced.1), &listing, live);
            pages.insert(format!("critical {sort} {from}"), html);
        }
    }
    for sort in listing::USER_SORTS {
        let listing = Listing {
            sort: sort.into(),
            from: 0,
        };
        pages.insert(format!("users {sort}"), pages::users(&s, &listing, live));
    }
    for digest in mpistat_render::user::user_digests(db, period, &config, None).unwrap() {
        let totals = &s
            .users
            .iter()
            .find(|u| u.user == digest.user)
            .unwrap()
            .totals;
        for sort in listing::JOB_SORTS {
            let listing = Listing {
                sort: sort.into(),
                from: 0,
            };
            let jobs = summary::user_jobs(db, &digest.user, period, &listing).unwrap();
            let html = pages::user(
                &digest,
                totals.mpi_ns,
                &jobs,
                totals.jobs,
                &listing,
                &period.label,
                live,
            );
            pages.insert(format!("user {} {sort}", digest.user), html);
        }
    }
    let site = db.path().map(|p| p.with_extension("site")).unwrap();
    let _ = std::fs::remove_dir_all(&site);
    write_site(db, &config, period, &site, &[]).unwrap();
    for file in ["index", "charts", "tables", "critical", "users"] {
        let html = std::fs::read_to_string(site.join(format!("{file}.html"))).unwrap();
        pages.insert(format!("static {file}"), html);
    }
    pages
}

/// The rollups ingest keeps as the jobs come (in several commits, out of end order, some jobs
/// twice, one forged among them) give the same pages as rollups rebuilt from the stored jobs,
/// and the same summary figures as the jobs' records added up directly.
#[test]
fn rollups_kept_by_ingest_equal_a_rebuild() {
    let dir = temp_dir("rollups");
    let mut records = synthetic_month();
    records.reverse();
    let log = dir.join("records.log");
    let (first, rest) = records.split_at(records.len() / 2);
    append_log(&log, first);
    // Decoded and counted with the jobs around it, then rejected as forged (its user name is
    // another uid's): counted nowhere.
    let mut forged = records[0].clone();
    forged.job_id = "forged".into();
    forged.user = records
        .iter()
        .find(|r| r.uid != forged.uid)
        .unwrap()
        .user
        .clone();
    append_log(&log, &[forged]);
    append_log(&log, rest);
    // Some jobs again, in a later commit: stored once, counted once.
    append_log(&log, &records[..50]);
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    let options = Options {
        accounts: Some(Arc::new(Table::new(
            records.iter().map(|r| (r.user.as_str(), r.uid)),
        ))),
        batch_lines: 5000,
        ..Options::from_site(vec![log], &SiteConfig::default())
    };
    run_once(&mut db, &options, &mut Vec::new()).unwrap();
    assert_eq!(db.job_count().unwrap(), records.len() as u64);
    assert!(!db.positions().unwrap().is_empty());
    let period = Period::month("2026-11").unwrap();
    let kept = every_page(&db, &period);
    let week = Period::parse("2026-W47").unwrap();
    let kept_week = every_page(&db, &week);
    let counted = rebuild(&db, &SiteConfig::default().site_report).unwrap();
    assert_eq!(counted, records.len() as u64);
    let rebuilt = every_page(&db, &period);
    assert_eq!(kept.len(), rebuilt.len());
    for (name, html) in &kept {
        assert_eq!(html, &rebuilt[name], "{name} differs after a rebuild");
    }
    assert_eq!(kept_week, every_page(&db, &week));
    // The figures are the records' own.
    let s = summarise(&db, &period, &SiteConfig::default()).unwrap();
    let in_month: Vec<&JobRecord> = records
        .iter()
        .filter(|r| r.end_unix_ms >= period.from_ms && r.end_unix_ms < period.to_ms)
        .collect();
    assert_eq!(s.total.jobs, in_month.len());
    assert_eq!(
        s.total.wall_ns,
        in_month.iter().map(|r| r.wall_ns.sum).sum::<u64>()
    );
    assert_eq!(
        s.users.len(),
        in_month
            .iter()
            .map(|r| &r.user)
            .collect::<BTreeSet<_>>()
            .len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A heavy user at a large centre: a month of more than 292 rank-years, past SQLite's integers
/// in rank-ns (what stopped `bench/scale.sh` at 5.6M jobs: the batch failed, so ingest could
/// never go on), of jobs each within them (a single job beyond is rejected as corrupt, kept
/// with its reason), is stored, counted exactly in the rollups, equal to a rebuild, and shown.
#[test]
fn a_month_of_rank_years_past_sqlite_integers_is_stored_and_counted() {
    let dir = temp_dir("rank-years");
    let mut records: Vec<JobRecord> = varied_jobs(3, 1, NOVEMBER_START_MS, 20 * DAY_MS).collect();
    for r in &mut records {
        r.wall_ns.sum = 3_500_000_000_000_000_000;
        r.mpi_ns.sum = r.wall_ns.sum / 2;
    }
    let db = database(&dir, &records);
    let month = Period::month("2026-11").unwrap();
    let user_month: u64 = records.iter().map(|r| r.wall_ns.sum).sum();
    assert!(user_month > i64::MAX as u64);
    let s = summarise(&db, &month, &SiteConfig::default()).unwrap();
    assert_eq!((s.total.jobs, s.total.wall_ns), (3, user_month));
    assert_eq!(s.total.mpi_ns, user_month / 2);
    assert_eq!(s.users.len(), 1);
    let kept = every_page(&db, &month);
    rebuild(&db, &SiteConfig::default().site_report).unwrap();
    assert_eq!(kept, every_page(&db, &month));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The live search finds, in the month, the users whose login contains the text (with their
/// figures), the jobs whose id is the text and the applications whose name contains it (with
/// their jobs), as the records themselves say.
#[test]
fn the_search_finds_users_job_ids_and_applications() {
    use mpistat_pages::site_report::search::search;
    let dir = temp_dir("search");
    let records = synthetic_month();
    let db = database(&dir, &records);
    let period = Period::month("2026-11").unwrap();
    let in_month: Vec<&JobRecord> = records
        .iter()
        .filter(|r| r.end_unix_ms >= period.from_ms && r.end_unix_ms < period.to_ms)
        .collect();
    // Users: "USER1" is user1 and user10 to user19.
    let found = search(&db, &period, "USER1").unwrap();
    let mut expected: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for r in in_month.iter().filter(|r| r.user.contains("user1")) {
        let figures = expected.entry(&r.user).or_default();
        figures.0 += 1;
        figures.1 += r.wall_ns.sum;
    }
    let users: BTreeMap<&str, (usize, u64)> = found
        .users
        .iter()
        .map(|(user, t)| (user.as_str(), (t.jobs, t.wall_ns)))
        .collect();
    assert_eq!(users.len(), 11);
    assert_eq!(users, expected);
    // A job id: that job only.
    let wanted = &records[1234];
    let found = search(&db, &period, &wanted.job_id).unwrap();
    let ids: Vec<(String, String)> = found
        .jobs
        .iter()
        .map(|j| (j.key(), j.job_id.clone()))
        .collect();
    assert_eq!(ids, vec![(wanted.key(), wanted.job_id.clone())]);
    assert!(
        found.users.is_empty() && found.applications.is_empty(),
        "{found:?}"
    );
    // An application: its name, in another case (20 applications are listed at most).
    let app = wanted.application();
    let part = app.to_uppercase();
    let found = search(&db, &period, &part).unwrap();
    let mut apps: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &in_month {
        if r.application()
            .to_lowercase()
            .contains(&part.to_lowercase())
        {
            *apps.entry(r.application()).or_default() += 1;
        }
    }
    let found_apps: BTreeMap<&str, usize> = found
        .applications
        .iter()
        .map(|(name, jobs)| (name.as_str(), *jobs))
        .collect();
    assert!(found_apps.contains_key(app), "{found_apps:?}");
    assert!(apps.len() < 20, "{apps:?}");
    assert_eq!(found_apps, apps);
    assert!(!found.application_jobs.is_empty());
    assert!(found
        .application_jobs
        .iter()
        .all(|j| apps.contains_key(j.application())));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Jobs that come while a rollup rebuild runs: appended to the log a slice at a time and
/// ingested by a connection of their own, as `mpistat ingest` would.
struct LateJobs {
    log: PathBuf,
    options: Options,
    db: WriteStore,
    slices: Vec<Vec<JobRecord>>,
    /// Jobs ingested that ended before where the rebuild had got to, and the others.
    behind: usize,
    ahead: usize,
}

impl LateJobs {
    /// Store `first` in a new database in `dir`; `rest` comes later in slices of about `slice`
    /// jobs.
    fn new(
        dir: &Path,
        first: &[JobRecord],
        rest: &[JobRecord],
        slice: usize,
    ) -> (LateJobs, WriteStore) {
        let log = dir.join("records.log");
        append_log(&log, first);
        let options = Options {
            accounts: Some(Arc::new(Table::new(
                first.iter().chain(rest).map(|r| (r.user.as_str(), r.uid)),
            ))),
            batch_lines: 2000,
            ..Options::from_site(vec![log.clone()], &SiteConfig::default())
        };
        // Each slice has jobs of the whole month.
        let count = rest.len().div_ceil(slice);
        let path = dir.join("db.sqlite");
        let mut db = WriteStore::open(&path).unwrap();
        run_once(&mut db, &options, &mut Vec::new()).unwrap();
        let late = LateJobs {
            log,
            options,
            db: WriteStore::open(&path).unwrap(),
            slices: (0..count)
                .map(|k| rest.iter().skip(k).step_by(count).cloned().collect())
                .collect(),
            behind: 0,
            ahead: 0,
        };
        (late, db)
    }

    /// Ingest the next slice (`rebuilt_to`: where the rebuild has got to); false if none is left.
    fn ingest_next(&mut self, rebuilt_to: u64) -> bool {
        let Some(slice) = self.slices.pop() else {
            return false;
        };
        let behind = slice.iter().filter(|r| r.end_unix_ms < rebuilt_to).count();
        self.behind += behind;
        self.ahead += slice.len() - behind;
        append_log(&self.log, &slice);
        run_once(&mut self.db, &self.options, &mut Vec::new()).unwrap();
        true
    }
}

/// Every third job of the synthetic month, and the rest (to come while a rebuild runs).
fn month_in_two() -> (Vec<JobRecord>, Vec<JobRecord>, usize) {
    let records = synthetic_month();
    let all = records.len();
    let (first, rest): (Vec<_>, Vec<_>) = records
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 3 == 0);
    let strip = |jobs: Vec<(usize, JobRecord)>| jobs.into_iter().map(|(_, r)| r).collect();
    (strip(first), strip(rest), all)
}

/// A rebuild of the rollups in committed steps while ingest commits between the steps (jobs that
/// ended before where the rebuild has got to, and after it), stopped once and run again:
/// the pages do not change under a stopped rebuild, no job is lost, and the result equals a
/// fresh rebuild's (and the jobs' own figures).
#[test]
fn rollups_rebuilt_in_steps_while_ingest_commits() {
    let dir = temp_dir("rebuild-steps");
    let (first, rest, all) = month_in_two();
    let (mut late, db) = LateJobs::new(&dir, &first, &rest, 150);
    let thresholds = SiteConfig::default().site_report;
    let period = Period::month("2026-11").unwrap();
    let before = every_page(&db, &period);
    let (mut steps, mut rebuilt_to) = (0, 0);
    let stopped = rebuild_in_steps(&db, &thresholds, 100, |progress| {
        let Progress::Committed { to } = progress else {
            return ControlFlow::Continue(());
        };
        steps += 1;
        rebuilt_to = to;
        if steps < 3 {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    })
    .unwrap();
    assert_eq!((stopped, steps), (None, 3));
    assert_eq!(
        before,
        every_page(&db, &period),
        "a stopped rebuild changes no page"
    );
    // Stopped, then run again (it goes on where it was). Jobs come after each commit and
    // between a step's reading and its write, some of them into the step just read.
    late.ingest_next(rebuilt_to);
    let mut into_a_read_step = 0;
    let counted = rebuild_in_steps(&db, &thresholds, 100, |progress| {
        match progress {
            Progress::Read { from, to } => {
                if let Some(slice) = late.slices.last() {
                    into_a_read_step += slice
                        .iter()
                        .filter(|r| (from..to).contains(&r.end_unix_ms))
                        .count();
                }
                late.ingest_next(from);
            }
            Progress::Committed { to } => {
                assert!(
                    to > rebuilt_to,
                    "steps go on from where the stopped rebuild was"
                );
                rebuilt_to = to;
                late.ingest_next(to);
            }
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert!(into_a_read_step > 0, "no job came into a step already read");
    let left: usize = late.slices.iter().map(Vec::len).sum();
    assert_eq!(
        counted,
        Some((all - left) as u64),
        "the jobs stored when it ended"
    );
    assert!(
        late.behind > 100 && late.ahead > 100,
        "{} {}",
        late.behind,
        late.ahead
    );
    while late.ingest_next(u64::MAX) {}
    assert_eq!(db.job_count().unwrap(), all as u64);
    let stepped = every_page(&db, &period);
    let s = summarise(&db, &period, &SiteConfig::default()).unwrap();
    assert_eq!(s.total.jobs, all, "every job counted once");
    assert_eq!(rebuild(&db, &thresholds).unwrap(), all as u64);
    assert_eq!(
        stepped,
        every_page(&db, &period),
        "equal to a fresh rebuild"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rebuild with other critical-job thresholds than ingest's (the site changed them; the
/// ingest daemon still runs with the old ones): the jobs ingest counts in the rebuilt rollups
/// are judged by the rebuild's thresholds, so its critical list equals a fresh rebuild's.
#[test]
fn rollups_rebuilt_with_other_thresholds_than_ingests() {
    let dir = temp_dir("rebuild-thresholds");
    let (first, rest, all) = month_in_two();
    let (mut late, db) = LateJobs::new(&dir, &first, &rest, 150);
    let ingests = SiteConfig::default().site_report;
    let other = SiteReportConfig {
        critical_mpi_percent: ingests.critical_mpi_percent * 2.0,
        critical_imbalance_percent: ingests.critical_imbalance_percent / 2.0,
        ..ingests.clone()
    };
    let counted = rebuild_in_steps(&db, &other, 100, |progress| {
        if let Progress::Committed { to } = progress {
            late.ingest_next(to);
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert!(
        late.behind > 100,
        "{} jobs counted in the rebuild",
        late.behind
    );
    let period = Period::month("2026-11").unwrap();
    let critical = |db: &WriteStore| {
        summarise(db, &period, &SiteConfig::default())
            .unwrap()
            .critical_jobs
    };
    let stepped = (counted, critical(&db), every_page(&db, &period));
    let left: usize = late.slices.iter().map(Vec::len).sum();
    assert_eq!(stepped.0, Some((all - left) as u64));
    assert_eq!(rebuild(&db, &other).unwrap(), (all - left) as u64);
    assert_eq!(
        stepped.1,
        critical(&db),
        "critical jobs as a fresh rebuild counts them"
    );
    assert_eq!(
        stepped.2,
        every_page(&db, &period),
        "equal to a fresh rebuild"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mpistat ingest` running on another thread all through a rebuild in small steps loses no job:
/// the rollups count every job once and equal a fresh rebuild's.
#[test]
fn rollups_rebuilt_while_ingest_runs() {
    let dir = temp_dir("rebuild-concurrent");
    let (first, rest, all) = month_in_two();
    let (mut late, db) = LateJobs::new(&dir, &first, &rest, 100);
    let thresholds = SiteConfig::default().site_report;
    let ingest = std::thread::spawn(move || while late.ingest_next(0) {});
    let mut steps = 0;
    while !ingest.is_finished() {
        rebuild_in_steps(&db, &thresholds, 50, |progress| {
            if let Progress::Committed { .. } = progress {
                steps += 1;
            }
            ControlFlow::Continue(())
        })
        .unwrap();
    }
    ingest.join().unwrap();
    assert!(steps > 5, "{steps} steps");
    let period = Period::month("2026-11").unwrap();
    let kept = every_page(&db, &period);
    assert_eq!(
        summarise(&db, &period, &SiteConfig::default())
            .unwrap()
            .total
            .jobs,
        all
    );
    assert_eq!(rebuild(&db, &thresholds).unwrap(), all as u64);
    assert_eq!(kept, every_page(&db, &period), "equal to a fresh rebuild");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A database of an earlier schema, with jobs and without rollups, gets them when it is upgraded
/// and first opened with the site's configuration: the same pages as ingest keeps.
#[test]
fn an_upgraded_database_gets_its_rollups() {
    let dir = temp_dir("upgrade");
    let records = synthetic_month();
    let db = database(&dir, &records);
    let period = Period::month("2026-11").unwrap();
    let kept = every_page(&db, &period);
    // Back to schema 7: no rollup tables, no indexes for the pages, jobs under their wire keys.
    db.execute_batch(
            "DROP TABLE rollup_days; DROP TABLE rollup_users; DROP TABLE critical_jobs;
             DROP TABLE rollup_user_months; DROP TABLE rollup_user_weeks; DROP TABLE rollup_apps; DROP TABLE rollup_state; DROP INDEX jobs_by_user; DROP INDEX jobs_by_job_id;
             DROP INDEX jobs_by_app; DROP TABLE partial_inbox; DROP TABLE rollup_hours;
             DROP TABLE rollup_hour_groups; DROP TABLE rollup_hour_criticals;
             DROP TABLE escalation_rule_hours;
             DROP TRIGGER rejected_counted; DROP TRIGGER rejected_withdrawn;
             DROP TABLE rejected_hours; ALTER TABLE rejected DROP COLUMN rejected_ms;
             DROP INDEX analyses_by_end; DROP INDEX jobs_by_key_digit; DROP TABLE ingest_clock;
             DROP INDEX jobs_of_user_by_cpu; DROP INDEX jobs_of_user_by_mpi_share;
             DROP INDEX jobs_of_user_by_ranks;
             PRAGMA user_version = 7;
             ALTER TABLE jobs DROP COLUMN origin;
             UPDATE jobs SET key = substr(key, 1, instr(key, '-') - 1);",
        )
        .unwrap();
    drop(db);
    let db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    assert!(
        db.rollup_state("stale").unwrap().is_some(),
        "made by the first command that migrates"
    );
    ensure_built(&db, &SiteConfig::default().site_report).unwrap();
    let upgraded = every_page(&db, &period);
    for (name, html) in &kept {
        assert_eq!(html, &upgraded[name], "{name} differs after the upgrade");
    }
    // Other thresholds: the critical list is made again with them.
    let mut config = SiteConfig::default();
    config.site_report.critical_mpi_percent = 99.0;
    config.site_report.critical_imbalance_percent = 99.0;
    ensure_built(&db, &config.site_report).unwrap();
    let s = summarise(&db, &period, &config).unwrap();
    assert_eq!(s.critical_jobs, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every `href="..."` of a page.
fn links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .collect()
}

/// Follows every link from `index.html`: each must name a page that exists (and an `id` on
/// it for `#fragment`s). Returns the pages reached.
fn crawl(site: &Path) -> BTreeSet<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![site.join("index.html")];
    let mut ids: BTreeMap<PathBuf, String> = BTreeMap::new();
    while let Some(page) = todo.pop() {
        let page = page.canonicalize().unwrap_or(page);
        if !seen.insert(page.clone()) {
            continue;
        }
        let html = std::fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("broken link to {}: {e}", page.display()));
        ids.insert(page.clone(), html.clone());
        for link in links(&html) {
            assert!(
                !link.contains("://") && !link.starts_with('/'),
                "{}: not a relative internal link: {link}",
                page.display()
            );
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            assert!(target.is_file(), "{}: broken link {link}", page.display());
            if !fragment.is_empty() {
                let text = std::fs::read_to_string(&target).unwrap();
                assert!(
                    text.contains(&format!("id=\"{fragment}\"")),
                    "{}: no id {fragment} for {link}",
                    page.display()
                );
            }
            todo.push(target);
        }
    }
    seen
}

#[test]
fn static_site_of_a_synthetic_month() {
    let dir = temp_dir("month");
    let records = synthetic_month();
    let db = database(&dir, &records);
    let site = dir.join("site");
    let period = Period::month("2026-11").unwrap();
    let written = write_site(&db, &SiteConfig::default(), &period, &site, &[]).unwrap();
    assert_eq!(written.jobs, 3001);
    assert_eq!(written.users, 100);

    // Every page is reachable from the overview, and no link is broken.
    let reached = crawl(&site);
    let files: BTreeSet<PathBuf> = ["", "users", "jobs"]
        .iter()
        .flat_map(|d| std::fs::read_dir(site.join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap())
        .collect();
    assert_eq!(files.len(), written.pages);
    let unreached: Vec<_> = files.difference(&reached).collect();
    assert!(unreached.is_empty(), "not linked: {unreached:?}");

    // Charts: one SVG per figure, each with drawn marks.
    let charts = std::fs::read_to_string(site.join("charts.html")).unwrap();
    assert_eq!(
        charts.matches("<svg").count(),
        9,
        "Fig. 6-11, 14, sizes, imbalance"
    );
    for svg in charts.split("<svg").skip(1) {
        let svg = &svg[..svg.find("</svg>").unwrap()];
        assert!(
            svg.matches("<rect").count() + svg.matches("<circle").count() > 3,
            "an empty chart: {svg}"
        );
    }
    let overview = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(overview.contains("<th>users</th><td class=\"n\">100</td>"));
    assert!(overview.contains("<th>analysed jobs</th><td class=\"n\">3001</td>"));
    let tables = std::fs::read_to_string(site.join("tables.html")).unwrap();
    for section in [
        "id=\"all\"",
        "id=\"fortran\"",
        "id=\"c\"",
        "id=\"ranks-256-511\"",
    ] {
        assert!(tables.contains(section), "{section}");
    }

    // The hostile name is escaped on every page it is on, and never raw anywhere.
    let hostile = records.last().unwrap();
    let mut escaped_on = Vec::new();
    for file in &files {
        let html = std::fs::read_to_string(file).unwrap();
        assert!(!html.contains("<script"), "{} has a script", file.display());
        if html.contains("&lt;script&gt;alert(1)&lt;/script&gt;") {
            escaped_on.push(file.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    for page in [
        format!("{}.html", hostile.key()),
        "user7.html".into(),
        "critical.html".into(),
    ] {
        assert!(escaped_on.contains(&page), "{page} not in {escaped_on:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mpistat serve` on a free port, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `mpistat serve --listen listen --config config`, run through `setpriv` when `as_user` is given
/// (its arguments: uid, gid, groups).
fn spawn_serve(config: &Path, listen: &str, as_user: Option<[&str; 3]>) -> Command {
    let mut command = match as_user {
        Some([uid, gid, groups]) => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", uid, "--regid", gid, "--groups", groups, "--"]);
            c.arg(env!("CARGO_BIN_EXE_mpistat"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_mpistat")),
    };
    command
        .args(["serve", "--listen", listen, "--config"])
        .arg(config)
        .stdin(Stdio::null());
    command
}

impl Server {
    fn start(config: &Path) -> Server {
        Server::start_on(config, free_port())
    }

    fn start_on(config: &Path, port: u16) -> Server {
        let child = spawn_serve(config, &format!("127.0.0.1:{port}"), None)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "mpistat serve did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Server { child, port }
    }

    /// Status and body of `GET path` with `headers`.
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for (name, value) in headers {
            request += &format!("{name}: {value}\r\n");
        }
        stream
            .write_all(format!("{request}\r\n").as_bytes())
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response[9..12].parse().unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1.to_string();
        (status, body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two users' jobs in week 47 (alice, bob, ...) in a database, and a site.toml for it.
fn served_week(dir: &Path, serve: &str) -> (PathBuf, Vec<JobRecord>) {
    let mut records = week_of_jobs(10);
    records[1].exe = format!("/home/bob/{XSS}");
    drop(database(dir, &records));
    let config = dir.join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {:?}\n[serve]\nadmins = [\"root\", \"carol\"]\n{serve}",
            dir.join("db.sqlite").display().to_string()
        ),
    )
    .unwrap();
    (config, records)
}

#[test]
fn serve_with_proxy_header() {
    let dir = temp_dir("serve-header");
    // Only this test can reach the port (the guards are tested below).
    let (config, records) = served_week(
        &dir,
        "user_header = \"X-Remote-User\"\nallow_unguarded_header = true\n",
    );
    let server = Server::start(&config);
    let week = "?period=2026-W47";
    let alice_job = records.iter().find(|r| r.user == "alice").unwrap().key();
    let bob_job = records.iter().find(|r| r.user == "bob").unwrap().key();
    let as_user = |user| [("X-Remote-User", user)];

    // No identity: 401, whatever the page.
    for path in ["/", "/users/alice.html", &format!("/jobs/{alice_job}.html")] {
        assert_eq!(server.get(path, &[]).0, 401, "{path}");
    }
    // Another header name is not trusted.
    assert_eq!(server.get("/", &[("REMOTE_USER", "root")]).0, 401);

    // alice: her own pages, 403 for bob's and for the site pages.
    let (status, body) = server.get(&format!("/users/alice.html{week}"), &as_user("alice"));
    assert_eq!(status, 200);
    assert!(body.contains(&format!("jobs/{alice_job}.html")), "{body}");
    assert_eq!(
        server
            .get(&format!("/jobs/{alice_job}.html"), &as_user("alice"))
            .0,
        200
    );
    assert_eq!(
        server
            .get(&format!("/users/bob.html{week}"), &as_user("alice"))
            .0,
        403
    );
    assert_eq!(
        server
            .get(&format!("/jobs/{bob_job}.html"), &as_user("alice"))
            .0,
        403
    );
    for page in [
        "/",
        "/index.html",
        "/charts.html",
        "/tables.html",
        "/critical.html",
        "/users.html",
    ] {
        assert_eq!(
            server.get(&format!("{page}{week}"), &as_user("alice")).0,
            403,
            "{page}"
        );
    }

    // Admins (root, carol) see everything, for any interval.
    for admin in ["root", "carol"] {
        for page in [
            "/",
            "/charts.html",
            "/tables.html",
            "/critical.html",
            "/users.html",
            "/users/bob.html",
        ] {
            let (status, body) = server.get(&format!("{page}{week}"), &as_user(admin));
            assert_eq!(status, 200, "{admin} {page}: {body}");
            assert!(!body.contains("<script"), "{page}");
        }
        let (status, body) = server.get(&format!("/jobs/{bob_job}.html"), &as_user(admin));
        assert_eq!(status, 200);
        assert!(
            body.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !body.contains("<script")
        );
    }
    let (status, overview) = server.get("/?period=2026-11-16..2026-11-17", &as_user("root"));
    assert_eq!(status, 200);
    assert!(
        overview.contains("<th>analysed jobs</th><td class=\"n\">10</td>"),
        "{overview}"
    );
    let (status, overview) = server.get("/?period=2026-W46", &as_user("root"));
    assert_eq!(status, 200);
    assert!(overview.contains("<th>analysed jobs</th><td class=\"n\">0</td>"));
    assert_eq!(server.get("/?period=2026-W99", &as_user("root")).0, 400);
    assert_eq!(
        server
            .get("/jobs/0000000000000000.html", &as_user("root"))
            .0,
        404
    );
    assert_eq!(server.get("/../etc/passwd", &as_user("root")).0, 404);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_with_tokens_file() {
    let dir = temp_dir("serve-token");
    let tokens = dir.join("tokens");
    let root_token = "r00t-token-0123456789";
    let alice_token = "alice-token-0123456789";
    std::fs::write(
        &tokens,
        format!("# login token\nroot {root_token}\nalice {alice_token}\n"),
    )
    .unwrap();
    let (config, records) = served_week(
        &dir,
        &format!(
            "auth = \"token\"\ntokens_file = {:?}\n",
            tokens.display().to_string()
        ),
    );
    // A file we create is ours: root's only when we run as root.
    let am_root = std::fs::metadata(&tokens).unwrap().uid() == 0;
    if am_root {
        // Others may read it: refused.
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_mpistat"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert!(!output.status.success());
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(
            err.contains("must not be writable by group or others"),
            "{err}"
        );
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o640)).unwrap();
    } else {
        eprintln!("SKIPPED (part): the tokens file must be owned by root");
        return;
    }
    let server = Server::start(&config);
    let bearer = |t: &str| format!("Bearer {t}");
    let bob_job = records.iter().find(|r| r.user == "bob").unwrap().key();
    assert_eq!(server.get("/", &[]).0, 401);
    assert_eq!(
        server
            .get("/", &[("Authorization", "Bearer wrong-token-000000")])
            .0,
        401
    );
    assert_eq!(
        server.get("/", &[("REMOTE_USER", "root")]).0,
        401,
        "no header trust in token mode"
    );
    let alice = bearer(alice_token);
    let root = bearer(root_token);
    assert_eq!(
        server
            .get(
                "/users/alice.html?period=2026-W47",
                &[("Authorization", &alice)]
            )
            .0,
        200
    );
    assert_eq!(
        server
            .get(
                &format!("/jobs/{bob_job}.html"),
                &[("Authorization", &alice)]
            )
            .0,
        403
    );
    assert_eq!(
        server
            .get("/?period=2026-W47", &[("Authorization", &alice)])
            .0,
        403
    );
    assert_eq!(
        server
            .get("/?period=2026-W47", &[("Authorization", &root)])
            .0,
        200
    );
    assert_eq!(
        server
            .get(
                &format!("/jobs/{bob_job}.html"),
                &[("Authorization", &root)]
            )
            .0,
        200
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `curl` as `nobody` with the given supplementary groups (`-` for none): its exit code (7:
/// could not connect), the HTTP status it got (0 without one) and stderr (verbose: says why).
fn curl_as_nobody(groups: &str, args: &[&str]) -> (i32, u16, String) {
    let mut command = Command::new("setpriv");
    command.args(["--reuid", "nobody", "--regid", "nogroup"]);
    match groups {
        "-" => command.arg("--clear-groups"),
        groups => command.args(["--groups", groups]),
    };
    let output = command
        .args([
            "--",
            "curl",
            "-v",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(args)
        .output()
        .expect("run setpriv curl");
    let status = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), status, stderr)
}

fn am_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The default set-up (header mode, Unix socket of group `www-data`), with the server running as
/// an unprivileged service user (`daemon`, member of `www-data` as the systemd unit makes it):
/// `nobody` cannot open the socket, so cannot send `REMOTE_USER: root`; the proxy's group can.
#[test]
fn serve_default_socket_admits_only_the_proxys_group() {
    if !am_root() {
        eprintln!("SKIPPED: needs root (setpriv to other users)");
        return;
    }
    let dir = temp_dir("serve-socket");
    let (config, records) = served_week(&dir, "");
    // The service user owns its database directory, as /var/lib/mpistat.
    let status = Command::new("chown")
        .args(["-R", "daemon:daemon"])
        .arg(dir.as_os_str())
        .status()
        .unwrap();
    assert!(status.success());
    let socket = dir.join("serve.sock");
    let listen = format!("unix:{}", socket.display());
    let child = spawn_serve(&config, &listen, Some(["daemon", "daemon", "www-data"]))
        .spawn()
        .unwrap();
    // (No port: it is on the socket; the guard only kills it.)
    let mut server = Server { child, port: 0 };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "mpistat serve did not listen");
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "mpistat serve ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o660);
    assert_eq!(meta.uid(), 1, "owned by the service user (daemon)");
    assert_eq!(meta.gid(), 33, "group www-data");

    let bob_job = records.iter().find(|r| r.user == "bob").unwrap().key();
    let bob_page = format!("http://localhost/jobs/{bob_job}.html");
    let socket = socket.to_str().unwrap();
    // A local user without the group: the socket does not open, whatever the header says.
    for url in [bob_page.as_str(), "http://localhost/?period=2026-W47"] {
        let (code, status, stderr) = curl_as_nobody(
            "-",
            &["--unix-socket", socket, "-H", "REMOTE_USER: root", url],
        );
        assert_eq!((code, status), (7, 0), "{url}: {stderr}");
        assert!(stderr.contains("Permission denied"), "{stderr}");
    }
    // The proxy's group gets the pages its users may see.
    let proxy = |user: &str, url: &str| {
        let header = format!("REMOTE_USER: {user}");
        curl_as_nobody("www-data", &["--unix-socket", socket, "-H", &header, url])
    };
    assert_eq!(proxy("root", &bob_page).1, 200);
    assert_eq!(proxy("bob", &bob_page).1, 200);
    assert_eq!(proxy("alice", &bob_page).1, 403);
    assert_eq!(proxy("", &bob_page).1, 401);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Header mode on TCP: refused without a guard (nothing listens, so `nobody`'s header trick
/// reaches nobody); with `proxy_secret_file` it starts, and a request without the secret gets 401
/// however it names itself, while the proxy's (which can read the secret) gets its page.
#[test]
fn serve_header_mode_on_tcp_needs_a_guard() {
    let dir = temp_dir("serve-tcp-guard");
    let (config, records) = served_week(&dir, "");
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let output = spawn_serve(&config, &address, None).output().unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("refusing to trust the REMOTE_USER header") && err.contains("unix:"),
        "{err}"
    );
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    if !am_root() {
        eprintln!("SKIPPED (part): the secret file must be owned by root, setpriv needs root");
        return;
    }
    let url = format!("http://{address}/?period=2026-W47");
    let (code, _, stderr) = curl_as_nobody("-", &["-H", "REMOTE_USER: root", &url]);
    assert_eq!(code, 7, "nothing listens: {stderr}");

    // With a secret the proxy adds: root-owned, 0640, unreadable for nobody.
    let secret_file = dir.join("proxy-secret");
    let secret = "0123456789abcdef0123456789abcdef";
    std::fs::write(&secret_file, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(
        &config,
        std::fs::read_to_string(&config).unwrap()
            + &format!(
                "proxy_secret_file = {:?}\n",
                secret_file.display().to_string()
            ),
    )
    .unwrap();
    let server = Server::start_on(&config, port);
    let bob_job = records.iter().find(|r| r.user == "bob").unwrap().key();
    let bob_page = format!("http://{address}/jobs/{bob_job}.html");
    for (header, wrong) in [("REMOTE_USER: root", ""), ("REMOTE_USER: root", "guess")] {
        let wrong = format!("X-Mpistat-Proxy-Secret: {wrong}");
        let (_, status, stderr) = curl_as_nobody("-", &["-H", header, "-H", &wrong, &bob_page]);
        assert_eq!(status, 401, "{stderr}");
    }
    let stolen = Command::new("setpriv")
        .args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            "cat",
        ])
        .arg(&secret_file)
        .output()
        .unwrap();
    assert!(!stolen.status.success(), "nobody cannot read the secret");
    let with_secret = [("X-Mpistat-Proxy-Secret", secret)];
    let as_proxy = |user| [with_secret[0], ("REMOTE_USER", user)];
    let path = format!("/jobs/{bob_job}.html");
    assert_eq!(server.get(&path, &as_proxy("root")).0, 200);
    assert_eq!(server.get(&path, &as_proxy("alice")).0, 403);
    assert_eq!(server.get(&path, &[("REMOTE_USER", "root")]).0, 401);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A traced job's page carries what the analysis of its trace found (from the database's
/// `analyses`, as the weekly mail's level 6), other jobs' pages do not.
#[test]
fn a_traced_jobs_page_links_its_trace_analysis() {
    let dir = temp_dir("traced");
    let records = week_of_jobs(3);
    let db = database(&dir, &records);
    let summary = mpistat_analysis_report::report::Summary {
        wall_s: 2.5,
        waiting_percent: 31.0,
        critical_imbalance_percent: 18.0,
        causes: vec!["rank 0 computes <longer> before MPI_Send (delays.c:46)".into()],
        notes: vec![],
    };
    let traced = &records[1];
    let analysis = AnalysisRecord {
        job_key: traced.key(),
        dir: "/home/alice/.mpistat/traces/42".into(),
        summary: Some(serde_json::to_string(&summary).unwrap()),
        ..AnalysisRecord::default()
    };
    db.store_analysis(&JobIndex::of(traced), &analysis).unwrap();
    let site = dir.join("site");
    write_site(
        &db,
        &SiteConfig::default(),
        &Period::parse("2026-W47").unwrap(),
        &site,
        &[],
    )
    .unwrap();
    let page = |r: &JobRecord| {
        std::fs::read_to_string(site.join(format!("jobs/{}.html", r.key()))).unwrap()
    };
    let html = page(traced);
    assert!(html.contains("id=\"trace-analysis\""), "{html}");
    assert!(html.contains("rank 0 computes &lt;longer&gt; before MPI_Send (delays.c:46)"));
    assert!(html.contains("mpistat analyze /home/alice/.mpistat/traces/42"));
    assert!(html.contains("31.0 %"));
    // The critical page lists the traced jobs, which have pages of their own.
    let critical = std::fs::read_to_string(site.join("critical.html")).unwrap();
    let traced_list = &critical[critical.find("id=\"traced\"").expect("traced jobs")..];
    assert!(traced_list.contains(&format!("jobs/{}.html", traced.key())));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The two partial records of a job whose rank 1 called `MPI_Abort` on another node (`nodeb`)
/// than rank 0 (`nodea`), with their own job ids (outside Slurm), pids, starts, ends and
/// figures, made of `job` (which becomes rank 0's): (the aborting rank's, rank 0's).
fn halves_of_an_abort(job: &JobRecord) -> (JobRecord, JobRecord) {
    let mut stopped = job.clone();
    stopped.host = "nodea".into();
    stopped.nodes = 2;
    stopped.host_list = "nodea,nodeb".into();
    stopped.partial = Some(
        "SIGTERM from the launcher: another rank ended early (killed, crashed or on a lost \
         node) or the launcher was stopped"
            .into(),
    );
    stopped.imbalance = None;
    stopped.job_id = format!("local-{}-{}", stopped.start_unix_ms, stopped.pid);
    let mut abort = stopped.clone();
    abort.host = "nodeb".into();
    abort.pid += 7;
    abort.start_unix_ms += 300;
    abort.end_unix_ms -= 2000;
    abort.job_id = format!("local-{}-{}", abort.start_unix_ms, abort.pid);
    abort.wall_ns.sum /= 3;
    abort.mpi_ns.sum /= 5;
    abort.routines.truncate(1);
    abort.partial = Some("MPI_Abort (errorcode 3) on rank 1".into());
    (abort, stopped)
}

/// Ingest `logs` (each a run's new lines, appended to one log) into a new database in `dir`;
/// halves wait for each other as long as they need (`partial_grace`).
fn ingest_runs(dir: &Path, logs: &[Vec<JobRecord>], partial_grace: Duration) -> WriteStore {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut db = WriteStore::open(&dir.join("db.sqlite")).unwrap();
    for records in logs {
        ingest_run(&mut db, dir, records, partial_grace);
    }
    db
}

/// One ingest run into `db` of `dir`'s log, to which `records` are appended first; a half
/// waits `partial_grace` (since it was held) for its other half.
fn ingest_run(db: &mut WriteStore, dir: &Path, records: &[JobRecord], partial_grace: Duration) {
    let log = dir.join("records.log");
    append_log(&log, records);
    let options = Options {
        accounts: Some(Arc::new(Table::new(
            records.iter().map(|r| (r.user.as_str(), r.uid)),
        ))),
        batch_lines: 500,
        partial_grace,
        ..Options::from_site(vec![log], &SiteConfig::default())
    };
    let mut err = Vec::new();
    run_once(db, &options, &mut err).unwrap();
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
}

/// After `MPI_Abort` on another node than rank 0's, the job's two partial records are stored as
/// one job, rank 0's record with the abort's reason (and the aborting rank's host): whichever
/// comes first, in one commit or two, in one ingest run or two, the database holds the jobs and
/// gives the pages of a database that got that one record, which a rebuild of the rollups keeps
/// (the job counted once, the held halves never). Reading the halves again changes nothing.
#[test]
fn the_two_records_of_an_abort_on_another_node_are_one_job_in_any_order() {
    let dir = temp_dir("abort-halves");
    let others: Vec<JobRecord> = varied_jobs(300, 10, NOVEMBER_START_MS, 29 * 86_400_000).collect();
    let (abort, stopped) = halves_of_an_abort(&others[150]);
    let others = [&others[..150], &others[151..]].concat();
    let mut expected = stopped.clone();
    expected.partial = Some("MPI_Abort (errorcode 3) on rank 1 on nodeb".into());
    let one = ingest_runs(
        &dir.join("one"),
        &[[others.clone(), vec![expected.clone()]].concat()],
        Duration::ZERO,
    );
    let period = Period::month("2026-11").unwrap();
    let pages = every_page(&one, &period);
    let wait = Duration::from_secs(100 * 365 * 86_400);
    let (first, rest) = others.split_at(100);
    for (order, logs) in [
        (
            "abort first",
            vec![[&others[..], &[abort.clone(), stopped.clone()]].concat()],
        ),
        (
            "rank 0 first, other commits",
            vec![[
                std::slice::from_ref(&stopped),
                first,
                std::slice::from_ref(&abort),
                rest,
            ]
            .concat()],
        ),
        (
            "other runs",
            vec![
                [first, std::slice::from_ref(&stopped)].concat(),
                [rest, std::slice::from_ref(&abort)].concat(),
            ],
        ),
        (
            "again",
            vec![
                [&others[..], &[abort.clone(), stopped.clone()]].concat(),
                vec![stopped.clone(), abort.clone()],
            ],
        ),
    ] {
        let db = ingest_runs(&dir.join("halves"), &logs, wait);
        assert_eq!(db.job_count().unwrap(), others.len() as u64 + 1, "{order}");
        assert_eq!(
            db.job(&stopped.key()).unwrap(),
            Some(expected.clone()),
            "{order}"
        );
        assert_eq!(db.job(&abort.key()).unwrap(), None, "{order}");
        let got = every_page(&db, &period);
        assert_eq!(got.len(), pages.len(), "{order}");
        for (name, html) in &pages {
            assert_eq!(html, &got[name], "{name} differs ({order})");
        }
        let counted = rebuild(&db, &SiteConfig::default().site_report).unwrap();
        assert_eq!(counted, others.len() as u64 + 1, "{order}");
        for (name, html) in &every_page(&db, &period) {
            assert_eq!(
                html, &pages[name],
                "{name} differs after a rebuild ({order})"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A half whose other half does not come is held (stored nowhere, counted nowhere) for the
/// grace period, then stored as it is by the next ingest run, once; so is a half that pairs
/// with nothing held (another application's).
#[test]
fn a_lone_half_is_stored_after_the_grace_period() {
    let dir = temp_dir("lone-half");
    let others: Vec<JobRecord> = varied_jobs(60, 4, NOVEMBER_START_MS, 29 * 86_400_000).collect();
    let (abort, mut stopped) = halves_of_an_abort(&others[30]);
    stopped.exe = "/home/someone/else".into();
    let others = [&others[..30], &others[31..]].concat();
    let wait = Duration::from_secs(100 * 365 * 86_400);
    let halves = vec![abort.clone(), stopped.clone()];
    let held = ingest_runs(&dir.join("held"), &[others.clone(), halves.clone()], wait);
    assert_eq!(held.job_count().unwrap(), others.len() as u64);
    let period = Period::month("2026-11").unwrap();
    let none = ingest_runs(&dir.join("none"), std::slice::from_ref(&others), wait);
    assert_eq!(every_page(&held, &period), every_page(&none, &period));
    // The next run after the grace period (since they were held; a zero grace: any run after)
    // stores them, and a later one nothing more, as if they had come alone.
    let mut stored = ingest_runs(&dir.join("lone"), &[others.clone(), halves.clone()], wait);
    for _ in 0..2 {
        ingest_run(&mut stored, &dir.join("lone"), &[], Duration::ZERO);
        assert_eq!(stored.job_count().unwrap(), others.len() as u64 + 2);
    }
    assert_eq!(stored.job(&abort.key()).unwrap(), Some(abort.clone()));
    assert_eq!(stored.job(&stopped.key()).unwrap(), Some(stopped.clone()));
    let alone = ingest_runs(
        &dir.join("alone"),
        &[[&others[..], &halves[..]].concat()],
        Duration::ZERO,
    );
    assert_eq!(every_page(&stored, &period), every_page(&alone, &period));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `got` and `want` are the same pages (`what`: of which case).
fn assert_same_pages(got: &BTreeMap<String, String>, want: &BTreeMap<String, String>, what: &str) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}"
    );
    for (name, html) in want {
        assert_eq!(html, &got[name], "{name} differs ({what})");
    }
}

/// The rows of the partial inbox by key: state and record.
fn inbox(db: &WriteStore) -> BTreeMap<String, (String, JobRecord)> {
    let rows = db
        .column("SELECT key || ' ' || state || ' ' || hex(record) FROM partial_inbox")
        .unwrap();
    rows.iter()
        .map(|row| {
            let mut fields = row.split(' ');
            let (key, state, hex) = (fields.next(), fields.next(), fields.next());
            let hex = hex.unwrap().as_bytes();
            let deflated: Vec<u8> = hex
                .chunks(2)
                .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
                .collect();
            (
                key.unwrap().to_string(),
                (
                    state.unwrap().to_string(),
                    inflated_record(&deflated).unwrap(),
                ),
            )
        })
        .collect()
}

/// The site's grace for a half (`ingest.partial_grace_seconds`), and a check that `halves`
/// ended more than that before now: read now, they are read long after their job.
fn site_grace_long_after(halves: &[&JobRecord]) -> Duration {
    let grace = Duration::from_secs(SiteConfig::default().ingest.partial_grace_seconds);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    for half in halves {
        assert!(
            Duration::from_millis(half.end_unix_ms) + grace < now,
            "the job is to have ended long before this test: {half:?}"
        );
    }
    grace
}

/// Ingest `others` and the half `first` of a job (a half waits `grace` in that run), then its
/// other half `second`, then both again (these runs' grace is zero: they come after any grace).
/// After each of the last two runs the database lists `others` and `listed` (neither half under
/// another key), counts them once (the pages of a database that got these records, also after
/// a rebuild), and its partial inbox holds `first` and `second` as they came, in `states`.
fn read_in_runs(
    dir: &Path,
    others: &[JobRecord],
    [first, second]: [&JobRecord; 2],
    grace: Duration,
    listed: &JobRecord,
    states: [&str; 2],
) {
    let what = format!("{}'s half first", first.host);
    let period = Period::month("2026-11").unwrap();
    let listing = [others, std::slice::from_ref(listed)].concat();
    let pages = every_page(
        &ingest_runs(&dir.join("listed"), &[listing], Duration::ZERO),
        &period,
    );
    let late = dir.join("late");
    let with_first = [others, std::slice::from_ref(first)].concat();
    let mut db = ingest_runs(&late, &[with_first], grace);
    for (run, records) in [
        ("the other half", vec![second.clone()]),
        ("again", vec![first.clone(), second.clone()]),
    ] {
        ingest_run(&mut db, &late, &records, Duration::ZERO);
        let what = format!("{what}, {run}");
        assert_eq!(db.job_count().unwrap(), others.len() as u64 + 1, "{what}");
        assert_eq!(
            db.job(&listed.key()).unwrap().as_ref(),
            Some(listed),
            "{what}"
        );
        for half in [first, second]
            .into_iter()
            .filter(|h| h.key() != listed.key())
        {
            assert_eq!(db.job(&half.key()).unwrap(), None, "{what}");
        }
        assert_same_pages(&every_page(&db, &period), &pages, &what);
        assert_eq!(
            inbox(&db),
            BTreeMap::from([
                (first.key(), (states[0].to_string(), first.clone())),
                (second.key(), (states[1].to_string(), second.clone())),
            ]),
            "{what}"
        );
    }
    let counted = rebuild(&db, &SiteConfig::default().site_report).unwrap();
    assert_eq!(counted, others.len() as u64 + 1, "{what}");
    assert_same_pages(&every_page(&db, &period), &pages, &what);
}

/// 59 jobs of November's first 20 days, and the two halves of a 60th ([`halves_of_an_abort`]):
/// (the jobs, the aborting rank's half, rank 0's).
fn an_abort_among_others() -> (Vec<JobRecord>, JobRecord, JobRecord) {
    let others: Vec<JobRecord> = varied_jobs(60, 4, NOVEMBER_START_MS, 20 * DAY_MS).collect();
    let (abort, stopped) = halves_of_an_abort(&others[20]);
    ([&others[..20], &others[21..]].concat(), abort, stopped)
}

/// An ingest running late (a syslog backlog, a stopped daemon, an old file) reads both halves of
/// a job long after its end, here in two runs further apart than the grace (the first run's is
/// the site's; the second's is zero, so every hold is past it when that run ends): a half waits
/// from when it was held, not from its job's end, so the two are still one job, rank 0's record
/// with the abort's reason, in either order, counted once. Reading both again changes nothing.
#[test]
fn halves_read_long_after_their_job_in_runs_further_apart_than_the_grace_are_one_job() {
    let dir = temp_dir("late-ingest");
    let (others, abort, stopped) = an_abort_among_others();
    let grace = site_grace_long_after(&[&abort, &stopped]);
    let mut expected = stopped.clone();
    expected.partial = Some("MPI_Abort (errorcode 3) on rank 1 on nodeb".into());
    for halves in [[&abort, &stopped], [&stopped, &abort]] {
        let merged = ["merged"; 2];
        read_in_runs(&dir, &others, halves, grace, &expected, merged);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A half stored alone (no other half came within the grace), then its other half: that one is
/// late. The job stays listed once, as the half stored (rank 0's or the aborting rank's, as
/// stored, not rewritten), and counted once; the late record is kept in the partial inbox as it
/// came, marked `late`. Reading both again stores nothing more.
#[test]
fn the_other_half_of_a_half_stored_alone_is_kept_late_not_stored() {
    let dir = temp_dir("late-half");
    let (others, abort, stopped) = an_abort_among_others();
    for halves in [[&abort, &stopped], [&stopped, &abort]] {
        let states = ["stored", "late"];
        read_in_runs(&dir, &others, halves, Duration::ZERO, halves[0], states);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A database of the schema before halves noted when they were held: a half held there waits
/// from its job's end, as it did (stored alone by the next run, its job having ended long
/// ago), and a half held after the upgrade from when it was held (that run keeps it).
#[test]
fn a_half_held_before_the_upgrade_waits_from_its_end() {
    use mpistat_store::MIGRATIONS;
    let dir = temp_dir("held-upgrade");
    let jobs: Vec<JobRecord> = varied_jobs(10, 2, NOVEMBER_START_MS, 20 * DAY_MS).collect();
    let (abort, mut stopped) = halves_of_an_abort(&jobs[3]);
    stopped.exe = "/home/someone/else".into(); // pairs with nothing
    let grace = site_grace_long_after(&[&abort, &stopped]);
    let current = ingest_runs(
        &dir.join("current"),
        &[vec![abort.clone()]],
        Duration::from_secs(100 * 365 * 86_400),
    );
    drop(current);
    // The held half copied into a database of the schema before (as an older mpistat left it).
    let old_dir = dir.join("old");
    std::fs::create_dir_all(&old_dir).unwrap();
    // (Schema 12 noted when halves were held; schema 13 keyed them by wire key and uid.)
    let before = 11;
    let old_path = old_dir.join("db.sqlite");
    execute_batch(
        &old_path,
        &format!(
            "{} PRAGMA user_version = {before}; ATTACH '{}' AS current;
             INSERT INTO main.partial_inbox (end_ms, key, half, uid, look, record, state)
             SELECT end_ms, substr(key, 1, instr(key, '-') - 1), half, uid, look, record, state
             FROM current.partial_inbox",
            MIGRATIONS[..before].concat(),
            dir.join("current/db.sqlite").display()
        ),
    )
    .unwrap();
    assert_eq!(
        column(&old_path, "SELECT count(*) FROM partial_inbox").unwrap(),
        ["1"]
    );
    let mut db = WriteStore::open(&old_path).unwrap();
    assert_eq!(
        db.column("SELECT held_ms FROM partial_inbox").unwrap(),
        [abort.end_unix_ms.to_string()]
    );
    ingest_run(&mut db, &old_dir, std::slice::from_ref(&stopped), grace);
    assert_eq!(db.job_count().unwrap(), 1);
    assert_eq!(db.job(&abort.key()).unwrap(), Some(abort.clone()));
    let states: BTreeMap<String, String> = inbox(&db)
        .into_iter()
        .map(|(key, (state, _))| (key, state))
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([
            (abort.key(), "stored".to_string()),
            (stopped.key(), "held".to_string())
        ])
    );
    let _ = std::fs::remove_dir_all(&dir);
}
