//! Call sites as source lines: the profiler records a call site as `object+0xOFFSET`; where the
//! object is still there, the same build and readable for the trace's owner, binutils'
//! `addr2line` names its `file.c:LINE`.

use mpistat_site::files;
use mpistat_trace::model::Definitions;
use mpistat_trace::tracefile::{modules_of_dir, TraceDir};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Whether the object (read through `path`) is the build the trace ran (GNU build-id, by
/// binutils' `readelf`); an object without a recorded build-id is taken as it is.
fn same_build(path: &Path, build_id: &str) -> bool {
    if build_id.is_empty() {
        return true;
    }
    let Ok(output) = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .stderr(Stdio::null())
        .output()
    else {
        return false;
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Build ID:"))
        .any(|id| id.trim() == build_id)
}

/// The object at `path` (a trace names it), opened for binutils if it may be read for a trace
/// of uid `owner`: a regular file reached through no other user's symlink
/// ([`mpistat_site::files`]), and, unless the caller is the trace's owner (root looking into a
/// user's trace), one the owner could read too (theirs, or readable by all), so that a trace
/// cannot make root read out another user's or root's own files. binutils read it through the
/// descriptor (`/proc/self/fd/N`, inherited): what was checked is what they read.
fn object_for(path: &Path, owner: u32) -> Option<File> {
    let file = files::open(path, libc::O_RDONLY, 0).ok()?;
    let st = files::stat_fd(file.as_raw_fd()).ok()?;
    // SAFETY: geteuid cannot fail.
    let caller = unsafe { libc::geteuid() };
    let for_owner = caller == owner || st.st_uid == owner || st.st_mode & 0o004 != 0;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || !for_owner {
        return None;
    }
    // SAFETY: clears close-on-exec of our own descriptor, for the children to come.
    (unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFD, 0) } == 0).then_some(file)
}

/// Turns call sites `object+0xOFFSET` (as the profiler writes them) into `file.c:LINE` with
/// binutils' `addr2line`, for the objects the trace in `trace_dir` recorded that are still where
/// it says, still the same build, and readable for its owner ([`object_for`]). Sites it cannot
/// resolve (no debug information, object gone or rebuilt, no binutils) stay as they are.
pub fn symbolize(definitions: &mut Definitions, trace_dir: &Path) {
    let Ok(trace) = TraceDir::open(trace_dir) else {
        return;
    };
    for module in modules_of_dir(&trace) {
        let path = Path::new(&module.path);
        let Some(file) = path.file_name().map(|f| f.to_string_lossy().into_owned()) else {
            continue;
        };
        let prefix = format!("{file}+0x");
        let offsets: Vec<(usize, u64)> = definitions
            .regions
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let hex = r.site.strip_prefix(&prefix)?;
                Some((i, u64::from_str_radix(hex, 16).ok()?))
            })
            .collect();
        if offsets.is_empty() {
            continue;
        }
        let Some(object) = object_for(path, trace.owner()) else {
            continue;
        };
        let through = PathBuf::from(format!("/proc/self/fd/{}", object.as_raw_fd()));
        if !same_build(&through, &module.build_id) {
            continue;
        }
        // A return address: the call instruction ends there, so look up the byte before.
        let output = Command::new("addr2line")
            .arg("-s")
            .arg("-e")
            .arg(&through)
            .args(
                offsets
                    .iter()
                    .map(|(_, o)| format!("{:#x}", o.saturating_sub(1))),
            )
            .stderr(Stdio::null())
            .output();
        let Ok(output) = output else { return };
        let text = String::from_utf8_lossy(&output.stdout);
        for ((i, _), line) in offsets.iter().zip(text.lines()) {
            // `file.c:52 (discriminator 1)` or `??:0` / `??:?` when unknown.
            let location = line.split(" (").next().unwrap_or("").trim();
            if !location.starts_with("??") && !location.ends_with(":0") && !location.is_empty() {
                definitions.regions[*i].site = location.to_string();
            }
        }
    }
}
