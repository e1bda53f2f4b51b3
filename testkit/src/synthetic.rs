//! Job records and syslog files for the digest's tests, the end-to-end tests and the benchmarks
//! (`digest/examples/gen_records.rs`): deterministic, varied enough to exercise the mail and the
//! admin pages (several users, routines of every class, imbalance, counters, Fortran and C).

use mpistat_record::model::{CounterEvent, CounterSet, Imbalance};
use mpistat_record::{encode, JobRecord, RoutineStats, Stat};
use std::io::Write;
use std::path::Path;

/// 2026-11-16T00:00:00Z, Monday of ISO week 2026-W47, in Unix milliseconds.
pub const WEEK_47_START_MS: u64 = 1_794_787_200_000;

fn stat(sum: u64, ranks: u32, spread_percent: u64) -> Stat {
    let avg = sum / u64::from(ranks.max(1));
    Stat {
        sum,
        min: avg - avg * spread_percent / 100,
        max: avg + avg * spread_percent / 100,
        max_rank: ranks.saturating_sub(1),
    }
}

fn routine(
    name: &str,
    class: &str,
    calls: u64,
    time_ns: u64,
    bytes: u64,
    ranks: u32,
) -> RoutineStats {
    RoutineStats {
        name: name.into(),
        class: class.into(),
        calls: stat(calls, ranks, 0),
        time_ns: stat(time_ns, ranks, 40),
        count: stat(bytes / 8, ranks, 0),
        bytes: stat(bytes, ranks, 0),
        ..Default::default()
    }
}

/// Superstep figures of job `n`: a critical-path imbalance of 2 to 21 % of the wall time.
fn imbalance(n: u64, ranks: u32, wall_ns: u64, mpi_ns: u64) -> Imbalance {
    let per_rank = wall_ns / u64::from(ranks);
    let useful_sum = wall_ns - mpi_ns;
    let useful_avg = useful_sum / u64::from(ranks);
    let critical_path_ns = per_rank * (2 + n % 20) / 100;
    Imbalance {
        supersteps: 1000 + n,
        merge_factor: 1,
        critical_path_ns,
        profile_ns: critical_path_ns * 2 / 3,
        work_max_ns: useful_avg + critical_path_ns,
        work_sum_ns: useful_sum,
        useful_max_ns: useful_avg + useful_avg * (n % 30) / 100,
        useful_sum_ns: useful_sum,
        ..Default::default()
    }
}

/// Counters of job `n` read around every call: instructions, floating-point operations, cache
/// misses and task-clock, at rates that vary with `n`; `n % 5 == 3` ran on nodes without a PMU.
fn counters(n: u64, wall_ns: u64, mpi_ns: u64) -> CounterSet {
    let (app_s, mpi_s) = ((wall_ns - mpi_ns) as f64 * 1e-9, mpi_ns as f64 * 1e-9);
    let event = |name: &str, app_per_s: f64, mpi_per_s: f64| CounterEvent {
        name: name.into(),
        app: (app_s * app_per_s) as u64,
        mpi: (mpi_s * mpi_per_s) as u64,
        unavailable: None,
    };
    let mut events = vec![
        event("fp-ops", 0.2e9 * (1 + n % 4) as f64, 1e6),
        event("instructions", 0.6e9 + 0.2e9 * (n % 10) as f64, 1.8e9),
        event("llc-misses", 4e6 * (1 + n % 9) as f64, 0.5e6),
        event("task-clock", 1e9, 0.9e9),
    ];
    if n % 5 == 3 {
        for e in events.iter_mut().filter(|e| e.name != "task-clock") {
            *e = CounterEvent {
                name: e.name.clone(),
                unavailable: Some("no hardware counters on this machine".into()),
                ..Default::default()
            };
        }
    }
    CounterSet {
        mode: "per-call read".into(),
        events,
    }
}

/// Job number `n` of `user` (`uid`), ending `end_ms`: `ranks` ranks for `wall_s` seconds, with an
/// MPI share of `mpi_percent`, mostly Allreduce and Send/Recv. Jobs with `n % 5 == 4` have
/// neither superstep figures nor counters (as from an older profiler).
pub fn job(
    n: u64,
    user: &str,
    uid: u32,
    end_ms: u64,
    ranks: u32,
    wall_s: u64,
    mpi_percent: u64,
) -> JobRecord {
    let wall_ns = wall_s * 1_000_000_000 * u64::from(ranks);
    let mpi_ns = wall_ns * mpi_percent / 100;
    let calls = 1000 * (n % 7 + 1) * u64::from(ranks);
    JobRecord {
        version: 1,
        job_id: format!("{}", 1000 + n),
        uid,
        user: user.into(),
        exe: format!("/home/{user}/bin/solver{}", n % 3),
        argv0: format!("solver{}", n % 3),
        host: "node1".into(),
        pid: 4000 + n as u32,
        ranks,
        nodes: ranks.div_ceil(32),
        start_unix_ms: end_ms - wall_s * 1000,
        end_unix_ms: end_ms,
        wall_ns: stat(wall_ns, ranks, 1),
        mpi_ns: stat(mpi_ns, ranks, 30),
        thread_level: "single".into(),
        mpi_library: "Open MPI v4.1.4".into(),
        overhead_ns: stat(calls * 100, ranks, 0),
        routines: vec![
            routine("MPI_Init", "misc", u64::from(ranks), mpi_ns / 20, 0, ranks),
            routine("MPI_Send", "p2p", calls, mpi_ns / 5, calls * 4096, ranks),
            routine("MPI_Recv", "p2p", calls, mpi_ns / 4, calls * 4096, ranks),
            routine(
                "MPI_Allreduce",
                "collective",
                calls / 10,
                mpi_ns / 2,
                calls * 8,
                ranks,
            ),
        ],
        imbalance: (n % 5 != 4).then(|| imbalance(n, ranks, wall_ns, mpi_ns)),
        counters: (n % 5 != 4).then(|| counters(n, wall_ns, mpi_ns)),
        ..Default::default()
    }
}

