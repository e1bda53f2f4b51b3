//! An OTF2 archive that another tool wrote (Score-P's MPI traces above all), or mpistat's
//! export, as a source of the analysis ([`Otf2Archive`], a `TraceSource`).
//!
//! The mapping onto the analysis model: one MPI rank is one location, the one that the MPI
//! locations group (`COMM_LOCATIONS` of paradigm MPI) lists at that rank, else each process's
//! first CPU thread; regions keep their name and become `file:line` call sites; MPI
//! communicators become the model's (world ranks, `MPI_COMM_WORLD` first); peers and roots go
//! from communicator ranks to world ranks; the events map back as `write.rs` writes them, so an
//! exported trace read again gives the same events and the same analysis.
//!
//! Everything is hostile until bounded: the anchor and definitions files' sizes are checked
//! before libotf2 reads them, every reference an event makes (region, communicator, rank in
//! it) must be defined, and memory is estimated from the files' sizes before anything is read
//! (the analysis's memory check). What the analysis does not use (other threads, GPU streams,
//! metric locations; OpenMP, I/O, metrics, RMA events) is skipped with a one-line note.

use crate::error::Otf2Error;
use crate::ffi;
use crate::names::{role_of, site_of, synchronous_send, UNDEFINED_U32};
use crate::read::{read_global_definitions, LocationReader, RawDefinitions, Reader, Record};
use mpistat_analysis::error::AnalyzeDirError;
use mpistat_analysis::memory;
use mpistat_analysis::source::Built;
use mpistat_analysis::source::TraceSource;
use mpistat_analysis::timeline;
use mpistat_trace::model::{
    Cartesian, CommId, Communicator, Definitions, Event, EventKind, Rank, Region, RegionId, Ticks,
};
use mpistat_trace::parallel::parallel_map;
use mpistat_trace::tracefile::{DirContents, Survey};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// The largest anchor file read (they take a few hundred bytes).
pub const MAX_ANCHOR_BYTES: u64 = 1 << 20;
/// The largest global definitions file read (Score-P's for 100k ranks take tens of MiB).
pub const MAX_DEFINITION_BYTES: u64 = 1 << 30;
/// Memory the definitions take per byte of their file, at most (strings, groups' members).
pub const MEMORY_PER_DEFINITION_BYTE: u64 = 16;
/// Event-file bytes per event the memory estimate assumes: an OTF2 event takes 3 bytes at the
/// least (type, length, a small reference), most 10-20 with their timestamps, so this
/// over-counts events, never under.
pub const FILE_BYTES_PER_EVENT: u64 = 3;

/// What an event usually takes in an event file (8.3 bytes in mpistat's exports, more in
/// Score-P's, whose timestamps are larger).
const TYPICAL_FILE_BYTES_PER_EVENT: u64 = 8;

/// How an OTF2 communicator becomes the model's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommMapping {
    /// The same communicator for every rank.
    Fixed(CommId),
    /// A self-like communicator (`MPI_COMM_SELF`): rank r's own, at this id + r.
    PerRank(CommId),
}

/// An OTF2 archive opened for the analysis: its definitions, read and checked.
#[derive(Debug)]
pub struct Otf2Archive {
    anchor: PathBuf,
    definitions: Definitions,
    /// Per world rank, its location.
    locations: Vec<u64>,
    regions: HashMap<u32, RegionId>,
    comms: HashMap<u32, CommMapping>,
    definition_bytes: u64,
    /// What the analysis skips, said once.
    note: Option<String>,
}

/// The anchor file of the archive at `path`: the file itself (`traces.otf2`), or the only
/// `*.otf2` file of the directory (a Score-P experiment directory); `None` when there is none.
pub fn find_anchor(path: &Path) -> Option<PathBuf> {
    let is_anchor = |p: &Path| p.extension().is_some_and(|e| e == "otf2");
    if path.is_file() {
        return is_anchor(path).then(|| path.to_path_buf());
    }
    let mut anchors = std::fs::read_dir(path)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .filter(|p| is_anchor(p) && p.is_file());
    let anchor = anchors.next()?;
    anchors.next().is_none().then_some(anchor)
}

