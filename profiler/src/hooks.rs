//! The routines with a job-level meaning: `MPI_Init(_thread)`, `MPI_Finalize`, `MPI_Abort`,
//! `MPI_Pcontrol`, and a job that exits without `MPI_Finalize`. The generated wrappers call these
//! hooks around the real routine; `MPI_Pcontrol` (variadic in C) is written here by hand.
//!
//! Every hook runs inside [`quietly`]: whatever goes wrong, the user's call proceeds unchanged.

use crate::clock::{ticks, Anchor};
use crate::counters::JobCounters;
use crate::detail::Destination;
use crate::facts::{unix_ms_now, Account, InitFacts};
use crate::family::{library_version, Built, Family, Probe};
use crate::ffi::MPI_Comm;
use crate::footprint::ResidentMark;
use crate::gates;
use crate::generated::routines::id;
use crate::guard::quietly;
use crate::job::build_record;
use crate::mpi::{comm_rank, comm_size, comm_world, query_thread, MpiError, OwnComm};
use crate::next::Next;
use crate::peers::Peers;
use crate::superstep::Estimates;
use crate::tally::{JobValue, RankTotals, Reduced};
use crate::threads::{bump, Counters, ENTERED_VIA_PMPI};
use mpistat_record::model::{Binding, JobRecord};
use mpistat_site::{CountersFallback, SiteConfig};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering, Ordering::Relaxed};
use std::sync::{Mutex, Once};

/// The site allows profiling (read at the first MPI call) and the MPI library is the built family's;
/// `MPI_Pcontrol(1)` resumes only then.
static ENABLED: AtomicBool = AtomicBool::new(true);

/// The process's MPI is not the built family's ([`crate::family`]): counting stays off for good,
/// and no hook does anything (no job is ever set up).
pub(crate) fn pass_through() {
    ENABLED.store(false, Relaxed);
    gates::set(gates::COUNTING, false);
}

/// The job as seen by this rank, from `MPI_Init` on.
struct Job {
    config: SiteConfig,
    /// Configuration problems, told in detail mode only.
    config_problems: Vec<String>,
    init: InitFacts,
    /// Which ranks have the library: the profiler's collectives run only if all do.
    peers: Peers,
    /// Clock reading at the end of `MPI_Init`.
    anchor: Anchor,
    /// Clock reading at the start of `MPI_Init`, before the real call: the ticks' rate is
    /// measured from it, over the whole job (`MPI_Init` alone takes a few hundred ms), so that
    /// a short job's rate does not rest on a few milliseconds.
    rate_start: Anchor,
    /// Calibrated cost of the counting in one wrapper, in ticks.
    call_cost_ticks: f64,
    detail: Option<Destination>,
    /// The record was written (finalize, abort or exit): never write a second one.
    recorded: bool,
    /// The user, if looked up at start-up ([`Prepared::account`]).
    account: Option<Account>,
}

impl Job {
    /// The user: as looked up at start-up, else now.
    fn account(&self) -> Account {
        self.account.clone().unwrap_or_else(Account::of_process)
    }
}

static JOB: Mutex<Option<Job>> = Mutex::new(None);

fn with_job<R>(f: impl FnOnce(&mut Job) -> R) -> Option<R> {
    let mut guard = JOB.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_mut().map(f)
}

/// After the real `MPI_Init` / `MPI_Init_thread` returned `rc` (and after its call was counted).
/// `provided` is the thread level (`MPI_THREAD_SINGLE` = 0 for `MPI_Init`, or when the call
/// failed); `via_pmpi` says the call came in through `PMPI_Init*`; `argc` is the caller's argument.
///
/// Placed with the hot wrappers: it is the last of our code that `MPI_Init` runs after the pages
/// used only for starting up were released ([`crate::footprint`]).
#[link_section = ".text.hot.mpistat"]
pub fn after_init(rc: c_int, provided: c_int, via_pmpi: bool, argc: *const c_int) {
    if crate::generated::wrappers::hot_resolved() {
        crate::threads::claim_main_thread();
    }
    if rc != 0 || !ENABLED.load(Relaxed) {
        return;
    }
    start_job(provided, via_pmpi, argc);
    crate::footprint::release_init_pages();
    // Giving pages back can take a while under load; it is the profiler's time, not the
    // program's first superstep.
    crate::superstep::restart(ticks());
}