/// The syslog lines of `record` as the site's rsyslog template writes them on the record's host,
/// attested as sent by `sender` (`None`: rsyslog could not attest).
pub fn syslog_lines(record: &JobRecord, sender: Option<u32>) -> Vec<String> {
    let uid = sender.map(|u| u.to_string()).unwrap_or_default();
    let pid = sender.map(|_| record.pid.to_string()).unwrap_or_default();
    let host = &record.host;
    encode(record)
        .into_iter()
        .map(|message| {
            format!(
                "2026-11-18T10:00:00.000000+00:00 {host} uid={uid} pid={pid} mpistat: {message}\n"
            )
        })
        .collect()
}

/// The users of [`week_of_jobs`] (name, uid): invented, so tests that ingest their jobs check
/// names against these, never against the machine's accounts (uid 1001 may be someone else).
pub const USERS: [(&str, u32); 5] = [
    ("alice", 1001),
    ("bob", 1002),
    ("carol", 1003),
    ("dave", 1004),
    ("erin", 1005),
];

/// `count` jobs of five users ([`USERS`]) in week 47, each sent by its own user.
pub fn week_of_jobs(count: u64) -> Vec<JobRecord> {
    (0..count)
        .map(|n| {
            let (user, uid) = USERS[(n % 5) as usize];
            let end = WEEK_47_START_MS + 3_600_000 + n * 1000;
            job(
                n,
                user,
                uid,
                end,
                4 << (n % 4),
                60 + n % 600,
                5 + (n * 7) % 60,
            )
        })
        .collect()
}

/// What `mpistat ingest` of `log` does with the site's defaults, but with user names checked
/// against the invented [`USERS`], not the machine's accounts.
#[cfg(feature = "ingest")]
pub fn ingest_options(log: &Path) -> mpistat_ingest::Options {
    use mpistat_ingest::{accounts::Table, Options};
    Options {
        accounts: Some(std::sync::Arc::new(Table::new(USERS))),
        ..Options::from_site(
            vec![log.to_path_buf()],
            &mpistat_site::SiteConfig::default(),
        )
    }
}

/// A database in `dir` with [`week_of_jobs`]`(40)`: 40 jobs of five users in 2026-W47, filed by
/// a real ingest (the mail tests' fixture).
#[cfg(feature = "ingest")]
pub fn week_47_database(dir: &Path) -> mpistat_store::WriteStore {
    let log = dir.join("records.log");
    append_log(&log, &week_of_jobs(40));
    let mut db = mpistat_store::WriteStore::open(&dir.join("db.sqlite")).unwrap();
    mpistat_ingest::run_once(&mut db, &ingest_options(&log), &mut Vec::new()).unwrap();
    assert_eq!(db.job_count().unwrap(), 40);
    db
}

/// Write the attested syslog lines of `records` to `path` (appending).
pub fn append_log(path: &Path, records: &[JobRecord]) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut text = String::new();
    for record in records {
        for line in syslog_lines(record, Some(record.uid)) {
            text.push_str(&line);
        }
    }
    file.write_all(text.as_bytes()).unwrap();
}

/// Routines a production code calls besides those of [`job`], for realistically sized records.
const MORE_ROUTINES: [(&str, &str); 26] = [
    ("MPI_Comm_rank", "comm"),
    ("MPI_Comm_size", "comm"),
    ("MPI_Finalize", "misc"),
    ("MPI_Bcast", "collective"),
    ("MPI_Barrier", "collective"),
    ("MPI_Isend", "p2p"),
    ("MPI_Irecv", "p2p"),
    ("MPI_Waitall", "p2p"),
    ("MPI_Wait", "p2p"),
    ("MPI_Reduce", "collective"),
    ("MPI_Gather", "collective"),
    ("MPI_Scatter", "collective"),
    ("MPI_Allgather", "collective"),
    ("MPI_Alltoall", "collective"),
    ("MPI_Sendrecv", "p2p"),
    ("MPI_Comm_dup", "comm"),
    ("MPI_Comm_split", "comm"),
    ("MPI_Comm_free", "comm"),
    ("MPI_Type_commit", "datatype"),
    ("MPI_Type_free", "datatype"),
    ("MPI_Type_vector", "datatype"),
    ("MPI_Wtime", "misc"),
    ("MPI_Iprobe", "p2p"),
    ("MPI_Test", "p2p"),
    ("MPI_Cart_create", "topology"),
    ("MPI_File_write_all", "io"),
];

