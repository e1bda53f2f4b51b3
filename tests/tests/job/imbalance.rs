//! Imbalance estimates from supersteps, after Böhme et al., "Scalable critical-path based
//! performance analysis", Sec. IV-A: `imbalance.c` on 4 ranks, 100 iterations of sleep-based work
//! (10 ms on average per rank and iteration) and an `MPI_Allreduce`. In the imbalanced scenarios
//! one rank works 12.5 ms and the others 9.17 ms, so each iteration takes 25 % longer than balanced
//! (see the program's header).
//!
//! Two kinds of checks. (1) The estimates equal the figures computed from what the program
//! measured itself (its per-superstep gaps, [`MeasuredImbalance`]) within 1 % of the work: this is
//! the profiler's correctness, and it holds however much the machine disturbs the sleeps. (2) The
//! measured figures show the scenario: sleeps overshoot, and a woken rank may wait for a core on
//! this 2-core machine (MPICH's waiting ranks poll and yield, so with MPICH every sleep of this
//! oversubscribed job overshoots by about 1 ms, and the measured static imbalance is 19-23 %
//! instead of 25 %; under a load of 15 the critical path reached 34 % and the average work
//! 1.29 s). Quiet machine, Open MPI: balanced 0.7 %, imbalanced 24.3-24.7 % of work,
//! profile-based static 24.3 %, dynamic 0.03 %, mixed 8.2 %. So the scenario checks allow 8
//! points below and 15 above (0 expected: below 8 %, far from the 25 % of the imbalanced cases).
//! Under MPICH the percents say more about the machine's load than the scenario (16 % static
//! was measured in CI), so there the static scenario is checked by the overloaded rank's extra
//! work alone. No wall-clock thresholds.

use mpistat_e2e::supersteps::MeasuredImbalance;
use mpistat_e2e::*;
use mpistat_record::model::Imbalance;
use mpistat_record::JobRecord;

const RANKS: u32 = 4;
const ITERS: u64 = 100;
const WORK_MS: f64 = 10.0;

/// Run a scenario under `mpi`: the record, and the figures from what the program measured, which
/// the record's estimates have already been checked against.
fn run_with(scenario: &str, mpi: Mpi) -> (JobRecord, MeasuredImbalance) {
    let (record, measured) = run_configured(scenario, mpi, "", &[]);
    measured.assert_estimated_by(imbalance(&record), record.ranks);
    (record, measured)
}

/// Run a scenario under `mpi` with `extra` appended to the site configuration and `env` set in
/// every rank: the record and the figures from what the program measured, not compared yet.
fn run_configured(
    scenario: &str,
    mpi: Mpi,
    extra: &str,
    env: &[(&str, &str)],
) -> (JobRecord, MeasuredImbalance) {
    let syslogd = Syslogd::start();
    let gaps = Scratch::new("imbalance-gaps");
    let job = env.iter().fold(
        Job::new(program_for("imbalance.c", mpi), RANKS).mpi(mpi),
        |job, (name, value)| job.env(name, *value),
    );
    let outcome = job
        .env("IMBALANCE_GAPS_DIR", gaps.path().display().to_string())
        .arg(scenario)
        .arg(ITERS.to_string())
        .arg(WORK_MS.to_string())
        .profiled(&syslogd.site_config_with("site-imbalance.toml", extra));
    outcome.assert_success();
    assert_every_rank_printed(&outcome, RANKS, |r| format!("imbalance rank {r} done"));
    let record = syslogd.single_record();
    let measured = MeasuredImbalance::from_files(gaps.path(), RANKS);
    (record, measured)
}

fn imbalance(r: &JobRecord) -> &Imbalance {
    merged_imbalance(r, 1)
}

/// [`imbalance`] with supersteps merged `merge_factor` to a slot.
fn merged_imbalance(r: &JobRecord, merge_factor: u64) -> &Imbalance {
    let i = r
        .imbalance
        .as_ref()
        .expect("record has imbalance estimates");
    assert_eq!(i.unavailable, None);
    // One superstep per Allreduce, plus the last one (ended by MPI_Finalize).
    assert_eq!(i.supersteps, ITERS + 1);
    assert_eq!(i.merge_factor, merge_factor);
    i
}

