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
//! The arithmetic is [`Split`], written for both counter interfaces of Rabenseifner's paper: "read"
//! (counters run like a clock) and "read-out" (each read returns the count since the previous read
//! and resets it), and unit-tested against a fake backend.

use crate::generated::routines::N_ROUTINES;
use mpistat_site::CountersFallback;
use std::cell::Cell;
use std::sync::Mutex;

/// How a counter interface behaves when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    /// Cumulative, like a clock.
    Read,
    /// Each read returns the events since the previous read (the counter is reset).
    ReadOut,
}

/// A source of counter values: one value per event.
pub trait Backend: Send {
    fn semantics(&self) -> Semantics;
    /// Read every event into `out`; false if the read failed.
    fn read(&mut self, out: &mut [u64]) -> bool;
}

/// The split of `n` events into application and MPI parts, total and per MPI routine.
#[derive(Clone, Debug)]
pub struct Split {
    sem: Semantics,
    pub app: Vec<u64>,
    pub mpi: Vec<u64>,
    /// Values at the start of the current call (read semantics).
    call_start: Vec<u64>,
    /// `N_ROUTINES` × n events, allocated on the first call.
    pub per_routine: Vec<u64>,
    n: usize,
}

impl Split {
    pub fn new(sem: Semantics, n: usize) -> Split {
        Split {
            sem,
            app: vec![0; n],
            mpi: vec![0; n],
            call_start: vec![0; n],
            per_routine: Vec::new(),
            n,
        }
    }

    /// Counting starts with the counter values `c`.
    pub fn begin(&mut self, c: &[u64]) {
        if self.sem == Semantics::Read {
            for (a, v) in self.app.iter_mut().zip(c) {
                *a = a.wrapping_sub(*v);
            }
        }
    }

    /// An MPI call starts; the counters read `c`.
    pub fn before_call(&mut self, c: &[u64]) {
        match self.sem {
            Semantics::Read => self.call_start.copy_from_slice(c),
            Semantics::ReadOut => {
                for (a, v) in self.app.iter_mut().zip(c) {
                    *a = a.wrapping_add(*v);
                }
            }
        }
    }

    /// The call of routine `id` ended; the counters read `c`.
    pub fn after_call(&mut self, id: usize, c: &[u64]) {
        if self.per_routine.is_empty() {
            self.per_routine = vec![0; N_ROUTINES * self.n];
        }
        for (e, &v) in c.iter().enumerate().take(self.n) {
            let delta = match self.sem {
                Semantics::Read => v.wrapping_sub(self.call_start[e]),
                Semantics::ReadOut => v,
            };
            self.mpi[e] = self.mpi[e].wrapping_add(delta);
            let r = &mut self.per_routine[id * self.n + e];
            *r = r.wrapping_add(delta);
        }
    }

    /// Counting ends with the counter values `c`: the application part is what MPI did not take.
    pub fn end(&mut self, c: &[u64]) {
        for ((a, &v), m) in self.app.iter_mut().zip(c).zip(&self.mpi) {
            *a = match self.sem {
                // -begin + end - mpi
                Semantics::Read => a.wrapping_add(v).wrapping_sub(*m),
                Semantics::ReadOut => a.wrapping_add(v),
            };
        }
    }
}

/// The events mpistat knows by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Hardware(perf_event::events::Hardware),
    Software(perf_event::events::Software),
    LlcReadMisses,
    /// A CPU-specific event: perf's raw `config` (event select | unit mask << 8 on x86).
    Raw(u64),
    /// Known name without a portable event on this architecture.
    Unknown(&'static str),
}

/// Intel family-6 models numbered after Broadwell's first (0x3D) without `FP_ARITH_INST_RETIRED`:
/// Haswell parts, Atom cores (Silvermont to Tremont) and Xeon Phi.
const NO_FP_ARITH: [u32; 19] = [
    0x3f, 0x45, 0x46, 0x4c, 0x4d, 0x57, 0x5a, 0x5c, 0x5d, 0x5f, 0x65, 0x6e, 0x75, 0x7a, 0x85, 0x86,
    0x8a, 0x96, 0x9c,
];

/// The processor, as far as choosing raw events goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub vendor: Vendor,
    pub family: u32,
    pub model: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Intel,
    Amd,
    Other,
}

