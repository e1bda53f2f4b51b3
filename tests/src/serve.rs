//! `mpistat serve` on a Unix socket of its own, and the pages an admin asks it for.

use crate::users::User;
use crate::workspace::mpistat_binary;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `mpistat serve --config CONFIG` listening on `socket` (as `user`, or as the test's own
/// user), killed when dropped. The site's proxy is the test: it names the login in the header
/// `REMOTE_USER` (the shipped `[serve] user_header`).
pub struct Serve {
    child: Child,
    socket: PathBuf,
}

impl Serve {
    /// Started, and listening (it must be within 60 s).
    pub fn start(user: Option<&User>, config: &Path, socket: &Path) -> Serve {
        let binary = mpistat_binary();
        let mut command = match user {
            Some(user) => user.command(&binary),
            None => Command::new(&binary),
        };
        let listen = format!("unix:{}", socket.display());
        let mut child = command
            .args(["serve", "--listen", &listen, "--config"])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !socket.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("serve ended ({status}): {err}");
            }
            assert!(Instant::now() < deadline, "serve did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        Serve {
            child,
            socket: socket.to_path_buf(),
        }
    }

    /// `GET /path` by the admin `root`: the whole response, status line and headers included.
    pub fn get(&self, path: &str) -> Vec<u8> {
        let mut stream = UnixStream::connect(&self.socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        let request = format!(
            "GET /{path} HTTP/1.1\r\nHost: localhost\r\nREMOTE_USER: root\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        response
    }

    /// [`Serve::get`], required to answer 200 with a body of more than 500 bytes: the response.
    pub fn get_ok(&self, path: &str) -> Vec<u8> {
        let response = self.get(path);
        let text = String::from_utf8_lossy(&response);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        assert!(head.starts_with("HTTP/1.1 200 "), "{path}: {head}");
        assert!(body.len() > 500, "{path}: {} bytes", body.len());
        response
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every kind of page `serve` makes, for an admin, of the period `period` (`2026-W47`,
/// `2026-11`): the overview, charts, tables, critical jobs, users (also sorted), the page of
/// `user` (also sorted by CPU time), the page of job `job_key`, a search by user and by job id,
/// and `/metrics`.
pub fn every_page(period: &str, user: &str, job_key: &str, job_id: &str) -> Vec<String> {
    let period = format!("period={period}");
    let mut pages: Vec<String> = ["index", "charts", "tables", "critical", "users"]
        .iter()
        .map(|p| format!("{p}.html?{period}"))
        .collect();
    pages.push(format!("users.html?{period}&sort=cpu"));
    pages.push(format!("users/{user}.html?{period}"));
    pages.push(format!("users/{user}.html?{period}&sort=cpu"));
    pages.push(format!("jobs/{job_key}.html"));
    pages.push(format!("search.html?{period}&q={user}"));
    pages.push(format!("search.html?{period}&q={job_id}"));
    pages.push("metrics".to_string());
    pages
}
