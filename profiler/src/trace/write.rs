//! The end of a trace, at `MPI_Finalize`: the clocks measured again, the ranks' events cut at a
//! superstep every rank recorded, this rank's files written into the job's trace directory
//! (private to its user), and rank 0's facts for the job's record.

use super::clocks::measure_offset;
use super::paths::expand_home;
use super::sites::site_names;
use super::spill::Spill;
use super::state::{with_recorder, State};
use crate::clock::monotonic_ns;
use crate::mpi::{self, OwnComm};
use mpistat_record::model::TraceInfo;
use mpistat_trace::model::{Event, LocalDefinitions};
use mpistat_trace::tracefile::{encode_local, local_file_name, rank_file_name, RankWriter};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What rank 0 puts into the job's record.
static INFO: Mutex<Option<TraceInfo>> = Mutex::new(None);

/// The trace facts for the record (rank 0, after [`finish`]).
pub fn take_info() -> Option<TraceInfo> {
    INFO.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// Before the real `MPI_Finalize` (collective over `comm`, a duplicate of the world): stop
/// tracing, measure the clocks again, cut the ranks' events at a common superstep if any rank
/// stopped early, write this rank's files, and (rank 0) keep the facts for the record.
pub fn finish(comm: &OwnComm, job_start_unix_ms: u64, job_pid: u32) {
    if crate::gates::set(crate::gates::TRACE, false) {
        finish_traced(comm, job_start_unix_ms, job_pid);
    }
}

/// [`finish`] of a traced rank. Out of line, and so out of `.text.finalize`'s common part
/// (`profiler/finalize.ld` names `finish` only): every rank maps that part in `MPI_Finalize`,
/// and with these 10 kB in it rank 0's reductions and shared record code no longer fitted in
/// its last chunk (docs/footprint.md, "finpieces"). A traced rank maps the writer's code anyway.
#[inline(never)]
fn finish_traced(comm: &OwnComm, job_start_unix_ms: u64, job_pid: u32) {
    // MPI_Finalize comes from the thread that called MPI_Init; on any other, no trace.
    let Some(mut recorder) = with_recorder(Option::take).flatten() else {
        return;
    };
    let write_start = monotonic_ns();
    if let Some(sample) = measure_offset(&recorder, comm.0) {
        recorder.clock.push(sample);
    }
    // Rank 0's start and pid make the job id (as in its record); every rank needs the directory.
    let is_root = recorder.rank == 0;
    let id_parts = if is_root {
        [job_start_unix_ms, u64::from(job_pid)]
    } else {
        [0, 0]
    };
    let Ok(id_parts) = mpi::allreduce(&id_parts, mpi::Op::Sum, comm) else {
        return;
    };
    let job_id = crate::facts::job_id(id_parts[0], id_parts[1] as u32);
    let dir = trace_dir(&recorder.config.directory, &job_id);
    // Where every rank recorded completely: the cut when any rank stopped for its budget or
    // a failed spill.
    let recorded = recorder.supersteps_recorded as u64;
    let stopped = [recorder.stopped_by_budget, recorder.stopped_by_spill].map(u64::from);
    let agreed = mpi::allreduce(
        &[u64::MAX - recorded, stopped[0], stopped[1]],
        mpi::Op::Max,
        comm,
    )
    .ok();
    let mut note = recorder.stop_note.clone();
    if let Some([max_not_recorded, by_budget, by_spill]) =
        agreed.as_deref().map(|a| [a[0], a[1], a[2]])
    {
        if by_budget == 1 || by_spill == 1 {
            let cut = u64::MAX - max_not_recorded;
            let keep = match cut {
                0 => 0,
                k => {
                    let file = match &recorder.spill {
                        Spill::File(events) => Some(events),
                        _ => None,
                    };
                    // A cut that cannot be read back keeps nothing.
                    recorder
                        .events
                        .position_after_superstep(k as usize, file)
                        .unwrap_or(0)
                }
            };
            recorder.events.truncate(keep);
            let why = if by_spill == 1 {
                "a rank could not write its events to its spill file in the trace directory \
                 (not writable, or the disk full)"
                    .to_string()
            } else {
                format!(
                    "a rank's trace budget ({} bytes) was reached",
                    recorder.config.budget_bytes
                )
            };
            note = Some(format!(
                "recording stopped: {why}; the trace covers supersteps {} to {} of the job (cut \
                 at the last superstep every rank recorded)",
                recorder.config.skip_supersteps + 1,
                recorder.config.skip_supersteps + cut
            ));
        }
    }
    if recorder.state == State::Skipping {
        note = Some(format!(
            "nothing recorded: the job had only {} supersteps, the window skips {}",
            recorder.supersteps, recorder.config.skip_supersteps
        ));
    }
    let (regions, modules) = site_names(&recorder.region_keys);
    let local = LocalDefinitions {
        rank: recorder.rank,
        world_size: recorder.world_size,
        ticks_per_second: 1_000_000_000,
        regions,
        communicators: std::mem::take(&mut recorder.communicators),
        partition: Some(mpi::appnum()),
        cartesian: recorder.cartesian.clone(),
        clock: recorder.clock.clone(),
        stopped: note.clone(),
        modules,
    };
    let (time, recording_overhead_ns) = recorder.ticks_to_ns();
    let spill = match &recorder.spill {
        Spill::File(events) => Some(events),
        _ => None,
    };
    let replay = |sink: &mut dyn FnMut(Event)| recorder.events.replay(spill, &time, sink);
    let (events, written) = write_files(&dir, &local, replay);
    let overhead = recording_overhead_ns + monotonic_ns().saturating_sub(write_start);
    let totals = [events, u64::from(written), overhead];
    if let Ok(Some(sum)) = mpi::reduce_to_root(&totals, mpi::Op::Sum, comm) {
        *INFO.lock().unwrap_or_else(|e| e.into_inner()) = Some(TraceInfo {
            dir: dir.display().to_string(),
            reason: recorder.reason.to_string(),
            events: sum[0],
            ranks_written: sum[1] as u32,
            stopped: note,
            overhead_ns: sum[2],
        });
    }
}

/// The job's trace directory from the site's pattern.
fn trace_dir(pattern: &str, job_id: &str) -> PathBuf {
    PathBuf::from(expand_home(pattern).replace("{job_id}", &job_id.replace('/', "_")))
}

/// Creates `dir` and its missing parents with mode 0700, and makes `dir` itself 0700.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// A new file readable by its owner only.
fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// Writes this rank's files into `dir`, its events as `replay` gives them (read back in
/// pieces: never all of them in memory at once); the events given, and whether every file was
/// written.
fn write_files(
    dir: &Path,
    local: &LocalDefinitions,
    replay: impl FnOnce(&mut dyn FnMut(Event)) -> std::io::Result<()>,
) -> (u64, bool) {
    use std::io::Write;
    let rank = local.rank;
    let mut writer = create_private_dir(dir)
        .and_then(|()| create_private_file(&dir.join(rank_file_name(rank))))
        .map(|file| RankWriter::new(std::io::BufWriter::new(file), rank));
    let mut events = 0;
    // Every event is counted (for the record), written while the writer has not failed.
    let replayed = replay(&mut |event| {
        events += 1;
        if let Ok(w) = &mut writer {
            if let Err(e) = w.event(&event) {
                writer = Err(e);
            }
        }
    });
    let written = replayed.and(writer).and_then(|w| w.finish()).and_then(|_| {
        create_private_file(&dir.join(local_file_name(rank)))?.write_all(&encode_local(local))
    });
    (events, written.is_ok())
}
