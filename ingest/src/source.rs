//! The files one `FILE` argument stands for, and reading their lines from a byte offset.
//!
//! `FILE` is the log rsyslog writes to; logrotate renames it (`FILE.1`, `FILE-20261122`) and
//! may compress it (`.gz`). So each argument means its rotated siblings, oldest first, then the
//! file itself. A file is identified by its first line (see [`Head`]), which renaming and
//! compression keep, so a resumed read continues where it stopped whatever the file is called now.

use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Longest first line used to identify a file.
const HEAD_MAX: usize = 1024;

/// One file to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    /// The file rsyslog is still writing: a last line without its newline is not read yet.
    pub live: bool,
}

/// `file`'s rotated siblings (`file.*`, `file-*`, compressed or not), oldest first, then `file`.
pub fn inputs_for(file: &Path) -> Vec<Input> {
    let mut rotated = Vec::new();
    if let (Some(dir), Some(name)) = (file.parent(), file.file_name()) {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let name = name.to_string_lossy();
        let (dotted, dashed) = (format!("{name}."), format!("{name}-"));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let sibling = entry.file_name().to_string_lossy().into_owned();
                let is_rotated = sibling.starts_with(&dotted) || sibling.starts_with(&dashed);
                let Ok(meta) = entry.metadata() else { continue };
                if is_rotated && meta.is_file() {
                    rotated.push((meta.mtime(), meta.mtime_nsec(), sibling, entry.path()));
                }
            }
        }
    }
    // Oldest first; at equal times `x.2` before `x.1` (logrotate's higher numbers are older).
    rotated.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)).then_with(|| b.2.cmp(&a.2)));
    rotated
        .into_iter()
        .map(|(_, _, _, path)| Input { path, live: false })
        .chain(std::iter::once(Input {
            path: file.to_path_buf(),
            live: true,
        }))
        .collect()
}

/// A file's identity: its first line (at most [`HEAD_MAX`] bytes), as length and CRC-32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    pub len: u64,
    pub crc: u32,
}

/// `dev:ino:size:mtime` of a file: unchanged means nothing new to read.
pub fn stat_of(path: &Path) -> std::io::Result<String> {
    let m = std::fs::metadata(path)?;
    Ok(format!(
        "{}:{}:{}:{}.{:09}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    ))
}

/// The text of an open file (inflated if it is `.gz`).
pub struct Opened {
    pub head: Head,
    reader: Box<dyn BufRead>,
    /// Offset in the text of the next line.
    offset: u64,
    /// Bytes of `reader`'s buffer given out as the last line, consumed at the next read.
    unconsumed: usize,
    /// A line that did not lie whole in `reader`'s buffer.
    spill: Vec<u8>,
}

/// Bytes the reader reads at a time; also the longest line read whole: a longer one (never
/// ours: a record's messages are at most 7,680 bytes) is cut to this, the rest skipped.
const READ_BUFFER: usize = 1 << 18;

/// Open `path` and identify it. `None` when it has no complete first line yet (nothing to read).
pub fn open(input: &Input) -> std::io::Result<Option<Opened>> {
    let file = File::open(&input.path)?;
    let compressed = input.path.extension().is_some_and(|e| e == "gz");
    let mut reader: Box<dyn BufRead> = if compressed {
        Box::new(BufReader::with_capacity(
            READ_BUFFER,
            MultiGzDecoder::new(file),
        ))
    } else {
        Box::new(BufReader::with_capacity(READ_BUFFER, file))
    };
    let mut head = Vec::new();
    (&mut reader)
        .take(HEAD_MAX as u64)
        .read_until(b'\n', &mut head)?;
    let complete = head.ends_with(b"\n") || head.len() == HEAD_MAX || !input.live;
    if head.is_empty() || !complete {
        return Ok(None);
    }
    let id = Head {
        len: head.len() as u64,
        crc: crc32fast::hash(&head),
    };
    // Give the head back to the line reader, so that reading starts at offset 0.
    let reader = Box::new(BufReader::with_capacity(
        READ_BUFFER,
        std::io::Cursor::new(head).chain(reader),
    ));
    Ok(Some(Opened {
        head: id,
        reader,
        offset: 0,
        unconsumed: 0,
        spill: Vec::new(),
    }))
}

/// Like [`open`] but positioned at `offset` (seeking when the file is not compressed).
pub fn open_at(input: &Input, offset: u64) -> std::io::Result<Option<Opened>> {
    let Some(mut opened) = open(input)? else {
        return Ok(None);
    };
    let compressed = input.path.extension().is_some_and(|e| e == "gz");
    if offset > 0 && !compressed {
        let mut file = File::open(&input.path)?;
        file.seek(SeekFrom::Start(offset))?;
        opened.reader = Box::new(BufReader::with_capacity(READ_BUFFER, file));
        opened.offset = offset;
    } else {
        let skipped = std::io::copy(&mut (&mut opened.reader).take(offset), &mut std::io::sink())?;
        opened.offset = skipped;
    }
    Ok(Some(opened))
}

impl Opened {
    /// Offset of the next line in the file's text.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next line (with its newline, unless it was cut) and its offset; `None` at the end.
    /// A last line without newline is returned only when `take_unfinished` (a live file's last
    /// line may still be being written). The line is read in place when it lies whole in the
    /// buffer; a line longer than [`READ_BUFFER`] is cut to that (the rest skipped).
    pub fn next_line(&mut self, take_unfinished: bool) -> std::io::Result<Option<(u64, &[u8])>> {
        self.reader.consume(std::mem::take(&mut self.unconsumed));
        let at = self.offset;
        if let Some(end) = memchr::memchr(b'\n', self.reader.fill_buf()?) {
            self.unconsumed = end + 1;
            self.offset += end as u64 + 1;
            // The same buffer again (it is not empty, so nothing is read).
            let buffer = self.reader.fill_buf()?;
            return Ok(Some((at, &buffer[..=end])));
        }
        self.spill.clear();
        let (mut read, mut ended) = (0, false);
        while !ended {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                break;
            }
            let line_end = memchr::memchr(b'\n', buffer);
            ended = line_end.is_some();
            let taken = line_end.map_or(buffer.len(), |end| end + 1);
            let room = READ_BUFFER.saturating_sub(self.spill.len());
            self.spill.extend_from_slice(&buffer[..taken.min(room)]);
            self.reader.consume(taken);
            read += taken as u64;
        }
        if read == 0 || (!ended && !take_unfinished) {
            return Ok(None);
        }
        self.offset += read;
        Ok(Some((at, &self.spill)))
    }
}
