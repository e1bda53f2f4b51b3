//! Site configuration: the schema of `etc/site.toml`, its defaults, and a parser that never fails.
//!
//! Both the profiler (at `MPI_Init`, inside a user's job) and the digest read the same file. A
//! malformed file must not break a job, so [`SiteConfig::parse`] always returns a usable
//! configuration (the defaults for whatever could not be read) plus the list of problems.

pub mod accounts;
pub mod choices;
pub mod escalation;
pub mod files;
pub mod html;

pub use choices::{CountersFallback, Facility, Listen, ServeAuth};

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the profiler looks when `MPISTAT_CONFIG` is not set.
pub const DEFAULT_PATH: &str = "/etc/mpistat/site.toml";

/// The most of a configuration file that is read: `etc/site.toml`, every setting documented, is
/// 20 kB. A longer file is not a configuration (`MPISTAT_CONFIG=/var/log/huge.log`): refused.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// The most a setting that sizes what the profiler allocates, how long it waits, or what serve
/// gives may be: a larger value is clamped to it (a problem says so), so that no configuration,
/// a user's `MPISTAT_CONFIG` included, makes a job abort on an allocation or hang on a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Most {
    /// The setting as messages name it.
    pub setting: &'static str,
    pub max: u64,
}

/// Characters kept of a recorded environment variable's value.
pub const ENV_VALUE_MAX: Most = Most {
    setting: "[profiler] env_value_max",
    max: 4096,
};
/// The superstep buffer: 64 MiB hold 2.8 million supersteps before the first merge.
pub const SUPERSTEP_BUFFER_BYTES: Most = Most {
    setting: "[profiler] superstep_buffer_bytes",
    max: 64 << 20,
};
/// A rank's trace events: 64 GiB are some 8,000 million of them (address space reserved,
/// resident only as events come).
pub const TRACE_BUDGET_BYTES: Most = Most {
    setting: "[trace] budget_bytes",
    max: 64 << 30,
};
/// How long rank 0 waits at `MPI_Finalize` for a syslog daemon that takes nothing.
pub const SYSLOG_STALL_MS: Most = Most {
    setting: "[syslog] stall_ms",
    max: 10_000,
};
/// The applications, accounts and partitions `/metrics` names per window: the series a scrape
/// gives Prometheus.
pub const METRICS_TOP: Most = Most {
    setting: "[serve] metrics_top",
    max: 100,
};

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SiteConfig {
    pub profiler: ProfilerConfig,
    pub trace: TraceConfig,
    pub escalation: EscalationConfig,
    pub syslog: SyslogConfig,
    pub database: DatabaseConfig,
    pub ingest: IngestConfig,
    pub digest: DigestConfig,
    pub mail: MailConfig,
    pub site_report: SiteReportConfig,
    pub serve: ServeConfig,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfilerConfig {
    /// Profile MPI jobs at all. `false` makes every wrapper a plain pass-through.
    pub enabled: bool,
    /// Honour `MPISTAT_DETAIL` (per-job report) and `MPI_Pcontrol(2)` subtotals.
    pub detail_allowed: bool,
    /// Environment variables recorded with each job: exact names, or prefixes ending in `*`.
    pub env_whitelist: Vec<String>,
    /// Variables matching the whitelist that are still not recorded (same syntax): the launcher's
    /// own bookkeeping, which says nothing about the user's choices.
    pub env_ignore: Vec<String>,
    /// Longest value recorded for one environment variable (longer ones are cut).
    pub env_value_max: usize,
    /// Bytes per rank for the supersteps of the imbalance estimates (24 bytes each); when full,
    /// adjacent supersteps are merged pairwise (the record states the merge factor).
    pub superstep_buffer_bytes: usize,
    /// Performance counters opened per MPI-calling thread when the user chooses none. Names:
    /// instructions, cycles, fp-ops, llc-misses, l2-misses, branch-misses (hardware), task-clock,
    /// page-faults, context-switches, cpu-migrations (software). Empty: no counters.
    pub counters: Vec<String>,
    /// Counters a user may choose with `MPISTAT_COUNTERS=name,name,...` (others are ignored).
    pub counters_allowed: Vec<String>,
    /// When the kernel offers no user-space counter read (rdpmc): `per-call` reads the counters
    /// with read(2) around every outermost MPI call (split inside/outside MPI, about 0.3-0.6 us a
    /// call), `totals` reads them only at MPI_Init and MPI_Finalize (totals, no split).
    #[serde(deserialize_with = "choices::or_default")]
    pub counters_fallback: CountersFallback,
    /// Open counters even when more ranks of the job run on a node than it has CPUs. Off by
    /// default: an open perf event adds kernel work to every context switch, and oversubscribed
    /// ranks switch at every collective (measured: x1.4 on MPI_Allreduce, 4 ranks on 2 cores).
    pub counters_when_oversubscribed: bool,
    /// When the process manager cannot tell whether every rank of a job has the library (no
    /// PMIx the library can reach, e.g. an Open MPI built with its internal PMIx, or `srun
    /// --mpi=pmi2`): `true` assumes they all do (full records, but a job where some ranks lost
    /// `LD_PRELOAD` hangs in the profiler's collectives), `false` runs no profiler collective
    /// (rank 0 sends a partial record of its own numbers).
    pub assume_all_ranks_profiled: bool,
    /// Rank 0 writes a partial record when the job is killed by SIGTERM (Slurm's scancel and time
    /// limit, mpirun stopping its ranks), then ends as the signal would have ended it. Only when
    /// the program keeps SIGTERM's default disposition.
    pub record_on_sigterm: bool,
}

/// Trace-capture mode: a full event trace of a job, for `mpistat analyze`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TraceConfig {
    /// Trace every job (for testing a site). Users opt in with `MPISTAT_TRACE=1`.
    pub everyone: bool,
    /// Where a job's trace goes: `$HOME` (or `~` at the start) is the user's home, `{job_id}` the
    /// job's id. Created with the user's permissions, mode 0700.
    pub directory: String,
    /// Memory for the events of one rank; when it is full, recording stops (the trace says where).
    pub budget_bytes: usize,
    /// Supersteps (intervals between global synchronising collectives) to skip before recording.
    pub skip_supersteps: u64,
    /// Supersteps to record after the skipped ones; 0: until the end (or the budget).
    pub record_supersteps: u64,
    /// At the end of a traced job, rank 0 starts `analyze_command analyze --send DIR` (detached,
    /// as the job's user) once every rank's trace files are written: its summary reaches the
    /// digest as the user's own syslog record. Off: the job script or a Slurm `TaskEpilog` runs it.
    pub analyze_at_exit: bool,
    /// The `mpistat` command that [`TraceConfig::analyze_at_exit`] starts.
    pub analyze_command: PathBuf,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            everyone: false,
            directory: "$HOME/.mpistat/traces/{job_id}".into(),
            budget_bytes: 64 << 20,
            skip_supersteps: 0,
            record_supersteps: 0,
            analyze_at_exit: true,
            analyze_command: PathBuf::from("/usr/bin/mpistat"),
        }
    }
}

