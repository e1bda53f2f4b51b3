//! The trace reader against damaged and hostile trace directories (issue 34 §4): valid traces
//! written by the real writers (`write_dir`'s `definitions.mpt`, or per-rank local definitions
//! as the profiler writes them), then mutated (bytes flipped, files cut or replaced by garbage, a
//! header's world size, rank or a count inflated, a rank file renamed to a far rank, a file
//! swapped for a FIFO or a symlink), and read as `mpistat analyze` reads them: the memory
//! estimate checked against a limit first, then every pass. No input may panic, hang, or make
//! the reading allocate more than the limit its estimate passed.
//!
//! The cases run in a child process under an address-space limit (`RLIMIT_AS`, 4 GiB): a reader
//! that believed a claimed size aborts there (failing this test) instead of taking the
//! machine's memory. A counting allocator gives each case's peak, printed with the outcomes
//! (`--nocapture`). `PROPTEST_CASES` sets the number of cases (256 by default: seconds).

use mpistat_analysis::analysis::{run_passes_on_dir, summarise};
use mpistat_analysis::builder::{ExecutionBuilder, WORLD};
use mpistat_analysis::memory;
use mpistat_analysis::memory::MemoryError;
use mpistat_trace::model::{ClockSample, LocalDefinitions, Trace};
use mpistat_trace::tracefile::{
    encode_local, encode_rank, local_file_name, rank_file_name, write_dir,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Bytes allocated now, and the most since [`reset_peak`].
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call is System's; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        CURRENT.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, size) };
        if !q.is_null() {
            CURRENT.fetch_sub(layout.size(), Relaxed);
            let now = CURRENT.fetch_add(size, Relaxed) + size;
            PEAK.fetch_max(now, Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Starts a measurement: the bytes allocated now.
fn reset_peak() -> usize {
    let now = CURRENT.load(Relaxed);
    PEAK.store(now, Relaxed);
    now
}

/// The memory an analysis may use in these cases: `mpistat analyze --memory-limit`.
const LIMIT: u64 = 256 << 20;

/// A small random execution of 2-4 ranks: computation, messages, collectives.
fn execution() -> impl Strategy<Value = Trace> {
    let steps = prop::collection::vec((0..4u32, 0..4u32, 0..3u8, 1..50u64), 1..30);
    (2..5u32, steps).prop_map(|(ranks, steps)| {
        let mut b = ExecutionBuilder::new(ranks);
        let work = b.region("work", "w.c:1");
        let (send, recv) = (b.region("MPI_Send", "w.c:2"), b.region("MPI_Recv", "w.c:3"));
        let allreduce = b.region("MPI_Allreduce", "w.c:4");
        for (from, to, kind, t) in steps {
            let (from, to) = (from % ranks, to % ranks);
            match kind {
                0 => b.compute(from, work, t),
                1 if from != to => b.message((from, send), (to, recv), 3, t, t % 2 == 0, 1, 1),
                _ => b.collective(WORLD, allreduce, None, t),
            }
        }
        b.finish()
    })
}

/// Writes `trace` into `dir` as the profiler does: each rank's local definitions and events.
fn write_as_profiler(dir: &Path, trace: &Trace) {
    std::fs::create_dir_all(dir).unwrap();
    let defs = &trace.definitions;
    for (rank, events) in trace.ranks.iter().enumerate() {
        let rank = rank as u32;
        let local = LocalDefinitions {
            rank,
            world_size: trace.ranks.len() as u32,
            ticks_per_second: defs.ticks_per_second,
            regions: defs.regions.clone(),
            communicators: defs.communicators.clone(),
            clock: vec![ClockSample {
                local: 0,
                offset: 0,
            }],
            ..LocalDefinitions::default()
        };
        std::fs::write(dir.join(local_file_name(rank)), encode_local(&local)).unwrap();
        std::fs::write(
            dir.join(rank_file_name(rank)),
            encode_rank(rank, events).unwrap(),
        )
        .unwrap();
    }
}

/// One change to a trace directory; `file` picks one of its files (by index, wrapping).
#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        file: usize,
        at: usize,
        bits: u8,
    },
    Cut {
        file: usize,
        at: usize,
    },
    /// The `index`-th varint after the 10-byte header (a local file's rank, world size, ticks,
    /// region count...; a rank file's rank, then events) becomes `value`.
    Varint {
        file: usize,
        index: usize,
        value: u64,
    },
    /// Every local definitions file says the world has `value` ranks (the edit that agrees
    /// with itself).
    World {
        value: u64,
    },
    Garbage {
        file: usize,
        bytes: Vec<u8>,
    },
    /// A rank file takes the name of rank `rank`.
    Rename {
        file: usize,
        rank: u32,
    },
    Fifo {
        file: usize,
    },
    Symlink {
        file: usize,
        to: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let value = prop_oneof![
        0..300u64,
        Just(0xFFFF_FFF0),
        Just(i32::MAX as u64),
        Just(u32::MAX as u64),
        Just(1 << 40),
        any::<u64>(),
    ];
    let file = any::<usize>();
    prop_oneof![
        3 => (file, any::<usize>(), 1..=255u8).prop_map(|(file, at, bits)| Mutation::Flip { file, at, bits }),
        2 => (file, any::<usize>()).prop_map(|(file, at)| Mutation::Cut { file, at }),
        4 => (file, prop_oneof![3 => 0..3usize, 1 => 3..8usize], value.clone()).prop_map(|(file, index, value)| Mutation::Varint { file, index, value }),
        2 => value.prop_map(|value| Mutation::World { value }),
        1 => (file, prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(file, bytes)| Mutation::Garbage { file, bytes }),
        1 => (file, prop_oneof![0..8u32, Just(0xFFFF_FFF0), Just(i32::MAX as u32)]).prop_map(|(file, rank)| Mutation::Rename { file, rank }),
        1 => file.prop_map(|file| Mutation::Fifo { file }),
        1 => (file, any::<usize>()).prop_map(|(file, to)| Mutation::Symlink { file, to }),
    ]
}

/// `value` as an unsigned LEB128 varint.
fn varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
    out
}

/// `bytes` with the `index`-th varint after the header replaced (unchanged if there is none).
fn with_varint(bytes: &[u8], index: usize, value: u64) -> Vec<u8> {
    let mut at = 10;
    for _ in 0..index {
        while bytes.get(at).is_some_and(|b| b & 0x80 != 0) {
            at += 1;
        }
        at += 1;
    }
    let mut end = at;
    while bytes.get(end).is_some_and(|b| b & 0x80 != 0) {
        end += 1;
    }
    if end >= bytes.len() {
        return bytes.to_vec();
    }
    [&bytes[..at], &varint(value), &bytes[end + 1..]].concat()
}

fn apply(dir: &Path, mutation: &Mutation) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return;
    }
    let pick = |i: usize| files[i % files.len()].clone();
    let edit = |file: usize, f: &dyn Fn(Vec<u8>) -> Vec<u8>| {
        let path = pick(file);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, f(bytes)).unwrap();
    };
    match mutation {
        Mutation::Flip { file, at, bits } => edit(*file, &|mut b| {
            if !b.is_empty() {
                let i = at % b.len();
                b[i] ^= bits;
            }
            b
        }),
        Mutation::Cut { file, at } => edit(*file, &|mut b| {
            b.truncate(at % (b.len() + 1));
            b
        }),
        Mutation::Varint { file, index, value } => {
            edit(*file, &|b| with_varint(&b, *index, *value))
        }
        Mutation::World { value } => {
            for (i, path) in files.iter().enumerate() {
                if path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("local-")
                {
                    edit(i, &|b| with_varint(&b, 1, *value));
                }
            }
        }
        Mutation::Garbage { file, bytes } => edit(*file, &|b| {
            // Keep the magic and version half the time, so the decoder gets past them.
            let keep = if bytes.len() % 2 == 0 {
                b.len().min(10)
            } else {
                0
            };
            [&b[..keep], bytes].concat()
        }),
        Mutation::Rename { file, rank } => {
            let path = pick(*file);
            std::fs::rename(&path, dir.join(rank_file_name(*rank))).unwrap();
        }
        Mutation::Fifo { file } => {
            let path = pick(*file);
            std::fs::remove_file(&path).unwrap();
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
        Mutation::Symlink { file, to } => {
            let (path, target) = (pick(*file), pick(*to));
            if path != target {
                std::fs::remove_file(&path).unwrap();
                std::os::unix::fs::symlink(&target, &path).unwrap();
            }
        }
    }
}

