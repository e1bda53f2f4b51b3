//! The wait-state patterns: their metadata, and which one applies to a synchronisation point.
//!
//! As in Scalasca, a pattern declares its name and meaning; the forward replay asks each
//! synchronisation point which pattern it can exhibit ([`Pattern::for_point`]) and measures it.

use crate::timeline::SyncKind;
use mpistat_trace::model::MpiClass;
use serde::Serialize;

/// A kind of wait state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Pattern {
    LateSender,
    LateReceiver,
    WaitAtBarrier,
    WaitAtNxN,
    LateBroadcast,
    EarlyReduce,
}

impl Pattern {
    pub const ALL: [Pattern; 6] = [
        Pattern::LateSender,
        Pattern::LateReceiver,
        Pattern::WaitAtBarrier,
        Pattern::WaitAtNxN,
        Pattern::LateBroadcast,
        Pattern::EarlyReduce,
    ];

    /// Short name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::LateSender => "Late Sender",
            Pattern::LateReceiver => "Late Receiver",
            Pattern::WaitAtBarrier => "Wait at Barrier",
            Pattern::WaitAtNxN => "Wait at N x N",
            Pattern::LateBroadcast => "Late Broadcast",
            Pattern::EarlyReduce => "Early Reduce",
        }
    }

    /// What the waiting rank was doing, in plain language.
    pub fn description(self) -> &'static str {
        match self {
            Pattern::LateSender => "a receive waited for a send that started later",
            Pattern::LateReceiver => "a synchronous send waited for a receive that started later",
            Pattern::WaitAtBarrier => "a barrier waited for the last rank to arrive",
            Pattern::WaitAtNxN => "an all-to-all collective waited for the last rank to arrive",
            Pattern::LateBroadcast => "a rank waited in a one-to-all collective for a late root",
            Pattern::EarlyReduce => {
                "the root of an all-to-one collective waited for the last sender"
            }
        }
    }

    /// The pattern a synchronisation point may show, seen from the rank that owns it.
    /// `is_root`: this rank is the root of the collective.
    pub fn for_point(kind: SyncKind, is_root: bool) -> Option<Pattern> {
        match kind {
            SyncKind::Recv { .. } => Some(Pattern::LateSender),
            SyncKind::Send {
                synchronous: true, ..
            } => Some(Pattern::LateReceiver),
            SyncKind::Send {
                synchronous: false, ..
            } => None,
            SyncKind::Collective { class, .. } => match class {
                MpiClass::Barrier => Some(Pattern::WaitAtBarrier),
                MpiClass::AllToAll => Some(Pattern::WaitAtNxN),
                MpiClass::OneToAll => (!is_root).then_some(Pattern::LateBroadcast),
                MpiClass::AllToOne => is_root.then_some(Pattern::EarlyReduce),
                MpiClass::PointToPoint => None,
            },
        }
    }
}
