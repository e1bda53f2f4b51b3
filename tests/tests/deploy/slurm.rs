//! Jobs through a real Slurm (a private one-node cluster, `mpistat_e2e::slurm`) with mpistat's
//! TaskProlog (`etc/slurm/mpistat-taskprolog.sh`): users submit plain batch scripts and records
//! arrive, with the job's Slurm facts; an opted-out job leaves none; a job killed by `scancel` or
//! at its time limit leaves a partial one. Skipped loudly where Slurm is not installed.
//!
//! Under MPICH too (Debian's MPICH runs under Slurm: `mpiexec.mpich` in a batch script, whose
//! Hydra starts its proxy with srun, and `srun --mpi=pmi2`; `srun --mpi=list` offers `pmi2`,
//! `pmix`, `cray_shasta`, `none`); a job killed by SIGTERM under MPICH leaves its partial record
//! only when rank 0 beats Hydra's proxy (see [`check_killed_record`]).
//! Under `srun --mpi=pmi2` the profiler cannot learn whether every rank has the library (see
//! `peers.rs`): rank 0 reports alone, and a mixed MPMD job still ends as bare.

use mpistat_e2e::slurm::{JobState, Slurm};
use mpistat_e2e::*;
use mpistat_record::model::JobRecord;
use mpistat_record::{Binding, Stat};
use std::path::Path;
use std::time::Duration;

/// How long a short job may take from submission to its end.
const JOB_END: Duration = Duration::from_secs(120);
/// Ranks of the MPI jobs: one per CPU of a 2-CPU machine.
const RANKS: u32 = 2;

/// The environment a user's `sbatch` passes on to the job (Slurm exports the submitter's
/// environment): root may run mpirun (the tests run as root), Open MPI tuned for a small
/// machine as in the other tests, and the site config of the private syslogd (a site has it in
/// /etc/mpistat/site.toml). Nothing of mpistat's preloading: that is the TaskProlog's job.
/// For MPICH: its ranks yield the core at every poll, as in the other tests.
fn job_env(syslogd: &Syslogd) -> Vec<(String, String)> {
    vec![
        ("MPIR_CVAR_POLLS_BEFORE_YIELD".into(), "1".into()),
        ("OMPI_ALLOW_RUN_AS_ROOT".into(), "1".into()),
        ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM".into(), "1".into()),
        ("OMPI_MCA_mpi_yield_when_idle".into(), "1".into()),
        (
            "OMPI_MCA_btl_vader_single_copy_mechanism".into(),
            "none".into(),
        ),
        (
            "MPISTAT_CONFIG".into(),
            syslogd.site_config().display().to_string(),
        ),
    ]
}

fn pairs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// A batch script running `mpirun <program>` (ranks as the allocation says) and then, as a second
/// step, `srun --mpi=pmix <program>`; for MPICH `mpiexec.mpich` (Hydra, which launches through
/// Slurm itself) and `srun --mpi=pmi2`.
fn mpirun_then_srun(mpi: Mpi, program: &Path) -> String {
    let p = program.display();
    let (mpirun, srun) = launchers(mpi);
    format!("#!/bin/sh\n{mpirun} {p}\necho mpirun=$?\n{srun} {p}\necho srun=$?\n")
}

/// How a batch script of `mpi` starts a program: its own launcher, and `srun` with the
/// process-management interface the MPI speaks (Open MPI 4: PMIx; Debian's MPICH 4: PMI-1, which
/// Slurm's `pmi2` plugin also serves).
fn launchers(mpi: Mpi) -> (&'static str, &'static str) {
    match mpi {
        Mpi::OpenMpi => ("mpirun --bind-to none", "srun --mpi=pmix"),
        Mpi::Mpich => ("mpiexec.mpich", "srun --mpi=pmi2"),
    }
}

/// The step ids of a batch script's two launches ([`launchers`]), sorted: mpirun's ranks run in
/// the batch step (no step id) and srun's in step 0; Hydra (`mpiexec.mpich`) starts its proxy
/// with srun itself, so its ranks run in step 0 and the srun's in step 1.
fn step_ids(mpi: Mpi) -> [Option<&'static str>; 2] {
    match mpi {
        Mpi::OpenMpi => [None, Some("0")],
        Mpi::Mpich => [Some("0"), Some("1")],
    }
}

fn assert_all(states: &[JobState], state: &str, slurm: &Slurm, id: &str) {
    assert!(
        !states.is_empty() && states.iter().all(|s| s.state == state),
        "job {id}: {states:?}, expected {state}; output:\n{}",
        slurm.output(id)
    );
}

