//! The start of a trace at `MPI_Init`: whether the site, the user or the escalation list wants
//! one, the ranks' agreement, the recorder built before the real `MPI_Init` ([`prepare`]) and
//! completed at its end ([`start`]), and its event buffer.

use super::clocks::{measure_offset, test_skew, Nodes, Skew};
use super::spill::{Spill, CHUNK_WORDS};
use super::state::{Facts, FastSites, Recorder, State, RECORDER, REQUEST_NULL};
use crate::callsite::CallSites;
use crate::clock::Anchor;
use crate::family::{Handle, Predefined};
use crate::ffi::MPI_Request;
use crate::generated::routines::ROUTINES;
use crate::mpi;
use crate::rawevents::RawEvents;
use mpistat_site::{escalation, SiteConfig, TraceConfig};
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::Communicator;
use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

/// Why a job is traced, strongest first; the ranks agree on the strongest any of them has.
const REASONS: [&str; 3] = ["user", "site", "escalation"];

/// Why this rank would trace the job: `MPISTAT_TRACE=1` (the user), the site's `everyone`, or
/// an entry of the escalation list for this user and application (index into [`REASONS`]). The
/// list is read bounded, from a regular file only ([`escalation::load`]); why it could not be
/// read (but for a missing list: none was written yet), or that it was cut, goes to `problems`.
pub fn wish(config: &SiteConfig, problems: &mut Vec<String>) -> Option<usize> {
    // Worked out here, at MPI_Init, whatever decides: the record names the same application.
    let app = &crate::facts::program().application.name;
    if std::env::var_os("MPISTAT_TRACE").is_some_and(|v| v == "1") {
        return Some(0);
    }
    if config.trace.everyone {
        return Some(1);
    }
    let list = &config.escalation.list;
    let text = match escalation::load(list) {
        Ok((text, note)) => {
            problems.extend(note);
            text
        }
        Err(e) => {
            if !e.is_missing() {
                problems.push(format!("escalation list {}: {e}", list.display()));
            }
            return None;
        }
    };
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let now = crate::facts::unix_ms_now() / 1000;
    text.lines()
        .filter_map(|line| escalation::parse_line(line).flatten())
        .any(|e| e.applies(uid, app, now))
        .then_some(2)
}

/// A [`wish`] as a number that grows with its strength (0: no wish), for the ranks to agree on
/// the strongest.
pub fn wish_level(wish: Option<usize>) -> u8 {
    wish.map_or(0, |i| (REASONS.len() - i.min(REASONS.len() - 1)) as u8)
}

/// At the end of `MPI_Init`: if any rank wants a trace, every rank starts tracing (ranks may read
/// the escalation list at different moments, and a rank that traced alone would wait forever in
/// the clock measurement). `agreed` is the strongest [`wish_level`] of all ranks when the ranks
/// told it each other through PMIx ([`crate::peers`]); else they agree now (a collective over
/// `MPI_COMM_WORLD`). Only a traced job runs anything more here (in `.text.init`, with the end
/// of `MPI_Init`: see footprint.rs).
#[link_section = ".text.init.mpistat"]
pub fn start_if_wanted(
    config: &SiteConfig,
    wish: Option<usize>,
    agreed: Option<u8>,
    rank: u32,
    world_size: u32,
) {
    let level = match agreed {
        Some(level) => u64::from(level),
        None => {
            let Some(world) = mpi::comm_world() else {
                return;
            };
            let mine = u64::from(wish_level(wish));
            let Ok(agreed) = mpi::allreduce_max_on(&[mine], world) else {
                return;
            };
            agreed[0]
        }
    };
    if let Some(reason) = (level as usize)
        .checked_sub(1)
        .and_then(|i| REASONS.len().checked_sub(i + 1))
        .map(|i| REASONS[i])
    {
        start(&config.trace, reason, rank, world_size);
    }
}

/// A recorder built before the real `MPI_Init` by a rank that wants a trace itself ([`prepare`]).
static EARLY: Mutex<Option<Recorder>> = Mutex::new(None);

