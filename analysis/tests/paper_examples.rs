//! The worked examples of the papers, rebuilt as synthetic traces, with their exact numbers.

use mpistat_analysis::analysis::run_passes;
use mpistat_analysis::builder::{ExecutionBuilder, WORLD};
use mpistat_analysis::examples::{assert_close, callpath_id, topc_figure_2, topc_figure_3};
use mpistat_analysis::{analyze, Analysis};

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;

#[test]
fn figure_3_delay_costs_are_exact() {
    let analysis = analyze(&topc_figure_3().finish()).unwrap();
    let (f, g) = (callpath_id(&analysis, "f"), callpath_id(&analysis, "g"));
    let r3 = callpath_id(&analysis, "MPI_Recv (R3)");
    assert_close(analysis.cell(f, A).delay_short_term, 0.75);
    assert_close(analysis.cell(f, A).delay_long_term, 0.375);
    assert_close(analysis.cell(g, A).delay_short_term, 2.25);
    assert_close(analysis.cell(g, A).delay_long_term, 1.125);
    assert_close(analysis.cell(r3, B).delay_short_term, 0.5);
    assert_close(analysis.cell(r3, B).delay_long_term, 0.0);
    let totals = analysis.totals();
    assert_close(analysis.total_waiting, 5.0);
    assert_close(totals.delay_short_term + totals.delay_long_term, 5.0);
}

#[test]
fn figure_3_propagating_wait_state_in_r3_has_long_term_cost_1_5() {
    let passes = run_passes(&topc_figure_3().finish()).unwrap();
    assert_eq!(passes.forward.waits[B as usize].len(), 1);
    assert_eq!(passes.forward.waits[B as usize][0].wait, 3);
    assert_close(passes.delays.splits[B as usize][0].long_term_cost, 1.5);
    assert_close(passes.delays.splits[C as usize][0].long_term_cost, 0.0);
}

#[test]
fn figure_3_critical_path_runs_a_then_b_then_c() {
    let analysis = analyze(&topc_figure_3().finish()).unwrap();
    let path: Vec<(u32, u64, u64)> = analysis
        .critical_path
        .iter()
        .map(|s| (s.rank, s.start, s.end))
        .collect();
    assert_eq!(path, vec![(A, 0, 5), (B, 5, 7), (C, 7, 8)]);
    assert!(analysis.problems.is_empty(), "{:?}", analysis.problems);
}

#[test]
fn figure_2_classifies_wait_states() {
    let analysis = analyze(&topc_figure_2().finish()).unwrap();
    let (comp, r1, r2) = (
        callpath_id(&analysis, "comp"),
        callpath_id(&analysis, "MPI_Recv (R1)"),
        callpath_id(&analysis, "MPI_Recv (R2)"),
    );
    // B's wait in R1 is direct (caused by comp on A) and propagating (it delays C).
    let b = analysis.cell(r1, B);
    assert_close(b.total_waiting(), 2.0);
    assert_close(b.direct_waiting, 2.0);
    assert_close(b.indirect_waiting, 0.0);
    assert_close(b.propagating_waiting, 2.0);
    assert_close(b.terminal_waiting, 0.0);
    // C's wait in R2 is terminal; it is indirect (propagated from R1) and partly direct
    // (the communication time of R1 on B).
    let c = analysis.cell(r2, C);
    assert_close(c.total_waiting(), 3.0);
    assert_close(c.indirect_waiting, 2.0);
    assert_close(c.direct_waiting, 1.0);
    assert_close(c.terminal_waiting, 3.0);
    assert_close(c.propagating_waiting, 0.0);
    // comp on A: short-term costs = B's wait, long-term = C's indirect wait.
    assert_close(analysis.cell(comp, A).delay_short_term, 2.0);
    assert_close(analysis.cell(comp, A).delay_long_term, 2.0);
    assert_close(analysis.cell(r1, B).delay_short_term, 1.0);
    let totals = analysis.totals();
    assert_close(
        totals.delay_short_term + totals.delay_long_term,
        analysis.total_waiting,
    );
}

/// Böhme et al., "Scalable critical-path based performance analysis" (IPDPS 2012), Sec. IV-A: a
/// loop of work() and a barrier on 32 ranks.
#[derive(Clone, Copy, Debug)]
enum Scenario {
    Balanced,
    Static,
    Dynamic,
    Mixed,
}

const RANKS: u32 = 32;
const ITERATIONS: u32 = 64;
const WORK: u64 = 100;
const EXTRA: u64 = 25;

