//! Writing an OTF2 archive through libotf2: the archive, one location's events from the
//! analysis model's, and the global definitions.
//!
//! The model's events map onto OTF2's one for one, so that reading the archive back
//! (`read.rs`) gives the same events (and so the same analysis):
//!
//! | model | OTF2 |
//! | --- | --- |
//! | `Enter`, `Exit` | `Enter`, `Leave` |
//! | `Send` (then `RequestPost` of the same call) | `MpiSend` (`MpiIsend` with the request) |
//! | `Recv` | `MpiRecv` |
//! | `RequestPost` of a receive | `MpiIrecvRequest` |
//! | `RequestComplete` of a send | `MpiIsendComplete` |
//! | `RequestComplete` (then `Recv` at the same time) | `MpiIrecv` (its sender undefined when the profiler did not know it) |
//! | `Enter` of a collective ... `CollectiveExit` | `Enter`, `MpiCollectiveBegin` ... `MpiCollectiveEnd`, `Leave` |
//!
//! Peers and roots are world ranks in the model, ranks in the communicator in OTF2. Times are
//! written as they are: the reader of an mpistat trace has already moved them onto rank 0's
//! clock (offsets and drift corrected), so the archive needs no clock offsets.

use crate::collectives::Collectives;
use crate::error::{check, quiet_library, Otf2Error};
use crate::ffi;
use crate::names::{collective_op, role_and_paradigm, split_site, UNDEFINED_U32, UNDEFINED_U64};
use mpistat_analysis::distributed::Exchange;
use mpistat_trace::model::{
    CommId, Definitions, Event, EventKind, MpiClass, Rank, RegionId, RegionRole, Ticks,
};
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The archive's name inside its directory: `DIR/traces.otf2`, `DIR/traces.def`,
/// `DIR/traces/`, as Score-P names them.
pub const ARCHIVE_NAME: &str = "traces";

/// The archive's chunk size, for events and definitions: OTF2's smallest. libotf2 clears a
/// whole chunk for every location it opens (events and local definitions), so at 1,024 ranks
/// its defaults (1 and 4 MiB) cost seconds of clearing memory; a rank's events fill chunks of
/// this size as well.
const CHUNK_BYTES: u64 = 256 * 1024;

/// What the export of one rank wrote: OTF2 events and the first and last time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RankWritten {
    pub events: u64,
    /// The first and last event's time, if any.
    pub span: Option<(Ticks, Ticks)>,
}

impl RankWritten {
    pub(crate) fn encode(&self) -> [u64; 3] {
        let (first, last) = self.span.unwrap_or((UNDEFINED_U64, 0));
        [self.events, first, last]
    }

    pub(crate) fn decode(words: [u64; 3]) -> Self {
        RankWritten {
            events: words[0],
            span: (words[1] != UNDEFINED_U64).then_some((words[1], words[2])),
        }
    }
}

unsafe extern "C" fn pre_flush(
    _user: *mut std::ffi::c_void,
    _file_type: ffi::OTF2_FileType,
    _location: ffi::OTF2_LocationRef,
    _caller: *mut std::ffi::c_void,
    _final: bool,
) -> ffi::OTF2_FlushType {
    // A full chunk goes to its file: the export holds one chunk per open location (256 KiB),
    // never a whole trace.
    ffi::OTF2_FLUSH as ffi::OTF2_FlushType
}

static FLUSH: ffi::OTF2_FlushCallbacks = ffi::OTF2_FlushCallbacks {
    otf2_pre_flush: Some(pre_flush),
    // No post-flush callback: no BufferFlush records in the trace.
    otf2_post_flush: None,
};

/// An OTF2 archive being written (`DIR/traces.otf2` and its files). With an [`Exchange`], every
/// process of a distributed export holds one and writes its own locations; process 0's is
/// OTF2's primary archive, which alone writes the global definitions.
pub struct ArchiveWriter<'a> {
    archive: *mut ffi::OTF2_Archive,
    path: String,
    evt_files_open: bool,
    /// What libotf2's collective callbacks use; must outlive the archive.
    _collectives: Option<Box<Collectives<'a>>>,
}