/// Automatic escalation from the always-on profile to a trace ("level 6" of Rabenseifner,
/// "Automatic MPI Counter Profiling").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EscalationConfig {
    /// The escalation list `mpistat ingest` writes and the profiler reads at `MPI_Init`.
    pub list: PathBuf,
    /// The rule: a job is put on the list when all three hold (MPI share of the wall time in %,
    /// critical-path imbalance in % of the average work, CPU hours = ranks × wall time).
    pub mpi_percent_min: f64,
    pub critical_path_imbalance_percent_min: f64,
    pub cpu_hours_min: f64,
    /// Traced runs per entry, and days until an entry expires.
    pub captures: u32,
    pub expiry_days: u64,
    /// Bounds of the analysis of a traced job's trace (`mpistat analyze --send`, run by the
    /// job's user): time, and memory of each analysing process (`mpistat analyze` and every
    /// process of `mpistat-analyze`), checked against the trace's estimated need before reading;
    /// 0: three quarters of the node's memory (or its cgroup's `memory.max`), shared by the
    /// analysis processes on the node.
    pub analysis_timeout_seconds: u64,
    pub analysis_memory_bytes: u64,
}

impl Default for EscalationConfig {
    fn default() -> Self {
        EscalationConfig {
            list: PathBuf::from("/var/lib/mpistat/escalation.list"),
            mpi_percent_min: 30.0,
            critical_path_imbalance_percent_min: 20.0,
            cpu_hours_min: 1.0,
            captures: 1,
            expiry_days: 14,
            analysis_timeout_seconds: 600,
            analysis_memory_bytes: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SyslogConfig {
    /// The syslog daemon's datagram socket.
    pub socket: PathBuf,
    /// Syslog facility: `user`, `daemon` or `local0` .. `local7`.
    #[serde(deserialize_with = "choices::or_default")]
    pub facility: Facility,
    /// Syslog tag (program name) of the record lines (at most 32 bytes are used).
    pub tag: String,
    /// How long the profiler waits for room on the daemon's socket without any part of the record
    /// going out before it gives up (milliseconds; each part that goes out starts it again). 0:
    /// give up at the first full queue.
    pub stall_ms: u64,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        ProfilerConfig {
            enabled: true,
            detail_allowed: true,
            env_whitelist: vec![
                "OMPI_MCA_*".into(),
                "OMP_NUM_THREADS".into(),
                "SLURM_NTASKS".into(),
                "SLURM_CPUS_PER_TASK".into(),
                "UCX_TLS".into(),
            ],
            env_ignore: vec![
                "OMPI_MCA_orte_*".into(),
                "OMPI_MCA_ess*".into(),
                "OMPI_MCA_pmix*".into(),
                "OMPI_MCA_initial_wdir".into(),
                "OMPI_MCA_shmem_RUNTIME_QUERY_hint".into(),
                "OMPI_MCA_mpi_oversubscribe".into(),
                "OMPI_MCA_rmaps_base_oversubscribe".into(),
            ],
            env_value_max: 128,
            superstep_buffer_bytes: 16 * 1024,
            counters: vec![
                "instructions".into(),
                "cycles".into(),
                "fp-ops".into(),
                "llc-misses".into(),
            ],
            counters_allowed: vec![
                "instructions".into(),
                "cycles".into(),
                "fp-ops".into(),
                "llc-misses".into(),
                "l2-misses".into(),
                "branch-misses".into(),
                "task-clock".into(),
                "page-faults".into(),
                "context-switches".into(),
                "cpu-migrations".into(),
            ],
            counters_fallback: CountersFallback::default(),
            counters_when_oversubscribed: false,
            assume_all_ranks_profiled: false,
            record_on_sigterm: true,
        }
    }
}

impl Default for SyslogConfig {
    fn default() -> Self {
        SyslogConfig {
            socket: PathBuf::from("/run/mpistat-syslog.sock"),
            facility: Facility::default(),
            tag: "mpistat".into(),
            stall_ms: 100,
        }
    }
}

/// Where `mpistat ingest` stores jobs and `mpistat digest` reads them: a SQLite file (`path`,
/// the default) or a PostgreSQL database (`url`), not both.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// The SQLite database file (created with its directory's permissions if missing). Unset
    /// in a `[database]` that sets `url`.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// A PostgreSQL database, as a libpq URL (`postgresql://role@/database?host=/run/postgresql`
    /// for the Unix socket); a password in it is never shown.
    pub url: Option<String>,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            path: Some(PathBuf::from(DEFAULT_DATABASE)),
            url: None,
        }
    }
}