/// Before the real `MPI_Init`, on the thread calling it, when this rank wants a trace: build
/// the recorder's parts that need no MPI (event buffer, routine facts, call sites) while
/// start-up's pages are mapped anyway, so that its code adds nothing to MPI_Init's peak
/// (footprint.rs). [`start`] completes it if the ranks agree to trace.
pub fn prepare(config: &TraceConfig) {
    let recorder = Recorder::new(config);
    *EARLY.lock().unwrap_or_else(|e| e.into_inner()) = Some(recorder);
}

/// `budget` bytes, or half the job's file size limit (`ulimit -f`, `RLIMIT_FSIZE`) where that is
/// less: a write past the limit raises SIGXFSZ, which kills the rank, and the spill file and the
/// trace files grow with the words recorded (the rank's trace file stays below them).
fn within_file_size_limit(budget: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } == 0;
    if !read || limit.rlim_cur == libc::RLIM_INFINITY {
        return budget;
    }
    budget.min(usize::try_from(limit.rlim_cur / 2).unwrap_or(usize::MAX))
}

impl Recorder {
    /// A recorder for the calling thread, without what needs MPI (rank, world, clock samples).
    pub(super) fn new(config: &TraceConfig) -> Recorder {
        // The budget counts words recorded; the chunk holds the latest of them.
        let budget_bytes = within_file_size_limit(config.budget_bytes);
        let capacity = budget_bytes / std::mem::size_of::<u64>();
        let mut events = Vec::new();
        // Taken if the allocator gives it (else the chunk grows on the slow path).
        let _ = events.try_reserve_exact(capacity.min(CHUNK_WORDS));
        // MPI_COMM_WORLD is this rank's communicator 0 (its members are set by `start`).
        let mut comms = FastMap::default();
        let last_comm = match mpi::comm_world() {
            Some(world) => {
                comms.insert(world.key(), 0);
                (world.key(), 0)
            }
            None => (0, 0),
        };
        let request_null: MPI_Request =
            crate::family::predefined(Predefined::RequestNull).unwrap_or(Handle::NONE);
        REQUEST_NULL.store(request_null.key(), Relaxed);
        let mut recorder = Recorder {
            config: TraceConfig {
                budget_bytes,
                ..config.clone()
            },
            reason: "",
            rank: 0,
            world_size: 0,
            comm_null: crate::family::predefined(Predefined::CommNull).unwrap_or(Handle::NONE),
            skew: Skew::default(),
            rank0_skew: Skew::default(),
            skew_spec: std::env::var("MPISTAT_TRACE_TEST_SKEW").ok(),
            nodes: Box::new(Nodes::Unknown),
            state: State::Stopped,
            events: RawEvents::with_capacity(events),
            capacity,
            spill: Spill::NotYet,
            limit: 0,
            regions: FastMap::default(),
            fast: FastSites::new(ROUTINES.len()),
            routine_facts: ROUTINES.iter().map(|r| Facts::of(r.name())).collect(),
            region_keys: Vec::new(),
            regions_released: 0,
            sites: CallSites::default(),
            comms,
            // The world's entry, with room for its members as the launcher counts them: the
            // end of `MPI_Init` fills it without allocating (footprint.rs).
            communicators: vec![Communicator {
                members: room_for_world(),
            }],
            pending: FastMap::default(),
            completing: std::ptr::null(),
            snapshot: Vec::new(),
            cartesian: None,
            supersteps: 0,
            supersteps_recorded: 0,
            stop_note: None,
            stopped_by_budget: false,
            stopped_by_spill: false,
            // The samples at Init and Finalize.
            clock: Vec::with_capacity(2),
            anchor: Anchor::now(),
            overhead_ticks: 0,
            traced_calls: 0,
            last_comm,
        };
        recorder.set_state(if config.skip_supersteps == 0 {
            State::Recording
        } else {
            State::Skipping
        });
        recorder
    }
}

