//! The trace file format, version 1: one definitions file and one file per rank in a directory.
//!
//! All integers are unsigned LEB128 varints (tags are signed, zigzag-encoded); strings are a length
//! and UTF-8 bytes. A file starts with an 8-byte magic and a little-endian `u16` version.
//!
//! - `definitions.mpt` (magic `MPSTDEF\0`): ticks per second; regions (name, site, role: 0 user,
//!   1-5 the [`MpiClass`]); communicators (members); partitions (0, or 1 and one per rank);
//!   Cartesian topology (0, or 1, the dimensions, and for each rank its coordinates); the byte `E`.
//! - `rank-NNNNNN.mpt` (magic `MPSTRNK\0`): the rank; events as a tag byte, the time since the
//!   previous event, and the tag's fields; then tag `0xFF` and the number of events, so a file cut
//!   short is recognised. A typical event takes 3-6 bytes.
//!
//! - `local-NNNNNN.mpt` (magic `MPSTLOC\0`), instead of `definitions.mpt` when the profiler wrote
//!   the trace: one rank's own definitions ([`LocalDefinitions`]; its events use its own region and
//!   communicator ids), with clock measurements, where recording stopped, and the loaded objects.
//!   [`read_dir`] unifies them (`unify.rs`).
//!
//! Decoding never panics: a truncated or garbled file is a [`TraceFileError`] naming the file
//! and the byte offset. Nothing is allocated for what a file only claims: counts are checked
//! against the bytes left, world sizes and ranks against what MPI can have and against each
//! other, and a directory is read through [`TraceDir`] (`mpistat analyze` may run as root on a
//! user's directory): no other user's symlink on the way, its files regular, not symlinks, its
//! owner's, and read into memory reserved fallibly. [`RankEvents`] decodes a rank file event by event, so the analysis can
//! build a timeline without the event list ([`read_dir_with`] hands each file to it, in parallel);
//! [`read_dir`] gives the whole [`Trace`].

use crate::error::TraceFileError;
use crate::model::{
    Cartesian, ClockSample, Communicator, Definitions, Event, EventKind, LocalDefinitions, Module,
    MpiClass, Rank, Region, RegionRole, Ticks, Trace,
};
use crate::parallel::parallel_map;
use mpistat_site::files::{self, FileError};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

pub const VERSION: u16 = 1;
/// The most ranks an MPI job can have (ranks are C `int`s): a larger world size is garbage.
pub const MAX_WORLD: u32 = i32::MAX as u32;
pub const DEFINITIONS_FILE: &str = "definitions.mpt";
const DEFINITIONS_MAGIC: &[u8; 8] = b"MPSTDEF\0";
const RANK_MAGIC: &[u8; 8] = b"MPSTRNK\0";
const LOCAL_MAGIC: &[u8; 8] = b"MPSTLOC\0";
const END_OF_DEFINITIONS: u8 = b'E';

const TAG_ENTER: u8 = 1;
const TAG_EXIT: u8 = 2;
const TAG_SEND: u8 = 3;
const TAG_SYNC_SEND: u8 = 4;
const TAG_RECV: u8 = 5;
const TAG_REQUEST_POST: u8 = 6;
const TAG_REQUEST_COMPLETE: u8 = 7;
const TAG_COLLECTIVE_EXIT: u8 = 8;
const TAG_END: u8 = 0xFF;

/// The file name of a rank's own definitions.
pub fn local_file_name(rank: Rank) -> String {
    format!("local-{rank:06}.mpt")
}

/// The file name of a rank's trace.
pub fn rank_file_name(rank: Rank) -> String {
    format!("rank-{rank:06}.mpt")
}

