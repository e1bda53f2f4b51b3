//! The recording's unit tests: the fast path records what the slow path records.

use super::*;
use crate::ffi::MPI_Count;
use crate::generated::routines::ROUTINES;
use crate::trace::state::Entered;
use crate::traffic::Measured;
use mpistat_site::TraceConfig;
use proptest::prelude::*;

/// The user's return address the test's calls come from, and where it lies above their
/// stack pointer.
const SITE: usize = 0x5173;
const OFFSET: usize = std::mem::size_of::<usize>();

/// `MPI_COMM_WORLD` (this rank's communicator 0) and one of rank 1 alone (1), as handles.
fn world() -> MPI_Comm {
    Handle::from_key(0x1000)
}
fn sub() -> MPI_Comm {
    Handle::from_key(0x2000)
}

fn routine(name: &str) -> RoutineId {
    ROUTINES.iter().position(|r| r.name() == name).unwrap()
}

/// The routines of the test's calls.
const ROUTINE_NAMES: [&str; 10] = [
    "MPI_Comm_rank",
    "MPI_Send",
    "MPI_Ssend",
    "MPI_Recv",
    "MPI_Allreduce",
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Isend",
    "MPI_Irecv",
    "MPI_Sendrecv",
];

/// Rank 0's recorder of a 2-rank job, built as at `MPI_Init` but for what needs MPI, with
/// every routine's last call site known (in its stack slot, region `region + id`).
pub(in crate::trace) fn recorder(
    budget_words: usize,
    skip: u64,
    window: u64,
    region: u32,
) -> Recorder {
    let config = TraceConfig {
        budget_bytes: budget_words * std::mem::size_of::<u64>(),
        skip_supersteps: skip,
        record_supersteps: window,
        ..TraceConfig::default()
    };
    let mut r = Recorder::new(&config);
    r.world_size = 2;
    r.communicators[0].members = vec![0, 1];
    r.communicators.push(Communicator { members: vec![1] });
    r.comms.insert(world().key(), 0);
    r.comms.insert(sub().key(), 1);
    r.last_comm = (world().key(), 0);
    for id in 0..r.fast.len() {
        r.facts(id);
        let fast = &mut r.fast[id];
        fast.slot = Slot::learned(OFFSET, SITE);
        fast.region = region.wrapping_add(id as u32);
        fast.header = rawevents::call_header(fast.region);
    }
    r
}

/// A status of a receive from `source` with `tag` of `bytes` bytes.
fn status(source: c_int, tag: c_int, bytes: u32) -> MPI_Status {
    // SAFETY: MPI_Status is plain integers.
    let mut s: MPI_Status = unsafe { std::mem::zeroed() };
    s.MPI_SOURCE = source;
    s.MPI_TAG = tag;
    #[cfg(mpistat_family = "openmpi")]
    {
        s._ucount = bytes as _;
    }
    #[cfg(mpistat_family = "mpich")]
    {
        s.count_lo = bytes as _;
    }
    s
}

/// One traced call, as the test describes it.
#[derive(Clone, Debug)]
struct Call {
    routine: usize,
    /// None, the world, the other communicator.
    comm: u8,
    rc: c_int,
    peer: c_int,
    tag: c_int,
    bytes: u32,
    start: u64,
    duration: u64,
}

fn call() -> impl Strategy<Value = Call> {
    let peer = prop_oneof![Just(0), Just(1), Just(PROC_NULL), Just(NO_PEER), Just(7)];
    (
        0..ROUTINE_NAMES.len(),
        prop_oneof![Just(1u8), Just(1), Just(0), Just(2)],
        prop_oneof![Just(0), Just(0), Just(0), Just(1)],
        peer,
        -1..3,
        0..100_000u32,
        0..1u64 << 40,
        prop_oneof![0..1000u64, Just(1 << 32), 0..1u64 << 40],
    )
        .prop_map(
            |(routine, comm, rc, peer, tag, bytes, start, duration)| Call {
                routine,
                comm,
                rc,
                peer,
                tag,
                bytes,
                start,
                duration,
            },
        )
}

