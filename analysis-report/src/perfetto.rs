//! The timeline as Chrome/Perfetto trace JSON (`--perfetto FILE`): one track per rank with its
//! call paths and wait states, and a "critical path" track (with `critical` flags) marking the
//! path. Written as a stream, event by event, never built whole in memory: by `mpistat
//! analyze` in one go ([`write_file`]), and by the processes of `mpistat-analyze` together
//! ([`write_file_distributed`]), each writing its ranks' tracks at their place in the same file,
//! which comes out the same to the byte.
//!
//! The file is `{"displayTimeUnit":"ms","otherData":{"ranks":N},"traceEvents":[...]}`, keys in
//! the order serde_json writes an object's (sorted), so that it is what serializing the whole
//! document at once would give.

use crate::error::PerfettoError;
use mpistat_analysis::critical::Segment;
use mpistat_analysis::distributed::{Exchange, LocalForward};
use mpistat_analysis::forward::WaitState;
use mpistat_analysis::timeline::RankTimeline;
use mpistat_analysis::Analysis;
use serde_json::json;
use std::io::{self, Write};
use std::path::Path;

/// What every part of the file needs: the clock, the number of ranks and the call paths' labels.
struct Timeline<'a> {
    ticks_per_second: u64,
    ranks: u32,
    labels: &'a [String],
}

impl Timeline<'_> {
    fn micros(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e6 / self.ticks_per_second as f64
    }

    /// The document's opening and its first two events (the job's and the critical path's
    /// track names); every event after them starts with a comma.
    fn head(&self, out: &mut impl Write) -> io::Result<()> {
        write!(
            out,
            "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"ranks\":{}}},\"traceEvents\":[",
            self.ranks
        )?;
        let job = json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "MPI job"}});
        let path = json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": self.ranks, "args": {"name": "critical path"}});
        serde_json::to_writer(&mut *out, &job)?;
        out.write_all(b",")?;
        serde_json::to_writer(&mut *out, &path)?;
        Ok(())
    }

    /// One rank's track: its name, its call paths' pieces, its wait states.
    fn rank(
        &self,
        out: &mut impl Write,
        rank: u32,
        timeline: &RankTimeline,
        waits: &[WaitState],
    ) -> io::Result<()> {
        let mut event = |value: serde_json::Value| -> io::Result<()> {
            out.write_all(b",")?;
            serde_json::to_writer(&mut *out, &value).map_err(io::Error::from)
        };
        event(
            json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": rank, "args": {"name": format!("rank {rank}")}}),
        )?;
        let mut start = timeline.start;
        for piece in &timeline.pieces {
            let label = self
                .labels
                .get(piece.callpath as usize)
                .map_or("", String::as_str);
            event(json!({"ph": "X", "pid": 0, "tid": rank, "name": label,
                "ts": self.micros(start), "dur": self.micros(piece.end) - self.micros(start)}))?;
            start = piece.end;
        }
        for wait in waits {
            let enter = timeline.ops[wait.op as usize].enter;
            event(
                json!({"ph": "X", "pid": 0, "tid": rank, "cat": "wait", "name": wait.pattern.name(),
                "ts": self.micros(enter), "dur": self.micros(enter + wait.wait) - self.micros(enter),
                "args": {"caused by rank": wait.cause.rank}}),
            )?;
        }
        Ok(())
    }

    /// The critical path's segments and the document's end.
    fn tail(&self, out: &mut impl Write, critical: &[Segment]) -> io::Result<()> {
        for segment in critical {
            out.write_all(b",")?;
            let value = json!({"ph": "X", "pid": 0, "tid": self.ranks, "cat": "critical", "name": format!("rank {}", segment.rank),
                "ts": self.micros(segment.start), "dur": self.micros(segment.end) - self.micros(segment.start), "args": {"critical": true}});
            serde_json::to_writer(&mut *out, &value)?;
        }
        out.write_all(b"]}")
    }
}

fn labels(analysis: &Analysis) -> Vec<String> {
    analysis.callpaths.iter().map(|c| c.label.clone()).collect()
}

fn io_error(path: &Path) -> impl Fn(io::Error) -> PerfettoError + '_ {
    move |error| PerfettoError::File {
        path: path.to_path_buf(),
        error,
    }
}

/// Writes the timeline of a one-process analysis to `path`.
pub fn write_file(
    path: &Path,
    passes: &mpistat_analysis::analysis::Passes,
    analysis: &Analysis,
) -> Result<(), PerfettoError> {
    let labels = labels(analysis);
    let timeline = Timeline {
        ticks_per_second: analysis.ticks_per_second,
        ranks: analysis.ranks,
        labels: &labels,
    };
    let file = std::fs::File::create(path).map_err(io_error(path))?;
    let mut out = io::BufWriter::new(file);
    let written = (|| {
        timeline.head(&mut out)?;
        for (rank, ranks_timeline) in passes.timelines.iter().enumerate() {
            timeline.rank(
                &mut out,
                rank as u32,
                ranks_timeline,
                &passes.forward.waits[rank],
            )?;
        }
        timeline.tail(&mut out, &analysis.critical_path)?;
        out.flush()
    })();
    written.map_err(io_error(path))
}

/// Counts the bytes written to it (a section's length before it is written at its place).
#[derive(Default)]
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes into a file from an offset on, through a buffer.
struct WriterAt<'f> {
    file: &'f std::fs::File,
    offset: u64,
    buffer: Vec<u8>,
}

impl Write for WriterAt<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(&self.buffer, self.offset)?;
        self.offset += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

