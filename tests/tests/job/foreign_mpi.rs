//! An MPI the library was not built for is left alone, and a job where only some ranks have the
//! library never hangs (docs/admin-guide.md, "An MPI the library does not know").
//!
//! MPICH jobs (Debian's `mpich`, beside the default Open MPI) run every sample program bare and
//! with the MPICH build preloaded: same output, same exit code. The Open MPI build meeting
//! MPICH jobs (handles are `int`s there, which its pointer-sized parameters carry unchanged), a
//! stub "MPI" with handles of its own and an unknown version, and a process with two MPI
//! libraries, are untouched: same output, no record. Mixed jobs (half of the ranks without
//! `LD_PRELOAD`, either half) end, print what the bare job prints, and record what is
//! documented: one partial record of the lowest rank with the library (the ranks learn who has
//! it through PMIx under Open MPI, through Hydra's PMI-1 under MPICH); an MPICH job launched
//! without Hydra runs as before (rank 0 reports alone). A rank whose site configuration
//! disables profiling counts as one without the library. A hang is caught by the job timeout (generous: it only
//! detects a hang).

use mpistat_e2e::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Long enough for any of these jobs on a loaded machine; a hang runs into it.
const HANG: Duration = Duration::from_secs(60);

/// A sample program for the MPICH runs: source, name, extra flags, ranks, arguments, and
/// whether its output is deterministic (else only the exit status is compared).
struct Sample {
    program: Program,
    ranks: u32,
    args: &'static [&'static str],
    same_output: bool,
}

const fn sample(source: &'static str, name: &'static str, ranks: u32) -> Sample {
    Sample {
        program: Program {
            source,
            name,
            flags: &[],
        },
        ranks,
        args: &[],
        same_output: true,
    }
}

/// Every sample program of tests/programs and scripts/demo that runs the same every time under
/// MPICH. Left out: `no_finalize` (MPICH's exit status races even bare) and `footprint` (it
/// reports libmpistat's own pages).
fn samples() -> Vec<Sample> {
    let fortran = |name, define| Sample {
        program: Program {
            source: "basic.F90",
            name,
            flags: define,
        },
        ..sample("basic.F90", name, 4)
    };
    vec![
        sample("basic.c", "basic", 4),
        fortran("basic_mpif_h", &["-DMPIF_H"][..]),
        fortran("basic_use_mpi", &["-DUSE_MPI"][..]),
        fortran("basic_use_mpi_f08", &["-DUSE_F08"][..]),
        sample("edge.c", "edge", 4),
        sample("type_reuse.c", "type_reuse", 2),
        sample("threads.c", "threads", 2),
        sample("pmpi_tool.c", "pmpi_tool", 2),
        sample("pcontrol.c", "pcontrol", 2),
        sample("counters.c", "counters", 2),
        Sample {
            args: &["static", "3", "10"],
            ..sample("imbalance.c", "imbalance", 4)
        },
        Sample {
            args: &["20", "3", "5", "5"],
            // Prints clock readings.
            same_output: false,
            ..sample("delays.c", "delays", 4)
        },
        Sample {
            // MPI_Abort's messages come in any order and number.
            same_output: false,
            ..sample("abort.c", "abort", 4)
        },
        Sample {
            program: Program {
                source: "../../scripts/demo/ring.c",
                name: "demo_ring",
                flags: &["-lm"],
            },
            ..sample("", "", 4)
        },
        sample("../../scripts/demo/unbalanced.c", "demo_unbalanced", 4),
        sample("../../scripts/demo/heat.f90", "demo_heat", 4),
    ]
}

/// Every sample as an MPICH job: bare and with `run` (a preloaded library), the same exit
/// status and, where deterministic and not one of `prints` (programs that ask the profiler to
/// print), output. Returns how many jobs ran.
fn each_mpich_sample_as_bare(prints: &[&str], run: impl Fn(&Job) -> Outcome) -> usize {
    let samples = samples();
    for s in &samples {
        let job = s
            .args
            .iter()
            .fold(Job::new(s.program.path_for(Mpi::Mpich), s.ranks), |j, a| {
                j.arg(*a)
            })
            .mpi(Mpi::Mpich)
            .timeout(HANG);
        let bare = job.bare();
        let profiled = run(&job);
        assert_eq!(
            profiled.status.code(),
            bare.status.code(),
            "{}: exit status differs:\nbare: {bare:?}\nprofiled: {profiled:?}",
            s.program.name
        );
        if s.same_output && !prints.contains(&s.program.name) {
            assert_same_output(&bare, &profiled);
        }
    }
    samples.len()
}

