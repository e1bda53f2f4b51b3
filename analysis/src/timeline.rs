//! Per-rank preprocessing: events become time pieces labelled by call path, and MPI operations
//! with their synchronisation points.
//!
//! The pieces tile the rank's time from its first to its last event; every piece has the call path
//! that was running. An operation is an outermost MPI call that communicated; its synchronisation
//! points are its sends, receives and collective exit, in trace order.

use crate::callpath::{CallNode, CallTree, CallpathId, Frame};
use crate::error::AnalysisError;
use mpistat_trace::model::{
    CommId, Definitions, Event, EventKind, MpiClass, Rank, RegionId, RegionRole, Ticks,
};
use std::ops::Range;

/// A stretch of time on one call path, ending at `end` (it starts where the previous piece ends).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    pub end: Ticks,
    pub callpath: CallpathId,
}

/// An outermost MPI call that communicated.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub enter: Ticks,
    pub exit: Ticks,
    pub callpath: CallpathId,
    /// Index of the first piece inside the call.
    pub first_piece: u32,
    /// Its synchronisation points, in [`RankTimeline::points`].
    pub points: Range<u32>,
}

/// One communication of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    Send {
        peer: Rank,
        tag: i32,
        comm: CommId,
        synchronous: bool,
    },
    Recv {
        peer: Rank,
        tag: i32,
        comm: CommId,
    },
    Collective {
        comm: CommId,
        class: MpiClass,
        root: Option<Rank>,
    },
}

/// A synchronisation point: a communication and the operation it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncPoint {
    pub op: u32,
    pub kind: SyncKind,
}

/// The preprocessed trace of one rank.
#[derive(Debug, Clone, Default)]
pub struct RankTimeline {
    /// The number of trace events it was built from.
    pub events: usize,
    pub start: Ticks,
    pub end: Ticks,
    pub pieces: Vec<Piece>,
    pub ops: Vec<Op>,
    pub points: Vec<SyncPoint>,
}

impl RankTimeline {
    /// Where piece `index` starts.
    pub fn piece_start(&self, index: usize) -> Ticks {
        if index == 0 {
            self.start
        } else {
            self.pieces[index - 1].end
        }
    }

    /// Time per call path within `[from, to)`, clipped to the window, in piece order.
    /// `last_piece` bounds the search: no piece after it starts before `to`.
    pub fn for_each_piece_in(
        &self,
        from: Ticks,
        to: Ticks,
        last_piece: usize,
        mut visit: impl FnMut(CallpathId, Ticks),
    ) {
        let mut index = last_piece.min(self.pieces.len());
        while index > 0 {
            index -= 1;
            let piece = self.pieces[index];
            let start = self.piece_start(index);
            if piece.end <= from {
                break;
            }
            let clipped = piece.end.min(to).saturating_sub(start.max(from));
            if clipped > 0 {
                visit(piece.callpath, clipped);
            }
        }
    }
}

/// Builds the timeline of `rank` and its call tree (ids local to this rank) from its events;
/// `expected_events` sizes the buffers.
pub fn build(
    rank: Rank,
    events: impl IntoIterator<Item = Event>,
    expected_events: usize,
    defs: &Definitions,
) -> Result<(RankTimeline, CallTree), AnalysisError> {
    let mut events = events.into_iter();
    let mut builder = Builder {
        rank,
        defs,
        tree: CallTree::default(),
        timeline: RankTimeline::default(),
        stack: Vec::new(),
        open_call: None,
        last_top_level: None,
        last_time: 0,
    };
    let mut count = 0;
    if let Some(first) = events.next() {
        builder.timeline.start = first.time;
        builder.last_time = first.time;
        builder.event(0, &first)?;
        count = 1;
    }
    // At most a piece, an operation and a point per two events (a collective is two events).
    // Reserving that much costs address space only, while growing a buffer copies it.
    builder.timeline.pieces.reserve(expected_events / 2 + 1);
    builder.timeline.ops.reserve(expected_events / 2 + 1);
    builder.timeline.points.reserve(expected_events / 2 + 1);
    for event in events {
        builder.event(count, &event)?;
        count += 1;
    }
    if !builder.stack.is_empty() {
        return Err(AnalysisError::BadNesting {
            rank,
            index: count,
            what: "the trace ends inside a region",
        });
    }
    builder.timeline.end = builder.last_time;
    builder.timeline.events = count;
    Ok((builder.timeline, builder.tree))
}

/// The open outermost MPI call.
struct OpenCall {
    /// Its depth in the region stack.
    depth: usize,
    enter: Ticks,
    first_piece: u32,
    /// Its operation, once it communicated.
    op: Option<u32>,
}

struct Builder<'a> {
    rank: Rank,
    defs: &'a Definitions,
    tree: CallTree,
    timeline: RankTimeline,
    /// Open regions: (region, call path).
    stack: Vec<(RegionId, CallpathId)>,
    open_call: Option<OpenCall>,
    last_top_level: Option<RegionId>,
    last_time: Ticks,
}