impl Cpu {
    /// This machine's processor (from `cpuid`); `None` off x86-64.
    pub fn this() -> Option<Cpu> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::__cpuid;
            // SAFETY: cpuid leaves 0 and 1 exist on every x86-64 processor (the intrinsic is
            // safe in newer Rust, unsafe in the oldest we support).
            #[allow(unused_unsafe)]
            let (l0, l1) = unsafe { (__cpuid(0), __cpuid(1)) };
            let vendor = match (l0.ebx, l0.edx, l0.ecx) {
                // "GenuineIntel", "AuthenticAMD" as the three registers hold them.
                (0x756e_6547, 0x4965_6e69, 0x6c65_746e) => Vendor::Intel,
                (0x6874_7541, 0x6974_6e65, 0x444d_4163) => Vendor::Amd,
                _ => Vendor::Other,
            };
            let base_family = (l1.eax >> 8) & 0xf;
            let family = if base_family == 0xf {
                base_family + ((l1.eax >> 20) & 0xff)
            } else {
                base_family
            };
            let model = if base_family == 0x6 || base_family == 0xf {
                ((l1.eax >> 12) & 0xf0) | ((l1.eax >> 4) & 0xf)
            } else {
                (l1.eax >> 4) & 0xf
            };
            Some(Cpu {
                vendor,
                family,
                model,
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }

    /// The raw event that counts floating-point work on this processor, where we know one:
    /// Intel Broadwell and later big cores, `FP_ARITH_INST_RETIRED` with every width (event
    /// 0xC7, unit mask 0xFF: FP arithmetic *instructions*, a packed one counting once); AMD Zen
    /// 1-3, `FpRetSseAvxOps` (event 0x03, unit mask 0xFF: FLOPs).
    pub fn fp_event(&self) -> Option<u64> {
        match (self.vendor, self.family) {
            (Vendor::Intel, 6) if self.model >= 0x3d && !NO_FP_ARITH.contains(&self.model) => {
                Some(0xc7 | 0xff << 8)
            }
            (Vendor::Amd, 0x17) => Some(0x03 | 0xff << 8),
            (Vendor::Amd, 0x19) if self.model < 0x10 => Some(0x03 | 0xff << 8),
            _ => None,
        }
    }
}

pub fn event_kind(name: &str) -> Option<EventKind> {
    use perf_event::events::{Hardware as H, Software as S};
    Some(match name {
        "instructions" => EventKind::Hardware(H::INSTRUCTIONS),
        "cycles" => EventKind::Hardware(H::CPU_CYCLES),
        "branch-misses" => EventKind::Hardware(H::BRANCH_MISSES),
        "llc-misses" => EventKind::LlcReadMisses,
        "fp-ops" => match Cpu::this().and_then(|cpu| cpu.fp_event()) {
            Some(config) => EventKind::Raw(config),
            None => {
                EventKind::Unknown("no raw floating-point event is known for this CPU; left out")
            }
        },
        "l2-misses" => EventKind::Unknown("no portable L2-miss event; use llc-misses"),
        "task-clock" => EventKind::Software(S::TASK_CLOCK),
        "page-faults" => EventKind::Software(S::PAGE_FAULTS),
        "context-switches" => EventKind::Software(S::CONTEXT_SWITCHES),
        "cpu-migrations" => EventKind::Software(S::CPU_MIGRATIONS),
        _ => return None,
    })
}

/// One thread's perf_event group (read semantics).
pub struct PerfGroup {
    group: perf_event::Group,
    /// Opened members in event order; `None` for events that could not be opened.
    members: Vec<Option<Member>>,
    /// Every opened member can be read in user space (`rdpmc` through its mmap page).
    pub user_read: bool,
}

/// An opened event: a plain counter, or (hardware events, when all opened members are) one
/// with its mmap page for the user-space read.
enum Member {
    Counter(perf_event::Counter),
    Mapped(perf_event::Sampler),
}

impl Member {
    fn counter(&self) -> &perf_event::Counter {
        match self {
            Member::Counter(c) => c,
            Member::Mapped(s) => s,
        }
    }
}

fn reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT: the kernel offers no such event here (no PMU)".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => {
            format!("{e} (kernel.perf_event_paranoid forbids it)")
        }
        _ => e.to_string(),
    }
}

