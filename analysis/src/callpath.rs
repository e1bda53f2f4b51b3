//! Call paths: interned stacks of frames, labelled so users recognise their code.
//!
//! A frame is a region (an MPI call site or a user function) or, for time spent outside every
//! region, the computation *between* two MPI calls, labelled by those two call sites. Profilers
//! that record only MPI calls therefore still give computation a recognisable name:
//! `compute after MPI_Recv (solver.c:140) before MPI_Allreduce (solver.c:188)`.

use mpistat_trace::hash::FastMap;
use mpistat_trace::model::{Region, RegionId};

/// Index into [`CallTree::nodes`].
pub type CallpathId = u32;

/// One step of a call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frame {
    Region(RegionId),
    /// Computation outside every region, after the first and before the second MPI call.
    Between(Option<RegionId>, Option<RegionId>),
}

/// A node: a frame under a parent call path (`None` for top level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallNode {
    pub parent: Option<CallpathId>,
    pub frame: Frame,
}

/// All call paths of a trace, interned.
#[derive(Debug, Clone, Default)]
pub struct CallTree {
    pub nodes: Vec<CallNode>,
    index: FastMap<CallNode, CallpathId>,
    /// Recently interned nodes by a cheap hash: a trace interns the same few nodes once per
    /// event, so this answers almost every lookup without the map.
    recent: Vec<(CallNode, CallpathId)>,
}

const RECENT_SLOTS: usize = 256;

impl CallNode {
    fn recent_slot(&self) -> usize {
        let (a, b) = match self.frame {
            Frame::Region(region) => (region, 0),
            Frame::Between(after, before) => (
                after.map_or(u32::MAX, |r| r.wrapping_add(1)),
                before.map_or(u32::MAX, |r| r.wrapping_add(1)),
            ),
        };
        let parent = self.parent.map_or(0, |p| p.wrapping_add(1));
        let mixed = (u64::from(a) | u64::from(b) << 32).wrapping_add(u64::from(parent) << 16);
        (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % RECENT_SLOTS
    }
}

impl CallTree {
    /// The id of `node`, adding it when new.
    pub fn intern(&mut self, node: CallNode) -> CallpathId {
        let slot = node.recent_slot();
        if let Some(&(recent, id)) = self.recent.get(slot) {
            if recent == node {
                return id;
            }
        }
        let id = match self.index.get(&node) {
            Some(&id) => id,
            None => {
                let id = self.nodes.len() as CallpathId;
                self.nodes.push(node);
                self.index.insert(node, id);
                id
            }
        };
        if self.recent.is_empty() {
            // An entry that no real node equals: a top-level node cannot be its own parent.
            let never = CallNode {
                parent: Some(CallpathId::MAX),
                frame: Frame::Region(RegionId::MAX),
            };
            self.recent = vec![(never, CallpathId::MAX); RECENT_SLOTS];
        }
        self.recent[slot] = (node, id);
        id
    }

    /// Adds every node of `other` and returns, for each id of `other`, its id here.
    pub fn merge(&mut self, other: &CallTree) -> Vec<CallpathId> {
        let mut map: Vec<CallpathId> = Vec::with_capacity(other.nodes.len());
        for node in &other.nodes {
            let parent = node.parent.map(|p| map[p as usize]);
            map.push(self.intern(CallNode {
                parent,
                frame: node.frame,
            }));
        }
        map
    }

    /// The frame names from the top level down, joined by ` / `.
    pub fn label(&self, id: CallpathId, regions: &[Region]) -> String {
        let mut frames = Vec::new();
        let mut cursor = Some(id);
        while let Some(current) = cursor {
            let node = self.nodes[current as usize];
            frames.push(frame_label(node.frame, regions));
            cursor = node.parent;
        }
        frames.reverse();
        frames.join(" / ")
    }
}

fn region_label(region: RegionId, regions: &[Region]) -> String {
    match regions.get(region as usize) {
        Some(r) if r.site.is_empty() => r.name.clone(),
        Some(r) => format!("{} ({})", r.name, r.site),
        None => format!("region#{region}"),
    }
}

fn frame_label(frame: Frame, regions: &[Region]) -> String {
    match frame {
        Frame::Region(region) => region_label(region, regions),
        Frame::Between(after, before) => {
            let mut label = String::from("compute");
            if let Some(after) = after {
                label += &format!(" after {}", region_label(after, regions));
            }
            match before {
                Some(before) => label += &format!(" before {}", region_label(before, regions)),
                None => label += " until the end",
            }
            label
        }
    }
}
