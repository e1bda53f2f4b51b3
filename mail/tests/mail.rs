//! The weekly mail: snapshots of the text and HTML of a fixed data set, at most once per
//! (user, week) with the directory transport, and a real SMTP server (Debian's aiosmtpd) that is
//! down at first and up later: the failed mails are retried and arrive exactly once.

use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;

use common::week_47_database;
use mpistat_figures::week::IsoWeek;
use mpistat_mail::{mails, send, SendStats};
use mpistat_mailer::Mailer;
use mpistat_record::{AnalysisRecord, JobIndex, JobRecord};
use mpistat_site::SiteConfig;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(label: &str) -> Scratch {
    Scratch::new(&format!("mail-{label}"))
}

fn week() -> IsoWeek {
    IsoWeek::parse("2026-W47").unwrap()
}

#[test]
fn text_and_html_of_a_fixed_week() {
    let dir = temp_dir("snapshot");
    let db = week_47_database(&dir);
    let all = mails(&db, &SiteConfig::default(), week(), None).unwrap();
    assert_eq!(all.len(), 5, "one mail per user");
    let alice = all.iter().find(|m| m.user == "alice").unwrap();
    assert!(
        alice.text.lines().all(|l| l.chars().count() <= 80),
        "{}",
        alice.text
    );
    insta::assert_snapshot!("alice_text", alice.text);
    insta::assert_snapshot!("alice_html", alice.html);
    // Counters that could not run, and jobs without superstep figures (from an older profiler).
    let level_1 = |user: &str| {
        let text = &all.iter().find(|m| m.user == user).unwrap().text;
        text.split("\n\n").take(3).collect::<Vec<_>>().join("\n\n")
    };
    insta::assert_snapshot!(
        "dave_and_erin_level_1",
        [level_1("dave"), level_1("erin")].join("\n\n")
    );
    for image in &alice.images {
        assert!(alice.html.contains(&format!("cid:{}", image.cid)));
        check_png(&image.cid, &image.png);
        if let Some(keep) = std::env::var_os("MPISTAT_KEEP_CHARTS") {
            std::fs::write(
                Path::new(&keep).join(format!("{}.png", image.cid)),
                &image.png,
            )
            .unwrap();
        }
    }
}

/// A chart image decodes as an 8-bit RGB PNG 560 px wide (it fits the mail's 600 px), of a
/// height that fits its content, and is drawn: text and bars in several colours, not a blank.
fn check_png(cid: &str, png: &[u8]) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap_or_else(|e| panic!("{cid}: {e}"));
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader
        .next_frame(&mut pixels)
        .unwrap_or_else(|e| panic!("{cid}: {e}"));
    assert_eq!(info.color_type, png::ColorType::Rgb, "{cid}");
    assert_eq!(info.width, 560, "{cid}");
    assert!(
        (40..=400).contains(&info.height),
        "{cid}: {} px high",
        info.height
    );
    let pixels = &pixels[..info.buffer_size()];
    let colours: std::collections::BTreeSet<&[u8]> = pixels.chunks(3).collect();
    let drawn = pixels.chunks(3).filter(|p| *p != [255, 255, 255]).count();
    let share = drawn as f64 / (pixels.len() / 3) as f64;
    assert!(colours.len() >= 8, "{cid}: {} colours", colours.len());
    assert!(
        (0.02..0.9).contains(&share),
        "{cid}: {share:.3} of the pixels drawn"
    );
}

/// The level-6 section: a traced job of alice's with its stored analysis summary, and one whose
/// analysis failed.
#[test]
fn level_6_section_of_traced_jobs() {
    let dir = temp_dir("level6");
    let db = week_47_database(&dir);
    let (from, to) = week().range_ms();
    let jobs = db.jobs_ended_between(from, to).unwrap();
    let mut traced = jobs.iter().filter(|j| j.user == "alice");
    let summary = mpistat_analysis_report::report::Summary {
        wall_s: 12.5,
        waiting_percent: 41.2,
        critical_imbalance_percent: 23.4,
        causes: vec![
            "compute after MPI_Barrier (solver+0x1305) before MPI_Send (solver+0x1343), most on rank 0: made other ranks wait 6.000000 s (58.2 % of all waiting), 2.000000 s directly and 4.000000 s by waiting that propagated.".into(),
        ],
        notes: vec!["recording stopped: a rank's trace budget (67108864 bytes) was reached".into()],
    };
    let json = serde_json::to_string(&summary).unwrap();
    let first = traced.next().unwrap();
    let analysis = |job: &JobRecord, dir: &str| AnalysisRecord {
        job_key: job.key(),
        dir: dir.into(),
        ..AnalysisRecord::default()
    };
    let ok = AnalysisRecord {
        summary: Some(json),
        ..analysis(first, "/home/alice/.mpistat/traces/1001")
    };
    db.store_analysis(&JobIndex::of(first), &ok).unwrap();
    let second = traced.next().unwrap();
    let failed = AnalysisRecord {
        error: Some("the analysis took longer than 600 s and was stopped".into()),
        ..analysis(second, "/home/alice/.mpistat/traces/1002")
    };
    db.store_analysis(&JobIndex::of(second), &failed).unwrap();
    let all = mails(&db, &SiteConfig::default(), week(), Some("alice")).unwrap();
    let text = &all[0].text;
    let start = text.find("Level 6").expect("a level-6 section");
    let end = text.find("How to go further").unwrap();
    insta::assert_snapshot!("alice_level6_text", &text[start..end]);
    let html = &all[0].html;
    let start = html.find("<h3>Level 6").expect("a level-6 section");
    let end = html.find("<h3>How to go further").unwrap();
    insta::assert_snapshot!("alice_level6_html", &html[start..end]);
    // Everyone else's mail has no such section.
    let bob = mails(&db, &SiteConfig::default(), week(), Some("bob")).unwrap();
    assert!(!bob[0].text.contains("Level 6:"));
}