impl PerfGroup {
    /// Open `events` for the calling thread; the reasons of the ones that failed (by index).
    pub fn open(events: &[EventKind]) -> Result<(PerfGroup, Vec<Option<String>>), String> {
        use perf_event::events::{Cache, CacheId, CacheOp, CacheResult};
        let mut group = perf_event::Group::new().map_err(|e| reason(&e))?;
        let mut members = Vec::new();
        let mut problems = Vec::new();
        for kind in events {
            let built = match *kind {
                EventKind::Hardware(h) => group.add(&perf_event::Builder::new(h)),
                EventKind::Software(s) => group.add(&perf_event::Builder::new(s)),
                EventKind::Raw(config) => group.add(&perf_event::Builder::new(
                    perf_event::events::Raw::new(config),
                )),
                EventKind::LlcReadMisses => group.add(&perf_event::Builder::new(Cache {
                    which: CacheId::LL,
                    operation: CacheOp::READ,
                    result: CacheResult::MISS,
                })),
                EventKind::Unknown(why) => {
                    members.push(None);
                    problems.push(Some(why.to_string()));
                    continue;
                }
            };
            match built {
                Ok(c) => {
                    members.push(Some(Member::Counter(c)));
                    problems.push(None);
                }
                Err(e) => {
                    members.push(None);
                    problems.push(Some(reason(&e)));
                }
            }
        }
        let hardware_only = events
            .iter()
            .zip(&members)
            .all(|(k, m)| m.is_none() || !matches!(k, EventKind::Software(_)));
        if hardware_only {
            // Give each counter its mmap page (the kernel's page only, no sample buffer).
            for (member, problem) in members.iter_mut().zip(problems.iter_mut()) {
                if let Some(Member::Counter(counter)) = member.take() {
                    match counter.sampled(0) {
                        Ok(mapped) => *member = Some(Member::Mapped(mapped)),
                        Err(e) => *problem = Some(format!("cannot map its page: {}", reason(&e))),
                    }
                }
            }
        }
        if members.iter().all(Option::is_none) {
            // Dropping the group closes its leader too: an idle leader left open still costs the
            // kernel work at every context switch of the thread (x1.4 on an oversubscribed
            // collective), and nothing would ever be read from it.
            let why = problems.iter().flatten().next().cloned();
            return Err(why.unwrap_or_else(|| "no event could be opened".into()));
        }
        group.enable().map_err(|e| reason(&e))?;
        let mut group = PerfGroup {
            group,
            members,
            user_read: false,
        };
        group.user_read = group.members.iter().flatten().all(|m| match m {
            Member::Mapped(s) => s.read_user().count().is_some(),
            Member::Counter(_) => false,
        }) && group.members.iter().any(Option::is_some);
        Ok((group, problems))
    }

    /// Every opened member read in user space; `false` if one is not on a hardware counter just
    /// now (e.g. multiplexed out), when the caller reads the group with read(2) instead.
    fn read_user(&self, out: &mut [u64]) -> bool {
        for (o, m) in out.iter_mut().zip(&self.members) {
            *o = match m {
                None => 0,
                Some(Member::Mapped(s)) => match s.read_user().count() {
                    Some(v) => v,
                    None => return false,
                },
                Some(Member::Counter(_)) => return false,
            };
        }
        true
    }
}

impl Backend for PerfGroup {
    fn semantics(&self) -> Semantics {
        Semantics::Read
    }

