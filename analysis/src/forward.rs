//! Forward replay: wait states.
//!
//! For every operation, the waiting time is measured against the partners' enter times (Late
//! Sender, Late Receiver, Wait at Barrier, Wait at N×N, Late Broadcast, Early Reduce). An
//! operation with several synchronisation points (`MPI_Sendrecv`, `MPI_Waitall`) waits for the
//! latest partner only; that partner is the *cause*.
//!
//! The replay also fixes each synchronisation point's *window start*: when this rank last left a
//! synchronisation with the same ranks (the same peer, or a collective on a communicator holding
//! the peer; for collectives, the previous collective on the communicator). A wait state's
//! synchronisation interval starts at the later of the waiter's and the cause's window starts, so
//! both sides profile the same stretch of time.

use crate::matching::{Instance, InstanceId, Matching, Participant, UNMATCHED};
use crate::patterns::Pattern;
use crate::replay::parallel_for_each_mut;
use crate::timeline::{RankTimeline, SyncKind};
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{Definitions, MpiClass, Rank, Ticks};
use mpistat_trace::parallel::parallel_map;

/// A wait state: operation `op` of its rank waited `wait` ticks from its enter on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaitState {
    pub op: u32,
    /// When the operation was entered (copied here: the backward passes read it per wait).
    pub enter: Ticks,
    pub wait: Ticks,
    pub pattern: Pattern,
    /// The synchronisation instance it waited at, and the rank that arrived late.
    pub instance: InstanceId,
    pub cause: Participant,
    /// When the cause entered its operation.
    pub cause_enter: Ticks,
    /// Start of the synchronisation interval `[window_start, enter)`.
    pub window_start: Ticks,
}

/// The forward replay's annotations.
#[derive(Debug, Clone, Default)]
pub struct Forward {
    /// Per rank, its wait states in operation order.
    pub waits: Vec<Vec<WaitState>>,
    /// Per instance, how many ranks waited at it (all for the same cause).
    pub waiters: Vec<u32>,
    /// The waiters of instance `i` are `waiter_list[waiter_start[i]..waiter_start[i + 1]]`:
    /// (rank, index into its waits), by rank.
    pub waiter_start: Vec<u32>,
    pub waiter_list: Vec<(Rank, u32)>,
    /// Per rank, the instances where it caused waiting: (its operation, instance), in order.
    pub caused: Vec<Vec<(u32, InstanceId)>>,
}

impl Forward {
    /// The wait states at `instance`: (rank, index into its waits).
    pub fn waiters_of(&self, instance: InstanceId) -> &[(Rank, u32)] {
        let i = instance as usize;
        &self.waiter_list[self.waiter_start[i] as usize..self.waiter_start[i + 1] as usize]
    }

    /// Total waiting time at synchronisation points, over all ranks.
    pub fn total_waiting(&self) -> Ticks {
        self.waits.iter().flatten().map(|w| w.wait).sum()
    }
}

/// Enter time and participant of the latest arrivals at a collective instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrivals {
    pub last: (Ticks, Participant),
    pub last_non_root: Option<(Ticks, Participant)>,
    pub root: Option<(Ticks, Participant)>,
}

impl Arrivals {
    /// The late partner at a collective of `class`, as the waiters see it.
    pub fn cause(&self, class: MpiClass) -> Option<(Ticks, Participant)> {
        match class {
            MpiClass::OneToAll => self.root,
            MpiClass::AllToOne => self.last_non_root,
            _ => Some(self.last),
        }
    }
}

/// The latest arrivals among a collective's members: (enter time, participant) each.
pub fn latest_arrivals(members: &[(Ticks, Participant)], root: Option<Rank>) -> Option<Arrivals> {
    let latest = |it: &mut dyn Iterator<Item = &(Ticks, Participant)>| {
        it.copied()
            .max_by_key(|&(time, p)| (time, std::cmp::Reverse(p.rank)))
    };
    Some(Arrivals {
        last: latest(&mut members.iter())?,
        last_non_root: latest(&mut members.iter().filter(|(_, p)| Some(p.rank) != root)),
        root: latest(&mut members.iter().filter(|(_, p)| Some(p.rank) == root)),
    })
}

/// Per communicator, its members sorted (what [`local_window_starts`] looks peers up in).
pub fn sorted_members(defs: &Definitions) -> Vec<Vec<Rank>> {
    defs.communicators
        .iter()
        .map(|c| {
            let mut m = c.members.clone();
            m.sort_unstable();
            m
        })
        .collect()
}

