//! Reading an OTF2 archive through libotf2: its global definitions as they are
//! ([`read_global_definitions`]), and one location's events through callbacks into a buffer
//! ([`LocationReader`], which hands them on in batches).
//!
//! libotf2 calls back into Rust for every record: each callback catches panics, checks what it
//! is given (strings, counts, references) and, when something is wrong, keeps the error and
//! interrupts the reading, so the error comes back as a typed [`Otf2Error`].

use crate::error::{check, quiet_library, Otf2Error};
use crate::ffi;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// An open libotf2 reader of one archive, closed when dropped.
pub(crate) struct Reader {
    pub(crate) reader: *mut ffi::OTF2_Reader,
    pub(crate) path: String,
}

impl Reader {
    pub(crate) fn open(anchor: &Path) -> Result<Reader, Otf2Error> {
        quiet_library();
        let path = anchor.display().to_string();
        let c_path = CString::new(path.clone()).map_err(|_| Otf2Error::Malformed {
            path: path.clone(),
            what: "the path holds a NUL byte".into(),
        })?;
        // SAFETY: a terminated path; libotf2 copies it.
        let reader = unsafe { ffi::OTF2_Reader_Open(c_path.as_ptr()) };
        if reader.is_null() {
            check(ffi::OTF2_ERROR_INVALID, "OTF2_Reader_Open", &path)?;
        }
        let reader = Reader { reader, path };
        // SAFETY: the reader is open.
        reader.check(
            unsafe { ffi::OTF2_Reader_SetSerialCollectiveCallbacks(reader.reader) },
            "OTF2_Reader_SetSerialCollectiveCallbacks",
        )?;
        Ok(reader)
    }

    pub(crate) fn check(
        &self,
        code: ffi::OTF2_ErrorCode,
        call: &'static str,
    ) -> Result<(), Otf2Error> {
        check(code, call, &self.path)
    }

