//! Trace mode's event buffer: events as the traced thread records them, packed into 8-byte
//! words (an `Enter` or `Exit` takes two, a call with no other events two for both, the
//! model's `Event` 40 bytes), turned into `mpistat-trace` events only at `MPI_Finalize`.
//!
//! Every byte recorded is memory the kernel zeroes on first touch; in trace mode that zeroing
//! was half of the cost of a call (perf, a loop of traced `MPI_Comm_rank` calls), so the record
//! of a call is kept as small as a fixed layout allows. A record is a header word (kind in the
//! low 3 bits, a small payload above), the time, and for some kinds more words. The most common
//! record, a call with no other events, is one [`CALL`] record: its region and duration in the
//! header, its start as the time (an `Enter` and an `Exit` in 16 bytes instead of 32).
//!
//! The words are kept in a bounded chunk; when it fills, the recorder appends it to a spill
//! file ([`RawEvents::spill`], `trace/spill.rs`) and reuses it, so that a rank's resident set
//! stays bounded however long the trace; at `MPI_Finalize` [`RawEvents::replay`] reads the
//! file back in small pieces, then the chunk. Records never straddle a spill (the chunk is
//! spilled between records), but a piece read back may end inside one: it is decoded with
//! the next.

use mpistat_trace::model::{Event, EventKind};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

const ENTER: u64 = 0;
const EXIT: u64 = 1;
const SEND: u64 = 2;
const RECV: u64 = 3;
const POST: u64 = 4;
const COMPLETE: u64 = 5;
const COLLECTIVE: u64 = 6;
/// An `Enter` and its `Exit`: region in bits 3-31 of the header, duration (ticks) in bits 32-63.
const CALL: u64 = 7;

/// In a [`COLLECTIVE`] header: the record ends a superstep ([`RawEvents::end_superstep`]).
/// Above the communicator's 32 bits, which decoding keeps: the events are the same.
const SUPERSTEP_END: u64 = 1 << 63;

/// The most words one event takes (a collective exit).
pub const MAX_WORDS: usize = 5;

/// The most words a call written at once takes ([`RawEvents::push_call_with`]: an enter, the
/// largest event, an exit): the room its callers leave.
pub const MAX_CALL_WORDS: usize = MAX_WORDS + 4;

/// Words read back from the spill file at a time ([`RawEvents::replay`]): `MPI_Finalize`'s
/// own buffer, kept small.
const REPLAY_WORDS: usize = 1024;

/// Recorded events, oldest first: those spilled, then the chunk's. `len` counts the chunk's
/// words, [`RawEvents::position`] and [`RawEvents::truncate`] all of them.
pub struct RawEvents {
    /// The chunk.
    words: Vec<u64>,
    /// Words before the chunk's, in the spill file (its first `spilled` words).
    spilled: usize,
}

/// The header of a [`CALL`] record of `region` ([`RawEvents::push_call`]), 0 when the region
/// does not fit one (29 bits).
pub fn call_header(region: u32) -> u64 {
    if region >> 29 == 0 {
        CALL | u64::from(region) << 3
    } else {
        0
    }
}

/// The words of `kind` at `time`: the first `n` of the array.
#[inline(always)]
fn encode(time: u64, kind: EventKind) -> ([u64; MAX_WORDS], usize) {
    let (words, n) = match kind {
        EventKind::Enter { region } => ([ENTER | u64::from(region) << 3, time, 0, 0, 0], 2),
        EventKind::Exit => ([EXIT, time, 0, 0, 0], 2),
        EventKind::Send {
            peer,
            tag,
            comm,
            bytes,
            synchronous,
        } => {
            let head = SEND | u64::from(synchronous) << 3 | u64::from(comm) << 4;
            ([head, time, pair(peer, tag), bytes, 0], 4)
        }
        EventKind::Recv {
            peer,
            tag,
            comm,
            bytes,
        } => {
            let head = RECV | u64::from(comm) << 3;
            ([head, time, pair(peer, tag), bytes, 0], 4)
        }
        EventKind::RequestPost { request } => ([POST, time, request, 0, 0], 3),
        EventKind::RequestComplete { request } => ([COMPLETE, time, request, 0, 0], 3),
        EventKind::CollectiveExit {
            comm,
            root,
            sent,
            received,
        } => {
            let head = COLLECTIVE | u64::from(root.is_some()) << 3 | u64::from(comm) << 4;
            let root = u64::from(root.unwrap_or(0));
            ([head, time, root, sent, received], MAX_WORDS)
        }
    };
    (words, n)
}