    fn read(&mut self, out: &mut [u64]) -> bool {
        if self.user_read && self.read_user(out) {
            return true;
        }
        let Ok(data) = self.group.read() else {
            return false;
        };
        for (o, m) in out.iter_mut().zip(&self.members) {
            *o = m
                .as_ref()
                .and_then(|m| data.get(m.counter()))
                .map_or(0, |v| v.value());
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------
// Run time
// ---------------------------------------------------------------------------------------------

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

/// This rank's counters at `MPI_Finalize`: names, unavailability, mode, and per event
/// (app, mpi) summed over threads, plus per routine × event the MPI part.
pub struct RankCounters {
    pub names: Vec<String>,
    pub unavailable: Vec<Option<String>>,
    pub mode: &'static str,
    pub app: Vec<u64>,
    pub mpi: Vec<u64>,
    pub per_routine: Vec<u64>,
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

/// The job's counters (on rank 0): the record's set and, per routine id, (event name, MPI part).
pub struct JobCounters {
    pub set: mpistat_record::model::CounterSet,
    pub per_routine: Vec<(usize, String, u64)>,
}

/// Sum every rank's counters to rank 0 of `comm` (collective). Ranks that chose different
/// numbers of events (e.g. MPMD applications with different `MPISTAT_COUNTERS`) skip it alike.
pub fn reduce(
    comm: &crate::mpi::OwnComm,
    mine: Option<RankCounters>,
) -> crate::mpi::MpiResult<Option<JobCounters>> {
    use crate::mpi::{allreduce, reduce_to_root, Op};
    let n = mine.as_ref().map_or(0, |m| m.names.len()) as u64;
    let agree = allreduce(&[n, u64::MAX - n], Op::Max, comm)?;
    let Some(mine) = mine else { return Ok(None) };
    if agree[0] != n || u64::MAX - agree[1] != n || n == 0 {
        return Ok(None);
    }
    let Some(sum) = reduce_to_root(&mine.flat(), Op::Sum, comm)? else {
        return Ok(None);
    };
    Ok(Some(mine.summed(&sum)))
}

/// This rank's counters alone, for a partial record (a job that ends without `MPI_Finalize`).
pub fn local(mine: &RankCounters) -> JobCounters {
    mine.summed(&mine.flat())
}

impl RankCounters {
    /// Application part, MPI part and per-routine MPI parts, as one vector to reduce.
    fn flat(&self) -> Vec<u64> {
        let mut v = self.app.clone();
        v.extend_from_slice(&self.mpi);
        v.extend_from_slice(&self.per_routine);
        v
    }

    /// The job's counters from `sum`, a [`RankCounters::flat`] vector summed over ranks.
    fn summed(&self, sum: &[u64]) -> JobCounters {
        let n = self.names.len();
        let counted = |e: usize, v: u64| if self.unavailable[e].is_none() { v } else { 0 };
        let events = self
            .names
            .iter()
            .enumerate()
            .map(|(e, name)| mpistat_record::model::CounterEvent {
                name: name.clone(),
                app: counted(e, sum[e]),
                mpi: counted(e, sum[n + e]),
                unavailable: self.unavailable[e].clone(),
            })
            .collect();
        let mut per_routine = Vec::new();
        for id in 0..N_ROUTINES {
            for (e, name) in self.names.iter().enumerate() {
                let v = counted(e, sum[2 * n + id * n + e]);
                if v > 0 {
                    per_routine.push((id, name.clone(), v));
                }
            }
        }
        JobCounters {
            set: mpistat_record::model::CounterSet {
                mode: self.mode.to_string(),
                events,
            },
            per_routine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floating_point_events_are_known_for_recent_intel_and_amd_processors() {
        let cpu = |vendor, family, model| Cpu {
            vendor,
            family,
            model,
        };
        // Skylake-SP, Ice Lake-SP: FP_ARITH_INST_RETIRED.ALL-widths.
        assert_eq!(cpu(Vendor::Intel, 6, 0x55).fp_event(), Some(0xffc7));
        assert_eq!(cpu(Vendor::Intel, 6, 0x6a).fp_event(), Some(0xffc7));
        // Haswell has no such event.
        assert_eq!(cpu(Vendor::Intel, 6, 0x3f).fp_event(), None);
        // Zen 2 (EPYC Rome), Zen 3 (Milan): FpRetSseAvxOps.
        assert_eq!(cpu(Vendor::Amd, 0x17, 0x31).fp_event(), Some(0xff03));
        assert_eq!(cpu(Vendor::Amd, 0x19, 0x01).fp_event(), Some(0xff03));
        assert_eq!(cpu(Vendor::Amd, 0x19, 0x11).fp_event(), None);
        assert_eq!(cpu(Vendor::Other, 6, 0x55).fp_event(), None);
    }

    #[test]
    fn this_processor_is_recognised() {
        if cfg!(target_arch = "x86_64") {
            let cpu = Cpu::this().expect("cpuid works");
            assert!(cpu.family > 0, "{cpu:?}");
        }
    }

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
    fn read_semantics_survive_wrapping() {
        let mut s = Split::new(Semantics::Read, 1);
        s.begin(&[u64::MAX - 5]);
        s.before_call(&[u64::MAX - 1]);
        s.after_call(0, &[2]);
        s.end(&[10]);
        assert_eq!(s.mpi, vec![4]);
        assert_eq!(s.app, vec![4 + 8]);
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

    #[test]
    fn software_events_open_and_hardware_ones_say_why_not() {
        let kinds = [
            event_kind("task-clock").unwrap(),
            event_kind("instructions").unwrap(),
        ];
        let Ok((mut g, problems)) = PerfGroup::open(&kinds) else {
            return; // perf_event_open forbidden here altogether: nothing to check
        };
        assert_eq!(problems[0], None);
        let mut v = [0u64; 2];
        assert!(g.read(&mut v));
        // Hardware events either work or carry a reason.
        assert!(problems[1].is_some() || v[1] > 0);
        // A software event has no user-space read: the group is read with read(2).
        assert!(!g.user_read);
    }

    #[test]
    fn a_group_with_no_event_opened_is_not_kept_and_says_why() {
        let kinds = [
            EventKind::Unknown("not opened"),
            EventKind::Unknown("unknown event name"),
        ];
        match PerfGroup::open(&kinds) {
            Ok(_) => panic!("a group of no events was kept open"),
            Err(why) => assert!(
                why == "not opened" || why.contains("perf"),
                "unexpected reason: {why}"
            ),
        }
    }

    #[test]
    fn hardware_only_groups_are_read_in_user_space_where_the_kernel_allows() {
        let kinds = [
            event_kind("instructions").unwrap(),
            event_kind("cycles").unwrap(),
        ];
        // No PMU (this machine: ENOENT) or perf forbidden: nothing opened, no group kept.
        let Ok((mut g, problems)) = PerfGroup::open(&kinds) else {
            return;
        };
        let (mut a, mut b) = ([0u64; 2], [0u64; 2]);
        assert!(g.read(&mut a));
        std::hint::black_box((0..100_000u64).sum::<u64>());
        assert!(g.read(&mut b));
        let opened = problems.iter().position(Option::is_none).unwrap();
        assert!(
            b[opened] > a[opened],
            "counter did not advance: {a:?} {b:?}"
        );
    }
}