/// The Slurm facts every record of `id` has in this cluster, whatever the job.
fn assert_common_facts(record: &JobRecord, slurm: &Slurm, id: &str) {
    let facts = record
        .slurm
        .as_ref()
        .expect("a record made in Slurm has Slurm facts");
    assert_eq!(facts.job_id, id);
    assert_eq!(facts.cluster.as_deref(), Some("mpistat"));
    assert_eq!(facts.partition.as_deref(), Some("debug"));
    assert_eq!(facts.node_list.as_deref(), Some(slurm.node()));
    assert_eq!(facts.nodes, Some(1));
    assert_eq!(facts.cpus_per_node.as_deref(), Some("2"));
    assert_eq!(facts.cpus_allocated(), Some(2));
    let (submit, start) = (facts.submit_unix_s.unwrap(), facts.start_unix_s.unwrap());
    assert!(submit <= start, "submitted {submit}, started {start}");
    assert!(
        start <= record.start_unix_ms / 1000,
        "the job started at {start}, after MPI_Init at {}",
        record.start_unix_ms
    );
}

/// Two CPUs are needed for 2 ranks without overcommitting the node.
fn enough_cpus() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        cpus >= RANKS as usize,
        "the Slurm tests need {RANKS} CPUs, this machine has {cpus}"
    );
}