// SAFETY: the archive is libotf2's plain heap object, used by one thread at a time (the export
// holds it behind a mutex); it keeps no thread-local state.
unsafe impl Send for ArchiveWriter<'_> {}

fn c_string(text: &str) -> CString {
    // Interior NULs cannot be written as C strings: they end the text there.
    CString::new(text.split('\0').next().unwrap_or("")).unwrap_or_default()
}

impl<'a> ArchiveWriter<'a> {
    /// Creates the archive in `dir` (which must not exist yet, or be empty). `exchange`: the
    /// processes of a distributed export, all calling this together; `None` for one process.
    pub fn create(dir: &Path, exchange: Option<&'a dyn Exchange>) -> Result<Self, Otf2Error> {
        quiet_library();
        let path = dir.display().to_string();
        let primary = exchange.is_none_or(|e| e.process() == 0);
        if primary {
            refuse_existing(dir)?;
        }
        let c_dir = c_string(&path);
        let c_name = c_string(ARCHIVE_NAME);
        // SAFETY: valid, terminated strings; libotf2 copies them.
        let archive = unsafe {
            ffi::OTF2_Archive_Open(
                c_dir.as_ptr(),
                c_name.as_ptr(),
                ffi::OTF2_FILEMODE_WRITE as ffi::OTF2_FileMode,
                CHUNK_BYTES,
                CHUNK_BYTES,
                ffi::OTF2_SUBSTRATE_POSIX as ffi::OTF2_FileSubstrate,
                ffi::OTF2_COMPRESSION_NONE as ffi::OTF2_Compression,
            )
        };
        if archive.is_null() {
            check(ffi::OTF2_ERROR_INVALID, "OTF2_Archive_Open", &path)?;
        }
        let mut writer = ArchiveWriter {
            archive,
            path,
            evt_files_open: false,
            _collectives: None,
        };
        // SAFETY: the archive is open; FLUSH is static.
        writer.check(
            unsafe { ffi::OTF2_Archive_SetFlushCallbacks(archive, &FLUSH, std::ptr::null_mut()) },
            "OTF2_Archive_SetFlushCallbacks",
        )?;
        match exchange {
            None => writer.check(
                // SAFETY: the archive is open.
                unsafe { ffi::OTF2_Archive_SetSerialCollectiveCallbacks(archive) },
                "OTF2_Archive_SetSerialCollectiveCallbacks",
            )?,
            Some(exchange) => {
                let collectives = Box::new(Collectives::new(exchange));
                let code = collectives.install(archive);
                writer._collectives = Some(collectives);
                writer.check(code, "OTF2_Archive_SetCollectiveCallbacks")?;
            }
        }
        let creator = c_string(concat!("mpistat ", env!("CARGO_PKG_VERSION")));
        let description = c_string("an MPI job traced by mpistat");
        // SAFETY: the archive is open; the strings are copied.
        unsafe {
            writer.check(
                ffi::OTF2_Archive_SetCreator(archive, creator.as_ptr()),
                "OTF2_Archive_SetCreator",
            )?;
            writer.check(
                ffi::OTF2_Archive_SetDescription(archive, description.as_ptr()),
                "OTF2_Archive_SetDescription",
            )?;
            writer.check(
                ffi::OTF2_Archive_OpenEvtFiles(archive),
                "OTF2_Archive_OpenEvtFiles",
            )?;
        }
        writer.evt_files_open = true;
        Ok(writer)
    }

    fn check(&self, code: ffi::OTF2_ErrorCode, call: &'static str) -> Result<(), Otf2Error> {
        check(code, call, &self.path)
    }