/// Set up this rank's recorder (the one [`prepare`]d, else a new one) and measure its clock
/// against rank 0's (collective over `MPI_COMM_WORLD`). At the end of `MPI_Init`, so in
/// `.text.init` with [`measure_offset`] (footprint.rs): anywhere else in `.text` each of them
/// mapped one more 64 KiB chunk of code during MPI_Init. What a recorder needs that shared
/// generic code would build (the world's entry in the communicators' map) was made by
/// [`Recorder::new`], before the real `MPI_Init`.
#[inline(never)]
#[link_section = ".text.init.mpistat"]
fn start(config: &TraceConfig, reason: &'static str, rank: u32, world_size: u32) {
    let Some(world) = mpi::comm_world() else {
        return;
    };
    let early = EARLY.lock().unwrap_or_else(|e| e.into_inner()).take();
    let mut recorder = early.unwrap_or_else(|| Recorder::new(config));
    recorder.reason = reason;
    recorder.rank = rank;
    recorder.world_size = world_size;
    if let Some(spec) = recorder.skew_spec.as_deref() {
        recorder.skew = test_skew(spec, rank);
        recorder.rank0_skew = test_skew(spec, 0);
    }
    // Only rank 0 decides whose clock is its own ([`measure_offset`]).
    *recorder.nodes = if rank != 0 {
        Nodes::Unknown
    } else if crate::places::known() {
        Nodes::Pmix
    } else {
        match crate::peers::pmi1_mapping() {
            Some(m) => Nodes::Hydra(m),
            None => Nodes::Unknown,
        }
    };
    // The world's entry (made by `Recorder::new`): its members, in the room reserved there.
    if let Some(world) = recorder.communicators.first_mut() {
        world.members.clear();
        world.members.reserve(world_size as usize);
        for r in 0..world_size {
            world.members.push(r);
        }
    }
    if recorder.last_comm != (world.key(), 0) {
        recorder.comms.insert(world.key(), 0);
        recorder.last_comm = (world.key(), 0);
    }
    recorder.anchor = Anchor::now();
    // On `MPI_COMM_WORLD` itself, not a duplicate (whose making ran MPI code that added to
    // MPI_Init's peak, footprint.rs): no user message can meet these. Every receive names
    // its source (rank 0, or on rank 0 its current peer) and the clock tag, so a message from
    // a rank that already returned from `MPI_Init` cannot match it; and every message sent
    // here is received before its receiver returns, so none is left for the user's receives.
    if let Some(sample) = measure_offset(&recorder, world) {
        recorder.clock.push(sample);
    }
    crate::threads::mark_traced_thread();
    if !RECORDER.busy.get() {
        // SAFETY: the calling thread was just made the traced one, and no use of the recorder
        // is in progress (busy), as in `with_recorder_if`: not through it, as its panic
        // guard's generic code lives in `.text` (one more chunk of code in MPI_Init's peak).
        // Written without dropping the slot's old value: it is `None` (one `start` a process).
        unsafe { RECORDER.recorder.get().write(Some(recorder)) };
        crate::gates::set(crate::gates::TRACE, true);
    }
}

/// Room for the world's members: as many as the job's ranks as its launcher says before
/// `MPI_Init` (Open MPI's `OMPI_COMM_WORLD_SIZE`, PMI's `PMI_SIZE`), none if it does not.
fn room_for_world() -> Vec<u32> {
    let ranks = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(0);
    // The environment says it: only a hint, taken if the allocator gives it.
    let mut members = Vec::new();
    let _ = members.try_reserve_exact(ranks);
    members
}

/// Room for `capacity` words (or, where the allocator refuses that much address space, the
/// most of it, halving, that it gives), reserved, not touched: pages become resident only as
/// events arrive (the events' buffer where they cannot be spilled, [`Spill::InMemory`]). In huge pages where the kernel allows it (transparent huge pages in `madvise`
/// or `always` mode): two events a call fill a 4 KiB page every ~50 calls, and its page fault
/// (~2 us) was a third of trace mode's cost per call; a 2 MiB page takes one fault per ~26,000.
pub(super) fn event_buffer(mut capacity: usize) -> Vec<u64> {
    const HUGE: usize = 2 << 20;
    let mut events = Vec::new();
    while events.try_reserve_exact(capacity).is_err() {
        capacity /= 2;
    }
    let start = (events.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (events.as_ptr() as usize + capacity * std::mem::size_of::<u64>()) / HUGE * HUGE;
    if end > start {
        // SAFETY: advice on whole pages inside the buffer just reserved; failure changes nothing.
        unsafe { libc::madvise(start as *mut c_void, end - start, libc::MADV_HUGEPAGE) };
    }
    events
}