fn directory_config(dir: &Path) -> SiteConfig {
    let mut config = SiteConfig::default();
    config.mail.directory = dir.join("spool");
    config
}

#[test]
fn directory_transport_sends_each_user_week_once() {
    let dir = temp_dir("directory");
    let db = week_47_database(&dir);
    let config = directory_config(&dir);
    let mailer = Mailer::from_site(&config.mail).unwrap();
    let mut err = Vec::new();
    let first = send(&db, &config, &mailer, week(), None, &mut err).unwrap();
    assert_eq!(
        first,
        SendStats {
            sent: 5,
            already_sent: 0,
            failed: 0
        }
    );
    let again = send(&db, &config, &mailer, week(), None, &mut err).unwrap();
    assert_eq!(
        again,
        SendStats {
            sent: 0,
            already_sent: 5,
            failed: 0
        }
    );
    let eml = std::fs::read_to_string(dir.join("spool/2026-W47-bob.eml")).unwrap();
    assert!(eml.contains("To: bob@localhost"), "{eml}");
    assert!(eml.contains("Content-Type: multipart/alternative"), "{eml}");
    assert!(eml.contains("Content-Type: text/plain"), "{eml}");
    assert!(eml.contains("Content-Type: text/html"), "{eml}");
    assert!(eml.contains("Content-Type: multipart/related"), "{eml}");
    assert_eq!(eml.matches("Content-Type: image/png").count(), 2, "{eml}");
    assert!(eml.contains("Content-ID: <routines>"), "{eml}");
    assert!(eml.contains("cid:routines"), "{eml}");
    assert_eq!(std::fs::read_dir(dir.join("spool")).unwrap().count(), 5);
}

/// Debian's aiosmtpd as a real SMTP server that saves every message in `dir`
/// (`tests/smtp_sink.py`).
struct SmtpServer(Child);