/// The measured (critical-path, profile-based) imbalance in percent of the average work, which
/// is the sleeping: 100 iterations of 10 ms on average, plus overshoots.
fn percents(m: &MeasuredImbalance) -> (f64, f64) {
    assert!(
        (0.95e9..1.5e9).contains(&m.work_avg_ns),
        "average work {} ns, expected about 1 s",
        m.work_avg_ns
    );
    (m.percent(m.critical_path_ns), m.percent(m.profile_ns))
}

fn assert_near(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: {got:.2}, expected {want:.2} ± {tolerance}"
    );
}

/// `got` percent shows the scenario's `want` percent: at most 8 points less, at most 15 more (see
/// the tolerances above: a loaded machine only adds imbalance, most with MPICH).
fn assert_percent(what: &str, got: f64, want: f64) {
    assert!(
        got >= want - 8.0 && got <= want + 15.0,
        "{what}: {got:.2} %, expected {want:.2} % (-8/+15)"
    );
}

/// Whether the job's measured figures are expected to show the scenario's nominal pattern: under
/// Open MPI, whose waiting ranks park. MPICH's waiting ranks poll (and yield), which on this
/// oversubscribed machine delays the sleepers' wake-ups by a variable millisecond or more: a
/// balanced run then measures up to 25 % imbalance by itself (at load 15). The profiler's
/// estimates must still equal what the program measured ([`run_with`] checks that under both).
fn shows_the_nominal_pattern(mpi: Mpi) -> bool {
    mpi == Mpi::OpenMpi
}

for_each_mpi! {
fn balanced_has_no_imbalance(mpi) {
    let _serial = serial();
    let (r, m) = run_with("balanced", mpi);
    if !shows_the_nominal_pattern(mpi) {
        return;
    }
    let (iota, profile) = percents(&m);
    assert!(iota < 8.0, "critical-path imbalance {iota:.2} %");
    assert!(profile < 8.0, "profile-based imbalance {profile:.2} %");
    let i = imbalance(&r);
    assert!(i.load_balance(r.ranks) > 0.95);
}
}

for_each_mpi! {
fn static_imbalance_is_seen_by_both_estimates_and_its_waiting_time_matches(mpi) {
    let _serial = serial();
    let (r, m) = run_with("static", mpi);
    let (iota, profile) = percents(&m);
    if shows_the_nominal_pattern(mpi) {
        assert_percent("critical-path", iota, 25.0);
        assert_percent("profile-based", profile, 25.0);
    } else {
        // The percents shrink as the work grows (16 % measured at CI's load).
        m.assert_rank_1_overloaded(ITERS, WORK_MS);
    }
    let i = imbalance(&r);
    assert!(
        i.dynamic_share() < 0.5,
        "dynamic share {}",
        i.dynamic_share()
    );
    // POP load balance: avg/max useful time; the overloaded rank sleeps 1.25 s, the average 1 s.
    // Useful time also holds ~0.3 s of start-up outside MPI_Init on every rank, so it is above 0.8.
    assert!((0.75..0.95).contains(&i.load_balance(r.ranks)));
    let pe = i.parallel_efficiency(r.ranks, r.wall_ns.max);
    assert!(pe > 0.0 && pe <= i.load_balance(r.ranks));
    // The waiting time in MPI_Allreduce is what the program's gaps say: in every iteration the
    // other ranks wait for the slowest (nominally 3 x (12.5 - 9.1667) ms x 100 = 1 s; measured
    // with MPICH here up to 1.46 s, as its polling ranks delay the sleepers' wake-ups).
    let allreduce = routine(&r, "MPI_Allreduce");
    let sync_ns = allreduce.sync_ns.expect("MPI_Allreduce has sync_ns") as f64;
    assert_near(
        "MPI_Allreduce waiting ms",
        sync_ns * 1e-6,
        m.collective_wait_ns * 1e-6,
        0.01 * RANKS as f64 * m.work_avg_ns * 1e-6,
    );
    assert!(allreduce.sync_ns.unwrap() <= allreduce.time_ns.sum);
    // Routines that end no superstep have no waiting estimate.
    assert_eq!(routine(&r, "MPI_Comm_rank").sync_ns, None);
}
}

