//! The event model: what a trace holds, per rank and globally.
//!
//! Times are integer clock ticks (`Definitions::ticks_per_second`, nanoseconds by default) on a
//! clock common to all ranks. Ranks and peers are world ranks; communicators list their members as
//! world ranks in communicator-rank order. An MPI call appears as `Enter` ... `Exit` (or
//! `CollectiveExit` for collectives) with its communication events in between; user regions may be
//! entered and left too and must nest properly.

use serde::Serialize;

/// Index into [`Definitions::regions`].
pub type RegionId = u32;
/// Index into [`Definitions::communicators`].
pub type CommId = u32;
/// A world rank.
pub type Rank = u32;
/// A point in time, in clock ticks.
pub type Ticks = u64;

/// A whole trace: global definitions and one event list per rank (index = world rank).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub definitions: Definitions,
    pub ranks: Vec<Vec<Event>>,
}

/// Everything shared by all ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct Definitions {
    pub ticks_per_second: u64,
    pub regions: Vec<Region>,
    pub communicators: Vec<Communicator>,
    /// Optional partition of each world rank (e.g. `MPI_APPNUM` of an MPMD job).
    pub partitions: Option<Vec<u32>>,
    pub cartesian: Option<Cartesian>,
}

impl Default for Definitions {
    fn default() -> Self {
        Definitions {
            ticks_per_second: 1_000_000_000,
            regions: Vec::new(),
            communicators: Vec::new(),
            partitions: None,
            cartesian: None,
        }
    }
}

/// A code region: an MPI call site or a user function.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Region {
    /// Routine or function name, e.g. `MPI_Recv` or `work`.
    pub name: String,
    /// Source location of the call site (`solver.c:120`), empty when unknown.
    pub site: String,
    pub role: RegionRole,
}

/// What a region is, for the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum RegionRole {
    User,
    Mpi(MpiClass),
}

/// How an MPI routine synchronises, which decides the wait-state patterns that apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum MpiClass {
    /// Point-to-point calls, request completions, and everything not synchronising.
    PointToPoint,
    Barrier,
    /// N×N collectives: every rank needs every other rank (allreduce, allgather, alltoall, ...).
    AllToAll,
    /// 1×N collectives: the root sends to all (bcast, scatter).
    OneToAll,
    /// N×1 collectives: all send to the root (reduce, gather).
    AllToOne,
}

impl MpiClass {
    /// The class of an MPI routine, from its name (`MPI_Allreduce`, `PMPI_Bcast`, `mpi_barrier_`).
    pub fn of_routine(name: &str) -> MpiClass {
        let lower = name.to_ascii_lowercase();
        let base = lower.trim_start_matches('p').trim_start_matches("mpi_");
        let base = base.trim_end_matches('_');
        let base = base
            .strip_prefix('i')
            .filter(|b| is_collective(b))
            .unwrap_or(base);
        match base {
            "barrier" => MpiClass::Barrier,
            "bcast" | "scatter" | "scatterv" => MpiClass::OneToAll,
            "reduce" | "gather" | "gatherv" => MpiClass::AllToOne,
            b if is_collective(b) => MpiClass::AllToAll,
            _ => MpiClass::PointToPoint,
        }
    }
}

fn is_collective(base: &str) -> bool {
    matches!(
        base,
        "barrier"
            | "bcast"
            | "scatter"
            | "scatterv"
            | "reduce"
            | "gather"
            | "gatherv"
            | "allreduce"
            | "allgather"
            | "allgatherv"
            | "alltoall"
            | "alltoallv"
            | "alltoallw"
            | "reduce_scatter"
            | "reduce_scatter_block"
            | "scan"
            | "exscan"
    )
}

/// A communicator: its members as world ranks, in communicator-rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Communicator {
    pub members: Vec<Rank>,
}

/// A Cartesian process topology: `coords[rank]` has one coordinate per dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cartesian {
    pub dims: Vec<u32>,
    pub coords: Vec<Vec<u32>>,
}

/// One event of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub time: Ticks,
    pub kind: EventKind,
}

/// What happened. Communication events lie inside the MPI call that performed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Enter {
        region: RegionId,
    },
    Exit,
    /// A message left (blocking or nonblocking send). `synchronous`: the call returned only
    /// after the receive had started (`MPI_Ssend`), so a late receiver makes the sender wait.
    Send {
        peer: Rank,
        tag: i32,
        comm: CommId,
        bytes: u64,
        synchronous: bool,
    },
    /// A message arrived (in `MPI_Recv`, or in the `MPI_Wait*`/`MPI_Test*` completing an
    /// `MPI_Irecv`); source and tag are the actual ones, so wildcards are already resolved.
    Recv {
        peer: Rank,
        tag: i32,
        comm: CommId,
        bytes: u64,
    },
    /// A nonblocking call posted a request (`MPI_Isend`, `MPI_Irecv`, ...).
    RequestPost {
        request: u64,
    },
    /// A request completed (in `MPI_Wait*`/`MPI_Test*`).
    RequestComplete {
        request: u64,
    },
    /// The end of a collective call; replaces `Exit`.
    CollectiveExit {
        comm: CommId,
        root: Option<Rank>,
        sent: u64,
        received: u64,
    },
}

impl Trace {
    /// The number of events over all ranks.
    pub fn event_count(&self) -> usize {
        self.ranks.iter().map(Vec::len).sum()
    }
}

/// One rank's own definitions, as the profiler writes them next to the rank's events: region and
/// communicator ids in that rank's events index these lists. Reading a directory of them unifies
/// the ranks' lists into [`Definitions`] (see `unify.rs`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LocalDefinitions {
    pub rank: Rank,
    /// `MPI_COMM_WORLD`'s size.
    pub world_size: u32,
    pub ticks_per_second: u64,
    pub regions: Vec<Region>,
    /// Communicators in creation order; the first is `MPI_COMM_WORLD`.
    pub communicators: Vec<Communicator>,
    /// `MPI_APPNUM` of this rank, if MPI gave one.
    pub partition: Option<u32>,
    /// A Cartesian topology spanning every rank: its dimensions and this rank's coordinates.
    pub cartesian: Option<(Vec<u32>, Vec<u32>)>,
    /// Measurements of this rank's clock against rank 0's (at `MPI_Init` and `MPI_Finalize`).
    pub clock: Vec<ClockSample>,
    /// Recording stopped before the end: why and where (the events end there).
    pub stopped: Option<String>,
    /// The loaded objects call sites point into (for turning addresses into source lines).
    pub modules: Vec<Module>,
}

/// Rank 0's clock minus this rank's, measured at this rank's time `local`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockSample {
    pub local: Ticks,
    pub offset: i64,
}

/// A loaded object (the executable or a shared library): call-site regions name it and an offset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Module {
    pub path: String,
    /// The GNU build-id, hex; empty when the object has none.
    pub build_id: String,
    pub load_address: u64,
}
