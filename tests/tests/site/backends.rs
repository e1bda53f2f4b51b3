//! The site's whole path on both backends, byte for byte (issue 35 §2): the same syslog files
//! (a month of jobs of many users, with forged and corrupt records among them, then more lines,
//! among them a job traced by escalation and its trace's analysis) go through `mpistat ingest`
//! (twice, as its timer would run it, and its escalation after each run), `mpistat digest
//! --send` to a real SMTP server, `mpistat site-report` of the month and of a week and
//! `mpistat serve` (every kind of page) once on a SQLite file and once on a PostgreSQL server of
//! the test's own. Every report, list, mail, file and page is the same on both, byte for byte;
//! nothing is left out but what is made anew each time whatever the database: the escalation
//! list's expiry times (ingest's clock), and each mail's `Date:`, `Message-ID:` and MIME
//! boundaries (the mailer's, for each message sent), and `/metrics`' ingest lag (the request's
//! clock).

use mpistat_e2e::backend::{Backend, SiteDatabase};
use mpistat_e2e::serve::{every_page, Serve};
use mpistat_e2e::*;
use mpistat_record::analysis::{AnalysisRecord, Summary, ANALYSIS_MODEL_VERSION};
use mpistat_record::model::TraceInfo;
use mpistat_record::JobRecord;
use mpistat_testkit::{forge, synthetic};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// November 2026 (UTC), the synthetic jobs' month.
const NOVEMBER_START_MS: u64 = 1_793_491_200_000;
const MONTH: &str = "2026-11";
const WEEK: &str = "2026-W46";

/// Jobs `part` of 650 jobs of 30 users over 25 days of November, with the work their imbalance
/// estimate is a share of (so that some meet the escalation rule).
fn november_jobs(part: std::ops::Range<u64>) -> impl Iterator<Item = JobRecord> {
    synthetic::varied_jobs_part(part, 650, 30, NOVEMBER_START_MS, 25 * 86_400_000).map(|mut job| {
        if let Some(imbalance) = &mut job.imbalance {
            imbalance.work_sum_ns = job.wall_ns.sum - job.mpi_ns.sum;
        }
        job
    })
}

/// The first log: 600 jobs, each sent by its user; then a job whose lines have no attested
/// sender, one sent by another uid (both forged) and one wrapped in another job's index
/// (corrupt); and the first 100 jobs again (stored once, their lines rejected as duplicates).
fn first_log() -> (String, Vec<JobRecord>) {
    let jobs: Vec<JobRecord> = november_jobs(0..603).collect();
    let (jobs, odd) = jobs.split_at(600);
    let mut text: String = jobs
        .iter()
        .flat_map(|r| synthetic::syslog_lines(r, Some(r.uid)))
        .collect();
    text.extend(synthetic::syslog_lines(&odd[0], None));
    text.extend(synthetic::syslog_lines(&odd[1], Some(odd[1].uid + 1)));
    let wrapped = &odd[2];
    let other = JobRecord {
        uid: wrapped.uid + 1,
        ..wrapped.clone()
    };
    for message in forge::encode_v2_with_index(wrapped, &mpistat_record::JobIndex::of(&other)) {
        text.push_str(&format!(
            "2026-11-18T10:00:00.000000+00:00 node1 uid={} pid=9 mpistat: {message}\n",
            other.uid
        ));
    }
    text.extend(
        jobs[..100]
            .iter()
            .flat_map(|r| synthetic::syslog_lines(r, Some(r.uid))),
    );
    (text, jobs.to_vec())
}

/// The lines the second ingest finds appended: a run of `escalated` traced by escalation, the
/// analysis of its trace (with fractions to print), and 47 more jobs; and the traced job.
fn second_lines(escalated: &JobRecord) -> (String, JobRecord) {
    let mut traced = escalated.clone();
    traced.job_id = format!("{}-escalated", escalated.job_id);
    traced.end_unix_ms += 86_400_000;
    traced.start_unix_ms += 86_400_000;
    let dir = format!("/home/{}/.mpistat/traces/{}", traced.user, traced.job_id);
    traced.trace = Some(TraceInfo {
        dir: dir.clone(),
        reason: "escalation".into(),
        events: 123_457,
        ranks_written: traced.ranks,
        stopped: None,
        overhead_ns: 98_765_432,
    });
    let summary = Summary {
        wall_s: 1_234.567_891,
        waiting_percent: 100.0 / 3.0,
        critical_imbalance_percent: 2.0 / 3.0,
        causes: vec!["late sender: MPI_Recv (solver.c:42), most on rank 3".into()],
        notes: vec!["recording stopped at 1.0e6 events".into()],
    };
    let analysis = AnalysisRecord {
        version: ANALYSIS_MODEL_VERSION,
        job_key: traced.wire_key(),
        uid: traced.uid,
        user: traced.user.clone(),
        host: "node1".into(),
        dir,
        summary: Some(serde_json::to_string(&summary).unwrap()),
        error: None,
        analysed_unix_ms: traced.end_unix_ms + 60_000,
    };
    let mut text: String = synthetic::syslog_lines(&traced, Some(traced.uid))
        .into_iter()
        .collect();
    for message in mpistat_record::encode_analysis(&analysis) {
        text.push_str(&format!(
            "2026-11-18T10:00:00.000000+00:00 node1 uid={} pid=9 mpistat: {message}\n",
            traced.uid
        ));
    }
    text.extend(november_jobs(603..650).flat_map(|r| synthetic::syslog_lines(&r, Some(r.uid))));
    (text, traced)
}

