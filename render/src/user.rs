//! What a user is told of their jobs, in their weekly mail and on their admin page, computed from
//! the rollups of the interval (crate `mpistat-figures`): the level-1 lines with the site's
//! reference values (including the counter rates and the imbalance figures), recommendations,
//! the level-2 routine table (Fig. 4 of Rabenseifner's "Automatic MPI Counter Profiling") with
//! latency/transfer/synchronisation estimates, the counters of the application vs MPI, and the
//! top jobs. The mail's text and HTML and the pages only lay this out.

use mpistat_figures::period::Period;
use mpistat_figures::sums::{
    percent, RoutineRow, Totals, UserWeek, CACHE_MISSES, FP_OPS, INSTRUCTIONS, NS_PER_HOUR,
};
use mpistat_figures::sums::{CounterRow, TopJob};
use mpistat_figures::traced::TracedJob;
use mpistat_record::units::rate;
use mpistat_site::{DigestConfig, SiteConfig};
use mpistat_store::ReadStore;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One level-1 figure of a user, with the site's reference values for the week.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: &'static str,
    pub value: String,
    /// `min / median / max` over all users of the week.
    pub reference: String,
    pub critical: bool,
}

/// What the mail says of Slurm facts: the job's environment gave them, nothing verified them.
pub const SLURM_CLAIMED: &str =
    "Slurm job ids, names and allocations are as the jobs' environment claimed them, not verified.";

/// Everything one user's mail says.
#[derive(Debug, Clone, PartialEq)]
pub struct UserDigest {
    pub user: String,
    pub week: String,
    pub jobs: usize,
    pub figures: Vec<Figure>,
    /// What the level-1 figures mean and where they come from, one sentence each.
    pub notes: Vec<String>,
    pub recommendations: Vec<String>,
    pub routines: Vec<RoutineRow>,
    /// How the counters were read, and the level-2 counter table (empty: none chosen).
    pub counters_mode: String,
    pub counters: Vec<CounterRow>,
    pub top_jobs: Vec<TopJob>,
    /// The user's MPI share of wall time (percent), and every user's of the week: one list
    /// shared by every user's digest (a copy each was quadratic in the users: 800 MB for 10,000).
    pub mpi_percent: f64,
    pub site_mpi_percents: Arc<[f64]>,
    /// Level 6: the user's traced jobs of the week and what their traces' analyses found.
    pub traced: Vec<TracedJob>,
}

/// `min / median / max` of `values`, formatted by `show` (`-` when no user has a value).
fn reference(mut values: Vec<f64>, show: impl Fn(f64) -> String) -> String {
    values.sort_by(f64::total_cmp);
    let Some(&max) = values.last() else {
        return "-".to_string();
    };
    let mid = values.len() / 2;
    let median = if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    };
    format!("{} / {} / {}", show(values[0]), show(median), show(max))
}

/// A week's mails (or an interval's figures), from each user's sums over it ([`UserWeek`], added
/// up from the rollups): a week may hold millions of jobs.
pub struct Week<'c> {
    config: &'c DigestConfig,
    /// Length of the interval: the machine's capacity in it is `capacity_cores` × `hours`.
    hours: f64,
    users: BTreeMap<String, UserWeek>,
}

impl<'c> Week<'c> {
    /// An interval of `hours` hours whose users' sums are made (from the rollups).
    pub fn of_users(
        config: &'c DigestConfig,
        hours: f64,
        users: BTreeMap<String, UserWeek>,
    ) -> Week<'c> {
        Week {
            config,
            hours,
            users,
        }
    }

    /// The mail of every user with jobs, by user name (`week` names the interval).
    pub fn digests(&self, week: &str) -> Vec<UserDigest> {
        digests(&self.users, week, self.hours, self.config, None)
    }
}

/// The mails' figures of the users of `period` against each other (see
/// [`Week::digests`]), from the rollups: every user's when `only` is
/// `None`, else only that user's (whose routines alone are read).
pub fn user_digests(
    db: &ReadStore,
    period: &Period,
    config: &SiteConfig,
    only: Option<&str>,
) -> Result<Vec<UserDigest>, crate::Error> {
    let users = mpistat_figures::rollup::users_of_period(db, period.from_ms, period.to_ms)?;
    user_digests_among(db, period, config, users, only)
}

