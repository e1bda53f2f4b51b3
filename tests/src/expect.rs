//! Exact expectations on a record's per-routine numbers ([`RankValues`], [`Expected`]), and the
//! whole contract of the deterministic program `basic` (C) and its Fortran twins.

use crate::job::{assert_same_output, Job, Outcome};
use crate::programs::Mpi;
use crate::syslogd::Syslogd;
use mpistat_record::model::{JobRecord, RoutineStats, Stat};
use std::path::{Path, PathBuf};

/// A value per rank (index = rank), reduced the way the record reduces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankValues(pub Vec<u64>);

impl RankValues {
    /// The same value on each of `ranks` ranks.
    pub fn uniform(ranks: u32, v: u64) -> RankValues {
        RankValues(vec![v; ranks as usize])
    }

    /// `f(rank)` on each of `ranks` ranks.
    pub fn per_rank(ranks: u32, f: impl Fn(u64) -> u64) -> RankValues {
        RankValues((0..ranks as u64).map(f).collect())
    }

    /// The [`Stat`] of these values: sum, min, max and the lowest rank holding the max.
    pub fn stat(&self) -> Stat {
        let max = self.0.iter().copied().max().unwrap_or(0);
        Stat {
            sum: self.0.iter().sum(),
            min: self.0.iter().copied().min().unwrap_or(0),
            max,
            max_rank: self.0.iter().position(|v| *v == max).unwrap_or(0) as u32,
        }
    }
}

/// The expected numbers of one routine: its calls and bytes as the record reduces them.
#[derive(Clone, Debug)]
pub struct Expected {
    pub name: &'static str,
    pub calls: Stat,
    pub bytes: Stat,
}

impl Expected {
    /// Calls and bytes given per rank (index = rank).
    pub fn per_rank(name: &'static str, calls: RankValues, bytes: RankValues) -> Expected {
        Expected {
            name,
            calls: calls.stat(),
            bytes: bytes.stat(),
        }
    }

    /// `calls` and `bytes` on each of `ranks` ranks alike.
    pub fn uniform(name: &'static str, ranks: u32, calls: u64, bytes: u64) -> Expected {
        Expected::per_rank(
            name,
            RankValues::uniform(ranks, calls),
            RankValues::uniform(ranks, bytes),
        )
    }

    /// The numbers of one rank only, as a partial record written by `rank` holds them.
    pub fn on_rank(name: &'static str, rank: u32, calls: u64, bytes: u64) -> Expected {
        Expected {
            name,
            calls: Stat::single(calls, rank),
            bytes: Stat::single(bytes, rank),
        }
    }
}

/// The record's entry for `name`; panics listing the routines present if it has none.
pub fn routine<'a>(record: &'a JobRecord, name: &str) -> &'a RoutineStats {
    record.routine(name).unwrap_or_else(|| {
        panic!(
            "record has no {name}; it has {:?}",
            record.routines.iter().map(|r| &r.name).collect::<Vec<_>>()
        )
    })
}

/// Assert that `record` has exactly the expected calls and bytes (sum, min, max, rank of max) for
/// every routine of `expected`. A routine expected with 0 calls on every rank must be absent.
pub fn assert_routines(record: &JobRecord, expected: &[Expected]) {
    for e in expected {
        if e.calls.sum == 0 {
            assert!(
                record.routine(e.name).is_none(),
                "{} was never called but is in the record",
                e.name
            );
            continue;
        }
        let r = routine(record, e.name);
        assert_eq!(r.calls, e.calls, "{}: calls", e.name);
        assert_eq!(r.bytes, e.bytes, "{}: bytes", e.name);
    }
}

/// Assert that `record` names no routine outside `expected` and `also_allowed` (e.g. `MPI_Init`,
/// which the program calls but whose counting the tests leave open): the profiler's own MPI
/// traffic, and MPI calling itself, must not show up as the user's calls.
pub fn assert_no_other_routines(record: &JobRecord, expected: &[Expected], also_allowed: &[&str]) {
    let unexpected: Vec<&str> = record
        .routines
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| !expected.iter().any(|e| e.name == *n) && !also_allowed.contains(n))
        .collect();
    assert!(
        unexpected.is_empty(),
        "record has routines the program never called: {unexpected:?}"
    );
}