/// What start-up finds out without MPI when the process's MPI is recognised (before its
/// `MPI_Init`), for the job that the end of `MPI_Init` sets up.
struct Prepared {
    config: SiteConfig,
    /// Configuration problems, worth telling in detail mode.
    config_problems: Vec<String>,
    detail: Option<Destination>,
    call_cost_ticks: f64,
    /// The counters to open and why some cannot be.
    counters: (Vec<String>, Vec<Option<String>>),
    /// Why this rank would trace the job (see [`crate::trace::wish`]).
    trace_wish: Option<usize>,
    /// Clock reading just before the real `MPI_Init` ([`Job::rate_start`]).
    rate_start: Option<Anchor>,
    /// The user, looked up before the real `MPI_Init` on the rank presumed to write the record
    /// ([`set_up_before_init`]).
    account: Option<Account>,
    /// The other objects' read-only pages resident before start-up ([`recognised`]): what
    /// start-up mapped of libc and the loader is dropped at its end ([`before_init`]).
    start: Option<ResidentMark>,
}

static PREPARED: Mutex<Option<Prepared>> = Mutex::new(None);

/// The process's MPI was recognised as the built family's, before its `MPI_Init`: read the site's
/// configuration and find out what needs no MPI. Returns whether the site profiles jobs; if not,
/// nothing is counted and the rank does not say it has the library (so no rank waits for it in a
/// collective).
pub(crate) fn recognised() -> bool {
    let start = ResidentMark::note();
    let mut prepared = find_out();
    prepared.start = start;
    let enabled = prepared.config.profiler.enabled;
    crate::peers::wish_trace(crate::trace::wish_level(prepared.trace_wish));
    *PREPARED.lock().unwrap_or_else(|e| e.into_inner()) = Some(prepared);
    if !enabled {
        ENABLED.store(false, Relaxed);
    }
    enabled
}

/// The decision has been made (then [`crate::gates::COUNTING`] stays off only if paused or foreign).
static DECIDED: AtomicBool = AtomicBool::new(false);

/// Called by [`crate::rt::enter`] when counting is off: at the process's first MPI call, decide
/// whether the MPI library is [`Built`]'s and, if so and the site profiles jobs (its
/// configuration is read now), turn counting on. Returns whether counting is on now. Later
/// calls (counting paused by `MPI_Pcontrol(0)`, or pass-through) return at once; they come from
/// the wrappers' general copies, beside which this sits (`.text.warm`).
#[cold]
#[inline(never)]
#[link_section = ".text.warm.mpistat"]
pub fn first_call() -> bool {
    if !DECIDED.load(Ordering::Acquire) {
        decide();
    }
    crate::gates::is_on(crate::gates::COUNTING)
}

fn decide() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The reason a library is not recognised is not used yet: pass-through sends nothing.
        // A job that opts out is passed through before anything is looked at (the front, when
        // it is there, loaded no implementation: this is for one preloaded or linked directly).
        let ours = !mpistat_abi::opted_out()
            && crate::guard::quietly(|| Built::recognise(&Probe::take()).is_ok()) == Some(true);
        if ours {
            if crate::guard::quietly(recognised).unwrap_or(false) {
                crate::peers::announce_at_init();
                crate::gates::set(crate::gates::COUNTING, true);
            }
        } else {
            pass_through();
        }
        DECIDED.store(true, Ordering::Release);
    });
}

/// Before the real `MPI_Init` / `MPI_Init_thread` (of a counted call): find every real routine,
/// open the counters, allocate the thread's table and the superstep buffer, register the exit
/// hook ([`set_up_before_init`]), then release the pages start-up used, ours and the other
/// objects' it mapped since recognition (reading site.toml, the user's look-up).
/// Done here, start-up maps our code and heap while the process is still small, so the peak
/// resident set stays MPI_Init's own (~10 MB a rank) instead of ours on top of it (+1.2 MB
/// measured when all of it ran after the real call).
#[link_section = ".text.hot.mpistat"]
pub fn before_init() {
    if let Some(start) = set_up_before_init().flatten() {
        start.release_since();
        drop(start);
    }
    // Again after the mark's freeing, whose code may have mapped a chunk of ours back.
    crate::footprint::release_init_pages();
}