/// Record `call` with `record` (the stack the call sites are read from: `stack`).
fn with_ended(call: &Call, stack: &[usize; 2], record: impl FnOnce(Ended)) {
    let name = ROUTINE_NAMES[call.routine];
    let comm = [MPI_Comm::NONE, world(), sub()][usize::from(call.comm)];
    let datatype = Handle::from_key(0x3000);
    let count = MPI_Count::from(call.bytes);
    let mut received = status(call.peer, call.tag, call.bytes);
    let status_ptr: *mut MPI_Status = &mut received;
    let mut request: MPI_Request = Handle::from_key(0x4000 + call.routine);
    let request_ptr: *mut MPI_Request = &mut request;
    let measured = Measured {
        count: u64::from(call.bytes),
        bytes: u64::from(call.bytes),
        sent: u64::from(call.bytes / 2),
    };
    let elements = Traffic::Elements {
        count,
        datatype,
        peer: call.peer,
    };
    let (traffic, request) = match name {
        "MPI_Comm_rank" | "MPI_Barrier" => (Traffic::None, std::ptr::null_mut()),
        "MPI_Recv" => {
            let traffic = Traffic::Received {
                count,
                datatype,
                status: status_ptr,
            };
            (traffic, std::ptr::null_mut())
        }
        "MPI_Allreduce" => {
            let traffic = Traffic::Elements {
                count,
                datatype,
                peer: NO_PEER,
            };
            (traffic, std::ptr::null_mut())
        }
        "MPI_Isend" | "MPI_Irecv" => (elements, request_ptr),
        "MPI_Sendrecv" => {
            let traffic = Traffic::SendReceived {
                count,
                datatype,
                peer: call.peer,
                recv_count: count,
                recv_datatype: datatype,
                status: status_ptr,
            };
            (traffic, std::ptr::null_mut())
        }
        _ => (elements, std::ptr::null_mut()),
    };
    let ok = call.rc == 0;
    record(Ended {
        entered: Entered {
            id: routine(name),
            start: call.start,
            snapshot: false,
        },
        end: call.start.wrapping_add(call.duration),
        rc: call.rc,
        traffic,
        measured: if ok { measured } else { Measured::default() },
        args: Args {
            comm,
            tag: call.tag,
            request,
            ..Args::NONE
        },
        sp: stack.as_ptr() as usize,
    });
}

/// [`leave`]'s choice: the fast path, else the slow one.
fn leave_as_traced(r: &mut Recorder, ended: Ended) -> bool {
    match r.leave_fast(ended) {
        Fast::Done => true,
        Fast::Superstep => {
            r.superstep_done();
            true
        }
        Fast::Slow => {
            r.leave_slowly(&ended);
            false
        }
    }
}

/// What a recorder recorded (its cuts as the events before them: the paths' records of a
/// call may differ in size), and where it stands.
fn outcome(r: &Recorder) -> impl PartialEq + std::fmt::Debug {
    let events_before = |&cut: &usize| r.events.first(cut).decode(|t| t).len();
    (
        r.events.decode(|t| t),
        (1..=r.supersteps_recorded)
            .map(|k| {
                r.events
                    .position_after_superstep(k, None)
                    .unwrap_or(usize::MAX)
            })
            .map(|cut| {
                if cut == usize::MAX {
                    usize::MAX
                } else {
                    events_before(&cut)
                }
            })
            .collect::<Vec<_>>(),
        r.supersteps,
        r.state,
        r.stopped_by_budget,
        r.stop_note.clone(),
        r.traced_calls,
    )
}

