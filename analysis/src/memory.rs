//! The analysis's memory, bounded before anything is read: what an analysis of a trace directory
//! needs per process, estimated from its rank files' sizes ([`need`]), the memory a process may
//! use ([`limit`]: the site's setting, else a share of the node's memory or of its cgroup's
//! `memory.max`), and the clear failure when the need is over the limit, saying how many
//! processes would do ([`check`], [`TooBig`]). A trace too big for its processes then fails with
//! numbers, never by the kernel's OOM killer in the middle of the reading.
//!
//! The figures are measured by `bench/parallel_analysis.sh` (resident bytes per event, one
//! process and per process of `mpistat-analyze`), and rounded up.

use crate::blocks::Blocks;
use crate::error::AnalyzeDirError;
use crate::source::TraceSource;
use mpistat_trace::error::TraceFileError;
use mpistat_trace::tracefile::{survey, Survey};
use std::fmt;
use std::path::Path;
use thiserror::Error;

/// Resident bytes an analysis process holds per trace event of its ranks (timelines, call paths,
/// matching, wait states, replay state). Measured on the halo traces of
/// `bench/parallel_analysis.sh`: 106 in one process (all passes), 63 per process of
/// `mpistat-analyze` (up to the forward replay); rounded up to cover all passes in both forms.
pub const BYTES_PER_EVENT: u64 = 128;

/// Resident bytes an analysis process holds per rank of its block, whether the rank has events
/// or not (its timeline, replay and result entries, and the world's tables): 2.9 kB measured
/// (`mpistat analyze` of two ranks' files in worlds of 100,000 and 400,000 ranks peaked at 316
/// and 1,174 MB), rounded up. So a world size a trace only claims is paid for in the estimate.
pub const BYTES_PER_RANK: u64 = 4096;

/// Resident bytes per byte of definitions (every process decodes all of them, and holds the
/// ranks' own while it unifies them): a decoded region or module is its strings and a little.
pub const BYTES_PER_DEFINITION_BYTE: u64 = 4;

/// Trace-file bytes per event the estimate assumes: events are about 4 bytes on disk (varints;
/// an exit takes 2), so `file bytes / 3` over-counts them a little, never by much.
pub const FILE_BYTES_PER_EVENT: u64 = 3;

/// What a process holds besides its events: code, the MPI library, definitions, the file being
/// decoded, exchange buffers.
pub const BASE_BYTES: u64 = 64 << 20;

/// The share of the node's memory (or its cgroup's) the analysis processes on a node may use
/// together when the site sets no limit: three quarters, leaving room for the system, page
/// cache, and a job step still ending.
pub const NODE_SHARE: (u64, u64) = (3, 4);

/// What the analysis of a trace needs, estimated from its files' sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The world size: what the ranks' definitions say, or the highest rank a file names + 1.
    pub ranks: u32,
    /// Estimated events in all rank files.
    pub events: u64,
    /// Analysis processes (each reads one block of ranks).
    pub processes: usize,
    /// Estimated resident bytes of the process with the largest block.
    pub per_process: u64,
}

/// The estimate for `processes` analysis processes of a trace directory as `survey` found it.
pub fn need(survey: &Survey, processes: usize) -> Need {
    let processes = processes.max(1);
    let sizes = &survey.sizes;
    let ranks = sizes
        .iter()
        .map(|&(rank, _)| rank.saturating_add(1))
        .max()
        .unwrap_or(0)
        .max(survey.world);
    let blocks = Blocks { ranks, processes };
    let events = |bytes: u64| bytes / FILE_BYTES_PER_EVENT;
    let block = |process: usize, bytes: u64| {
        let ranks = blocks.range(process).len() as u64;
        events(bytes)
            .saturating_mul(BYTES_PER_EVENT)
            .saturating_add(ranks.saturating_mul(BYTES_PER_RANK))
    };
    // The largest block: of the blocks with files (sizes are by rank, so a block's files are
    // consecutive), and the first (among the largest in ranks) as if it had none.
    let mut largest = block(0, 0);
    let mut files = sizes.iter().peekable();
    while let Some(&(rank, bytes)) = files.next() {
        let owner = blocks.owner(rank);
        let mut sum = bytes;
        while let Some(&&(next, more)) = files.peek() {
            if blocks.owner(next) != owner {
                break;
            }
            sum = sum.saturating_add(more);
            files.next();
        }
        largest = largest.max(block(owner, sum));
    }
    let definitions = survey
        .definition_bytes
        .saturating_mul(BYTES_PER_DEFINITION_BYTE);
    Need {
        ranks,
        events: events(sizes.iter().map(|&(_, bytes)| bytes).sum()),
        processes,
        per_process: BASE_BYTES
            .saturating_add(definitions)
            .saturating_add(largest),
    }
}