/// The part of setting up the job that needs no MPI: find every real routine, open the
/// counters (they count from here: the `MPI_Init` in progress is counted as an MPI call) and
/// allocate the superstep buffer, and look the user up on the rank presumed to write the record.
/// What runs after the real `MPI_Init` is only what needs it ([`start_job`]). Returns the pages
/// resident before start-up ([`Prepared::start`]).
#[inline(never)]
fn set_up_before_init() -> Option<Option<ResidentMark>> {
    quietly(|| {
        crate::generated::wrappers::prefetch_all();
        PCONTROL.prefetch();
        crate::family::look_up_predefined();
        crate::threads::give_main_table();
        let mut prepared = PREPARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = prepared.as_mut() {
            p.rate_start = Some(Anchor::now());
            let (names, unavailable) = std::mem::take(&mut p.counters);
            start_counters(
                names,
                unavailable,
                p.config.profiler.counters_fallback,
                true,
            );
            crate::superstep::prepare(p.config.profiler.superstep_buffer_bytes);
            crate::requests::prepare();
            if p.trace_wish.is_some() {
                crate::trace::prepare(&p.config.trace);
            }
            // `getpwuid_r` maps libc's and NSS's code (64-128 kB): here, in a process still
            // small, and dropped before the real `MPI_Init` with the rest of start-up's, it adds
            // to no peak; at `MPI_Finalize` it made rank 0's largest step. A wrong guess only
            // moves the look-up back there.
            let presumed = crate::node::presumed_rank(|name| std::env::var(name).ok());
            if presumed.unwrap_or(0) == 0 {
                p.account = Some(Account::of_process());
            }
        }
        let start = prepared.as_mut().and_then(|p| p.start.take());
        drop(prepared);
        crate::peers::announce_before_init();
        register_exit_hook();
        start
    })
}

/// Open this thread's counters; `in_counted_call`: inside the counted `MPI_Init`, whose call
/// began before they were open (in per-call mode, the call's start is read now).
#[link_section = ".text.init.mpistat"]
fn start_counters(
    names: Vec<String>,
    unavailable: Vec<Option<String>>,
    fallback: CountersFallback,
    in_counted_call: bool,
) {
    if names.is_empty() {
        return;
    }
    crate::counters::start(names, unavailable, fallback);
    if in_counted_call && gates::is_on(gates::PER_CALL) {
        crate::counters::before_call();
    }
}

/// The site's configuration and its problems, and what follows from it and from the environment.
fn find_out() -> Prepared {
    let path = SiteConfig::path_from_env();
    let (config, problems) = SiteConfig::load(&path);
    // A site without a config file is normal; an explicitly named one that is missing is not.
    let silent_default = std::env::var_os("MPISTAT_CONFIG").is_none() && !path.exists();
    let mut config_problems = if silent_default {
        Vec::new()
    } else {
        problems.iter().map(|p| p.to_string()).collect()
    };
    let profiler = &config.profiler;
    let (names, mut unavailable) = crate::counters::choose(
        &profiler.counters,
        &profiler.counters_allowed,
        std::env::var("MPISTAT_COUNTERS").ok().as_deref(),
    );
    if !profiler.counters_when_oversubscribed {
        let ranks_here = crate::node::local_ranks(|name| std::env::var(name).ok());
        if let Some(why) = crate::node::oversubscribed(ranks_here, crate::node::job_cpus()) {
            for u in unavailable.iter_mut().filter(|u| u.is_none()) {
                *u = Some(why.clone());
            }
        }
    }
    Prepared {
        detail: profiler
            .detail_allowed
            .then(Destination::from_env)
            .flatten(),
        call_cost_ticks: calibrate_call_cost(),
        counters: (names, unavailable),
        trace_wish: crate::trace::wish(&config, &mut config_problems),
        rate_start: None,
        account: None,
        start: None,
        config,
        config_problems,
    }
}

