//! Issue 5 end to end: real profiled `mpirun` jobs (C, Fortran, an imbalanced one, and one whose
//! executable is named `<script>alert(1)</script>`) through a private rsyslogd, plus a synthetic
//! month of 3000 jobs of 100 users, ingested by `mpistat ingest`; `mpistat site-report --month`
//! writes the site, and one headless Chromium (Debian's `chromium`, driven by `chromedriver`)
//! loads every one of its pages: each loads without console errors, has a title and its
//! navigation, draws every chart its HTML holds, and runs no script; the screenshots of the
//! overview, a user page and a job page are far from blank.

use mpistat_testkit::synthetic;

use mpistat_e2e::webdriver::Browser;
use mpistat_e2e::*;
use mpistat_record::JobRecord;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const XSS: &str = "<script>alert(1)</script>";
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(90);
/// How long loading every page of the site may take before the test gives up (a hang, not a
/// speed limit: it takes a minute or two).
const BROWSE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// At most this many failing pages are listed in the failure message.
const SHOWN_FAILURES: usize = 40;

/// Run `mpistat` (the shared helper) and require success.
fn mpistat_ok(args: &[&str], config: &Path) {
    let output = mpistat(args, config);
    assert!(output.status.success(), "mpistat {args:?} failed");
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
    let dir = Scratch::new("site-report");
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
    let mut users: BTreeSet<String> = records.iter().map(|r| r.user.clone()).collect();
    let mut jobs = records.len();
    for record in synthetic::varied_jobs(3000, 100, month_start(&month), 20 * 86_400_000) {
        text.extend(synthetic::syslog_lines(&record, Some(record.uid)));
        users.insert(record.user.clone());
        jobs += 1;
    }
    std::fs::write(&log, text).unwrap();
    let config = dir.path().join("site.toml");
    // The synthetic users are invented (uid 2000.. may be someone else here): names not checked.
    std::fs::write(
        &config,
        format!(
            "[database]\npath = {:?}\n[ingest]\ncheck_user_names = false\n",
            dir.path().join("mpistat.db").display().to_string()
        ),
    )
    .unwrap();
    mpistat_ok(&["ingest", log.to_str().unwrap()], &config);
    let out = dir.path().join("site");
    mpistat_ok(
        &[
            "site-report",
            "--month",
            &month,
            "--out",
            out.to_str().unwrap(),
            // Pages of these two as well: the site has pages of the jobs it lists only.
            "--job",
            &imbalanced.key(),
            "--job",
            &hostile_job.key(),
        ],
        &config,
    );

    // Every page renders in one headless Chromium: loaded, titled, its charts drawn, no console
    // errors, and nothing hostile became an element.
    let browser = Browser::start(dir.path());
    let views = render_every_page(&browser, &out, dir.path());
    drop(browser);
    let job_pages = std::fs::read_dir(out.join("jobs")).unwrap().count();
    assert!(
        job_pages >= 2 && job_pages < jobs,
        "{job_pages} job pages of {jobs} jobs"
    );
    assert_eq!(
        views.len(),
        5 + users.len() + job_pages,
        "the site's pages: five site-wide ones, one per user and one per job it lists"
    );
    let user_page = out.join(format!("users/{user}.html"));
    let imbalanced_page = out.join(format!("jobs/{}.html", imbalanced.key()));
    let hostile_page = out.join(format!("jobs/{}.html", hostile_job.key()));
    for page in [&user_page, &hostile_page] {
        let html = std::fs::read_to_string(page).unwrap();
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{} does not show the hostile name escaped",
            page.display()
        );
    }
    let job_view = &views[&imbalanced_page];
    assert!(
        job_view
            .charts
            .iter()
            .any(|c| c.title.starts_with("Imbalance per superstep")),
        "the imbalance time series chart: {job_view:?}"
    );
    assert!(job_view.title.contains(&imbalanced.job_id), "{job_view:?}");

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