/// A rank and a tag in one word.
fn pair(a: u32, b: i32) -> u64 {
    u64::from(a) | (u64::from(b as u32) << 32)
}

fn unpair(w: u64) -> (u32, i32) {
    (w as u32, (w >> 32) as u32 as i32)
}

impl RawEvents {
    /// Room for `words` words, reserved (see `trace::event_buffer`).
    pub fn with_capacity(words: Vec<u64>) -> RawEvents {
        RawEvents { words, spilled: 0 }
    }

    /// Words in the chunk.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Words recorded, spilled or in the chunk.
    pub fn position(&self) -> usize {
        self.spilled + self.words.len()
    }

    /// Words the chunk holds without growing (it never shrinks).
    pub fn capacity(&self) -> usize {
        self.words.capacity()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// A copy of the first `len` words of an unspilled buffer (a length it had after some
    /// event).
    #[cfg(test)]
    pub fn first(&self, len: usize) -> RawEvents {
        RawEvents::with_capacity(self.words[..len].to_vec())
    }

    /// Keep the first `position` words (a [`RawEvents::position`] this buffer had after some
    /// event), spilled or not.
    pub fn truncate(&mut self, position: usize) {
        self.words.truncate(position.saturating_sub(self.spilled));
        self.spilled = self.spilled.min(position);
    }

    /// Mark the last record, a collective's exit that ended a superstep, as that superstep's
    /// end: the recorder's cut, found again by [`RawEvents::position_after_superstep`]. One
    /// bit in a word written already, where a list of cuts took a word a superstep and 8 KiB of
    /// every traced rank's memory. A collective's exit is the longest record ([`MAX_WORDS`]),
    /// so its header is that far from the chunk's end. False, and nothing marked, if the word
    /// there is no collective's header (nothing calls it so; a spill between the record and
    /// this call would have emptied the chunk).
    #[inline(always)]
    pub fn end_superstep(&mut self) -> bool {
        let at = self.words.len().wrapping_sub(MAX_WORDS);
        match self.words.get_mut(at) {
            Some(head) if *head & 7 == COLLECTIVE => {
                *head |= SUPERSTEP_END;
                true
            }
            _ => false,
        }
    }

    /// The position (as [`RawEvents::position`] was then) right after the `k`-th superstep
    /// [`RawEvents::end_superstep`] marked (from 1), reading the spilled words back from `file`;
    /// `None` if there are fewer or the file cannot be read. Only `MPI_Finalize` asks, and only
    /// when a rank stopped recording early (the trace is cut where every rank recorded).
    pub fn position_after_superstep(&self, k: usize, file: Option<&File>) -> Option<usize> {
        let (mut seen, mut before, mut found) = (0, 0, None);
        self.pieces(file, |words| {
            let used = walk_records(words, &|t| t, &mut |_| {}, &mut |end, head| {
                if head & 7 == COLLECTIVE && head & SUPERSTEP_END != 0 {
                    seen += 1;
                    if seen == k {
                        found = Some(before + end);
                    }
                }
            });
            before += used;
            used
        })
        .ok()?;
        found
    }

    /// Append the chunk's words to `file` (after the words spilled before, whatever a failed
    /// write left beyond them) and empty the chunk. On an error nothing changes: the chunk
    /// keeps its words. Never inlined: `trace.ld` places it by its name, with trace mode's
    /// steady path.
    #[inline(never)]
    pub fn spill(&mut self, file: &File) -> io::Result<()> {
        let at = (self.spilled * WORD) as u64;
        file.write_all_at(as_bytes(&self.words), at)?;
        self.spilled += self.words.len();
        self.words.clear();
        Ok(())
    }

    /// Move the chunk's words into `room`, which becomes the chunk (a larger one).
    pub fn move_into(&mut self, mut room: Vec<u64>) {
        room.extend_from_slice(&self.words);
        self.words = room;
    }

    /// Record `kind` at `time`.
    #[inline(always)]
    pub fn push(&mut self, time: u64, kind: EventKind) {
        let (words, n) = encode(time, kind);
        self.push_words(&words[..n]);
    }

    /// Record a call with no other events: its `Enter` of `region` at `start` and its `Exit`
    /// at `end`, written at once into room known to be there (trace mode's most common record,
    /// on its fast path: no growth, no check, nothing that can panic or call out). `header` is
    /// [`call_header`]`(region)`: one [`CALL`] record when it and the duration fit, else the
    /// two events.
    ///
    /// # Safety
    /// At least [`MAX_CALL_WORDS`] words of the buffer's capacity are unused.
    #[inline(always)]
    pub unsafe fn push_call(&mut self, header: u64, region: u32, start: u64, end: u64) {
        let duration = end.wrapping_sub(start);
        // SAFETY: (both) the caller leaves MAX_CALL_WORDS words of room, more than 4.
        if header != 0 && duration >> 32 == 0 {
            unsafe { self.write_within([header | duration << 32, start], 2) };
        } else {
            let enter = ENTER | u64::from(region) << 3;
            unsafe { self.write_within([enter, start, EXIT, end], 4) };
        }
    }

    /// Record a call with one other event, `event` at `at` (a message; or a collective's
    /// exit, which ends the call): its `Enter` of `region` at `start`, that event, and its `Exit`
    /// at `exit` if some, written at once into room known to be there (as
    /// [`RawEvents::push_call`]).
    ///
    /// # Safety
    /// At least [`MAX_CALL_WORDS`] words of the buffer's capacity are unused.
    #[inline(always)]
    pub unsafe fn push_call_with(
        &mut self,
        region: u32,
        start: u64,
        (at, event): (u64, EventKind),
        exit: Option<u64>,
    ) {
        let (words, n) = encode(at, event);
        // (It is: so the compiler sees the indices below in bounds, wherever this is inlined.)
        let n = n.min(MAX_WORDS);
        let mut all = [0; MAX_CALL_WORDS];
        all[0] = ENTER | u64::from(region) << 3;
        all[1] = start;
        all[2..2 + MAX_WORDS].copy_from_slice(&words);
        let len = match exit {
            Some(end) => {
                all[2 + n] = EXIT;
                all[3 + n] = end;
                n + 4
            }
            None => n + 2,
        };
        // SAFETY: the caller leaves MAX_CALL_WORDS words of room.
        unsafe { self.write_within(all, len) };
    }

    /// Append the first `n` of `words` (all `N` are written, into the buffer's unused room; the
    /// words past `n` are overwritten by the next record).
    ///
    /// # Safety
    /// At least `N` words of the buffer's capacity are unused, and `n <= N`.
    #[inline(always)]
    unsafe fn write_within<const N: usize>(&mut self, words: [u64; N], n: usize) {
        debug_assert!(n <= N && self.words.capacity() - self.words.len() >= N);
        let len = self.words.len();
        // SAFETY: the caller's room: N words after `len`, within the capacity (an array of u64
        // has u64's alignment); of them the first n <= N were written.
        unsafe {
            self.words
                .as_mut_ptr()
                .add(len)
                .cast::<[u64; N]>()
                .write(words);
            self.words.set_len(len + n);
        }
    }

    /// Append `words`, growing the buffer if it must (the slow path's [`RawEvents::push`]).
    #[inline(always)]
    fn push_words(&mut self, words: &[u64]) {
        let len = self.words.len();
        match self.words.spare_capacity_mut().get_mut(..words.len()) {
            Some(room) => {
                for (slot, word) in room.iter_mut().zip(words) {
                    slot.write(*word);
                }
                // SAFETY: the words after `len` were just written, within the capacity.
                unsafe { self.words.set_len(len + words.len()) };
            }
            None => self.words.extend_from_slice(words),
        }
    }

    /// Every event, oldest first, each time mapped by `time`, to `sink`: the spilled ones read
    /// back from `file` (the one [`RawEvents::spill`] wrote; none if nothing was spilled) in
    /// pieces of [`REPLAY_WORDS`], then the chunk's. An error reading the file is returned,
    /// with the events before it given.
    pub fn replay(
        &self,
        file: Option<&File>,
        time: impl Fn(u64) -> u64,
        mut sink: impl FnMut(Event),
    ) -> io::Result<()> {
        self.pieces(file, |words| {
            walk_records(words, &time, &mut sink, &mut |_, _| {})
        })
    }

    /// Every word, oldest first, to `each` in pieces of whole records: the spilled ones read
    /// back from `file` in pieces of [`REPLAY_WORDS`], then the chunk's. `each` returns how
    /// many words it used (those of a record a piece ended inside are not; they start the next
    /// piece).
    fn pieces(&self, file: Option<&File>, mut each: impl FnMut(&[u64]) -> usize) -> io::Result<()> {
        let mut piece = vec![0u64; REPLAY_WORDS];
        // Words of a record a piece ended inside, moved to the next piece's start.
        let mut carried = 0;
        let mut read = 0;
        if let Some(file) = file.filter(|_| self.spilled > 0) {
            while read < self.spilled {
                let n = (REPLAY_WORDS - carried).min(self.spilled - read);
                let at = (read * WORD) as u64;
                file.read_exact_at(as_bytes_mut(&mut piece[carried..carried + n]), at)?;
                read += n;
                let words = &piece[..carried + n];
                let used = each(words);
                carried = words.len() - used;
                piece.copy_within(used..used + carried, 0);
            }
        }
        if carried == 0 {
            each(&self.words);
        } else {
            // A record is never split by a spill, so this does not happen but for a file
            // changed under the rank: its words end the trace.
            piece.truncate(carried);
            piece.extend_from_slice(&self.words);
            each(&piece);
        }
        Ok(())
    }

    /// The chunk's events (of an unspilled buffer: all of them), each time mapped by `time`.
    #[cfg(test)]
    pub fn decode(&self, time: impl Fn(u64) -> u64) -> Vec<Event> {
        let mut out = Vec::new();
        walk_records(&self.words, &time, &mut |e| out.push(e), &mut |_, _| {});
        out
    }
}

/// Bytes of a word.
const WORD: usize = std::mem::size_of::<u64>();

/// The bytes of `words` (in this machine's order: the spill file is read back by the process
/// that wrote it).
pub(crate) fn as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and every byte of it is initialised; u8 has no alignment.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), std::mem::size_of_val(words)) }
}