/// How the reading of one case ended.
#[derive(Debug, Default)]
struct Tally {
    cases: usize,
    analysed: usize,
    over_the_estimate: usize,
    refused: usize,
    peak: usize,
    slowest: Duration,
}

/// Reads `dir` as `mpistat analyze` does; panics if the reading did, or allocated more than
/// the limit the estimate passed.
fn read_as_analyze(dir: &Path, tally: &mut Tally) {
    let base = reset_peak();
    let start = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        memory::check(dir, 1, LIMIT)
            .map(|_| run_passes_on_dir(dir, &mut |_| {}).map(|(passes, _)| summarise(&passes)))
    }));
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    let Ok(outcome) = outcome else {
        panic!("the reading of {} panicked", dir.display());
    };
    assert!(
        peak as u64 <= LIMIT,
        "{}: {peak} bytes allocated, the limit is {LIMIT}",
        dir.display()
    );
    tally.cases += 1;
    tally.peak = tally.peak.max(peak);
    tally.slowest = tally.slowest.max(start.elapsed());
    match outcome {
        Ok(Ok(_)) => tally.analysed += 1,
        Err(MemoryError::TooBig(_)) => tally.over_the_estimate += 1,
        Ok(Err(_)) | Err(MemoryError::File(_) | MemoryError::Source(_)) => tally.refused += 1,
    }
}