/// Runs the forward replay over all ranks in parallel.
pub fn replay(timelines: &[RankTimeline], matching: &Matching, defs: &Definitions) -> Forward {
    let members = sorted_members(defs);
    let window_starts = parallel_map(timelines.len(), |rank| {
        local_window_starts(&timelines[rank], timelines.len(), &members)
    });
    // Collectives only (messages are most instances and need none).
    let arrivals: FastMap<InstanceId, Arrivals> = matching
        .instances
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Instance::Collective { .. }))
        .filter_map(|(id, i)| Some((id as InstanceId, collective_arrivals(i, timelines)?)))
        .collect();
    let waits = parallel_map(timelines.len(), |rank| {
        rank_waits(rank as Rank, timelines, matching, &arrivals, &window_starts)
    });
    let mut waiters = vec![0u32; matching.instances.len()];
    for wait in waits.iter().flatten() {
        waiters[wait.instance as usize] += 1;
    }
    let mut waiter_start = Vec::with_capacity(waiters.len() + 1);
    let mut next = 0u32;
    waiter_start.push(0);
    for &count in &waiters {
        next += count;
        waiter_start.push(next);
    }
    let mut fill = waiter_start.clone();
    let mut waiter_list = vec![(0, 0); next as usize];
    let mut caused = vec![Vec::new(); timelines.len()];
    for (rank, rank_waits) in waits.iter().enumerate() {
        for (index, wait) in rank_waits.iter().enumerate() {
            let slot = &mut fill[wait.instance as usize];
            if *slot == waiter_start[wait.instance as usize] {
                caused[wait.cause.rank as usize].push((wait.cause.op, wait.instance));
            }
            waiter_list[*slot as usize] = (rank as Rank, index as u32);
            *slot += 1;
        }
    }
    // Each list is a few runs already in order (one per waiting rank): a merge, nearly.
    parallel_for_each_mut(&mut caused, |_, list| list.sort());
    Forward {
        waits,
        waiters,
        waiter_start,
        waiter_list,
        caused,
    }
}

fn collective_arrivals(instance: &Instance, timelines: &[RankTimeline]) -> Option<Arrivals> {
    let Instance::Collective { members, root, .. } = instance else {
        return None;
    };
    let entries: Vec<(Ticks, Participant)> = members
        .iter()
        .map(|p| (timelines[p.rank as usize].ops[p.op as usize].enter, *p))
        .collect();
    latest_arrivals(&entries, *root)
}

/// Each point's window start on this rank alone. `members`: per communicator, its members sorted.
pub fn local_window_starts(
    timeline: &RankTimeline,
    ranks: usize,
    members: &[Vec<Rank>],
) -> Vec<Ticks> {
    // Dense per peer and per communicator (`NONE`: no synchronisation yet), and the
    // communicators used so far: a point looks at those, not at every communicator.
    const NONE: Ticks = Ticks::MAX;
    // A rank without points (one without a trace file) needs no table of every peer: a world
    // of many such ranks made this quadratic.
    if timeline.points.is_empty() {
        return Vec::new();
    }
    let mut last_with_peer: Vec<Ticks> = vec![NONE; ranks];
    let mut last_on_comm: Vec<Ticks> = vec![NONE; members.len()];
    let mut used_comms: Vec<u32> = Vec::new();
    // The latest collective with each peer, valid while no collective ended since
    // (`collectives` counts them): recomputed once per peer and collective, not per point.
    let mut collectives = 0u64;
    let mut with_peer_cache: Vec<(u64, Ticks)> = vec![(u64::MAX, NONE); ranks];
    let known = |t: Ticks| (t != NONE).then_some(t);
    let mut starts = Vec::with_capacity(timeline.points.len());
    for op in &timeline.ops {
        let points = &timeline.points[op.points.start as usize..op.points.end as usize];
        for point in points {
            let start = match point.kind {
                SyncKind::Send { peer, .. } | SyncKind::Recv { peer, .. } => {
                    let p2p = last_with_peer.get(peer as usize).copied().and_then(known);
                    let collective = match with_peer_cache.get_mut(peer as usize) {
                        Some(cached) => {
                            if cached.0 != collectives {
                                let latest = used_comms
                                    .iter()
                                    .filter(|&&c| members[c as usize].binary_search(&peer).is_ok())
                                    .map(|&c| last_on_comm[c as usize])
                                    .max()
                                    .unwrap_or(NONE);
                                *cached = (collectives, latest);
                            }
                            known(cached.1)
                        }
                        None => None,
                    };
                    p2p.max(collective)
                }
                SyncKind::Collective { comm, .. } => known(last_on_comm[comm as usize]),
            };
            starts.push(start.unwrap_or(timeline.start));
        }
        for point in points {
            match point.kind {
                SyncKind::Send { peer, .. } | SyncKind::Recv { peer, .. } => {
                    if let Some(last) = last_with_peer.get_mut(peer as usize) {
                        *last = op.exit;
                    }
                }
                SyncKind::Collective { comm, .. } => {
                    if last_on_comm[comm as usize] == NONE {
                        used_comms.push(comm);
                    }
                    last_on_comm[comm as usize] = op.exit;
                    collectives += 1;
                }
            }
        }
    }
    starts
}

