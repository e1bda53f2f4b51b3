//! A record for a job killed by `SIGTERM`: what Slurm sends every process of a job step at
//! `scancel` and at the time limit (then `SIGKILL` after `KillWait`, 30 s by default), and what
//! `mpirun` sends its ranks when it is told to stop. By default the signal ends a rank at once,
//! without `atexit`, so rank 0 would leave no record.
//!
//! Rank 0 installs a handler, only when `SIGTERM`'s disposition is the default one (a program or
//! MPI library handling the signal itself keeps its handler, and its exit path goes through
//! `atexit` or `MPI_Finalize`; an ignored signal stays ignored). The handler does only
//! async-signal-safe things: in the process that installed it, it writes the sender's pid to a
//! pipe (`write(2)`, errno kept); in a forked child it puts the default disposition back and
//! raises the signal again. A helper thread (created at `MPI_Init`, every signal blocked, blocked
//! in `read(2)` on the pipe) then does the work that needs locks and allocation: the partial
//! record, through [`crate::hooks`], bounded in time; then it puts the default disposition back
//! (if ours is still installed) and sends the process `SIGTERM` again, which now ends it as it
//! would have ended without mpistat. A second `SIGTERM` meanwhile is absorbed.
//!
//! `on_term` is told whether the signal came from the rank's parent other than Slurm's
//! `slurmstepd` (ranks of `srun`): a launcher (`mpirun`, `orted`, MPICH's proxy) stops its ranks
//! so after `MPI_Abort` (whose rank wrote the record already), after a rank died (killed,
//! crashed, or lost with its node), or when it was itself told to stop; [`crate::claim`] tells
//! the first case from the others where it can. Open MPI's daemon sends `SIGKILL` one second
//! after its `SIGTERM`. Slurm ends a step by signalling each of its processes itself, so ranks of
//! `mpirun` in a batch job hear it from `slurmstepd` first, well before `mpirun` passes it on.
//! `[profiler] record_on_sigterm = false` leaves `SIGTERM` alone.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::SeqCst};

/// The pipe's write end (-1: no handler installed).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the handler.
static OWNER: AtomicI32 = AtomicI32::new(0);
/// The handler fired once already.
static FIRED: AtomicBool = AtomicBool::new(false);
/// The helper thread is about to block in `read(2)`.
static READY: AtomicBool = AtomicBool::new(false);

/// What the helper thread runs once the signal came, and the pipe's read end it waits on.
static ON_TERM: AtomicUsize = AtomicUsize::new(0);
static READ_END: AtomicI32 = AtomicI32::new(-1);