/// The SQLite database of a site that names none.
const DEFAULT_DATABASE: &str = "/var/lib/mpistat/mpistat.db";

/// The database `[database]` names.
#[derive(Debug, Clone, PartialEq)]
pub enum Database {
    /// `path`: a SQLite file.
    Sqlite(PathBuf),
    /// `url`: a PostgreSQL database (the URL as written, password and all).
    Postgres(String),
}

impl DatabaseConfig {
    /// The database named (`url` when set: [`SiteConfig::parse`] refuses both).
    pub fn database(&self) -> Database {
        match (&self.url, &self.path) {
            (Some(url), _) => Database::Postgres(url.clone()),
            (None, Some(path)) => Database::Sqlite(path.clone()),
            (None, None) => Database::Sqlite(PathBuf::from(DEFAULT_DATABASE)),
        }
    }
}

/// How `mpistat ingest` judges the lines it reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestConfig {
    /// Reject (as forged) records whose lines carry no kernel-attested sender uid. With `false`
    /// such records are accepted; a record whose attested uid differs from the uid it claims is
    /// always rejected.
    pub require_attested_uid: bool,
    /// Reject (as forged) records whose user name is not their attested uid's in the ingest
    /// host's password database (NSS): the attested uid has another name there, or the name
    /// another uid. A uid and name the host knows neither of cannot be checked and are accepted.
    /// `false` when the ingest host's accounts are not the cluster's (e.g. a local uid 1000 that
    /// is someone else on the cluster would make that user's records forged).
    pub check_user_names: bool,
    /// On a central log host: the relays (compute nodes' rsyslogds, as the log host names the
    /// authenticated connection they delivered on: `relay=<name>` in front of each line, see
    /// `etc/rsyslog/relay-loghost/`) whose attestations are believed. Patterns, `*`
    /// matching any run of characters (`node*.cluster`). When not empty, a record is accepted
    /// only with a kernel attestation delivered by one of them; lines without a relay, marked
    /// `unrelayed=` by the log host, or from another relay are rejected as forged. Empty: this
    /// host's own syslogd attests the senders (a single host), and relayed lines are rejected.
    pub trusted_relays: Vec<String>,
    /// Seconds a job may wait for its missing parts before it is reported incomplete.
    pub grace_seconds: u64,
    /// Seconds a partial record of a job on several nodes waits for the job's other partial
    /// record (after `MPI_Abort` on another node than rank 0's, the aborting rank's and rank
    /// 0's), counted from when ingest held it (not from the job's end) by the ingest run's
    /// clock: the two are stored as one job; one still alone after this is stored alone by the
    /// next ingest run (and its other half, if it comes later, is kept unstored).
    pub partial_grace_seconds: u64,
    /// The log host whose files this ingest reads: its read positions are this host's
    /// (several ingests into one database, one per log host, each resume their own). Empty:
    /// this machine's name.
    pub log_host: String,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            require_attested_uid: true,
            check_user_names: true,
            trusted_relays: Vec::new(),
            grace_seconds: 300,
            partial_grace_seconds: 600,
            log_host: String::new(),
        }
    }
}