    pub(crate) fn malformed(&self, what: impl Into<String>) -> Otf2Error {
        Otf2Error::Malformed {
            path: self.path.clone(),
            what: what.into(),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: closing the open reader once; it closes its files and sub-readers.
        unsafe { ffi::OTF2_Reader_Close(self.reader) };
    }
}

/// Runs a callback's body, keeping its error (or a panic's) in `error` and telling libotf2 to
/// stop reading.
fn guarded(
    error: &mut Option<String>,
    body: impl FnOnce() -> Result<(), String>,
) -> ffi::OTF2_CallbackCode {
    let outcome = catch_unwind(AssertUnwindSafe(body))
        .unwrap_or_else(|_| Err("an internal error while reading (a panic)".into()));
    match outcome {
        Ok(()) => ffi::OTF2_CALLBACK_SUCCESS as ffi::OTF2_CallbackCode,
        Err(what) => {
            error.get_or_insert(what);
            ffi::OTF2_CALLBACK_INTERRUPT as ffi::OTF2_CallbackCode
        }
    }
}

/// The global definitions as the archive has them (references not resolved yet).
#[derive(Debug, Default)]
pub(crate) struct RawDefinitions {
    /// Timer resolution, global offset and trace length.
    pub clock: Option<(u64, u64, u64)>,
    pub strings: HashMap<u32, String>,
    /// Location groups: reference, type.
    pub location_groups: Vec<(u32, ffi::OTF2_LocationGroupType)>,
    /// Locations: reference, type, location group.
    pub locations: Vec<(u64, ffi::OTF2_LocationType, u32)>,
    pub regions: Vec<RawRegion>,
    pub groups: HashMap<u32, RawGroup>,
    /// Communicators: reference, group, in definition order.
    pub comms: Vec<(u32, u32)>,
    /// Cartesian dimensions: reference to size.
    pub cart_dimensions: HashMap<u32, u32>,
    /// Cartesian topologies: reference, communicator, dimensions.
    pub cart_topologies: Vec<(u32, u32, Vec<u32>)>,
    /// Cartesian coordinates: topology, rank, coordinates.
    pub cart_coordinates: Vec<(u32, u32, Vec<u32>)>,
    /// Location group properties of type UINT32: group, name, value.
    pub group_properties: Vec<(u32, u32, u32)>,
    /// Paradigms of definitions the analysis does not use (metrics, I/O, RMA windows,
    /// inter-communicators).
    pub unused: Vec<&'static str>,
    error: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct RawRegion {
    pub reference: u32,
    pub name: u32,
    pub paradigm: ffi::OTF2_Paradigm,
    pub file: u32,
    pub line: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct RawGroup {
    pub kind: ffi::OTF2_GroupType,
    pub paradigm: ffi::OTF2_Paradigm,
    pub members: Vec<u64>,
}

/// Defines a global-definitions callback: `$defs` is the [`RawDefinitions`] being filled.
macro_rules! definition_callback {
    ($name:ident($($argument:ident: $type:ty),*) |$defs:ident| $body:block) => {
        unsafe extern "C" fn $name(user: *mut c_void $(, $argument: $type)*) -> ffi::OTF2_CallbackCode {
            let raw = user as *mut RawDefinitions;
            // SAFETY: `user` is the RawDefinitions registered with the reader, which outlives
            // the reading; libotf2 calls back on the reading thread, one callback at a time.
            let error = unsafe { &mut (*raw).error };
            let mut error_slot = error.take();
            let code = guarded(&mut error_slot, || {
                // SAFETY: as above.
                let $defs = unsafe { &mut *raw };
                $body
            });
            // SAFETY: as above.
            unsafe { (*raw).error = error_slot };
            code
        }
    };
}

/// # Safety
/// `text` is null or a terminated string.
unsafe fn text_of(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// # Safety
/// `items` is null or points to `count` values.
unsafe fn slice_of<'a, T>(items: *const T, count: usize) -> &'a [T] {
    if items.is_null() || count == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(items, count) }
}

definition_callback!(clock_properties(resolution: u64, offset: u64, length: u64, _realtime: u64) |defs| {
    if defs.clock.is_some() {
        return Err("clock properties defined twice".into());
    }
    defs.clock = Some((resolution, offset, length));
    Ok(())
});

definition_callback!(string(reference: ffi::OTF2_StringRef, text: *const c_char) |defs| {
    // SAFETY: libotf2 passes a terminated string from its buffer.
    let text = unsafe { text_of(text) };
    if defs.strings.insert(reference, text).is_some() {
        return Err(format!("string {reference} defined twice"));
    }
    Ok(())
});

definition_callback!(location_group(
    reference: ffi::OTF2_LocationGroupRef,
    _name: ffi::OTF2_StringRef,
    kind: ffi::OTF2_LocationGroupType,
    _parent: ffi::OTF2_SystemTreeNodeRef,
    _creator: ffi::OTF2_LocationGroupRef
) |defs| {
    defs.location_groups.push((reference, kind));
    Ok(())
});

definition_callback!(location(
    reference: ffi::OTF2_LocationRef,
    _name: ffi::OTF2_StringRef,
    kind: ffi::OTF2_LocationType,
    _events: u64,
    group: ffi::OTF2_LocationGroupRef
) |defs| {
    defs.locations.push((reference, kind, group));
    Ok(())
});

definition_callback!(region(
    reference: ffi::OTF2_RegionRef,
    name: ffi::OTF2_StringRef,
    _canonical: ffi::OTF2_StringRef,
    _description: ffi::OTF2_StringRef,
    _role: ffi::OTF2_RegionRole,
    paradigm: ffi::OTF2_Paradigm,
    _flags: ffi::OTF2_RegionFlag,
    file: ffi::OTF2_StringRef,
    line: u32,
    _end_line: u32
) |defs| {
    defs.regions.push(RawRegion { reference, name, paradigm, file, line });
    Ok(())
});

definition_callback!(group(
    reference: ffi::OTF2_GroupRef,
    _name: ffi::OTF2_StringRef,
    kind: ffi::OTF2_GroupType,
    paradigm: ffi::OTF2_Paradigm,
    _flags: ffi::OTF2_GroupFlag,
    count: u32,
    members: *const u64
) |defs| {
    // SAFETY: libotf2 passes `count` members.
    let members = unsafe { slice_of(members, count as usize) }.to_vec();
    let group = RawGroup { kind, paradigm, members };
    if defs.groups.insert(reference, group).is_some() {
        return Err(format!("group {reference} defined twice"));
    }
    Ok(())
});

definition_callback!(comm(
    reference: ffi::OTF2_CommRef,
    _name: ffi::OTF2_StringRef,
    group: ffi::OTF2_GroupRef,
    _parent: ffi::OTF2_CommRef,
    _flags: ffi::OTF2_CommFlag
) |defs| {
    defs.comms.push((reference, group));
    Ok(())
});

definition_callback!(cart_dimension(
    reference: ffi::OTF2_CartDimensionRef,
    _name: ffi::OTF2_StringRef,
    size: u32,
    _periodicity: ffi::OTF2_CartPeriodicity
) |defs| {
    defs.cart_dimensions.insert(reference, size);
    Ok(())
});

definition_callback!(cart_topology(
    reference: ffi::OTF2_CartTopologyRef,
    _name: ffi::OTF2_StringRef,
    comm: ffi::OTF2_CommRef,
    count: u8,
    dimensions: *const ffi::OTF2_CartDimensionRef
) |defs| {
    // SAFETY: libotf2 passes `count` dimensions.
    let dimensions = unsafe { slice_of(dimensions, count.into()) }.to_vec();
    defs.cart_topologies.push((reference, comm, dimensions));
    Ok(())
});

definition_callback!(cart_coordinate(
    topology: ffi::OTF2_CartTopologyRef,
    rank: u32,
    count: u8,
    coordinates: *const u32
) |defs| {
    // SAFETY: libotf2 passes `count` coordinates.
    let coordinates = unsafe { slice_of(coordinates, count.into()) }.to_vec();
    defs.cart_coordinates.push((topology, rank, coordinates));
    Ok(())
});

definition_callback!(location_group_property(
    group: ffi::OTF2_LocationGroupRef,
    name: ffi::OTF2_StringRef,
    kind: ffi::OTF2_Type,
    value: ffi::OTF2_AttributeValue
) |defs| {
    if u32::from(kind) == ffi::OTF2_TYPE_UINT32 {
        // SAFETY: the value's type says which field it holds.
        defs.group_properties.push((group, name, unsafe { value.uint32 }));
    }
    Ok(())
});

/// Notes a kind of definition the analysis does not use, once.
fn unused(defs: &mut RawDefinitions, kind: &'static str) -> Result<(), String> {
    if !defs.unused.contains(&kind) {
        defs.unused.push(kind);
    }
    Ok(())
}

definition_callback!(metric_member(
    _reference: ffi::OTF2_MetricMemberRef,
    _name: ffi::OTF2_StringRef,
    _description: ffi::OTF2_StringRef,
    _kind: ffi::OTF2_MetricType,
    _mode: ffi::OTF2_MetricMode,
    _value: ffi::OTF2_Type,
    _base: ffi::OTF2_Base,
    _exponent: i64,
    _unit: ffi::OTF2_StringRef
) |defs| { unused(defs, "metrics") });

definition_callback!(io_handle(
    _reference: ffi::OTF2_IoHandleRef,
    _name: ffi::OTF2_StringRef,
    _file: ffi::OTF2_IoFileRef,
    _paradigm: ffi::OTF2_IoParadigmRef,
    _flags: ffi::OTF2_IoHandleFlag,
    _comm: ffi::OTF2_CommRef,
    _parent: ffi::OTF2_IoHandleRef
) |defs| { unused(defs, "I/O") });

definition_callback!(rma_window(
    _reference: ffi::OTF2_RmaWinRef,
    _name: ffi::OTF2_StringRef,
    _comm: ffi::OTF2_CommRef,
    _flags: ffi::OTF2_RmaWinFlag
) |defs| { unused(defs, "one-sided communication (RMA)") });

/// Reads the archive's global definitions as they are.
pub(crate) fn read_global_definitions(reader: &Reader) -> Result<RawDefinitions, Otf2Error> {
    // SAFETY: the reader is open; the callbacks are registered with a RawDefinitions that lives
    // until the reading returns, and deleted after.
    unsafe {
        let definitions = ffi::OTF2_Reader_GetGlobalDefReader(reader.reader);
        if definitions.is_null() {
            reader.check(ffi::OTF2_ERROR_INVALID, "OTF2_Reader_GetGlobalDefReader")?;
        }
        let callbacks = ffi::OTF2_GlobalDefReaderCallbacks_New();
        if callbacks.is_null() {
            reader.check(
                ffi::OTF2_ERROR_MEM_ALLOC_FAILED,
                "OTF2_GlobalDefReaderCallbacks_New",
            )?;
        }
        let set = [
            ffi::OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(
                callbacks,
                Some(clock_properties),
            ),
            ffi::OTF2_GlobalDefReaderCallbacks_SetStringCallback(callbacks, Some(string)),
            ffi::OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(
                callbacks,
                Some(location_group),
            ),
            ffi::OTF2_GlobalDefReaderCallbacks_SetLocationCallback(callbacks, Some(location)),
            ffi::OTF2_GlobalDefReaderCallbacks_SetRegionCallback(callbacks, Some(region)),
            ffi::OTF2_GlobalDefReaderCallbacks_SetGroupCallback(callbacks, Some(group)),
            ffi::OTF2_GlobalDefReaderCallbacks_SetCommCallback(callbacks, Some(comm)),
            ffi::OTF2_GlobalDefReaderCallbacks_SetCartDimensionCallback(
                callbacks,
                Some(cart_dimension),
            ),
            ffi::OTF2_GlobalDefReaderCallbacks_SetCartTopologyCallback(
                callbacks,
                Some(cart_topology),
            ),
            ffi::OTF2_GlobalDefReaderCallbacks_SetCartCoordinateCallback(
                callbacks,
                Some(cart_coordinate),
            ),
            ffi::OTF2_GlobalDefReaderCallbacks_SetLocationGroupPropertyCallback(
                callbacks,
                Some(location_group_property),
            ),
            ffi::OTF2_GlobalDefReaderCallbacks_SetMetricMemberCallback(
                callbacks,
                Some(metric_member),
            ),
            ffi::OTF2_GlobalDefReaderCallbacks_SetIoHandleCallback(callbacks, Some(io_handle)),
            ffi::OTF2_GlobalDefReaderCallbacks_SetRmaWinCallback(callbacks, Some(rma_window)),
        ];
        let mut raw = Box::new(RawDefinitions::default());
        let registered = ffi::OTF2_Reader_RegisterGlobalDefCallbacks(
            reader.reader,
            definitions,
            callbacks,
            &mut *raw as *mut RawDefinitions as *mut c_void,
        );
        ffi::OTF2_GlobalDefReaderCallbacks_Delete(callbacks);
        for code in set {
            reader.check(code, "OTF2_GlobalDefReaderCallbacks_Set...")?;
        }
        reader.check(registered, "OTF2_Reader_RegisterGlobalDefCallbacks")?;
        let mut read = 0u64;
        let code = ffi::OTF2_Reader_ReadAllGlobalDefinitions(reader.reader, definitions, &mut read);
        if let Some(what) = raw.error.take() {
            return Err(reader.malformed(format!("global definitions: {what}")));
        }
        reader.check(code, "OTF2_Reader_ReadAllGlobalDefinitions")?;
        Ok(*raw)
    }
}

/// The records of a location's event file that the analysis uses, with OTF2's references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    Enter {
        region: u32,
    },
    Leave {
        region: u32,
    },
    /// A send; `request` for `MpiIsend`.
    Send {
        receiver: u32,
        comm: u32,
        tag: u32,
        length: u64,
        request: Option<u64>,
    },
    /// A receive; `request` for `MpiIrecv`.
    Recv {
        sender: u32,
        comm: u32,
        tag: u32,
        length: u64,
        request: Option<u64>,
    },
    IsendComplete {
        request: u64,
    },
    IrecvRequest {
        request: u64,
    },
    CollectiveEnd {
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    },
}

/// Records read and not handed on yet.
#[derive(Default)]
struct Batch {
    records: std::collections::VecDeque<(u64, Record)>,
    /// Records of the kinds above, and `MpiCollectiveBegin`, so far (the others are skipped).
    handled: u64,
    error: Option<String>,
}

/// Records per call into libotf2: the buffer between its callbacks and the iterator.
const BATCH: u64 = 4096;

/// Defines an event callback that pushes `$record` (or nothing) into the [`Batch`].
macro_rules! event_callback {
    ($name:ident($($argument:ident: $type:ty),*) => $record:expr) => {
        unsafe extern "C" fn $name(
            _location: ffi::OTF2_LocationRef,
            time: ffi::OTF2_TimeStamp,
            _position: u64,
            user: *mut c_void,
            _attributes: *mut ffi::OTF2_AttributeList
            $(, $argument: $type)*
        ) -> ffi::OTF2_CallbackCode {
            // SAFETY: `user` is the Batch registered with the event reader, which outlives the
            // reading; libotf2 calls back on the reading thread, one callback at a time.
            let batch = unsafe { &mut *(user as *mut Batch) };
            let mut error = batch.error.take();
            let code = guarded(&mut error, || {
                let record: Option<Record> = $record;
                batch.handled += 1;
                if let Some(record) = record {
                    batch.records.push_back((time, record));
                }
                Ok(())
            });
            batch.error = error;
            code
        }
    };
}

event_callback!(on_enter(region: ffi::OTF2_RegionRef) => Some(Record::Enter { region }));
event_callback!(on_leave(region: ffi::OTF2_RegionRef) => Some(Record::Leave { region }));
event_callback!(on_send(receiver: u32, comm: ffi::OTF2_CommRef, tag: u32, length: u64) =>
    Some(Record::Send { receiver, comm, tag, length, request: None }));
event_callback!(on_isend(receiver: u32, comm: ffi::OTF2_CommRef, tag: u32, length: u64, request: u64) =>
    Some(Record::Send { receiver, comm, tag, length, request: Some(request) }));
event_callback!(on_isend_complete(request: u64) => Some(Record::IsendComplete { request }));
event_callback!(on_irecv_request(request: u64) => Some(Record::IrecvRequest { request }));
event_callback!(on_recv(sender: u32, comm: ffi::OTF2_CommRef, tag: u32, length: u64) =>
    Some(Record::Recv { sender, comm, tag, length, request: None }));
event_callback!(on_irecv(sender: u32, comm: ffi::OTF2_CommRef, tag: u32, length: u64, request: u64) =>
    Some(Record::Recv { sender, comm, tag, length, request: Some(request) }));
event_callback!(on_collective_begin() => None);
event_callback!(on_collective_end(
    _op: ffi::OTF2_CollectiveOp,
    comm: ffi::OTF2_CommRef,
    root: u32,
    sent: u64,
    received: u64
) => Some(Record::CollectiveEnd { comm, root, sent, received }));

/// One location's event records, read a batch at a time (the reader holds one chunk of the
/// file and one batch of records, never the location's whole trace). Clock offsets and the
/// location's mapping tables (Score-P writes both) are applied by libotf2 as it reads.
pub(crate) struct LocationReader {
    reader: Reader,
    events: *mut ffi::OTF2_EvtReader,
    batch: Box<Batch>,
    /// Records read by libotf2, handled or not.
    read: u64,
    ended: bool,
    /// The time of the last record handed out: a location's events are in time order (OTF2's
    /// rule), and an event file cut short reads on into a chunk's unwritten tail as events at 0.
    last_time: u64,
}

// SAFETY: libotf2's reader is a plain heap object used by one thread at a time.
unsafe impl Send for LocationReader {}

impl LocationReader {
    /// Opens the archive at `anchor` for reading `location`'s events.
    pub(crate) fn open(anchor: &Path, location: u64) -> Result<LocationReader, Otf2Error> {
        let reader = Reader::open(anchor)?;
        let mut batch = Box::<Batch>::default();
        // SAFETY: the reader is open; every sub-reader is its own (closed with it); the
        // callbacks are registered with a Batch that lives as long as this LocationReader.
        unsafe {
            let r = reader.reader;
            reader.check(
                ffi::OTF2_Reader_SelectLocation(r, location),
                "OTF2_Reader_SelectLocation",
            )?;
            // The local definitions carry the mapping tables and clock offsets the events need;
            // an archive may have none (the files are optional).
            if ffi::OTF2_Reader_OpenDefFiles(r) == ffi::OTF2_SUCCESS {
                let definitions = ffi::OTF2_Reader_GetDefReader(r, location);
                if !definitions.is_null() {
                    let mut read = 0u64;
                    let code = ffi::OTF2_Reader_ReadAllLocalDefinitions(r, definitions, &mut read);
                    reader.check(code, "OTF2_Reader_ReadAllLocalDefinitions")?;
                    ffi::OTF2_Reader_CloseDefReader(r, definitions);
                }
                ffi::OTF2_Reader_CloseDefFiles(r);
            }
            crate::error::forget_message();
            reader.check(ffi::OTF2_Reader_OpenEvtFiles(r), "OTF2_Reader_OpenEvtFiles")?;
            let events = ffi::OTF2_Reader_GetEvtReader(r, location);
            if events.is_null() {
                reader.check(ffi::OTF2_ERROR_INVALID, "OTF2_Reader_GetEvtReader")?;
            }
            let callbacks = ffi::OTF2_EvtReaderCallbacks_New();
            if callbacks.is_null() {
                reader.check(
                    ffi::OTF2_ERROR_MEM_ALLOC_FAILED,
                    "OTF2_EvtReaderCallbacks_New",
                )?;
            }
            let set = [
                ffi::OTF2_EvtReaderCallbacks_SetEnterCallback(callbacks, Some(on_enter)),
                ffi::OTF2_EvtReaderCallbacks_SetLeaveCallback(callbacks, Some(on_leave)),
                ffi::OTF2_EvtReaderCallbacks_SetMpiSendCallback(callbacks, Some(on_send)),
                ffi::OTF2_EvtReaderCallbacks_SetMpiIsendCallback(callbacks, Some(on_isend)),
                ffi::OTF2_EvtReaderCallbacks_SetMpiIsendCompleteCallback(
                    callbacks,
                    Some(on_isend_complete),
                ),
                ffi::OTF2_EvtReaderCallbacks_SetMpiIrecvRequestCallback(
                    callbacks,
                    Some(on_irecv_request),
                ),
                ffi::OTF2_EvtReaderCallbacks_SetMpiRecvCallback(callbacks, Some(on_recv)),
                ffi::OTF2_EvtReaderCallbacks_SetMpiIrecvCallback(callbacks, Some(on_irecv)),
                ffi::OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(
                    callbacks,
                    Some(on_collective_begin),
                ),
                ffi::OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(
                    callbacks,
                    Some(on_collective_end),
                ),
            ];
            let registered = ffi::OTF2_Reader_RegisterEvtCallbacks(
                r,
                events,
                callbacks,
                &mut *batch as *mut Batch as *mut c_void,
            );
            ffi::OTF2_EvtReaderCallbacks_Delete(callbacks);
            for code in set {
                reader.check(code, "OTF2_EvtReaderCallbacks_Set...")?;
            }
            reader.check(registered, "OTF2_Reader_RegisterEvtCallbacks")?;
            Ok(LocationReader {
                reader,
                events,
                batch,
                read: 0,
                ended: false,
                last_time: 0,
            })
        }
    }

