//! `mpistat serve`'s `/metrics` scraped by a real Prometheus (Debian's `prometheus` 2.42, on a
//! free port, with a storage directory of its own): known jobs, sent by real users (`met-alice`,
//! `met-bob`, made with `useradd`) through rsyslogd running the shipped configuration and
//! ingested by `mpistat ingest`, come out of PromQL queries on Prometheus's HTTP API as worked
//! out by hand. Prometheus scrapes with an admin's token (`authorization.credentials_file`);
//! its scrapes without a token and with a user's who is no admin fail (`up` is 0), and so do
//! such requests sent directly (401, 403). `promtool check metrics` (Prometheus's own parser and
//! linter) accepts the exposition, and every query of the shipped Grafana dashboard gives data.

use mpistat_testkit::{dashboard, known};

use known::{Known, Owner};
use mpistat_e2e::rsyslog::{host_rsyslog_globals, RsyslogDaemon};
use mpistat_e2e::*;
use mpistat_record::{wire, AnalysisRecord};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const HOUR_MS: u64 = 3_600_000;
const MINUTE_MS: u64 = 60_000;
const ADMIN: &str = "met-admin";
const ADMIN_TOKEN: &str = "met-admin-token-0123456789abcdef";
const ALICE_TOKEN: &str = "met-alice-token-0123456789abcdef";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A test user, as made with `useradd`, on this host.
struct Local<'a>(&'a User);

impl Owner for Local<'_> {
    fn name(&self) -> String {
        self.0.name.clone()
    }
    fn uid(&self) -> u32 {
        self.0.uid
    }
    fn home(&self) -> String {
        self.0.home.display().to_string()
    }
    fn host(&self) -> String {
        host_name()
    }
}

/// A child process killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET url` with curl and these extra arguments: (HTTP status, body).
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

/// Prometheus on `port`.
struct Prometheus {
    port: u16,
    _daemon: Daemon,
}