for_each_mpi! {
/// A buffer of 4 slots: the 101 supersteps are merged to 32 a slot, and once a slot holds more
/// than one, the rest that fit in it are batched (`superstep::Batch`). The count stays exact, and
/// the estimates still equal what the program measured: the overloaded rank is the slowest in
/// every superstep, so merging loses nothing of the critical path (under Open MPI; MPICH's
/// polling ranks can delay another rank's wake-up past it, see [`shows_the_nominal_pattern`]).
fn static_imbalance_survives_merging_and_batching(mpi) {
    let _serial = serial();
    let (r, m) = run_configured("static", mpi, "[profiler]\nsuperstep_buffer_bytes = 96\n", &[]);
    let i = merged_imbalance(&r, 32);
    // Merging never adds to the critical path, and leaves the figures made from totals alone.
    assert!(i.critical_path_ns as f64 <= m.critical_path_ns + 0.01 * m.work_avg_ns);
    if shows_the_nominal_pattern(mpi) {
        m.assert_estimated_by(i, r.ranks);
    } else {
        m.assert_totals_estimated_by(i, r.ranks);
    }
}
}

for_each_mpi! {
/// On the monotonic clock (`MPISTAT_CLOCK=monotonic`, as on a CPU without an invariant TSC) the
/// wrappers take their general copies, which read it (`crate::gates`): ticks are nanoseconds, and
/// the estimates equal what the program measured as on the TSC. A wrapper that read the TSC
/// there would give times two or three times too long (ticks taken for nanoseconds).
fn the_monotonic_clock_gives_the_same_estimates(mpi) {
    let _serial = serial();
    let (r, m) = run_configured("static", mpi, "", &[("MPISTAT_CLOCK", "monotonic")]);
    if shows_the_nominal_pattern(mpi) {
        m.assert_estimated_by(imbalance(&r), r.ranks);
    } else {
        m.assert_totals_estimated_by(imbalance(&r), r.ranks);
    }
    let allreduce = routine(&r, "MPI_Allreduce");
    assert_eq!(allreduce.calls.sum, u64::from(RANKS) * ITERS);
    assert!(allreduce.time_ns.sum <= u64::from(RANKS) * r.wall_ns.max);
}
}

for_each_mpi! {
fn dynamic_imbalance_is_missed_by_the_profile(mpi) {
    let _serial = serial();
    let (r, m) = run_with("dynamic", mpi);
    if !shows_the_nominal_pattern(mpi) {
        return;
    }
    let (iota, profile) = percents(&m);
    assert_percent("critical-path", iota, 25.0);
    assert!(profile < 8.0, "profile-based imbalance {profile:.2} %");
    assert!(imbalance(&r).dynamic_share() > 0.6);
}
}

for_each_mpi! {
fn mixed_imbalance_is_a_third_seen_by_the_profile(mpi) {
    let _serial = serial();
    let (_, m) = run_with("mixed", mpi);
    if !shows_the_nominal_pattern(mpi) {
        return;
    }
    let (iota, profile) = percents(&m);
    assert_percent("critical-path", iota, 25.0);
    // Rank 0 works 1.25 W in one half and 0.917 W in the other: (1.25 + 0.9167) / 2 - 1 = 8.3 %.
    assert_percent("profile-based", profile, 100.0 / 12.0);
}
}