    /// The next record and its time; `None` at the end.
    pub(crate) fn next(&mut self) -> Result<Option<(u64, Record)>, Otf2Error> {
        loop {
            if let Some(record) = self.batch.records.pop_front() {
                if record.0 < self.last_time {
                    return Err(self.reader.malformed(format!(
                        "events out of time order ({} after {}): the event file is damaged",
                        record.0, self.last_time
                    )));
                }
                self.last_time = record.0;
                return Ok(Some(record));
            }
            if self.ended {
                return Ok(None);
            }
            let mut read = 0u64;
            // SAFETY: the event reader is open and its callbacks' Batch is alive.
            let code = unsafe {
                ffi::OTF2_Reader_ReadLocalEvents(self.reader.reader, self.events, BATCH, &mut read)
            };
            self.read += read;
            if let Some(what) = self.batch.error.take() {
                return Err(self.reader.malformed(what));
            }
            self.reader.check(code, "OTF2_Reader_ReadLocalEvents")?;
            self.ended = read < BATCH;
        }
    }

    /// Records read that the analysis does not use (OpenMP, I/O, metrics, ...), so far.
    pub(crate) fn skipped(&self) -> u64 {
        self.read.saturating_sub(self.batch.handled)
    }

    pub(crate) fn path(&self) -> &str {
        &self.reader.path
    }
}
