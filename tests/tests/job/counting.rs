//! Every byte counted, or the exception said (issue 33 §3, docs/counting.md): each case of
//! `counting.c` against figures computed by hand, under Open MPI and MPICH. A call's bytes are
//! what the rank sends (the blocks its send arguments name, over its destinations); a receive
//! counts what arrived, when it completes. The table's figures are the job's (summed over ranks).

use mpistat_e2e::*;
use mpistat_record::{Binding, JobRecord};

/// Run `counting CASE` on `ranks` ranks bare and profiled (same output, every rank's checks
/// passed); the record.
fn counted(case: &str, ranks: u32, mpi: Mpi) -> JobRecord {
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("counting.c", mpi), ranks)
        .mpi(mpi)
        .arg(case);
    let profiled = run_compared(&job, &syslogd);
    assert_every_rank_printed(&profiled, ranks, |r| format!("counting {case} rank {r} ok"));
    syslogd.single_record()
}

/// `values` on ranks 0, 1, ...
fn r<const N: usize>(values: [u64; N]) -> RankValues {
    RankValues(values.to_vec())
}

/// The routines every case calls besides its own.
const SET_UP: &[&str] = &["MPI_Comm_rank", "MPI_Comm_size"];

fn allowed() -> Vec<&'static str> {
    LIFECYCLE.iter().chain(SET_UP).copied().collect()
}