/// Loads the pages `arguments[0]` one after another in a 1200 x 1400 frame of the host page
/// and calls back with each page's view once it loaded: its state, title, whether it has the
/// navigation bar, how many scripts it holds, and for each chart (SVG element) its title,
/// laid-out width and how many of its data marks (shapes with a tooltip) the browser drew with a
/// non-empty box. (Pages in a frame of one host instead of navigating the tab to each: half the
/// browser's work per page.)
const VIEW_SCRIPT: &str = r#"
const [urls, done] = arguments;
const view = doc => ({
    ready: doc.readyState,
    title: doc.title,
    nav: doc.querySelector('nav') !== null,
    scripts: doc.getElementsByTagName('script').length,
    charts: [...doc.getElementsByTagName('svg')].map(svg => ({
        title: svg.getAttribute('aria-label') || '',
        width: svg.getBoundingClientRect().width,
        marks: svg instanceof doc.defaultView.SVGSVGElement
            ? [...svg.querySelectorAll('rect, circle, path, polygon')]
                .filter(m => m.querySelector('title') !== null)
                .filter(m => { const b = m.getBBox(); return b.width > 0 && b.height > 0; })
                .length
            : 0,
    })),
});
const frame = document.createElement('iframe');
frame.style.cssText = 'width: 1200px; height: 1400px; border: 0';
document.body.appendChild(frame);
const views = [];
frame.onload = () => {
    try {
        views.push(view(frame.contentDocument));
    } catch (e) {
        views.push({ error: String(e) });
    }
    if (views.length === urls.length) {
        done(views);
    } else {
        frame.src = urls[views.length];
    }
};
frame.src = urls[0];
"#;
/// Pages loaded by one run of [`VIEW_SCRIPT`].
const PAGES_PER_RUN: usize = 100;

/// One chart as the browser drew it.
#[derive(Debug)]
struct Chart {
    title: String,
    width: f64,
    marks: u64,
}

/// One page as the browser built it (see [`VIEW_SCRIPT`]).
#[derive(Debug)]
struct View {
    ready: String,
    title: String,
    nav: bool,
    scripts: u64,
    charts: Vec<Chart>,
}

impl View {
    fn from_json(v: &Value) -> Result<View, String> {
        if let Some(error) = v["error"].as_str() {
            return Err(error.to_string());
        }
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        Ok(View {
            ready: text(&v["ready"]),
            title: text(&v["title"]),
            nav: v["nav"] == true,
            scripts: v["scripts"].as_u64().unwrap_or(u64::MAX),
            charts: v["charts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| Chart {
                    title: text(&c["title"]),
                    width: c["width"].as_f64().unwrap_or_default(),
                    marks: c["marks"].as_u64().unwrap_or_default(),
                })
                .collect(),
        })
    }

    /// What is wrong with this view of a page whose HTML holds `charts` charts, at least
    /// `min_charts` of them.
    fn problems(&self, charts: usize, min_charts: usize) -> Vec<String> {
        let mut problems = Vec::new();
        if self.ready != "complete" {
            problems.push(format!("document.readyState is {:?}", self.ready));
        }
        if self.title.trim().is_empty() {
            problems.push("no title".into());
        }
        if !self.nav {
            problems.push("no navigation bar".into());
        }
        if self.scripts != 0 {
            problems.push(format!("{} script elements", self.scripts));
        }
        if self.charts.len() != charts || charts < min_charts {
            problems.push(format!(
                "{} charts in the browser, {charts} in the HTML, at least {min_charts} expected",
                self.charts.len()
            ));
        }
        for chart in &self.charts {
            if chart.width <= 0.0 || chart.marks == 0 {
                problems.push(format!(
                    "chart {:?} is not drawn ({} px wide, {} data marks)",
                    chart.title, chart.width, chart.marks
                ));
            }
        }
        problems
    }
}

