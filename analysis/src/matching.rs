//! Matching: which send meets which receive, and which collective calls form one instance.
//!
//! Messages follow MPI's non-overtaking rule: between one sender and one receiver, on one
//! communicator and tag, the k-th send matches the k-th receive. Receives carry the actual source
//! and tag, so wildcards are already resolved. The k-th collective call on a communicator of every
//! member forms one instance. Everything matched is a *synchronisation instance* with one id.

use crate::timeline::{RankTimeline, SyncKind};
use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{CommId, Definitions, MpiClass, Rank};
use mpistat_trace::parallel::parallel_map;

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

/// A channel seen from one end: (the other rank, communicator, tag).
type Channel = (Rank, CommId, i32);

/// A send: its point, operation, and whether it is synchronous.
type SendPoint = (u32, u32, bool);

/// The channels of one rank, numbered as they appear; the most recent ones are found without
/// hashing (a rank talks to few peers, and mostly to the same ones again).
#[derive(Default)]
struct Channels {
    ids: FastMap<Channel, u32>,
    /// (channel, id + 1), 0 for an empty slot.
    recent: [(Channel, u32); 4],
}

impl Channels {
    /// The channel's id, numbering it when new.
    fn id(&mut self, channel: Channel) -> usize {
        if let Some(&(_, id)) = self.recent.iter().find(|&&(c, id)| id != 0 && c == channel) {
            return id as usize - 1;
        }
        let next = self.ids.len() as u32;
        let id = *self.ids.entry(channel).or_insert(next);
        self.recent.rotate_right(1);
        self.recent[0] = (channel, id + 1);
        id as usize
    }

    fn get(&self, channel: &Channel) -> Option<usize> {
        self.ids.get(channel).map(|&id| id as usize)
    }
}

/// One sender's sends by channel (receiver, communicator, tag), in order.
#[derive(Default)]
struct Outbox {
    channels: Channels,
    sends: Vec<Vec<SendPoint>>,
}

/// What matching one receiver's points found.
#[derive(Default)]
struct Received {
    /// Per matched receive, in order: (its point, its operation, sender, the send).
    messages: Vec<(u32, u32, Rank, SendPoint)>,
    /// Per channel (sender, communicator, tag), the indices into `messages` in order.
    channels: Channels,
    by_channel: Vec<Vec<u32>>,
    unmatched: usize,
    /// Its collective points: (point, operation, communicator, class, root).
    collectives: Vec<(u32, u32, CommId, MpiClass, Option<Rank>)>,
}