fn file_size(path: &Path) -> Result<u64, Otf2Error> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|source| Otf2Error::Io {
            path: path.display().to_string(),
            source,
        })
}

/// `anchor` with another extension, or in the directory named after it (`traces.otf2` →
/// `traces.def`, `traces/3.evt`), as OTF2's POSIX substrate names the files.
fn archive_file(anchor: &Path, location: Option<u64>, extension: &str) -> PathBuf {
    let stem = anchor.with_extension("");
    match location {
        None => stem.with_extension(extension),
        Some(location) => stem.join(format!("{location}.{extension}")),
    }
}

impl Otf2Archive {
    /// Opens the archive at `path` (its anchor file or its directory) and reads its global
    /// definitions.
    pub fn open(path: &Path) -> Result<Otf2Archive, Otf2Error> {
        let anchor = find_anchor(path).ok_or_else(|| Otf2Error::Malformed {
            path: path.display().to_string(),
            what: "not an OTF2 archive (no single *.otf2 anchor file)".into(),
        })?;
        let bounded = |file: &Path, what: &'static str, limit: u64| -> Result<u64, Otf2Error> {
            let size = file_size(file)?;
            if size > limit {
                return Err(Otf2Error::TooBig {
                    path: file.display().to_string(),
                    what,
                    size,
                    limit,
                });
            }
            Ok(size)
        };
        bounded(&anchor, "the anchor file", MAX_ANCHOR_BYTES)?;
        let definitions_file = archive_file(&anchor, None, "def");
        let definition_bytes = bounded(
            &definitions_file,
            "the global definitions file",
            MAX_DEFINITION_BYTES,
        )?;
        let reader = Reader::open(&anchor)?;
        let raw = read_global_definitions(&reader)?;
        drop(reader);
        let mut archive = resolve(&anchor, raw)?;
        archive.definition_bytes = definition_bytes.saturating_mul(MEMORY_PER_DEFINITION_BYTE);
        Ok(archive)
    }

    /// The definitions as the analysis sees them.
    pub fn definitions(&self) -> &Definitions {
        &self.definitions
    }

    /// The anchor file.
    pub fn anchor(&self) -> &Path {
        &self.anchor
    }

    fn malformed(&self, what: String) -> Otf2Error {
        Otf2Error::Malformed {
            path: self.anchor.display().to_string(),
            what,
        }
    }

    /// World rank `rank`'s events, in the model; iterate, then call
    /// [`ImportedEvents::finish`].
    pub fn events(&self, rank: Rank) -> Result<ImportedEvents<'_>, Otf2Error> {
        let location = *self
            .locations
            .get(rank as usize)
            .ok_or_else(|| self.malformed(format!("no rank {rank}")))?;
        Ok(ImportedEvents {
            archive: self,
            rank,
            reader: LocationReader::open(&self.anchor, location)?,
            ready: VecDeque::new(),
            stack: Vec::new(),
            posts: Vec::new(),
            collective: None,
            index: 0,
            error: None,
        })
    }

    fn timeline(&self, rank: Rank) -> Result<Built, Otf2Error> {
        let location = self.locations[rank as usize];
        let bytes = file_size(&archive_file(&self.anchor, Some(location), "evt")).unwrap_or(0);
        // The timeline reserves room for this many events: the usual size of an event, not
        // the smallest the memory check assumes.
        let expected = (bytes / TYPICAL_FILE_BYTES_PER_EVENT) as usize;
        let mut events = self.events(rank)?;
        let built = timeline::build(rank, &mut events, expected, &self.definitions);
        // A damaged file explains whatever the timeline made of it.
        events.finish()?;
        Ok(built)
    }
}

impl TraceSource for Otf2Archive {
    fn path(&self) -> &Path {
        &self.anchor
    }

