//! The Slurm job a rank runs in, from its environment: what Slurm gives every task
//! (`SLURM_JOB_ID`, `SLURM_STEP_ID`, `SLURM_ARRAY_*`, `SLURM_JOB_NAME`, ...) and what mpistat's
//! TaskProlog (`etc/slurm/mpistat-taskprolog.sh`) adds from slurmctld in `MPISTAT_SLURM_JOB`
//! (`<job id>|<time limit>|<submit>|<start>|<QOS>`, squeue's `%A|%l|%V|%S|%q` with times in
//! seconds since the epoch), which Slurm 22.05 does not put in the environment. Read once, by
//! the rank that writes the record.

use mpistat_record::model::SlurmFacts;

/// The facts, or `None` outside Slurm (no `SLURM_JOB_ID`). `var` reads the environment.
pub fn facts(var: impl Fn(&str) -> Option<String>) -> Option<SlurmFacts> {
    // Slurm writes "(null)" for some unset values.
    let text = |name: &str| var(name).filter(|v| !v.is_empty() && v != "(null)");
    let job_id = text("SLURM_JOB_ID")?;
    let mut facts = SlurmFacts {
        step_id: text("SLURM_STEP_ID"),
        array_job_id: text("SLURM_ARRAY_JOB_ID"),
        array_task_id: text("SLURM_ARRAY_TASK_ID"),
        job_name: text("SLURM_JOB_NAME"),
        cluster: text("SLURM_CLUSTER_NAME"),
        account: text("SLURM_JOB_ACCOUNT"),
        partition: text("SLURM_JOB_PARTITION"),
        qos: text("SLURM_JOB_QOS"),
        node_list: text("SLURM_JOB_NODELIST"),
        nodes: text("SLURM_JOB_NUM_NODES").and_then(|n| n.trim().parse().ok()),
        cpus_per_node: text("SLURM_JOB_CPUS_PER_NODE"),
        job_id,
        ..SlurmFacts::default()
    };
    // The TaskProlog's query, if it is about this job (the variable is inherited by jobs
    // submitted from inside another one).
    if let Some(line) = text("MPISTAT_SLURM_JOB") {
        let fields: Vec<&str> = line.split('|').collect();
        if let [id, limit, submit, start, qos] = fields[..] {
            if id == facts.job_id {
                facts.time_limit_s = time_limit_s(limit);
                facts.submit_unix_s = submit.trim().parse().ok();
                facts.start_unix_s = start.trim().parse().ok();
                if facts.qos.is_none() && !qos.is_empty() && qos != "(null)" {
                    facts.qos = Some(qos.to_string());
                }
            }
        }
    }
    Some(facts)
}

/// Seconds of a Slurm time limit as squeue prints it: `[days-]hours:minutes:seconds`,
/// `minutes:seconds`, `days-hours`; none for `UNLIMITED`, `INVALID` and anything else.
fn time_limit_s(text: &str) -> Option<u64> {
    let (days, rest) = match text.trim().split_once('-') {
        Some((d, rest)) => (d.parse::<u64>().ok()?, rest),
        None => (0, text.trim()),
    };
    let parts = rest
        .split(':')
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<Vec<u64>>>()?;
    let (h, m, s) = match parts[..] {
        [h, m, s] => (h, m, s),
        [m, s] if days == 0 => (0, m, s),
        [h] if days > 0 || text.contains('-') => (h, 0, 0),
        [m] => (0, m, 0),
        _ => return None,
    };
    Some(((days * 24 + h) * 60 + m) * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn time_limits_in_squeues_forms() {
        assert_eq!(time_limit_s("5:00"), Some(300));
        assert_eq!(time_limit_s("1:00:00"), Some(3600));
        assert_eq!(time_limit_s("1-02:04:00"), Some(93_840));
        assert_eq!(time_limit_s("2-00"), Some(172_800));
        assert_eq!(time_limit_s("30"), Some(1800));
        for none in ["UNLIMITED", "INVALID", "", "1:2:3:4", "a:00"] {
            assert_eq!(time_limit_s(none), None, "{none:?}");
        }
    }

    #[test]
    fn outside_slurm_there_are_no_facts() {
        assert_eq!(facts(env(&[("SLURM_STEP_ID", "0")])), None);
    }

    #[test]
    fn an_array_task_step_with_the_taskprologs_query() {
        let f = facts(env(&[
            ("SLURM_JOB_ID", "12"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_ARRAY_JOB_ID", "11"),
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_JOB_NAME", "solver"),
            ("SLURM_CLUSTER_NAME", "c1"),
            ("SLURM_JOB_ACCOUNT", "physics"),
            ("SLURM_JOB_PARTITION", "debug"),
            ("SLURM_JOB_NODELIST", "n[01-02]"),
            ("SLURM_JOB_NUM_NODES", "2"),
            ("SLURM_JOB_CPUS_PER_NODE", "2(x2)"),
            ("MPISTAT_SLURM_JOB", "12|5:00|1000|1010|(null)"),
        ]))
        .unwrap();
        assert_eq!(
            f,
            SlurmFacts {
                job_id: "12".into(),
                step_id: Some("0".into()),
                array_job_id: Some("11".into()),
                array_task_id: Some("2".into()),
                job_name: Some("solver".into()),
                cluster: Some("c1".into()),
                account: Some("physics".into()),
                partition: Some("debug".into()),
                qos: None,
                node_list: Some("n[01-02]".into()),
                nodes: Some(2),
                cpus_per_node: Some("2(x2)".into()),
                time_limit_s: Some(300),
                submit_unix_s: Some(1000),
                start_unix_s: Some(1010),
            }
        );
        assert_eq!(f.cpus_allocated(), Some(4));
    }

    #[test]
    fn the_query_of_another_job_is_ignored_and_null_values_are_unknown() {
        let f = facts(env(&[
            ("SLURM_JOB_ID", "13"),
            ("SLURM_JOB_ACCOUNT", "(null)"),
            ("MPISTAT_SLURM_JOB", "12|5:00|1000|1010|normal"),
        ]))
        .unwrap();
        assert_eq!(f.account, None);
        assert_eq!(f.time_limit_s, None);
        assert_eq!(f.qos, None);
        let g = facts(env(&[
            ("SLURM_JOB_ID", "13"),
            ("MPISTAT_SLURM_JOB", "13|UNLIMITED|1000|N/A|normal"),
        ]))
        .unwrap();
        assert_eq!(g.time_limit_s, None);
        assert_eq!(g.start_unix_s, None);
        assert_eq!(g.submit_unix_s, Some(1000));
        assert_eq!(g.qos.as_deref(), Some("normal"));
    }
}