/// Set up this rank's job (peers, supersteps, trace, exit hook) with what recognition and
/// [`set_up_before_init`] found out. Everything it runs adds to MPI_Init's peak resident set
/// (footprint.rs): it is in `.text.init` with the functions it calls that need MPI.
#[inline(never)]
#[link_section = ".text.init.mpistat"]
fn start_job(provided: c_int, via_pmpi: bool, argc: *const c_int) {
    quietly(|| {
        let taken = PREPARED.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(Prepared {
            config,
            config_problems,
            detail,
            call_cost_ticks,
            counters: (names, unavailable),
            trace_wish,
            rate_start,
            account,
            start: _,
        }) = taken
        else {
            return;
        };
        let Some(world) = comm_world() else { return };
        let (Ok(rank), Ok(size)) = (comm_rank(world), comm_size(world)) else {
            return;
        };
        let peers = crate::peers::learn(size as u32, config.profiler.assume_all_ranks_profiled);
        crate::places::learn(world, size as u32, rank as u32);
        // SAFETY: argc is the caller's pointer to MPI_Init, valid for the duration of the call.
        let fortran = unsafe { <Built as Family>::fortran_init(via_pmpi, argc) };
        let job = Job {
            init: InitFacts {
                rank: rank as u32,
                ranks: size as u32,
                binding: if fortran {
                    Binding::Fortran
                } else {
                    Binding::C
                },
                thread_level: provided,
                start_unix_ms: unix_ms_now(),
                // SAFETY: getpid cannot fail (std's `process::id` is the same call, elsewhere).
                pid: unsafe { libc::getpid() } as u32,
            },
            peers,
            config,
            config_problems,
            anchor: Anchor::now(),
            rate_start: rate_start.unwrap_or_else(Anchor::now),
            call_cost_ticks,
            detail,
            recorded: false,
            account,
        };
        // Opened before the real MPI_Init, unless that call was not counted (then not in it).
        start_counters(
            names,
            unavailable,
            job.config.profiler.counters_fallback,
            false,
        );
        if peers.all {
            crate::trace::start_if_wanted(
                &job.config,
                trace_wish,
                peers.trace_wish,
                rank as u32,
                size as u32,
            );
        }
        // The first superstep starts when MPI_Init returns to the program: the trace agreement
        // (an allreduce where PMIx cannot tell, as under MPICH) and the clock ping-pongs above
        // are the profiler's time, not the program's work.
        // Whether threads may end supersteps at once: `MPI_Init` says nothing of the level
        // (MPI may give `MPI_THREAD_MULTIPLE` anyway: Open MPI's `OMPI_MPI_THREAD_LEVEL`,
        // MPICH's `MPIR_CVAR_DEFAULT_THREAD_LEVEL`), so MPI is asked; unknown counts as shared.
        let multiple = crate::ffi::MPI_THREAD_MULTIPLE as c_int;
        let shared = provided >= multiple || query_thread().map_or(true, |l| l >= multiple);
        crate::superstep::start(
            job.config.profiler.superstep_buffer_bytes,
            size as u32,
            world,
            shared,
        );
        crate::requests::set_shared(shared);
        let on_sigterm = job.init.rank == job.peers.lead && job.config.profiler.record_on_sigterm;
        *JOB.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        register_exit_hook();
        if on_sigterm {
            crate::terminate::install(at_sigterm);
        }
    });
}

/// Measure what counting adds to one call: two clock reads and the table updates.
fn calibrate_call_cost() -> f64 {
    const N: u64 = 2000;
    let scratch = Counters::default();
    let start = ticks();
    for _ in 0..N {
        let a = ticks();
        let b = ticks();
        bump(&scratch.calls, 1);
        bump(&scratch.ticks, b.wrapping_sub(a));
        std::hint::black_box(&scratch);
    }
    ticks().wrapping_sub(start) as f64 / N as f64
}

