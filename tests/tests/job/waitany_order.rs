//! A transparent profiler does not push a program's progress one way (issue 33 §4): MPICH's
//! `f77/pt2pt/irsendf` passed 10 of 10 runs bare and failed 10 of 10 preloaded under Open MPI,
//! because `MPI_Waitany` over an `MPI_Irecv(MPI_ANY_SOURCE)` and an `MPI_Irsend` completed the
//! receive first every time. The wrappers' work on a communicator's first send (placing its
//! bytes: group calls, code and data untouched for a while; 3-50 us) ran between the send's
//! start and the program's next call, long enough for the reply to arrive; now a nonblocking
//! send is measured before it starts and a communicator's members are looked up when it is made
//! (docs/counting.md). `waitany_order.c` and its Fortran twin do that pattern on the
//! communicators the test suite walks through; the profiled program must complete them in the
//! order the bare one does, over repeated runs.

use mpistat_e2e::*;

/// Runs of each, bare and profiled, taken in turns.
const RUNS: usize = 10;
/// The pattern's communicators: `MPI_COMM_WORLD`, a duplicate, a reversed split.
const COMMS: usize = 3;

/// For each communicator, in how many of `outcomes` the ready send completed first.
fn sends_first(outcomes: &[Outcome]) -> [usize; COMMS] {
    std::array::from_fn(|k| {
        let line = format!("waitany_order comm {k} first irsend");
        outcomes
            .iter()
            .filter(|o| o.stdout.lines().any(|l| l == line))
            .count()
    })
}

/// Run `program` bare and profiled [`RUNS`] times each, in turns, and compare the orders:
/// wherever the bare program completed the same request first in 8 or more runs of 10 (on a
/// quiet node: 10 of 10), the profiled one must have done so in more than half of its runs
/// (before the fix: in none, for the duplicate).
///
/// The jobs run under `SCHED_FIFO` ([`Job::realtime`]): the order is a race of a few
/// microseconds between the two ranks, which a busy machine decides instead (at load 10 on this
/// 2-core machine, 10 runs each of the C program: the ready send first in 0-6 bare runs and 2-7
/// profiled, per communicator, and two runs of the test in three failed; under `SCHED_FIFO` at load
/// 26, 10 of 10 for both). Real-time ranks see the quiet node whose order the test compares.
fn same_order_as_bare(program: std::path::PathBuf, mpi: Mpi) {
    let syslogd = Syslogd::start();
    // MPI's default busy polling, as a test suite runs: with `mpi_yield_when_idle`, the tests'
    // setting for this oversubscribed machine, the bare program itself takes either order.
    let job = Job::new(program, 2)
        .mpi(mpi)
        .mca("mpi_yield_when_idle", "0")
        .realtime();
    let (mut bare, mut profiled) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        bare.push(job.bare());
        profiled.push(job.profiled(&syslogd.site_config()));
    }
    for outcome in bare.iter().chain(&profiled) {
        outcome.assert_success();
        assert_every_rank_printed(outcome, 2, |r| format!("waitany_order rank {r} ok"));
    }
    let (bare, profiled) = (sends_first(&bare), sends_first(&profiled));
    for k in 0..COMMS {
        let (b, p) = (bare[k], profiled[k]);
        if b >= RUNS - 2 {
            assert!(
                p > RUNS / 2,
                "comm {k}: the send completed first in {b} of {RUNS} bare runs, {p} profiled"
            );
        } else if b <= 2 {
            assert!(
                p < RUNS / 2,
                "comm {k}: the receive completed first in {} of {RUNS} bare runs, {} profiled",
                RUNS - b,
                RUNS - p
            );
        }
    }
}

for_each_mpi! {
fn waitany_completes_in_the_bare_programs_order_in_c(mpi) {
    let _serial = serial();
    same_order_as_bare(program_for("waitany_order.c", mpi), mpi);
}
}

for_each_mpi! {
fn waitany_completes_in_the_bare_programs_order_in_fortran(mpi) {
    let _serial = serial();
    same_order_as_bare(program_for("waitany_order.f90", mpi), mpi);
}
}