    fn survey(&self) -> Result<Survey, AnalyzeDirError> {
        // In an mpistat directory's units: an OTF2 event is counted as the bytes of an mpistat
        // one, and the definitions as the bytes memory.rs counts.
        let sizes = (self.locations.iter().enumerate())
            .map(|(rank, &location)| {
                let file = archive_file(&self.anchor, Some(location), "evt");
                let events = file_size(&file).unwrap_or(0) / FILE_BYTES_PER_EVENT;
                (
                    rank as Rank,
                    events.saturating_mul(memory::FILE_BYTES_PER_EVENT),
                )
            })
            .collect();
        Ok(Survey {
            sizes,
            world: self.locations.len() as u32,
            definition_bytes: self.definition_bytes / memory::BYTES_PER_DEFINITION_BYTE,
        })
    }

    fn read_timelines(
        &self,
        wanted: &(dyn Fn(Rank) -> bool + Sync),
    ) -> Result<DirContents<Built>, AnalyzeDirError> {
        let ranks: Vec<Rank> = (0..self.locations.len() as Rank)
            .filter(|&r| wanted(r))
            .collect();
        let built = parallel_map(ranks.len(), |i| self.timeline(ranks[i]));
        let mut timelines: Vec<Option<Built>> = Vec::new();
        timelines.resize_with(self.locations.len(), || None);
        for (rank, built) in ranks.into_iter().zip(built) {
            timelines[rank as usize] = Some(built?);
        }
        Ok((
            self.definitions.clone(),
            timelines,
            self.note.iter().cloned().collect(),
        ))
    }
}

/// One rank's events in the model, as they are read (see the module's mapping).
pub struct ImportedEvents<'a> {
    archive: &'a Otf2Archive,
    rank: Rank,
    reader: LocationReader,
    /// Events made from one record and not handed on yet (at most a few).
    ready: VecDeque<Event>,
    /// Open regions.
    stack: Vec<RegionId>,
    /// Requests of `MpiIsend`s of the open call: posted as the call returns.
    posts: Vec<u64>,
    /// The end of the open collective call: it returns with its `Leave`.
    collective: Option<(CommId, Option<Rank>, u64, u64)>,
    /// Records read.
    index: u64,
    error: Option<Otf2Error>,
}