/// What the weekly digest compares against.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DigestConfig {
    /// Cores of the machine: a week of them is 100 % of its capacity.
    pub capacity_cores: u64,
    /// MPI share of wall time (percent) from which it is flagged as critical.
    pub critical_mpi_percent: f64,
    /// Load-balance efficiency (0..1) below which it is flagged as critical.
    pub critical_load_balance: f64,
    /// Critical-path imbalance (percent of wall time) from which it is flagged as critical.
    pub critical_imbalance_percent: f64,
    /// Instructions per rank and second outside MPI below which the rate is flagged as critical.
    pub critical_instructions_per_s: f64,
    /// Last-level cache misses per rank and second outside MPI from which the rate is flagged as
    /// critical.
    pub critical_cache_misses_per_s: f64,
    /// A recommendation is made only when the time it is about (a routine's time, the
    /// imbalance, the computation, idle allocated CPUs) is at least this share of the user's
    /// CPU time (percent) ...
    pub recommend_min_percent: f64,
    /// ... and at least this many CPU hours (rank-hours).
    pub recommend_min_cpu_hours: f64,
    /// Latency and bandwidth of MPI routines measured by benchmarks, by routine name (e.g.
    /// `MPI_Alltoall`) or, for all others of a class, by class (`p2p`, `collective`,
    /// `one-sided`). Routines without an entry get no latency/transfer estimate.
    pub network: BTreeMap<String, LinkCost>,
}

/// Benchmark figures of one routine or class.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCost {
    /// Time of a zero-byte call, microseconds.
    pub latency_us: f64,
    /// Bytes per second for large messages, in MB/s (10^6 bytes).
    pub bandwidth_mb_s: f64,
}

impl Default for DigestConfig {
    fn default() -> Self {
        let cost = |latency_us, bandwidth_mb_s| LinkCost {
            latency_us,
            bandwidth_mb_s,
        };
        DigestConfig {
            capacity_cores: 1024,
            critical_mpi_percent: 25.0,
            critical_load_balance: 0.8,
            critical_imbalance_percent: 10.0,
            critical_instructions_per_s: 1e9,
            critical_cache_misses_per_s: 20e6,
            recommend_min_percent: 5.0,
            recommend_min_cpu_hours: 0.1,
            network: BTreeMap::from([
                ("p2p".to_string(), cost(1.5, 10_000.0)),
                ("collective".to_string(), cost(5.0, 5_000.0)),
                ("one-sided".to_string(), cost(2.0, 10_000.0)),
            ]),
        }
    }
}

/// How the weekly mails are sent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MailConfig {
    pub transport: MailTransport,
    /// Where the `directory` transport writes (made private to the service: mode 0700, files
    /// 0600, whatever the umask).
    pub directory: PathBuf,
    /// The From: address.
    pub from: String,
    /// Recipient of a user's mail; `{user}` is replaced by the login name.
    pub recipient: String,
    /// Optional file of `login address` lines, consulted before `recipient`.
    pub recipient_map: Option<PathBuf>,
    pub smtp_host: String,
    pub smtp_port: u16,
    pub smtp_starttls: StartTls,
    /// PEM file of the CA certificate(s) that signed the relay's certificate, trusted besides
    /// the system's store (`/etc/ssl/certs`, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set).
    pub smtp_ca_file: Option<PathBuf>,
    /// Login name for SMTP authentication (none when empty).
    pub smtp_user: String,
    /// File holding the SMTP password (first line), readable only by the digest's user.
    pub smtp_password_file: Option<PathBuf>,
    /// Log in over a connection without TLS (the password crosses the network in clear).
    /// `false`: with `smtp_user` set, `opportunistic` requires STARTTLS (on a loopback host too)
    /// and `off` is refused.
    pub smtp_allow_plaintext_login: bool,
    /// The sendmail program of the `sendmail` transport.
    pub sendmail_command: PathBuf,
    /// Seconds the sendmail program may take for one mail; then it is killed (with its
    /// children) and the mail counts as failed, to be tried again on the next run.
    pub sendmail_timeout_seconds: u64,
}

/// How the weekly mails leave the digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MailTransport {
    /// `.eml` files written to [`MailConfig::directory`] (tests, the demo, or a site's own
    /// pick-up).
    Directory,
    /// An SMTP server ([`MailConfig::smtp_host`]).
    Smtp,
    /// The local MTA's `sendmail` program ([`MailConfig::sendmail_command`]).
    Sendmail,
}

/// TLS of the SMTP transport. The server's certificate is always verified when TLS is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartTls {
    /// Never: the mail (and a login, if allowed) crosses the network in clear.
    Off,
    /// STARTTLS when the server offers it, its certificate verified (a certificate that does
    /// not verify fails the mail, never falls back to clear text). On a loopback host
    /// (`localhost`, `127.0.0.0/8`, `::1`) the mail never leaves the machine: no TLS.
    Opportunistic,
    /// STARTTLS always, the certificate verified: a server without it fails the mail.
    Required,
}