/// The fewest processes, at least `from`, whose largest block fits in `limit`; `None` when even
/// one rank per process does not.
pub fn processes_needed(survey: &Survey, from: usize, limit: u64) -> Option<usize> {
    let fits = |n: usize| need(survey, n).per_process <= limit;
    let most = (need(survey, 1).ranks as usize).max(from);
    if !fits(most) {
        return None;
    }
    // The largest block shrinks with more processes, nearly monotonically (block edges move):
    // bisect, then step up (a little) to a count that fits.
    let (mut low, mut high) = (from, most);
    while low < high {
        let middle = low + (high - low) / 2;
        if fits(middle) {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    (low..=most).take(1024).find(|&n| fits(n)).or(Some(most))
}

/// Why an analysis does not start: its trace is too big for the memory of its processes, or
/// the directory cannot be listed.
#[derive(Debug, Error)]
pub enum MemoryError {
    #[error(transparent)]
    File(#[from] TraceFileError),
    #[error("{0}")]
    TooBig(TooBig),
    /// A trace of another format whose sizes cannot be read.
    #[error(transparent)]
    Source(AnalyzeDirError),
}

/// A trace too big for the memory its analysis processes have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooBig {
    /// The trace directory.
    pub dir: String,
    pub need: Need,
    /// The memory one process may use.
    pub limit: u64,
    /// The fewest processes that would do, if any.
    pub enough: Option<usize>,
}

/// Bytes for people: `512 MiB`, `3.2 GiB`.
pub fn human(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / GIB)
    } else {
        format!("{} MiB", bytes.div_ceil(1 << 20))
    }
}

impl fmt::Display for TooBig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Need {
            ranks,
            events,
            processes,
            per_process,
        } = self.need;
        write!(
            f,
            "{}: the analysis needs ~{} a process for these {ranks} ranks (~{:.1} M events) with \
             {} process{}, limit {}: ",
            self.dir,
            human(per_process),
            events as f64 / 1e6,
            processes,
            if processes == 1 { "" } else { "es" },
            human(self.limit),
        )?;
        match self.enough {
            Some(n) => write!(
                f,
                "run mpistat-analyze with at least {n} processes (mpirun -n {n} or srun -n {n} \
                 mpistat-analyze DIR), or give each more memory ([escalation] \
                 analysis_memory_bytes, --memory-limit)"
            ),
            None => write!(
                f,
                "even one rank per process is more than that; give each process more memory \
                 ([escalation] analysis_memory_bytes, --memory-limit)"
            ),
        }
    }
}

/// Checks that `processes` processes with `limit` bytes each can analyse the trace in `dir`
/// (from its files' sizes, nothing is read). Every process of a distributed analysis comes to
/// the same verdict from the same directory, without talking.
pub fn check(dir: &Path, processes: usize, limit: u64) -> Result<Need, MemoryError> {
    check_survey(dir, &survey(dir)?, processes, limit)
}

/// [`check`] for a trace of any format (see [`crate::source`]): from its [`Survey`].
pub fn check_source(
    source: &dyn TraceSource,
    processes: usize,
    limit: u64,
) -> Result<Need, MemoryError> {
    let survey = source.survey().map_err(MemoryError::Source)?;
    check_survey(source.path(), &survey, processes, limit)
}

fn check_survey(
    path: &Path,
    survey: &Survey,
    processes: usize,
    limit: u64,
) -> Result<Need, MemoryError> {
    let estimate = need(survey, processes);
    if estimate.per_process <= limit {
        return Ok(estimate);
    }
    Err(MemoryError::TooBig(TooBig {
        dir: path.display().to_string(),
        need: estimate,
        limit,
        enough: processes_needed(survey, processes + 1, limit),
    }))
}

