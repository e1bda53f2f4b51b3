//! Unification of the ranks' own definitions into one trace, as the profiler writes it.
//!
//! Each rank numbers its call sites and communicators as it meets them, without talking to the
//! other ranks. Here regions become one list (same name, site and role: the same region), and
//! communicators one list keyed by their members and the order of creation among communicators
//! with the same members (a communicator is created collectively by all its members, so each
//! member sees it as the k-th with those members). Each rank's times are moved onto rank 0's
//! clock by the offsets measured at `MPI_Init` and `MPI_Finalize`, interpolated linearly (offset
//! and drift).

use crate::model::{
    Cartesian, ClockSample, Communicator, Definitions, Event, EventKind, LocalDefinitions, Rank,
    Region, Ticks,
};
use std::collections::{HashMap, TryReserveError};

/// An id that no definition has: the analysis reports it as unknown.
const UNKNOWN: u32 = u32::MAX;

/// How one rank's events become the unified trace's: its region and communicator ids, and its
/// clock onto rank 0's.
#[derive(Debug)]
pub struct RankMapping {
    regions: Vec<u32>,
    comms: Vec<u32>,
    clock: Clock,
}

impl RankMapping {
    /// Renumbers and re-times `event`; `previous` is the rank's last corrected time (corrected
    /// times keep the rank's order: a drift estimate can never reorder its events).
    #[inline]
    pub fn apply(&self, event: &mut Event, previous: &mut Ticks) {
        event.time = self.clock.to_rank0(event.time).max(*previous);
        *previous = event.time;
        renumber(&mut event.kind, &self.regions, &self.comms);
    }
}

/// Builds the global definitions from `locals`, and per world rank the mapping of its events
/// (`None` for a rank without local definitions). Problems (duplicate or stray definitions,
/// where recording stopped) go to `problems`. Fails only when the world size the definitions
/// say does not fit in memory.
pub fn unify(
    locals: &[LocalDefinitions],
    problems: &mut Vec<String>,
) -> Result<(Definitions, Vec<Option<RankMapping>>), TryReserveError> {
    let world_size = locals.iter().map(|l| l.world_size).max().unwrap_or(0) as usize;
    // The world size is what a file says: reserved fallibly, before anything per rank.
    let mut world = Vec::new();
    world.try_reserve_exact(world_size)?;
    world.extend(0..world_size as Rank);
    let mut by_rank: Vec<Option<&LocalDefinitions>> = Vec::new();
    by_rank.try_reserve_exact(world_size)?;
    by_rank.resize(world_size, None);
    let mut regions: Vec<Region> = Vec::new();
    let mut region_ids: HashMap<Region, u32> = HashMap::new();
    let mut comm_ids: HashMap<(Vec<Rank>, u32), u32> = HashMap::new();
    let mut world_key = Vec::new();
    world_key.try_reserve_exact(world_size)?;
    world_key.extend_from_slice(&world);
    comm_ids.insert((world_key, 0), 0);
    let mut communicators = vec![Communicator { members: world }];
    for local in locals {
        match by_rank.get_mut(local.rank as usize) {
            Some(slot @ None) => *slot = Some(local),
            Some(Some(_)) => problems.push(format!(
                "a second local definitions file for rank {}; ignored",
                local.rank
            )),
            None => problems.push(format!(
                "local definitions of rank {} beyond the world size {world_size}; ignored",
                local.rank
            )),
        }
    }
    let mut stops: Vec<String> = Vec::new();
    let mut mappings = Vec::with_capacity(by_rank.len());
    for local in &by_rank {
        let Some(local) = local else {
            mappings.push(None);
            continue;
        };
        let region_map: Vec<u32> = local
            .regions
            .iter()
            .map(|r| {
                *region_ids.entry(r.clone()).or_insert_with(|| {
                    regions.push(r.clone());
                    (regions.len() - 1) as u32
                })
            })
            .collect();
        let mut seen: HashMap<&[Rank], u32> = HashMap::new();
        let comm_map: Vec<u32> = local
            .communicators
            .iter()
            .map(|c| {
                let occurrence = seen.entry(&c.members).or_insert(0);
                let key = (c.members.clone(), *occurrence);
                *occurrence += 1;
                *comm_ids.entry(key).or_insert_with(|| {
                    communicators.push(c.clone());
                    (communicators.len() - 1) as u32
                })
            })
            .collect();
        if let Some(stop) = &local.stopped {
            if !stops.contains(stop) {
                stops.push(stop.clone());
            }
        }
        mappings.push(Some(RankMapping {
            regions: region_map,
            comms: comm_map,
            clock: Clock::new(&local.clock),
        }));
    }
    problems.extend(stops);
    let present: Vec<&LocalDefinitions> = by_rank.iter().flatten().copied().collect();
    let definitions = Definitions {
        ticks_per_second: present
            .first()
            .map_or(1_000_000_000, |l| l.ticks_per_second),
        regions,
        communicators,
        // One partition (every rank the same MPI_APPNUM) is no partitioning.
        partitions: present
            .iter()
            .any(|l| l.partition != present[0].partition)
            .then(|| {
                by_rank
                    .iter()
                    .map(|l| l.and_then(|l| l.partition).unwrap_or(0))
                    .collect()
            }),
        cartesian: cartesian(&by_rank),
    };
    Ok((definitions, mappings))
}