/// This rank's totals at the moment `now`, with the job-level values filled in.
fn rank_totals(job: &Job, now: &Anchor, hook_start_ticks: u64) -> RankTotals {
    let ns_per_tick = job.rate_start.ns_per_tick(now);
    let mut t = RankTotals::collect(ns_per_tick);
    let init_ns = t.routine_ns(id::MPI_Init) + t.routine_ns(id::MPI_Init_thread);
    let since_init = now.ns.saturating_sub(job.anchor.ns);
    t.set(JobValue::WallNs, since_init + init_ns);
    let counting = t.total_calls() as f64 * job.call_cost_ticks;
    let hook = ticks().wrapping_sub(hook_start_ticks) as f64;
    t.set(
        JobValue::OverheadNs,
        ((counting + hook) * ns_per_tick) as u64,
    );
    let on_node = crate::node::local_ranks(|name| std::env::var(name).ok())
        .or_else(crate::places::ranks_here);
    t.set(JobValue::RanksOnNode, on_node.unwrap_or(0).into());
    t
}

/// Whether this rank saw a user's PMPI tool (Fortran bindings also enter through PMPI, so only a
/// C program can tell).
fn saw_pmpi_tool(job: &Job) -> bool {
    job.init.binding == Binding::C && ENTERED_VIA_PMPI.load(Relaxed)
}

/// Build the record, send it to syslog, and give the user the report if asked.
fn publish(
    job: &Job,
    reduced: &Reduced,
    estimates: Option<&Estimates>,
    counters: Option<&JobCounters>,
    partial: Option<String>,
    release_step: &dyn Fn(),
) {
    // Looked up at start-up on the rank presumed to write the record; else here, in its own
    // step: `getpwuid_r` maps libc's code (and NSS's) that the record's building and sending
    // need not keep.
    let account = match &job.account {
        Some(known) => known.clone(),
        None => {
            let looked_up = Account::of_process();
            release_step();
            looked_up
        }
    };
    let mut record = build_record(
        &job.init,
        reduced,
        &job.config.profiler,
        library_version(),
        partial,
        account,
    );
    if let Some(e) = estimates {
        add_estimates(&mut record, e);
    }
    record.trace = crate::trace::take_info();
    if let Some(c) = counters {
        record.counters = Some(c.set.clone());
        for (id, event, v) in &c.per_routine {
            let name = crate::generated::routines::ROUTINES[*id].name();
            if let Some(r) = record.routines.iter_mut().find(|r| r.name == name) {
                r.counters.insert(event.clone(), *v);
            }
        }
    }
    // The record's building, its serialising, its compressing into lines and its sending are
    // steps of their own: each runs code (and `finalize.ld` orders rank 0's part by step) that
    // the others need not keep mapped (reduce_and_publish); between them only the record, its
    // JSON, then its lines stay.
    release_step();
    // Cut to the limits in place: the detail report below shows the record as sent.
    let lines = mpistat_record::wire::encode_fitting_in_steps(&mut record, &mut || release_step());
    release_step();
    let sent = crate::syslog::send(
        &job.config.syslog.socket,
        job.config.syslog.facility.code(),
        &job.config.syslog.tag,
        &lines,
        std::time::Duration::from_millis(job.config.syslog.stall_ms),
    );
    let analysis = record
        .trace
        .as_ref()
        .filter(|_| record.partial.is_none())
        .map(|trace| {
            let armed = crate::analyse::after_record(
                &trace.dir,
                &record.wire_key(),
                job.config.trace.analyze_at_exit,
                &job.config.trace.analyze_command,
            );
            match armed {
                Ok(true) => format!(
                    "mpistat: the trace's analysis starts at exit: {} analyze --send {}\n",
                    job.config.trace.analyze_command.display(),
                    trace.dir
                ),
                Ok(false) => format!(
                    "mpistat: analyse the trace with: mpistat analyze --send {}\n",
                    trace.dir
                ),
                Err(e) => format!("mpistat: the trace directory cannot be named: {e}\n"),
            }
        });
    if let Some(dest) = &job.detail {
        let mut text = mpistat_record::report::render(&record);
        text.push_str(analysis.as_deref().unwrap_or_default());
        for p in &job.config_problems {
            text.push_str(&format!("mpistat: site configuration: {p}\n"));
        }
        match sent {
            Ok(progress) => text.push_str(&format!(
                "mpistat: record sent to syslog ({}, facility {}): {progress}\n",
                job.config.syslog.socket.display(),
                job.config.syslog.facility
            )),
            Err(e) => text.push_str(&format!("mpistat: record NOT sent to syslog: {e}\n")),
        }
        text.push_str("mpistat: machine-readable record:\n");
        for l in &lines {
            text.push_str(l);
            text.push('\n');
        }
        dest.write(&text);
    }
}

