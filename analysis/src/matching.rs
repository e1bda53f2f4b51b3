//! Matching: which send meets which receive, and which collective calls form one instance.
//!
//! Messages follow MPI's non-overtaking rule: between one sender and one receiver, on one
//! communicator and tag, the k-th send matches the k-th receive. Receives carry the actual source
//! and tag, so wildcards are already resolved. The k-th collective call on a communicator of every
//! member forms one instance. Everything matched is a *synchronisation instance* with one id.

use crate::hash::FastMap;
use crate::model::{CommId, Definitions, MpiClass, Rank};
use crate::timeline::{RankTimeline, SyncKind};
use std::collections::VecDeque;

/// Index into [`Matching::instances`].
pub type InstanceId = u32;
/// Marks a synchronisation point without a partner.
pub const UNMATCHED: InstanceId = InstanceId::MAX;

/// Where a participant of an instance is: rank and operation index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Participant {
    pub rank: Rank,
    pub op: u32,
}

/// A matched synchronisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instance {
    Message {
        sender: Participant,
        receiver: Participant,
        synchronous: bool,
    },
    Collective {
        comm: CommId,
        class: MpiClass,
        root: Option<Rank>,
        members: Vec<Participant>,
    },
}

/// The result of matching: the instances, and for each rank and synchronisation point its instance.
#[derive(Debug, Clone, Default)]
pub struct Matching {
    pub instances: Vec<Instance>,
    /// `point_instance[rank][point]`, or [`UNMATCHED`].
    pub point_instance: Vec<Vec<InstanceId>>,
    /// Human-readable notes about what did not match.
    pub problems: Vec<String>,
}

/// A send waiting for its receive, by (sender, receiver, communicator, tag).
type ChannelKey = (Rank, Rank, CommId, i32);

/// Matches all messages and collectives of the trace.
pub fn match_all(timelines: &[RankTimeline], defs: &Definitions) -> Matching {
    let mut matching = Matching {
        point_instance: timelines
            .iter()
            .map(|t| vec![UNMATCHED; t.points.len()])
            .collect(),
        ..Matching::default()
    };
    match_messages(timelines, &mut matching);
    match_collectives(timelines, defs, &mut matching);
    matching
}

fn match_messages(timelines: &[RankTimeline], matching: &mut Matching) {
    let mut pending: FastMap<ChannelKey, VecDeque<(u32, u32, bool)>> = FastMap::default();
    for (sender, timeline) in timelines.iter().enumerate() {
        for (index, point) in timeline.points.iter().enumerate() {
            if let SyncKind::Send {
                peer,
                tag,
                comm,
                synchronous,
            } = point.kind
            {
                pending
                    .entry((sender as Rank, peer, comm, tag))
                    .or_default()
                    .push_back((index as u32, point.op, synchronous));
            }
        }
    }
    let mut unmatched_receives = 0usize;
    for (receiver, timeline) in timelines.iter().enumerate() {
        for (index, point) in timeline.points.iter().enumerate() {
            let SyncKind::Recv { peer, tag, comm } = point.kind else {
                continue;
            };
            let found = pending
                .get_mut(&(peer, receiver as Rank, comm, tag))
                .and_then(VecDeque::pop_front);
            let Some((send_point, send_op, synchronous)) = found else {
                unmatched_receives += 1;
                continue;
            };
            let id = matching.instances.len() as InstanceId;
            matching.instances.push(Instance::Message {
                sender: Participant {
                    rank: peer,
                    op: send_op,
                },
                receiver: Participant {
                    rank: receiver as Rank,
                    op: point.op,
                },
                synchronous,
            });
            matching.point_instance[receiver][index] = id;
            if let Some(slot) = matching.point_instance.get_mut(peer as usize) {
                slot[send_point as usize] = id;
            }
        }
    }
    let unmatched_sends: usize = pending.values().map(VecDeque::len).sum();
    if unmatched_sends > 0 {
        matching.problems.push(format!(
            "{unmatched_sends} sends have no matching receive; they are ignored"
        ));
    }
    if unmatched_receives > 0 {
        matching.problems.push(format!(
            "{unmatched_receives} receives have no matching send; they are ignored"
        ));
    }
}

fn match_collectives(timelines: &[RankTimeline], defs: &Definitions, matching: &mut Matching) {
    // Per communicator, the instances in call order, and per rank how many it has joined.
    let mut by_comm: FastMap<CommId, Vec<InstanceId>> = FastMap::default();
    for (rank, timeline) in timelines.iter().enumerate() {
        let mut joined: FastMap<CommId, usize> = FastMap::default();
        for (index, point) in timeline.points.iter().enumerate() {
            let SyncKind::Collective { comm, class, root } = point.kind else {
                continue;
            };
            let sequence = joined.entry(comm).or_default();
            let instances = by_comm.entry(comm).or_default();
            if *sequence == instances.len() {
                instances.push(matching.instances.len() as InstanceId);
                matching.instances.push(Instance::Collective {
                    comm,
                    class,
                    root,
                    members: Vec::new(),
                });
            }
            let id = instances[*sequence];
            *sequence += 1;
            if let Instance::Collective { members, .. } = &mut matching.instances[id as usize] {
                members.push(Participant {
                    rank: rank as Rank,
                    op: point.op,
                });
            }
            matching.point_instance[rank][index] = id;
        }
    }
    let mut incomplete = 0usize;
    for ids in by_comm.values() {
        for &id in ids {
            if let Instance::Collective { comm, members, .. } = &mut matching.instances[id as usize]
            {
                let expected = defs.communicators[*comm as usize].members.len();
                if members.len() != expected {
                    incomplete += 1;
                    for member in members.drain(..) {
                        let timeline = &timelines[member.rank as usize];
                        let points = timeline.ops[member.op as usize].points.clone();
                        for point in points {
                            matching.point_instance[member.rank as usize][point as usize] =
                                UNMATCHED;
                        }
                    }
                }
            }
        }
    }
    if incomplete > 0 {
        matching.problems.push(format!(
            "{incomplete} collective calls were not made by every member of their communicator; they are ignored"
        ));
    }
}