/// Install the handler and its helper thread, which runs `on_term(from_launcher)` once the
/// signal came. Does nothing if `SIGTERM` is not at its default disposition, or if anything fails on the way.
///
/// Runs right after the real `MPI_Init`, where everything it runs adds to MPI_Init's peak
/// resident set (footprint.rs): in `.text.init`, with the thread made by `pthread_create` and
/// the wait timed by `clock_gettime`/`nanosleep` (std's thread and time code was 400 kB of
/// other chunks).
#[link_section = ".text.init.mpistat"]
pub fn install(on_term: fn(bool)) {
    if PIPE.load(SeqCst) >= 0 {
        return;
    }
    // SAFETY: sigaction(2) reading the current disposition into a zeroed struct.
    let current = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) != 0 {
            return;
        }
        old
    };
    if current.sa_sigaction != libc::SIG_DFL {
        return;
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2(2) into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [read_end, write_end] = fds;
    ON_TERM.store(on_term as usize, SeqCst);
    READ_END.store(read_end, SeqCst);
    if !spawn_helper() {
        // SAFETY: closing the pipe we just made.
        unsafe {
            libc::close(read_end);
            libc::close(write_end);
        }
        return;
    }
    // Wait (at most 1 s) until the thread ran everything it runs before the signal: MPI_Init
    // then releases the pages it touched ([`crate::footprint`]), and nothing maps them back.
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 100_000,
    };
    for _ in 0..10_000 {
        if READY.load(SeqCst) {
            break;
        }
        // SAFETY: a valid timespec; an interrupted sleep is only shorter.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
    // SAFETY: getpid cannot fail.
    OWNER.store(unsafe { libc::getpid() }, SeqCst);
    PIPE.store(write_end, SeqCst);
    // SAFETY: installing a handler that only calls async-signal-safe functions; SA_RESTART so
    // that a system call it interrupts goes on as it would have without it.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler_address();
        action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// The handler as `sigaction` holds it.
fn handler_address() -> libc::sighandler_t {
    type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
    handler as Handler as *const () as libc::sighandler_t
}

extern "C" fn handler(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: only async-signal-safe calls (getpid, sigaction, raise, write) and errno kept;
    // `info` is the kernel's siginfo for this signal.
    unsafe {
        let errno = *libc::__errno_location();
        if libc::getpid() != OWNER.load(SeqCst) {
            // A forked child (no helper thread there): end as without mpistat.
            restore_default();
            libc::raise(libc::SIGTERM);
        } else if !FIRED.swap(true, SeqCst) {
            // Sent by kill(2) (SI_USER) or by the kernel (pid 0 then).
            let sender: libc::pid_t = if info.is_null() { 0 } else { (*info).si_pid() };
            // A pipe takes writes of up to PIPE_BUF bytes whole.
            libc::write(
                PIPE.load(SeqCst),
                (&sender as *const libc::pid_t).cast(),
                std::mem::size_of::<libc::pid_t>(),
            );
        }
        *libc::__errno_location() = errno;
    }
}

/// Put `SIGTERM`'s default disposition back (async-signal-safe).
unsafe fn restore_default() {
    let mut action: libc::sigaction = std::mem::zeroed();
    action.sa_sigaction = libc::SIG_DFL;
    libc::sigemptyset(&mut action.sa_mask);
    libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
}

/// Start the helper thread (detached, 256 KiB of stack, named `mpistat-sigterm`).
#[link_section = ".text.init.mpistat"]
fn spawn_helper() -> bool {
    #[link_section = ".text.hot.mpistat"]
    extern "C" fn helper(_: *mut libc::c_void) -> *mut libc::c_void {
        let on_term = ON_TERM.load(SeqCst);
        if on_term != 0 {
            // SAFETY: `install` stored a `fn(bool)` there before starting this thread.
            let on_term = unsafe { std::mem::transmute::<usize, fn(bool)>(on_term) };
            wait_then_record(READ_END.load(SeqCst), on_term);
        }
        std::ptr::null_mut()
    }
    let name = init_c_str!("mpistat-sigterm");
    // SAFETY: pthread attributes initialised before use and destroyed after; the thread runs a
    // plain extern "C" function that catches every panic of what it calls (guard::quietly).
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_attr_init(&mut attr) != 0 {
            return false;
        }
        libc::pthread_attr_setstacksize(&mut attr, 256 * 1024);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = std::mem::zeroed();
        let rc = libc::pthread_create(&mut thread, &attr, helper, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        if rc == 0 {
            libc::pthread_setname_np(thread, name.as_ptr());
        }
        rc == 0
    }
}

/// The helper thread: every signal blocked (signals stay the program's threads' business), wait
/// for the handler's sender pid, run `on_term` (told whether a launcher sent it), then let the
/// signal do what it would have done. With
/// the hot wrappers, so that what it runs between saying it is ready and blocking in `read(2)`
/// maps no page that `MPI_Init` releases.
#[link_section = ".text.hot.mpistat"]
fn wait_then_record(read_end: libc::c_int, on_term: fn(bool)) {
    let mut sender: libc::pid_t = 0;
    // SAFETY: blocking every signal in this thread only; read(2) into a local pid.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        let size = std::mem::size_of::<libc::pid_t>();
        // A read of nothing binds read(2)'s PLT entry now rather than after the release.
        libc::read(read_end, (&mut sender as *mut libc::pid_t).cast(), 0);
        READY.store(true, SeqCst);
        loop {
            let n = libc::read(read_end, (&mut sender as *mut libc::pid_t).cast(), size);
            if n == size as isize {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            return; // the pipe is gone: nothing will come
        }
    }
    let launcher = crate::guard::quietly(|| from_launcher(sender)).unwrap_or(true);
    crate::guard::quietly(|| on_term(launcher));
    // SAFETY: sigaction(2) and kill(2) on our own process.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut current);
        if current.sa_sigaction == handler_address() {
            restore_default();
        }
        libc::kill(libc::getpid(), libc::SIGTERM);
    }
}

/// Whether `sender` is this rank's parent and not Slurm's `slurmstepd` (see the module doc).
fn from_launcher(sender: libc::pid_t) -> bool {
    // SAFETY: getppid cannot fail.
    let parent = unsafe { libc::getppid() };
    sender == parent
        && std::fs::read_to_string(format!("/proc/{parent}/comm"))
            .map_or(true, |name| name.trim_end() != "slurmstepd")
}