    /// Writes world rank `rank`'s events (the model's, in time order) as its location's, with
    /// `defs` (which the events' ids index) and `comm_ranks` (made from the same).
    pub fn write_rank(
        &mut self,
        rank: Rank,
        events: impl IntoIterator<Item = Event>,
        defs: &Definitions,
        comm_ranks: &CommRanks,
    ) -> Result<RankWritten, Otf2Error> {
        // SAFETY: the archive is open; the location is the rank.
        let writer = unsafe { ffi::OTF2_Archive_GetEvtWriter(self.archive, rank.into()) };
        if writer.is_null() {
            self.check(ffi::OTF2_ERROR_INVALID, "OTF2_Archive_GetEvtWriter")?;
        }
        let mut location = LocationWriter {
            writer,
            path: &self.path,
            rank,
            defs,
            comm_ranks,
            stack: Vec::new(),
            pending: None,
            sends: HashSet::new(),
            written: RankWritten::default(),
        };
        let result = events
            .into_iter()
            .try_for_each(|event| location.event(event))
            .and_then(|()| location.finish());
        let written = location.written;
        // SAFETY: the writer is this archive's; closing flushes its last chunk.
        let closed = unsafe { ffi::OTF2_Archive_CloseEvtWriter(self.archive, writer) };
        result?;
        self.check(closed, "OTF2_Archive_CloseEvtWriter")?;
        Ok(written)
    }

    /// Writes the global definitions (process 0 of a distributed export only; the others call
    /// nothing): `written` is every world rank's [`RankWritten`].
    pub fn write_definitions(
        &mut self,
        defs: &Definitions,
        written: &[RankWritten],
    ) -> Result<(), Otf2Error> {
        // SAFETY: the archive is open.
        let writer = unsafe { ffi::OTF2_Archive_GetGlobalDefWriter(self.archive) };
        if writer.is_null() {
            self.check(ffi::OTF2_ERROR_INVALID, "OTF2_Archive_GetGlobalDefWriter")?;
        }
        GlobalDefinitions {
            writer,
            path: &self.path,
            strings: HashMap::new(),
        }
        .write(defs, written)
    }

    /// Closes the event files, writes every process's (empty) local definitions files, and
    /// closes the archive (process 0: the anchor file). All processes call it together.
    pub fn close(mut self, ranks: std::ops::Range<Rank>) -> Result<(), Otf2Error> {
        self.evt_files_open = false;
        // SAFETY: the archive is open; each local definitions writer is closed at once.
        unsafe {
            self.check(
                ffi::OTF2_Archive_CloseEvtFiles(self.archive),
                "OTF2_Archive_CloseEvtFiles",
            )?;
            self.check(
                ffi::OTF2_Archive_OpenDefFiles(self.archive),
                "OTF2_Archive_OpenDefFiles",
            )?;
            for rank in ranks {
                let writer = ffi::OTF2_Archive_GetDefWriter(self.archive, rank.into());
                if writer.is_null() {
                    self.check(ffi::OTF2_ERROR_INVALID, "OTF2_Archive_GetDefWriter")?;
                }
                self.check(
                    ffi::OTF2_Archive_CloseDefWriter(self.archive, writer),
                    "OTF2_Archive_CloseDefWriter",
                )?;
            }
            self.check(
                ffi::OTF2_Archive_CloseDefFiles(self.archive),
                "OTF2_Archive_CloseDefFiles",
            )?;
        }
        let archive = std::mem::replace(&mut self.archive, std::ptr::null_mut());
        // SAFETY: closing the open archive once (Drop sees the null).
        self.check(
            unsafe { ffi::OTF2_Archive_Close(archive) },
            "OTF2_Archive_Close",
        )
    }
}

impl Drop for ArchiveWriter<'_> {
    fn drop(&mut self) {
        if self.archive.is_null() {
            return;
        }
        // SAFETY: an archive abandoned after an error: closed once, errors ignored (the error
        // that abandoned it is the one reported).
        unsafe {
            if self.evt_files_open {
                ffi::OTF2_Archive_CloseEvtFiles(self.archive);
            }
            ffi::OTF2_Archive_Close(self.archive);
        }
    }
}

