//! What this rank shares its node with: how many ranks of the job run here (from the launcher's
//! environment) and how many CPUs the job may use here (its cgroup's cpuset, else the online
//! CPUs). Used to notice an oversubscribed node, where every extra kernel object a rank holds
//! (an open perf event costs work at each context switch) slows every rank's collectives. And
//! which node each rank runs on as MPICH's Hydra describes it ([`Mapping`]).

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

/// This rank's rank in the job as its launcher tells it before `MPI_Init`: Open MPI
/// (`OMPI_COMM_WORLD_RANK`), MPICH's Hydra (`PMI_RANK`), PMIx (`PMIX_RANK`), else Slurm's srun
/// (`SLURM_PROCID`, last: a batch step's is inherited by an `mpirun` inside it). A guess: only
/// where to do work early depends on it, never a figure.
pub fn presumed_rank(var: impl Fn(&str) -> Option<String>) -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|name| var(name).and_then(|v| v.trim().parse::<u32>().ok()))
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

/// Most blocks of a [`Mapping`] kept (Hydra's values are at most 1024 bytes: fewer blocks).
const MAX_BLOCKS: usize = 128;

/// Which node each rank of the job runs on, as Hydra's `PMI_process_mapping` says:
/// `(vector,(S,N,P),...)`, blocks of `N` nodes numbered from `S` with `P` ranks each, dealt out in
/// rank order (`P` consecutive ranks on node `S`, the next `P` on `S + 1`, ...). When the
/// blocks end before the ranks do, the dealing starts again, as MPICH reads it: at the first
/// block that starts at node 0 if one did, else at the first (`-np 2` on one host is
/// `(vector,(0,1,1))`: both ranks on node 0). Parsed without allocating: it is read at the end
/// of `MPI_Init` (footprint.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// (first node, nodes, ranks per node).
    blocks: [(u32, u32, u32); MAX_BLOCKS],
    n: usize,
}

impl Mapping {
    /// The mapping in `text`, or `None` if it is not a vector of blocks as above (an empty one
    /// means the process manager could not tell), has more than [`MAX_BLOCKS`] or deals out
    /// no rank.
    #[link_section = ".text.init.mpistat"]
    pub fn parse(text: &[u8]) -> Option<Mapping> {
        let mut m = Mapping {
            blocks: [(0, 0, 0); MAX_BLOCKS],
            n: 0,
        };
        let mut rest = skip_blanks(text).strip_prefix(b"(")?;
        rest = skip_blanks(rest).strip_prefix(b"vector")?;
        loop {
            rest = skip_blanks(rest);
            if let Some(end) = rest.strip_prefix(b")") {
                if !skip_blanks(end).is_empty() || m.ranks_from(0) == 0 {
                    return None;
                }
                return Some(m);
            }
            rest = skip_blanks(rest.strip_prefix(b",")?);
            rest = rest.strip_prefix(b"(")?;
            let mut block = [0u32; 3];
            let mut i = 0;
            while i < 3 {
                if i > 0 {
                    rest = skip_blanks(rest).strip_prefix(b",")?;
                }
                let (number, after) = leading_number(skip_blanks(rest))?;
                block[i] = number;
                rest = after;
                i += 1;
            }
            rest = skip_blanks(rest).strip_prefix(b")")?;
            if m.n == MAX_BLOCKS {
                return None;
            }
            m.blocks[m.n] = (block[0], block[1], block[2]);
            m.n += 1;
        }
    }

    /// The node world rank `rank` runs on.
    #[link_section = ".text.init.mpistat"]
    pub fn node_of(&self, rank: u32) -> Option<u32> {
        let first_pass = self.ranks_from(0);
        if u64::from(rank) < first_pass {
            return self.walk(0, u64::from(rank));
        }
        // Later passes start at the first block starting at node 0, if any.
        let mut again = 0;
        while again < self.n && self.blocks[again].0 != 0 {
            again += 1;
        }
        if again == self.n {
            again = 0;
        }
        let pass = self.ranks_from(again);
        if pass == 0 {
            return None;
        }
        self.walk(again, (u64::from(rank) - first_pass) % pass)
    }

    /// Ranks dealt out by the blocks from number `from` on.
    #[link_section = ".text.init.mpistat"]
    fn ranks_from(&self, from: usize) -> u64 {
        let mut sum = 0u64;
        let mut i = from;
        while i < self.n {
            let (_, nodes, per_node) = self.blocks[i];
            sum += u64::from(nodes) * u64::from(per_node);
            i += 1;
        }
        sum
    }