for_each_mpi! {
/// A C program through `mpirun` in a batch script, then through `srun --mpi=pmix` as the second
/// step of the same job: two exact records (one per step) with the job's facts, and the report
/// of `mpistat show` names the Slurm job.
fn batch_job_steps_get_exact_records_with_their_slurm_facts(mpi) {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let env = job_env(&syslogd);
    let id = slurm.sbatch(
        &mpirun_then_srun(mpi, &program_for("basic.c", mpi)),
        &[
            "--ntasks=2",
            "--job-name=basic-c",
            "--account=physics",
            "--time=5",
        ],
        &pairs(&env),
    );
    let states = slurm.wait_ended(&id, JOB_END);
    assert_all(&states, "COMPLETED", &slurm, &id);
    let output = slurm.output(&id);
    assert!(
        output.contains("mpirun=0") && output.contains("srun=0"),
        "{output}"
    );
    for rank in 0..RANKS {
        assert_eq!(
            output.matches(&basic_ok_line(rank)).count(),
            2,
            "rank {rank} of each step prints its line:\n{output}"
        );
    }

    let records = syslogd.records(2);
    assert_eq!(records.len(), 2, "one record per step: {records:#?}");
    let expected = basic_expectations(RANKS);
    for record in &records {
        assert_eq!(record.ranks, RANKS);
        assert_eq!(record.binding, Binding::C);
        let step = record.slurm.as_ref().unwrap().step_id.as_deref();
        if mpi == Mpi::Mpich && step == Some("1") {
            // srun --mpi=pmi2: MPICH's PMI-1 client talks to slurmstepd, which answers only
            // the first `init` of a task, so the profiler cannot put its key before MPICH's
            // (peers.rs): whether every rank has the library is unknown, and rank 0 reports
            // alone (docs/admin-guide.md, "MPICH jobs").
            assert_eq!(
                record.partial.as_deref(),
                Some("whether all 2 ranks have libmpistat is unknown (rank 0 reports alone)")
            );
        } else {
            assert_eq!(record.partial, None);
            assert_routines(record, &expected);
            assert_no_other_routines(record, &expected, LIFECYCLE);
        }
        assert_common_facts(record, &slurm, &id);
        let facts = record.slurm.as_ref().unwrap();
        assert_eq!(facts.job_name.as_deref(), Some("basic-c"));
        assert_eq!(facts.account.as_deref(), Some("physics"));
        assert_eq!(facts.time_limit_s, Some(300));
        assert_eq!(facts.array_job_id, None);
        assert!(!facts.reached_time_limit(record.end_unix_ms));
    }
    let mut steps: Vec<Option<&str>> = records
        .iter()
        .map(|r| r.slurm.as_ref().unwrap().step_id.as_deref())
        .collect();
    steps.sort();
    assert_eq!(steps, step_ids(mpi));
    // The jobs as sacct names them: the job, or job.step.
    let job_steps = step_ids(mpi).map(|step| step.map_or(id.clone(), |s| format!("{id}.{s}")));
    let mut job_ids: Vec<&str> = records.iter().map(|r| r.job_id.as_str()).collect();
    job_ids.sort();
    assert_eq!(job_ids, job_steps);

    let log = Scratch::new("slurm-show");
    let file = log.path().join("records.log");
    std::fs::write(&file, syslogd.lines().join("\n") + "\n").unwrap();
    let show = std::process::Command::new(library().with_file_name("mpistat"))
        .arg("show")
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{text}");
    for line in [
        format!("  Slurm job   {} \"basic-c\" on cluster mpistat", job_steps[0]),
        format!("  Slurm job   {} \"basic-c\" on cluster mpistat", job_steps[1]),
        "  account     physics, partition debug, QOS -".to_string(),
        format!(
            "  allocated   1 node(s) {}, CPUs per node 2 = 2 CPUs; 2 rank(s) ran on them (100 %)",
            slurm.node()
        ),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("  time limit  0:05:00; ended ")),
        "{text}"
    );

    // The user's weekly mail names the jobs as sacct does, with the job name; the job page shows
    // the facts.
    let dir = Scratch::new("slurm-digest");
    let log = dir.path().join("records.log");
    write_trusted_log(&syslogd, &log);
    let config = dir.path().join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {:?}\n[mail]\ntransport = \"directory\"\ndirectory = {:?}\n",
            dir.path().join("mpistat.db").display().to_string(),
            dir.path().join("mail").display().to_string(),
        ),
    )
    .unwrap();
    assert!(mpistat(&["ingest", log.to_str().unwrap()], &config)
        .status
        .success());
    let week = this_week();
    assert!(mpistat(&["digest", "--week", &week, "--send"], &config)
        .status
        .success());
    let mails: Vec<String> = std::fs::read_dir(dir.path().join("mail"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(mails.len(), 1);
    let program = format!("basic{}", if mpi == Mpi::Mpich { ".mpich" } else { "" });
    for id in &job_steps {
        let row = mails[0]
            .lines()
            .find(|l| l.starts_with(&format!("{id:<12}{RANKS:>6}")))
            .unwrap_or_else(|| panic!("job {id} not among the biggest jobs: {}", mails[0]));
        assert!(row.ends_with(&format!("  {program} (job \"basic-c\")")), "{row:?}");
    }
    let site = dir.path().join("site");
    assert!(mpistat(
        &[
            "site-report",
            "--week",
            &week,
            "--out",
            site.to_str().unwrap()
        ],
        &config
    )
    .status
    .success());
    for record in &records {
        let page = std::fs::read_to_string(site.join(format!("jobs/{}.html", record.key())))
            .expect("the job's page");
        let step = record.slurm.as_ref().unwrap().job_step();
        assert!(
            page.contains(&format!(
                "<tr><th>Slurm job</th><td>{step} &quot;basic-c&quot; on cluster mpistat</td></tr>"
            )),
            "{page}"
        );
        assert!(page.contains("<tr><th>account</th><td>physics, partition debug, QOS -</td></tr>"));
    }
    // The users page groups the Slurm jobs by account and by partition.
    let users = std::fs::read_to_string(site.join("users.html")).unwrap();
    for (title, row) in [
        (
            "Slurm accounts",
            "<tr><td>physics</td><td class=\"n\">2</td>",
        ),
        (
            "Slurm partitions",
            "<tr><td>debug</td><td class=\"n\">2</td>",
        ),
    ] {
        let table = users
            .split(&format!("<h2>{title}</h2>"))
            .nth(1)
            .unwrap_or_else(|| panic!("no {title} in {users}"));
        assert!(table.contains(row), "{title}: no {row:?} in {table}");
    }
}
}

for_each_mpi! {
/// The Fortran twin (`use mpi_f08`) through mpirun (`mpiexec.mpich`) in a batch script.
fn fortran_batch_job_gets_an_exact_record(mpi) {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let env = job_env(&syslogd);
    let fortran = Program {
        source: "basic.F90",
        name: "basic_use_mpi_f08",
        flags: &["-DUSE_F08"],
    }
    .path_for(mpi);
    let script = format!("#!/bin/sh\n{} {}\n", launchers(mpi).0, fortran.display());
    let id = slurm.sbatch(&script, &["--ntasks=2", "--job-name=basic-f"], &pairs(&env));
    assert_all(&slurm.wait_ended(&id, JOB_END), "COMPLETED", &slurm, &id);
    let record = syslogd.single_record();
    assert_eq!(record.ranks, RANKS);
    assert_eq!(record.binding, Binding::Fortran);
    let expected = basic_expectations(RANKS);
    assert_routines(&record, &expected);
    assert_no_other_routines(&record, &expected, LIFECYCLE);
    assert_common_facts(&record, &slurm, &id);
    assert_eq!(record.slurm.unwrap().job_name.as_deref(), Some("basic-f"));
}
}

