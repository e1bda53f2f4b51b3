//! What this rank shares its node with: how many ranks of the job run here (from the launcher's
//! environment) and how many CPUs the job may use here (its cgroup's cpuset, else the online
//! CPUs). Used to notice an oversubscribed node, where every extra kernel object a rank holds
//! (an open perf event costs work at each context switch) slows every rank's collectives.

use std::path::Path;

/// Ranks of this job on this node, as the launcher tells each rank: Open MPI
/// (`OMPI_COMM_WORLD_LOCAL_SIZE`), MPICH's Hydra (`MPI_LOCALNRANKS`), or Slurm
/// (`SLURM_TASKS_PER_NODE` indexed by `SLURM_NODEID`).
pub fn local_ranks(var: impl Fn(&str) -> Option<String>) -> Option<u32> {
    let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u32>().ok());
    number("OMPI_COMM_WORLD_LOCAL_SIZE")
        .or_else(|| number("MPI_LOCALNRANKS"))
        .or_else(|| {
            let node = number("SLURM_NODEID")?;
            slurm_tasks_on_node(&var("SLURM_TASKS_PER_NODE")?, node)
        })
        .filter(|&n| n > 0)
}

/// This rank's index among the job's ranks on its node, as its launcher tells it: Open MPI
/// (`OMPI_COMM_WORLD_LOCAL_RANK`), MPICH's Hydra (`MPI_LOCALRANKID`) or Slurm's srun
/// (`SLURM_LOCALID`), believed only when the same launcher's global rank is `world_rank` (a
/// variable inherited from an enclosing launch, e.g. a batch step's, would say 0 on every rank).
pub fn local_rank(var: impl Fn(&str) -> Option<String>, world_rank: u32) -> Option<u32> {
    let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u32>().ok());
    [
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("PMI_RANK", "MPI_LOCALRANKID"),
        ("SLURM_PROCID", "SLURM_LOCALID"),
    ]
    .iter()
    .find(|(global, _)| number(global) == Some(world_rank))
    .and_then(|(_, local)| number(local))
}

/// Tasks on node `node` from Slurm's compressed list, e.g. `2(x3),1`: nodes 0-2 run 2, node 3 runs 1.
fn slurm_tasks_on_node(list: &str, node: u32) -> Option<u32> {
    let mut first = 0u32;
    for (tasks, repeat) in mpistat_record::model::slurm_counts(list)? {
        if node < first.checked_add(repeat)? {
            return Some(tasks);
        }
        first += repeat;
    }
    None
}

/// CPUs the job may use on this node: its cgroup's cpuset (v2, then v1), else the online CPUs.
/// Not the rank's affinity mask: a launcher that binds each rank to one core is not oversubscribing.
pub fn job_cpus() -> Option<u32> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok();
    cgroup
        .as_deref()
        .and_then(|c| cpuset_cpus(c, Path::new("/sys/fs/cgroup")))
        .or_else(online_cpus)
}

fn online_cpus() -> Option<u32> {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// The cpuset of the cgroup named in `proc_self_cgroup`, read under `root`.
fn cpuset_cpus(proc_self_cgroup: &str, root: &Path) -> Option<u32> {
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let path = path.trim_start_matches('/');
        let file = if controllers.is_empty() {
            root.join(path).join("cpuset.cpus.effective")
        } else if controllers.split(',').any(|c| c == "cpuset") {
            root.join("cpuset").join(path).join("cpuset.effective_cpus")
        } else {
            continue;
        };
        if let Some(n) = std::fs::read_to_string(file)
            .ok()
            .and_then(|list| count_cpu_list(&list))
        {
            return Some(n);
        }
    }
    None
}

/// CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for range in list.trim().split(',').filter(|r| !r.is_empty()) {
        n += match range.split_once('-') {
            Some((a, b)) => b.parse::<u32>().ok()?.checked_sub(a.parse::<u32>().ok()?)? + 1,
            None => {
                range.parse::<u32>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// Why counters stay closed on this node, if more ranks run here than the job has CPUs.
pub fn oversubscribed(ranks_here: Option<u32>, cpus: Option<u32>) -> Option<String> {
    let (ranks, cpus) = (ranks_here?, cpus?);
    (ranks > cpus).then(|| {
        format!("not opened: {ranks} ranks share {cpus} CPUs on this node (counters_when_oversubscribed)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn local_ranks_from_each_launcher() {
        assert_eq!(
            local_ranks(env(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "4")])),
            Some(4)
        );
        assert_eq!(local_ranks(env(&[("MPI_LOCALNRANKS", "3")])), Some(3));
        let slurm = [("SLURM_TASKS_PER_NODE", "2(x3),1"), ("SLURM_NODEID", "3")];
        assert_eq!(local_ranks(env(&slurm)), Some(1));
        let slurm = [("SLURM_TASKS_PER_NODE", "2(x3),1"), ("SLURM_NODEID", "2")];
        assert_eq!(local_ranks(env(&slurm)), Some(2));
        assert_eq!(local_ranks(env(&[("SLURM_TASKS_PER_NODE", "8")])), None);
        assert_eq!(
            local_ranks(env(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "x")])),
            None
        );
        assert_eq!(local_ranks(env(&[])), None);
    }

    #[test]
    fn local_rank_only_from_the_launcher_that_placed_this_rank() {
        let ompi = [
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("SLURM_PROCID", "0"),
            ("SLURM_LOCALID", "0"),
        ];
        assert_eq!(local_rank(env(&ompi), 5), Some(1));
        // mpirun inside a batch step: Slurm's variables are the batch step's, not this rank's.
        assert_eq!(local_rank(env(&ompi[2..]), 5), None);
        let hydra = [("PMI_RANK", "3"), ("MPI_LOCALRANKID", "0")];
        assert_eq!(local_rank(env(&hydra), 3), Some(0));
        let srun = [("SLURM_PROCID", "7"), ("SLURM_LOCALID", "3")];
        assert_eq!(local_rank(env(&srun), 7), Some(3));
        assert_eq!(local_rank(env(&[]), 0), None);
    }

    #[test]
    fn slurm_lists_out_of_range_or_malformed_say_nothing() {
        assert_eq!(slurm_tasks_on_node("2(x3),1", 4), None);
        assert_eq!(slurm_tasks_on_node("2(x3", 0), None);
        assert_eq!(slurm_tasks_on_node("", 0), None);
        assert_eq!(slurm_tasks_on_node("1(x4294967295),2", 1), Some(1));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-3,8,10-11\n"), Some(7));
        assert_eq!(count_cpu_list("5"), Some(1));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("a-b"), None);
    }

    #[test]
    fn cpusets_of_cgroup_v2_and_v1() {
        let root = std::env::temp_dir().join(format!("mpistat-node-{}", std::process::id()));
        std::fs::create_dir_all(root.join("job/step")).unwrap();
        std::fs::write(root.join("job/step/cpuset.cpus.effective"), "0-5\n").unwrap();
        assert_eq!(cpuset_cpus("0::/job/step\n", &root), Some(6));
        std::fs::create_dir_all(root.join("cpuset/slurm")).unwrap();
        std::fs::write(root.join("cpuset/slurm/cpuset.effective_cpus"), "2,4").unwrap();
        assert_eq!(
            cpuset_cpus("5:memory:/x\n3:cpuset,cpuacct:/slurm\n", &root),
            Some(2)
        );
        assert_eq!(cpuset_cpus("0::/missing\n", &root), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn oversubscription_is_more_ranks_than_cpus() {
        assert!(oversubscribed(Some(4), Some(2))
            .unwrap()
            .contains("4 ranks share 2 CPUs"));
        assert_eq!(oversubscribed(Some(2), Some(2)), None);
        assert_eq!(oversubscribed(None, Some(2)), None);
        assert_eq!(oversubscribed(Some(4), None), None);
    }
}
