//! The `mpistat` command as the tests run it (as root or as a test user), the analysis as an MPI
//! program, and a real traced job to analyse.

use crate::job::Job;
use crate::programs::{program_for, Mpi};
use crate::syslogd::Syslogd;
use crate::users::User;
use crate::workspace::{library, mpistat_binary};
use mpistat_testkit::scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Run the `mpistat` binary (built beside the library) with `args` and `--config config`; its
/// stderr is echoed for the test log.
pub fn mpistat(args: &[&str], config: &Path) -> std::process::Output {
    mpistat_as(None, args, config)
}

/// [`mpistat`] as `user` (through `setpriv`), or as the test's own user.
pub fn mpistat_as(user: Option<&User>, args: &[&str], config: &Path) -> std::process::Output {
    let binary = mpistat_binary();
    let mut cmd = match user {
        Some(user) => user.command(&binary),
        None => Command::new(&binary),
    };
    let output = cmd
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    eprintln!(
        "mpistat {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `mpistat analyze ARGS...`: its report (standard output); it must succeed.
pub fn mpistat_analyze<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = Command::new(mpistat_binary())
        .arg("analyze")
        .args(args)
        .output()
        .expect("run mpistat analyze");
    assert!(
        out.status.success(),
        "mpistat analyze failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A real traced job (`delays.c` on `ranks` ranks: a delayed send chain, then barriers after
/// uneven work; `MPISTAT_TRACE=1`, its trace in `home`): what its record says of the trace.
pub fn traced_delays_job(mpi: Mpi, ranks: u32, home: &Scratch) -> mpistat_record::model::TraceInfo {
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for("delays.c", mpi), ranks)
        .mpi(mpi)
        .env("HOME", home.path().display().to_string())
        .env("MPISTAT_TRACE", "1")
        .arg("20")
        .arg("4")
        .arg("2")
        .arg("3")
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    let record = syslogd.single_record();
    record.trace.expect("the record says the job was traced")
}

/// The analysis as an MPI program for `mpi` (`mpistat-analyze`, `mpistat-analyze-mpich`); the
/// tests never build it (`cargo build --release -p mpistat-analyze-mpi -p
/// mpistat-analyze-mpi-mpich`).
pub fn analyze_mpi(mpi: Mpi) -> PathBuf {
    let name = match mpi {
        Mpi::OpenMpi => "mpistat-analyze",
        Mpi::Mpich => "mpistat-analyze-mpich",
    };
    let path = library().with_file_name(name);
    assert!(
        path.is_file(),
        "{} is missing: cargo build --release -p mpistat-analyze-mpi -p mpistat-analyze-mpi-mpich",
        path.display()
    );
    path
}