/// One site: its database, configuration, log (the same file for both: reports name it),
/// escalation list and SMTP server's port.
struct Site {
    backend: Backend,
    /// Held: a PostgreSQL server runs as long as its site.
    _database: SiteDatabase,
    dir: PathBuf,
    config: PathBuf,
    log: PathBuf,
    list: PathBuf,
    port: u16,
}

impl Site {
    fn new(backend: Backend, root: &Path) -> Option<Site> {
        let dir = root.join(backend.name());
        std::fs::create_dir_all(&dir).unwrap();
        let database = SiteDatabase::new(backend, &dir, "bk-postgres")?;
        let config = dir.join("site.toml");
        let list = dir.join("escalation.list");
        let port = free_port();
        // The synthetic users are invented (uid 2000.. may be someone else here): names not
        // checked. Escalation as shipped but for its list's place.
        std::fs::write(
            &config,
            format!(
                "{}[ingest]\ncheck_user_names = false\n[escalation]\nlist = {:?}\n\
                 [mail]\ntransport = \"smtp\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {port}\n\
                 smtp_starttls = \"off\"\nrecipient = \"{{user}}@example.org\"\n\
                 [site_report]\ngroup = \"\"\n[serve]\nsocket_group = \"\"\n",
                database.section(&database.writer()),
                list.display().to_string(),
            ),
        )
        .unwrap();
        Some(Site {
            backend,
            _database: database,
            log: root.join("records.log"),
            dir,
            config,
            list,
            port,
        })
    }