/// [`user_digests`] of the period's users' totals already read
/// ([`mpistat_figures::rollup::users_of_period`]: a user's page has them, and reading 10,000
/// users' totals twice was half its time).
pub fn user_digests_among(
    db: &ReadStore,
    period: &Period,
    config: &SiteConfig,
    users: BTreeMap<String, Totals>,
    only: Option<&str>,
) -> Result<Vec<UserDigest>, crate::Error> {
    let mut weeks: BTreeMap<String, UserWeek> = BTreeMap::new();
    for (user, totals) in users {
        let week = match only {
            Some(only) if only != user => UserWeek::of_totals(totals),
            _ => mpistat_figures::rollup::user_of_period(db, &user, period.from_ms, period.to_ms)?
                .unwrap_or_else(|| UserWeek::of_totals(totals)),
        };
        weeks.insert(user, week);
    }
    Ok(digests(
        &weeks,
        &period.label,
        period.hours(),
        &config.digest,
        only,
    ))
}

/// The digests of `users` (only `only`'s when given: every user's figures are the references,
/// but building 10,000 digests to keep one was most of a user's page).
fn digests(
    users: &BTreeMap<String, UserWeek>,
    week: &str,
    hours: f64,
    config: &DigestConfig,
    only: Option<&str>,
) -> Vec<UserDigest> {
    let totals: BTreeMap<&str, &Totals> = users
        .iter()
        .map(|(user, u)| (user.as_str(), &u.totals))
        .collect();
    let capacity_hours = config.capacity_cores as f64 * hours;
    let site_mpi_percents: Arc<[f64]> = totals.values().map(|t| t.mpi_percent()).collect();
    let site = |f: &dyn Fn(&Totals) -> f64| totals.values().map(|t| f(t)).collect::<Vec<f64>>();
    let site_some =
        |f: &dyn Fn(&Totals) -> Option<f64>| totals.values().filter_map(|t| f(t)).collect();
    let share = |t: &Totals| percent(t.cpu_hours(), capacity_hours);
    let show_percent = |v: f64| format!("{v:.1} %");
    let references = [
        reference(site(&|t| t.jobs as f64), |v| format!("{v:.0}")),
        reference(site(&|t| t.cpu_hours()), |v| format!("{v:.1}")),
        reference(site(&share), |v| format!("{v:.3} %")),
        reference(site(&|t| t.mpi_percent()), show_percent),
        reference(site(&|t| t.load_balance()), |v| format!("{v:.2}")),
        reference(site_some(&|t| t.rate(INSTRUCTIONS)), rate),
        reference(site_some(&|t| t.rate(FP_OPS)), rate),
        reference(site_some(&|t| t.rate(CACHE_MISSES)), rate),
        reference(site_some(&Totals::imbalance_percent), show_percent),
    ];
    users
        .iter()
        .filter(|(user, _)| only.is_none_or(|only| only == user.as_str()))
        .map(|(user, u)| {
            let t = &u.totals;
            let flags = Flags {
                mpi: t.mpi_percent() >= config.critical_mpi_percent,
                balance: t.load_balance() < config.critical_load_balance,
                imbalance: t
                    .imbalance_percent()
                    .is_some_and(|p| p >= config.critical_imbalance_percent),
                instructions: t
                    .rate(INSTRUCTIONS)
                    .is_some_and(|r| r < config.critical_instructions_per_s),
                cache_misses: t
                    .rate(CACHE_MISSES)
                    .is_some_and(|r| r >= config.critical_cache_misses_per_s),
            };
            let ranks = if t.ranks_min == t.ranks_max {
                format!("{}", t.ranks_max)
            } else {
                format!("{}-{}", t.ranks_min, t.ranks_max)
            };
            let unavailable = "unavailable".to_string();
            let counter_figure = |name, event, reference: &str, critical| {
                let value = t.rate(event).map_or(unavailable.clone(), rate);
                figure(name, value, reference, critical)
            };
            let mut figures = vec![
                figure(
                    "jobs",
                    format!("{} ({ranks} ranks)", t.jobs),
                    &references[0],
                    false,
                ),
                figure(
                    "CPU hours",
                    format!("{:.1}", t.cpu_hours()),
                    &references[1],
                    false,
                ),
                figure(
                    "machine share",
                    format!("{:.3} %", share(t)),
                    &references[2],
                    false,
                ),
                figure(
                    "MPI time",
                    format!("{:.1} %", t.mpi_percent()),
                    &references[3],
                    flags.mpi,
                ),
                counter_figure(
                    "instruction rate",
                    INSTRUCTIONS,
                    &references[5],
                    flags.instructions,
                ),
                counter_figure("FP rate", FP_OPS, &references[6], false),
                counter_figure(
                    "cache-miss rate",
                    CACHE_MISSES,
                    &references[7],
                    flags.cache_misses,
                ),
            ];
            if let Some(imbalance) = t.imbalance_percent() {
                figures.push(figure(
                    "imbalance",
                    format!("{imbalance:.1} %"),
                    &references[8],
                    flags.imbalance,
                ));
            }
            figures.push(figure(
                "load balance",
                format!("{:.2}", t.load_balance()),
                &references[4],
                flags.balance,
            ));
            let routines = u.routines.rows(config);
            let worth = Worth {
                cpu_ns: t.wall_ns as f64,
                min_percent: config.recommend_min_percent,
                min_ns: config.recommend_min_cpu_hours * NS_PER_HOUR,
            };
            let recommendations = recommendations(t, &routines, &flags, &worth);
            UserDigest {
                user: user.to_string(),
                week: week.to_string(),
                jobs: t.jobs,
                figures,
                notes: notes(t),
                recommendations,
                routines,
                counters_mode: t.counters_mode.clone(),
                counters: t.counter_rows(),
                top_jobs: u.top_jobs().cloned().collect(),
                mpi_percent: t.mpi_percent(),
                site_mpi_percents: Arc::clone(&site_mpi_percents),
                traced: Vec::new(),
            }
        })
        .collect()
}

