//! Facts about the job (who, what, where, when), found without MPI: what the record names, and
//! what trace mode's decision and directory need too.

use mpistat_record::app::{classify, Application};
use mpistat_record::model::Binding;
use std::ffi::c_int;
use std::sync::OnceLock;

/// What `MPI_Init` established.
#[derive(Clone, Debug)]
pub struct InitFacts {
    pub rank: u32,
    pub ranks: u32,
    pub binding: Binding,
    /// `MPI_THREAD_*` provided.
    pub thread_level: c_int,
    pub start_unix_ms: u64,
    pub pid: u32,
}

/// Milliseconds since the Unix epoch (`clock_gettime` itself: `SystemTime::now` is std code
/// elsewhere in the library, which the end of `MPI_Init` would map, see footprint.rs).
#[inline]
pub fn unix_ms_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 || ts.tv_sec < 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

pub fn thread_level_name(level: c_int) -> &'static str {
    match level {
        0 => "single",
        1 => "funneled",
        2 => "serialized",
        3 => "multiple",
        _ => "unknown",
    }
}

/// The batch system's job id, or one made from the start time and pid.
pub fn job_id(start_unix_ms: u64, pid: u32) -> String {
    for var in ["SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"] {
        if let Ok(id) = std::env::var(var) {
            if !id.is_empty() {
                return match (var, std::env::var("SLURM_STEP_ID")) {
                    ("SLURM_JOB_ID", Ok(step)) if !step.is_empty() => format!("{id}.{step}"),
                    _ => id,
                };
            }
        }
    }
    format!("local-{start_unix_ms}-{pid}")
}

/// The process's user: its uid and name (the name from `getpwuid_r`, else the uid's digits).
#[derive(Clone)]
pub struct Account {
    pub uid: u32,
    pub name: String,
}

impl Account {
    pub fn of_process() -> Account {
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        Account {
            uid,
            name: user_name(uid),
        }
    }
}

fn user_name(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r with a buffer we own; the result points into it while we read it.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return uid.to_string();
    }
    // SAFETY: pw_name is a NUL-terminated string inside buf.
    unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }
        .to_string_lossy()
        .into_owned()
}

pub fn host_name() -> String {
    // open and read, not `fs::read_to_string`: its size hint is a `statx` of std's empty-path
    // constant, which the kernel reads: one more chunk of `.rodata` on rank 0 at MPI_Finalize.
    let mut name = [0u8; 256];
    // SAFETY: a NUL-terminated path, a buffer we own, the descriptor closed once.
    let len = unsafe {
        let fd = libc::open(
            c"/proc/sys/kernel/hostname".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            0
        } else {
            let read = libc::read(fd, name.as_mut_ptr().cast(), name.len());
            libc::close(fd);
            usize::try_from(read).unwrap_or(0)
        }
    };
    std::str::from_utf8(&name[..len])
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The command line from `/proc/self/cmdline` (Fortran programs pass no argv to `MPI_Init`).
fn argv() -> Vec<String> {
    let bytes = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|c| *c == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn exe() -> String {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What this process runs.
pub struct Program {
    pub exe: String,
    pub argv0: String,
    /// The executable, or an interpreter's script ([`classify`]).
    pub application: Application,
}

/// This process's [`Program`]: worked out once, at its first use (`MPI_Init`'s trace decision),
/// so that the escalation list is matched against the same application the record names even if
/// the program changes directory later.
pub fn program() -> &'static Program {
    static PROGRAM: OnceLock<Program> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let (exe, argv) = (exe(), argv());
        let cwd = std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        Program {
            application: classify(&exe, &argv, &cwd),
            argv0: argv.into_iter().next().unwrap_or_default(),
            exe,
        }
    })
}