for_each_mpi! {
/// `MPI_Irecv` posted for 1000 ints, 10 arrive: 40 B (it counted the posted 4000 B), the
/// status ignored by the program (the wrapper's own told what arrived). Its count is the
/// posted count, as `MPI_Recv`'s.
fn a_nonblocking_receive_counts_what_arrived(mpi) {
    let _serial = serial();
    let record = counted("irecv", 2, mpi);
    let expected = [
        Expected::per_rank("MPI_Send", r([1, 0]), r([40, 0])),
        Expected::per_rank("MPI_Irecv", r([0, 1]), r([0, 40])),
        Expected::per_rank("MPI_Wait", r([0, 1]), r([0, 0])),
    ];
    assert_routines(&record, &expected);
    assert_eq!(routine(&record, "MPI_Irecv").count.sum, 1000);
    assert_eq!(routine(&record, "MPI_Send").count.sum, 10);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

for_each_mpi! {
/// Persistent requests, 5 x `MPI_Start` + `MPI_Wait`: 200 ints go each way 5 times, 4000 B
/// (0 B before): the send side at each start, under `MPI_Send_init`; the receive side, posted
/// for 300 ints, what arrived at each completion, under `MPI_Recv_init`.
fn persistent_requests_count_at_each_start_and_completion(mpi) {
    let _serial = serial();
    let record = counted("persistent", 2, mpi);
    let expected = [
        Expected::per_rank("MPI_Send_init", r([1, 0]), r([4000, 0])),
        Expected::per_rank("MPI_Recv_init", r([0, 1]), r([0, 4000])),
        Expected::uniform("MPI_Start", 2, 5, 0),
        Expected::uniform("MPI_Wait", 2, 5, 0),
        Expected::uniform("MPI_Request_free", 2, 1, 0),
        Expected::per_rank("MPI_Get_count", r([0, 5]), r([0, 0])),
    ];
    assert_routines(&record, &expected);
    assert_eq!(routine(&record, "MPI_Send_init").count.sum, 5 * 200);
    assert_eq!(routine(&record, "MPI_Recv_init").count.sum, 5 * 300);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

for_each_mpi! {
/// Every completing routine completes kept receives, with statuses ignored or given: rank 1
/// receives messages of 1..9 ints (45 ints, 180 B) posted for 100 each; a cancelled receive and
/// one freed before it completed count nothing.
fn every_completing_routine_counts_the_receives_it_completes(mpi) {
    let _serial = serial();
    let record = counted("completions", 2, mpi);
    let expected = [
        Expected::per_rank("MPI_Send", r([9, 0]), r([180, 0])),
        Expected::per_rank("MPI_Irecv", r([0, 11]), r([0, 180])),
    ];
    assert_routines(&record, &expected);
    // The 9 completed receives' posted counts (the cancelled one's and the freed one's: none).
    assert_eq!(routine(&record, "MPI_Irecv").count.sum, 9 * 100);
    // Each completing routine was called (the tests' loops as often as it took).
    for name in [
        "MPI_Test",
        "MPI_Testany",
        "MPI_Testall",
        "MPI_Waitany",
        "MPI_Waitall",
        "MPI_Waitsome",
        "MPI_Testsome",
        "MPI_Wait",
        "MPI_Cancel",
        "MPI_Request_free",
    ] {
        assert!(routine(&record, name).calls.sum >= 1, "{name}");
    }
}
}

for_each_mpi! {
/// Nonblocking receives on the steady paths (each the only one kept: `MPI_Irecv` keeps it in
/// front, `MPI_Wait`/`MPI_Test` count it without the table): 12 receives posted for 100 ints
/// each get 1, 2, 3, 4 ints in turn (30 ints, 120 B; the memo's key is the same, what arrived
/// differs), from two senders, some with `MPI_ANY_SOURCE`, statuses ignored or given; a test
/// before the message is sent completes nothing, a wait on `MPI_REQUEST_NULL` while one is kept
/// counts nothing of it.
fn receives_kept_in_front_count_what_arrived(mpi) {
    let _serial = serial();
    let record = counted("front", 3, mpi);
    // Rank 0 sends rounds 0-3 and 8-11 (1+2+3+4 ints twice), rank 2 rounds 4-7.
    let expected = [
        Expected::per_rank("MPI_Send", r([8, 0, 4]), r([80, 0, 40])),
        Expected::per_rank("MPI_Irecv", r([0, 12, 0]), r([0, 120, 0])),
        // 6 waits on receives, 4 on MPI_REQUEST_NULL (rounds 1, 4, 7, 10).
        Expected::per_rank("MPI_Wait", r([0, 10, 0]), r([0, 0, 0])),
        Expected::uniform("MPI_Barrier", 3, 12, 0),
    ];
    assert_routines(&record, &expected);
    assert_eq!(routine(&record, "MPI_Irecv").count.sum, 12 * 100);
    assert_eq!(routine(&record, "MPI_Send").count.sum, 30);
    // The odd rounds' tests: one before the message, then as many as it took.
    assert!(routine(&record, "MPI_Test").calls.sum >= 12);
    assert_eq!(routine(&record, "MPI_Test").bytes.sum, 0);
    let mut allowed = allowed();
    allowed.extend(["MPI_Test", "MPI_Get_count"]);
    assert_no_other_routines(&record, &expected, &allowed);
}
}

for_each_mpi! {
/// `MPI_Send` of 10 ints alternately to rank 1 and to `MPI_PROC_NULL`, 3 times each: 120 B
/// (what reached rank 1); a send to `MPI_PROC_NULL` sends nothing, though its count, datatype
/// and communicator are the memo's (only the peer differs: the steady path compares it).
fn a_send_to_another_peer_is_not_the_memos(mpi) {
    let _serial = serial();
    let record = counted("peers", 2, mpi);
    let expected = [
        Expected::per_rank("MPI_Send", r([6, 0]), r([120, 0])),
        Expected::per_rank("MPI_Recv", r([0, 3]), r([0, 120])),
    ];
    assert_routines(&record, &expected);
    assert_eq!(routine(&record, "MPI_Send").count.sum, 60);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

for_each_mpi! {
/// A receive posted while its routine's memo held its key (count, datatype, communicator), and
/// completed after another receive of the routine (a count of 50, not 100) rewrote that memo
/// with the same source and size: it counts its own count, 100, not the memo's 50 (the steady
/// wait's test of what the post found: `traffic::held`, cleared by `remember`). 3 receives of 10 ints.
fn a_receive_completed_after_its_memo_was_rewritten_counts_its_own(mpi) {
    let _serial = serial();
    let record = counted("rewritten", 2, mpi);
    let expected = [
        Expected::per_rank("MPI_Send", r([3, 0]), r([120, 0])),
        Expected::per_rank("MPI_Irecv", r([0, 3]), r([0, 120])),
        Expected::per_rank("MPI_Wait", r([0, 3]), r([0, 0])),
    ];
    assert_routines(&record, &expected);
    assert_eq!(routine(&record, "MPI_Irecv").count.sum, 250);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

for_each_mpi! {
/// A receive posted while its routine's memo held its key keeps nothing of it in front but its
/// request (`requests::stage_front`); completed by `MPI_Waitall` (the counting copy, which
/// reads the front entry: `Entry::settle`), it counts its own count, 50, not the 100 the front
/// entry kept from an earlier receive. 3 receives of 10 ints: 100 + 50 + 50 ints posted.
fn a_receive_held_at_its_post_counts_its_own_in_the_counting_copy(mpi) {
    let _serial = serial();
    let record = counted("taken", 2, mpi);
    let expected = [
        Expected::per_rank("MPI_Send", r([3, 0]), r([120, 0])),
        Expected::per_rank("MPI_Irecv", r([0, 3]), r([0, 120])),
        Expected::per_rank("MPI_Wait", r([0, 2]), r([0, 0])),
        Expected::per_rank("MPI_Waitall", r([0, 1]), r([0, 0])),
    ];
    assert_routines(&record, &expected);
    assert_eq!(routine(&record, "MPI_Irecv").count.sum, 200);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

for_each_mpi! {
/// `MPI_Alltoallw` on 2 ranks, each sending 1 int to rank 0 and 2 doubles to rank 1: 20 B a
/// rank, 40 B (0 B before).
fn alltoallw_counts_each_block_with_its_type(mpi) {
    let _serial = serial();
    let record = counted("alltoallw", 2, mpi);
    let expected = [Expected::uniform("MPI_Alltoallw", 2, 1, 4 + 2 * 8)];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

for_each_mpi! {
/// Neighbourhood collectives on a non-periodic 1-D Cartesian topology of 4 (the ends have one
/// neighbour, the other slot `MPI_PROC_NULL`): `MPI_Neighbor_allgatherv` of r+1 ints from rank
/// r to each neighbour, 4 + 2*8 + 2*12 + 16 = 60 B; `MPI_Neighbor_alltoallv` of 2 ints to each
/// neighbour, 8 + 16 + 16 + 8 = 48 B (0 B before).
fn neighbourhood_collectives_count_what_goes_to_each_neighbour(mpi) {
    let _serial = serial();
    let record = counted("neighbours", 4, mpi);
    let expected = [
        Expected::per_rank(
            "MPI_Neighbor_allgatherv",
            RankValues::uniform(4, 1),
            r([4, 2 * 8, 2 * 12, 16]),
        ),
        Expected::per_rank(
            "MPI_Neighbor_alltoallv",
            RankValues::uniform(4, 1),
            r([8, 16, 16, 8]),
        ),
    ];
    assert_routines(&record, &expected);
    let sum = |name| routine(&record, name).bytes.sum;
    assert_eq!(
        (sum("MPI_Neighbor_allgatherv"), sum("MPI_Neighbor_alltoallv")),
        (60, 48)
    );
}
}

for_each_mpi! {
/// One rule for every collective: the blocks a rank's send arguments name, summed over their
/// destinations (itself included; with `MPI_IN_PLACE` its own block stays). 4 ranks, doubles
/// (8 B), a rank r:
fn every_collective_counts_what_it_sends(mpi) {
    let _serial = serial();
    let record = counted("collectives", 4, mpi);
    let each = |name, bytes| Expected::uniform(name, 4, 1, bytes);
    let ranks = |name, bytes| Expected::per_rank(name, RankValues::uniform(4, 1), bytes);
    let expected = [
        // Root 1 sends 3 doubles to each of the 4.
        ranks("MPI_Bcast", r([0, 4 * 24, 0, 0])),
        // Every rank 2 doubles to root 0, the root's own block too.
        each("MPI_Reduce", 16),
        // In place: 5 doubles to each of the 3 others.
        each("MPI_Allreduce", 3 * 40),
        // 2 doubles to root 2.
        each("MPI_Gather", 16),
        // Root 3 sends 3 doubles to each of the 4.
        ranks("MPI_Scatter", r([0, 0, 0, 4 * 24])),
        // 1 double to each of the 4.
        each("MPI_Allgather", 4 * 8),
        // In place: its own r+1 doubles to each of the 3 others.
        ranks("MPI_Allgatherv", r([3 * 8, 3 * 16, 3 * 24, 3 * 32])),
        // 2 doubles to each of the 4 (an MPI_Alltoallv of 2 each would count the same).
        each("MPI_Alltoall", 4 * 16),
        // 1, 2, 3 and 4 doubles to ranks 0..3.
        each("MPI_Alltoallv", 10 * 8),
        // recvcounts 1, 2, 3, 4: rank i's block of i+1 doubles to rank i.
        each("MPI_Reduce_scatter", 10 * 8),
        // 2 doubles to each of the 4.
        each("MPI_Reduce_scatter_block", 4 * 16),
        // 1 double to itself and every higher rank.
        ranks("MPI_Scan", r([32, 24, 16, 8])),
        // 1 double to every higher rank.
        ranks("MPI_Exscan", r([24, 16, 8, 0])),
    ];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

for_each_mpi! {
/// A program written with the C++ bindings (`MPI::COMM_WORLD.Send`, ...) is recorded with
/// binding `C`: the bindings are a layer over the C routines, each C++ call one C call,
/// counted exactly under its C name (docs/counting.md).
fn cxx_bindings_are_counted_under_the_c_routines(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("cxx_bindings.cc", mpi), 2).mpi(mpi);
    let profiled = run_compared(&job, &syslogd);
    assert_every_rank_printed(&profiled, 2, |r| format!("cxx_bindings rank {r} ok"));
    let record = syslogd.single_record();
    assert_eq!(record.binding, Binding::C);
    let expected = [
        Expected::per_rank("MPI_Send", r([1, 0]), r([200, 0])),
        Expected::per_rank("MPI_Recv", r([0, 1]), r([0, 200])),
        Expected::per_rank("MPI_Get_count", r([0, 1]), r([0, 0])),
        // 3 ints to each of the 2 ranks.
        Expected::uniform("MPI_Allreduce", 2, 1, 2 * 12),
        Expected::uniform("MPI_Barrier", 2, 1, 0),
    ];
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, &allowed());
}
}

/// MPICH 4 only (Open MPI 4.1 has no sessions): a program that uses only MPI-4 sessions (no
/// `MPI_Init`) runs as it does bare and sends no record (docs/counting.md says why), nor
/// prints anything.
#[test]
fn a_sessions_only_program_sends_no_record() {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let job = Job::new(program_for("sessions.c", Mpi::Mpich), 3).mpi(Mpi::Mpich);
    let profiled = run_compared(&job, &syslogd);
    assert_every_rank_printed(&profiled, 3, |r| format!("sessions rank {r} of 3 ok"));
    assert!(!profiled.stderr.contains("mpistat"), "{}", profiled.stderr);
    // A job of the same launcher with MPI_Init afterwards: its record arrives, and is the only one.
    let after = Job::new(program_for("counting.c", Mpi::Mpich), 2)
        .mpi(Mpi::Mpich)
        .arg("irecv")
        .profiled(&syslogd.site_config());
    after.assert_success();
    let record = syslogd.single_record();
    assert!(record.exe.ends_with("counting.mpich"), "{}", record.exe);
}