    /// `mpistat ARGS --config site.toml`, required to succeed: its standard output.
    fn run(&self, args: &[&str]) -> Vec<u8> {
        let output = mpistat(args, &self.config);
        assert!(
            output.status.success(),
            "{}: mpistat {args:?}: {}",
            self.backend.name(),
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    fn ingest(&self) {
        self.run(&["ingest", self.log.to_str().unwrap()]);
    }

    /// The escalation list's entries without their expiry (now + `expiry_days`: ingest's
    /// clock, not the store's).
    fn escalation_list(&self) -> String {
        let text = std::fs::read_to_string(&self.list).unwrap_or_default();
        text.lines()
            .map(|line| {
                let mut fields: Vec<&str> = line.split('\t').collect();
                if !line.starts_with('#') && fields.len() == 5 {
                    fields.remove(3);
                }
                fields.join("\t") + "\n"
            })
            .collect()
    }

    /// What the site's commands make once the logs are in: the reports, mails and static
    /// sites (by name).
    fn outputs(&self) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        out.insert("ingest --report".into(), self.run(&["ingest", "--report"]));
        out.insert("escalate list".into(), self.escalation_list().into_bytes());
        out.insert(
            "digest (printed)".into(),
            self.run(&["digest", "--week", WEEK]),
        );
        let users = String::from_utf8_lossy(&out["digest (printed)"])
            .matches("\nSubject: ")
            .count();
        let inbox = self.dir.join("inbox");
        let server = SmtpSink::start(self.port, &inbox);
        self.run(&["digest", "--week", WEEK, "--send"]);
        let sent = server.mails(users).len();
        drop(server);
        assert!(
            sent == users && sent > 10,
            "{}: {sent} mails",
            self.backend.name()
        );
        for (name, bytes) in files_under(&inbox) {
            out.insert(format!("mail {name}"), without_send_time_and_ids(&bytes));
        }
        for period in [["--month", MONTH], ["--week", WEEK]] {
            let site = self.dir.join(format!("site{}", period[0]));
            self.run(&[
                "site-report",
                period[0],
                period[1],
                "--out",
                site.to_str().unwrap(),
            ]);
            for (name, bytes) in files_under(&site) {
                out.insert(format!("site-report {} {name}", period[1]), bytes);
            }
        }
        out
    }
}

/// A mail as received but for what the mailer makes anew for each message sent, whatever the
/// database: its `Date:` (the time of sending) and `Message-ID:` (unique by definition, RFC
/// 5322) header lines and its MIME boundaries (random), each boundary replaced by its ordinal.
fn without_send_time_and_ids(mail: &[u8]) -> Vec<u8> {
    let mut text = String::from_utf8(mail.to_vec()).expect("a mail is ASCII");
    let header_end = text.find("\r\n\r\n").expect("a mail has a header");
    let header: String = text[..header_end]
        .split("\r\n")
        .filter(|l| !l.starts_with("Date: ") && !l.starts_with("Message-ID: "))
        .map(|l| format!("{l}\r\n"))
        .collect();
    text = format!("{header}{}", &text[header_end + 2..]);
    let mut n = 0;
    while let Some(at) = text.find("boundary=\"") {
        let start = at + "boundary=\"".len();
        let end = start + text[start..].find('"').expect("a quoted boundary");
        let boundary = text[start..end].to_string();
        n += 1;
        text = text
            .replace(
                &format!("boundary=\"{boundary}\""),
                &format!("boundary:{n}"),
            )
            .replace(&format!("--{boundary}"), &format!("--boundary:{n}"));
    }
    text.into_bytes()
}

#[test]
fn every_report_mail_and_page_is_the_same_on_sqlite_and_postgresql() {
    let dir = Scratch::new("backends");
    let sites: Vec<Site> = match Backend::ALL
        .iter()
        .map(|&b| Site::new(b, dir.path()))
        .collect()
    {
        Some(sites) => sites,
        None => {
            eprintln!("SKIPPED: needs root to make users");
            return;
        }
    };
    let (first, jobs) = first_log();
    std::fs::write(&sites[0].log, &first).unwrap();
    for site in &sites {
        site.ingest();
    }
    // A job the first run put on the escalation list runs again, traced by escalation.
    let listed = sites[0].escalation_list();
    let entry = listed
        .lines()
        .find(|l| !l.starts_with('#'))
        .expect("an entry on the escalation list");
    let (uid, app) = {
        let mut fields = entry.split('\t');
        (fields.next().unwrap(), fields.next().unwrap())
    };
    let escalated = jobs
        .iter()
        .find(|j| j.uid.to_string() == uid && j.exe == app)
        .expect("the listed job");
    let (second, traced) = second_lines(escalated);
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(&sites[0].log)
        .unwrap();
    std::io::Write::write_all(&mut log, second.as_bytes()).unwrap();
    for site in &sites {
        site.ingest();
    }

    let outputs: Vec<_> = sites.iter().map(Site::outputs).collect();
    let report = String::from_utf8_lossy(&outputs[0]["ingest --report"]);
    assert!(report.contains("jobs stored: 648\n"), "{report}");
    assert!(
        report.contains("rejected: corrupt 1, duplicate 200, forged 2\n"),
        "{report}"
    );
    assert!(
        !sites[0].escalation_list().contains(entry),
        "the capture was not counted"
    );
    let mails = String::from_utf8_lossy(&outputs[0]["digest (printed)"]);
    assert!(mails.contains("Subject: mpistat"), "{mails}");
    assert_same_outputs(["sqlite", "postgresql"], &outputs[0], &outputs[1]);

    // Both served at once, every page of the week and of the month asked of both in turn.
    let serves: Vec<Serve> = sites
        .iter()
        .map(|s| Serve::start(None, &s.config, &s.dir.join("serve.sock")))
        .collect();
    let job = &jobs[7];
    let mut pages = every_page(WEEK, &job.user, &job.key(), &job.job_id);
    pages.extend(every_page(MONTH, &job.user, &job.key(), &job.job_id));
    pages.push(format!("jobs/{}.html", traced.key()));
    let mut served: Vec<BTreeMap<String, Vec<u8>>> = vec![BTreeMap::new(), BTreeMap::new()];
    for page in &pages {
        for (serve, answers) in serves.iter().zip(&mut served) {
            answers.insert(format!("serve {page}"), serve.get_ok(page));
        }
    }
    // The ingest lag is the request's clock less the newest stored line's time: asked of each
    // server in turn, it differs by the milliseconds between (and the body's length with it).
    let lags: Vec<f64> = served
        .iter_mut()
        .map(|answers| {
            let metrics = String::from_utf8(answers.remove("serve metrics").unwrap()).unwrap();
            let lag = metrics
                .lines()
                .find_map(|l| l.strip_prefix("mpistat_ingest_lag_seconds "))
                .expect("the ingest lag")
                .parse()
                .unwrap();
            let rest: String = metrics
                .lines()
                .filter(|l| {
                    !l.starts_with("mpistat_ingest_lag_seconds ")
                        && !l.starts_with("Content-Length: ")
                })
                .collect();
            answers.insert("serve metrics (but the lag)".into(), rest.into_bytes());
            lag
        })
        .collect();
    assert!((lags[0] - lags[1]).abs() < 10.0, "ingest lags {lags:?}");
    assert_same_outputs(["sqlite", "postgresql"], &served[0], &served[1]);
}