proptest! {
    /// The same calls give the same events, cuts, supersteps and state whether each is
    /// recorded as trace mode does (`leave_fast`, and `leave_slowly` when it declines) or
    /// only by `leave_slowly`: calls with and without messages, failed ones, collectives
    /// ending supersteps, calls on other communicators, calls that post requests, calls
    /// too long or of a region too high for a `CALL` record, near the end of the window of
    /// supersteps. Near the end of the budget too, until the slow path alone stops: the
    /// fast path's `CALL` records take half the words, so it goes on after, its events
    /// continuing the slow path's.
    #[test]
    fn the_fast_path_records_what_the_slow_path_records(
        calls in prop::collection::vec(call(), 1..40),
        budget_words in prop_oneof![40..200usize, Just(1 << 16)],
        skip in prop_oneof![Just(0u64), 0..3u64],
        window in prop_oneof![Just(0u64), 1..4u64],
        region in prop_oneof![Just(0u32), Just((1 << 29) - 4)],
    ) {
        let stack = [0, SITE];
        let mut traced = recorder(budget_words, skip, window, region);
        let mut slowly = recorder(budget_words, skip, window, region);
        for call in &calls {
            with_ended(call, &stack, |ended| {
                leave_as_traced(&mut traced, ended);
                slowly.leave_slowly(&ended);
            });
            if slowly.stopped_by_budget {
                let (more, fewer) = (traced.events.decode(|t| t), slowly.events.decode(|t| t));
                prop_assert!(more.starts_with(&fewer));
                prop_assert!(traced.traced_calls >= slowly.traced_calls);
            } else {
                prop_assert_eq!(outcome(&traced), outcome(&slowly));
            }
        }
    }
}

/// The common calls take the fast path (so that the property above compares it).
#[test]
fn common_calls_take_the_fast_path() {
    let stack = [0, SITE];
    let mut r = recorder(1 << 16, 0, 0, 0);
    for (name, peer) in [
        ("MPI_Comm_rank", 0),
        ("MPI_Send", 1),
        ("MPI_Ssend", 1),
        ("MPI_Recv", 1),
        ("MPI_Allreduce", 0),
        ("MPI_Barrier", 0),
        ("MPI_Bcast", 0),
        ("MPI_Send", PROC_NULL),
    ] {
        let routine = ROUTINE_NAMES.iter().position(|&n| n == name).unwrap();
        let call = Call {
            routine,
            comm: 1,
            rc: 0,
            peer,
            tag: 5,
            bytes: 8,
            start: 1000,
            duration: 50,
        };
        let before = r.events.len();
        with_ended(&call, &stack, |ended| {
            assert!(leave_as_traced(&mut r, ended), "{name} to {peer}");
        });
        assert!(r.events.len() > before, "{name} to {peer} recorded nothing");
    }
}

/// The pages of the recorder's routine table that are mapped (`mincore`).
fn table_pages_mapped(r: &Recorder) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let start = r.fast.as_ptr() as usize;
    let pages = std::mem::size_of_val(&*r.fast).div_ceil(page);
    let mut mapped = vec![0u8; pages];
    // SAFETY: the table's own mapping (page-aligned, `pages` pages), one byte a page out.
    let rc = unsafe { libc::mincore(start as *mut _, pages * page, mapped.as_mut_ptr()) };
    assert_eq!(rc, 0);
    mapped.iter().filter(|&&b| b & 1 == 1).count()
}

/// A new recorder's routine table keeps no page resident (it is written only at a routine's
/// first traced call), and a traced call maps the page of its own routine's entry alone.
#[test]
fn a_routine_table_page_is_mapped_at_its_first_traced_call() {
    let stack = [0, SITE];
    let mut r = Recorder::new(&TraceConfig::default());
    assert!(r.fast.len() > 2 * 4096 / std::mem::size_of_val(&r.fast[0]));
    assert_eq!(table_pages_mapped(&r), 0);
    let call = Call {
        routine: 0,
        comm: 0,
        rc: 0,
        peer: 0,
        tag: 0,
        bytes: 0,
        start: 1000,
        duration: 50,
    };
    for _ in 0..3 {
        with_ended(&call, &stack, |ended| {
            leave_as_traced(&mut r, ended);
        });
    }
    assert_eq!(table_pages_mapped(&r), 1);
    let id = routine(ROUTINE_NAMES[0]);
    assert!(r.fast[id].facts_known);
    assert_eq!(r.fast[id].facts.class, MpiClass::PointToPoint);
}