    /// The node of the `index`th rank dealt out from block `from` on.
    #[link_section = ".text.init.mpistat"]
    fn walk(&self, from: usize, mut index: u64) -> Option<u32> {
        let mut i = from;
        while i < self.n {
            let (start, nodes, per_node) = self.blocks[i];
            let span = u64::from(nodes) * u64::from(per_node);
            if index < span {
                return u32::try_from(u64::from(start) + index / u64::from(per_node)).ok();
            }
            index -= span;
            i += 1;
        }
        None
    }
}

#[link_section = ".text.init.mpistat"]
fn skip_blanks(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    bytes
}

/// A decimal number at the start of `bytes` (at most `u32`'s range), and what follows it.
#[link_section = ".text.init.mpistat"]
fn leading_number(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let mut n = 0u32;
    let mut i = 0;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        n = n.checked_mul(10)?.checked_add(u32::from(bytes[i] - b'0'))?;
        i += 1;
    }
    if i == 0 {
        return None;
    }
    Some((n, &bytes[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The nodes of ranks `0..size` by dealing the blocks out one rank at a time, as MPICH does.
    fn dealt(blocks: &[(u32, u32, u32)], size: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut wrapped = false;
        while (out.len() as u32) < size {
            let mut b = 0;
            while wrapped && blocks[b].0 != 0 {
                b += 1;
            }
            for &(start, nodes, per_node) in &blocks[b..] {
                wrapped |= start == 0;
                for node in 0..nodes {
                    for _ in 0..per_node {
                        if (out.len() as u32) < size {
                            out.push(start + node);
                        }
                    }
                }
            }
        }
        out
    }

    fn text(blocks: &[(u32, u32, u32)]) -> String {
        let mut s = "(vector".to_string();
        for (a, b, c) in blocks {
            s += &format!(",({a},{b},{c})");
        }
        s + ")"
    }

    #[test]
    fn hydra_mappings() {
        // `mpiexec -np 2` on one host, and two hosts of two ranks each.
        let one = Mapping::parse(b"(vector,(0,1,1))").unwrap();
        assert_eq!((one.node_of(0), one.node_of(1)), (Some(0), Some(0)));
        let two = Mapping::parse(b"(vector,(0,2,2))").unwrap();
        let nodes: Vec<_> = (0..4).map(|r| two.node_of(r).unwrap()).collect();
        assert_eq!(nodes, [0, 0, 1, 1]);
        let spaced = Mapping::parse(b" ( vector , ( 0 , 2 , 2 ) , (2, 1, 3) ) ").unwrap();
        assert_eq!(spaced.node_of(6), Some(2));
        for bad in [
            &b""[..],
            b"(vector)",
            b"(vector,(0,0,4))",
            b"(block,(0,1,1))",
            b"(vector,(0,1))",
            b"(vector,(0,1,1)",
            b"(vector,(0,1,1))x",
            b"(vector,(0,1,-1))",
            b"(vector,(0,1,99999999999))",
        ] {
            assert_eq!(
                Mapping::parse(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let many = text(&[(0, 1, 1); MAX_BLOCKS + 1]);
        assert_eq!(Mapping::parse(many.as_bytes()), None);
    }

    proptest! {
        /// Every rank's node is the one dealing the blocks out rank by rank gives.
        #[test]
        fn node_of_matches_dealing_out(
            blocks in proptest::collection::vec((0u32..6, 0u32..4, 0u32..4), 1..6),
            size in 1u32..80,
        ) {
            let m = Mapping::parse(text(&blocks).as_bytes());
            let total: u32 = blocks.iter().map(|(_, n, p)| n * p).sum();
            prop_assume!(total > 0);
            let m = m.unwrap();
            let first_zero = blocks.iter().position(|b| b.0 == 0).unwrap_or(0);
            let again: u32 = blocks[first_zero..].iter().map(|(_, n, p)| n * p).sum();
            prop_assume!(again > 0 || size <= total);
            let want = dealt(&blocks, size);
            for rank in 0..size {
                prop_assert_eq!(m.node_of(rank), Some(want[rank as usize]), "rank {}", rank);
            }
        }
    }

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
    fn the_presumed_rank_is_the_launchers_own_before_an_inherited_slurm_one() {
        let ompi_in_batch = [("SLURM_PROCID", "0"), ("OMPI_COMM_WORLD_RANK", "5")];
        assert_eq!(presumed_rank(env(&ompi_in_batch)), Some(5));
        let hydra_in_batch = [("SLURM_PROCID", "0"), ("PMI_RANK", "3")];
        assert_eq!(presumed_rank(env(&hydra_in_batch)), Some(3));
        assert_eq!(presumed_rank(env(&[("PMIX_RANK", "2")])), Some(2));
        assert_eq!(presumed_rank(env(&[("SLURM_PROCID", "7")])), Some(7));
        assert_eq!(presumed_rank(env(&[("PMI_RANK", "x")])), None);
        assert_eq!(presumed_rank(env(&[])), None);
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