/// `count` jobs of `users` users (`user0`.., uid 2000..) spread over week 47, for the benchmark:
/// 10 to 30 routines each (20 on average), message-size histograms for the point-to-point ones.
pub fn jobs_of_many_users(count: u64, users: u64) -> impl Iterator<Item = JobRecord> {
    (0..count).map(move |n| {
        let user = n % users;
        let end = WEEK_47_START_MS + 3_600_000 + n % 500_000_000;
        let mut record = job(
            n,
            &format!("user{user}"),
            2000 + user as u32,
            end,
            4 << (n % 4),
            60 + n % 600,
            5 + (n * 7) % 60,
        );
        let extra = (6 + n % 21) as usize;
        let ranks = record.ranks;
        let mpi_ns = record.mpi_ns.sum;
        for (i, (name, class)) in MORE_ROUTINES.iter().take(extra).enumerate() {
            let calls = (n * 31 + i as u64 * 977) % 50_000 + u64::from(ranks);
            let bytes = if *class == "p2p" {
                calls * (64 << (i % 10))
            } else {
                0
            };
            let mut routine = routine(name, class, calls, mpi_ns / 200 + i as u64, bytes, ranks);
            if bytes > 0 {
                routine.hist = (0..12 + i % 8)
                    .map(|b| (calls >> (b % 5)) + b as u64)
                    .collect();
            }
            record.routines.push(routine);
        }
        for routine in &mut record.routines[1..3] {
            routine.hist = (0..14)
                .map(|b| (routine.calls.sum >> (b % 6)) + b)
                .collect();
        }
        record
    })
}

/// `count` jobs of `users` users (`user0`.., uid 2000..) ending evenly over `span_ms` from
/// `from_ms`, varied like a real site's: 1 to 256 ranks, Fortran and C, message-size
/// histograms, imbalance estimates with a time series (most jobs), instruction counters (half).
pub fn varied_jobs(
    count: u64,
    users: u64,
    from_ms: u64,
    span_ms: u64,
) -> impl Iterator<Item = JobRecord> {
    varied_jobs_part(0..count, count, users, from_ms, span_ms)
}

/// Jobs `part` of [`varied_jobs`]`(count, ...)` (a big set made in parts).
pub fn varied_jobs_part(
    part: std::ops::Range<u64>,
    count: u64,
    users: u64,
    from_ms: u64,
    span_ms: u64,
) -> impl Iterator<Item = JobRecord> {
    part.map(move |n| {
        // A few heavy users, many light ones.
        let user = if n % 3 == 0 { n / 3 % 8 } else { n % users };
        let ranks = 1u32 << (n % 9);
        let end = from_ms + 3_600_000 + n * (span_ms - 3_600_000) / count.max(1);
        let mut record = job(
            n,
            &format!("user{user}"),
            2000 + user as u32,
            end,
            ranks,
            60 + (n * 37) % 3000,
            2 + (n * 13) % 45,
        );
        // Which jobs have superstep figures and counters is decided below, not by `job`.
        record.imbalance = None;
        record.counters = None;
        if n % 3 == 0 {
            record.binding = mpistat_record::Binding::Fortran;
        }
        record
            .env
            .insert("OMP_NUM_THREADS".into(), format!("{}", 1 + n % 4));
        for r in &mut record.routines {
            if r.class == "p2p" {
                r.hist = (0..14)
                    .map(|b| r.calls.sum * (1 + (b + n) % 5) / 20)
                    .collect();
            }
        }
        let per_rank_wall = record.wall_ns.max;
        if n % 5 != 0 {
            let critical_path_ns = per_rank_wall * ((n * 11) % 45) / 100;
            record.imbalance = Some(mpistat_record::model::Imbalance {
                supersteps: 1000 + n % 100,
                merge_factor: 1,
                critical_path_ns,
                profile_ns: critical_path_ns / 2,
                series_ns: (0..40)
                    .map(|k| critical_path_ns / 40 * (1 + (k + n) % 7) / 4)
                    .collect(),
                series_factor: 25,
                ..Default::default()
            });
            if let Some(allreduce) = record
                .routines
                .iter_mut()
                .find(|r| r.name == "MPI_Allreduce")
            {
                allreduce.sync_ns = Some(allreduce.time_ns.sum / 2);
            }
        }
        if n % 2 == 0 {
            let app_s = record.wall_ns.sum.saturating_sub(record.mpi_ns.sum) / 1_000_000_000;
            record.counters = Some(mpistat_record::model::CounterSet {
                mode: "totals (read at MPI_Init and MPI_Finalize)".into(),
                events: vec![mpistat_record::model::CounterEvent {
                    name: "instructions".into(),
                    app: app_s * (400_000_000 + (user * 37 % 100) * 20_000_000),
                    mpi: 0,
                    unavailable: None,
                }],
            });
        }
        record
    })
}