for_each_mpi! {
/// Two MPMD partitions (`-np 2 imbalance mpmd .. 1.0 : -np 2 imbalance mpmd .. 1.5`, the same
/// `:` syntax for both launchers): the estimates equal what the program measured under both
/// MPIs, partition and inter-partition figures add up; the nominal pattern under Open MPI only
/// ([`shows_the_nominal_pattern`]).
fn mpmd_partitions_and_inter_partition_imbalance(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let gaps = Scratch::new("imbalance-gaps");
    let (iters, work) = (ITERS.to_string(), WORK_MS.to_string());
    let outcome = Job::new(program_for("imbalance.c", mpi), 2)
        .mpi(mpi)
        .env("IMBALANCE_GAPS_DIR", gaps.path().display().to_string())
        .arg("mpmd")
        .arg(&iters)
        .arg(&work)
        .arg("1.0")
        .then(2, &["mpmd", &iters, &work, "1.5"])
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    assert_every_rank_printed(&outcome, RANKS, |r| format!("imbalance rank {r} done"));
    let r = syslogd.single_record();
    assert_eq!(r.ranks, 4);
    let i = imbalance(&r);
    let measured = MeasuredImbalance::from_files(gaps.path(), RANKS);
    measured.assert_estimated_by(i, r.ranks);
    assert_eq!(i.partitions.len(), 2);
    for (appnum, p) in i.partitions.iter().enumerate() {
        assert_eq!(p.appnum, appnum as u32);
        assert_eq!(p.ranks, 2);
        // The partition's own figures are what its ranks measured, within 1 % of the job's work.
        let first = 2 * appnum as u32;
        let own = MeasuredImbalance::from_files_of(gaps.path(), first..first + 2);
        let tolerance = 0.01 * measured.work_avg_ns;
        let (work, path) = (p.work_sum_ns as f64 / 2.0, p.critical_path_ns as f64);
        assert!(
            (work - own.work_avg_ns).abs() <= tolerance
                && (path - own.critical_path_ns).abs() <= tolerance,
            "partition {appnum}: {p:?}, measured {own:?}"
        );
    }
    // iota = inter-partition part + the partitions' own parts weighted by their share of ranks.
    let intra: u64 = i.partitions.iter().map(|p| p.critical_path_ns / 2).sum();
    assert!(i.critical_path_ns.abs_diff(i.inter_partition_ns + intra) < 1_000);
    if !shows_the_nominal_pattern(mpi) {
        return;
    }
    // Partition 0 sleeps 10 ms, partition 1 15 ms per iteration: within each no imbalance, between
    // them each iteration loses 15 - avg(10, 10, 15, 15) = 2.5 ms: 0.25 s in all, 20 % of the
    // average work of 1.25 s. Same tolerances as above, in percent of the average work.
    let work_avg = i.work_avg_ns(r.ranks);
    let pct = |ns: u64| 100.0 * ns as f64 / work_avg;
    for (appnum, p) in i.partitions.iter().enumerate() {
        assert!(pct(p.critical_path_ns) < 8.0, "partition {appnum}: {p:?}");
    }
    assert_percent("inter-partition", pct(i.inter_partition_ns), 20.0);
    assert_percent("critical path", pct(i.critical_path_ns), 20.0);
    let work = |j: usize| i.partitions[j].work_sum_ns as f64 / 2.0 * 1e-9;
    assert_near("partition 0 work s", work(0), 1.0, 0.15);
    assert_near("partition 1 work s", work(1), 1.5, 0.15);
}
}

for_each_mpi! {
/// Only collectives on communicators that span `MPI_COMM_WORLD` end supersteps, also when a
/// communicator that does not takes over the handle of a freed one that did (the profiler keeps
/// each thread's last answer per handle only until a communicator is freed).
fn supersteps_on_other_communicators(mpi) {
    let _serial = serial();
    let syslogd = Syslogd::start();
    let outcome = Job::new(program_for("superstep_comms.c", mpi), 2)
        .mpi(mpi)
        .profiled(&syslogd.site_config());
    outcome.assert_success();
    assert_every_rank_printed(&outcome, 2, |r| format!("superstep_comms rank {r} done"));
    let i = syslogd
        .single_record()
        .imbalance
        .expect("record has imbalance estimates");
    assert_eq!(i.unavailable, None);
    // 3 Allreduce on the duplicate, 2 Barrier on the second one, the last superstep.
    assert_eq!(i.supersteps, 6, "{}", outcome.stdout);
}
}