impl Default for MailConfig {
    fn default() -> Self {
        MailConfig {
            transport: MailTransport::Directory,
            directory: PathBuf::from("/var/lib/mpistat/mail"),
            from: "mpistat <mpistat@localhost>".into(),
            recipient: "{user}@localhost".into(),
            recipient_map: None,
            smtp_host: "localhost".into(),
            smtp_port: 25,
            smtp_starttls: StartTls::Opportunistic,
            smtp_ca_file: None,
            smtp_user: String::new(),
            smtp_password_file: None,
            smtp_allow_plaintext_login: false,
            sendmail_command: PathBuf::from("/usr/sbin/sendmail"),
            sendmail_timeout_seconds: 60,
        }
    }
}

/// What the admin pages (`mpistat site-report`, `mpistat serve`) flag as critical.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SiteReportConfig {
    /// A job is critical when its MPI share of wall time (percent) is at least this...
    pub critical_mpi_percent: f64,
    /// ...or its critical-path imbalance is at least this percent of its wall time.
    pub critical_imbalance_percent: f64,
    /// Jobs smaller than this many CPU hours are never listed as critical (test runs).
    pub critical_min_cpu_hours: f64,
    /// The overview names how much CPU time the top N users consumed, for each N here.
    pub top_users: Vec<usize>,
    /// Where `mpistat serve` answers (base URL ending in `/`): the static site links the jobs it
    /// has no page of there. Empty: such jobs are not linked.
    pub live_url: String,
    /// The group the static pages are given to (the web server's; the service must be a
    /// member): pages 0640, directories 0750, whatever the umask. Empty: the group they get
    /// (the service's, or a setgid directory's).
    pub group: String,
}

impl Default for SiteReportConfig {
    fn default() -> Self {
        SiteReportConfig {
            critical_mpi_percent: 15.0,
            critical_imbalance_percent: 20.0,
            critical_min_cpu_hours: 0.0,
            top_users: vec![5, 10, 20],
            live_url: String::new(),
            group: "www-data".into(),
        }
    }
}

/// Who may see what in `mpistat serve`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Where the server listens (`--listen` overrides): `unix:PATH`, a Unix socket that only the
    /// service and `socket_group` may open, or a TCP address (`127.0.0.1:8080`).
    pub listen: Listen,
    /// The group given the Unix socket (mode 0660): the reverse proxy's (`www-data` for Debian's
    /// nginx and Apache); the service must be a member. Empty: the service's own group.
    pub socket_group: String,
    /// `header`: the login name is in `user_header`, set by a trusted reverse proxy (on a Unix
    /// socket or with `proxy_secret_file`). `token`: `Authorization: Bearer <token>`, looked up
    /// in `tokens_file`.
    #[serde(deserialize_with = "choices::or_default")]
    pub auth: ServeAuth,
    /// The request header that carries the login name with `auth = "header"`.
    pub user_header: String,
    /// Lines `login token` (`#` comments); must be owned by root and not writable by others.
    pub tokens_file: PathBuf,
    /// A secret the proxy adds to every request in `proxy_secret_header` (the file's first
    /// line, at least 16 characters; owned by root, not writable by group or others nor readable
    /// by others). When set, a request without it gets 401, whatever else it carries.
    pub proxy_secret_file: Option<PathBuf>,
    /// The request header that carries the proxy's secret.
    pub proxy_secret_header: String,
    /// Start in header mode on a TCP address without `proxy_secret_file`: then anyone who can
    /// reach the port can claim to be anybody (loopback included: every local user can).
    pub allow_unguarded_header: bool,
    /// Logins that see every page; everyone else sees only their own user and job pages.
    pub admins: Vec<String>,
    /// Connections open at once, and from one peer (a Unix socket's uid, a TCP address). Past
    /// either, the oldest connection still sending its request makes room, else the new one
    /// gets 503.
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    /// Seconds a client has to send its request head, and to take the answer.
    pub request_timeout_s: u64,
    pub response_timeout_s: u64,
    /// How many applications, Slurm accounts and partitions `/metrics` names in each window (the
    /// ones with the most MPI time): at most [`METRICS_TOP`], bounding the series a scrape
    /// gives Prometheus.
    pub metrics_top: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: Listen::default(),
            socket_group: "www-data".into(),
            auth: ServeAuth::default(),
            user_header: "REMOTE_USER".into(),
            tokens_file: PathBuf::from("/etc/mpistat/tokens"),
            proxy_secret_file: None,
            proxy_secret_header: "X-Mpistat-Proxy-Secret".into(),
            allow_unguarded_header: false,
            admins: vec!["root".into()],
            max_connections: 512,
            max_connections_per_peer: 64,
            request_timeout_s: 10,
            response_timeout_s: 60,
            metrics_top: 10,
        }
    }
}