impl ImportedEvents<'_> {
    /// Reads what the caller left and says whether the location's events were all readable
    /// and valid; returns the records skipped (kinds the analysis does not use).
    pub fn finish(mut self) -> Result<u64, Otf2Error> {
        while self.next().is_some() {}
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.reader.skipped()),
        }
    }

    fn bad(&self, what: String) -> Otf2Error {
        Otf2Error::Malformed {
            path: self.reader.path().to_string(),
            what: format!("rank {}, event {}: {what}", self.rank, self.index),
        }
    }

    fn comm(&self, comm: u32) -> Result<CommId, Otf2Error> {
        match self.archive.comms.get(&comm) {
            Some(CommMapping::Fixed(id)) => Ok(*id),
            Some(CommMapping::PerRank(base)) => Ok(base + self.rank),
            None => Err(self.bad(format!("communicator {comm} is not an MPI communicator"))),
        }
    }

    /// The world rank of rank `local` of `comm`.
    fn world(&self, comm: CommId, local: u32) -> Result<Rank, Otf2Error> {
        let members = &self.archive.definitions.communicators[comm as usize].members;
        members
            .get(local as usize)
            .copied()
            .ok_or_else(|| self.bad(format!("rank {local} is not in communicator {comm}")))
    }

    fn emit(&mut self, time: Ticks, kind: EventKind) {
        self.ready.push_back(Event { time, kind });
    }

    fn translate(&mut self, time: Ticks, record: Record) -> Result<(), Otf2Error> {
        match record {
            Record::Enter { region } => {
                let id = *self
                    .archive
                    .regions
                    .get(&region)
                    .ok_or_else(|| self.bad(format!("region {region} is not defined")))?;
                self.stack.push(id);
                self.ready.push_back(Event {
                    time,
                    kind: EventKind::Enter { region: id },
                });
            }
            Record::Leave { .. } => {
                for request in std::mem::take(&mut self.posts) {
                    self.emit(time, EventKind::RequestPost { request });
                }
                self.stack.pop();
                let kind = match self.collective.take() {
                    Some((comm, root, sent, received)) => EventKind::CollectiveExit {
                        comm,
                        root,
                        sent,
                        received,
                    },
                    None => EventKind::Exit,
                };
                self.ready.push_back(Event { time, kind });
            }
            Record::Send {
                receiver,
                comm,
                tag,
                length,
                request,
            } => {
                let comm = self.comm(comm)?;
                let peer = self.world(comm, receiver)?;
                let regions = &self.archive.definitions.regions;
                let synchronous = (self.stack.last())
                    .is_some_and(|&r| synchronous_send(&regions[r as usize].name));
                self.ready.push_back(Event {
                    time,
                    kind: EventKind::Send {
                        peer,
                        tag: tag as i32,
                        comm,
                        bytes: length,
                        synchronous,
                    },
                });
                self.posts.extend(request);
            }
            Record::Recv {
                sender,
                comm,
                tag,
                length,
                request,
            } => {
                if let Some(request) = request {
                    self.emit(time, EventKind::RequestComplete { request });
                    if sender == UNDEFINED_U32 {
                        // A completed receive whose source is unknown (see `write.rs`).
                        return Ok(());
                    }
                }
                let comm = self.comm(comm)?;
                let peer = self.world(comm, sender)?;
                self.ready.push_back(Event {
                    time,
                    kind: EventKind::Recv {
                        peer,
                        tag: tag as i32,
                        comm,
                        bytes: length,
                    },
                });
            }
            Record::IsendComplete { request } => {
                self.emit(time, EventKind::RequestComplete { request })
            }
            Record::IrecvRequest { request } => self.emit(time, EventKind::RequestPost { request }),
            Record::CollectiveEnd {
                comm,
                root,
                sent,
                received,
            } => {
                let comm = self.comm(comm)?;
                let root = match root {
                    UNDEFINED_U32 => None,
                    root => Some(self.world(comm, root)?),
                };
                self.collective = Some((comm, root, sent, received));
            }
        }
        Ok(())
    }
}

impl Iterator for ImportedEvents<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.error.is_some() {
                return None;
            }
            let result = match self.reader.next() {
                Ok(Some((time, record))) => {
                    self.index += 1;
                    self.translate(time, record)
                }
                Ok(None) => return None,
                Err(error) => Err(error),
            };
            if let Err(error) = result {
                self.error = Some(error);
                return None;
            }
        }
    }
}

/// Turns the archive's raw definitions into the model's, checking every reference.
fn resolve(anchor: &Path, raw: RawDefinitions) -> Result<Otf2Archive, Otf2Error> {
    let malformed = |what: String| Otf2Error::Malformed {
        path: anchor.display().to_string(),
        what,
    };
    let string =
        |reference: u32, what: &str| -> Result<String, Otf2Error> {
            match reference {
                UNDEFINED_U32 => Ok(String::new()),
                r => raw.strings.get(&r).cloned().ok_or_else(|| {
                    malformed(format!("{what} names string {r}, which is not defined"))
                }),
            }
        };
    let (ticks_per_second, _, _) = raw
        .clock
        .ok_or_else(|| malformed("no clock properties (timer resolution)".into()))?;
    if ticks_per_second == 0 {
        return Err(malformed("the timer resolution is 0".into()));
    }
    let locations = mpi_locations(&raw).map_err(malformed)?;
    let world = locations.len() as u32;
    let mut regions = Vec::with_capacity(raw.regions.len());
    let mut region_ids = HashMap::with_capacity(raw.regions.len());
    let mut paradigms: Vec<&'static str> = Vec::new();
    for region in &raw.regions {
        let name = string(region.name, "a region")?;
        let file = string(region.file, "a region")?;
        let role = role_of(&name, region.paradigm);
        if let Some(kind) = unused_paradigm(region.paradigm) {
            if !paradigms.contains(&kind) {
                paradigms.push(kind);
            }
        }
        let id = regions.len() as RegionId;
        if region_ids.insert(region.reference, id).is_some() {
            return Err(malformed(format!(
                "region {} defined twice",
                region.reference
            )));
        }
        regions.push(Region {
            name,
            site: site_of(&file, region.line),
            role,
        });
    }
    let (communicators, comms) = communicators(&raw, world).map_err(malformed)?;
    let definitions = Definitions {
        ticks_per_second,
        regions,
        cartesian: cartesian(&raw, &comms, world),
        partitions: partitions(&raw, &locations),
        communicators,
    };
    let skipped_locations = raw.locations.len().saturating_sub(locations.len());
    let mut kinds: Vec<&str> = paradigms;
    kinds.extend(raw.unused.iter().copied());
    let note = (!kinds.is_empty() || skipped_locations > 0).then(|| {
        let mut note = String::from("skipped what the analysis does not use");
        if !kinds.is_empty() {
            note += &format!(": the events of {}", kinds.join(", "));
        }
        if skipped_locations > 0 {
            note += &format!(
                "{} {skipped_locations} location{} besides the MPI ranks' (threads, GPU streams, \
                 metrics)",
                if kinds.is_empty() { ":" } else { " and" },
                if skipped_locations == 1 { "" } else { "s" }
            );
        }
        note
    });
    Ok(Otf2Archive {
        anchor: anchor.to_path_buf(),
        definitions,
        locations,
        regions: region_ids,
        comms,
        definition_bytes: 0,
        note,
    })
}

