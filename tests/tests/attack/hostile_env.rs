//! Issue 34 §4 and issue 33 §4 (`MPISTAT=off`): what a user's environment can do to a job, and
//! a user's trace to `mpistat analyze`. Each attack runs as the issue measured it, against the
//! real library in real jobs of both MPI families; the tests print the figures (time to the end
//! of `MPI_Init` and peak resident set per rank, `mpistat analyze`'s peak memory) and judge
//! memory and hangs, never wall time.
//!
//! * `MPISTAT_CONFIG` naming a FIFO (the job hung in `MPI_Init`) or `/dev/zero` (2.1 GB a rank);
//! * sizes of 10^15 bytes in a user's config (every rank aborted);
//! * `MPISTAT_DETAIL` naming a FIFO (the job hung at finalize);
//! * a 5 MB escalation list (a rank's peak 93 MB instead of 12), a FIFO, a user's symlink;
//! * `MPISTAT=off` with the library preloaded, linked, or its implementation preloaded;
//! * a trace whose header claims 0xFFFFFFF0 ranks, and root's `mpistat analyze` of a directory
//!   where its owner planted symlinks and a FIFO.

use mpistat_e2e::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A hang is what these attacks did: a job killed after this fails its test.
const HANG: Duration = Duration::from_secs(60);

/// What one rank of `hostile.c` printed.
#[derive(Debug)]
struct RankFigures {
    init_ms: f64,
    hwm_kb: u64,
    implementation: bool,
}

fn rank_figures(outcome: &Outcome) -> Vec<RankFigures> {
    let ranks: Vec<RankFigures> = outcome
        .stdout
        .lines()
        .filter(|l| l.starts_with("rank "))
        .map(|line| {
            let field = |name: &str| -> &str {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            };
            RankFigures {
                init_ms: field("init_ms=").parse().unwrap(),
                hwm_kb: field("hwm_kb=").parse().unwrap(),
                implementation: field("implementation=") == "1",
            }
        })
        .collect();
    assert!(!ranks.is_empty(), "no figures:\n{}", outcome.stdout);
    ranks
}

/// Prints the figures of a run; returns the largest peak resident set of its ranks (kB).
fn report(mpi: Mpi, label: &str, outcome: &Outcome) -> u64 {
    let ranks = rank_figures(outcome);
    let hwm = ranks.iter().map(|r| r.hwm_kb).max().unwrap();
    let init = ranks.iter().map(|r| r.init_ms).fold(0.0, f64::max);
    println!(
        "{mpi:?} {label}: MPI_Init up to {init:.1} ms, peak resident set up to {:.1} MB a rank, \
         job {:.2} s",
        hwm as f64 / 1024.0,
        outcome.elapsed.as_secs_f64()
    );
    hwm
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo");
}

/// The peak resident set allowed above a normal run's: reading settings may cost a little, a
/// megabyte-sized file read whole would show.
const SLACK_KB: u64 = 3 * 1024;

for_each_mpi! {
fn a_config_that_is_a_fifo_or_a_device_is_not_read(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("hev-config");
    let job = Job::new(program_for("hostile.c", mpi), 2).mpi(mpi).timeout(HANG);
    let normal = job.profiled(&syslogd.site_config());
    normal.assert_success();
    let normal_hwm = report(mpi, "site.toml", &normal);
    syslogd.single_record();

    let fifo = dir.path().join("site.fifo");
    mkfifo(&fifo);
    let outcome = job.profiled(&fifo);
    outcome.assert_success();
    report(mpi, "MPISTAT_CONFIG=<a FIFO nobody writes>", &outcome);
    assert_eq!(outcome.stderr, "", "nothing is printed unless asked");

    let outcome = job.profiled(Path::new("/dev/zero"));
    outcome.assert_success();
    let hwm = report(mpi, "MPISTAT_CONFIG=/dev/zero", &outcome);
    assert!(
        hwm <= normal_hwm + SLACK_KB,
        "/dev/zero as the config: {hwm} kB a rank, {normal_hwm} kB with the real one"
    );
    assert_eq!(outcome.stderr, "", "nothing is printed unless asked");

    // Detail mode says why the settings were not read.
    let outcome = job
        .clone()
        .env("MPISTAT_DETAIL", "stderr")
        .profiled(&fifo);
    outcome.assert_success();
    assert!(
        outcome.stderr.contains("not a regular file (a FIFO)"),
        "{}",
        outcome.stderr
    );
}
}