for_each_mpi! {
/// An array job of 2 tasks: one record per task, each with its array job and task id.
fn array_job_tasks_get_records_with_array_ids(mpi) {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let env = job_env(&syslogd);
    let script = format!(
        "#!/bin/sh\n{} {}\n",
        launchers(mpi).0,
        program_for("basic.c", mpi).display()
    );
    let array = slurm.sbatch(
        &script,
        &["--ntasks=2", "--array=1-2", "--job-name=sweep"],
        &pairs(&env),
    );
    let states = slurm.wait_ended(&array, JOB_END);
    assert_eq!(states.len(), 2, "{states:?}");
    assert!(states.iter().all(|s| s.state == "COMPLETED"), "{states:?}");
    let records = syslogd.records(2);
    assert_eq!(records.len(), 2);
    let mut tasks = Vec::new();
    for record in &records {
        assert_routines(record, &basic_expectations(RANKS));
        let facts = record.slurm.as_ref().unwrap();
        assert_eq!(facts.array_job_id.as_deref(), Some(array.as_str()));
        assert_eq!(facts.job_name.as_deref(), Some("sweep"));
        let task = facts.array_task_id.clone().unwrap();
        // The task, or its step where the launcher made one (`step_ids`).
        let step = step_ids(mpi)[0].map_or(String::new(), |s| format!(".{s}"));
        assert_eq!(facts.job_step(), format!("{array}_{task}{step}"));
        assert_common_facts(record, &slurm, &facts.job_id);
        tasks.push(task);
    }
    tasks.sort();
    assert_eq!(tasks, ["1", "2"]);
}
}

for_each_mpi! {
/// `MPISTAT=off` in the submitter's environment: the job runs as usual and leaves no record. (A
/// job submitted after it, without the opt-out, leaves one: the only record in the log.)
fn opted_out_job_leaves_no_record(mpi) {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let script = format!(
        "#!/bin/sh\necho \"LD_PRELOAD=$LD_PRELOAD\"\n{} {}\n",
        launchers(mpi).0,
        program_for("basic.c", mpi).display()
    );
    let mut off = job_env(&syslogd);
    off.push(("MPISTAT".into(), "off".into()));
    let opted_out = slurm.sbatch(&script, &["--ntasks=2"], &pairs(&off));
    assert_all(
        &slurm.wait_ended(&opted_out, JOB_END),
        "COMPLETED",
        &slurm,
        &opted_out,
    );
    let output = slurm.output(&opted_out);
    assert!(output.lines().any(|l| l == "LD_PRELOAD="), "{output}");
    assert_every_rank_printed_in(&output);

    let env = job_env(&syslogd);
    let profiled = slurm.sbatch(&script, &["--ntasks=2"], &pairs(&env));
    assert_all(
        &slurm.wait_ended(&profiled, JOB_END),
        "COMPLETED",
        &slurm,
        &profiled,
    );
    let record = syslogd.single_record();
    assert_eq!(record.slurm.unwrap().job_id, profiled);
}
}

fn assert_every_rank_printed_in(output: &str) {
    for rank in 0..RANKS {
        assert!(output.lines().any(|l| l == basic_ok_line(rank)), "{output}");
    }
}

/// Submit `forever.c` through `mpi`'s launcher and wait until it runs MPI; returns the job id.
fn start_forever(mpi: Mpi, slurm: &Slurm, syslogd: &Syslogd, args: &[&str]) -> String {
    let env = job_env(syslogd);
    let script = format!(
        "#!/bin/sh\n{} {}\n",
        launchers(mpi).0,
        program_for("forever.c", mpi).display()
    );
    let id = slurm.sbatch(&script, args, &pairs(&env));
    slurm.wait_output_line(&id, "forever: running", JOB_END);
    id
}

