//! Issue 16: the weekly mail's HTML as a reader sees it. Every user's mail of a fixed week
//! (`mpistat digest`'s own `mails`, from a real SQLite database filled by ingest) is rendered in
//! headless Chromium (Debian's `chromium`, driven by `chromedriver`) with its `cid:` images
//! resolved (rewritten to `data:` URIs, as a mail client shows the attached parts), in a 900 px
//! window and at a 390 px phone width: the page never scrolls sideways
//! (`document.documentElement.scrollWidth <= innerWidth`), both chart images load and fit, and
//! at 900 px every table fits the mail's 600 px without scrolling in its box. The screenshots
//! are PNGs of the window's width (kept in `$MPISTAT_KEEP_SCREENSHOTS` when set).

use mpistat_testkit::synthetic;

use base64::Engine;
use mpistat_e2e::webdriver::Browser;
use mpistat_e2e::Scratch;
use mpistat_figures::week::IsoWeek;
use mpistat_mail::mails;
use mpistat_site::SiteConfig;
use serde_json::{json, Value};
use std::path::Path;
use synthetic::{week_47_database, USERS};

/// What the page looks like once loaded: its widths, its images and its tables' boxes.
const MEASURE: &str = r#"
const done = arguments[0];
done({
    inner: window.innerWidth,
    scroll: document.documentElement.scrollWidth,
    images: [...document.images].map(i => ({
        alt: i.alt,
        loaded: i.complete && i.naturalWidth > 0,
        width: i.getBoundingClientRect().width,
    })),
    boxes: [...document.querySelectorAll('div')]
        .filter(d => getComputedStyle(d).overflowX === 'auto')
        .map(d => ({ scroll: d.scrollWidth, client: d.clientWidth, text: d.innerText.slice(0, 40) })),
});
"#;

/// The problems of one rendering at `width` (empty: none).
fn problems(view: &Value, width: u32) -> Vec<String> {
    let mut problems = Vec::new();
    let inner = view["inner"].as_u64().unwrap_or(0);
    let scroll = view["scroll"].as_u64().unwrap_or(u64::MAX);
    if !(u64::from(width) - 20..=u64::from(width)).contains(&inner) {
        problems.push(format!("innerWidth {inner}, not about {width}"));
    }
    if scroll > inner {
        problems.push(format!(
            "scrolls sideways: scrollWidth {scroll} > innerWidth {inner}"
        ));
    }
    let images = view["images"].as_array().cloned().unwrap_or_default();
    if images.len() != 2 {
        problems.push(format!("{} images, 2 expected", images.len()));
    }
    for image in &images {
        let image_width = image["width"].as_f64().unwrap_or(f64::MAX);
        if image["loaded"] != true || image_width <= 0.0 || image_width > inner as f64 {
            problems.push(format!("image not shown or too wide: {image}"));
        }
    }
    let boxes = view["boxes"].as_array().cloned().unwrap_or_default();
    if boxes.len() < 4 {
        problems.push(format!("{} table boxes, at least 4 expected", boxes.len()));
    }
    for b in boxes.iter().filter(|_| width >= 900) {
        if b["scroll"].as_u64() > b["client"].as_u64() || b["client"].as_u64() > Some(600) {
            problems.push(format!("table wider than 600 px: {b}"));
        }
    }
    problems
}

#[test]
fn mail_html_fits_a_window_and_a_phone_without_sideways_scrolling() {
    let dir = Scratch::new("mail-html");
    let db = week_47_database(dir.path());
    let week = IsoWeek::parse("2026-W47").unwrap();
    let all = mails(&db, &SiteConfig::default(), week, None).unwrap();
    assert_eq!(all.len(), USERS.len());
    let keep = std::env::var_os("MPISTAT_KEEP_SCREENSHOTS");
    let browser = Browser::start(dir.path());
    let mut failures = Vec::new();
    for mail in &all {
        let mut html = mail.html.clone();
        for image in &mail.images {
            let data = base64::engine::general_purpose::STANDARD.encode(&image.png);
            html = html.replace(
                &format!("cid:{}", image.cid),
                &format!("data:image/png;base64,{data}"),
            );
        }
        assert!(
            !html.contains("cid:"),
            "{}: an unresolved cid: image",
            mail.user
        );
        let page = dir.path().join(format!("{}.html", mail.user));
        std::fs::write(&page, html).unwrap();
        for width in [900, 390] {
            browser.set_window_size(width, 1200).unwrap();
            browser
                .open(&format!("file://{}", page.display()))
                .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
            let view = browser.run_async(MEASURE, json!([])).unwrap();
            let mut found = problems(&view, width);
            found.extend(
                browser
                    .console_errors()
                    .unwrap()
                    .into_iter()
                    .map(|e| format!("console: {e}")),
            );
            let png = browser.screenshot().unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", mail.user);
            let shot_width = u32::from_be_bytes(png[16..20].try_into().unwrap());
            if u64::from(shot_width) != view["inner"].as_u64().unwrap_or(0) {
                found.push(format!(
                    "screenshot {shot_width} px wide, window {}",
                    view["inner"]
                ));
            }
            if let Some(keep) = &keep {
                let name = format!("mail-{}-{width}.png", mail.user);
                std::fs::write(Path::new(keep).join(name), &png).unwrap();
            }
            failures.extend(
                found
                    .into_iter()
                    .map(|p| format!("{} at {width} px: {p}", mail.user)),
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
