//! Performance counters split into the application part and the MPI part (Rabenseifner, "Automatic
//! MPI Counter Profiling", Sec. VIII).
//!
//! Every MPI-calling thread opens one perf_event group (crate `perf-event2`: maintained, reads a
//! whole group with one read(2), and exposes the mmap page's user-space `rdpmc` read that the
//! original `perf-event` crate lacks). Events the machine lacks (no PMU: ENOENT) are left out and
//! recorded as "unavailable: <reason>"; nothing else changes, and a failure to open anything just
//! turns counting off.
//!
//! Modes: when every opened event is a hardware event that the kernel lets us read in user space
//! (`rdpmc` through the counter's mmap page; checked by reading each once at `MPI_Init`), the
//! counters are read that way around every outermost MPI call (tens of ns). Otherwise the site's
//! `counters_fallback` decides: `per-call` reads the group with one read(2) around every call
//! (the split; about 0.3-0.6 us a call), `totals` reads it only at `MPI_Init` and
//! `MPI_Finalize` (the application part then holds everything). Software events have no user
//! read, so a set with any of them falls back.
//!
//! The parts, one job each: [`perf`] (the events by name and the perf_event group that reads them),
//! [`split`] (the arithmetic of the split, for both counter interfaces of the paper), this module
//! (each thread's counters at run time: the mode's choice and the reads around every call), and
//! [`totals`] (the rank's and the job's totals for the record).

mod perf;
mod split;
mod totals;

use crate::generated::routines::N_ROUTINES;
use mpistat_site::CountersFallback;
use perf::{event_kind, EventKind, PerfGroup};
use split::{Backend, Split};
use std::cell::Cell;
use std::sync::Mutex;
pub use totals::{local, reduce, JobCounters, RankCounters};

/// One thread's counters.
pub struct ThreadCounters {
    backend: Box<dyn Backend>,
    split: Split,
    scratch: Vec<u64>,
}

impl ThreadCounters {
    pub fn new(mut backend: Box<dyn Backend>, n: usize) -> ThreadCounters {
        let mut split = Split::new(backend.semantics(), n);
        let mut scratch = vec![0; n];
        if backend.read(&mut scratch) {
            split.begin(&scratch);
        }
        ThreadCounters {
            backend,
            split,
            scratch,
        }
    }
}

/// What was chosen at `MPI_Init`.
pub struct Setup {
    pub names: Vec<String>,
    pub kinds: Vec<EventKind>,
    /// Per event: why it is not counted.
    pub unavailable: Vec<Option<String>>,
    pub mode: &'static str,
}

static SETUP: Mutex<Option<Setup>> = Mutex::new(None);
static THREADS: Mutex<Vec<&'static Mutex<ThreadCounters>>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: Cell<Option<&'static Mutex<ThreadCounters>>> = const { Cell::new(None) };
    /// This thread tried to open its group and failed: do not try again on every call.
    static FAILED: Cell<bool> = const { Cell::new(false) };
}

/// The events to count: `MPISTAT_COUNTERS` (names the site allows) or the site's default set.
pub fn choose(
    default: &[String],
    allowed: &[String],
    env: Option<&str>,
) -> (Vec<String>, Vec<Option<String>>) {
    let mut names = Vec::new();
    let mut unavailable = Vec::new();
    let wanted: Vec<String> = match env {
        Some(v) => v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        None => default.to_vec(),
    };
    for name in wanted {
        if names.contains(&name) {
            continue;
        }
        let problem = if env.is_some() && !allowed.contains(&name) {
            Some("not allowed by the site".to_string())
        } else if event_kind(&name).is_none() {
            Some("unknown event name".to_string())
        } else {
            None
        };
        names.push(name);
        unavailable.push(problem);
    }
    (names, unavailable)
}

/// At `MPI_Init` (calling thread): open the calling thread's group.
pub fn start(names: Vec<String>, mut unavailable: Vec<Option<String>>, fallback: CountersFallback) {
    if names.is_empty() {
        return;
    }
    // Events already ruled out (not allowed, unknown, not opened for the whole node) are not
    // opened at all: an opened event costs every context switch, read or not.
    let kinds: Vec<EventKind> = names
        .iter()
        .zip(&unavailable)
        .map(|(n, u)| match u {
            Some(_) => EventKind::Unknown("not opened"),
            None => event_kind(n).unwrap_or(EventKind::Unknown("unknown event name")),
        })
        .collect();
    let opened = open_for_thread(&kinds);
    let user_read = matches!(opened, Ok((_, true)));
    let mode = if user_read {
        "per-call user-space read (rdpmc)"
    } else if fallback == CountersFallback::PerCall {
        "per-call read"
    } else {
        "totals (read at MPI_Init and MPI_Finalize)"
    };
    let any = match &opened {
        Ok((problems, _)) => {
            for (u, p) in unavailable.iter_mut().zip(problems) {
                if u.is_none() {
                    u.clone_from(p);
                }
            }
            unavailable.iter().any(Option::is_none)
        }
        Err(why) => {
            for u in unavailable.iter_mut().filter(|u| u.is_none()) {
                *u = Some(why.clone());
            }
            false
        }
    };
    *SETUP.lock().unwrap_or_else(|e| e.into_inner()) = Some(Setup {
        names,
        kinds,
        unavailable,
        mode,
    });
    crate::gates::set(
        crate::gates::PER_CALL,
        any && (user_read || fallback == CountersFallback::PerCall),
    );
}

