//! The deterministic C program: exact calls and bytes per routine, nothing printed by us; under
//! Open MPI and under MPICH.

use mpistat_e2e::*;
use mpistat_record::Binding;

for_each_mpi! {
    fn c_program_record_has_exact_calls_and_bytes(mpi) {
        let _serial = serial();
        check_basic_program(program_for("basic.c", mpi), Binding::C, mpi);
    }
}

for_each_mpi! {
    fn record_goes_to_the_configured_facility(mpi) {
        let _serial = serial();
        // This daemon writes only local2: a record sent with the default local5 would not show up.
        let syslogd = Syslogd::with_facility("local2");
        Job::new(program_for("basic.c", mpi), 2)
            .mpi(mpi)
            .profiled(&syslogd.site_config())
            .assert_success();
        let record = syslogd.single_record();
        assert_eq!(record.ranks, 2);
        assert_routines(&record, &basic_expectations(2));
    }
}

/// MPICH only (Open MPI 4 has no large-count routines): the `_c` routines count their
/// `MPI_Count` counts, the received bytes come from the status, and per-rank counts are read
/// as `MPI_Count`s.
#[test]
fn large_count_routines_are_counted_exactly_under_mpich() {
    let _serial = serial();
    const RANKS: u32 = 2;
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("large_count.c", Mpi::Mpich), RANKS).mpi(Mpi::Mpich);
    let profiled = run_compared(&job, &syslogd);
    assert_every_rank_printed(&profiled, RANKS, |r| format!("large_count rank {r} ok"));
    let record = syslogd.single_record();
    let r = |v: [u64; 2]| RankValues(v.to_vec());
    let expected = [
        Expected::per_rank("MPI_Send_c", r([1, 0]), r([100 * 8, 0])),
        // Posted 1000, 100 arrived.
        Expected::per_rank("MPI_Recv_c", r([0, 1]), r([0, 100 * 8])),
        Expected::per_rank("MPI_Get_count_c", r([0, 1]), r([0, 0])),
        // In place: 7 doubles to the other rank.
        Expected::uniform("MPI_Allreduce_c", RANKS, 1, (u64::from(RANKS) - 1) * 7 * 8),
        // 15 doubles to each rank.
        Expected::uniform("MPI_Alltoallv_c", RANKS, 1, u64::from(RANKS) * 15 * 8),
        Expected::uniform("MPI_Comm_rank", RANKS, 1, 0),
        Expected::uniform("MPI_Comm_size", RANKS, 1, 0),
    ];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);
}