for_each_mpi! {
fn sizes_of_a_petabyte_in_a_users_config_are_clamped(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("hev-clamp");
    let job = Job::new(program_for("hostile.c", mpi), 2).mpi(mpi).timeout(HANG);
    let supersteps = syslogd.site_config_with(
        "supersteps.toml",
        "[profiler]\nsuperstep_buffer_bytes = 1000000000000000\n",
    );
    let outcome = job.profiled(&supersteps);
    outcome.assert_success();
    report(mpi, "superstep_buffer_bytes = 10^15", &outcome);
    assert_eq!(outcome.stderr, "", "a clamp is told in detail mode only");
    let record = syslogd.records(1).pop().unwrap();
    assert!(record.imbalance.is_some(), "the supersteps were still kept");

    let traced = syslogd.site_config_with(
        "budget.toml",
        &format!(
            "[trace]\nbudget_bytes = 1000000000000000\nanalyze_at_exit = false\n\
             directory = \"{}/{{job_id}}\"\n",
            dir.path().display()
        ),
    );
    let outcome = job
        .clone()
        .env("MPISTAT_TRACE", "1")
        .env("MPISTAT_DETAIL", "stderr")
        .profiled(&traced);
    outcome.assert_success();
    report(mpi, "budget_bytes = 10^15, traced", &outcome);
    assert!(
        outcome.stderr.contains("[trace] budget_bytes 1000000000000000 is more than"),
        "detail mode tells the clamp:\n{}",
        outcome.stderr
    );
    let record = syslogd.wait_for_record("of the traced job", |r| r.trace.is_some());
    assert_eq!(record.trace.unwrap().ranks_written, 2);
}
}

for_each_mpi! {
fn detail_naming_a_fifo_does_not_hold_the_job(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("hev-detail");
    let fifo = dir.path().join("detail.fifo");
    mkfifo(&fifo);
    let outcome = Job::new(program_for("hostile.c", mpi), 2)
        .mpi(mpi)
        .timeout(HANG)
        .env("MPISTAT_DETAIL", fifo.display().to_string())
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    report(mpi, "MPISTAT_DETAIL=<a FIFO nobody reads>", &outcome);
    syslogd.single_record();
}
}

/// A site config tracing into `dir` (no analysis at exit) with the escalation list `list`.
fn escalation_config(syslogd: &Syslogd, dir: &Path, name: &str, list: &Path) -> PathBuf {
    syslogd.site_config_with(
        name,
        &format!(
            "[trace]\nanalyze_at_exit = false\ndirectory = \"{}/{{job_id}}\"\n\
             [escalation]\nlist = {:?}\n",
            dir.display(),
            list.display().to_string()
        ),
    )
}

/// The escalation list's line that traces `exe` run by root.
fn entry_for(exe: &Path) -> String {
    format!("0\t{}\t5\t{}\tadmin\n", exe.display(), u64::MAX / 2)
}

/// Runs the job with the list `list`; returns the figures' peak and whether it was traced.
fn run_with_list(
    mpi: Mpi,
    job: &Job,
    syslogd: &Syslogd,
    dir: &Path,
    label: &str,
    list: &Path,
) -> (u64, bool) {
    let config = escalation_config(syslogd, dir, &format!("{label}.toml"), list);
    let before = syslogd.decoded().records.len();
    let outcome = job.profiled(&config);
    outcome.assert_success();
    assert_eq!(outcome.stderr, "", "nothing is printed unless asked");
    let hwm = report(mpi, label, &outcome);
    let records = syslogd.records(before + 1);
    (hwm, records.last().unwrap().trace.is_some())
}

