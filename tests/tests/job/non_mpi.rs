//! Non-MPI processes with the profiler preloaded (shells, interpreters, launcher wrappers) run as
//! if it were not there: no output, exit 0, and libmpi is not pulled into them.

use mpistat_e2e::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// `argv` with `LD_PRELOAD` set to the profiler (and the site config variable set), or bare.
fn command(argv: &[&str], preload: bool) -> Command {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .env_remove("LD_PRELOAD")
        .env_remove("MPISTAT_CONFIG");
    if preload {
        cmd.env("LD_PRELOAD", library())
            .env("MPISTAT_CONFIG", "/nonexistent/mpistat-site.toml");
    }
    cmd
}

const NON_MPI: &[&[&str]] = &[
    &["bash", "-c", "true"],
    &["python3", "-c", "pass"],
    &["/bin/true"],
    // What srun-like wrappers do: exec the real program through another one.
    &["env", "true"],
    &["env", "bash", "-c", "exit 0"],
];

#[test]
fn non_mpi_programs_print_nothing_and_exit_0() {
    for argv in NON_MPI {
        let outcome = run_with_timeout(command(argv, true), Duration::from_secs(60));
        assert!(
            outcome.status.success(),
            "{argv:?} failed with the profiler preloaded: {outcome:?}"
        );
        assert_eq!(outcome.stdout, "", "{argv:?} printed to stdout");
        assert_eq!(outcome.stderr, "", "{argv:?} printed to stderr");
    }
}

#[test]
fn preloading_does_not_pull_libmpi_into_non_mpi_programs() {
    let maps = run_with_timeout(
        command(&["cat", "/proc/self/maps"], true),
        Duration::from_secs(60),
    );
    assert!(maps.status.success(), "{maps:?}");
    let lib = library().canonicalize().unwrap();
    assert!(
        maps.stdout.contains(lib.to_str().unwrap()),
        "the profiler was not loaded at all:\n{}",
        maps.stdout
    );
    // Open MPI's libraries: libmpi.so, libmpi_mpifh.so, ..., libopen-pal.so, libopen-rte.so.
    let is_mpi_library = |line: &&str| {
        let file = line.rsplit('/').next().unwrap_or("");
        file.starts_with("libmpi.") || file.starts_with("libmpi_") || file.starts_with("libopen-")
    };
    let mpi: Vec<&str> = maps.stdout.lines().filter(is_mpi_library).collect();
    assert!(
        mpi.is_empty(),
        "the profiler pulled MPI libraries into cat:\n{}",
        mpi.join("\n")
    );
}

/// Start-up cost of the preload, printed for humans (`--nocapture`), never asserted.
#[test]
fn startup_time_with_and_without_preload_is_reported() {
    const RUNS: u32 = 50;
    let time = |preload: bool| {
        let start = Instant::now();
        for _ in 0..RUNS {
            let status = command(&["/bin/true"], preload)
                .status()
                .expect("run /bin/true");
            assert!(status.success());
        }
        start.elapsed() / RUNS
    };
    let bare = time(false);
    let preloaded = time(true);
    println!("/bin/true start-up over {RUNS} runs: bare {bare:?}, preloaded {preloaded:?} per run");
}

/// `argv` preloaded with the loader's `LD_DEBUG=files` trace, which names every object loaded
/// (`dlopen` included) and every initialiser run: the front must have been loaded (its `init`
/// runs), no implementation (`libmpistat_<family>.so`) must have been. Returns the trace.
fn assert_front_alone(argv: &[&str]) -> String {
    let mut cmd = command(argv, true);
    cmd.env("LD_DEBUG", "files");
    let outcome = run_with_timeout(cmd, Duration::from_secs(60));
    assert!(outcome.status.success(), "{argv:?}: {outcome:?}");
    let front = library().display().to_string();
    assert!(
        outcome.stderr.contains(&format!("calling init: {front}")),
        "{argv:?}: the front was not loaded:\n{}",
        outcome.stderr
    );
    let loaded: Vec<&str> = outcome
        .stderr
        .lines()
        .filter(|l| l.contains("libmpistat_"))
        .collect();
    assert!(
        loaded.is_empty(),
        "{argv:?} loaded an implementation:\n{}",
        loaded.join("\n")
    );
    outcome.stderr
}

#[test]
fn the_front_loads_no_implementation_into_a_process_that_makes_no_mpi_call() {
    // One is beside the front, where it would be found.
    implementation("openmpi");
    for argv in NON_MPI {
        assert_front_alone(argv);
    }
    // A program linked with libmpi that never calls MPI: Open MPI's library is loaded before
    // any initialiser runs, so a front that chose its implementation when loaded would take it.
    let dir = Scratch::new("no-mpi-call");
    let source = dir.path().join("no_mpi_call.c");
    std::fs::write(
        &source,
        "#include <stdio.h>\nint main(void) { return 0; }\n",
    )
    .expect("write the program");
    let exe = dir.path().join("no_mpi_call");
    let built = Command::new("mpicc")
        .arg("-o")
        .arg(&exe)
        .arg(&source)
        .args(["-Wl,--no-as-needed", "-lmpi"])
        .output()
        .expect("run mpicc");
    assert!(built.status.success(), "{built:?}");
    let trace = assert_front_alone(&[exe.to_str().unwrap()]);
    assert!(
        trace.contains("libmpi.so.40"),
        "libmpi was not loaded:\n{trace}"
    );
}
