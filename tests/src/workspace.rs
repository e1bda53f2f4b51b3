//! Where things are and small shared means: the workspace and its built libraries and binaries,
//! the lock that runs MPI jobs one at a time, free ports, file lines.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// This machine's host name, as its rsyslogd names it in the lines it writes (a record's host
/// must be its line's).
pub fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    name.trim().to_string()
}

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The workspace's `target` directory (`CARGO_TARGET_DIR` if set).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The profiler library under test, the front: `MPISTAT_LIB`, else
/// `<target>/release/libmpistat.so`.
///
/// Panics if it does not exist: the tests never build it themselves (they would race the build).
pub fn library() -> PathBuf {
    let path = std::env::var_os("MPISTAT_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("release/libmpistat.so"));
    assert!(
        path.is_file(),
        "{} does not exist: run cargo build --release -p mpistat-front -p mpistat-profiler first (or set MPISTAT_LIB)",
        path.display()
    );
    path
}

/// The profiler built for one MPI family (`openmpi`), which the front [`library`] loads from
/// its own directory: `libmpistat_<family>.so` beside it.
///
/// Panics if it does not exist, as [`library`].
pub fn implementation(family: &str) -> PathBuf {
    let path = library().with_file_name(format!("libmpistat_{family}.so"));
    assert!(
        path.is_file(),
        "{} does not exist: run cargo build --release -p mpistat-profiler first",
        path.display()
    );
    path
}

/// The `mpistat` binary the tests run (and the profiler starts for `analyze --send`).
pub fn mpistat_binary() -> PathBuf {
    library().with_file_name("mpistat")
}

/// poison it for the others).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The lines of the file at `path` (none if it cannot be read).
pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The ISO week of today (UTC), e.g. `2026-W48`, as `mpistat digest --week` takes it.
pub fn this_week() -> String {
    let week = Command::new("date")
        .args(["-u", "+%G-W%V"])
        .output()
        .unwrap();
    String::from_utf8(week.stdout).unwrap().trim().to_string()
}

/// A free TCP port on localhost.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every file under `dir` (by its path relative to `dir`) and its bytes: a static site, an
/// inbox, to compare with another.
pub fn files_under(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut found = std::collections::BTreeMap::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                found.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

/// The first lines in which `a` and `b` differ (three at most), for a message.
fn first_difference(sides: [&str; 2], a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let lines: Vec<String> = a
        .lines()
        .zip(b.lines())
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .take(3)
        .map(|(n, (x, y))| {
            format!(
                "line {}:\n  {}: {x:?}\n  {}: {y:?}",
                n + 1,
                sides[0],
                sides[1]
            )
        })
        .collect();
    if lines.is_empty() {
        format!("{} vs {} lines", a.lines().count(), b.lines().count())
    } else {
        lines.join("\n")
    }
}

/// Two sides' outputs (reports, mails, files, pages by name) are the same, byte for byte: else
/// fail, naming every one that differs and where.
pub fn assert_same_outputs(
    sides: [&str; 2],
    a: &std::collections::BTreeMap<String, Vec<u8>>,
    b: &std::collections::BTreeMap<String, Vec<u8>>,
) {
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let differences: Vec<String> = names
        .into_iter()
        .filter_map(|name| match (a.get(name), b.get(name)) {
            (Some(x), Some(y)) if x == y => None,
            (Some(x), Some(y)) => Some(format!("{name}: {}", first_difference(sides, x, y))),
            (x, _) => Some(format!(
                "{name}: only from {}",
                if x.is_some() { sides[0] } else { sides[1] }
            )),
        })
        .collect();
    assert!(
        differences.is_empty(),
        "{} of {} outputs differ:\n{}",
        differences.len(),
        a.len(),
        differences.join("\n")
    );
}