/// Routines a program calls whose counting the tests leave open (start-up and shut-down).
pub const LIFECYCLE: &[&str] = &[
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Finalize",
    "MPI_Initialized",
    "MPI_Finalized",
];

/// Whether some line of `text` names `routine` followed directly (after white space) by `calls`,
/// as a report's table row does (`MPI_Send      16   ...`).
pub fn has_count_line(text: &str, routine: &str, calls: u64) -> bool {
    let calls = calls.to_string();
    text.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words.windows(2).any(|w| w[0] == routine && w[1] == calls)
    })
}

/// What `basic.c` and `basic.F90` do on `ranks` ranks (see the sources; both follow the same plan),
/// and what the record counts of it: what each rank sends, and what arrives at its receives
/// (docs/counting.md):
///
/// * ring: each rank sends 3 messages of `100 (r+1)` 4-byte integers to its right neighbour and
///   receives 3 from its left one into a 1000-element buffer (the last with `MPI_STATUS_IGNORE`),
///   plus one `MPI_Send` and one `MPI_Recv` of 50 integers with `MPI_PROC_NULL` (0 bytes);
/// * non-blocking: 2 `MPI_Irecv` posted for 256 doubles each from the right neighbour, which sends
///   `10 (right+1)` doubles to each (the receives count what arrived, at their completion), 2
///   `MPI_Isend` of `10 (r+1)` doubles to the left one, then 2 `MPI_Wait` and 1 `MPI_Waitall`
///   (of 2);
/// * collectives: 3 `MPI_Bcast` of 25 doubles from rank 0, which sends them to every rank (itself
///   included), the others send nothing; 5 `MPI_Allreduce` of 7 integers, each rank's to every
///   rank; 2 `MPI_Barrier`;
/// * 1 `MPI_Comm_rank`, 1 `MPI_Comm_size` and 4 `MPI_Get_count` (checking the statuses).
pub fn basic_expectations(ranks: u32) -> Vec<Expected> {
    let n = ranks as u64;
    let left = |r: u64| (r + n - 1) % n;
    let right = |r: u64| (r + 1) % n;
    vec![
        Expected::per_rank(
            "MPI_Send",
            RankValues::uniform(ranks, 4),
            RankValues::per_rank(ranks, |r| 3 * 100 * (r + 1) * 4),
        ),
        Expected::per_rank(
            "MPI_Recv",
            RankValues::uniform(ranks, 4),
            RankValues::per_rank(ranks, |r| 3 * 100 * (left(r) + 1) * 4),
        ),
        Expected::per_rank(
            "MPI_Irecv",
            RankValues::uniform(ranks, 2),
            RankValues::per_rank(ranks, |r| 2 * 10 * (right(r) + 1) * 8),
        ),
        Expected::per_rank(
            "MPI_Isend",
            RankValues::uniform(ranks, 2),
            RankValues::per_rank(ranks, |r| 2 * 10 * (r + 1) * 8),
        ),
        Expected::uniform("MPI_Wait", ranks, 2, 0),
        Expected::uniform("MPI_Waitall", ranks, 1, 0),
        Expected::per_rank(
            "MPI_Bcast",
            RankValues::uniform(ranks, 3),
            RankValues::per_rank(ranks, |r| if r == 0 { 3 * n * 25 * 8 } else { 0 }),
        ),
        Expected::uniform("MPI_Allreduce", ranks, 5, 5 * n * 7 * 4),
        Expected::uniform("MPI_Barrier", ranks, 2, 0),
        Expected::uniform("MPI_Comm_rank", ranks, 1, 0),
        Expected::uniform("MPI_Comm_size", ranks, 1, 0),
        Expected::uniform("MPI_Get_count", ranks, 4, 0),
    ]
}

