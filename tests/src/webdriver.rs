//! One headless Chromium for many pages: Debian's `chromedriver` driven over its W3C WebDriver
//! HTTP API (plain HTTP/1.1 on loopback, JSON bodies), so that a test can load thousands of pages
//! in one browser instead of starting Chromium per page.
//!
//! Only what the tests need: navigate, size the window, run an asynchronous script, take a
//! screenshot, read the browser's console log. A WebDriver
//! error (a page that does not load in time, a script that throws) comes back as `Err` so the
//! caller can collect it per page; a broken connection or a driver that stops answering panics,
//! since nothing after it could work.

use serde_json::{json, Value};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one WebDriver command may take before the driver counts as hung (the browser's own
/// page-load and script timeouts are shorter and come back as errors).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a page may take to load before its navigation fails.
const PAGE_LOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a script may run (one that loads pages in a frame may load many).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long `chromedriver` may take to start listening and to start Chromium.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A `chromedriver` and the headless Chromium of its one session; both end on drop.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

impl Browser {
    /// Start `chromedriver` and a headless Chromium (window 1200 x 1400, its profile and the
    /// driver's log under `dir`).
    pub fn start(dir: &Path) -> Browser {
        let port = TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let log = File::create(dir.join("chromedriver.log")).expect("chromedriver.log");
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .env("HOME", dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("chromedriver.log"))
            .stderr(log)
            // Its own process group: dropping the browser kills the driver and Chromium with it.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run chromedriver (scripts/prereqs.sh installs chromium-driver): {e}")
            });
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while !browser.ready() {
            if let Some(status) = browser.driver.try_wait().expect("wait for chromedriver") {
                panic!(
                    "chromedriver exited with {status}: {}",
                    std::fs::read_to_string(dir.join("chromedriver.log")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not get ready in {START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--no-first-run",
                "--window-size=1200,1400",
                // A page may read the documents of other file:// pages in its frames (each file
                // is an origin of its own otherwise).
                "--allow-file-access-from-files",
                format!("--user-data-dir={}", dir.join("chromium-profile").display()),
            ]},
            "goog:loggingPrefs": {"browser": "ALL"},
            "timeouts": {
                "pageLoad": PAGE_LOAD_TIMEOUT.as_millis() as u64,
                "script": SCRIPT_TIMEOUT.as_millis() as u64,
            },
        }}});
        let session = browser
            .command("POST", "/session", Some(capabilities))
            .unwrap_or_else(|e| panic!("cannot start Chromium: {e}"));
        browser.session = session["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        browser
    }

    /// The value `script` (a function body) passes to its callback, the last of its arguments
    /// after `args`.
    pub fn run_async(&self, script: &str, args: Value) -> Result<Value, String> {
        self.session_command(
            "POST",
            "execute/async",
            json!({ "script": script, "args": args }),
        )
    }

    /// Load `url` and wait until its load event fired.
    pub fn open(&self, url: &str) -> Result<(), String> {
        self.session_command("POST", "url", json!({ "url": url }))
            .map(drop)
    }

    /// Make the window `width` x `height` pixels.
    pub fn set_window_size(&self, width: u32, height: u32) -> Result<(), String> {
        self.session_command(
            "POST",
            "window/rect",
            json!({ "width": width, "height": height }),
        )
        .map(drop)
    }

    /// A screenshot of the window as PNG.
    pub fn screenshot(&self) -> Result<Vec<u8>, String> {
        use base64::Engine;
        let png = self.command(
            "GET",
            &format!("/session/{}/screenshot", self.session),
            None,
        )?;
        base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap_or_default())
            .map_err(|e| format!("screenshot not base64: {e}"))
    }

    /// The messages the browser logged at level SEVERE (console errors, resources that failed
    /// to load, uncaught exceptions) since the last call.
    pub fn console_errors(&self) -> Result<Vec<String>, String> {
        let entries = self.session_command("POST", "se/log", json!({ "type": "browser" }))?;
        Ok(entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect())
    }

    /// Whether the driver answers and can start a session.
    fn ready(&self) -> bool {
        self.http("GET", "/status", None, Duration::from_secs(5))
            .ok()
            .and_then(|(_, body)| serde_json::from_str::<Value>(&body).ok())
            .is_some_and(|status| status["value"]["ready"] == true)
    }

    fn session_command(&self, method: &str, what: &str, body: Value) -> Result<Value, String> {
        self.command(
            method,
            &format!("/session/{}/{what}", self.session),
            Some(body),
        )
    }

    /// `method path` with `body`; the response's `value`, or its error as text.
    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let (status, response) = self
            .http(method, path, body, COMMAND_TIMEOUT)
            .unwrap_or_else(|e| panic!("chromedriver {method} {path}: {e}"));
        let mut response: Value = serde_json::from_str(&response)
            .unwrap_or_else(|e| panic!("chromedriver {method} {path}: not JSON ({e}): {response}"));
        let value = response["value"].take();
        if status == 200 {
            Ok(value)
        } else {
            Err(format!(
                "{} ({})",
                value["error"].as_str().unwrap_or("error"),
                value["message"].as_str().unwrap_or_default()
            ))
        }
    }

    /// Status and body of one HTTP request on a connection of its own. The body is read by its
    /// `Content-Length`: chromedriver says `Connection: close` but leaves closing to the client.
    fn http(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<(u16, String), String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        let io = |e: std::io::Error| e.to_string();
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\
             Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        )
        .map_err(io)?;
        let mut response = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        let (head_len, status, length) = loop {
            let n = stream.read(&mut chunk).map_err(io)?;
            if n == 0 {
                return Err(format!(
                    "connection closed before the response's head: {:?}",
                    String::from_utf8_lossy(&response)
                ));
            }
            response.extend_from_slice(&chunk[..n]);
            if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&response[..end]).to_ascii_lowercase();
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse::<u16>().ok())
                    .ok_or_else(|| format!("no status in {head:?}"))?;
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| format!("no content-length in {head:?}"))?;
                break (end + 4, status, length);
            }
        };
        while response.len() < head_len + length {
            let n = stream.read(&mut chunk).map_err(io)?;
            if n == 0 {
                return Err("connection closed in the response's body".into());
            }
            response.extend_from_slice(&chunk[..n]);
        }
        let body = String::from_utf8_lossy(&response[head_len..head_len + length]).into_owned();
        Ok((status, body))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() && self.driver.try_wait().is_ok_and(|s| s.is_none()) {
            // Closing the session ends Chromium cleanly; a hung driver is killed below anyway.
            let session = format!("/session/{}", self.session);
            let _ = self.http("DELETE", &session, None, Duration::from_secs(10));
        }
        // SAFETY: kill(2) on the process group created for the driver.
        unsafe { libc::kill(-(self.driver.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.driver.wait();
    }
}