/// The paradigm's name when its events are skipped (its regions still count as the program's
/// time on the rank's location).
fn unused_paradigm(paradigm: ffi::OTF2_Paradigm) -> Option<&'static str> {
    Some(match u32::from(paradigm) {
        ffi::OTF2_PARADIGM_OPENMP => "OpenMP",
        ffi::OTF2_PARADIGM_PTHREAD => "POSIX threads",
        ffi::OTF2_PARADIGM_CUDA
        | ffi::OTF2_PARADIGM_OPENCL
        | ffi::OTF2_PARADIGM_OPENACC
        | ffi::OTF2_PARADIGM_HIP => "accelerators",
        ffi::OTF2_PARADIGM_SHMEM | ffi::OTF2_PARADIGM_GASPI | ffi::OTF2_PARADIGM_UPC => {
            "other communication paradigms"
        }
        _ => return None,
    })
}

/// Per world rank, its location: the MPI locations group's list, else each process's first CPU
/// thread (location groups in definition order).
fn mpi_locations(raw: &RawDefinitions) -> Result<Vec<u64>, String> {
    let known: HashMap<u64, u32> = raw.locations.iter().map(|&(l, _, g)| (l, g)).collect();
    let listed = raw.groups.values().find(|g| {
        u32::from(g.kind) == ffi::OTF2_GROUP_TYPE_COMM_LOCATIONS
            && u32::from(g.paradigm) == ffi::OTF2_PARADIGM_MPI
    });
    let locations: Vec<u64> = match listed {
        Some(group) => group.members.clone(),
        None => (raw.location_groups.iter())
            .filter(|&&(_, kind)| u32::from(kind) == ffi::OTF2_LOCATION_GROUP_TYPE_PROCESS)
            .filter_map(|&(group, _)| {
                (raw.locations.iter())
                    .filter(|&&(_, kind, g)| {
                        g == group && u32::from(kind) == ffi::OTF2_LOCATION_TYPE_CPU_THREAD
                    })
                    .map(|&(location, _, _)| location)
                    .min()
            })
            .collect(),
    };
    if locations.is_empty() {
        return Err("no MPI ranks: no MPI locations group and no process with a CPU thread".into());
    }
    if locations.len() > u32::MAX as usize / 2 {
        return Err(format!("{} MPI ranks", locations.len()));
    }
    let mut seen = std::collections::HashSet::new();
    for &location in &locations {
        if !known.contains_key(&location) {
            return Err(format!("MPI rank location {location} is not defined"));
        }
        if !seen.insert(location) {
            return Err(format!("location {location} is two MPI ranks"));
        }
    }
    Ok(locations)
}