/// Put the imbalance figures and the per-routine waiting times into the record.
fn add_estimates(record: &mut JobRecord, e: &Estimates) {
    record.imbalance = Some(e.imbalance.clone());
    for (id, ns) in &e.sync_ns {
        let name = crate::generated::routines::ROUTINES
            .get(*id as usize)
            .map(|r| r.name());
        if let Some(r) = record
            .routines
            .iter_mut()
            .find(|r| Some(r.name.as_str()) == name)
        {
            r.sync_ns = Some(*ns);
        }
    }
}

/// Before the real `MPI_Finalize`: reduce every rank's totals to rank 0 on a communicator of our
/// own ([`OwnComm::private`]); rank 0 writes the record. If not every rank has the library, there is no
/// collective: the lead rank ([`Peers::lead`]) writes a partial record of its own data.
pub fn before_finalize() {
    let hook_start = ticks();
    quietly(|| {
        with_job(|job| {
            if job.recorded {
                return;
            }
            if !job.peers.all {
                if job.init.rank == job.peers.lead {
                    let reason = without_collectives(job);
                    publish_partial(job, reason, hook_start, true);
                }
                job.recorded = true;
                return;
            }
            job.recorded = true;
            // The counters' last read: where MPI_Finalize was entered.
            let rank_counters = crate::counters::finish();
            let Some(world) = comm_world() else { return };
            if let Err(failed) = reduce_and_publish(job, world, rank_counters, hook_start) {
                give_up(job, failed, hook_start);
            }
        });
    });
}