fn figure(name: &'static str, value: String, reference: &str, critical: bool) -> Figure {
    Figure {
        name,
        value,
        reference: reference.to_string(),
        critical,
    }
}

/// Which level-1 values are critical.
struct Flags {
    mpi: bool,
    balance: bool,
    imbalance: bool,
    instructions: bool,
    cache_misses: bool,
}

/// What the level-1 figures mean, only for those the user has, and why counters are missing.
fn notes(t: &Totals) -> Vec<String> {
    let mut notes = Vec::new();
    let rates = [INSTRUCTIONS, FP_OPS, CACHE_MISSES];
    if rates.iter().any(|name| t.rate(name).is_some()) {
        notes.push("Rates are per rank and second of computing time outside MPI.".to_string());
    }
    let missing: Vec<&str> = rates
        .into_iter()
        .filter(|name| t.rate(name).is_none())
        .collect();
    if t.counters.is_empty() {
        notes.push("No hardware counters ran in your jobs.".to_string());
    } else if let Some(reason) = missing
        .iter()
        .find_map(|name| t.counters.get(*name)?.unavailable.as_deref())
    {
        notes.push(format!("Unavailable counters: {reason}."));
    }
    if t.imbalance_percent().is_some() {
        notes.push(
            "Imbalance: time the slowest rank adds between global collectives (critical path), \
             share of wall time."
                .to_string(),
        );
    }
    if let Some(share) = t.node_bytes.on_node_share() {
        notes.push(format!(
            "{:.0} % of the bytes your jobs on several nodes moved stayed on a node (the rest \
             crossed the network).",
            100.0 * share
        ));
    }
    if t.balance_estimated > 0 {
        notes.push(format!(
            "Load balance of {} of your {} jobs is estimated from per-rank MPI times.",
            t.balance_estimated, t.jobs
        ));
    }
    notes
}