/// The model's communicators (`MPI_COMM_WORLD` first) and how each MPI communicator of the
/// archive maps onto them.
fn communicators(
    raw: &RawDefinitions,
    world: u32,
) -> Result<(Vec<Communicator>, HashMap<u32, CommMapping>), String> {
    let mut communicators = vec![Communicator {
        members: (0..world).collect(),
    }];
    let mut comms = HashMap::new();
    let mut world_mapped = false;
    let mut self_like = None;
    for &(reference, group) in &raw.comms {
        let Some(group_def) = raw.groups.get(&group) else {
            return Err(format!(
                "communicator {reference} has group {group}, which is not defined"
            ));
        };
        if u32::from(group_def.paradigm) != ffi::OTF2_PARADIGM_MPI {
            continue;
        }
        let mapping = match u32::from(group_def.kind) {
            ffi::OTF2_GROUP_TYPE_COMM_SELF => *self_like.get_or_insert_with(|| {
                let base = communicators.len() as CommId;
                communicators.extend((0..world).map(|r| Communicator { members: vec![r] }));
                CommMapping::PerRank(base)
            }),
            ffi::OTF2_GROUP_TYPE_COMM_GROUP => {
                let members = (group_def.members.iter())
                    .map(|&m| u32::try_from(m).ok().filter(|&m| m < world))
                    .collect::<Option<Vec<Rank>>>()
                    .ok_or_else(|| {
                        format!("communicator {reference} has a member that is not an MPI rank")
                    })?;
                let whole = members.iter().copied().eq(0..world);
                if whole && !world_mapped {
                    world_mapped = true;
                    CommMapping::Fixed(0)
                } else {
                    communicators.push(Communicator { members });
                    CommMapping::Fixed(communicators.len() as CommId - 1)
                }
            }
            _ => continue,
        };
        if comms.insert(reference, mapping).is_some() {
            return Err(format!("communicator {reference} defined twice"));
        }
    }
    Ok((communicators, comms))
}

/// The Cartesian topology of `MPI_COMM_WORLD` when every rank has its coordinates.
fn cartesian(
    raw: &RawDefinitions,
    comms: &HashMap<u32, CommMapping>,
    world: u32,
) -> Option<Cartesian> {
    let (topology, _, dimensions) = (raw.cart_topologies.iter())
        .find(|(_, comm, _)| comms.get(comm) == Some(&CommMapping::Fixed(0)))?;
    let dims = (dimensions.iter())
        .map(|d| raw.cart_dimensions.get(d).copied())
        .collect::<Option<Vec<u32>>>()?;
    let mut coords: Vec<Option<Vec<u32>>> = vec![None; world as usize];
    for (t, rank, coordinates) in &raw.cart_coordinates {
        if t == topology && coordinates.len() == dims.len() {
            *coords.get_mut(*rank as usize)? = Some(coordinates.clone());
        }
    }
    let coords = coords.into_iter().collect::<Option<Vec<_>>>()?;
    Some(Cartesian { dims, coords })
}

/// `MPI_APPNUM` of each rank (its location group's property), when any rank has one.
fn partitions(raw: &RawDefinitions, locations: &[u64]) -> Option<Vec<u32>> {
    let is_appnum = |name: u32| raw.strings.get(&name).is_some_and(|s| s == "MPI_APPNUM");
    let by_group: HashMap<u32, u32> = (raw.group_properties.iter())
        .filter(|&&(_, name, _)| is_appnum(name))
        .map(|&(group, _, value)| (group, value))
        .collect();
    if by_group.is_empty() {
        return None;
    }
    let group_of: HashMap<u64, u32> = raw.locations.iter().map(|&(l, _, g)| (l, g)).collect();
    Some(
        (locations.iter())
            .map(|l| {
                (group_of.get(l))
                    .and_then(|g| by_group.get(g))
                    .copied()
                    .unwrap_or(0)
            })
            .collect(),
    )
}
