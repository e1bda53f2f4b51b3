//! Synthetic executions: a small simulator that produces causally consistent traces.
//!
//! Every rank has a clock. Computation advances it; a message is sent and received in one call
//! (the receive completes after the send started); a collective completes after the ranks it
//! waits for have entered. Any sequence of builder calls therefore gives a valid execution, which
//! the tests and benchmarks rely on.

use mpistat_trace::model::{
    Cartesian, CommId, Communicator, Definitions, Event, EventKind, MpiClass, Rank, Region,
    RegionId, RegionRole, Ticks, Trace,
};

/// Builds a [`Trace`] by simulating an execution.
#[derive(Debug, Clone)]
pub struct ExecutionBuilder {
    trace: Trace,
    clocks: Vec<Ticks>,
}

/// The world communicator of every built trace.
pub const WORLD: CommId = 0;

impl ExecutionBuilder {
    /// `ranks` ranks, all starting at time 0, with the world communicator.
    pub fn new(ranks: u32) -> Self {
        let mut trace = Trace {
            definitions: Definitions::default(),
            ranks: vec![Vec::new(); ranks as usize],
        };
        trace.definitions.communicators.push(Communicator {
            members: (0..ranks).collect(),
        });
        ExecutionBuilder {
            trace,
            clocks: vec![0; ranks as usize],
        }
    }

    /// How many ranks the execution has.
    pub fn ranks(&self) -> Rank {
        self.clocks.len() as Rank
    }

    /// Defines a region (a user function, or an MPI call site when `name` is an MPI routine).
    pub fn region(&mut self, name: &str, site: &str) -> RegionId {
        let role = if name.to_ascii_lowercase().starts_with("mpi_") {
            RegionRole::Mpi(MpiClass::of_routine(name))
        } else {
            RegionRole::User
        };
        let region = Region {
            name: name.to_string(),
            site: site.to_string(),
            role,
        };
        let regions = &mut self.trace.definitions.regions;
        if let Some(id) = regions.iter().position(|r| *r == region) {
            return id as RegionId;
        }
        regions.push(region);
        (regions.len() - 1) as RegionId
    }

    /// Defines a communicator with these world ranks.
    pub fn communicator(&mut self, members: Vec<Rank>) -> CommId {
        self.trace
            .definitions
            .communicators
            .push(Communicator { members });
        (self.trace.definitions.communicators.len() - 1) as CommId
    }

    pub fn set_partitions(&mut self, partitions: Vec<u32>) {
        self.trace.definitions.partitions = Some(partitions);
    }

    pub fn set_cartesian(&mut self, cartesian: Cartesian) {
        self.trace.definitions.cartesian = Some(cartesian);
    }

    fn push(&mut self, rank: Rank, time: Ticks, kind: EventKind) {
        self.trace.ranks[rank as usize].push(Event { time, kind });
    }

    /// `rank` runs `region` for `duration`.
    pub fn compute(&mut self, rank: Rank, region: RegionId, duration: Ticks) {
        let start = self.clocks[rank as usize];
        self.push(rank, start, EventKind::Enter { region });
        self.push(rank, start + duration, EventKind::Exit);
        self.clocks[rank as usize] = start + duration;
    }

    /// A message from `from` to `to`: `send` and `recv` are the call sites; the send takes
    /// `send_cost`, the receive `recv_cost` after the send started. A synchronous send also lasts
    /// until the receive started.
    #[allow(clippy::too_many_arguments)]
    pub fn message(
        &mut self,
        (from, send): (Rank, RegionId),
        (to, recv): (Rank, RegionId),
        tag: i32,
        bytes: u64,
        synchronous: bool,
        send_cost: Ticks,
        recv_cost: Ticks,
    ) {
        let send_enter = self.clocks[from as usize];
        let recv_enter = self.clocks[to as usize];
        let send_exit = if synchronous {
            send_enter.max(recv_enter)
        } else {
            send_enter
        } + send_cost;
        let recv_exit = send_enter.max(recv_enter) + recv_cost;
        self.push(from, send_enter, EventKind::Enter { region: send });
        self.push(
            from,
            send_enter,
            EventKind::Send {
                peer: to,
                tag,
                comm: WORLD,
                bytes,
                synchronous,
            },
        );
        self.push(from, send_exit, EventKind::Exit);
        self.push(to, recv_enter, EventKind::Enter { region: recv });
        self.push(
            to,
            recv_exit,
            EventKind::Recv {
                peer: from,
                tag,
                comm: WORLD,
                bytes,
            },
        );
        self.push(to, recv_exit, EventKind::Exit);
        self.clocks[from as usize] = send_exit;
        self.clocks[to as usize] = recv_exit;
    }

    /// A collective call `region` on `comm` by all its members, taking `cost` after it can finish.
    pub fn collective(&mut self, comm: CommId, region: RegionId, root: Option<Rank>, cost: Ticks) {
        let members = self.trace.definitions.communicators[comm as usize]
            .members
            .clone();
        let class = match self.trace.definitions.regions[region as usize].role {
            RegionRole::Mpi(class) => class,
            RegionRole::User => MpiClass::Barrier,
        };
        let enters: Vec<Ticks> = members.iter().map(|&r| self.clocks[r as usize]).collect();
        let last = enters.iter().copied().max().unwrap_or(0);
        let root_enter = root
            .and_then(|root| members.iter().position(|&m| m == root))
            .map_or(last, |i| enters[i]);
        let last_non_root = members
            .iter()
            .zip(&enters)
            .filter(|(&m, _)| Some(m) != root)
            .map(|(_, &e)| e)
            .max()
            .unwrap_or(root_enter);
        for (&member, &enter) in members.iter().zip(&enters) {
            let is_root = Some(member) == root;
            let ready = match class {
                MpiClass::OneToAll if !is_root => enter.max(root_enter),
                MpiClass::OneToAll => enter,
                MpiClass::AllToOne if is_root => enter.max(last_non_root),
                MpiClass::AllToOne => enter,
                _ => last,
            };
            self.push(member, enter, EventKind::Enter { region });
            self.push(
                member,
                ready + cost,
                EventKind::CollectiveExit {
                    comm,
                    root,
                    sent: 8,
                    received: 8,
                },
            );
            self.clocks[member as usize] = ready + cost;
        }
    }

    pub fn finish(self) -> Trace {
        self.trace
    }
}