fn put(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_signed(out: &mut Vec<u8>, value: i32) {
    put(out, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

fn put_signed64(out: &mut Vec<u8>, value: i64) {
    put(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn header(magic: &[u8; 8]) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    out
}

fn role_code(role: RegionRole) -> u64 {
    match role {
        RegionRole::User => 0,
        RegionRole::Mpi(MpiClass::PointToPoint) => 1,
        RegionRole::Mpi(MpiClass::Barrier) => 2,
        RegionRole::Mpi(MpiClass::AllToAll) => 3,
        RegionRole::Mpi(MpiClass::OneToAll) => 4,
        RegionRole::Mpi(MpiClass::AllToOne) => 5,
    }
}

fn put_regions_and_communicators(out: &mut Vec<u8>, regions: &[Region], comms: &[Communicator]) {
    put(out, regions.len() as u64);
    for region in regions {
        put_str(out, &region.name);
        put_str(out, &region.site);
        put(out, role_code(region.role));
    }
    put(out, comms.len() as u64);
    for comm in comms {
        put(out, comm.members.len() as u64);
        comm.members.iter().for_each(|&m| put(out, m.into()));
    }
}

fn put_u32s(out: &mut Vec<u8>, values: &[u32]) {
    put(out, values.len() as u64);
    values.iter().for_each(|&v| put(out, v.into()));
}

/// A local definitions file's bytes.
pub fn encode_local(local: &LocalDefinitions) -> Vec<u8> {
    let mut out = header(LOCAL_MAGIC);
    put(&mut out, local.rank.into());
    put(&mut out, local.world_size.into());
    put(&mut out, local.ticks_per_second);
    put_regions_and_communicators(&mut out, &local.regions, &local.communicators);
    match local.partition {
        None => put(&mut out, 0),
        Some(p) => {
            put(&mut out, 1);
            put(&mut out, p.into());
        }
    }
    match &local.cartesian {
        None => put(&mut out, 0),
        Some((dims, coords)) => {
            put(&mut out, 1);
            put_u32s(&mut out, dims);
            put_u32s(&mut out, coords);
        }
    }
    put(&mut out, local.clock.len() as u64);
    for sample in &local.clock {
        put(&mut out, sample.local);
        put_signed64(&mut out, sample.offset);
    }
    put_str(&mut out, local.stopped.as_deref().unwrap_or(""));
    put(&mut out, local.modules.len() as u64);
    for module in &local.modules {
        put_str(&mut out, &module.path);
        put_str(&mut out, &module.build_id);
        put(&mut out, module.load_address);
    }
    out.push(END_OF_DEFINITIONS);
    out
}

/// The definitions file's bytes.
pub fn encode_definitions(defs: &Definitions) -> Vec<u8> {
    let mut out = header(DEFINITIONS_MAGIC);
    put(&mut out, defs.ticks_per_second);
    put_regions_and_communicators(&mut out, &defs.regions, &defs.communicators);
    match &defs.partitions {
        None => put(&mut out, 0),
        Some(partitions) => {
            put(&mut out, 1);
            put(&mut out, partitions.len() as u64);
            partitions.iter().for_each(|&p| put(&mut out, p.into()));
        }
    }
    match &defs.cartesian {
        None => put(&mut out, 0),
        Some(cart) => {
            put(&mut out, 1);
            put(&mut out, cart.dims.len() as u64);
            cart.dims.iter().for_each(|&d| put(&mut out, d.into()));
            put(&mut out, cart.coords.len() as u64);
            for coords in &cart.coords {
                coords.iter().for_each(|&c| put(&mut out, c.into()));
            }
        }
    }
    out.push(END_OF_DEFINITIONS);
    out
}

/// Streams one rank's events into a writer; the profiler's side of the format.
pub struct RankWriter<W: Write> {
    out: W,
    buffer: Vec<u8>,
    last_time: Ticks,
    events: u64,
}

impl<W: Write> RankWriter<W> {
    pub fn new(out: W, rank: Rank) -> Self {
        let mut buffer = header(RANK_MAGIC);
        put(&mut buffer, rank.into());
        RankWriter {
            out,
            buffer,
            last_time: 0,
            events: 0,
        }
    }

    /// Appends an event; times must not decrease.
    pub fn event(&mut self, event: &Event) -> io::Result<()> {
        let delta = event.time.checked_sub(self.last_time).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "event time {} before the previous {}",
                    event.time, self.last_time
                ),
            )
        })?;
        let b = &mut self.buffer;
        let tag = match event.kind {
            EventKind::Enter { .. } => TAG_ENTER,
            EventKind::Exit => TAG_EXIT,
            EventKind::Send {
                synchronous: false, ..
            } => TAG_SEND,
            EventKind::Send {
                synchronous: true, ..
            } => TAG_SYNC_SEND,
            EventKind::Recv { .. } => TAG_RECV,
            EventKind::RequestPost { .. } => TAG_REQUEST_POST,
            EventKind::RequestComplete { .. } => TAG_REQUEST_COMPLETE,
            EventKind::CollectiveExit { .. } => TAG_COLLECTIVE_EXIT,
        };
        b.push(tag);
        put(b, delta);
        match event.kind {
            EventKind::Enter { region } => put(b, region.into()),
            EventKind::Exit => {}
            EventKind::Send {
                peer,
                tag,
                comm,
                bytes,
                ..
            }
            | EventKind::Recv {
                peer,
                tag,
                comm,
                bytes,
            } => {
                put(b, peer.into());
                put_signed(b, tag);
                put(b, comm.into());
                put(b, bytes);
            }
            EventKind::RequestPost { request } | EventKind::RequestComplete { request } => {
                put(b, request)
            }
            EventKind::CollectiveExit {
                comm,
                root,
                sent,
                received,
            } => {
                put(b, comm.into());
                put(b, root.map_or(0, |r| u64::from(r) + 1));
                put(b, sent);
                put(b, received);
            }
        }
        self.last_time = event.time;
        self.events += 1;
        if self.buffer.len() >= 1 << 16 {
            self.out.write_all(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }

    /// Writes the end marker and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.buffer.push(TAG_END);
        put(&mut self.buffer, self.events);
        self.out.write_all(&self.buffer)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A rank file's bytes.
pub fn encode_rank(rank: Rank, events: &[Event]) -> io::Result<Vec<u8>> {
    let mut writer = RankWriter::new(Vec::new(), rank);
    for event in events {
        writer.event(event)?;
    }
    writer.finish()
}

/// Reads varints and strings, turning every shortfall into an error that names the file.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], path: &'a str, magic: &[u8; 8]) -> Result<Self, TraceFileError> {
        if bytes.len() < 10 || &bytes[..8] != magic {
            return Err(TraceFileError::BadMagic {
                path: path.to_string(),
            });
        }
        let found = u16::from_le_bytes([bytes[8], bytes[9]]);
        if found != VERSION {
            return Err(TraceFileError::Version {
                path: path.to_string(),
                found,
                supported: VERSION,
            });
        }
        Ok(Reader {
            bytes,
            at: 10,
            path,
        })
    }

    #[cold]
    #[inline(never)]
    fn truncated(&self, what: &'static str) -> TraceFileError {
        TraceFileError::Truncated {
            path: self.path.to_string(),
            offset: self.at,
            what,
        }
    }

    #[cold]
    #[inline(never)]
    fn garbled(&self, what: impl Into<String>) -> TraceFileError {
        TraceFileError::Garbled {
            path: self.path.to_string(),
            offset: self.at,
            what: what.into(),
        }
    }

    #[inline]
    fn byte(&mut self, what: &'static str) -> Result<u8, TraceFileError> {
        match self.bytes.get(self.at) {
            Some(&byte) => {
                self.at += 1;
                Ok(byte)
            }
            None => Err(self.truncated(what)),
        }
    }

    /// Most values of a trace (tags, ids, time steps) fit one or two bytes: those stay inline.
    #[inline]
    fn varint(&mut self, what: &'static str) -> Result<u64, TraceFileError> {
        match self.bytes.get(self.at..self.at + 2) {
            Some(&[low, _]) if low < 0x80 => {
                self.at += 1;
                Ok(low.into())
            }
            Some(&[low, high]) if high < 0x80 => {
                self.at += 2;
                Ok(u64::from(low & 0x7F) | u64::from(high) << 7)
            }
            _ => self.long_varint(what),
        }
    }

    #[inline(never)]
    fn long_varint(&mut self, what: &'static str) -> Result<u64, TraceFileError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte(what)?;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.garbled(format!("{what}: varint longer than 64 bits")))
    }

    #[inline]
    fn u32(&mut self, what: &'static str) -> Result<u32, TraceFileError> {
        let value = self.varint(what)?;
        match u32::try_from(value) {
            Ok(value) => Ok(value),
            Err(_) => Err(self.garbled(format!("{what} {value} does not fit 32 bits"))),
        }
    }

    #[inline]
    fn signed(&mut self, what: &'static str) -> Result<i32, TraceFileError> {
        let raw = self.u32(what)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A count of items that each take at least one byte (so garbage cannot demand huge memory).
    fn count(&mut self, what: &'static str) -> Result<usize, TraceFileError> {
        let n = self.varint(what)?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(self.garbled(format!("{what} {n} exceeds the file")));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &'static str) -> Result<String, TraceFileError> {
        let len = self.count(what)?;
        let bytes = &self.bytes[self.at..self.at + len];
        let s =
            std::str::from_utf8(bytes).map_err(|_| self.garbled(format!("{what} is not UTF-8")))?;
        self.at += len;
        Ok(s.to_string())
    }

    fn u32s(&mut self, n: usize, what: &'static str) -> Result<Vec<u32>, TraceFileError> {
        (0..n).map(|_| self.u32(what)).collect()
    }

    fn counted_u32s(&mut self, what: &'static str) -> Result<Vec<u32>, TraceFileError> {
        let n = self.count(what)?;
        self.u32s(n, what)
    }

    fn signed64(&mut self, what: &'static str) -> Result<i64, TraceFileError> {
        let raw = self.varint(what)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn flag(&mut self, what: &'static str) -> Result<bool, TraceFileError> {
        match self.byte(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.garbled(format!("{what} {other}"))),
        }
    }

    fn regions_and_communicators(
        &mut self,
    ) -> Result<(Vec<Region>, Vec<Communicator>), TraceFileError> {
        let regions = (0..self.count("region count")?)
            .map(|_| {
                let name = self.string("region name")?;
                let site = self.string("region site")?;
                let role = match self.varint("region role")? {
                    0 => RegionRole::User,
                    1 => RegionRole::Mpi(MpiClass::PointToPoint),
                    2 => RegionRole::Mpi(MpiClass::Barrier),
                    3 => RegionRole::Mpi(MpiClass::AllToAll),
                    4 => RegionRole::Mpi(MpiClass::OneToAll),
                    5 => RegionRole::Mpi(MpiClass::AllToOne),
                    other => return Err(self.garbled(format!("unknown region role {other}"))),
                };
                Ok(Region { name, site, role })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let communicators = (0..self.count("communicator count")?)
            .map(|_| {
                Ok(Communicator {
                    members: self.counted_u32s("communicator member")?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((regions, communicators))
    }

    fn end_of_definitions(&mut self) -> Result<(), TraceFileError> {
        if self.byte("end marker")? != END_OF_DEFINITIONS {
            return Err(self.garbled("no end marker after the definitions"));
        }
        if self.at != self.bytes.len() {
            return Err(self.garbled("bytes after the end marker"));
        }
        Ok(())
    }
}

/// A local definitions file's first fields, its rank and its world size (at most
/// [`MAX_WORLD`]).
fn local_header(r: &mut Reader) -> Result<(Rank, u32), TraceFileError> {
    let rank = r.u32("rank")?;
    let world_size = r.u32("world size")?;
    if world_size > MAX_WORLD {
        return Err(r.garbled(format!(
            "world size {world_size}: MPI has at most {MAX_WORLD} ranks"
        )));
    }
    Ok((rank, world_size))
}

/// The world size a local definitions file says (its header alone).
pub fn world_size_of_local(bytes: &[u8], path: &str) -> Result<u32, TraceFileError> {
    let mut r = Reader::new(bytes, path, LOCAL_MAGIC)?;
    Ok(local_header(&mut r)?.1)
}

/// Decodes a local definitions file.
pub fn decode_local(bytes: &[u8], path: &str) -> Result<LocalDefinitions, TraceFileError> {
    let mut r = Reader::new(bytes, path, LOCAL_MAGIC)?;
    let (rank, world_size) = local_header(&mut r)?;
    let ticks_per_second = r.varint("ticks per second")?;
    let (regions, communicators) = r.regions_and_communicators()?;
    let partition = if r.flag("partition flag")? {
        Some(r.u32("partition")?)
    } else {
        None
    };
    let cartesian = if r.flag("topology flag")? {
        Some((r.counted_u32s("dimension")?, r.counted_u32s("coordinate")?))
    } else {
        None
    };
    let clock = (0..r.count("clock sample count")?)
        .map(|_| {
            Ok(ClockSample {
                local: r.varint("clock sample time")?,
                offset: r.signed64("clock offset")?,
            })
        })
        .collect::<Result<Vec<_>, TraceFileError>>()?;
    let stopped = Some(r.string("stop note")?).filter(|s| !s.is_empty());
    let modules = (0..r.count("module count")?)
        .map(|_| {
            Ok(Module {
                path: r.string("module path")?,
                build_id: r.string("module build-id")?,
                load_address: r.varint("module load address")?,
            })
        })
        .collect::<Result<Vec<_>, TraceFileError>>()?;
    r.end_of_definitions()?;
    Ok(LocalDefinitions {
        rank,
        world_size,
        ticks_per_second,
        regions,
        communicators,
        partition,
        cartesian,
        clock,
        stopped,
        modules,
    })
}

/// Decodes a definitions file.
pub fn decode_definitions(bytes: &[u8], path: &str) -> Result<Definitions, TraceFileError> {
    let mut r = Reader::new(bytes, path, DEFINITIONS_MAGIC)?;
    let ticks_per_second = r.varint("ticks per second")?;
    let (regions, communicators) = r.regions_and_communicators()?;
    let partitions = match r.byte("partitions flag")? {
        0 => None,
        1 => {
            let n = r.count("partition count")?;
            Some(r.u32s(n, "partition")?)
        }
        other => return Err(r.garbled(format!("partitions flag {other}"))),
    };
    let cartesian = match r.byte("topology flag")? {
        0 => None,
        1 => {
            let n = r.count("dimension count")?;
            let dims = r.u32s(n, "dimension")?;
            let ranks = r.count("coordinate count")?;
            let coords = (0..ranks)
                .map(|_| r.u32s(n, "coordinate"))
                .collect::<Result<Vec<_>, _>>()?;
            Some(Cartesian { dims, coords })
        }
        other => return Err(r.garbled(format!("topology flag {other}"))),
    };
    if r.byte("end marker")? != END_OF_DEFINITIONS {
        return Err(r.garbled("no end marker after the definitions"));
    }
    Ok(Definitions {
        ticks_per_second,
        regions,
        communicators,
        partitions,
        cartesian,
    })
}

/// Decodes a rank file: its rank and events.
pub fn decode_rank(bytes: &[u8], path: &str) -> Result<(Rank, Vec<Event>), TraceFileError> {
    let (rank, mut decoder) = RankEvents::new(bytes, path)?;
    let mut events = Vec::with_capacity(bytes.len() / 4);
    events.extend(decoder.by_ref());
    decoder.finish()?;
    Ok((rank, events))
}

/// Decodes a rank file event by event, so an analysis can consume the events without holding
/// them all. Iterate, then call [`RankEvents::finish`]: a truncated or garbled file ends the
/// iteration early, and `finish` says why.
pub struct RankEvents<'a> {
    r: Reader<'a>,
    time: Ticks,
    count: u64,
    ended: bool,
    error: Option<TraceFileError>,
    /// A profiler's file: its ids and times become the unified ones (`unify.rs`).
    mapping: Option<(&'a crate::unify::RankMapping, Ticks)>,
}

impl<'a> RankEvents<'a> {
    /// Checks the header; returns the file's rank and the decoder of its events.
    pub fn new(bytes: &'a [u8], path: &'a str) -> Result<(Rank, Self), TraceFileError> {
        let mut r = Reader::new(bytes, path, RANK_MAGIC)?;
        let rank = r.u32("rank")?;
        let decoder = RankEvents {
            r,
            time: 0,
            count: 0,
            ended: false,
            error: None,
            mapping: None,
        };
        Ok((rank, decoder))
    }

    /// Renumber and re-time the events with a rank's mapping from [`crate::unify::unify`].
    pub fn with_mapping(mut self, mapping: &'a crate::unify::RankMapping) -> Self {
        self.mapping = Some((mapping, 0));
        self
    }

    /// Bytes not decoded yet (about four per event).
    pub fn remaining_bytes(&self) -> usize {
        self.r.bytes.len() - self.r.at
    }

    /// Decodes whatever the caller left, and checks the end marker. Returns the event count.
    pub fn finish(mut self) -> Result<u64, TraceFileError> {
        while self.next().is_some() {}
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.count),
        }
    }

    #[inline(always)]
    fn event(&mut self) -> Result<Option<Event>, TraceFileError> {
        let r = &mut self.r;
        let tag = r.byte("event tag")?;
        if tag == TAG_END {
            let count = r.varint("event count")?;
            if count != self.count {
                return Err(r.garbled(format!(
                    "the end marker counts {count} events, the file holds {}",
                    self.count
                )));
            }
            if r.at != r.bytes.len() {
                return Err(r.garbled("bytes after the end marker"));
            }
            return Ok(None);
        }
        let delta = r.varint("event time")?;
        self.time = self
            .time
            .checked_add(delta)
            .ok_or_else(|| r.garbled("time overflows"))?;
        let kind = match tag {
            TAG_ENTER => EventKind::Enter {
                region: r.u32("region")?,
            },
            TAG_EXIT => EventKind::Exit,
            TAG_SEND | TAG_SYNC_SEND | TAG_RECV => {
                let (peer, tag_value, comm, bytes) = (
                    r.u32("peer")?,
                    r.signed("tag")?,
                    r.u32("communicator")?,
                    r.varint("bytes")?,
                );
                if tag == TAG_RECV {
                    EventKind::Recv {
                        peer,
                        tag: tag_value,
                        comm,
                        bytes,
                    }
                } else {
                    EventKind::Send {
                        peer,
                        tag: tag_value,
                        comm,
                        bytes,
                        synchronous: tag == TAG_SYNC_SEND,
                    }
                }
            }
            TAG_REQUEST_POST => EventKind::RequestPost {
                request: r.varint("request")?,
            },
            TAG_REQUEST_COMPLETE => EventKind::RequestComplete {
                request: r.varint("request")?,
            },
            TAG_COLLECTIVE_EXIT => {
                let comm = r.u32("communicator")?;
                let root = r.u32("root")?.checked_sub(1);
                EventKind::CollectiveExit {
                    comm,
                    root,
                    sent: r.varint("bytes sent")?,
                    received: r.varint("bytes received")?,
                }
            }
            other => return Err(r.garbled(format!("unknown event tag {other}"))),
        };
        self.count += 1;
        Ok(Some(Event {
            time: self.time,
            kind,
        }))
    }
}

impl Iterator for RankEvents<'_> {
    type Item = Event;

    #[inline(always)]
    fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        match self.event() {
            Ok(Some(mut event)) => {
                if let Some((mapping, previous)) = &mut self.mapping {
                    mapping.apply(&mut event, previous);
                }
                Some(event)
            }
            Ok(None) => {
                self.ended = true;
                None
            }
            Err(error) => {
                self.ended = true;
                self.error = Some(error);
                None
            }
        }
    }
}

/// Writes `trace` into `dir` (created if missing).
pub fn write_dir(dir: &Path, trace: &Trace) -> Result<(), TraceFileError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| TraceFileError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(DEFINITIONS_FILE);
    std::fs::write(&path, encode_definitions(&trace.definitions)).map_err(io(&path))?;
    for (rank, events) in trace.ranks.iter().enumerate() {
        let path = dir.join(rank_file_name(rank as Rank));
        let bytes = encode_rank(rank as Rank, events).map_err(io(&path))?;
        std::fs::write(&path, bytes).map_err(io(&path))?;
    }
    Ok(())
}

/// A trace directory opened for reading. `mpistat analyze` may run as root (an admin helping a
/// user) on a directory its user controls, so:
/// - the directory is reached through no symlink of another user ([`files::open_dir`]: only
///   symlinks of root or the caller, in directories of root or the caller, are followed);
/// - its files are opened relative to it, never through a symlink, without blocking, and read
///   only if they are regular files owned by the directory's owner (or the caller): not a FIFO
///   that would hang the reader, not a device, not another user's file hard-linked in;
/// - a file is read into memory reserved fallibly, at most the size it had when opened.
pub struct TraceDir {
    dir: OwnedFd,
    path: PathBuf,
    owner: u32,
}

impl TraceDir {
    pub fn open(path: &Path) -> Result<TraceDir, TraceFileError> {
        let shown = path.display().to_string();
        let dir = files::open_dir(path).map_err(|e| match e {
            FileError::Io(source) => TraceFileError::Io {
                path: shown.clone(),
                source,
            },
            other => TraceFileError::Refused {
                path: shown.clone(),
                why: other.to_string(),
            },
        })?;
        let owner = files::stat_fd(dir.as_raw_fd())
            .map_err(|source| TraceFileError::Io {
                path: shown.clone(),
                source,
            })?
            .st_uid;
        Ok(TraceDir {
            dir,
            path: path.to_path_buf(),
            owner,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's owner: the trace's user.
    pub fn owner(&self) -> u32 {
        self.owner
    }

    /// The path of `name` in the directory, for messages.
    fn shown(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }

    /// The names in the directory, sorted.
    pub fn names(&self) -> Result<Vec<String>, TraceFileError> {
        let mut names: Vec<String> = files::names_in(&self.dir)
            .map_err(|source| TraceFileError::Io {
                path: self.path.display().to_string(),
                source,
            })?
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// `name` opened for reading, if it may be read; with its size.
    fn open_file(&self, name: &str) -> Result<(File, u64), TraceFileError> {
        let refused = |why: String| TraceFileError::Refused {
            path: self.shown(name),
            why,
        };
        let file = files::open_in(&self.dir, OsStr::new(name)).map_err(|source| {
            if source.raw_os_error() == Some(libc::ELOOP) {
                refused("a symlink: the files of a trace are read only where they are".into())
            } else {
                TraceFileError::Io {
                    path: self.shown(name),
                    source,
                }
            }
        })?;
        let st = files::stat_fd(file.as_raw_fd()).map_err(|source| TraceFileError::Io {
            path: self.shown(name),
            source,
        })?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(refused(format!(
                "not a regular file ({})",
                files::kind_of(st.st_mode)
            )));
        }
        // SAFETY: geteuid cannot fail.
        if st.st_uid != self.owner && st.st_uid != unsafe { libc::geteuid() } {
            return Err(refused(format!(
                "owned by uid {}, the directory by uid {}",
                st.st_uid, self.owner
            )));
        }
        Ok((file, st.st_size.max(0) as u64))
    }

    /// The size of the file `name` (checked as for reading it).
    pub fn size(&self, name: &str) -> Result<u64, TraceFileError> {
        Ok(self.open_file(name)?.1)
    }

    /// The first `most` bytes of the file `name` (all of it if shorter).
    pub fn read_head(&self, name: &str, most: u64) -> Result<Vec<u8>, TraceFileError> {
        let (file, size) = self.open_file(name)?;
        let want = size.min(most);
        let mut bytes = Vec::new();
        if bytes.try_reserve_exact(want as usize).is_err() {
            return Err(TraceFileError::Refused {
                path: self.shown(name),
                why: format!("its {size} bytes do not fit in memory"),
            });
        }
        file.take(want)
            .read_to_end(&mut bytes)
            .map_err(|source| TraceFileError::Io {
                path: self.shown(name),
                source,
            })?;
        Ok(bytes)
    }

    /// The file `name`, whole (as long as it was when opened).
    pub fn read(&self, name: &str) -> Result<Vec<u8>, TraceFileError> {
        self.read_head(name, u64::MAX)
    }
}

/// The loaded objects the profiler recorded in a directory's local definitions (for turning call
/// sites into source lines); empty for other traces. Unreadable files are skipped.
pub fn modules_of_dir(trace: &TraceDir) -> Vec<Module> {
    let mut modules: Vec<Module> = Vec::new();
    for name in trace.names().unwrap_or_default() {
        if !is_local_file_name(&name) {
            continue;
        }
        let Ok(bytes) = trace.read(&name) else {
            continue;
        };
        if let Ok(local) = decode_local(&bytes, &name) {
            for m in local.modules {
                if !modules
                    .iter()
                    .any(|k| k.path == m.path && k.build_id == m.build_id)
                {
                    modules.push(m);
                }
            }
        }
    }
    modules
}

/// Reads a trace directory: the trace, plus problems that did not stop the reading (missing or
/// duplicate ranks, stray files, where recording stopped). A broken file is an error. A directory
/// the profiler wrote holds per-rank local definitions instead of `definitions.mpt`; they are
/// unified, and each rank's clock is corrected to rank 0's (`unify.rs`).
pub fn read_dir(dir: &Path) -> Result<(Trace, Vec<String>), TraceFileError> {
    let (definitions, ranks, problems) = read_dir_with(dir, |_, events, _| {
        Ok::<_, TraceFileError>(events.collect::<Vec<Event>>())
    })?;
    let trace = Trace {
        definitions,
        ranks: ranks.into_iter().map(Option::unwrap_or_default).collect(),
    };
    Ok((trace, problems))
}

/// What [`read_dir_with`] returns: the definitions, per world rank what `read` made of its file
/// (`None` when the rank has no file), and problems that did not stop the reading.
pub type DirContents<T> = (Definitions, Vec<Option<T>>, Vec<String>);

/// Reads a trace directory, handing each rank file's events to `read` (in parallel over files).
/// A broken file is an error (the first in file-name order); missing or duplicate ranks and
/// stray files are problems.
pub fn read_dir_with<T, E>(
    dir: &Path,
    read: impl Fn(Rank, &mut RankEvents<'_>, &Definitions) -> Result<T, E> + Sync,
) -> Result<DirContents<T>, E>
where
    T: Send,
    E: From<TraceFileError> + Send,
{
    read_dir_ranks_with(dir, |_| true, read)
}

/// The rank a file named by [`rank_file_name`] holds (`rank-N.mpt`).
fn rank_of_file_name(name: &str) -> Option<Rank> {
    name.strip_prefix("rank-")?
        .strip_suffix(".mpt")?
        .parse()
        .ok()
}

/// Whether `name` is a local definitions file's (`local-N.mpt`).
fn is_local_file_name(name: &str) -> bool {
    name.starts_with("local-") && name.ends_with(".mpt")
}

/// Bytes of a local definitions file that hold its header (magic, version, rank, world size).
const LOCAL_HEADER_BYTES: u64 = 10 + 2 * 10;

/// What the estimate of an analysis's memory (`mpistat_analysis::memory`) needs of a trace directory,
/// found without reading any events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    /// The size in bytes of every rank file (by the rank its name gives), by rank.
    pub sizes: Vec<(Rank, u64)>,
    /// The world size the ranks' local definitions say (their largest), 0 without them.
    pub world: u32,
    /// The bytes of definitions (`definitions.mpt` and the local definitions), which every
    /// analysis process reads whole.
    pub definition_bytes: u64,
}

/// The [`Survey`] of the trace directory `dir`.
pub fn survey(dir: &Path) -> Result<Survey, TraceFileError> {
    let trace = TraceDir::open(dir)?;
    let mut survey = Survey::default();
    for name in trace.names()? {
        if let Some(rank) = rank_of_file_name(&name) {
            survey.sizes.push((rank, trace.size(&name)?));
        } else if is_local_file_name(&name) {
            survey.definition_bytes += trace.size(&name)?;
            let head = trace.read_head(&name, LOCAL_HEADER_BYTES)?;
            let world = world_size_of_local(&head, &trace.shown(&name))?;
            survey.world = survey.world.max(world);
        } else if name == DEFINITIONS_FILE {
            survey.definition_bytes += trace.size(&name)?;
        }
    }
    survey.sizes.sort_unstable();
    Ok(survey)
}

/// [`read_dir_with`] for the `wanted` ranks only (one process of a distributed analysis): the
/// other ranks' event files are not read (a file not named by [`rank_file_name`] is, and dropped
/// when its rank is not wanted), and only wanted ranks are reported missing. The definitions are
/// read whole. A rank file's header must name the rank its file name does, and every rank's
/// local definitions the same world size.
pub fn read_dir_ranks_with<T, E>(
    dir: &Path,
    wanted: impl Fn(Rank) -> bool + Sync,
    read: impl Fn(Rank, &mut RankEvents<'_>, &Definitions) -> Result<T, E> + Sync,
) -> Result<DirContents<T>, E>
where
    T: Send,
    E: From<TraceFileError> + Send,
{
    let trace = TraceDir::open(dir)?;
    let mut names = trace.names()?;
    let mut problems = Vec::new();
    let mut locals: Vec<LocalDefinitions> = Vec::new();
    let mut global: Option<Definitions> = None;
    names.retain(|name| {
        let keep = name == DEFINITIONS_FILE
            || is_local_file_name(name)
            || rank_of_file_name(name).is_some();
        if !keep {
            problems.push(format!("{name}: not a trace file; ignored"));
        }
        keep
    });
    // Every rank a file names, wanted or not, has its place in the result.
    let named_ranks = names
        .iter()
        .filter_map(|name| rank_of_file_name(name))
        .max()
        .map_or(0, |rank| u64::from(rank) + 1);
    names.retain(|name| rank_of_file_name(name).is_none_or(&wanted));
    let mut rank_files = Vec::new();
    for name in names {
        if name == DEFINITIONS_FILE {
            let bytes = trace.read(&name)?;
            global = Some(decode_definitions(&bytes, &trace.shown(&name))?);
        } else if is_local_file_name(&name) {
            let bytes = trace.read(&name)?;
            let local = decode_local(&bytes, &trace.shown(&name))?;
            if let Some(first) = locals.first() {
                if local.world_size != first.world_size {
                    return Err(TraceFileError::Refused {
                        path: trace.shown(&name),
                        why: format!(
                            "world size {}, where rank {}'s definitions say {}",
                            local.world_size, first.rank, first.world_size
                        ),
                    }
                    .into());
                }
            }
            locals.push(local);
        } else {
            rank_files.push(name);
        }
    }
    // A profiler's directory: unify the ranks' own definitions; each rank's events are
    // renumbered and re-timed as they are decoded.
    let (definitions, mappings) = match global {
        Some(defs) => {
            if !locals.is_empty() {
                problems.push("local definitions beside definitions.mpt; ignored".into());
            }
            (defs, None)
        }
        None if !locals.is_empty() => {
            let (defs, mappings) = crate::unify::unify(&locals, &mut problems).map_err(|_| {
                TraceFileError::Refused {
                    path: dir.display().to_string(),
                    why: format!(
                        "{} ranks, as its definitions say, do not fit in memory",
                        locals[0].world_size
                    ),
                }
            })?;
            (defs, Some(mappings))
        }
        None => {
            return Err(TraceFileError::NoDefinitions {
                dir: dir.display().to_string(),
                name: DEFINITIONS_FILE,
            }
            .into())
        }
    };
    let world = definitions
        .communicators
        .first()
        .map_or(0, |c| c.members.len() as u64)
        .max(named_ranks);
    let mut ranks: Vec<Option<T>> = Vec::new();
    if ranks.try_reserve_exact(world as usize).is_err() {
        return Err(TraceFileError::Refused {
            path: dir.display().to_string(),
            why: format!("{world} ranks do not fit in memory"),
        }
        .into());
    }
    ranks.resize_with(world as usize, || None);
    let files = parallel_map(rank_files.len(), |i| -> Result<(Rank, Option<T>), E> {
        let name = &rank_files[i];
        let bytes = trace.read(name)?;
        let path = trace.shown(name);
        let (rank, events) = RankEvents::new(&bytes, &path)?;
        if Some(rank) != rank_of_file_name(name) {
            return Err(TraceFileError::Garbled {
                path,
                offset: 10,
                what: format!("the header says rank {rank}, the file's name another"),
            }
            .into());
        }
        if !wanted(rank) {
            return Ok((rank, None));
        }
        let mut events = match &mappings {
            None => events,
            Some(m) => match m.get(rank as usize) {
                Some(Some(mapping)) => events.with_mapping(mapping),
                _ => return Ok((rank, None)),
            },
        };
        let made = read(rank, &mut events, &definitions);
        // A damaged file explains whatever `read` made of it.
        events.finish()?;
        Ok((rank, Some(made?)))
    });
    for (name, file) in rank_files.iter().zip(files) {
        let (rank, made) = file?;
        let Some(made) = made else {
            if !wanted(rank) {
                continue;
            }
            problems.push(format!(
                "{name}: rank {rank} has events but no local definitions; analysed as empty"
            ));
            continue;
        };
        // Every rank file names a rank below `world` (its name and header agree).
        let Some(slot) = ranks.get_mut(rank as usize) else {
            continue;
        };
        if slot.is_some() {
            problems.push(format!("{name}: a second file for rank {rank}; ignored"));
            continue;
        }
        *slot = Some(made);
    }
    // Named one by one up to a hundred (a world may be large and nearly all missing).
    const NAMED: usize = 100;
    let mut missing = ranks
        .iter()
        .enumerate()
        .filter(|&(rank, r)| r.is_none() && wanted(rank as Rank))
        .map(|(i, _)| i);
    let named: Vec<usize> = missing.by_ref().take(NAMED).collect();
    let more = missing.count();
    if more > 0 {
        problems.push(format!(
            "no trace for {} ranks ({named:?} and {more} more); they are analysed as empty",
            NAMED + more
        ));
    } else if !named.is_empty() {
        problems.push(format!(
            "no trace for ranks {named:?}; they are analysed as empty"
        ));
    }
    Ok((definitions, ranks, problems))
}
