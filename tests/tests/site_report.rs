//! Issue 5 end to end: real profiled `mpirun` jobs (C, Fortran, an imbalanced one, and one whose
//! executable is named `<script>alert(1)</script>`) through a private rsyslogd, plus a synthetic
//! month of 3000 jobs of 100 users, ingested by `mpistat ingest`; `mpistat site-report --month`
//! writes the site, and headless Chromium (Debian's `chromium`) renders its pages: every kind of
//! page parses with its charts, nothing hostile runs, and the screenshots of the overview, a user
//! page and a job page are far from blank.

#[path = "../../digest/tests/common/mod.rs"]
mod synthetic;

use mpistat_e2e::*;
use mpistat_record::JobRecord;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const XSS: &str = "<script>alert(1)</script>";
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(90);

fn mpistat(args: &[&str], config: &Path) -> Output {
    let binary = library().with_file_name("mpistat");
    let output = Command::new(&binary)
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    eprintln!(
        "mpistat {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "mpistat {args:?} failed");
    output
}

/// `date -u ARGS...`'s output.
fn date(args: &[&str]) -> String {
    let out = Command::new("date").arg("-u").args(args).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Headless Chromium on `page` with `args` (its own profile directory under `dir`).
fn chromium(dir: &Path, args: &[String], page: &Path) -> Outcome {
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
    ])
    .arg(format!(
        "--user-data-dir={}",
        dir.join("chromium-profile").display()
    ))
    .args(args)
    .arg(format!("file://{}", page.display()))
    .env("HOME", dir);
    let outcome = run_with_timeout(cmd, CHROMIUM_TIMEOUT);
    outcome.assert_success();
    outcome
}

/// The DOM Chromium built from `page`.
fn dom(dir: &Path, page: &Path) -> String {
    chromium(dir, &["--dump-dom".to_string()], page).stdout
}

/// A screenshot of `page` (1200 x `height`), returns the PNG.
fn screenshot(dir: &Path, page: &Path, png: &Path, height: u32) -> Vec<u8> {
    chromium(
        dir,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size=1200,{height}"),
        ],
        page,
    );
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", png.display());
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    assert_eq!(width, 1200, "{}", png.display());
    bytes
}

/// A copy of basic.c's program whose path ends in `<script>alert(1)</script>` (a directory
/// `<script>alert(1)<` holding a file `script>`: names cannot contain `/`).
fn hostile_program(dir: &Path) -> PathBuf {
    let (parent, file) = XSS.rsplit_once('/').unwrap();
    let sub = dir.join(parent);
    std::fs::create_dir_all(&sub).unwrap();
    let path = sub.join(file);
    std::fs::copy(program("basic.c"), &path).unwrap();
    path
}

