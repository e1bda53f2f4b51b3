//! A program with its own PMPI wrapper of `MPI_Barrier`: both layers work, nothing is doubled
//! (Open MPI and MPICH).

use mpistat_e2e::*;

for_each_mpi! {
fn users_pmpi_wrapper_still_runs_and_calls_are_not_doubled(mpi) {
    let _serial = serial();
    const RANKS: u32 = 4;
    const BARRIERS: u64 = 6; // as in pmpi_tool.c
    let syslogd = Syslogd::start();
    let profiled = run_compared(
        &Job::new(program_for("pmpi_tool.c", mpi), RANKS).mpi(mpi),
        &syslogd,
    );
    assert_every_rank_printed(&profiled, RANKS, |rank| {
        format!("rank {rank} user barrier wrapper count {BARRIERS}")
    });

    let record = syslogd.single_record();
    assert!(
        record.user_pmpi_tool,
        "the user's PMPI tool was not detected"
    );
    let expected = [
        Expected::uniform("MPI_Barrier", RANKS, BARRIERS, 0),
        Expected::uniform("MPI_Comm_rank", RANKS, 1, 0),
    ];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);
}
}