/// The Cartesian topology when every rank has coordinates in the same grid.
fn cartesian(by_rank: &[Option<&LocalDefinitions>]) -> Option<Cartesian> {
    let dims = by_rank.first()?.as_ref()?.cartesian.as_ref()?.0.clone();
    let coords = by_rank
        .iter()
        .map(|l| {
            let (d, c) = l.as_ref()?.cartesian.as_ref()?;
            (d == &dims && c.len() == dims.len()).then(|| c.clone())
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Cartesian { dims, coords })
}

fn renumber(kind: &mut EventKind, regions: &[u32], comms: &[u32]) {
    let comm_of = |c: u32| comms.get(c as usize).copied().unwrap_or(UNKNOWN);
    match kind {
        EventKind::Enter { region } => {
            *region = regions.get(*region as usize).copied().unwrap_or(UNKNOWN)
        }
        EventKind::Send { comm, .. }
        | EventKind::Recv { comm, .. }
        | EventKind::CollectiveExit { comm, .. } => *comm = comm_of(*comm),
        EventKind::Exit | EventKind::RequestPost { .. } | EventKind::RequestComplete { .. } => {}
    }
}

/// A rank's clock against rank 0's: offset and linear drift from the first and last sample.
#[derive(Debug)]
struct Clock {
    first: ClockSample,
    /// Change of the offset per tick of this rank's clock.
    drift: f64,
}

impl Clock {
    fn new(samples: &[ClockSample]) -> Clock {
        let first = samples.first().copied().unwrap_or_default();
        let drift = match samples.last() {
            Some(last) if last.local > first.local => {
                (last.offset - first.offset) as f64 / (last.local - first.local) as f64
            }
            _ => 0.0,
        };
        Clock { first, drift }
    }

    fn to_rank0(&self, local: Ticks) -> Ticks {
        let since = local as f64 - self.first.local as f64;
        let offset = self.first.offset as f64 + self.drift * since;
        (local as f64 + offset).round().max(0.0) as Ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MpiClass, RegionRole};

    fn local(rank: Rank, regions: &[&str], comms: &[Vec<Rank>]) -> LocalDefinitions {
        LocalDefinitions {
            rank,
            world_size: 2,
            ticks_per_second: 1_000_000_000,
            regions: regions
                .iter()
                .map(|n| Region {
                    name: n.to_string(),
                    site: String::new(),
                    role: RegionRole::Mpi(MpiClass::PointToPoint),
                })
                .collect(),
            communicators: comms
                .iter()
                .map(|m| Communicator { members: m.clone() })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn regions_and_communicators_become_one_list() {
        // Rank 0 met MPI_Send first, rank 1 MPI_Recv; both made two duplicates of the world.
        let world = vec![0, 1];
        let locals = [
            local(
                0,
                &["MPI_Send", "MPI_Recv"],
                &[world.clone(), world.clone(), world.clone()],
            ),
            local(
                1,
                &["MPI_Recv", "MPI_Send"],
                &[world.clone(), world.clone(), world.clone()],
            ),
        ];
        let mut problems = Vec::new();
        let (defs, mappings) = unify(&locals, &mut problems).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(defs.regions.len(), 2);
        assert_eq!(defs.communicators.len(), 3);
        let mapped = |rank: usize, kind| {
            let mut event = Event { time: 5, kind };
            mappings[rank].as_ref().unwrap().apply(&mut event, &mut 0);
            event.kind
        };
        // Rank 0's region 1 and rank 1's region 0 are both MPI_Recv.
        assert_eq!(
            mapped(0, EventKind::Enter { region: 1 }),
            mapped(1, EventKind::Enter { region: 0 })
        );
        let exit = EventKind::CollectiveExit {
            comm: 2,
            root: None,
            sent: 0,
            received: 0,
        };
        assert!(matches!(
            mapped(1, exit),
            EventKind::CollectiveExit { comm: 2, .. }
        ));
    }

    #[test]
    fn clocks_are_moved_onto_rank_0s_with_drift() {
        let clock = Clock::new(&[
            ClockSample {
                local: 1_000,
                offset: 500,
            },
            ClockSample {
                local: 11_000,
                offset: 600,
            },
        ]);
        assert_eq!(clock.to_rank0(1_000), 1_500);
        assert_eq!(clock.to_rank0(6_000), 6_550);
        assert_eq!(clock.to_rank0(11_000), 11_600);
    }
}