/// The memory one analysis process may use: `setting` bytes when the site sets it (non-zero),
/// else [`NODE_SHARE`] of the node's memory, or of its cgroup's `memory.max` when that is less
/// (a Slurm job's or a container's share), divided among the `sharing` analysis processes on
/// the node.
pub fn limit(setting: u64, sharing: usize) -> u64 {
    if setting > 0 {
        return setting;
    }
    let node = [node_memory(), cgroup_memory_max()]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(u64::MAX);
    let (part, whole) = NODE_SHARE;
    (node / whole).saturating_mul(part) / sharing.max(1) as u64
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn node_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The smallest `memory.max` of this process's cgroup (v2) and its ancestors; `None` when none
/// is set (`max`) or there is no cgroup v2.
fn cgroup_memory_max() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mut dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let mut smallest: Option<u64> = None;
    loop {
        if let Ok(value) = std::fs::read_to_string(dir.join("memory.max")) {
            if let Ok(bytes) = value.trim().parse::<u64>() {
                smallest = Some(smallest.map_or(bytes, |s| s.min(bytes)));
            }
        }
        if dir == Path::new("/sys/fs/cgroup") || !dir.pop() {
            return smallest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpistat_trace::model::Rank;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    /// A survey of rank files of these sizes (rank, bytes) without definitions.
    fn files(sizes: Vec<(Rank, u64)>) -> Survey {
        Survey {
            sizes,
            ..Survey::default()
        }
    }

    #[test]
    fn the_need_shrinks_with_the_processes() {
        // 64 ranks of 30 MiB files: ~10 M events each.
        let survey = files((0..64).map(|r| (r, 30 * MIB)).collect());
        let one = need(&survey, 1);
        assert_eq!((one.ranks, one.events), (64, 64 * 10 * MIB));
        assert_eq!(
            one.per_process,
            BASE_BYTES + 64 * (10 * MIB * BYTES_PER_EVENT + BYTES_PER_RANK)
        );
        let four = need(&survey, 4);
        assert_eq!(
            four.per_process,
            BASE_BYTES + 16 * (10 * MIB * BYTES_PER_EVENT + BYTES_PER_RANK)
        );
        // 1280 MiB a rank: a limit of two ranks a process means 32 processes.
        let limit = BASE_BYTES + 2 * (10 * MIB * BYTES_PER_EVENT + BYTES_PER_RANK);
        assert_eq!(processes_needed(&survey, 2, limit), Some(32));
        assert_eq!(processes_needed(&survey, 2, BASE_BYTES), None);
    }

    #[test]
    fn a_world_the_definitions_claim_counts_without_a_file_and_definitions_count_too() {
        let claimed = Survey {
            sizes: vec![(0, 3000), (1, 3000)],
            world: 0xFFFF_FFF0,
            definition_bytes: 100,
        };
        let one = need(&claimed, 1);
        assert_eq!(one.ranks, 0xFFFF_FFF0);
        assert_eq!(
            one.per_process,
            BASE_BYTES
                + 100 * BYTES_PER_DEFINITION_BYTE
                + 2000 * BYTES_PER_EVENT
                + 0xFFFF_FFF0 * BYTES_PER_RANK
        );
        // Files named for far-apart ranks: each block is costed by its own files and ranks.
        let far = files(vec![(0, 3 * MIB), (u32::MAX - 1, 3 * MIB)]);
        let two = need(&far, 2);
        assert_eq!(two.ranks, u32::MAX);
        assert_eq!(
            two.per_process,
            BASE_BYTES + MIB * BYTES_PER_EVENT + u64::from(u32::MAX).div_ceil(2) * BYTES_PER_RANK
        );
        // Found quickly, without a vector of so many processes: the fewest that fit.
        let enough = processes_needed(&claimed, 2, 8 << 30).unwrap();
        assert!(need(&claimed, enough).per_process <= 8 << 30);
        assert!(need(&claimed, enough - 1).per_process > 8 << 30);
        assert!(processes_needed(&far, 2, 8 << 30).is_some());
    }

    #[test]
    fn too_big_says_the_numbers_and_how_many_processes_would_do() {
        let message = TooBig {
            dir: "/home/alice/trace".into(),
            need: Need {
                ranks: 1024,
                events: 2_000_000_000,
                processes: 1,
                per_process: 240 << 30,
            },
            limit: 6 << 30,
            enough: Some(41),
        }
        .to_string();
        assert!(
            message.starts_with(
                "/home/alice/trace: the analysis needs ~240.0 GiB a process for these 1024 \
                 ranks (~2000.0 M events) with 1 process, limit 6.0 GiB: run mpistat-analyze with at least 41 \
                 processes"
            ),
            "{message}"
        );
    }

    #[test]
    fn the_default_limit_is_a_share_of_the_node() {
        assert_eq!(limit(5 << 30, 4), 5 << 30, "the site's setting as it is");
        let node = node_memory().expect("/proc/meminfo");
        let alone = limit(0, 1);
        assert!(alone > 0 && alone <= node / 4 * 3, "{alone} of {node}");
        assert_eq!(limit(0, 4), alone / 4);
    }

    proptest! {
        #[test]
        fn the_processes_said_to_do_fit(
            sizes in proptest::collection::vec(0..64 * MIB, 1..200),
            limit in 0..4096 * MIB,
            from in 1usize..8,
            world in 0u32..400,
        ) {
            let survey = Survey {
                world,
                ..files(sizes.into_iter().enumerate().map(|(r, b)| (r as Rank, b)).collect())
            };
            let most = need(&survey, 1).ranks as usize;
            match processes_needed(&survey, from, limit) {
                Some(n) => {
                    prop_assert!(n >= from);
                    prop_assert!(need(&survey, n).per_process <= limit);
                }
                None => prop_assert!(need(&survey, most.max(from)).per_process > limit),
            }
        }
    }
}
