//! Trace mode's spill file (profiler/src/trace/spill.rs): a rank keeps its events in a 32 KiB
//! chunk and appends it to a private, unnamed file in the job's trace root when it fills;
//! `MPI_Finalize` reads the file back to write the trace. A long trace comes back whole; where
//! the file cannot be written (a full disk, a read-only trace root) recording stops, the trace
//! is marked truncated, and the job runs on as without mpistat.

use mpistat_e2e::*;
use mpistat_trace::model::EventKind;
use mpistat_trace::tracefile::read_dir;
use std::path::{Path, PathBuf};
use std::process::Command;

const RANKS: u32 = 4;

/// Loop barriers of `delays.c`: each rank records a barrier call (7 words, 56 bytes) an
/// iteration, ~250 kB a rank in all: the 32 KiB chunk is spilled seven times.
const ITERS: u32 = 4500;

/// The trace root of the default `[trace] directory` under `home`.
fn trace_root(home: &Path) -> PathBuf {
    home.join(".mpistat/traces")
}

/// `delays.c` traced on `ranks` ranks of `mpi` with `iters` loop barriers and no waits,
/// its launcher run by `wrap` (the command and its environment); the outcome, the record, and
/// the loop barriers' arrival times each rank wrote (its own account of its run).
fn run_long_traced_job(
    mpi: Mpi,
    home: &Scratch,
    (ranks, iters): (u32, u32),
    wrap: impl FnOnce(Command) -> Command,
) -> (Outcome, mpistat_record::JobRecord, Vec<usize>) {
    let syslogd = Syslogd::start();
    let timings = Scratch::new("spill-timings");
    let job = Job::new(program_for("delays.c", mpi), ranks)
        .mpi(mpi)
        .env("HOME", home.path().display().to_string())
        .env("DELAYS_TIMINGS", timings.path().display().to_string())
        .env("MPISTAT_TRACE", "1")
        .arg("0")
        .arg(iters.to_string())
        .arg("0")
        .arg("0");
    let outcome = run_with_timeout(
        wrap(job.profiled_command(&syslogd.site_config())),
        std::time::Duration::from_secs(300),
    );
    let arrivals = (0..ranks)
        .map(|r| {
            let text = std::fs::read_to_string(timings.path().join(format!("rank-{r}")))
                .unwrap_or_default();
            text.lines()
                .find_map(|l| l.split_once(" arrivals"))
                .map_or(0, |(_, times)| times.split_whitespace().count())
        })
        .collect();
    (outcome, syslogd.single_record(), arrivals)
}

/// Loop barriers' exits on `MPI_COMM_WORLD` in each rank's events, less the pattern's two.
fn loop_barriers(dir: &Path) -> Vec<usize> {
    let (trace, _) = read_dir(dir).expect("the trace reads");
    trace
        .ranks
        .iter()
        .map(|events| {
            let exits = events
                .iter()
                .filter(|e| matches!(e.kind, EventKind::CollectiveExit { comm: 0, .. }));
            exits.count() - 2
        })
        .collect()
}

for_each_mpi! {
/// A trace several chunks long comes back whole: every barrier of every rank, and as many
/// events as the record counts.
fn a_long_trace_is_spilled_and_read_back_whole(mpi) {
    let _serial = serial();
    let home = Scratch::new("spill-long");
    let (outcome, record, arrivals) = run_long_traced_job(mpi, &home, (RANKS, ITERS), |cmd| cmd);
    outcome.assert_success();
    assert_eq!(arrivals, vec![ITERS as usize; RANKS as usize]);
    let info = record.trace.expect("the record says the job was traced");
    assert_eq!(info.stopped, None);
    assert_eq!(info.ranks_written, RANKS);
    assert_eq!(loop_barriers(Path::new(&info.dir)), vec![ITERS as usize; RANKS as usize]);
    let (trace, _) = read_dir(Path::new(&info.dir)).unwrap();
    assert_eq!(trace.event_count() as u64, info.events);
    // The spill file had no name: nothing but the job's directory is left in the root.
    let left: Vec<_> = std::fs::read_dir(trace_root(home.path()))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}
}

/// How the trace root is spoiled for the job (in a mount namespace of its own).
#[derive(Clone, Copy, Debug)]
enum Spoiled {
    /// A 512 KiB file system: full after a few chunks of the ranks.
    Full,
    /// Read-only: no spill file can be made.
    ReadOnly,
}

