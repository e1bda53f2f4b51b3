//! A job of known figures whose sums the metrics tests work out by hand, shared by
//! pages/tests/metrics.rs (ingested from a log) and tests/tests/site/metrics.rs (sent by real users
//! through rsyslogd).

use crate::synthetic;
use mpistat_record::model::{Imbalance, SlurmFacts, TraceInfo};
use mpistat_record::{JobRecord, Stat};

/// Whose job it is, as its record says.
pub trait Owner {
    fn name(&self) -> String;
    fn uid(&self) -> u32;
    fn home(&self) -> String;
    /// The host its record names (the one its syslog lines come from).
    fn host(&self) -> String;
}

/// An invented user of [`synthetic::USERS`] (e.g. `"alice"`), on `node1` (the host of the
/// synthetic records), whose home is `/home/<name>`.
impl Owner for &str {
    fn name(&self) -> String {
        self.to_string()
    }
    fn uid(&self) -> u32 {
        let user = synthetic::USERS.iter().find(|(name, _)| name == self);
        user.expect("one of synthetic::USERS").1
    }
    fn home(&self) -> String {
        format!("/home/{self}")
    }
    fn host(&self) -> String {
        "node1".into()
    }
}

/// `ranks` ranks for `wall_s` seconds each, `mpi_percent` of it in MPI, a critical path of
/// `critical_path_s` (none: no imbalance figures), on `slurm`'s account and partition if any,
/// traced for `traced` if any.
pub struct Known<'a, U> {
    pub n: u32,
    pub user: U,
    pub exe: &'a str,
    pub slurm: Option<(&'a str, &'a str)>,
    pub end_ms: u64,
    pub ranks: u32,
    pub wall_s: u64,
    pub mpi_percent: u64,
    pub critical_path_s: Option<u64>,
    pub traced: Option<&'a str>,
}

impl<U: Owner> Known<'_, U> {
    pub fn record(&self) -> JobRecord {
        let s = 1_000_000_000;
        let stat = |sum: u64| Stat {
            sum,
            min: sum / u64::from(self.ranks),
            max: sum / u64::from(self.ranks),
            max_rank: 0,
        };
        let wall_ns = self.wall_s * s * u64::from(self.ranks);
        let mpi_ns = wall_ns * self.mpi_percent / 100;
        JobRecord {
            version: mpistat_record::model::MODEL_VERSION,
            job_id: format!("{}", 500 + self.n),
            uid: self.user.uid(),
            user: self.user.name(),
            exe: self.exe.into(),
            host: self.user.host(),
            pid: 100 + self.n,
            ranks: self.ranks,
            nodes: 1,
            start_unix_ms: self.end_ms - self.wall_s * 1000,
            end_unix_ms: self.end_ms,
            wall_ns: stat(wall_ns),
            mpi_ns: stat(mpi_ns),
            imbalance: self.critical_path_s.map(|cp| Imbalance {
                supersteps: 100,
                merge_factor: 1,
                critical_path_ns: cp * s,
                work_sum_ns: wall_ns - mpi_ns,
                useful_sum_ns: wall_ns - mpi_ns,
                ..Default::default()
            }),
            slurm: self.slurm.map(|(account, partition)| SlurmFacts {
                job_id: format!("{}", 9000 + self.n),
                account: Some(account.into()),
                partition: Some(partition.into()),
                ..Default::default()
            }),
            trace: self.traced.map(|reason| TraceInfo {
                dir: format!("{}/.mpistat/traces/{}", self.user.home(), self.n),
                reason: reason.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}