/// A step of the finalize's own MPI traffic that failed, and MPI's error code.
struct FinalizeFailed(&'static str, MpiError);

/// The finalize's collectives on a communicator of our own, and rank 0's record. Every rank
/// stops at its first failed MPI call (the communicator's errors return, [`OwnComm::private`]):
/// a figure it has not agreed on with the other ranks is not put in a record.
// Not inlined: in `before_finalize` it made LLVM call `Anchor::now`, `comm_rank` and
// `OwnComm::node_local` out of line, from a chunk outside `.text.finalize`.
#[inline(never)]
#[link_section = ".text.finalize.mpistat"]
fn reduce_and_publish(
    job: &mut Job,
    world: MPI_Comm,
    rank_counters: Option<crate::counters::RankCounters>,
    hook_start: u64,
) -> Result<(), FinalizeFailed> {
    let failed = |step| move |e| FinalizeFailed(step, e);
    // Each step of the finalize runs cold code, ours and the MPI library's, which the kernel
    // maps 64 kB at a time around each fault: dropping what a step mapped before the next one
    // (footprint.rs) makes the peak the largest step's rather than all of theirs
    // (docs/footprint.md "Finalize"), for a few re-faults.
    crate::footprint::map_finalize_page_by_page();
    let entry = ResidentMark::note();
    let release_step = || match &entry {
        Some(entry) => entry.release_since(),
        None => crate::footprint::release_init_pages(),
    };
    // The program's first call of MPI_Finalize was bound lazily, through the front's symbol
    // tables, which MPI_Init's end had dropped: their 64 kB chunk would count in the first step.
    release_step();
    // One rank per node counts the node: the launcher says which, else MPI finds out (a
    // collective, on one more communicator: each one at finalize costs a scheduling round when
    // ranks share cores).
    let local_rank = crate::node::local_rank(|v| std::env::var(v).ok(), job.init.rank);
    let comm = OwnComm::private(world, usize::from(local_rank.is_none()))
        .map_err(failed("making its communicator"))?;
    release_step();
    let node_leader = match local_rank {
        Some(local) => local == 0,
        None => {
            comm.node_local()
                .and_then(|node| comm_rank(node.0))
                .map_err(failed("finding the node's ranks"))?
                == 0
        }
    };
    let now = Anchor::now();
    let (entered, mpi_then) = crate::threads::call_entered(hook_start);
    let steps = crate::superstep::finish(entered, mpi_then);
    let totals = rank_totals(job, &now, hook_start);
    let useful = totals
        .get(JobValue::WallNs)
        .saturating_sub(totals.get(JobValue::MpiNs));
    let estimates = crate::superstep::reduce(
        &comm,
        steps,
        job.rate_start.ns_per_tick(&now),
        useful,
        crate::mpi::appnum(),
    )
    .map_err(failed("the supersteps' reduction"))?;
    release_step();
    let counters =
        crate::counters::reduce(&comm, rank_counters).map_err(failed("the counters' reduction"))?;
    crate::trace::finish(&comm, job.init.start_unix_ms, job.init.pid);
    release_step();
    let reduced = Reduced::over_ranks(&totals, node_leader, saw_pmpi_tool(job), &comm);
    release_step();
    match reduced {
        Ok(Some(reduced)) => publish(
            job,
            &reduced,
            estimates.as_ref(),
            counters.as_ref(),
            None,
            &release_step,
        ),
        Ok(None) => {}
        Err(e) => return Err(FinalizeFailed("the totals' reduction", e)),
    }
    release_step();
    Ok(())
}

/// After a failed MPI call of the finalize's own: the lead rank writes a partial record of its
/// own figures saying which step failed; the others have nothing to add.
fn give_up(job: &mut Job, FinalizeFailed(step, e): FinalizeFailed, hook_start: u64) {
    if job.init.rank != job.peers.lead {
        return;
    }
    job.recorded = false;
    let reason = format!(
        "the profiler's MPI_Finalize stopped: {step} failed (MPI error {}); rank {} reports alone",
        e.0, job.init.rank
    );
    // The counters were read for the reduction already ([`crate::counters::finish`]).
    publish_partial(job, reason, hook_start, false);
}

/// A record from this rank alone, for jobs that end without `MPI_Finalize`; with the counters
/// only when called on a thread of the program (`rdpmc` reads the calling thread's).
fn publish_partial(job: &mut Job, reason: String, hook_start: u64, with_counters: bool) {
    if job.recorded {
        return;
    }
    job.recorded = true;
    let counters = with_counters
        .then(crate::counters::finish)
        .flatten()
        .map(|mine| crate::counters::local(&mine));
    let totals = rank_totals(job, &Anchor::now(), hook_start);
    let reduced = Reduced::local(&totals, job.init.rank, saw_pmpi_tool(job));
    publish(
        job,
        &reduced,
        None,
        counters.as_ref(),
        Some(reason),
        &crate::footprint::release_init_pages,
    );
}

/// Before the real `MPI_Abort`: the calling rank writes a partial record with its own data.
pub fn before_abort(errorcode: c_int) {
    let hook_start = ticks();
    quietly(|| {
        with_job(|job| {
            let reason = format!(
                "MPI_Abort (errorcode {errorcode}) on rank {}",
                job.init.rank
            );
            if !job.recorded && job.init.rank != job.peers.lead {
                // Before the launcher stops the others: the writer then knows (claim.rs).
                crate::claim::take(job.peers.lead);
            }
            publish_partial(job, reason, hook_start, true);
        });
    });
}

/// Why a job's record is one rank's: not every rank has the library (or that is unknown).
fn without_collectives(job: &Job) -> String {
    match job.peers.with_library {
        Some(n) => format!(
            "only {n} of {} ranks have libmpistat (rank {} reports alone)",
            job.init.ranks, job.init.rank
        ),
        None => format!(
            "whether all {} ranks have libmpistat is unknown (rank {} reports alone)",
            job.init.ranks, job.init.rank
        ),
    }
}

/// At process exit: if the lead rank (rank 0 when every rank has the library) never reached
/// `MPI_Finalize`, it writes a partial record; after a traced job's `MPI_Finalize`, it starts
/// the trace's analysis ([`crate::analyse`]).
extern "C" fn at_exit() {
    let hook_start = ticks();
    quietly(|| {
        with_job(|job| {
            // A forked child exiting is not the job ending.
            if job.init.rank == job.peers.lead && job.init.pid == std::process::id() {
                publish_partial(job, "exit without MPI_Finalize".into(), hook_start, true);
                crate::analyse::start_at_exit();
            }
        });
    });
}

/// Why the record's writer wrote a partial record when its launcher stopped it.
const LAUNCHER_STOP: &str = "SIGTERM from the launcher: another rank ended early \
    (killed, crashed or on a lost node) or the launcher was stopped";

/// Rank 0 got SIGTERM (on [`crate::terminate`]'s helper thread): a partial record, unless
/// `MPI_Finalize`, `MPI_Abort` or exit is recording already, which holds the job for at most
/// about `stall_ms` per part; after 1 s of waiting for it the signal goes on without us. Not if
/// a rank of this node claimed the record by `MPI_Abort` ([`crate::claim`]). From its launcher
/// (`from_launcher`) the reason says so, nothing waits for the job's lock (Open MPI's `SIGKILL`
/// follows a second later), and only in jobs launched with PMIx (Open MPI's launcher, whose
/// stop this is made for; elsewhere the signal goes on at once, as before).
fn at_sigterm(from_launcher: bool) {
    use std::sync::TryLockError;
    if from_launcher && !crate::claim::launched_with_pmix() {
        return;
    }
    let hook_start = ticks();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let mut guard = match JOB.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            // The launcher's signal waits for no one: who holds the job is recording (or ending).
            Err(TryLockError::WouldBlock)
                if !from_launcher && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            Err(TryLockError::WouldBlock) => return,
        };
        if let Some(job) = guard.as_mut() {
            if !job.recorded && !crate::claim::taken_here(job.init.start_unix_ms) {
                let reason = if from_launcher {
                    LAUNCHER_STOP
                } else {
                    "SIGTERM"
                };
                publish_partial(job, reason.into(), hook_start, false);
            }
        }
        return;
    }
}