/// What is worth a user's time: a recommendation about `ns` rank-nanoseconds is made only when
/// they are at least `min_percent` of the user's CPU time and at least `min_ns`
/// (`[digest] recommend_min_percent`, `recommend_min_cpu_hours`).
struct Worth {
    cpu_ns: f64,
    min_percent: f64,
    min_ns: f64,
}

impl Worth {
    fn of(&self, ns: f64) -> bool {
        ns >= self.min_ns && percent(ns, self.cpu_ns) >= self.min_percent && ns > 0.0
    }
}

/// At most three plain-language suggestions from the numbers, each about time worth the user's
/// while ([`Worth`]); none rather than a trivial one.
fn recommendations(
    t: &Totals,
    routines: &[RoutineRow],
    flags: &Flags,
    worth: &Worth,
) -> Vec<String> {
    let mut said = Vec::new();
    // Idle allocated cores cost more than anything below: said first.
    if let (Some(used), Some((_, job, ranks, cpus))) = (t.allocation_used_percent(), &t.least_used)
    {
        if used < 50.0 && worth.of(t.allocated_cpu_ns - t.allocated_rank_ns) {
            said.push(format!(
                "Your Slurm jobs ran ranks on only {used:.0} % of the CPUs allocated to them, as \
                 their environment claimed the allocation (job {job}: {ranks} ranks on {cpus} \
                 CPUs): ask for fewer nodes or CPUs, or run more ranks per node, unless your \
                 ranks run threads on the others."
            ));
        }
    }
    // Start-up and shutdown are not something to send fewer messages in.
    let communicating = |r: &&RoutineRow| {
        !matches!(
            r.name.as_str(),
            "MPI_Init" | "MPI_Init_thread" | "MPI_Finalize"
        )
    };
    if let Some(top) = routines
        .iter()
        .find(communicating)
        .filter(|r| flags.mpi && worth.of(r.time_ns as f64))
    {
        let waiting = top.sync_ns.unwrap_or(0.0) / top.time_ns.max(1) as f64;
        said.push(if waiting > 0.5 {
            format!(
                "{:.0} % of your MPI time is spent in {}, mostly waiting: the work before it is \
                 unbalanced across ranks.",
                100.0 * top.share,
                top.name
            )
        } else {
            format!(
                "{:.0} % of your MPI time is spent in {}: send fewer, larger messages or overlap \
                 communication with computation.",
                100.0 * top.share,
                top.name
            )
        });
    }
    let imbalance = t
        .imbalance_percent()
        .filter(|p| flags.imbalance && worth.of(p / 100.0 * t.wall_ns as f64));
    if let Some(imbalance) = imbalance {
        said.push(format!(
            "{imbalance:.0} % of your run time is imbalance on the critical path: in each step \
             between global collectives the slowest rank makes all others wait; give the ranks \
             equal work per step."
        ));
    } else if flags.balance && worth.of((1.0 - t.load_balance()) * t.wall_ns as f64) {
        said.push(format!(
            "Your busiest ranks compute about {:.0} % longer than the average rank: distribute \
             the work more evenly.",
            100.0 * (1.0 / t.load_balance().max(0.01) - 1.0)
        ));
    }
    let computing = worth.of(t.wall_ns.saturating_sub(t.mpi_ns) as f64);
    if let Some(misses) = t
        .rate(CACHE_MISSES)
        .filter(|_| flags.cache_misses && computing)
    {
        said.push(format!(
            "Your computation misses the last-level cache {} per rank: reorder loops or block \
             the data so that what is in cache is reused.",
            rate(misses).replace("/s", " times a second")
        ));
    } else if let Some(instructions) = t
        .rate(INSTRUCTIONS)
        .filter(|_| flags.instructions && computing)
    {
        said.push(format!(
            "Your computation runs only {} instructions per rank: check compiler optimisation \
             and vectorisation.",
            rate(instructions)
        ));
    }
    let latency: f64 = routines.iter().filter_map(|r| r.latency_ns).sum();
    if latency > 0.2 * t.mpi_ns as f64 && worth.of(latency) {
        said.push(format!(
            "About {:.0} % of your MPI time is message latency: combine small messages.",
            percent(latency, t.mpi_ns as f64)
        ));
    }
    said.truncate(3);
    said
}