/// The stdout line `basic` prints on every rank when all its data checks passed.
pub fn basic_ok_line(rank: u32) -> String {
    format!("basic rank {rank} ok")
}

/// Run `job` bare and then profiled (into `syslogd`): both must succeed and print the same.
/// Returns the profiled run.
pub fn run_compared(job: &Job, syslogd: &Syslogd) -> Outcome {
    let bare = job.bare();
    bare.assert_success();
    let profiled = job.profiled(&syslogd.site_config());
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    profiled
}

/// Each of `ranks` ranks printed its `line(rank)` on stdout.
pub fn assert_every_rank_printed(outcome: &Outcome, ranks: u32, line: impl Fn(u32) -> String) {
    for rank in 0..ranks {
        let line = line(rank);
        assert!(
            outcome.stdout.lines().any(|l| l == line),
            "missing {line:?} in:\n{}",
            outcome.stdout
        );
    }
}

/// Run `basic` (the C program or a Fortran twin) on 4 ranks bare and profiled, and check the
/// whole contract: both exit 0 and print the same (the profiler prints nothing), every rank's data
/// checks passed, and syslog holds exactly one complete record with the exact calls and bytes of
/// [`basic_expectations`] and no other routines, the expected `binding`, 4 ranks, thread level
/// single, no PMPI tool, and plausible times. Returns the record for further checks.
pub fn check_basic_program(
    program: PathBuf,
    binding: mpistat_record::Binding,
    mpi: Mpi,
) -> JobRecord {
    const RANKS: u32 = 4;
    let syslogd = Syslogd::start();
    let profiled = run_compared(&Job::new(&program, RANKS).mpi(mpi), &syslogd);
    assert_every_rank_printed(&profiled, RANKS, basic_ok_line);

    let record = syslogd.single_record();
    assert_eq!(record.ranks, RANKS);
    assert_eq!(record.nodes, 1);
    assert_eq!(record.binding, binding);
    assert_eq!(
        mpistat_record::family::Family::of_library(&record.mpi_library),
        Some(mpi.family()),
        "{}",
        record.mpi_library
    );
    assert_eq!(record.partial, None);
    assert_eq!(record.thread_level, "single");
    assert!(
        !record.user_pmpi_tool,
        "no PMPI tool in this program, but the record says so"
    );
    assert_eq!(
        Path::new(&record.exe),
        program.canonicalize().unwrap(),
        "exe"
    );
    let expected = basic_expectations(RANKS);
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);

    // Times: something was measured, MPI time fits in the wall time, the wall time in the job's.
    assert!(record.mpi_ns.min > 0, "mpi_ns {:?}", record.mpi_ns);
    assert!(record.wall_ns.min > 0, "wall_ns {:?}", record.wall_ns);
    assert!(
        record.mpi_ns.sum <= record.wall_ns.sum,
        "mpi_ns {:?} > wall_ns {:?}",
        record.mpi_ns,
        record.wall_ns
    );
    assert!(
        record.mpi_ns.max <= record.wall_ns.max,
        "mpi_ns {:?} > wall_ns {:?}",
        record.mpi_ns,
        record.wall_ns
    );
    assert!(
        record.wall_ns.max <= profiled.elapsed.as_nanos() as u64,
        "a rank's wall time {:?} exceeds the whole job's {:?}",
        record.wall_ns,
        profiled.elapsed
    );
    assert!(record.start_unix_ms <= record.end_unix_ms);
    let routine_ns: u64 = record.routines.iter().map(|r| r.time_ns.sum).sum();
    assert!(
        routine_ns <= record.mpi_ns.sum,
        "routine times add up to more than the MPI time"
    );

    // Syslog attests who sent the lines: the record's uid must be the sender's.
    let trusted = syslogd.trusted_lines();
    assert!(!trusted.is_empty());
    let uid = format!("uid={} ", record.uid);
    assert!(
        trusted.iter().all(|l| l.starts_with(&uid)),
        "record uid {} but syslog says:\n{}",
        record.uid,
        trusted.join("\n")
    );
    record
}
