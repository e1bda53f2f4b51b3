//! `MPI_THREAD_MULTIPLE` with several threads per rank making MPI calls at the same time
//! (Open MPI and MPICH).

use mpistat_e2e::*;

for_each_mpi! {
fn thread_multiple_calls_are_counted_exactly_from_every_thread(mpi) {
    let _serial = serial();
    const RANKS: u32 = 2;
    const THREADS: u64 = 4; // as in threads.c
    const ROUNDS: u64 = 25;
    let syslogd = Syslogd::start();
    let profiled = run_compared(
        &Job::new(program_for("threads.c", mpi), RANKS).mpi(mpi),
        &syslogd,
    );
    assert_every_rank_printed(&profiled, RANKS, |rank| format!("threads rank {rank} ok"));

    let record = syslogd.single_record();
    assert_eq!(record.thread_level, "multiple");
    let rounds = THREADS * ROUNDS;
    let expected = [
        Expected::uniform("MPI_Comm_rank", RANKS, 1 + rounds, 0),
        Expected::uniform("MPI_Comm_size", RANKS, 1, 0),
        Expected::uniform("MPI_Comm_dup", RANKS, THREADS, 0),
        Expected::uniform("MPI_Comm_free", RANKS, THREADS, 0),
        Expected::uniform("MPI_Allreduce", RANKS, rounds, rounds * 3 * 4),
        // 5 ints sent and 5 received per call (the receive's bytes from the status, ignored by the program).
        Expected::uniform("MPI_Sendrecv", RANKS, rounds, rounds * 2 * 5 * 4),
    ];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);
}
}
