//! Edge inputs pass through the wrappers unchanged: `MPI_IN_PLACE`, `MPI_BOTTOM`, ignored
//! statuses, null requests, `MPI_PROC_NULL`, derived datatypes, zero counts, an
//! intercommunicator, and errors returned under `MPI_ERRORS_RETURN`. `edge.c` prints every result,
//! status field and error class; the profiled run must print exactly what the bare run prints.

use mpistat_e2e::*;

for_each_mpi! {
fn edge_inputs_give_the_same_results_with_and_without_the_profiler(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("edge.c", mpi), 4).mpi(mpi);
    let bare = job.bare();
    bare.assert_success();
    // The program really exercised what it claims (a sample of its lines, from the bare run).
    // A receive from MPI_PROC_NULL has that source: -2 in Open MPI's mpi.h, -1 in MPICH's.
    let proc_null = match mpi {
        Mpi::OpenMpi => -2,
        Mpi::Mpich => -1,
    };
    let recv_proc_null = format!("r0 recv_proc_null status source {proc_null} tag -1 count 0");
    for line in [
        "r0 allreduce_in_place 6 12 12",
        "r1 allgather_in_place 0 1 10 11 20 21 30 31",
        "r1 bottom_recv 43 3.50",
        &recv_proc_null,
        "r2 struct_data 7 0.25 8 1.25",
        "r3 inter_bcast 123 456",
        "r1 inter_allreduce 4",
        "r2 send_negative_count error set class 2",
        "r0 allreduce_good error none class 0",
        "r3 done 1",
    ] {
        assert!(
            bare.stdout.lines().any(|l| l == line),
            "bare run lacks {line:?}:\n{}",
            bare.stdout
        );
    }
    // A call on the steady path that fails (MPI_OP_NULL) returns its error.
    assert!(
        bare.stdout.lines().any(|l| l.starts_with("r1 allreduce_null_op error set")),
        "bare run's MPI_OP_NULL did not fail:\n{}",
        bare.stdout
    );
    let profiled = job.profiled(&syslogd.site_config());
    profiled.assert_success();
    assert_same_output(&bare, &profiled);

    // Calls that failed or moved nothing are still calls; failed calls move no bytes.
    let record = syslogd.single_record();
    assert_eq!(record.partial, None);
    let r = |v: [u64; 4]| RankValues(v.to_vec());
    let expected = [
        // MPI_BOTTOM struct (12 bytes) to rank 1; vector, indexed (6 ints each) and 2 structs to
        // rank 2; 0 ints to rank 3; to MPI_PROC_NULL; two failing sends on every rank.
        Expected::per_rank("MPI_Send", r([8, 3, 3, 3]), r([12 + 24 + 24 + 24, 0, 0, 0])),
        Expected::per_rank("MPI_Recv", r([1, 2, 4, 2]), r([0, 12, 24 + 24 + 24, 0])),
        // What each rank sends (docs/counting.md): in place (3 ints to the 3 others), zero
        // count, intercommunicator (1 int to each of the remote group's 2), failing (null
        // datatype), two good calls (1 int to all 4, not in place) and one failing on the steady
        // path (MPI_OP_NULL): its time counted, no bytes; steady_counts' 18: 2, 3 and 2 ints
        // three times each, to all 4 and in place (to the 3 others).
        Expected::uniform(
            "MPI_Allreduce",
            4,
            7 + 18,
            3 * 12 + 2 * 4 + 2 * 4 * 4 + 21 * 4 * 4 + 21 * 4 * 3,
        ),
        // Only a root sends: MPI_BOTTOM struct (12 bytes) from rank 0 to all 4; zero count;
        // intercommunicator (2 ints from rank 0, MPI_ROOT, to the remote group's 2; rank 2
        // passes MPI_PROC_NULL, ranks 1 and 3 receive); failing (invalid root).
        Expected::per_rank("MPI_Bcast", r([4, 4, 4, 4]), r([4 * 12 + 2 * 8, 0, 0, 0])),
        // Received: 1 int from the left neighbour (statuses ignored by the program), nothing
        // from MPI_PROC_NULL.
        Expected::uniform("MPI_Irecv", 4, 2, 4),
        // In place, 2 ints to each of the 3 others (its garbage send count never read).
        Expected::uniform("MPI_Allgather", 4, 1, 3 * 8),
        Expected::uniform("MPI_Sendrecv", 4, 1, 0),
        Expected::uniform("MPI_Intercomm_create", 4, 1, 0),
    ];
    assert_routines(&record, &expected);
}
}

for_each_mpi! {
fn a_freed_datatype_handle_reused_for_another_type_counts_the_new_size(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for("type_reuse.c", mpi), 2)
        .mpi(mpi)
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    // Otherwise this test would not exercise the cache's invalidation.
    assert!(
        !outcome.stdout.contains("reused 0"),
        "no handle was reused: {outcome:?}"
    );
    let record = syslogd.single_record();
    let ints: u64 = (1..=8).sum();
    let r = |v: [u64; 2]| RankValues(v.to_vec());
    assert_routines(
        &record,
        &[
            Expected::per_rank("MPI_Send", r([8, 0]), r([4 * ints, 0])),
            Expected::per_rank("MPI_Recv", r([0, 8]), r([0, 4 * ints])),
            // Each type's ints to both ranks: a reused handle's collective is measured anew,
            // not taken as its memo's (the steady path's test compares no generation).
            Expected::uniform("MPI_Allreduce", 2, 8, 2 * 4 * ints),
            Expected::uniform("MPI_Allgather", 2, 8, 2 * 4 * ints),
        ],
    );
}
}