fn work_of(scenario: Scenario, rank: u32, iteration: u32) -> u64 {
    let plus = |r: u32| if rank == r { EXTRA as i64 } else { 0 };
    let delta = match scenario {
        Scenario::Balanced => 0,
        Scenario::Static => plus(0) - plus(1),
        Scenario::Dynamic => plus(iteration % RANKS) - plus((iteration + 1) % RANKS),
        Scenario::Mixed if iteration < ITERATIONS / 2 => plus(0) - plus(2),
        Scenario::Mixed => plus(1) - plus(2),
    };
    (WORK as i64 + delta) as u64
}

fn scenario(scenario: Scenario) -> Analysis {
    let mut b = ExecutionBuilder::new(RANKS);
    let work = b.region("work", "");
    let barrier = b.region("MPI_Barrier", "loop.c:12");
    for iteration in 0..ITERATIONS {
        for rank in 0..RANKS {
            b.compute(rank, work, work_of(scenario, rank, iteration));
        }
        b.collective(WORLD, barrier, None, 0);
    }
    analyze(&b.finish()).unwrap()
}

/// (critical-path imbalance, profile-based imbalance) of work(), in % of the average work.
fn work_imbalance(analysis: &Analysis) -> (f64, f64) {
    let work = analysis.callpath("work").unwrap();
    let profile = work.max_time - work.average_time;
    (
        100.0 * work.critical_imbalance / work.average_time,
        100.0 * profile / work.average_time,
    )
}

#[test]
fn section_4a_balanced_has_no_imbalance() {
    let (critical, profile) = work_imbalance(&scenario(Scenario::Balanced));
    assert_close(critical, 0.0);
    assert_close(profile, 0.0);
}

#[test]
fn section_4a_static_imbalance_is_found_by_both() {
    let (critical, profile) = work_imbalance(&scenario(Scenario::Static));
    assert_close(critical, 25.0);
    assert_close(profile, 25.0);
}

#[test]
fn section_4a_dynamic_imbalance_is_found_only_on_the_critical_path() {
    let (critical, profile) = work_imbalance(&scenario(Scenario::Dynamic));
    assert_close(critical, 25.0);
    assert_close(profile, 0.0);
}

#[test]
fn section_4a_mixed_imbalance_profile_sees_half() {
    let (critical, profile) = work_imbalance(&scenario(Scenario::Mixed));
    assert_close(critical, 25.0);
    assert_close(profile, 12.5);
}

#[test]
fn section_4a_runtime_grows_by_a_quarter_and_costs_match_waiting() {
    let balanced = scenario(Scenario::Balanced);
    for s in [Scenario::Static, Scenario::Dynamic, Scenario::Mixed] {
        let analysis = scenario(s);
        assert_close(analysis.wall() as f64, 1.25 * balanced.wall() as f64);
        let totals = analysis.totals();
        assert!(
            (totals.delay_short_term + totals.delay_long_term - analysis.total_waiting).abs()
                < 1e-6,
            "{s:?}"
        );
        // All waiting is blamed on work(), directly: barriers do not propagate here.
        let work = analysis.callpath("work").unwrap();
        assert_close(work.total.delay_short_term, analysis.total_waiting);
    }
}

/// The same paper, Sec. II-D, Fig. 2: an MPMD run with partitions running A (ranks 0, 1) and B (ranks
/// 2, 3); the critical path runs on rank 3. Waiting in partition A is inter-partition imbalance
/// cost of B; rank 2's underload in B is intra-partition cost.
#[test]
fn mpmd_imbalance_costs_split_into_intra_and_inter_partition() {
    let mut b = ExecutionBuilder::new(4);
    let (activity_a, activity_b) = (b.region("A", ""), b.region("B", ""));
    let barrier = b.region("MPI_Barrier", "end");
    b.set_partitions(vec![0, 0, 1, 1]);
    b.compute(0, activity_a, 4);
    b.compute(1, activity_a, 4);
    b.compute(2, activity_b, 6);
    b.compute(3, activity_b, 8);
    b.collective(WORLD, barrier, None, 0);
    let analysis = analyze(&b.finish()).unwrap();
    let b_total = analysis.callpath("B").unwrap().total;
    assert_close(b_total.critical, 8.0);
    assert_close(b_total.inter_partition_cost, 8.0);
    assert_close(b_total.intra_partition_cost, 2.0);
    assert_close(
        analysis
            .cell(callpath_id(&analysis, "B"), 0)
            .inter_partition_cost,
        4.0,
    );
    assert_close(
        analysis
            .cell(callpath_id(&analysis, "B"), 2)
            .intra_partition_cost,
        2.0,
    );
    assert_close(
        analysis.callpath("A").unwrap().total.inter_partition_cost,
        0.0,
    );
}