/// An archive is only written into a new or empty directory: never over another one's files.
fn refuse_existing(dir: &Path) -> Result<(), Otf2Error> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(Otf2Error::Io {
            path: dir.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "exists and is not empty; the OTF2 archive goes into a new directory",
            ),
        }),
        Ok(false) => std::fs::remove_dir(dir).map_err(|source| Otf2Error::Io {
            path: dir.display().to_string(),
            source,
        }),
        Err(_) => Ok(()),
    }
}

/// World ranks as ranks in each communicator (OTF2 numbers peers and roots in the
/// communicator): per communicator, its (world rank, rank in it) sorted by world rank.
#[derive(Debug, Default)]
pub struct CommRanks {
    by_comm: Vec<Vec<(Rank, u32)>>,
}

impl CommRanks {
    pub fn new(defs: &Definitions) -> Self {
        let by_comm = (defs.communicators.iter())
            .map(|comm| {
                let mut pairs: Vec<(Rank, u32)> = (comm.members.iter().enumerate())
                    .map(|(local, &world)| (world, local as u32))
                    .collect();
                pairs.sort_unstable();
                pairs
            })
            .collect();
        CommRanks { by_comm }
    }

    /// `world`'s rank in `comm`; OTF2's undefined value when it is not a member.
    fn local(&self, comm: CommId, world: Rank) -> u32 {
        let Some(pairs) = self.by_comm.get(comm as usize) else {
            return UNDEFINED_U32;
        };
        match pairs.get(world as usize) {
            // The world and its duplicates: rank r at index r.
            Some(&(w, local)) if w == world => local,
            _ => pairs
                .binary_search_by_key(&world, |&(w, _)| w)
                .map_or(UNDEFINED_U32, |i| pairs[i].1),
        }
    }
}

/// One location's events as they are written.
struct LocationWriter<'a> {
    writer: *mut ffi::OTF2_EvtWriter,
    path: &'a str,
    rank: Rank,
    defs: &'a Definitions,
    comm_ranks: &'a CommRanks,
    /// Open regions.
    stack: Vec<RegionId>,
    /// An event that may combine with the next (see the module's table).
    pending: Option<Event>,
    /// Requests of sends not completed yet.
    sends: HashSet<u64>,
    written: RankWritten,
}

/// Calls a libotf2 event writer with the location's writer and no attributes, counting it.
macro_rules! write_event {
    ($self:ident, $function:ident, $time:expr $(, $argument:expr)*) => {{
        $self.count($time);
        // SAFETY: the writer is open; plain values.
        let code = unsafe {
            ffi::$function($self.writer, std::ptr::null_mut(), $time $(, $argument)*)
        };
        check(code, stringify!($function), $self.path)
    }};
}