impl Prometheus {
    /// The instant query `expr`'s result: (labels, value) of each series. Panics on an error.
    fn query(&self, expr: &str) -> Vec<(serde_json::Map<String, serde_json::Value>, f64)> {
        let url = format!("http://127.0.0.1:{}/api/v1/query", self.port);
        let (status, body) = curl(&url, &["-G", "--data-urlencode", &format!("query={expr}")]);
        let answer: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{expr}: HTTP {status}, not JSON ({e}): {body}"));
        assert_eq!(answer["status"], "success", "{expr}: {body}");
        answer["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{expr}: not a vector: {body}"))
            .iter()
            .map(|series| {
                let labels = series["metric"].as_object().unwrap().clone();
                let value = series["value"][1].as_str().unwrap().parse().unwrap();
                (labels, value)
            })
            .collect()
    }

    /// The one value of `expr` (panics unless there is exactly one series).
    fn value(&self, expr: &str) -> f64 {
        let result = self.query(expr);
        assert_eq!(result.len(), 1, "{expr}: {result:?}");
        result[0].1
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn prometheus_scrapes_the_site_figures_with_an_admins_token_only() {
    let _serial = serial();
    let Some(alice) = User::ensure("met-alice") else {
        eprintln!("SKIPPED: needs root to make users");
        return;
    };
    let bob = User::ensure("met-bob").unwrap();
    // The windows are whole hours up to the current one: start early enough in an hour that
    // the test ends in it.
    let minute = now_ms() % HOUR_MS / MINUTE_MS;
    if minute >= 55 {
        let wait = HOUR_MS - now_ms() % HOUR_MS + 2_000;
        eprintln!("waiting {} s for the next hour", wait / 1000);
        std::thread::sleep(Duration::from_millis(wait));
    }
    let hour_start = now_ms() / HOUR_MS * HOUR_MS;

    let dir = Scratch::new("metrics");
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_rsyslogd, socket, records_log) =
        RsyslogDaemon::shipped_single_host(d, &host_rsyslog_globals());

    // The jobs, by where they end (the windows end at `hour_start`):
    let lammps = "/apps/lammps/bin/lmp";
    let gromacs = "/apps/gromacs/bin/gmx";
    let aout = format!("{}/a.out", alice.home.display());
    let jobs = [
        // In all three windows; meets the escalation rule, traced by escalation.
        Known {
            n: 1,
            user: Local(&alice),
            exe: lammps,
            slurm: Some(("chem", "compute")),
            end_ms: hour_start - 30 * MINUTE_MS,
            ranks: 4,
            wall_s: 3600,
            mpi_percent: 50,
            critical_path_s: Some(720),
            traced: Some("escalation"),
        },
        // In all three.
        Known {
            n: 2,
            user: Local(&bob),
            exe: gromacs,
            slurm: Some(("bio", "gpu")),
            end_ms: hour_start - 10 * MINUTE_MS,
            ranks: 2,
            wall_s: 1800,
            mpi_percent: 10,
            critical_path_s: None,
            traced: None,
        },
        // The day and the week.
        Known {
            n: 3,
            user: Local(&bob),
            exe: gromacs,
            slurm: Some(("bio", "gpu")),
            end_ms: hour_start - 22 * HOUR_MS,
            ranks: 8,
            wall_s: 3600,
            mpi_percent: 25,
            critical_path_s: Some(360),
            traced: None,
        },
        // The week only, no Slurm facts.
        Known {
            n: 4,
            user: Local(&alice),
            exe: &aout,
            slurm: None,
            end_ms: hour_start - 5 * 24 * HOUR_MS,
            ranks: 1,
            wall_s: 600,
            mpi_percent: 0,
            critical_path_s: None,
            traced: None,
        },
        // The current hour: none (though it meets the rule).
        Known {
            n: 5,
            user: Local(&alice),
            exe: lammps,
            slurm: Some(("chem", "compute")),
            end_ms: hour_start + 1,
            ranks: 64,
            wall_s: 7200,
            mpi_percent: 90,
            critical_path_s: Some(3600),
            traced: None,
        },
    ];
    let socket = socket.to_str().unwrap().to_string();
    let send = |user: &User, lines: Vec<String>| {
        for line in &lines {
            logger(&["-u", &socket], Some(user.uid), line);
        }
    };
    let first_line_ms = now_ms();
    for job in &jobs {
        send(job.user.0, wire::encode(&job.record()));
    }
    // Job 1's analysis, sent by alice as `mpistat analyze --send` would.
    let analysis = AnalysisRecord {
        version: mpistat_record::analysis::ANALYSIS_MODEL_VERSION,
        job_key: jobs[0].record().wire_key(),
        uid: alice.uid,
        user: alice.name.clone(),
        host: host_name(),
        dir: jobs[0].record().trace.unwrap().dir,
        summary: Some("{}".into()),
        error: None,
        analysed_unix_ms: now_ms(),
    };
    send(&alice, wire::encode_analysis(&analysis));
    // Bob sends a record claiming to be alice's: rejected as forged (now: in no window yet).
    let mut forged = jobs[1].record();
    forged.uid = alice.uid;
    forged.user = alice.name.clone();
    forged.pid += 1000;
    send(&bob, wire::encode(&forged));
    let lines = |path: &Path| {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let expected_lines = jobs
        .iter()
        .map(|j| wire::encode(&j.record()).len())
        .sum::<usize>()
        + wire::encode_analysis(&analysis).len()
        + wire::encode(&forged).len();
    while lines(&records_log) < expected_lines {
        assert!(
            Instant::now() < deadline,
            "rsyslogd did not write every line"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The site: bearer tokens on TCP, met-admin an admin, met-alice not.
    let tokens = d.join("tokens");
    std::fs::write(
        &tokens,
        format!("{ADMIN} {ADMIN_TOKEN}\n{} {ALICE_TOKEN}\n", alice.name),
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = free_port();
    let config = d.join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {db:?}\n[escalation]\nlist = {list:?}\n\
             [serve]\nlisten = \"127.0.0.1:{port}\"\nauth = \"token\"\ntokens_file = {tokens:?}\n\
             admins = [{ADMIN:?}]\n",
            db = d.join("mpistat.db").display().to_string(),
            list = d.join("escalation.list").display().to_string(),
            tokens = tokens.display().to_string(),
        ),
    )
    .unwrap();
    let records = records_log.to_str().unwrap();
    let out = mpistat_as(None, &["ingest", records], &config);
    assert!(out.status.success());
    let report = mpistat_as(None, &["ingest", "--report"], &config);
    let report = String::from_utf8_lossy(&report.stdout);
    assert!(report.contains("forged"), "{report}");
    let last_line_ms = now_ms();

    let log = std::fs::File::create(d.join("serve.log")).unwrap();
    let serve = Daemon(
        Command::new(mpistat_binary())
            .args(["serve", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let metrics_url = format!("http://127.0.0.1:{port}/metrics");
    let admin = format!("Authorization: Bearer {ADMIN_TOKEN}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (status, body) = curl(&metrics_url, &["-H", &admin]);
        if status == 200 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "serve does not answer: {}",
            std::fs::read_to_string(d.join("serve.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Directly: without a token, and as a user who is no admin.
    assert_eq!(curl(&metrics_url, &[]).0, 401);
    let alice_bearer = format!("Authorization: Bearer {ALICE_TOKEN}");
    assert_eq!(curl(&metrics_url, &["-H", &alice_bearer]).0, 403);
    let (_, head) = curl(&metrics_url, &["-H", &admin, "-I"]);
    assert!(
        head.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );

    // Prometheus's own parser and linter.
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (scripts/prereqs.sh installs prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // Prometheus: the site's job with the admin's token, one without a token, one with alice's.
    let admin_token = d.join("admin-token");
    std::fs::write(&admin_token, ADMIN_TOKEN).unwrap();
    let alice_token = d.join("alice-token");
    std::fs::write(&alice_token, ALICE_TOKEN).unwrap();
    let target = format!("[\"127.0.0.1:{port}\"]");
    let prometheus_yml = d.join("prometheus.yml");
    std::fs::write(
        &prometheus_yml,
        format!(
            "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\nscrape_configs:\n\
             - job_name: mpistat\n  static_configs: [{{targets: {target}}}]\n\
             \x20 authorization: {{credentials_file: {admin:?}}}\n\
             - job_name: anonymous\n  static_configs: [{{targets: {target}}}]\n\
             - job_name: not-an-admin\n  static_configs: [{{targets: {target}}}]\n\
             \x20 authorization: {{credentials_file: {alice:?}}}\n",
            admin = admin_token.display().to_string(),
            alice = alice_token.display().to_string(),
        ),
    )
    .unwrap();
    let prometheus_port = free_port();
    let prometheus_log = std::fs::File::create(d.join("prometheus.log")).unwrap();
    let prometheus = Prometheus {
        port: prometheus_port,
        _daemon: Daemon(
            Command::new("prometheus")
                .arg(format!("--config.file={}", prometheus_yml.display()))
                .arg(format!("--storage.tsdb.path={}", d.join("tsdb").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(prometheus_log)
                .spawn()
                .expect("prometheus (scripts/prereqs.sh installs it)"),
        ),
    };
    let ready = format!("http://127.0.0.1:{prometheus_port}/-/ready");
    let deadline = Instant::now() + Duration::from_secs(120);
    let scraped = |job: &str| format!("count_over_time(up{{job=\"{job}\"}}[1h])");
    loop {
        let up = curl(&ready, &[]).0 == 200
            && ["mpistat", "anonymous", "not-an-admin"]
                .iter()
                .all(|job| !prometheus.query(&scraped(job)).is_empty())
            && !prometheus.query("mpistat_jobs").is_empty();
        if up {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape all three jobs: {}",
            std::fs::read_to_string(d.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(prometheus.value("up{job=\"mpistat\"}"), 1.0);
    // Prometheus's OpenMetrics parser took every sample.
    let samples = body.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(
        prometheus.value("scrape_samples_scraped{job=\"mpistat\"}"),
        samples as f64
    );
    assert_eq!(prometheus.value("up{job=\"anonymous\"}"), 0.0);
    assert_eq!(prometheus.value("up{job=\"not-an-admin\"}"), 0.0);
    let site = |series: &str, window: &str| {
        prometheus.value(&format!("{series}{{job=\"mpistat\",window=\"{window}\"}}"))
    };

    // The windows end where the current hour began (still the one the jobs were placed by).
    assert_eq!(
        prometheus.value("mpistat_window_end_timestamp_seconds") * 1000.0,
        hour_start as f64,
        "an hour ended during the test"
    );
    // The last hour: jobs 1 and 2. CPU 4 x 3600 + 2 x 1800 s, MPI 7,200 + 360 s, imbalance
    // job 1's alone (720 of 3,600 s).
    assert_eq!(site("mpistat_jobs", "1h"), 2.0);
    assert!(close(site("mpistat_cpu_seconds", "1h"), 18_000.0));
    assert!(close(site("mpistat_mpi_cpu_seconds", "1h"), 7_560.0));
    assert!(close(site("mpistat_mpi_cpu_ratio", "1h"), 0.42));
    assert!(close(
        site("mpistat_critical_path_imbalance_ratio", "1h"),
        0.2
    ));
    assert_eq!(site("mpistat_escalation_rule_jobs", "1h"), 1.0);
    assert_eq!(site("mpistat_escalated_traces", "1h"), 1.0);
    assert_eq!(
        prometheus.value("mpistat_escalated_traces_analysed{window=\"1h\",status=\"ok\"}"),
        1.0
    );
    // The day adds job 3: imbalance (20 % x 14,400 s + 10 % x 28,800 s) / 43,200 s.
    assert_eq!(site("mpistat_jobs", "1d"), 3.0);
    assert!(close(site("mpistat_cpu_seconds", "1d"), 46_800.0));
    assert!(close(
        site("mpistat_mpi_cpu_ratio", "1d"),
        14_760.0 / 46_800.0
    ));
    assert!(close(
        site("mpistat_critical_path_imbalance_ratio", "1d"),
        2.0 / 15.0
    ));
    assert_eq!(site("mpistat_escalation_rule_jobs", "1d"), 1.0);
    // The week adds job 4.
    assert_eq!(site("mpistat_jobs", "7d"), 4.0);
    assert!(close(site("mpistat_cpu_seconds", "7d"), 47_400.0));

    // The biggest by MPI time.
    let top = |dimension: &str, window: &str| -> Vec<(String, f64)> {
        let expr = format!("mpistat_{dimension}_mpi_cpu_seconds{{window=\"{window}\"}}");
        let mut found: Vec<(String, f64)> = prometheus
            .query(&expr)
            .into_iter()
            .map(|(labels, v)| (labels[dimension].as_str().unwrap().to_string(), v))
            .collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1));
        found
    };
    let named = |list: &[(&str, f64)]| -> Vec<(String, f64)> {
        list.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    };
    assert_eq!(
        top("application", "1h"),
        named(&[(lammps, 7_200.0), (gromacs, 360.0)])
    );
    assert_eq!(
        top("application", "7d"),
        named(&[(gromacs, 7_560.0), (lammps, 7_200.0), (&aout, 0.0)])
    );
    assert_eq!(
        top("account", "1d"),
        named(&[("bio", 7_560.0), ("chem", 7_200.0)])
    );
    assert_eq!(
        top("partition", "1h"),
        named(&[("compute", 7_200.0), ("gpu", 360.0)])
    );
    assert!(close(
        prometheus.value(
            "mpistat_application_cpu_seconds{window=\"1d\",application=\"/apps/gromacs/bin/gmx\"}"
        ),
        32_400.0
    ));
    // In PromQL as a dashboard asks: the MPI CPU hours of the day's biggest application.
    let biggest =
        prometheus.query("topk(1, mpistat_application_mpi_cpu_seconds{window=\"1d\"}) / 3600");
    assert_eq!(biggest.len(), 1);
    assert_eq!(biggest[0].0["application"], gromacs);
    assert!(close(biggest[0].1, 2.1));

    // The newest line ingest read was written between the first line sent and the end of
    // ingest; the lag is counted from it.
    let newest_ms = prometheus.value("mpistat_ingest_newest_line_timestamp_seconds") * 1000.0;
    assert!(
        newest_ms >= (first_line_ms - 1000) as f64 && newest_ms <= last_line_ms as f64,
        "{newest_ms} not within {first_line_ms}..{last_line_ms}"
    );
    let lag = prometheus.value("mpistat_ingest_lag_seconds{job=\"mpistat\"}");
    assert!((0.0..300.0).contains(&lag), "lag {lag}");

    // The dashboard's every query, in each window, gives data, and every series it names was
    // scraped.
    for expr in dashboard::exprs() {
        for name in dashboard::series_in(&expr) {
            assert!(
                !prometheus.query(&name).is_empty(),
                "nothing scraped of {name}"
            );
        }
        for (window, _) in [("1h", 1), ("1d", 24), ("7d", 168)] {
            let expr = expr.replace("$window", window);
            assert!(
                !prometheus.query(&expr).is_empty(),
                "the dashboard's {expr} gives nothing"
            );
        }
    }
    eprintln!("{} dashboard queries answered", dashboard::exprs().len());
    drop(serve);
}