/// What a job killed by SIGTERM leaves: one partial record of rank 0 ("SIGTERM"), with its
/// barriers counted and the job's facts; under MPICH, at most that record.
///
/// Under MPICH the record is a race it often loses (6 of 8 `scancel` runs here at load 10 had it;
/// none of 6 with `strace` slowing rank 0): Slurm signals every process of the step, Hydra's
/// proxy (`hydra_pmi_proxy`, the ranks' parent) too, and the proxy, on its own `SIGTERM` or on
/// the `SIGCHLD` of rank 1 killed by Slurm's, sends each rank's process group `SIGTERM` and
/// `SIGKILL` within 0-10 ms (strace of the proxy and rank 0). Rank 0's partial record takes a few
/// milliseconds on its helper thread (terminate.rs), more on this loaded machine. No earlier
/// signal can be used: Slurm's `SIGCONT` before its `SIGTERM` is also the one of a resumed job,
/// and a handler for it would make interrupted sleeps and polls of the program fail with
/// `EINTR` at every resume. So under MPICH the job must end as Slurm says, and the log hold that
/// record or nothing of the job: a part cut off by `SIGKILL` at most (no second record, no
/// other problem).
fn check_killed_record(mpi: Mpi, syslogd: &Syslogd, slurm: &Slurm, id: &str) -> Option<JobRecord> {
    let record = if mpi == Mpi::Mpich {
        // The record, if rank 0 got it out, arrived long before the job's end was seen; Hydra
        // may kill rank 0 between its payload and its summary (sent last), so the summary may
        // be missing.
        syslogd.assert_at_most_one_record_or_its_missing_parts();
        syslogd.decoded().records.into_iter().next()?
    } else {
        syslogd.single_record()
    };
    // Slurm signals every process of the job, `mpirun` too, which passes a SIGTERM on to its
    // ranks: rank 0 names the sender of the one that reached it first (a second SIGTERM while
    // the first is pending is merged into it). Under a loaded CI machine `mpirun`'s came first
    // once (stop 27). Either says the job was stopped from outside.
    let reason = record.partial.as_deref().unwrap_or_default();
    assert!(
        reason == "SIGTERM"
            || mpi == Mpi::OpenMpi && reason.starts_with("SIGTERM from the launcher"),
        "{record:#?}"
    );
    assert_eq!(record.ranks, RANKS);
    let barrier = routine(&record, "MPI_Barrier");
    assert!(barrier.calls.sum >= 1, "{barrier:?}");
    assert_eq!(
        barrier.calls.max_rank, 0,
        "a partial record holds rank 0's numbers"
    );
    assert_common_facts(&record, slurm, id);
    Some(record)
}

for_each_mpi! {
/// `scancel` sends SIGTERM to every process of the job: rank 0 writes a partial record first.
fn scancelled_job_leaves_a_partial_record(mpi) {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let id = start_forever(mpi, &slurm, &syslogd, &["--ntasks=2", "--time=10"]);
    let mut cancel = slurm.command("scancel");
    cancel.arg(&id);
    slurm.run(cancel);
    assert_all(&slurm.wait_ended(&id, JOB_END), "CANCELLED", &slurm, &id);
    if let Some(record) = check_killed_record(mpi, &syslogd, &slurm, &id) {
        assert!(!record.slurm.unwrap().reached_time_limit(record.end_unix_ms));
    }
}
}

for_each_mpi! {
/// A job running past `--time=1` (one minute, Slurm's smallest limit) is killed by SIGTERM at its
/// limit: a partial record whose facts say it reached the limit.
fn job_killed_at_its_time_limit_leaves_a_partial_record(mpi) {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let id = start_forever(mpi, &slurm, &syslogd, &["--ntasks=2", "--time=1"]);
    // The limit is checked about every 30 s, and the job has KillWait=10 s to go.
    assert_all(
        &slurm.wait_ended(&id, Duration::from_secs(180)),
        "TIMEOUT",
        &slurm,
        &id,
    );
    let Some(record) = check_killed_record(mpi, &syslogd, &slurm, &id) else {
        return;
    };
    let facts = record.slurm.as_ref().unwrap();
    assert_eq!(facts.time_limit_s, Some(60));
    assert!(
        facts.reached_time_limit(record.end_unix_ms),
        "ended at {} ms, started {:?} with a limit of 60 s",
        record.end_unix_ms,
        facts.start_unix_s
    );
}
}