/// A latency, transfer or synchronisation estimate (ns) as a duration; empty without one.
pub fn estimate(ns: Option<f64>) -> String {
    ns.map_or(String::new(), |ns| {
        mpistat_record::units::duration(ns.max(0.0).round() as u64)
    })
}

/// What the mail says of counters read in the totals mode (at `MPI_Init` and `MPI_Finalize`).
pub const NOT_SPLIT: &str = "not split (totals mode)";

/// The footnote of a routine whose benchmark model does not fit ([`RoutineRow::fits`]).
pub const MODEL_DOES_NOT_FIT: &str = "The benchmark's latency and bandwidth make more than the \
     time measured: the model does not fit this routine (e.g. a non-blocking call, which returns \
     before its message is sent); its estimates are capped at the time measured.";

/// "How to go further": one paragraph per level 3-6, title and text.
/// What the level-6 section says after the traced jobs: their traces open in the tools of the
/// field, too.
pub const OTF2_EXPORT: &str = "To look at a trace in Vampir, Scalasca or other OTF2 tools: \
    mpistat analyze --otf2 OUT DIR writes it as an OTF2 archive (OUT/traces.otf2), with the \
    times the analysis used.";

pub const FURTHER: [(&str, &str); 4] = [
    (
        "Level 3, one job in detail",
        "Set MPISTAT_DETAIL=stderr (or stdout, or a file name) before mpirun: at the end of the \
         job you get this table for that job alone, with per-rank minimum and maximum and message \
         sizes.",
    ),
    (
        "Level 4, parts of a program",
        "Call MPI_Pcontrol(2) in your code to print the counts so far of one rank, and \
         MPI_Pcontrol(0) / MPI_Pcontrol(1) to pause and resume counting around a phase.",
    ),
    (
        "Level 5, hardware counters",
        "Set MPISTAT_COUNTERS=instructions,fp-ops,llc-misses (or other counters your site allows) \
         to count them in your program and in MPI separately.",
    ),
    (
        "Level 6, traces",
        "When the numbers point at a problem you want to see in time, trace one run with \
         mpistat itself: MPISTAT_TRACE=1 mpirun ... (every rank records its MPI calls into \
         $HOME/.mpistat/traces/JOB), then mpistat analyze $HOME/.mpistat/traces/JOB shows where \
         the ranks waited, which code caused it and the critical path (--format html > \
         report.html for a page, --perfetto trace.json for a timeline, --otf2 DIR for an OTF2 \
         archive that Vampir, Scalasca and other OTF2 tools open). Jobs that meet the \
         site's rule are traced on their next run by themselves (escalation), and what their \
         traces show comes in this mail.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use mpistat_record::model::SlurmFacts;
    use mpistat_record::JobRecord;
    use mpistat_record::Stat;

    /// Every user's digest shows the site's MPI shares from one list: a copy for each user was
    /// users² numbers (800 MB and most of a user's page's second at 10,000 users).
    #[test]
    fn the_site_mpi_shares_are_one_list_for_every_digest() {
        let users: BTreeMap<String, UserWeek> = (0..3)
            .map(|n| {
                let totals = Totals {
                    jobs: 1 + n,
                    ..Totals::default()
                };
                (format!("user{n}"), UserWeek::of_totals(totals))
            })
            .collect();
        let config = DigestConfig::default();
        let digests = Week::of_users(&config, 168.0, users).digests("2026-W47");
        assert_eq!(digests.len(), 3);
        assert_eq!(digests[0].site_mpi_percents.len(), 3);
        for digest in &digests[1..] {
            assert!(Arc::ptr_eq(
                &digests[0].site_mpi_percents,
                &digest.site_mpi_percents
            ));
        }
    }

    proptest::proptest! {
        /// A user's page builds only that user's digest: the same as the one among every
        /// user's (the references are still every user's).
        #[test]
        fn one_users_digest_is_the_same_as_among_all(
            jobs in proptest::collection::vec((0..12usize, 1..64u32, 1..1_000_000u64, 0..100u64), 1..40),
            pick in 0..12usize,
        ) {
            let mut users: BTreeMap<String, UserWeek> = BTreeMap::new();
            for (user, ranks, wall_ms, mpi_percent) in jobs {
                let wall_ns = wall_ms * 1_000_000;
                let job = JobRecord {
                    ranks,
                    wall_ns: Stat::single(wall_ns, 0),
                    mpi_ns: Stat::single(wall_ns / 100 * mpi_percent, 0),
                    ..JobRecord::default()
                };
                let week = users
                    .entry(format!("user{user}"))
                    .or_insert_with(|| UserWeek::of_totals(Totals::default()));
                week.totals.add(&job);
            }
            let config = DigestConfig::default();
            let user = format!("user{pick}");
            let all: Vec<UserDigest> = digests(&users, "2026-11", 720.0, &config, None)
                .into_iter()
                .filter(|d| d.user == user)
                .collect();
            let one = digests(&users, "2026-11", 720.0, &config, Some(&user));
            proptest::prop_assert_eq!(one, all);
        }
    }

    /// The site's default thresholds for `t`.
    fn worth(t: &Totals) -> Worth {
        let config = DigestConfig::default();
        Worth {
            cpu_ns: t.wall_ns as f64,
            min_percent: config.recommend_min_percent,
            min_ns: config.recommend_min_cpu_hours * NS_PER_HOUR,
        }
    }

    #[test]
    fn multi_node_jobs_say_how_much_stayed_on_a_node() {
        let job = |nodes: u32, on_node: u64, off_node: u64| JobRecord {
            ranks: 4,
            nodes,
            routines: vec![mpistat_record::RoutineStats {
                name: "MPI_Send".into(),
                node_bytes: Some(mpistat_record::model::NodeBytes { on_node, off_node }),
                ..Default::default()
            }],
            ..JobRecord::default()
        };
        let mut t = Totals::default();
        t.add(&job(2, 800, 100));
        t.add(&job(3, 40, 60));
        // One node: all of it stayed there, and it says nothing about the network.
        t.add(&job(1, 1000, 0));
        assert!(
            notes(&t).contains(
                &"84 % of the bytes your jobs on several nodes moved stayed on a node \
                 (the rest crossed the network)."
                    .to_string()
            ),
            "{:?}",
            notes(&t)
        );
        assert!(!notes(&Totals::default())
            .iter()
            .any(|n| n.contains("stayed on a node")));
    }

    #[test]
    fn idle_allocated_cpus_are_the_first_recommendation() {
        let job = |ranks: u32, cpus_per_node: &str| JobRecord {
            ranks,
            wall_ns: Stat::single(3_600_000_000_000, 0),
            slurm: Some(SlurmFacts {
                job_id: "7".into(),
                job_name: Some("wide".into()),
                cpus_per_node: Some(cpus_per_node.into()),
                ..SlurmFacts::default()
            }),
            ..JobRecord::default()
        };
        let flags = Flags {
            mpi: false,
            balance: false,
            imbalance: false,
            instructions: false,
            cache_misses: false,
        };
        let mut t = Totals::default();
        t.add(&job(8, "32(x4)"));
        assert_eq!(t.allocation_used_percent(), Some(6.25));
        let said = recommendations(&t, &[], &flags, &worth(&t));
        assert_eq!(
            said[0],
            "Your Slurm jobs ran ranks on only 6 % of the CPUs allocated to them, as their \
             environment claimed the allocation (job 7 \"wide\": 8 ranks on 128 CPUs): ask for \
             fewer nodes or CPUs, or run more ranks per node, \
             unless your ranks run threads on the others."
        );
        let mut full = Totals::default();
        full.add(&job(64, "32(x2)"));
        assert!(recommendations(&full, &[], &flags, &worth(&full)).is_empty());
        let mut outside = Totals::default();
        outside.add(&JobRecord::default());
        assert_eq!(outside.allocation_used_percent(), None);
    }
}