/// Register [`at_exit`] once (a flag, not `std::sync::Once`: this runs right after the real
/// `MPI_Init`, where every function run adds to its peak, see footprint.rs).
#[link_section = ".text.init.mpistat"]
fn register_exit_hook() {
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    if !REGISTERED.swap(true, Relaxed) {
        // SAFETY: registering a plain extern "C" fn.
        unsafe { libc::atexit(at_exit) };
    }
}

/// `MPI_Pcontrol(2)`: this rank's subtotals, as a report, to the detail destination (stderr if none).
fn write_subtotals() {
    let hook_start = ticks();
    with_job(|job| {
        let totals = rank_totals(job, &Anchor::now(), hook_start);
        let reduced = Reduced::local(&totals, job.init.rank, saw_pmpi_tool(job));
        let mut record: JobRecord = build_record(
            &job.init,
            &reduced,
            &job.config.profiler,
            library_version(),
            None,
            job.account(),
        );
        record.ranks = 1;
        let text = format!(
            "mpistat: subtotals of rank {} at MPI_Pcontrol(2)\n{}",
            job.init.rank,
            mpistat_record::report::render(&record)
        );
        job.detail
            .clone()
            .unwrap_or(Destination::Stderr)
            .write(&text);
    });
}

/// The real `MPI_Pcontrol` (for [`crate::pcontrol`], the routine's wrapper), looked up with
/// every other routine before the real `MPI_Init`.
pub(crate) const PCONTROL: Next = Next::new(c"PMPI_Pcontrol", &PCONTROL_ADDRESS);
static PCONTROL_ADDRESS: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Pausing and resuming switch a gate (an atomic operation: nothing there can panic, so no
/// guard, whose thread-local flag is reached through code outside the hot chunk); the
/// subtotals are cold and guarded.
#[inline(always)]
pub(crate) fn apply_pcontrol(level: c_int) {
    match level {
        0 => {
            gates::set(gates::COUNTING, false);
            crate::requests::forget_receives();
        }
        1 => {
            gates::set(gates::COUNTING, ENABLED.load(Relaxed));
        }
        2 => subtotals_if_allowed(),
        _ => {}
    }
}

/// `MPI_Pcontrol(2)`: [`write_subtotals`] where the site allows detail.
#[cold]
#[inline(never)]
fn subtotals_if_allowed() {
    quietly(|| {
        if with_job(|job| job.config.profiler.detail_allowed) == Some(true) {
            write_subtotals();
        }
    });
}