for_each_mpi! {
/// Steps that end with `MPI_Abort` (rank 1 of `abort.c`), through mpirun and through srun: the
/// job fails, and each step leaves one record, the aborting rank's partial one, with the job's
/// facts (the launcher stopping the other ranks adds none).
fn aborted_step_leaves_a_partial_record_with_its_slurm_facts(mpi) {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let env = job_env(&syslogd);
    let p = program_for("abort.c", mpi);
    let (mpirun, srun) = launchers(mpi);
    let script = format!("#!/bin/sh\n{mpirun} {p}\n{srun} {p}\n", p = p.display());
    let id = slurm.sbatch(&script, &["--ntasks=2", "--job-name=aborts"], &pairs(&env));
    assert_all(&slurm.wait_ended(&id, JOB_END), "FAILED", &slurm, &id);
    let mut records = syslogd.records(2);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(syslogd.decoded().records.len(), 2, "{records:#?}");
    records.sort_by_key(|r| r.slurm.as_ref().unwrap().step_id.clone());
    for record in &records {
        assert_eq!(
            record.partial.as_deref(),
            Some("MPI_Abort (errorcode 3) on rank 1")
        );
        assert_eq!(routine(record, "MPI_Send").calls, Stat::single(3, 1));
        assert_common_facts(record, &slurm, &id);
        assert_eq!(
            record.slurm.as_ref().unwrap().job_name.as_deref(),
            Some("aborts")
        );
    }
    let steps: Vec<Option<&str>> = records
        .iter()
        .map(|r| r.slurm.as_ref().unwrap().step_id.as_deref())
        .collect();
    assert_eq!(steps, step_ids(mpi));
}
}

/// An MPMD job through `srun --mpi=pmi2 --multi-prog` where one rank runs through `env -u
/// LD_PRELOAD` (rank 1, then rank 0), after the same job with neither rank preloaded: both end
/// and print what the bare one prints. Under Slurm's pmi2 plugin the profiler cannot learn which
/// ranks have the library (docs/admin-guide.md, "MPICH jobs"; `peers.rs`), so it runs no collective
/// of its own: with the library on rank 0, rank 0 sends a partial record of its own numbers; with
/// the library on rank 1 only, nobody does (rank 1 does not know that it leads). A profiler that
/// talked to slurmstepd here (which answers only the first PMI `init` of a task) or ran a
/// collective would hang these steps until `JOB_END`.
#[test]
fn mixed_srun_pmi2_job_ends_as_bare_and_rank_0_reports_alone() {
    let _serial = serial();
    let Some(slurm) = Slurm::start() else { return };
    enough_cpus();
    let syslogd = Syslogd::start();
    let env = job_env(&syslogd);
    let p = program_for("basic.c", Mpi::Mpich).display().to_string();
    let bare = format!("env -u LD_PRELOAD {p}");
    let steps = [
        ("bare", format!("0-1 {bare}\n")),
        ("first", format!("0 {p}\n1 {bare}\n")),
        ("second", format!("0 {bare}\n1 {p}\n")),
    ];
    let mut script = String::from("#!/bin/sh\n");
    for (name, conf) in &steps {
        let file = slurm.jobs_dir().join(format!("{name}.conf"));
        std::fs::write(&file, conf).unwrap();
        script.push_str(&format!(
            "srun --mpi=pmi2 --multi-prog {} > {name}.out\necho {name}=$?\n",
            file.display()
        ));
    }
    let id = slurm.sbatch(&script, &["--ntasks=2", "--job-name=mixed"], &pairs(&env));
    assert_all(&slurm.wait_ended(&id, JOB_END), "COMPLETED", &slurm, &id);
    let output = slurm.output(&id);
    let sorted = |name: &str| {
        let text = std::fs::read_to_string(slurm.jobs_dir().join(format!("{name}.out")))
            .unwrap_or_default();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    let bare_lines = sorted("bare");
    assert_eq!(bare_lines, [basic_ok_line(0), basic_ok_line(1)]);
    for (name, _) in &steps {
        assert!(output.contains(&format!("{name}=0")), "{output}");
        assert_eq!(sorted(name), bare_lines, "step {name}");
    }

    // One record: step 1's, rank 0's own numbers (basic.c: rank 0 sends 4 times 3 x 100 ints).
    let record = syslogd.single_record();
    assert_eq!(record.job_id, format!("{id}.1"));
    assert_eq!(record.ranks, RANKS);
    assert_eq!(
        record.partial.as_deref(),
        Some("whether all 2 ranks have libmpistat is unknown (rank 0 reports alone)")
    );
    let send = routine(&record, "MPI_Send");
    assert_eq!(send.calls.sum, 4);
    assert_eq!(send.bytes.sum, 3 * 100 * 4);
    assert_eq!(send.bytes.max_rank, 0);
    assert_common_facts(&record, &slurm, &id);
}