/// Something wrong with the configuration; the affected settings keep their defaults.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigProblem {
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{path}: {reason} (using defaults)")]
    Malformed { path: String, reason: String },
    #[error("{path}: unknown syslog facility {facility:?} (using local5)")]
    BadFacility { path: String, facility: String },
    #[error("{path}: [serve] auth must be \"header\" or \"token\", not {auth:?} (using header)")]
    BadServeAuth { path: String, auth: String },
    #[error(
        "{path}: [profiler] counters_fallback must be \"per-call\" or \"totals\", not {value:?} \
         (using totals)"
    )]
    BadCountersFallback { path: String, value: String },
    #[error("{path}: [database] sets both `path` (SQLite) and `url` (PostgreSQL): keep one")]
    TwoDatabases { path: String },
    #[error("{path}: [database] url is no postgresql:// URL")]
    NotPostgresUrl { path: String },
    #[error("{path}: {setting} {value} is more than {max} (using {max})")]
    TooLarge {
        path: String,
        setting: &'static str,
        value: u64,
        max: u64,
    },
}

impl SiteConfig {
    /// Parse `text` (read from `path`, named in problems). Never fails: on a malformed file the
    /// defaults are returned with the problem.
    pub fn parse(text: &str, path: &str) -> (SiteConfig, Vec<ConfigProblem>) {
        let mut problems = Vec::new();
        let mut config = match basic_toml::from_str::<SiteConfig>(text) {
            Ok(c) => {
                problems.extend(choices::problems(text, path));
                c
            }
            Err(e) => {
                let reason = e.to_string().lines().collect::<Vec<_>>().join(" ");
                problems.push(ConfigProblem::Malformed {
                    path: path.into(),
                    reason,
                });
                SiteConfig::default()
            }
        };
        if let Some(url) = &config.database.url {
            if config.database.path.is_some() {
                problems.push(ConfigProblem::TwoDatabases { path: path.into() });
            }
            if !["postgresql://", "postgres://"]
                .iter()
                .any(|scheme| url.starts_with(scheme))
            {
                problems.push(ConfigProblem::NotPostgresUrl { path: path.into() });
            }
        }
        config.clamp(path, &mut problems);
        (config, problems)
    }

    /// Clamps every setting that has a [`Most`], with a problem for each one clamped.
    fn clamp(&mut self, path: &str, problems: &mut Vec<ConfigProblem>) {
        let mut at_most = |value: u64, most: Most| {
            if value <= most.max {
                return value;
            }
            problems.push(ConfigProblem::TooLarge {
                path: path.into(),
                setting: most.setting,
                value,
                max: most.max,
            });
            most.max
        };
        // The maxima fit a usize where the profiler builds (x86_64).
        let profiler = &mut self.profiler;
        profiler.env_value_max = at_most(profiler.env_value_max as u64, ENV_VALUE_MAX) as usize;
        profiler.superstep_buffer_bytes = at_most(
            profiler.superstep_buffer_bytes as u64,
            SUPERSTEP_BUFFER_BYTES,
        ) as usize;
        self.trace.budget_bytes =
            at_most(self.trace.budget_bytes as u64, TRACE_BUDGET_BYTES) as usize;
        self.syslog.stall_ms = at_most(self.syslog.stall_ms, SYSLOG_STALL_MS);
        self.serve.metrics_top = at_most(self.serve.metrics_top as u64, METRICS_TOP) as usize;
    }

    /// Read and parse the file at `path`; a missing or unreadable file gives the defaults. Only
    /// a regular file is read, of at most [`CONFIG_MAX_BYTES`], without blocking and through no
    /// symlink of another user ([`files`]): `MPISTAT_CONFIG` may name anything.
    pub fn load(path: &Path) -> (SiteConfig, Vec<ConfigProblem>) {
        let unreadable = |reason: String| {
            (
                SiteConfig::default(),
                vec![ConfigProblem::Unreadable {
                    path: path.display().to_string(),
                    reason,
                }],
            )
        };
        match files::read_regular(path, CONFIG_MAX_BYTES) {
            Ok(capped) if !capped.whole => {
                unreadable(format!("larger than {CONFIG_MAX_BYTES} bytes"))
            }
            Ok(capped) => match String::from_utf8(capped.bytes) {
                Ok(text) => SiteConfig::parse(&text, &path.display().to_string()),
                Err(_) => unreadable("not UTF-8 text".into()),
            },
            Err(e) => unreadable(e.to_string()),
        }
    }

    /// The file named by `MPISTAT_CONFIG`, else [`DEFAULT_PATH`].
    pub fn path_from_env() -> PathBuf {
        std::env::var_os("MPISTAT_CONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
    }
}

impl ProfilerConfig {
    /// Whether the environment variable `name` is recorded: on the whitelist and not ignored.
    pub fn env_whitelisted(&self, name: &str) -> bool {
        let matches = |pat: &String| match pat.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pat,
        };
        self.env_whitelist.iter().any(matches) && !self.env_ignore.iter().any(matches)
    }
}

/// Most bytes of the site's tag put into a syslog line (RFC 3164's limit), so that every datagram
/// fits in the room the record's `wire::MAX_MESSAGE` leaves for the syslog header.
pub const SYSLOG_TAG_MAX: usize = 32;