#[test]
fn site_of_real_and_synthetic_jobs_renders_in_chromium() {
    let _serial = serial();
    if Command::new("chromium").arg("--version").output().is_err() {
        panic!("chromium is not installed (scripts/prereqs.sh installs it)");
    }
    let dir = TempDir::new("site-report");
    let syslogd = Syslogd::start();
    let site = syslogd.site_config();
    Job::new(program("basic.c"), 4)
        .profiled(&site)
        .assert_success();
    let fortran = Program {
        source: "basic.F90",
        name: "basic_use_mpi",
        flags: &["-DUSE_MPI"],
    };
    Job::new(fortran.path(), 2).profiled(&site).assert_success();
    Job::new(program("imbalance.c"), 4)
        .arg("static")
        .arg("40")
        .arg("5")
        .profiled(&site)
        .assert_success();
    let hostile = hostile_program(dir.path());
    Job::new(&hostile, 2).profiled(&site).assert_success();
    let records: Vec<JobRecord> = syslogd.records(4);
    let hostile_job = records
        .iter()
        .find(|r| r.exe.ends_with(XSS))
        .expect("the hostile job's record");
    let imbalanced = records
        .iter()
        .find(|r| r.exe.ends_with("/imbalance"))
        .expect("the imbalanced job's record");
    assert!(imbalanced
        .imbalance
        .as_ref()
        .is_some_and(|i| !i.series_ns.is_empty()));
    assert!(records
        .iter()
        .any(|r| r.binding == mpistat_record::Binding::Fortran));
    let user = records[0].user.clone();

    // What rsyslog wrote, and a synthetic month of other users' jobs, are ingested.
    let log = dir.path().join("records.log");
    let mut text: String = syslogd
        .trusted_lines()
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    let month = date(&["+%Y-%m"]);
    for record in synthetic::varied_jobs(3000, 100, month_start(&month), 20 * 86_400_000) {
        text.extend(synthetic::syslog_lines(&record, Some(record.uid)));
    }
    std::fs::write(&log, text).unwrap();
    let config = dir.path().join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {:?}\n",
            dir.path().join("mpistat.db").display().to_string()
        ),
    )
    .unwrap();
    mpistat(&["ingest", log.to_str().unwrap()], &config);
    let out = dir.path().join("site");
    mpistat(
        &[
            "site-report",
            "--month",
            &month,
            "--out",
            out.to_str().unwrap(),
        ],
        &config,
    );

    // Every kind of page renders; the charts are in the DOM; nothing hostile became an element.
    let user_page = out.join(format!("users/{user}.html"));
    let imbalanced_page = out.join(format!("jobs/{}.html", imbalanced.key()));
    let hostile_page = out.join(format!("jobs/{}.html", hostile_job.key()));
    let pages: [(&Path, usize); 8] = [
        (&out.join("index.html"), 1),
        (&out.join("charts.html"), 9),
        (&out.join("tables.html"), 0),
        (&out.join("critical.html"), 0),
        (&out.join("users.html"), 0),
        (&user_page, 1),
        (&imbalanced_page, 1),
        (&hostile_page, 0),
    ];
    for (page, charts) in pages {
        let dom = dom(dir.path(), page);
        assert!(dom.contains("<nav>"), "{}: {dom}", page.display());
        assert!(
            dom.matches("<svg").count() >= charts,
            "{}: fewer than {charts} charts",
            page.display()
        );
        assert!(!dom.contains("<script"), "{} runs a script", page.display());
    }
    for page in [&user_page, &hostile_page] {
        let html = std::fs::read_to_string(page).unwrap();
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{} does not show the hostile name escaped",
            page.display()
        );
    }
    let job_dom = dom(dir.path(), &imbalanced_page);
    assert!(
        job_dom.contains("Imbalance per superstep"),
        "the imbalance time series chart"
    );
    assert!(job_dom.contains(&imbalanced.job_id));

    // Screenshots: a blank page of the same size is the baseline; ours carry far more.
    let shots = dir.path().join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let blank_page = shots.join("blank.html");
    std::fs::write(&blank_page, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let blank = screenshot(dir.path(), &blank_page, &shots.join("blank.png"), 1400).len();
    for (name, page) in [
        ("overview", out.join("index.html")),
        ("user", user_page.clone()),
        ("job", imbalanced_page.clone()),
    ] {
        let png = screenshot(dir.path(), &page, &shots.join(format!("{name}.png")), 1400);
        assert!(
            png.len() > 5 * blank,
            "{name}: screenshot of {} bytes is about as empty as a blank page ({blank} bytes)",
            png.len()
        );
        // Kept for people to look at (target/e2e-screenshots/).
        let keep = library()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("e2e-screenshots");
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::write(keep.join(format!("{name}.png")), &png).unwrap();
    }
}

/// Unix milliseconds of `YYYY-MM`-01 00:00 UTC.
fn month_start(month: &str) -> u64 {
    let secs = date(&[&format!("--date={month}-01T00:00:00Z"), "+%s"]);
    secs.parse::<u64>().unwrap() * 1000
}