/// `cmd` run in a private mount namespace where `root` is spoiled as `how` says (`image`: the
/// file system's image for [`Spoiled::Full`]).
fn spoiled(cmd: Command, how: Spoiled, root: &Path, image: &Path) -> Command {
    let mount = match how {
        Spoiled::Full => {
            let made = Command::new("truncate")
                .args(["-s", "512K"])
                .arg(image)
                .status()
                .unwrap()
                .success()
                && Command::new("mkfs.ext4")
                    .args(["-q", "-F"])
                    .arg(image)
                    .status()
                    .unwrap()
                    .success();
            assert!(made, "make the 512 KiB file system");
            r#"mount -o loop "$1" "$2" && chmod 700 "$2""#
        }
        Spoiled::ReadOnly => r#"mount --bind "$2" "$2" && mount -o remount,bind,ro "$2""#,
    };
    let script = format!("{mount} && shift 2 && exec \"$@\"");
    let mut unshare = Command::new("unshare");
    unshare
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .arg(image)
        .arg(root);
    wrapped_in(unshare, &cmd)
}

/// `wrapper` (whose last argument is to be the command it runs) running `cmd`, with `cmd`'s
/// environment and directory.
fn wrapped_in(mut wrapper: Command, cmd: &Command) -> Command {
    wrapper.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapper.env(k, v),
            None => wrapper.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapper.current_dir(dir);
    }
    wrapper
}

/// The job under a spoiled trace root: it runs to its end as it would (every rank's every
/// iteration, exit 0, nothing printed of mpistat), and its record says the recording stopped
/// because a spill failed.
fn a_failed_spill_leaves_the_job_alone(mpi: Mpi, how: Spoiled) {
    let _serial = serial();
    let home = Scratch::new("spill-spoiled");
    let root = trace_root(home.path());
    std::fs::create_dir_all(&root).unwrap();
    let image = home.path().join("disk.img");
    let (outcome, record, arrivals) = run_long_traced_job(mpi, &home, (RANKS, ITERS), |cmd| {
        spoiled(cmd, how, &root, &image)
    });
    outcome.assert_success();
    assert_eq!(arrivals, vec![ITERS as usize; RANKS as usize], "{how:?}");
    assert!(!outcome.stderr.contains("mpistat"), "{outcome:?}");
    assert_eq!(record.ranks, RANKS);
    let info = record.trace.expect("the record says the job was traced");
    let stopped = info.stopped.unwrap_or_default();
    assert!(
        stopped.contains("recording stopped: a rank could not write its events to its spill file"),
        "{how:?}: {stopped}"
    );
    // What the ranks recorded is cut short of the run (or could not be written at all).
    assert!(
        info.events < u64::from(RANKS * ITERS * 2),
        "{how:?}: {} events",
        info.events
    );
}

for_each_mpi! {
fn a_full_disk_stops_the_spill_and_leaves_the_job_alone(mpi) {
    a_failed_spill_leaves_the_job_alone(mpi, Spoiled::Full);
}
}

for_each_mpi! {
fn a_read_only_trace_root_stops_the_spill_and_leaves_the_job_alone(mpi) {
    a_failed_spill_leaves_the_job_alone(mpi, Spoiled::ReadOnly);
}
}

/// A file size limit (`ulimit -f`) the bare job lives with: 8 MiB (both MPIs start from 8 MiB,
/// not at 4).
const FILE_SIZE_LIMIT: u64 = 8 << 20;

/// Ranks and loop barriers enough for more than [`FILE_SIZE_LIMIT`] of events a rank (56 bytes
/// each); two ranks, one a core, since 4 oversubscribed ranks of MPICH take minutes.
const PAST_THE_LIMIT: (u32, u32) = (2, 200_000);

for_each_mpi! {
/// A traced job under a file size limit the bare job lives with runs to its end: no file of
/// ours reaches the limit (the kernel's SIGXFSZ would kill the rank: a traced Open MPI job under
/// `ulimit -f 8192` died of it), the rank records at most half of it and says so.
fn a_file_size_limit_stops_the_recording_and_leaves_the_job_alone(mpi) {
    let _serial = serial();
    let home = Scratch::new("spill-fsize");
    let (outcome, record, arrivals) =
        run_long_traced_job(mpi, &home, PAST_THE_LIMIT, |cmd| {
            let mut prlimit = Command::new("prlimit");
            prlimit.arg(format!("--fsize={FILE_SIZE_LIMIT}")).arg("--");
            wrapped_in(prlimit, &cmd)
        });
    outcome.assert_success();
    let (ranks, iters) = PAST_THE_LIMIT;
    assert_eq!(arrivals, vec![iters as usize; ranks as usize]);
    assert!(!outcome.stderr.contains("mpistat"), "{outcome:?}");
    let info = record.trace.expect("the record says the job was traced");
    let stopped = info.stopped.unwrap_or_default();
    assert!(
        stopped.contains("recording stopped: a rank's trace budget"),
        "{stopped}"
    );
}
}