/// Matches all messages and collectives of the trace.
pub fn match_all(timelines: &[RankTimeline], defs: &Definitions) -> Matching {
    let ranks = timelines.len();
    // Per sender, its sends by channel (receiver, communicator, tag), in order.
    let outboxes: Vec<Outbox> = parallel_map(ranks, |sender| {
        let mut outbox = Outbox::default();
        for (index, point) in timelines[sender].points.iter().enumerate() {
            if let SyncKind::Send {
                peer,
                tag,
                comm,
                synchronous,
            } = point.kind
            {
                let channel = outbox.channels.id((peer, comm, tag));
                if channel == outbox.sends.len() {
                    outbox.sends.push(Vec::new());
                }
                outbox.sends[channel].push((index as u32, point.op, synchronous));
            }
        }
        outbox
    });
    // Per receiver, the k-th receive on a channel meets the k-th send on it.
    let received: Vec<Received> = parallel_map(ranks, |receiver| {
        let mut found = Received::default();
        let mut sends_of: Vec<Option<&[SendPoint]>> = Vec::new();
        for (index, point) in timelines[receiver].points.iter().enumerate() {
            let (peer, tag, comm) = match point.kind {
                SyncKind::Recv { peer, tag, comm } => (peer, tag, comm),
                SyncKind::Collective { comm, class, root } => {
                    found
                        .collectives
                        .push((index as u32, point.op, comm, class, root));
                    continue;
                }
                SyncKind::Send { .. } => continue,
            };
            let channel = found.channels.id((peer, comm, tag));
            if channel == found.by_channel.len() {
                found.by_channel.push(Vec::new());
                // The sender's side of the channel, looked up once.
                sends_of.push(outboxes.get(peer as usize).and_then(|outbox| {
                    let sends = outbox.channels.get(&(receiver as Rank, comm, tag))?;
                    Some(&outbox.sends[sends][..])
                }));
            }
            let taken = &mut found.by_channel[channel];
            let send = sends_of[channel].and_then(|sends| sends.get(taken.len()));
            match send {
                Some(&send) => {
                    taken.push(found.messages.len() as u32);
                    found.messages.push((index as u32, point.op, peer, send));
                }
                None => found.unmatched += 1,
            }
        }
        found
    });
    // Instances are numbered by receiver, then in receive order.
    let mut first_id = Vec::with_capacity(ranks);
    let mut instances = Vec::new();
    for (receiver, found) in received.iter().enumerate() {
        first_id.push(instances.len() as InstanceId);
        instances.extend(found.messages.iter().map(
            |&(_, op, sender, (_, send_op, synchronous))| Instance::Message {
                sender: Participant {
                    rank: sender,
                    op: send_op,
                },
                receiver: Participant {
                    rank: receiver as Rank,
                    op,
                },
                synchronous,
            },
        ));
    }
    let point_instance = parallel_map(ranks, |rank| {
        let mut ids = vec![UNMATCHED; timelines[rank].points.len()];
        let found = &received[rank];
        for (local, &(point, ..)) in found.messages.iter().enumerate() {
            ids[point as usize] = first_id[rank] + local as InstanceId;
        }
        let outbox = &outboxes[rank];
        for (&(receiver, comm, tag), &channel) in &outbox.channels.ids {
            let sends = &outbox.sends[channel as usize];
            let matched = received.get(receiver as usize).and_then(|r| {
                let channel = r.channels.get(&(rank as Rank, comm, tag))?;
                Some(&r.by_channel[channel])
            });
            if let Some(locals) = matched {
                for (send, &local) in sends.iter().zip(locals) {
                    ids[send.0 as usize] = first_id[receiver as usize] + local;
                }
            }
        }
        ids
    });
    let mut matching = Matching {
        instances,
        point_instance,
        problems: Vec::new(),
    };
    let sends: usize = outboxes.iter().flat_map(|o| &o.sends).map(Vec::len).sum();
    let matched: usize = received.iter().map(|r| r.messages.len()).sum();
    let unmatched_receives: usize = received.iter().map(|r| r.unmatched).sum();
    let collectives: Vec<_> = received.into_iter().map(|r| r.collectives).collect();
    let incomplete = match_collectives(timelines, &collectives, defs, &mut matching);
    matching.problems = problems(
        sends.saturating_sub(matched),
        unmatched_receives,
        incomplete,
    );
    matching
}

/// What did not match, for people: sends without a receive, receives without a send, and
/// collective calls that not every member made.
pub fn problems(
    unmatched_sends: usize,
    unmatched_receives: usize,
    incomplete: usize,
) -> Vec<String> {
    let mut problems = Vec::new();
    if unmatched_sends > 0 {
        problems.push(format!(
            "{unmatched_sends} sends have no matching receive; they are ignored"
        ));
    }
    if unmatched_receives > 0 {
        problems.push(format!(
            "{unmatched_receives} receives have no matching send; they are ignored"
        ));
    }
    if incomplete > 0 {
        problems.push(format!(
            "{incomplete} collective calls were not made by every member of their communicator; they are ignored"
        ));
    }
    problems
}

/// `collectives[rank]`: the rank's collective points (point, operation, communicator, class,
/// root), in order. Returns how many instances were incomplete (and left unmatched).
#[allow(clippy::type_complexity)]
fn match_collectives(
    timelines: &[RankTimeline],
    collectives: &[Vec<(u32, u32, CommId, MpiClass, Option<Rank>)>],
    defs: &Definitions,
    matching: &mut Matching,
) -> usize {
    // Per communicator, the instances in call order, and per rank how many it has joined.
    let mut by_comm: FastMap<CommId, Vec<InstanceId>> = FastMap::default();
    for (rank, points) in collectives.iter().enumerate() {
        let mut joined: FastMap<CommId, usize> = FastMap::default();
        for &(index, op, comm, class, root) in points {
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
                    op,
                });
            }
            matching.point_instance[rank][index as usize] = id;
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
    incomplete
}