fn as_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as `as_bytes`, and any bytes make a valid u64.
    unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), std::mem::size_of_val(words))
    }
}

/// The events of `words`' whole records to `sink`, each time mapped by `time`; the words used
/// (those of a record cut short at the end are not).
/// After each record, `ended` is given where it ends in `words` and its header.
fn walk_records(
    words: &[u64],
    time: &impl Fn(u64) -> u64,
    sink: &mut impl FnMut(Event),
    ended: &mut impl FnMut(usize, u64),
) -> usize {
    let mut w = words;
    while let [head, t, rest @ ..] = w {
        let payload = head >> 3;
        let (kind, used) = match head & 7 {
            CALL => {
                sink(Event {
                    time: time(*t),
                    kind: EventKind::Enter {
                        region: (payload & 0x1FFF_FFFF) as u32,
                    },
                });
                sink(Event {
                    time: time(t.wrapping_add(head >> 32)),
                    kind: EventKind::Exit,
                });
                w = rest;
                ended(words.len() - w.len(), *head);
                continue;
            }
            ENTER => (
                EventKind::Enter {
                    region: payload as u32,
                },
                0,
            ),
            EXIT => (EventKind::Exit, 0),
            SEND => {
                let [peer_tag, bytes, ..] = rest else { break };
                let (peer, tag) = unpair(*peer_tag);
                (
                    EventKind::Send {
                        peer,
                        tag,
                        comm: (payload >> 1) as u32,
                        bytes: *bytes,
                        synchronous: payload & 1 == 1,
                    },
                    2,
                )
            }
            RECV => {
                let [peer_tag, bytes, ..] = rest else { break };
                let (peer, tag) = unpair(*peer_tag);
                (
                    EventKind::Recv {
                        peer,
                        tag,
                        comm: payload as u32,
                        bytes: *bytes,
                    },
                    2,
                )
            }
            POST | COMPLETE => {
                let [request, ..] = rest else { break };
                let request = *request;
                let kind = if head & 7 == POST {
                    EventKind::RequestPost { request }
                } else {
                    EventKind::RequestComplete { request }
                };
                (kind, 1)
            }
            _ => {
                let [root, sent, received, ..] = rest else {
                    break;
                };
                (
                    EventKind::CollectiveExit {
                        comm: (payload >> 1) as u32,
                        root: (payload & 1 == 1).then_some(*root as u32),
                        sent: *sent,
                        received: *received,
                    },
                    3,
                )
            }
        };
        sink(Event {
            time: time(*t),
            kind,
        });
        w = &rest[used..];
        ended(words.len() - w.len(), *head);
    }
    words.len() - w.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = EventKind> {
        prop_oneof![
            any::<u32>().prop_map(|region| EventKind::Enter { region }),
            Just(EventKind::Exit),
            (
                any::<u32>(),
                any::<i32>(),
                any::<u32>(),
                any::<u64>(),
                any::<bool>()
            )
                .prop_map(|(peer, tag, comm, bytes, synchronous)| EventKind::Send {
                    peer,
                    tag,
                    comm,
                    bytes,
                    synchronous
                }),
            (any::<u32>(), any::<i32>(), any::<u32>(), any::<u64>()).prop_map(
                |(peer, tag, comm, bytes)| EventKind::Recv {
                    peer,
                    tag,
                    comm,
                    bytes
                }
            ),
            any::<u64>().prop_map(|request| EventKind::RequestPost { request }),
            any::<u64>().prop_map(|request| EventKind::RequestComplete { request }),
            (
                any::<u32>(),
                any::<Option<u32>>(),
                any::<u64>(),
                any::<u64>()
            )
                .prop_map(|(comm, root, sent, received)| EventKind::CollectiveExit {
                    comm,
                    root,
                    sent,
                    received
                }),
        ]
    }

    /// What the recorder writes: one event, a call with no other events, or a call with one.
    #[derive(Clone, Debug)]
    enum Record {
        Event(u64, EventKind),
        Call {
            region: u32,
            start: u64,
            duration: u64,
        },
        CallWith {
            region: u32,
            start: u64,
            event: (u64, EventKind),
            exit: Option<u64>,
        },
    }

    fn record() -> impl Strategy<Value = Record> {
        let region = prop_oneof![0..1000u32, any::<u32>()];
        prop_oneof![
            (any::<u64>(), kind()).prop_map(|(t, k)| Record::Event(t, k)),
            (
                region.clone(),
                any::<u64>(),
                prop_oneof![0..1u64 << 33, any::<u64>()]
            )
                .prop_map(|(region, start, duration)| Record::Call {
                    region,
                    start,
                    duration
                }),
            (
                region,
                any::<u64>(),
                any::<u64>(),
                kind(),
                any::<Option<u64>>()
            )
                .prop_map(|(region, start, at, event, exit)| Record::CallWith {
                    region,
                    start,
                    event: (at, event),
                    exit
                }),
        ]
    }

    impl Record {
        /// Whether its last event is a collective's exit (a superstep may end there).
        fn ends_with_a_collective(&self) -> bool {
            matches!(
                self,
                Record::Event(_, EventKind::CollectiveExit { .. })
                    | Record::CallWith {
                        event: (_, EventKind::CollectiveExit { .. }),
                        exit: None,
                        ..
                    }
            )
        }

        /// Write it into `raw` (which has room for it); the events it stands for.
        fn write(&self, raw: &mut RawEvents) -> Vec<Event> {
            let event = |time, kind| Event { time, kind };
            match *self {
                Record::Event(t, k) => {
                    raw.push(t, k);
                    vec![event(t, k)]
                }
                Record::Call {
                    region,
                    start,
                    duration,
                } => {
                    let end = start.wrapping_add(duration);
                    // SAFETY: the caller's room.
                    unsafe { raw.push_call(call_header(region), region, start, end) };
                    vec![
                        event(start, EventKind::Enter { region }),
                        event(end, EventKind::Exit),
                    ]
                }
                Record::CallWith {
                    region,
                    start,
                    event: (at, kind),
                    exit,
                } => {
                    // SAFETY: the caller's room.
                    unsafe { raw.push_call_with(region, start, (at, kind), exit) };
                    let mut events =
                        vec![event(start, EventKind::Enter { region }), event(at, kind)];
                    events.extend(exit.map(|end| event(end, EventKind::Exit)));
                    events
                }
            }
        }
    }

    /// A new file of no name in the temporary directory, for a spill.
    fn spill_file() -> File {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("mpistat-rawevents-{}-{n}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }

    /// The events `raw` replays (from `file`), and the rank file they make (the writer wants
    /// times in order, which the generated records' are not: each event's time is its index).
    fn replayed(raw: &RawEvents, file: Option<&File>) -> (Vec<Event>, Vec<u8>) {
        let mut events = Vec::new();
        raw.replay(file, |t| t / 2, |e| events.push(e)).unwrap();
        let mut writer = mpistat_trace::tracefile::RankWriter::new(Vec::new(), 3);
        for (i, event) in events.iter().enumerate() {
            let time = i as u64;
            writer.event(&Event { time, ..*event }).unwrap();
        }
        (events, writer.finish().unwrap())
    }

    proptest! {
        /// A trace recorded through a small chunk, spilled whenever a call might not fit it
        /// (as the recorder does) and read back in pieces that end inside records, gives the
        /// same events and the same rank file as one recorded at once; and so when it is cut
        /// after any record (a superstep every rank recorded), in the file or in the chunk.
        ///
        /// Supersteps marked at collectives' records ([`RawEvents::end_superstep`]) are found
        /// again where they ended, in both, and the marks change no event.
        #[test]
        fn a_spilled_trace_is_the_trace_recorded_at_once(
            records in prop::collection::vec((record(), any::<bool>()), 1..600),
            chunk in MAX_CALL_WORDS..200,
            at in any::<prop::sample::Index>(),
        ) {
            let room = records.len() * MAX_CALL_WORDS;
            let mut at_once = RawEvents::with_capacity(Vec::with_capacity(room));
            let mut chunked = RawEvents::with_capacity(Vec::with_capacity(chunk));
            let mut unmarked = RawEvents::with_capacity(Vec::with_capacity(room));
            let file = spill_file();
            let (mut ends, mut cuts) = (Vec::new(), Vec::new());
            for (record, ends_superstep) in &records {
                if chunked.len() + MAX_CALL_WORDS > chunked.capacity() {
                    chunked.spill(&file).unwrap();
                }
                prop_assert_eq!(chunked.capacity(), chunk);
                record.write(&mut at_once);
                record.write(&mut chunked);
                record.write(&mut unmarked);
                prop_assert_eq!(at_once.position(), chunked.position());
                ends.push(at_once.position());
                if *ends_superstep && record.ends_with_a_collective() {
                    prop_assert!(at_once.end_superstep() && chunked.end_superstep());
                    cuts.push(at_once.position());
                }
            }
            prop_assert!(chunked.spilled > 0 || at_once.position() <= chunk);
            prop_assert_eq!(replayed(&at_once, None), replayed(&chunked, Some(&file)));
            prop_assert_eq!(replayed(&at_once, None), replayed(&unmarked, None));
            for (k, &cut) in cuts.iter().enumerate() {
                prop_assert_eq!(at_once.position_after_superstep(k + 1, None), Some(cut));
                prop_assert_eq!(chunked.position_after_superstep(k + 1, Some(&file)), Some(cut));
            }
            prop_assert_eq!(chunked.position_after_superstep(cuts.len() + 1, Some(&file)), None);
            let cut = ends[at.index(ends.len())];
            at_once.truncate(cut);
            chunked.truncate(cut);
            prop_assert_eq!(replayed(&at_once, None), replayed(&chunked, Some(&file)));
        }
    }

    /// A spill that fails changes nothing: the chunk keeps its words, and the trace replays
    /// whole.
    #[test]
    fn a_failed_spill_keeps_the_chunk() {
        let mut raw = RawEvents::with_capacity(Vec::with_capacity(64));
        let file = spill_file();
        let mut want = Vec::new();
        for t in 0..8 {
            raw.push(t, EventKind::Enter { region: t as u32 });
            want.push(Event {
                time: t / 2,
                kind: EventKind::Enter { region: t as u32 },
            });
        }
        raw.spill(&file).unwrap();
        raw.push(9, EventKind::Exit);
        want.push(Event {
            time: 4,
            kind: EventKind::Exit,
        });
        let read_only = File::open("/proc/self/exe").unwrap();
        assert!(raw.spill(&read_only).is_err());
        assert_eq!((raw.len(), raw.position()), (2, 18));
        assert_eq!(replayed(&raw, Some(&file)).0, want);
    }

    proptest! {
        /// Every event comes back as it was recorded, in order, with its time mapped, and takes
        /// at most `MAX_WORDS` words.
        #[test]
        fn events_round_trip(events in prop::collection::vec((any::<u32>(), kind()), 0..50)) {
            let mut raw = RawEvents::with_capacity(Vec::new());
            let mut lens = Vec::new();
            for (t, k) in &events {
                let before = raw.len();
                raw.push(u64::from(*t), *k);
                prop_assert!(raw.len() - before <= MAX_WORDS);
                lens.push(raw.len());
            }
            let want: Vec<Event> = events
                .iter()
                .map(|(t, k)| Event { time: u64::from(*t) + 1, kind: *k })
                .collect();
            prop_assert_eq!(raw.decode(|t| t + 1), want.clone());
            // Cut after any event: the events before it.
            if let Some(&cut) = lens.get(events.len() / 2) {
                raw.truncate(cut);
                prop_assert_eq!(raw.decode(|t| t + 1), want[..=events.len() / 2].to_vec());
            }
        }

        /// A call written at once reads back as its enter and exit pushed one by one, after
        /// any events, whether the buffer has much room or just the room it needs; it takes two
        /// words when its region and duration fit a `CALL` record, else four. A call with one
        /// other event reads back as its events.
        #[test]
        fn a_call_is_its_enter_and_exit(
            events in prop::collection::vec((any::<u32>(), kind()), 0..20),
            region in prop_oneof![0..1000u32, any::<u32>()],
            start in any::<u64>(),
            duration in prop_oneof![0..1u64 << 33, any::<u64>()],
            reserved in any::<bool>(),
            message in kind(),
        ) {
            let end = start.wrapping_add(duration);
            let room = if reserved { 1000 } else { events.len() * MAX_WORDS + MAX_CALL_WORDS };
            let (mut at_once, mut one_by_one) = (
                RawEvents::with_capacity(Vec::with_capacity(room)),
                RawEvents::with_capacity(Vec::new()),
            );
            for (t, k) in &events {
                at_once.push(u64::from(*t), *k);
                one_by_one.push(u64::from(*t), *k);
            }
            let before = at_once.len();
            // SAFETY: the events took at most MAX_WORDS words each.
            unsafe { at_once.push_call(call_header(region), region, start, end) };
            one_by_one.push(start, EventKind::Enter { region });
            one_by_one.push(end, EventKind::Exit);
            prop_assert_eq!(at_once.decode(|t| t), one_by_one.decode(|t| t));
            let compact = region < 1 << 29 && duration < 1 << 32;
            // With one other event, and an exit or none.
            let (mut with_event, mut its_events) = (
                RawEvents::with_capacity(Vec::with_capacity(MAX_CALL_WORDS)),
                RawEvents::with_capacity(Vec::new()),
            );
            let exit = (duration % 2 == 0).then_some(end);
            // SAFETY: room for MAX_CALL_WORDS words reserved.
            unsafe { with_event.push_call_with(region, start, (start ^ end, message), exit) };
            its_events.push(start, EventKind::Enter { region });
            its_events.push(start ^ end, message);
            if let Some(end) = exit {
                its_events.push(end, EventKind::Exit);
            }
            prop_assert_eq!(with_event.decode(|t| t), its_events.decode(|t| t));
            prop_assert_eq!(with_event.len(), its_events.len());
            prop_assert_eq!(at_once.len() - before, if compact { 2 } else { 4 });
        }

        /// A cut where the buffer ended after any record (as the recorder's cuts at supersteps)
        /// keeps exactly the events of the records before it, whatever records follow: events,
        /// calls written at once (compact or not) and calls with one other event.
        #[test]
        fn a_cut_keeps_the_records_before_it(
            records in prop::collection::vec(record(), 1..40),
            at in any::<prop::sample::Index>(),
        ) {
            let room = records.len() * MAX_CALL_WORDS;
            let mut raw = RawEvents::with_capacity(Vec::with_capacity(room));
            let mut ends = Vec::new();
            let mut want = Vec::new();
            for record in &records {
                want.push(record.write(&mut raw));
                ends.push(raw.len());
            }
            let i = at.index(records.len());
            raw.truncate(ends[i]);
            prop_assert_eq!(raw.decode(|t| t), want[..=i].concat());
        }
    }
}