impl LocationWriter<'_> {
    fn count(&mut self, time: Ticks) {
        self.written.events += 1;
        let first = self.written.span.map_or(time, |(first, _)| first);
        self.written.span = Some((first, time));
    }

    fn bad(&self, what: &'static str) -> Otf2Error {
        Otf2Error::BadTrace {
            path: self.path.to_string(),
            rank: self.rank,
            what,
        }
    }

    fn is_collective(&self, region: RegionId) -> bool {
        matches!(
            self.defs.regions.get(region as usize).map(|r| r.role),
            Some(RegionRole::Mpi(class)) if class != MpiClass::PointToPoint
        )
    }

    fn event(&mut self, event: Event) -> Result<(), Otf2Error> {
        if let Some(pending) = self.pending.take() {
            if self.combined(pending, event)? {
                return Ok(());
            }
            self.alone(pending)?;
        }
        match event.kind {
            EventKind::Send { .. } | EventKind::RequestComplete { .. } => {
                self.pending = Some(event)
            }
            EventKind::Enter { region } if self.is_collective(region) => self.pending = Some(event),
            _ => self.alone(event)?,
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Otf2Error> {
        match self.pending.take() {
            Some(pending) => self.alone(pending),
            None => Ok(()),
        }
    }

    /// Writes `first` and `second` as one OTF2 event if they are one (see the module's table).
    fn combined(&mut self, first: Event, second: Event) -> Result<bool, Otf2Error> {
        match (first.kind, second.kind) {
            (
                EventKind::Send {
                    peer,
                    tag,
                    comm,
                    bytes,
                    ..
                },
                EventKind::RequestPost { request },
            ) => {
                let receiver = self.comm_ranks.local(comm, peer);
                write_event!(
                    self,
                    OTF2_EvtWriter_MpiIsend,
                    first.time,
                    receiver,
                    comm,
                    tag as u32,
                    bytes,
                    request
                )?;
                self.sends.insert(request);
            }
            (
                EventKind::RequestComplete { request },
                EventKind::Recv {
                    peer,
                    tag,
                    comm,
                    bytes,
                },
            ) if first.time == second.time => {
                let sender = self.comm_ranks.local(comm, peer);
                write_event!(
                    self,
                    OTF2_EvtWriter_MpiIrecv,
                    second.time,
                    sender,
                    comm,
                    tag as u32,
                    bytes,
                    request
                )?;
            }
            (
                EventKind::Enter { region },
                EventKind::CollectiveExit {
                    comm,
                    root,
                    sent,
                    received,
                },
            ) => {
                write_event!(self, OTF2_EvtWriter_Enter, first.time, region)?;
                write_event!(self, OTF2_EvtWriter_MpiCollectiveBegin, first.time)?;
                self.stack.push(region);
                self.collective_end(second.time, comm, root, sent, received)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn collective_end(
        &mut self,
        time: Ticks,
        comm: CommId,
        root: Option<Rank>,
        sent: u64,
        received: u64,
    ) -> Result<(), Otf2Error> {
        let region = self
            .stack
            .pop()
            .ok_or_else(|| self.bad("a collective ends outside any region"))?;
        let routine = (self.defs.regions.get(region as usize)).map_or("", |r| r.name.as_str());
        let op = collective_op(routine);
        let root = root.map_or(UNDEFINED_U32, |r| self.comm_ranks.local(comm, r));
        write_event!(
            self,
            OTF2_EvtWriter_MpiCollectiveEnd,
            time,
            op,
            comm,
            root,
            sent,
            received
        )?;
        write_event!(self, OTF2_EvtWriter_Leave, time, region)
    }

    /// Writes an event that combines with no other.
    fn alone(&mut self, event: Event) -> Result<(), Otf2Error> {
        let time = event.time;
        match event.kind {
            EventKind::Enter { region } => {
                self.stack.push(region);
                write_event!(self, OTF2_EvtWriter_Enter, time, region)
            }
            EventKind::Exit => {
                let region =
                    (self.stack.pop()).ok_or_else(|| self.bad("an exit without an enter"))?;
                write_event!(self, OTF2_EvtWriter_Leave, time, region)
            }
            EventKind::Send {
                peer,
                tag,
                comm,
                bytes,
                ..
            } => {
                let receiver = self.comm_ranks.local(comm, peer);
                write_event!(
                    self,
                    OTF2_EvtWriter_MpiSend,
                    time,
                    receiver,
                    comm,
                    tag as u32,
                    bytes
                )
            }
            EventKind::Recv {
                peer,
                tag,
                comm,
                bytes,
            } => {
                let sender = self.comm_ranks.local(comm, peer);
                write_event!(
                    self,
                    OTF2_EvtWriter_MpiRecv,
                    time,
                    sender,
                    comm,
                    tag as u32,
                    bytes
                )
            }
            EventKind::RequestPost { request } => {
                write_event!(self, OTF2_EvtWriter_MpiIrecvRequest, time, request)
            }
            EventKind::RequestComplete { request } if self.sends.remove(&request) => {
                write_event!(self, OTF2_EvtWriter_MpiIsendComplete, time, request)
            }
            // A receive completed whose source the profiler could not know (a wildcard
            // receive whose status the program ignored).
            EventKind::RequestComplete { request } => write_event!(
                self,
                OTF2_EvtWriter_MpiIrecv,
                time,
                UNDEFINED_U32,
                UNDEFINED_U32,
                UNDEFINED_U32,
                0,
                request
            ),
            // A collective whose enter did not come just before (some event between).
            EventKind::CollectiveExit {
                comm,
                root,
                sent,
                received,
            } => {
                write_event!(self, OTF2_EvtWriter_MpiCollectiveBegin, time)?;
                self.collective_end(time, comm, root, sent, received)
            }
        }
    }
}

/// The global definitions file being written, with its strings.
struct GlobalDefinitions<'a> {
    writer: *mut ffi::OTF2_GlobalDefWriter,
    path: &'a str,
    strings: HashMap<String, ffi::OTF2_StringRef>,
}

/// Calls a libotf2 global definitions writer.
macro_rules! write_definition {
    ($self:ident, $function:ident $(, $argument:expr)*) => {{
        // SAFETY: the writer is open; plain values and pointers into live buffers.
        let code = unsafe { ffi::$function($self.writer $(, $argument)*) };
        check(code, stringify!($function), $self.path)
    }};
}

impl GlobalDefinitions<'_> {
    /// Group `id` of MPI, unnamed: the locations group (`members` are locations) or a
    /// communicator's (`members` are world ranks).
    fn mpi_group(
        &mut self,
        id: u32,
        kind: ffi::OTF2_GroupType_enum,
        members: &[u64],
    ) -> Result<(), Otf2Error> {
        let unnamed = self.string("")?;
        write_definition!(
            self,
            OTF2_GlobalDefWriter_WriteGroup,
            id,
            unnamed,
            kind as ffi::OTF2_GroupType,
            ffi::OTF2_PARADIGM_MPI as ffi::OTF2_Paradigm,
            ffi::OTF2_GROUP_FLAG_NONE as ffi::OTF2_GroupFlag,
            members.len() as u32,
            members.as_ptr()
        )
    }

    /// The string's definition, written the first time it is used.
    fn string(&mut self, text: &str) -> Result<ffi::OTF2_StringRef, Otf2Error> {
        if let Some(&id) = self.strings.get(text) {
            return Ok(id);
        }
        let id = self.strings.len() as ffi::OTF2_StringRef;
        let c_text = c_string(text);
        write_definition!(self, OTF2_GlobalDefWriter_WriteString, id, c_text.as_ptr())?;
        self.strings.insert(text.to_string(), id);
        Ok(id)
    }

    /// A string, or OTF2's undefined one for an empty text.
    fn optional_string(&mut self, text: &str) -> Result<ffi::OTF2_StringRef, Otf2Error> {
        match text {
            "" => Ok(UNDEFINED_U32),
            text => self.string(text),
        }
    }

    fn write(&mut self, defs: &Definitions, written: &[RankWritten]) -> Result<(), Otf2Error> {
        let first = written.iter().filter_map(|w| w.span).map(|s| s.0).min();
        let last = written.iter().filter_map(|w| w.span).map(|s| s.1).max();
        let (offset, length) = match (first, last) {
            (Some(first), Some(last)) => (first, last - first),
            _ => (0, 0),
        };
        write_definition!(
            self,
            OTF2_GlobalDefWriter_WriteClockProperties,
            defs.ticks_per_second,
            offset,
            length,
            UNDEFINED_U64
        )?;
        let mpi = self.string("MPI")?;
        write_definition!(
            self,
            OTF2_GlobalDefWriter_WriteParadigm,
            ffi::OTF2_PARADIGM_MPI as ffi::OTF2_Paradigm,
            mpi,
            ffi::OTF2_PARADIGM_CLASS_PROCESS as ffi::OTF2_ParadigmClass
        )?;
        let (node_name, node_class) = (self.string("mpistat trace")?, self.string("machine")?);
        write_definition!(
            self,
            OTF2_GlobalDefWriter_WriteSystemTreeNode,
            0,
            node_name,
            node_class,
            UNDEFINED_U32
        )?;
        let appnum = match defs.partitions {
            Some(_) => self.string("MPI_APPNUM")?,
            None => UNDEFINED_U32,
        };
        for (rank, written) in written.iter().enumerate() {
            let rank = rank as u32;
            let name = self.string(&format!("MPI Rank {rank}"))?;
            write_definition!(
                self,
                OTF2_GlobalDefWriter_WriteLocationGroup,
                rank,
                name,
                ffi::OTF2_LOCATION_GROUP_TYPE_PROCESS as ffi::OTF2_LocationGroupType,
                0,
                UNDEFINED_U32
            )?;
            write_definition!(
                self,
                OTF2_GlobalDefWriter_WriteLocation,
                rank.into(),
                name,
                ffi::OTF2_LOCATION_TYPE_CPU_THREAD as ffi::OTF2_LocationType,
                written.events,
                rank
            )?;
            if let Some(partitions) = &defs.partitions {
                let value = ffi::OTF2_AttributeValue {
                    uint32: partitions.get(rank as usize).copied().unwrap_or(0),
                };
                write_definition!(
                    self,
                    OTF2_GlobalDefWriter_WriteLocationGroupProperty,
                    rank,
                    appnum,
                    ffi::OTF2_TYPE_UINT32 as ffi::OTF2_Type,
                    value
                )?;
            }
        }
        for (id, region) in defs.regions.iter().enumerate() {
            let name = self.string(&region.name)?;
            let (file, line) = split_site(&region.site);
            let file = self.optional_string(file)?;
            let (role, paradigm) = role_and_paradigm(region.role);
            write_definition!(
                self,
                OTF2_GlobalDefWriter_WriteRegion,
                id as u32,
                name,
                name,
                UNDEFINED_U32,
                role,
                paradigm,
                ffi::OTF2_REGION_FLAG_NONE as ffi::OTF2_RegionFlag,
                file,
                line,
                line
            )?;
        }
        // Group 0: the locations by world rank; the communicators' groups list world ranks.
        let locations: Vec<u64> = (0..written.len() as u64).collect();
        self.mpi_group(0, ffi::OTF2_GROUP_TYPE_COMM_LOCATIONS, &locations)?;
        for (id, comm) in defs.communicators.iter().enumerate() {
            let members: Vec<u64> = comm.members.iter().map(|&m| m.into()).collect();
            let group = id as u32 + 1;
            self.mpi_group(group, ffi::OTF2_GROUP_TYPE_COMM_GROUP, &members)?;
            let name = match id {
                0 => self.string("MPI_COMM_WORLD")?,
                id => self.string(&format!("MPI communicator {id}"))?,
            };
            write_definition!(
                self,
                OTF2_GlobalDefWriter_WriteComm,
                id as u32,
                name,
                group,
                UNDEFINED_U32,
                ffi::OTF2_COMM_FLAG_NONE as ffi::OTF2_CommFlag
            )?;
        }
        if let Some(cartesian) = &defs.cartesian {
            let dimensions: Vec<u32> = (0..cartesian.dims.len() as u32).collect();
            for (&dimension, &size) in dimensions.iter().zip(&cartesian.dims) {
                let name = self.string(&format!("dimension {dimension}"))?;
                write_definition!(
                    self,
                    OTF2_GlobalDefWriter_WriteCartDimension,
                    dimension,
                    name,
                    size,
                    ffi::OTF2_CART_PERIODIC_FALSE as ffi::OTF2_CartPeriodicity
                )?;
            }
            let name = self.string("Cartesian topology")?;
            write_definition!(
                self,
                OTF2_GlobalDefWriter_WriteCartTopology,
                0,
                name,
                0,
                dimensions.len() as u8,
                dimensions.as_ptr()
            )?;
            for (rank, coords) in cartesian.coords.iter().enumerate() {
                write_definition!(
                    self,
                    OTF2_GlobalDefWriter_WriteCartCoordinate,
                    0,
                    rank as u32,
                    coords.len() as u8,
                    coords.as_ptr()
                )?;
            }
        }
        Ok(())
    }
}

/// Where the archive's anchor file is: `DIR/traces.otf2`.
pub fn anchor_file(dir: &Path) -> PathBuf {
    dir.join(format!("{ARCHIVE_NAME}.otf2"))
}