/// An RFC 3164 message as glibc's `syslog()` writes it (`<PRI>Mmm dd hh:mm:ss TAG[PID]: MSG`;
/// the time is `unix_s` in UTC: syslogd uses its own anyway; the tag cut to [`SYSLOG_TAG_MAX`]
/// bytes). Used by everything that sends records: the profiler and `mpistat analyze --send`.
pub fn syslog_frame(priority: u8, tag: &str, pid: u32, message: &str, unix_s: u64) -> String {
    let mut cut = tag.len().min(SYSLOG_TAG_MAX);
    while !tag.is_char_boundary(cut) {
        cut -= 1;
    }
    let tag = &tag[..cut];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // Month and day of the civil (proleptic Gregorian) date of a day count (H. Hinnant).
    let days = (unix_s / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let secs = unix_s % 86_400;
    format!(
        "<{priority}>{} {day:2} {:02}:{:02}:{:02} {tag}[{pid}]: {message}",
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_looks_like_glibc_syslog() {
        // 2026-02-28 23:59:59 and 2024-02-29 00:00:05 UTC.
        let f = syslog_frame(174, "mpistat", 42, "hello", 1_772_323_199);
        assert_eq!(f, "<174>Feb 28 23:59:59 mpistat[42]: hello");
        let f = syslog_frame(14, "t", 1, "x", 1_709_164_805);
        assert_eq!(f, "<14>Feb 29 00:00:05 t[1]: x");
    }

    #[test]
    fn empty_file_gives_defaults() {
        let (c, p) = SiteConfig::parse("", "x");
        assert_eq!(c, SiteConfig::default());
        assert!(p.is_empty());
    }

    #[test]
    fn malformed_file_gives_defaults_and_says_why() {
        let (c, p) = SiteConfig::parse("[syslog\nsocket = 3", "/etc/x.toml");
        assert_eq!(c, SiteConfig::default());
        assert!(matches!(&p[0], ConfigProblem::Malformed { path, .. } if path == "/etc/x.toml"));
    }

    #[test]
    fn unknown_key_is_a_problem_not_silence() {
        let (_, p) = SiteConfig::parse("[syslog]\nsokcet = \"/x\"", "x");
        assert_eq!(p.len(), 1, "{p:?}");
    }

    #[test]
    fn the_database_is_a_file_or_a_server_never_both() {
        let database = |text: &str| {
            let (c, p) = SiteConfig::parse(text, "x");
            (c.database.database(), p)
        };
        let default = Database::Sqlite(PathBuf::from(DEFAULT_DATABASE));
        assert_eq!(database(""), (default.clone(), vec![]));
        assert_eq!(database("[database]"), (default, vec![]));
        let url = "postgresql://mpistat@/mpistat?host=/run/postgresql";
        assert_eq!(
            database(&format!("[database]\nurl = {url:?}")),
            (Database::Postgres(url.into()), vec![])
        );
        let (_, both) = database(&format!("[database]\npath = \"/x.db\"\nurl = {url:?}"));
        assert!(
            matches!(&both[..], [ConfigProblem::TwoDatabases { .. }]),
            "{both:?}"
        );
        let (_, not_url) = database("[database]\nurl = \"/var/lib/mpistat.db\"");
        assert!(
            matches!(&not_url[..], [ConfigProblem::NotPostgresUrl { .. }]),
            "{not_url:?}"
        );
    }

    #[test]
    fn settings_are_read() {
        let (c, p) = SiteConfig::parse(
            "[profiler]\nenabled = false\n[syslog]\nsocket = \"/tmp/s\"\nfacility = \"local2\"",
            "x",
        );
        assert!(p.is_empty());
        assert!(!c.profiler.enabled);
        assert_eq!(c.syslog.socket, PathBuf::from("/tmp/s"));
        assert_eq!(c.syslog.facility, Facility::Local(2));
        assert_eq!(c.syslog.facility.code(), 18);
    }

    #[test]
    fn mail_settings_of_few_values_are_checked_once() {
        let (c, p) = SiteConfig::parse(
            "[mail]\ntransport = \"sendmail\"\nsmtp_starttls = \"required\"",
            "x",
        );
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(c.mail.transport, MailTransport::Sendmail);
        assert_eq!(c.mail.smtp_starttls, StartTls::Required);
        for bad in ["transport = \"pigeon\"", "smtp_starttls = \"maybe\""] {
            let (_, p) = SiteConfig::parse(&format!("[mail]\n{bad}"), "x");
            assert!(
                matches!(&p[..], [ConfigProblem::Malformed { reason, .. }] if reason.contains("unknown variant")),
                "{bad}: {p:?}"
            );
        }
    }

    #[test]
    fn a_bad_value_of_a_few_valued_setting_costs_that_setting_only() {
        let (c, p) = SiteConfig::parse(
            "[profiler]\ncounters_fallback = \"sometimes\"\nenv_value_max = 7\n\
             [syslog]\nfacility = \"local9\"\ntag = \"t\"\n\
             [serve]\nauth = \"password\"\nlisten = \"127.0.0.1:8080\"",
            "x",
        );
        assert_eq!(c.syslog.facility, Facility::Local(5));
        assert_eq!(c.serve.auth, ServeAuth::Header);
        assert_eq!(c.profiler.counters_fallback, CountersFallback::Totals);
        // The rest of the file is read.
        assert_eq!(c.profiler.env_value_max, 7);
        assert_eq!(c.syslog.tag, "t");
        assert_eq!(c.serve.listen, Listen::Tcp("127.0.0.1:8080".into()));
        let said: Vec<String> = p.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "x: unknown syslog facility \"local9\" (using local5)",
                "x: [serve] auth must be \"header\" or \"token\", not \"password\" (using header)",
                "x: [profiler] counters_fallback must be \"per-call\" or \"totals\", not \
                 \"sometimes\" (using totals)",
            ]
        );
    }

    #[test]
    fn few_valued_settings_read_every_value_they_have() {
        let (c, p) = SiteConfig::parse(
            "[profiler]\ncounters_fallback = \"per-call\"\n[syslog]\nfacility = \"user\"\n\
             [serve]\nauth = \"token\"\nlisten = \"unix:/tmp/s.sock\"",
            "x",
        );
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(c.profiler.counters_fallback, CountersFallback::PerCall);
        assert_eq!(c.syslog.facility.code(), 1);
        assert_eq!(c.serve.auth, ServeAuth::Token);
        assert_eq!(c.serve.listen, Listen::Unix("/tmp/s.sock".into()));
        for (name, code) in [("daemon", 3), ("local0", 16), ("local7", 23)] {
            let facility: Facility = name.parse().unwrap();
            assert_eq!((facility.code(), facility.to_string()), (code, name.into()));
        }
        assert!("local8".parse::<Facility>().is_err());
        assert_eq!(Listen::parse("unix:/tmp/s").to_string(), "unix:/tmp/s");
    }

    #[test]
    fn sizes_beyond_their_most_are_clamped_and_said() {
        let (c, p) = SiteConfig::parse(
            "[profiler]\nsuperstep_buffer_bytes = 1000000000000000\nenv_value_max = 5000\n\
             [trace]\nbudget_bytes = 1000000000000000\n[syslog]\nstall_ms = 86400000\n\
             [serve]\nmetrics_top = 100000",
            "x",
        );
        assert_eq!(c.profiler.superstep_buffer_bytes, 64 << 20);
        assert_eq!(c.profiler.env_value_max, 4096);
        assert_eq!(c.trace.budget_bytes, 64 << 30);
        assert_eq!(c.syslog.stall_ms, 10_000);
        assert_eq!(c.serve.metrics_top, 100);
        let said: Vec<String> = p.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "x: [profiler] env_value_max 5000 is more than 4096 (using 4096)",
                "x: [profiler] superstep_buffer_bytes 1000000000000000 is more than 67108864 \
                 (using 67108864)",
                "x: [trace] budget_bytes 1000000000000000 is more than 68719476736 (using \
                 68719476736)",
                "x: [syslog] stall_ms 86400000 is more than 10000 (using 10000)",
                "x: [serve] metrics_top 100000 is more than 100 (using 100)",
            ]
        );
    }

    #[test]
    fn only_a_regular_file_of_at_most_a_mebibyte_is_read() {
        let dir = std::env::temp_dir().join(format!("mpistat-site-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let unreadable = |path: &Path| match SiteConfig::load(path) {
            (c, p) if c == SiteConfig::default() && p.len() == 1 => p[0].to_string(),
            other => panic!("{other:?}"),
        };
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(unreadable(&fifo).ends_with(": not a regular file (a FIFO)"));
        assert!(unreadable(Path::new("/dev/zero")).ends_with("(a character device)"));
        let big = dir.join("big.toml");
        std::fs::write(&big, "#".repeat(CONFIG_MAX_BYTES as usize + 1)).unwrap();
        assert!(unreadable(&big).ends_with(": larger than 1048576 bytes"));
        std::fs::write(&big, "[syslog]\nstall_ms = 5\n").unwrap();
        assert_eq!(SiteConfig::load(&big).0.syslog.stall_ms, 5);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn whitelist_prefix_and_exact() {
        let c = ProfilerConfig::default();
        assert!(c.env_whitelisted("OMPI_MCA_btl"));
        assert!(c.env_whitelisted("OMP_NUM_THREADS"));
        assert!(!c.env_whitelisted("OMP_NUM_THREADSX"));
        assert!(!c.env_whitelisted("HOME"));
        assert!(c.env_whitelisted("OMPI_MCA_btl_vader_single_copy_mechanism"));
        assert!(
            !c.env_whitelisted("OMPI_MCA_orte_hnp_uri"),
            "mpirun's own variables are ignored"
        );
    }
}

#[cfg(test)]
mod shipped_file {
    use super::*;

    /// etc/site.toml documents every setting with its default: it must parse cleanly and equal
    /// the built-in defaults, so the documentation cannot drift from the code.
    #[test]
    fn etc_site_toml_is_the_defaults() {
        let text = include_str!("../../etc/site.toml");
        let (config, problems) = SiteConfig::parse(text, "etc/site.toml");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(config, SiteConfig::default());
    }
}