/// Open the calling thread's group: the reasons of events that failed, and whether the group
/// can be read in user space.
fn open_for_thread(kinds: &[EventKind]) -> Result<(Vec<Option<String>>, bool), String> {
    let (group, problems) = PerfGroup::open(kinds)?;
    let user_read = group.user_read;
    let tc: &'static Mutex<ThreadCounters> = Box::leak(Box::new(Mutex::new(ThreadCounters::new(
        Box::new(group),
        kinds.len(),
    ))));
    THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(tc);
    MINE.with(|m| m.set(Some(tc)));
    Ok((problems, user_read))
}

/// This thread's counters, opened on its first call.
fn mine() -> Option<&'static Mutex<ThreadCounters>> {
    if let Some(tc) = MINE.with(Cell::get) {
        return Some(tc);
    }
    if FAILED.with(Cell::get) {
        return None;
    }
    let kinds = SETUP
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|s| s.kinds.clone())?;
    if open_for_thread(&kinds).is_err() {
        FAILED.with(|f| f.set(true));
    }
    MINE.with(Cell::get)
}

/// Before an outermost MPI call (per-call mode only).
#[inline(never)]
pub fn before_call() {
    crate::guard::quietly(|| {
        let Some(tc) = mine() else { return };
        let mut tc = tc.lock().unwrap_or_else(|e| e.into_inner());
        let tc = &mut *tc;
        if tc.backend.read(&mut tc.scratch) {
            tc.split.before_call(&tc.scratch);
        }
    });
}

/// After an outermost MPI call of routine `id` (per-call mode only).
#[inline(never)]
pub fn after_call(id: usize) {
    crate::guard::contained(|| {
        let Some(tc) = MINE.with(Cell::get) else {
            return;
        };
        let mut tc = tc.lock().unwrap_or_else(|e| e.into_inner());
        let tc = &mut *tc;
        if tc.backend.read(&mut tc.scratch) {
            tc.split.after_call(id, &tc.scratch);
        }
    });
}

/// Close counting: read every thread's group one last time and sum them.
pub fn finish() -> Option<RankCounters> {
    crate::gates::set(crate::gates::PER_CALL, false);
    let setup = SETUP.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    let n = setup.names.len();
    let mut app = vec![0u64; n];
    let mut mpi = vec![0u64; n];
    let mut per_routine = vec![0u64; N_ROUTINES * n];
    for tc in THREADS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let mut tc = tc.lock().unwrap_or_else(|e| e.into_inner());
        let tc = &mut *tc;
        if tc.backend.read(&mut tc.scratch) {
            tc.split.end(&tc.scratch);
        }
        for e in 0..n {
            app[e] = app[e].wrapping_add(tc.split.app[e]);
            mpi[e] = mpi[e].wrapping_add(tc.split.mpi[e]);
        }
        for (a, b) in per_routine.iter_mut().zip(&tc.split.per_routine) {
            *a = a.wrapping_add(*b);
        }
    }
    Some(RankCounters {
        names: setup.names,
        unavailable: setup.unavailable,
        mode: setup.mode,
        app,
        mpi,
        per_routine,
    })
}

#[cfg(test)]
mod tests {
    use super::split::Semantics;
    use super::*;

    /// A fake counter: a script of true cumulative values, served with either semantics.
    struct Fake {
        sem: Semantics,
        values: Vec<u64>,
        at: usize,
        last: u64,
    }

    impl Backend for Fake {
        fn semantics(&self) -> Semantics {
            self.sem
        }
        fn read(&mut self, out: &mut [u64]) -> bool {
            let v = self.values[self.at];
            self.at += 1;
            out[0] = match self.sem {
                Semantics::Read => v,
                Semantics::ReadOut => v - std::mem::replace(&mut self.last, v),
            };
            true
        }
    }

    /// begin at 100; app work to 130; call 0: 130..135; app to 200; call 1: 200..260; app to 300.
    fn run(sem: Semantics) -> Split {
        let mut tc = ThreadCounters::new(
            Box::new(Fake {
                sem,
                values: vec![100, 130, 135, 200, 260, 300],
                at: 0,
                last: 0,
            }),
            1,
        );
        let mut c = [0u64];
        // Read-out semantics: the counter was reset when counting began (first read).
        for id in [3, 7] {
            tc.backend.read(&mut c);
            tc.split.before_call(&c);
            tc.backend.read(&mut c);
            tc.split.after_call(id, &c);
        }
        tc.backend.read(&mut c);
        tc.split.end(&c);
        tc.split
    }

    #[test]
    fn split_with_read_semantics() {
        let s = run(Semantics::Read);
        assert_eq!(s.mpi, vec![5 + 60]);
        assert_eq!(s.app, vec![30 + 65 + 40]);
        assert_eq!(s.per_routine[3], 5);
        assert_eq!(s.per_routine[7], 60);
    }

    #[test]
    fn split_with_read_out_semantics() {
        let s = run(Semantics::ReadOut);
        // The first read-out (100, before counting began) only resets the counter.
        assert_eq!(s.mpi, vec![65]);
        assert_eq!(s.per_routine[3], 5);
        assert_eq!(s.per_routine[7], 60);
        assert_eq!(s.app, vec![135]);
    }

    #[test]
    fn choosing_events() {
        let site = vec!["instructions".to_string(), "cycles".to_string()];
        let allowed = vec!["task-clock".to_string(), "instructions".to_string()];
        let (names, un) = choose(&site, &allowed, None);
        assert_eq!(names, site);
        assert_eq!(un, vec![None, None]);
        let (names, un) = choose(&site, &allowed, Some("task-clock,cycles,bogus,task-clock"));
        assert_eq!(names, vec!["task-clock", "cycles", "bogus"]);
        assert_eq!(un[0], None);
        assert_eq!(un[1].as_deref(), Some("not allowed by the site"));
        assert!(un[2].is_some());
    }
}