/// The same bytes from process 0 to every process.
fn from_zero(exchange: &dyn Exchange, mine: Vec<u8>) -> Vec<u8> {
    let outgoing = vec![mine; exchange.processes()];
    exchange.all_to_all(outgoing).swap_remove(0)
}

/// Every process's flag (an error or not); the first process whose flag is set, if any.
fn failed_somewhere(exchange: &dyn Exchange, failed: bool) -> Option<usize> {
    let flags = exchange.all_to_all(vec![vec![u8::from(failed)]; exchange.processes()]);
    flags.iter().position(|f| f.first() == Some(&1))
}

/// [`write_file`] by the processes of a distributed analysis, all calling it together with
/// their part of the forward replay; process 0 with the analysis (its labels and critical path)
/// and the others with `None`. Each process writes its ranks' tracks at their place in the
/// file (a shared file system's, as the trace's), which comes out as one process writes it.
pub fn write_file_distributed(
    path: &Path,
    local: &LocalForward,
    analysis: Option<&Analysis>,
    exchange: &dyn Exchange,
) -> Result<(), PerfettoError> {
    let encoded = analysis.map_or_else(Vec::new, |a| {
        serde_json::to_vec(&labels(a)).expect("plain strings")
    });
    let labels: Vec<String> = serde_json::from_slice(&from_zero(exchange, encoded))?;
    let timeline = Timeline {
        ticks_per_second: local.definitions.ticks_per_second,
        ranks: local.blocks.ranks,
        labels: &labels,
    };
    let first = local.blocks.first(local.process);
    let ranks = |out: &mut dyn Write| -> io::Result<()> {
        let mut out = out;
        for (index, ranks_timeline) in local.timelines.iter().enumerate() {
            let waits = &local.waits[index];
            timeline.rank(&mut out, first + index as u32, ranks_timeline, waits)?;
        }
        Ok(())
    };
    let mut length = Counter::default();
    ranks(&mut length)?;
    let mut head = Vec::new();
    timeline.head(&mut head)?;
    // Process 0 makes the file; the lengths' exchange is also the barrier after it.
    let created = match local.process {
        0 => std::fs::File::create(path)
            .map(drop)
            .map_err(io_error(path)),
        _ => Ok(()),
    };
    let lengths = exchange.all_to_all(vec![length.0.to_le_bytes().to_vec(); exchange.processes()]);
    if let Some(process) = failed_somewhere(exchange, created.is_err()) {
        created?;
        return Err(PerfettoError::Elsewhere {
            path: path.to_path_buf(),
            process,
            what: "create it",
        });
    }
    let length_of = |bytes: &Vec<u8>| u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let before: u64 = lengths[..local.process].iter().map(length_of).sum();
    let all: u64 = lengths.iter().map(length_of).sum();
    let written = (|| -> io::Result<()> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        let mut out = WriterAt {
            file: &file,
            offset: head.len() as u64 + before,
            buffer: Vec::new(),
        };
        ranks(&mut out)?;
        out.flush()?;
        if let Some(analysis) = analysis {
            let mut out = WriterAt {
                file: &file,
                offset: 0,
                buffer: head,
            };
            out.flush()?;
            out.offset += all;
            timeline.tail(&mut out, &analysis.critical_path)?;
            out.flush()?;
        }
        Ok(())
    })();
    if let Some(process) = failed_somewhere(exchange, written.is_err()) {
        written.map_err(io_error(path))?;
        return Err(PerfettoError::Elsewhere {
            path: path.to_path_buf(),
            process,
            what: "write its part",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpistat_analysis::analysis::{run_passes, summarise};
    use mpistat_analysis::examples::topc_figure_3;

    /// The stream is what serializing the whole document at once gives (the form this file
    /// had before it was streamed), to the byte.
    #[test]
    fn the_stream_is_the_whole_document() {
        let passes = run_passes(&topc_figure_3().finish()).unwrap();
        let analysis = summarise(&passes);
        let path = std::env::temp_dir().join(format!("mpistat-perfetto-{}", std::process::id()));
        write_file(&path, &passes, &analysis).unwrap();
        let streamed = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let micros = |ticks: u64| ticks as f64 * 1e6 / analysis.ticks_per_second as f64;
        let label = |id: u32| analysis.callpaths[id as usize].label.clone();
        let mut events = vec![
            json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "MPI job"}}),
            json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": 3, "args": {"name": "critical path"}}),
        ];
        for (rank, timeline) in passes.timelines.iter().enumerate() {
            events.push(json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": rank, "args": {"name": format!("rank {rank}")}}));
            let mut start = timeline.start;
            for piece in &timeline.pieces {
                events.push(
                    json!({"ph": "X", "pid": 0, "tid": rank, "name": label(piece.callpath),
                    "ts": micros(start), "dur": micros(piece.end) - micros(start)}),
                );
                start = piece.end;
            }
            for wait in &passes.forward.waits[rank] {
                let enter = timeline.ops[wait.op as usize].enter;
                events.push(json!({"ph": "X", "pid": 0, "tid": rank, "cat": "wait", "name": wait.pattern.name(),
                    "ts": micros(enter), "dur": micros(enter + wait.wait) - micros(enter),
                    "args": {"caused by rank": wait.cause.rank}}));
            }
        }
        for segment in &analysis.critical_path {
            events.push(json!({"ph": "X", "pid": 0, "tid": 3, "cat": "critical", "name": format!("rank {}", segment.rank),
                "ts": micros(segment.start), "dur": micros(segment.end) - micros(segment.start), "args": {"critical": true}}));
        }
        let whole =
            json!({"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"ranks": 3}});
        assert_eq!(
            String::from_utf8(streamed).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
    }
}