/// The charts a page must have at least: the overview's trend, the nine of the charts page, a
/// user's routines.
fn min_charts(page: &Path) -> usize {
    match page.to_str().unwrap_or_default() {
        "index.html" => 1,
        "charts.html" => 9,
        p if p.starts_with("users/") => 1,
        _ => 0,
    }
}

/// Every HTML file under `dir`, sorted.
fn html_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(html_files(&path));
        } else if path.extension().is_some_and(|e| e == "html") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Load every page of the site in `site` in `browser` and check it ([`View::problems`], console
/// errors); panics listing the failing pages. The views of all pages, by path.
fn render_every_page(browser: &Browser, site: &Path, dir: &Path) -> BTreeMap<PathBuf, View> {
    let start = Instant::now();
    let host = dir.join("host.html");
    std::fs::write(
        &host,
        "<!DOCTYPE html><html><head><title>host</title></head><body></body></html>",
    )
    .unwrap();
    let url = |page: &Path| format!("file://{}", page.display());
    let mut views = BTreeMap::new();
    let mut failures = Vec::new();
    let pages = html_files(site);
    for batch in pages.chunks(PAGES_PER_RUN) {
        assert!(
            start.elapsed() < BROWSE_TIMEOUT,
            "loading the site's pages did not finish within {BROWSE_TIMEOUT:?}: {} of {} loaded, \
             {} failed so far:\n{}",
            views.len(),
            pages.len(),
            failures.len(),
            failures.join("\n")
        );
        let urls: Vec<String> = batch.iter().map(|p| url(p)).collect();
        let batch_views = browser
            .open(&url(&host))
            .and_then(|()| browser.run_async(VIEW_SCRIPT, json!([urls])))
            .and_then(|v| match v.as_array() {
                Some(views) if views.len() == batch.len() => Ok(views.clone()),
                _ => Err(format!("not one view per page: {v}")),
            });
        // The console log does not say which page of the run logged an error: when it holds
        // any, every page of the run is loaded once more on its own.
        let console = browser.console_errors();
        let pages_with_errors = match &console {
            Ok(errors) if errors.is_empty() => BTreeMap::new(),
            _ => batch
                .iter()
                .map(|page| {
                    let errors = browser
                        .open(&url(page))
                        .and_then(|()| browser.console_errors())
                        .unwrap_or_else(|e| vec![e]);
                    (page, errors)
                })
                .collect(),
        };
        for (k, page) in batch.iter().enumerate() {
            let relative = page.strip_prefix(site).unwrap();
            let html = std::fs::read_to_string(page).unwrap();
            let view = batch_views
                .as_ref()
                .map_err(String::clone)
                .and_then(|views| View::from_json(&views[k]));
            let mut problems = match &view {
                Ok(view) => view.problems(html.matches("<svg").count(), min_charts(relative)),
                Err(e) => vec![e.clone()],
            };
            if let Some(errors) = pages_with_errors.get(page) {
                problems.extend(errors.iter().map(|e| format!("console: {e}")));
            }
            if !problems.is_empty() {
                failures.push(format!("{}: {}", relative.display(), problems.join("; ")));
            }
            if let Ok(view) = view {
                views.insert(page.clone(), view);
            }
        }
    }
    eprintln!(
        "Chromium rendered {} pages in {:.1} s",
        pages.len(),
        start.elapsed().as_secs_f64()
    );
    let shown = failures.len().min(SHOWN_FAILURES);
    assert!(
        failures.is_empty(),
        "{} of {} pages fail in Chromium:\n{}{}",
        failures.len(),
        pages.len(),
        failures[..shown].join("\n"),
        if failures.len() > shown {
            format!("\n... and {} more", failures.len() - shown)
        } else {
            String::new()
        }
    );
    views
}

/// Unix milliseconds of `YYYY-MM`-01 00:00 UTC.
fn month_start(month: &str) -> u64 {
    let secs = date(&[&format!("--date={month}-01T00:00:00Z"), "+%s"]);
    secs.parse::<u64>().unwrap() * 1000
}