impl SmtpServer {
    fn start(port: u16, dir: &Path) -> Option<SmtpServer> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/smtp_sink.py");
        let mut child = Command::new("/usr/bin/python3")
            .arg(script)
            .arg(port.to_string())
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .ok()?;
        (line.trim() == "ready").then_some(SmtpServer(child))
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn smtp_server_down_then_up_gets_every_mail_once() {
    let have_aiosmtpd = Command::new("/usr/bin/python3")
        .args(["-c", "import aiosmtpd"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        have_aiosmtpd,
        "python3-aiosmtpd is missing: run scripts/prereqs.sh"
    );
    let dir = temp_dir("smtp");
    let db = week_47_database(&dir);
    let port = free_port();
    let mut config = SiteConfig::default();
    config.mail.transport = mpistat_site::MailTransport::Smtp;
    config.mail.smtp_host = "127.0.0.1".into();
    config.mail.smtp_port = port;
    config.mail.smtp_starttls = mpistat_site::StartTls::Off;
    config.mail.recipient = "{user}@example.org".into();
    let mailer = Mailer::from_site(&config.mail).unwrap();

    // Server down: every mail fails, is reported and recorded for the next run.
    let mut err = Vec::new();
    let down = send(&db, &config, &mailer, week(), None, &mut err).unwrap();
    assert_eq!(down.failed, 5, "{down:?}");
    assert!(String::from_utf8_lossy(&err).contains("will retry"));

    // Server up: the next run (even for another week) retries them; a third sends nothing.
    let inbox = dir.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let _server = SmtpServer::start(port, &inbox).expect("aiosmtpd starts");
    let later = IsoWeek::parse("2026-W48").unwrap();
    let up = send(&db, &config, &mailer, later, None, &mut err).unwrap();
    assert_eq!(
        up,
        SendStats {
            sent: 5,
            already_sent: 0,
            failed: 0
        }
    );
    let again = send(&db, &config, &mailer, week(), None, &mut err).unwrap();
    assert_eq!(
        again,
        SendStats {
            sent: 0,
            already_sent: 5,
            failed: 0
        }
    );

    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_dir(&inbox).unwrap().count() < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut received: Vec<String> = std::fs::read_dir(&inbox)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    received.sort();
    assert_eq!(received.len(), 5);
    let expected = mails(&db, &config, week(), None).unwrap();
    for mail in &expected {
        let to = format!("To: {}@example.org", mail.user);
        let got: Vec<&String> = received.iter().filter(|m| m.contains(&to)).collect();
        assert_eq!(got.len(), 1, "exactly one mail for {}", mail.user);
        assert!(got[0].contains("multipart/alternative"));
        // The level-1 lines (quoted-printable or plain) carry the user's numbers.
        let cpu = mail.text.lines().find(|l| l.contains("CPU hours")).unwrap();
        let value = cpu.split_whitespace().nth(2).unwrap();
        assert!(got[0].contains(value), "{value} not in {}", got[0]);
    }
}

/// Issue 16's week of one short 4-rank job, as a user would read it: its MPI time is mostly
/// `MPI_Init` (so "critical") but its communication takes microseconds, so nothing is
/// recommended; its non-blocking calls take less time than the benchmark's latency, so their
/// estimates are capped (marked: the model does not fit) instead of negative; its counters were
/// read in the totals mode, so they are "not split (totals mode)", not "MPI 0".
#[test]
fn a_week_of_one_short_job() {
    use mpistat_figures::sums::UserWeek;
    use mpistat_mail::{html, text};
    use mpistat_record::model::{CounterEvent, CounterSet, RoutineStats};
    use mpistat_record::Stat;
    use mpistat_render::user::Week;
    let routine = |name: &str, class: &str, calls: u64, time_ns: u64| RoutineStats {
        name: name.into(),
        class: class.into(),
        calls: Stat::single(calls, 0),
        time_ns: Stat::single(time_ns, 0),
        count: Stat::single(calls, 0),
        bytes: Stat::single(calls * 8, 0),
        ..RoutineStats::default()
    };
    let job = JobRecord {
        user: "alice".into(),
        job_id: "4242".into(),
        exe: "/home/alice/ring".into(),
        ranks: 4,
        wall_ns: Stat::single(4 * 150_000_000, 0),
        mpi_ns: Stat::single(4 * 100_000_000, 0),
        routines: vec![
            routine("MPI_Init", "init", 4, 4 * 99_000_000),
            routine("MPI_Sendrecv", "p2p", 40, 900_000),
            routine("MPI_Isend", "p2p", 40, 54_500),
            routine("MPI_Irecv", "p2p", 40, 21_900),
        ],
        counters: Some(CounterSet {
            mode: "totals (read at MPI_Init and MPI_Finalize)".into(),
            events: vec![CounterEvent {
                name: "task-clock".into(),
                app: 80_100_000,
                mpi: 0,
                unavailable: None,
            }],
        }),
        ..JobRecord::default()
    };
    let config = SiteConfig::default();
    let mut user = UserWeek::default();
    user.add(&job);
    let users = std::collections::BTreeMap::from([(job.user.clone(), user)]);
    let week = Week::of_users(&config.digest, 7.0 * 24.0, users);
    let digest = &week.digests("2026-W47")[0];
    assert!(digest
        .figures
        .iter()
        .any(|f| f.name == "MPI time" && f.critical));
    assert!(digest.recommendations.is_empty());
    for r in &digest.routines {
        for estimate in [r.latency_ns, r.transfer_ns, r.sync_ns]
            .into_iter()
            .flatten()
        {
            assert!(estimate >= 0.0, "{r:?}");
        }
    }
    let routine = |name: &str| digest.routines.iter().find(|r| r.name == name).unwrap();
    // 40 calls at the default 1.5 us are 60 us: more than MPI_Isend's 54.5 us.
    assert!(!routine("MPI_Isend").fits);
    assert_eq!(routine("MPI_Isend").latency_ns, Some(54_500.0));
    assert_eq!(routine("MPI_Isend").sync_ns, Some(0.0));
    assert!(routine("MPI_Sendrecv").fits);
    let text = text::render(digest);
    let html = html::render(digest);
    for wrong in ["0 % of your MPI time", "MPI 0", "Score-P"] {
        assert!(!text.contains(wrong), "{wrong:?} in {text}");
    }
    let estimates = text.split("Where the time goes").nth(1).unwrap();
    let estimates = estimates.split("\n\n").next().unwrap();
    let rows = estimates.lines().filter(|l| l.starts_with("MPI_"));
    assert!(
        rows.clone().all(|row| !row.contains('-')),
        "a negative estimate in {estimates}"
    );
    assert_eq!(rows.count(), 3, "{estimates}");
    assert!(
        estimates.contains("MPI_Isend") && estimates.contains(" *"),
        "{estimates}"
    );
    insta::assert_snapshot!("short_job_text", text);
    insta::assert_snapshot!("short_job_html", html);
}
