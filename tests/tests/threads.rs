//! `MPI_THREAD_MULTIPLE` with several threads per rank making MPI calls at the same time.

use mpistat_e2e::*;

#[test]
fn thread_multiple_calls_are_counted_exactly_from_every_thread() {
    let _serial = serial();
    const RANKS: u32 = 2;
    const THREADS: u64 = 4; // as in threads.c
    const ROUNDS: u64 = 25;
    let syslogd = Syslogd::start();
    let job = Job::new(program("threads.c"), RANKS);
    let bare = job.bare();
    bare.assert_success();
    let profiled = job.profiled(&syslogd.site_config());
    profiled.assert_success();
    assert_same_output(&bare, &profiled);
    for rank in 0..RANKS {
        let line = format!("threads rank {rank} ok");
        assert!(
            profiled.stdout.lines().any(|l| l == line),
            "missing {line:?} in:\n{}",
            profiled.stdout
        );
    }

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
