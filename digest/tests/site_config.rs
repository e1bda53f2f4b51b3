//! The site-side commands refuse a configuration they cannot use: a misspelt key, a bad value, a
//! file that is missing or cannot be read, whether named by `--config` or `MPISTAT_CONFIG`. Each
//! command exits with 78 (`EX_CONFIG`) and the problem, before it opens (or creates) a database,
//! a page or a socket. `mpistat show` needs no site configuration and works whatever it is.

use mpistat_testkit::scratch::Scratch;
use mpistat_testkit::synthetic as common;

use common::{syslog_lines, week_of_jobs};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// sysexits.h's `EX_CONFIG`: what a site-side command exits with on a configuration it refuses.
const EX_CONFIG: i32 = 78;

fn temp_dir(label: &str) -> Scratch {
    Scratch::new(&format!("config-{label}"))
}

/// `mpistat args`, with `MPISTAT_CONFIG` set to `env_config`; killed after 20 s (a command that
/// wrongly starts, such as `serve`, must not hang the test).
fn run(args: &[&str], env_config: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mpistat"))
        .args(args)
        .env("MPISTAT_CONFIG", env_config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn site_commands_refuse_a_configuration_they_cannot_use() {
    let dir = temp_dir("refuse");
    let log = dir.join("records.log");
    std::fs::write(&log, syslog_lines(&week_of_jobs(1)[0], Some(1001)).concat()).unwrap();
    let database = dir.join("db.sqlite");
    let pages = dir.join("site");
    let misspelt = dir.join("misspelt.toml");
    std::fs::write(
        &misspelt,
        format!("[database]\npaht = {:?}\n", database.display().to_string()),
    )
    .unwrap();
    let bad_value = dir.join("bad-value.toml");
    std::fs::write(&bad_value, "[syslog]\nfacility = \"local9\"\n").unwrap();
    let missing = dir.join("missing.toml");
    let a_directory = dir.to_path_buf();
    let configs: [(&Path, &str); 4] = [
        (&misspelt, "unknown field `paht`"),
        (&bad_value, "unknown syslog facility \"local9\""),
        (&missing, "cannot read"),
        (&a_directory, "cannot read"),
    ];
    let (db, log, out) = (
        database.to_str().unwrap(),
        log.to_str().unwrap(),
        pages.to_str().unwrap(),
    );
    let commands: [&[&str]; 9] = [
        &["ingest", "--database", db, log],
        &["ingest", "--report", "--database", db],
        &["digest", "--database", db, "--week", "2026-W47"],
        &[
            "site-report",
            "--database",
            db,
            "--week",
            "2026-W47",
            "--out",
            out,
        ],
        &["serve", "--database", db, "--listen", "127.0.0.1:0"],
        &["rebuild-rollups", "--database", db],
        &["db", "migrate", "--database", db],
        &["escalate", "list"],
        &["escalate", "remove", "root"],
    ];
    let harmless = dir.join("harmless.toml");
    std::fs::write(&harmless, "").unwrap();
    for (config, problem) in configs {
        for command in commands {
            // Named on the command line (the environment names a good one), then by the
            // environment alone.
            let by_option = [command, &["--config", config.to_str().unwrap()]].concat();
            for (args, env) in [(&by_option[..], harmless.as_path()), (command, config)] {
                let output = run(args, env);
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert_eq!(
                    output.status.code(),
                    Some(EX_CONFIG),
                    "mpistat {args:?} with MPISTAT_CONFIG={}: {stderr}",
                    env.display()
                );
                assert!(
                    stderr.contains("refusing to start") && stderr.contains(problem),
                    "mpistat {args:?}: {stderr}"
                );
                assert!(
                    stderr.contains(&config.display().to_string()),
                    "names the file: {stderr}"
                );
                assert!(output.stdout.is_empty(), "mpistat {args:?} printed");
                assert!(!database.exists(), "mpistat {args:?} made a database");
                assert!(!pages.exists(), "mpistat {args:?} wrote pages");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mpistat show` reads record files: no site configuration is needed, a broken one is ignored.
#[test]
fn show_needs_no_site_configuration() {
    let dir = temp_dir("show");
    let log = dir.join("records.log");
    let record = &week_of_jobs(1)[0];
    std::fs::write(&log, syslog_lines(record, Some(1001)).concat()).unwrap();
    let broken = dir.join("broken.toml");
    std::fs::write(&broken, "[database\n").unwrap();
    for env in [broken.as_path(), &dir.join("missing.toml")] {
        for json in [false, true] {
            let mut args = vec!["show", log.to_str().unwrap()];
            if json {
                args.insert(1, "--json");
            }
            let output = run(&args, env);
            assert!(output.status.success(), "{output:?}");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(stdout.contains(&record.job_id), "{stdout}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