for_each_mpi! {
fn the_escalation_list_is_read_bounded_and_from_a_regular_file(mpi) {
    let _serial = serial();
    let Some(mallory) = User::ensure("hev-mallory") else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let syslogd = Syslogd::start();
    let dir = Scratch::new("hev-list");
    let program = program_for("hostile.c", mpi);
    let job = Job::new(&program, 2).mpi(mpi).timeout(HANG);
    let entry = entry_for(&program);

    // The peak to compare with: a small list without an entry for this job (a traced job's
    // peak is higher: its event buffer).
    let other = dir.path().join("other.list");
    std::fs::write(&other, entry.replacen('0', "4711", 1)).unwrap();
    let (small_hwm, traced) = run_with_list(mpi, &job, &syslogd, dir.path(), "small-list", &other);
    assert!(!traced);
    let list = dir.path().join("escalation.list");
    std::fs::write(&list, &entry).unwrap();
    let (_, traced) = run_with_list(mpi, &job, &syslogd, dir.path(), "our-entry", &list);
    assert!(traced, "the list's entry traces the job");

    // 5 MB of short entries (a list grown by mistake), then ours, past what is read.
    let big = dir.path().join("big.list");
    let mut text = String::new();
    for uid in 1000.. {
        if text.len() >= 5 << 20 {
            break;
        }
        text.push_str(&format!("{uid}\t/home/u{uid}/a.out\t1\t{}\trule\n", u64::MAX / 2));
    }
    std::fs::write(&big, text + &entry).unwrap();
    let (hwm, traced) = run_with_list(mpi, &job, &syslogd, dir.path(), "5-MB-list", &big);
    assert!(
        hwm <= small_hwm + SLACK_KB,
        "a 5 MB list: {hwm} kB a rank, {small_hwm} kB with a small one"
    );
    assert!(!traced, "the entry after the first MiB does not apply");
    // One application of 5 MB (a hostile record, before ingest bounded them), then ours.
    let long = dir.path().join("long.list");
    let hostile = format!("0\t/{}\t1\t{}\trule\n", "x".repeat(5 << 20), u64::MAX / 2);
    std::fs::write(&long, hostile + &entry).unwrap();
    let (hwm, _) = run_with_list(mpi, &job, &syslogd, dir.path(), "5-MB-entry", &long);
    assert!(
        hwm <= small_hwm + SLACK_KB,
        "a 5 MB entry: {hwm} kB a rank, {small_hwm} kB with a small list"
    );

    let fifo = dir.path().join("list.fifo");
    mkfifo(&fifo);
    let (_, traced) = run_with_list(mpi, &job, &syslogd, dir.path(), "FIFO-list", &fifo);
    assert!(!traced);

    // A symlink someone other than root (or the job's user) made is not followed; root's is.
    let foreign = dir.path().join("foreign.list");
    std::os::unix::fs::symlink(&list, &foreign).unwrap();
    let c = std::ffi::CString::new(foreign.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; lchown changes the link itself.
    assert_eq!(unsafe { libc::lchown(c.as_ptr(), mallory.uid, mallory.gid) }, 0);
    let (_, traced) = run_with_list(mpi, &job, &syslogd, dir.path(), "mallory-symlink", &foreign);
    assert!(!traced, "a list through hev-mallory's symlink traced a job of root's");
    let roots = dir.path().join("roots.list");
    std::os::unix::fs::symlink(&list, &roots).unwrap();
    let (_, traced) = run_with_list(mpi, &job, &syslogd, dir.path(), "root-symlink", &roots);
    assert!(traced, "root's own symlink is followed");
}
}

for_each_mpi! {
fn mpistat_off_makes_the_library_a_pass_through(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let site = syslogd.site_config();
    let program = program_for("hostile.c", mpi);
    let job = Job::new(&program, 2).mpi(mpi).timeout(HANG);
    let bare = job.bare();
    bare.assert_success();
    assert!(rank_figures(&bare).iter().all(|r| !r.implementation));
    // Without the variable the implementation is loaded (what the figures below tell apart).
    let profiled = job.profiled(&site);
    assert!(rank_figures(&profiled).iter().all(|r| r.implementation));
    syslogd.single_record();

    let family = match mpi {
        Mpi::OpenMpi => "openmpi",
        Mpi::Mpich => "mpich",
    };
    let off = |job: &Job, value: &str| {
        job.clone()
            .env("MPISTAT", value)
            .env("MPISTAT_DETAIL", "stderr")
            .env("MPISTAT_TRACE", "1")
    };
    // Each run: what it is, whether the implementation is in the process anyway, its outcome.
    let mut runs = Vec::new();
    for value in ["off", "OFF", "Off", "no", "0", "false"] {
        let outcome = off(&job, value).profiled(&site);
        runs.push((format!("MPISTAT={value}, front preloaded"), false, outcome));
    }
    runs.push((
        "MPISTAT=off, implementation preloaded".into(),
        true,
        off(&job, "off").preloading(&implementation(family), &site),
    ));
    let linked = linked_with_front("hostile.c", "hostile_linked", mpi);
    let linked_job = Job::new(linked, 2).mpi(mpi).timeout(HANG);
    runs.push((
        "MPISTAT=off, linked".into(),
        false,
        off(&linked_job, "off").linked(&site),
    ));
    for (label, preloaded, outcome) in &runs {
        outcome.assert_success();
        report(mpi, label, outcome);
        assert!(
            rank_figures(outcome).iter().all(|r| r.implementation == *preloaded),
            "{label}: the front loaded an implementation"
        );
        assert_eq!(outcome.stderr, bare.stderr, "{label}: printed something");
    }
    // The one record is the run without the variable's.
    syslogd.single_record();
}
}

// ---------------------------------------------------------------------------------------------
// mpistat analyze
// ---------------------------------------------------------------------------------------------

/// What an `mpistat analyze` run left: status, stderr, peak resident set and time.
struct Analyzed {
    status: std::process::ExitStatus,
    stderr: String,
    peak_kb: i64,
}

/// `mpistat analyze ARGS` as root under a 4 GiB address-space limit (a broken reader fails
/// there instead of taking the shared machine's memory), killed after [`HANG`]; its peak
/// resident set from the kernel (`wait4`, which reaps it: clippy does not see that).
#[allow(clippy::zombie_processes)]
fn analyze(args: &[&str], label: &str) -> Analyzed {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut cmd = Command::new(mpistat_binary());
    // As a user runs it: a backtrace (RUST_BACKTRACE=1 under cargo test) takes 100 MB.
    cmd.env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .arg("analyze")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("mpistat analyze");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    loop {
        // SAFETY: our child, a status and a rusage to fill.
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if done == pid {
            break;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{label}: mpistat analyze {args:?} did not finish within {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = start.elapsed();
    use std::os::unix::process::ExitStatusExt;
    let analyzed = Analyzed {
        status: std::process::ExitStatus::from_raw(status),
        stderr: reader.join().unwrap(),
        peak_kb: usage.ru_maxrss,
    };
    println!(
        "{label}: mpistat analyze {} in {:.2} s, peak resident set {:.1} MB",
        analyzed.status,
        elapsed.as_secs_f64(),
        analyzed.peak_kb as f64 / 1024.0
    );
    analyzed
}

/// The file's bytes with the LEB128 varint after `skip` varints past the 10-byte header
/// replaced by `value`'s.
fn with_varint(bytes: &[u8], skip: usize, value: u64) -> Vec<u8> {
    let mut at = 10;
    for _ in 0..skip {
        while bytes[at] & 0x80 != 0 {
            at += 1;
        }
        at += 1;
    }
    let mut end = at;
    while bytes[end] & 0x80 != 0 {
        end += 1;
    }
    let mut encoded = Vec::new();
    let mut v = value;
    while v >= 0x80 {
        encoded.push(v as u8 | 0x80);
        v >>= 7;
    }
    encoded.push(v as u8);
    [&bytes[..at], &encoded, &bytes[end + 1..]].concat()
}

/// A copy of the trace directory `from` in `to`, owned by root.
fn copy_trace(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn analyze_checks_a_traces_header_and_follows_no_symlink_its_owner_planted() {
    let _serial = serial();
    let users = ["hev-alice", "hev-bob"].map(User::ensure);
    let [Some(alice), Some(bob)] = users else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let syslogd = Syslogd::start();
    std::fs::set_permissions(
        syslogd.socket().parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let site = syslogd.site_config_with("traced.toml", "[trace]\nanalyze_at_exit = false\n");
    // Alice traces a job into her private home.
    Job::new(program("hostile.c"), 2)
        .as_user(&alice)
        .timeout(HANG)
        .env("MPISTAT_TRACE", "1")
        .profiled(&site)
        .assert_success();
    let record = syslogd.wait_for_record("of the traced job", |r| r.trace.is_some());
    let trace = PathBuf::from(record.trace.unwrap().dir);
    let trace_arg = trace.to_str().unwrap();
    let normal = analyze(&[trace_arg], "alice's trace, as root");
    assert!(normal.status.success(), "{}", normal.stderr);

    // 5 bytes edited: the world size of rank 0's definitions is 0xFFFFFFF0.
    let work = Scratch::new("hev-analyze");
    let edited = work.path().join("world");
    copy_trace(&trace, &edited);
    let local = edited.join("local-000000.mpt");
    let bytes = std::fs::read(&local).unwrap();
    std::fs::write(&local, with_varint(&bytes, 1, 0xFFFF_FFF0)).unwrap();
    let out = analyze(&[edited.to_str().unwrap()], "world size 0xFFFFFFF0");
    assert_eq!(out.status.code(), Some(1), "a clean error: {}", out.stderr);
    assert!(
        out.stderr.contains("world size 4294967280"),
        "{}",
        out.stderr
    );
    assert!(
        out.peak_kb <= normal.peak_kb + 16 * 1024,
        "{} kB to refuse it, {} kB to analyse the real trace",
        out.peak_kb,
        normal.peak_kb
    );
    // The parallel reader too (each process under the same 4 GiB limit).
    let outcome = Job::new("prlimit", 2)
        .timeout(HANG)
        .arg(format!("--as={}", 4u64 << 30))
        .arg(
            library()
                .with_file_name("mpistat-analyze")
                .display()
                .to_string(),
        )
        .arg(edited.display().to_string())
        .bare();
    assert!(!outcome.status.success());
    assert!(
        outcome.stderr.contains("world size 4294967280")
            && !outcome.stderr.contains("memory allocation"),
        "{}",
        outcome.stderr
    );
    println!(
        "world size 0xFFFFFFF0: mpirun -n 2 mpistat-analyze {} in {:.2} s",
        outcome.status,
        outcome.elapsed.as_secs_f64()
    );
    // A rank file naming rank 0xFFFFFFF0 in its header.
    let renamed = work.path().join("rank");
    copy_trace(&trace, &renamed);
    let rank_file = renamed.join("rank-000001.mpt");
    let bytes = std::fs::read(&rank_file).unwrap();
    std::fs::write(&rank_file, with_varint(&bytes, 0, 0xFFFF_FFF0)).unwrap();
    let out = analyze(
        &[renamed.to_str().unwrap()],
        "rank 0xFFFFFFF0 in a rank file",
    );
    assert_eq!(out.status.code(), Some(1), "a clean error: {}", out.stderr);
    assert!(out.stderr.contains("rank-000001.mpt"), "{}", out.stderr);

    // Bob's private trace and file, which Alice cannot read, but root can.
    let bobs = bob.home.join("trace");
    let _ = std::fs::remove_dir_all(&bobs);
    copy_trace(&trace, &bobs);
    bob.own(&bobs);
    let secret = bob.home.join("secret.mpt");
    std::fs::copy(trace.join("rank-000001.mpt"), &secret).unwrap();
    bob.own(&secret);
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Alice plants, in her own trace directory, a symlink to it ...
    let planted = trace.join("rank-000001.mpt");
    std::fs::remove_file(&planted).unwrap();
    let as_alice = |args: &[&str]| {
        let status = alice.command(args[0]).args(&args[1..]).status().unwrap();
        assert!(status.success(), "{args:?} as alice");
    };
    as_alice(&[
        "ln",
        "-s",
        secret.to_str().unwrap(),
        planted.to_str().unwrap(),
    ]);
    let out = analyze(&[trace_arg], "a symlink to bob's file in alice's trace");
    assert!(
        !out.status.success(),
        "root followed alice's symlink to bob's file"
    );
    assert!(out.stderr.contains("rank-000001.mpt"), "{}", out.stderr);
    // ... a FIFO ...
    as_alice(&["rm", planted.to_str().unwrap()]);
    as_alice(&["mkfifo", planted.to_str().unwrap()]);
    let out = analyze(&[trace_arg], "a FIFO in alice's trace");
    assert!(!out.status.success());
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);
    // ... and, in her home, a symlink to a directory of Bob's.
    let link = alice.home.join("trace-link");
    let _ = std::fs::remove_file(&link);
    as_alice(&["ln", "-s", bobs.to_str().unwrap(), link.to_str().unwrap()]);
    let out = analyze(
        &[link.to_str().unwrap()],
        "alice's symlink to a directory of bob's",
    );
    assert!(!out.status.success(), "root followed alice's symlink");
    assert!(out.stderr.contains("symlink"), "{}", out.stderr);
}
