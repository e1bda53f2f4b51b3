//! `MPI_THREAD_MULTIPLE` with several threads per rank making MPI calls at the same time, and
//! `MPI_THREAD_SERIALIZED` with global collectives from two threads taking turns (Open MPI and
//! MPICH). Supersteps are kept with a lock at `MULTIPLE` and without one below it
//! (`profiler/src/superstep.rs`): either way each global collective ends one, whichever thread
//! made it.

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
        // 3 ints to each of the 2 ranks per call.
        Expected::uniform("MPI_Allreduce", RANKS, rounds, rounds * 2 * 3 * 4),
        // 5 ints sent and 5 received per call (the receive's bytes from the status, ignored by the program).
        Expected::uniform("MPI_Sendrecv", RANKS, rounds, rounds * 2 * 5 * 4),
    ];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);
    // Every Allreduce (on duplicates of MPI_COMM_WORLD, from four threads at once) ended one
    // superstep, plus the last one, which MPI_Finalize ends.
    assert_supersteps(&record, rounds + 1);
}
}

for_each_mpi! {
fn thread_serialized_collectives_of_a_second_thread_end_supersteps_once(mpi) {
    let _serial = serial();
    const RANKS: u32 = 2;
    const ROUNDS: u64 = 25; // as in serialized.c, three times: main thread, second, main
    let syslogd = Syslogd::start();
    let profiled = run_compared(
        &Job::new(program_for("serialized.c", mpi), RANKS).mpi(mpi),
        &syslogd,
    );
    assert_every_rank_printed(&profiled, RANKS, |rank| format!("serialized rank {rank} ok"));

    let record = syslogd.single_record();
    assert_eq!(record.thread_level, "serialized");
    let expected = [
        Expected::uniform("MPI_Comm_rank", RANKS, 1, 0),
        Expected::uniform("MPI_Comm_size", RANKS, 1, 0),
        // 2 ints to each of the 2 ranks per call.
        Expected::uniform("MPI_Allreduce", RANKS, 3 * ROUNDS, 3 * ROUNDS * 2 * 2 * 4),
    ];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);
    assert_supersteps(&record, 3 * ROUNDS + 1);
}
}

/// The record's imbalance estimates are there and counted `supersteps` supersteps, unmerged.
fn assert_supersteps(record: &mpistat_record::JobRecord, supersteps: u64) {
    let imbalance = record
        .imbalance
        .as_ref()
        .expect("record has imbalance estimates");
    assert_eq!(imbalance.unavailable, None);
    assert_eq!(imbalance.supersteps, supersteps);
    assert_eq!(imbalance.merge_factor, 1);
}