#[test]
fn mpich_jobs_run_as_bare_with_the_mpich_build_preloaded_and_send_records() {
    let _serial = serial();
    let syslogd = Syslogd::start();
    // pcontrol.c asks for the subtotals with MPI_Pcontrol(2).
    let jobs = each_mpich_sample_as_bare(&["pcontrol"], |job| job.profiled(&syslogd.site_config()));
    // One record per job (the aborting one's partial), every one of MPICH.
    let records = syslogd.records(jobs);
    for r in &records {
        assert_eq!(
            mpistat_record::family::Family::of_library(&r.mpi_library),
            Some(Mpi::Mpich.family()),
            "{}",
            r.mpi_library
        );
    }
}

#[test]
fn the_open_mpi_build_leaves_mpich_jobs_alone() {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let foreign = implementation("openmpi");
    each_mpich_sample_as_bare(&[], |job| {
        // The user asks for the report: a foreign MPI still gets no output from us.
        job.clone()
            .env("MPISTAT_DETAIL", "stderr")
            .preloading(&foreign, &syslogd.site_config())
    });
    syslogd.assert_no_records();
}

/// Build the stub "MPI" (with `defines`) and its program with the system's C compiler; returns
/// the program.
fn stub_program(dir: &Scratch, defines: &[&str]) -> PathBuf {
    let lib_dir = dir.path();
    let cc = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("cc").args(args).output().expect("run cc");
        assert!(
            out.status.success(),
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let lib = lib_dir.join("libstubmpi.so");
    let exe = lib_dir.join("stub_main");
    let src = programs_dir();
    let mut args: Vec<&std::ffi::OsStr> = vec!["-shared".as_ref(), "-fPIC".as_ref()];
    args.extend(defines.iter().map(std::ffi::OsStr::new));
    let stub_source = src.join("stub_mpi.c");
    args.extend(["-o".as_ref(), lib.as_os_str(), stub_source.as_os_str()]);
    cc(&args);
    let rpath = format!("-Wl,-rpath,{}", lib_dir.display());
    let libdir = format!("-L{}", lib_dir.display());
    cc(&[
        "-o".as_ref(),
        exe.as_os_str(),
        src.join("stub_main.c").as_os_str(),
        libdir.as_ref(),
        "-lstubmpi".as_ref(),
        rpath.as_ref(),
    ]);
    exe
}

/// The stub's program run bare and preloaded: same output, exit status 3, no record; returns the
/// bare run's stdout.
fn stub_left_alone(defines: &[&str]) -> String {
    let syslogd = Syslogd::start();
    let dir = Scratch::new("stub-mpi");
    let exe = stub_program(&dir, defines);
    let run = |preload: bool| {
        let mut cmd = Command::new(&exe);
        cmd.env_remove("LD_PRELOAD");
        if preload {
            cmd.env("LD_PRELOAD", library())
                .env("MPISTAT_CONFIG", syslogd.site_config())
                .env("MPISTAT_DETAIL", "stderr");
        }
        run_with_timeout(cmd, HANG)
    };
    let bare = run(false);
    let profiled = run(true);
    assert_eq!(bare.status.code(), Some(3), "{bare:?}");
    assert_eq!(profiled.status.code(), Some(3), "{profiled:?}");
    assert_same_output(&bare, &profiled);
    syslogd.assert_no_records();
    bare.stdout
}

#[test]
fn a_stub_mpi_of_unknown_version_is_left_alone() {
    let _serial = serial();
    assert_eq!(
        stub_left_alone(&[]),
        "Stub MPI 9.9: rank 0 of 1, sendrecv 0: 42 43 44, 12 bytes from 0 tag 5\n"
    );
}

#[test]
fn an_open_mpi_of_another_major_version_is_left_alone() {
    let _serial = serial();
    let out = stub_left_alone(&["-DOPEN_MPI_5"]);
    assert!(
        out.starts_with("Open MPI v5.0.3, package: Open MPI stub: rank 0 of 1"),
        "{out}"
    );
}

/// The mixed job of `mpi` (basic.c on 4 ranks, the library on ranks 0-1 or on 2-3): it ends,
/// prints what the bare job prints, and exits as it does.
fn mixed(mpi: Mpi, syslogd: &Syslogd, library_first: bool) {
    let job = Job::new(program_for("basic.c", mpi), 4)
        .mpi(mpi)
        .timeout(HANG);
    ends_as_bare(&job, |job| job.mixed(&syslogd.site_config(), library_first));
}

/// `run` of `job` ends well and prints what the bare job prints.
fn ends_as_bare(job: &Job, run: impl FnOnce(&Job) -> Outcome) {
    let bare = job.bare();
    let outcome = run(job);
    outcome.assert_success();
    assert_same_output(&bare, &outcome);
}

for_each_mpi! {
    /// Under Open MPI the ranks learn it through PMIx, under MPICH through Hydra's PMI-1.
    fn mixed_jobs_end_and_the_lowest_rank_with_the_library_reports_alone(mpi) {
        let _serial = serial();
        for (library_first, lead) in [(true, 0u32), (false, 2)] {
            let syslogd = Syslogd::start();
            mixed(mpi, &syslogd, library_first);
            let record = syslogd.single_record();
            assert_eq!(record.ranks, 4);
            assert_eq!(
                record.partial.as_deref(),
                Some(format!("only 2 of 4 ranks have libmpistat (rank {lead} reports alone)").as_str())
            );
            // The lead's own counts (basic.c: 4 sends of 3 x 100 (r + 1) ints and one to
            // MPI_PROC_NULL), nothing summed over ranks.
            let send = routine(&record, "MPI_Send");
            assert_eq!(send.calls.sum, 4);
            assert_eq!(send.bytes.sum, 3 * 100 * (lead as u64 + 1) * 4);
            assert_eq!(send.bytes.max_rank, lead);
            assert_eq!(routine(&record, "MPI_Allreduce").calls.sum, 5);
        }
    }
}

for_each_mpi! {
    /// With no assumption in the site's configuration (under MPICH: learned over Hydra's PMI-1).
    fn jobs_with_the_library_everywhere_still_reduce_over_all_ranks(mpi) {
        let _serial = serial();
        let syslogd = Syslogd::start();
        Job::new(program_for("basic.c", mpi), 4)
            .mpi(mpi)
            .timeout(HANG)
            .profiled(&syslogd.site_config())
            .assert_success();
        let record = syslogd.single_record();
        assert_eq!(record.partial, None);
        assert_routines(&record, &basic_expectations(4));
    }
}

/// A job whose process manager cannot tell whether every rank has the library: it runs as
/// bare, and rank 0 reports alone, unless the site assumes all ranks profiled (then one full
/// record).
fn rank_0_reports_alone_unless_the_site_assumes_all_ranks(job: Job) {
    let syslogd = Syslogd::start();
    ends_as_bare(&job, |job| job.profiled(&syslogd.site_config()));
    let record = syslogd.single_record();
    assert_eq!(
        record.partial.as_deref(),
        Some("whether all 4 ranks have libmpistat is unknown (rank 0 reports alone)")
    );
    assert_eq!(routine(&record, "MPI_Send").calls.sum, 4);

    let syslogd = Syslogd::start();
    let site = syslogd.site_config();
    let mut text = std::fs::read_to_string(&site).expect("read site.toml");
    text.push_str("[profiler]\nassume_all_ranks_profiled = true\n");
    std::fs::write(&site, text).expect("write site.toml");
    job.profiled(&site).assert_success();
    let record = syslogd.single_record();
    assert_eq!(record.partial, None);
    assert_routines(&record, &basic_expectations(4));
}

#[test]
fn when_pmix_cannot_tell_rank_0_reports_alone_unless_the_site_assumes_all_ranks() {
    let _serial = serial();
    // Open MPI's fence in MPI_Init then collects no data ("direct modex"): a key missing after it
    // would not mean a rank without the library, so nobody can tell.
    rank_0_reports_alone_unless_the_site_assumes_all_ranks(
        Job::new(program("basic.c"), 4)
            .timeout(HANG)
            .env("OMPI_MCA_pmix_base_collect_data", "0"),
    );
}

/// Under MPICH, a launch that is not Hydra's PMI-1 as verified (here: a `PMI_PORT` beside
/// `PMI_FD`, as another process manager might set) leaves the PMI dialog to MPICH alone.
#[test]
fn without_hydra_mpich_jobs_run_as_before() {
    let _serial = serial();
    rank_0_reports_alone_unless_the_site_assumes_all_ranks(
        Job::new(program_for("basic.c", Mpi::Mpich), 4)
            .mpi(Mpi::Mpich)
            .timeout(HANG)
            .env("PMI_PORT", ""),
    );
}

for_each_mpi! {
    fn ranks_whose_site_configuration_disables_profiling_do_not_count_as_having_the_library(mpi) {
        let _serial = serial();
        let syslogd = Syslogd::start();
        let off = Scratch::new("profiling-off");
        let off_config = off.path().join("site.toml");
        let text = std::fs::read_to_string(syslogd.site_config()).expect("read site.toml");
        std::fs::write(&off_config, format!("{text}[profiler]\nenabled = false\n")).expect("write");
        let job = Job::new(program_for("basic.c", mpi), 4).mpi(mpi).timeout(HANG);
        ends_as_bare(&job, |job| job.profiled_halves(&syslogd.site_config(), &off_config));
        let record = syslogd.single_record();
        assert_eq!(
            record.partial.as_deref(),
            Some("only 2 of 4 ranks have libmpistat (rank 0 reports alone)")
        );
    }
}

#[test]
fn a_process_with_two_mpi_libraries_is_left_alone() {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let job = Job::new(program("two_mpis.c"), 2)
        .timeout(HANG)
        .env("MPISTAT_DETAIL", "stderr");
    let bare = job.bare();
    bare.assert_success();
    let profiled = job.profiled(&syslogd.site_config());
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    assert!(
        bare.stdout.contains("two_mpis rank 1 of 2, sum 1"),
        "{bare:?}"
    );
    syslogd.assert_no_records();
}