impl Builder<'_> {
    fn event(&mut self, index: usize, event: &Event) -> Result<(), AnalysisError> {
        let rank = self.rank;
        if event.time < self.last_time {
            return Err(AnalysisError::TimeGoesBack {
                rank,
                index,
                time: event.time,
                previous: self.last_time,
            });
        }
        match event.kind {
            EventKind::Enter { region } => {
                let role = self
                    .defs
                    .regions
                    .get(region as usize)
                    .ok_or(AnalysisError::UnknownId {
                        rank,
                        index,
                        what: "region",
                        id: region.into(),
                    })?
                    .role;
                self.close_piece(event.time, Some(region));
                let parent = self.stack.last().map(|&(_, callpath)| callpath);
                let callpath = self.tree.intern(CallNode {
                    parent,
                    frame: Frame::Region(region),
                });
                if matches!(role, RegionRole::Mpi(_)) && self.open_call.is_none() {
                    self.open_call = Some(OpenCall {
                        depth: self.stack.len(),
                        enter: event.time,
                        first_piece: self.timeline.pieces.len() as u32,
                        op: None,
                    });
                }
                self.stack.push((region, callpath));
            }
            EventKind::Exit => self.exit(index, event.time)?,
            EventKind::CollectiveExit { comm, root, .. } => {
                let region = self.stack.last().map(|&(region, _)| region);
                let class = match region.map(|r| self.defs.regions[r as usize].role) {
                    Some(RegionRole::Mpi(class)) => class,
                    _ => {
                        return Err(AnalysisError::BadNesting {
                            rank,
                            index,
                            what: "a collective exit that does not leave an MPI call",
                        })
                    }
                };
                self.check_comm(index, comm)?;
                self.point(
                    index,
                    event.time,
                    SyncKind::Collective { comm, class, root },
                )?;
                self.exit(index, event.time)?;
            }
            EventKind::Send {
                peer,
                tag,
                comm,
                synchronous,
                ..
            } => {
                self.check_comm(index, comm)?;
                self.point(
                    index,
                    event.time,
                    SyncKind::Send {
                        peer,
                        tag,
                        comm,
                        synchronous,
                    },
                )?;
            }
            EventKind::Recv {
                peer, tag, comm, ..
            } => {
                self.check_comm(index, comm)?;
                self.point(index, event.time, SyncKind::Recv { peer, tag, comm })?;
            }
            EventKind::RequestPost { .. } | EventKind::RequestComplete { .. } => {}
        }
        self.last_time = event.time;
        Ok(())
    }

    fn check_comm(&self, index: usize, comm: CommId) -> Result<(), AnalysisError> {
        if (comm as usize) < self.defs.communicators.len() {
            Ok(())
        } else {
            Err(AnalysisError::UnknownId {
                rank: self.rank,
                index,
                what: "communicator",
                id: comm.into(),
            })
        }
    }

    /// Ends the piece running up to `time`; `next` is the region being entered, if any.
    fn close_piece(&mut self, time: Ticks, next: Option<RegionId>) {
        if time
            <= self
                .timeline
                .pieces
                .last()
                .map_or(self.timeline.start, |p| p.end)
        {
            return;
        }
        let callpath = match self.stack.last() {
            Some(&(_, callpath)) => callpath,
            None => self.tree.intern(CallNode {
                parent: None,
                frame: Frame::Between(self.last_top_level, next),
            }),
        };
        self.timeline.pieces.push(Piece {
            end: time,
            callpath,
        });
    }

    fn exit(&mut self, index: usize, time: Ticks) -> Result<(), AnalysisError> {
        self.close_piece(time, None);
        let Some((region, callpath)) = self.stack.pop() else {
            return Err(AnalysisError::BadNesting {
                rank: self.rank,
                index,
                what: "an exit without a matching enter",
            });
        };
        if let Some(call) = self
            .open_call
            .take_if(|call| call.depth == self.stack.len())
        {
            if let Some(op) = call.op {
                let op = &mut self.timeline.ops[op as usize];
                op.exit = time;
                op.callpath = callpath;
            }
        }
        if self.stack.is_empty() {
            self.last_top_level = Some(region);
        }
        Ok(())
    }

    fn point(&mut self, index: usize, time: Ticks, kind: SyncKind) -> Result<(), AnalysisError> {
        self.close_piece(time, None);
        let Some(call) = self.open_call.as_mut() else {
            return Err(AnalysisError::BadNesting {
                rank: self.rank,
                index,
                what: "communication outside an MPI call",
            });
        };
        let op = match call.op {
            Some(op) => op,
            None => {
                let op = self.timeline.ops.len() as u32;
                let point = self.timeline.points.len() as u32;
                call.op = Some(op);
                self.timeline.ops.push(Op {
                    enter: call.enter,
                    exit: time,
                    callpath: self.stack[call.depth].1,
                    first_piece: call.first_piece,
                    points: point..point,
                });
                op
            }
        };
        self.timeline.points.push(SyncPoint { op, kind });
        self.timeline.ops[op as usize].points.end = self.timeline.points.len() as u32;
        Ok(())
    }
}
