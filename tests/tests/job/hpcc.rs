//! A real application: Debian's `hpcc` (HPC Challenge) with a tiny input, 4 ranks in a 2×2 grid.
//!
//! Open MPI only: Debian's `hpcc` is linked with Open MPI's `libmpi.so.40` and there is no MPICH
//! build of it (an interpreted application under MPICH: `applications.rs`, Python through
//! `ctypes`).

use mpistat_e2e::*;

#[test]
fn hpcc_record_lists_the_routines_it_uses() {
    let _serial = serial();
    let hpcc = ["/usr/bin/hpcc", "/usr/local/bin/hpcc"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("hpcc is not installed (apt-get install hpcc)");
    let syslogd = Syslogd::start();
    let work = Scratch::new("hpcc");
    std::fs::copy(
        programs_dir().join("hpccinf.txt"),
        work.path().join("hpccinf.txt"),
    )
    .expect("copy hpccinf.txt");
    let outcome = Job::new(hpcc, 4)
        .cwd(work.path())
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    let report = std::fs::read_to_string(work.path().join("hpccoutf.txt"))
        .expect("hpcc wrote no hpccoutf.txt");
    assert!(
        report.contains("End of HPC Challenge tests"),
        "hpcc did not finish:\n{report}"
    );
    assert!(
        report.contains("0 tests completed and failed residual checks"),
        "hpcc failed a check:\n{report}"
    );

    let record = syslogd.single_record();
    assert_eq!(record.ranks, 4);
    assert_eq!(record.partial, None);
    assert!(record.exe.ends_with("hpcc"), "exe {}", record.exe);
    // hpcc imports these from libmpi (nm -D) and every rank calls each of them on every run
    // (checked once with a counting PMPI shim): HPL's panel broadcasts and swaps, PTRANS,
    // RandomAccess, FFT, b_eff latency and bandwidth, the result reductions.
    for name in [
        "MPI_Send",
        "MPI_Recv",
        "MPI_Irecv",
        "MPI_Isend",
        "MPI_Wait",
        "MPI_Waitall",
        "MPI_Sendrecv",
        "MPI_Bcast",
        "MPI_Allreduce",
        "MPI_Reduce",
        "MPI_Alltoall",
        "MPI_Barrier",
        "MPI_Comm_split",
        "MPI_Comm_rank",
        "MPI_Comm_size",
    ] {
        let r = routine(&record, name);
        assert!(
            r.calls.min > 0,
            "{name} not counted on every rank: {:?}",
            r.calls
        );
    }
    let p2p_bytes: u64 = ["MPI_Send", "MPI_Isend", "MPI_Sendrecv"]
        .iter()
        .map(|n| routine(&record, n).bytes.sum)
        .sum();
    assert!(p2p_bytes > 0, "hpcc sent data but the record has no bytes");
    assert!(record.mpi_ns.sum > 0 && record.mpi_ns.sum <= record.wall_ns.sum);
}