fn fuzz() {
    let root = std::env::temp_dir().join(format!("mpistat-hostile-traces-{}", std::process::id()));
    let tally = std::cell::RefCell::new(Tally::default());
    // A failing case is printed (and shrunk), not stored: the cases run in a child process.
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    });
    let cases = (
        execution(),
        any::<bool>(),
        prop::collection::vec(mutation(), 0..4),
    );
    let result = runner.run(&cases, |(trace, as_profiler, mutations)| {
        let dir = root.join(tally.borrow().cases.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        if as_profiler {
            write_as_profiler(&dir, &trace);
        } else {
            write_dir(&dir, &trace).unwrap();
        }
        for m in &mutations {
            apply(&dir, m);
        }
        read_as_analyze(&dir, &mut tally.borrow_mut());
        std::fs::remove_dir_all(&dir).unwrap();
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&root);
    let tally = tally.into_inner();
    println!(
        "{} trace directories: {} analysed, {} refused with an error, {} over the memory \
         estimate's limit; largest allocation peak {:.1} KiB (limit {} MiB), slowest {:.1} ms",
        tally.cases,
        tally.analysed,
        tally.refused,
        tally.over_the_estimate,
        tally.peak as f64 / 1024.0,
        LIMIT >> 20,
        tally.slowest.as_secs_f64() * 1e3
    );
    result.unwrap();
}

/// Set in the child that runs the cases.
const CHILD: &str = "MPISTAT_HOSTILE_TRACES_CHILD";
/// The child's address space.
const ADDRESS_SPACE: u64 = 4 << 30;

#[test]
fn mutated_trace_directories_are_read_within_their_memory_estimate() {
    if std::env::var_os(CHILD).is_some() {
        return fuzz();
    }
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "mutated_trace_directories_are_read_within_their_memory_estimate",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, "1");
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // A reader that hangs (on a FIFO) fails the test rather than the CI run.
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the cases did not finish within 600 s: a reader hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "the cases failed ({status}; a signal: an allocation beyond the {} GiB address space \
         aborted)",
        ADDRESS_SPACE >> 30
    );
}