/// The point of `participant`'s operation that belongs to `instance`.
fn point_of(
    timelines: &[RankTimeline],
    matching: &Matching,
    participant: Participant,
    instance: InstanceId,
) -> usize {
    let op = &timelines[participant.rank as usize].ops[participant.op as usize];
    (op.points.start as usize..op.points.end as usize)
        .find(|&p| matching.point_instance[participant.rank as usize][p] == instance)
        .unwrap_or(op.points.start as usize)
}

/// The late partner of a synchronisation point: the instance, the participant that arrived late,
/// and when it entered its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partner {
    pub instance: InstanceId,
    pub participant: Participant,
    pub enter: Ticks,
}

fn rank_waits(
    rank: Rank,
    timelines: &[RankTimeline],
    matching: &Matching,
    arrivals: &FastMap<InstanceId, Arrivals>,
    window_starts: &[Vec<Ticks>],
) -> Vec<WaitState> {
    let enter_of = |p: Participant| timelines[p.rank as usize].ops[p.op as usize].enter;
    let partner = |point: usize, pattern: Pattern| {
        let instance = matching.point_instance[rank as usize][point];
        if instance == UNMATCHED {
            return None;
        }
        let (enter, participant) = match (&matching.instances[instance as usize], pattern) {
            (Instance::Message { sender, .. }, Pattern::LateSender) => {
                Some((enter_of(*sender), *sender))
            }
            (Instance::Message { receiver, .. }, Pattern::LateReceiver) => {
                Some((enter_of(*receiver), *receiver))
            }
            (Instance::Collective { class, .. }, _) => {
                arrivals.get(&instance).and_then(|a| a.cause(*class))
            }
            _ => None,
        }?;
        Some(Partner {
            instance,
            participant,
            enter,
        })
    };
    let partner_window = |_: usize, partner: &Partner| {
        let point = point_of(timelines, matching, partner.participant, partner.instance);
        window_starts[partner.participant.rank as usize][point]
    };
    waits_of_rank(
        rank,
        &timelines[rank as usize],
        &window_starts[rank as usize],
        partner,
        partner_window,
    )
}

/// The wait states of one rank. `window_starts`: its points' window starts; `partner(point,
/// pattern)`: the late partner of a point of its (`None` when unmatched or when the pattern does
/// not apply); `partner_window(point, partner)`: the window start of the partner's point. The one-process replay
/// looks the partners up in the whole trace; the distributed one (`distributed.rs`) in what the
/// partners' processes sent.
pub fn waits_of_rank(
    rank: Rank,
    timeline: &RankTimeline,
    window_starts: &[Ticks],
    partner: impl Fn(usize, Pattern) -> Option<Partner>,
    partner_window: impl Fn(usize, &Partner) -> Ticks,
) -> Vec<WaitState> {
    let mut waits = Vec::new();
    for (op_index, op) in timeline.ops.iter().enumerate() {
        let mut worst: Option<WaitState> = None;
        let range = op.points.start as usize..op.points.end as usize;
        let own_windows = &window_starts[range.clone()];
        for (point, &own_window) in range.zip(own_windows) {
            let kind = timeline.points[point].kind;
            let is_root = matches!(kind, SyncKind::Collective { root: Some(r), .. } if r == rank);
            let Some(pattern) = Pattern::for_point(kind, is_root) else {
                continue;
            };
            let Some(late) = partner(point, pattern) else {
                continue;
            };
            let wait = late.enter.min(op.exit).saturating_sub(op.enter);
            if wait == 0 || late.participant.rank == rank || worst.is_some_and(|w| w.wait >= wait) {
                continue;
            }
            let window_start = own_window.max(partner_window(point, &late)).min(op.enter);
            worst = Some(WaitState {
                op: op_index as u32,
                enter: op.enter,
                wait,
                pattern,
                instance: late.instance,
                cause: late.participant,
                cause_enter: late.enter,
                window_start,
            });
        }
        waits.extend(worst);
    }
    waits
}
