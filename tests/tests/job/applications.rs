//! Interpreter jobs are filed under their application: two mpi4py scripts run by the same
//! `/usr/bin/python3` (one as `python3 a.py`, one as `python3 -m mpi4py b.py`, both relative to
//! the job's directory) are two applications in their records, in `mpistat show --json` and in
//! the weekly mail and the admin pages, each with the interpreter; escalating one script traces its next run and not
//! the other's; and ingest's escalation rule lists scripts, never the interpreter.
//!
//! Under MPICH too: Debian's mpi4py is built for Open MPI only, so there the scripts call
//! MPICH's C API through `ctypes` (from the process's global scope, where the preloaded profiler
//! comes first, as an extension module linked with libmpich would), and b.py runs as
//! `python3 -u b.py` (an option before the script) instead of through `-m mpi4py`.

use mpistat_e2e::*;
use std::path::Path;
use std::process::Command;

const PYTHON: &str = "/usr/bin/python3";

const SCRIPT: &str = "from mpi4py import MPI\n\
comm = MPI.COMM_WORLD\n\
for _ in range(20):\n    comm.Barrier()\n\
total = comm.allreduce(comm.Get_rank())\n\
print('ok', comm.Get_rank(), total)\n";

/// The MPICH form of [`SCRIPT`]: the same calls through `ctypes` (handles of MPICH's `mpi.h`).
const CTYPES_SCRIPT: &str = "import ctypes\n\
ctypes.CDLL('libmpich.so.12', mode=ctypes.RTLD_GLOBAL)\n\
mpi = ctypes.CDLL(None)\n\
WORLD, INT, SUM = 0x44000000, 0x4c000405, 0x58000003\n\
mpi.MPI_Init(None, None)\n\
rank = ctypes.c_int()\n\
mpi.MPI_Comm_rank(WORLD, ctypes.byref(rank))\n\
for _ in range(20):\n    mpi.MPI_Barrier(WORLD)\n\
total = ctypes.c_int()\n\
mpi.MPI_Allreduce(ctypes.byref(rank), ctypes.byref(total), 1, INT, SUM, WORLD)\n\
print('ok', rank.value, total.value)\n\
mpi.MPI_Finalize()\n";

fn list_text(config: &Path) -> String {
    let out = mpistat(&["escalate", "list"], config);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

for_each_mpi! {
fn two_python_scripts_are_two_applications(mpi) {
    let mpi4py = Command::new(PYTHON)
        .args(["-c", "import mpi4py"])
        .status()
        .expect("run /usr/bin/python3");
    assert!(
        mpi == Mpi::Mpich || mpi4py.success(),
        "mpi4py missing: run scripts/prereqs.sh (python3-mpi4py)"
    );
    let _serial = serial();
    let syslogd = Syslogd::start();
    let dir = Scratch::new("applications");
    let list = dir.path().join("escalation.list");
    let site = syslogd.site_config();
    let mut text = std::fs::read_to_string(&site).unwrap();
    // The rule takes any job that has imbalance figures (these do: Barrier, Allreduce).
    text.push_str(&format!(
        "[trace]\ndirectory = \"{traces}/{{job_id}}\"\n\
         [escalation]\nlist = {list:?}\nmpi_percent_min = 0.0\n\
         critical_path_imbalance_percent_min = 0.0\ncpu_hours_min = 0.0\n\
         [database]\npath = {db:?}\n",
        traces = dir.path().join("traces").display(),
        list = list.display().to_string(),
        db = dir.path().join("mpistat.db").display().to_string(),
    ));
    std::fs::write(&site, text).unwrap();
    let script = match mpi {
        Mpi::OpenMpi => SCRIPT,
        Mpi::Mpich => CTYPES_SCRIPT,
    };
    for name in ["a.py", "b.py"] {
        std::fs::write(dir.path().join(name), script).unwrap();
    }
    let a_job = Job::new(PYTHON, 2).mpi(mpi).arg("a.py").cwd(dir.path());
    let b_job = match mpi {
        Mpi::OpenMpi => Job::new(PYTHON, 2).arg("-m").arg("mpi4py"),
        Mpi::Mpich => Job::new(PYTHON, 2).mpi(mpi).arg("-u"),
    }
    .arg("b.py")
    .cwd(dir.path());
    let a_app = dir.path().join("a.py").display().to_string();
    let b_app = dir.path().join("b.py").display().to_string();

    a_job.profiled(&site).assert_success();
    let a = syslogd.wait_for_record("of a.py", |r| r.app == a_app);
    b_job.profiled(&site).assert_success();
    let b = syslogd.wait_for_record("of b.py", |r| r.app == b_app);
    let interpreter = std::fs::canonicalize(PYTHON).unwrap().display().to_string();
    for record in [&a, &b] {
        assert_eq!(record.exe, interpreter);
        assert_eq!(record.interpreter.as_deref(), Some(interpreter.as_str()));
        assert_eq!(record.trace, None, "nothing asked for a trace");
        assert_eq!(record.version, mpistat_record::model::MODEL_VERSION);
    }

    // `mpistat show --json` names the two applications.
    let log = dir.path().join("records.log");
    write_trusted_log(&syslogd, &log);
    let log_arg = log.to_str().unwrap();
    let show = |args: &[&str]| {
        let out = Command::new(library().with_file_name("mpistat"))
            .arg("show")
            .args(args)
            .arg(log_arg)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (json, readable) = (show(&["--json"]), show(&[]));
    for app in [&a_app, &b_app] {
        assert!(json.contains(&format!("\"app\":{app:?}")), "{json}");
        assert!(
            readable.contains(&format!("application {app}\n")),
            "{readable}"
        );
    }
    assert!(readable.contains(&format!("interpreter {interpreter}\n")));

    // Escalating a.py traces a.py's next run, not b.py's.
    let add = ["escalate", "add", &a.user, &a_app, "--captures", "1"];
    assert!(mpistat(&add, &site).status.success());
    b_job.profiled(&site).assert_success();
    let b2 = syslogd.wait_for_record("of b.py's second run", |r| {
        r.app == b_app && r.job_id != b.job_id
    });
    assert_eq!(b2.trace, None, "b.py is not on the list");
    a_job.profiled(&site).assert_success();
    let a2 = syslogd.wait_for_record("of a.py's second run", |r| {
        r.app == a_app && r.job_id != a.job_id
    });
    let trace = a2.trace.expect("a.py's second run was traced");
    assert_eq!(trace.reason, "escalation");

    // Ingest: the traced run spends a.py's entry; the rule puts b.py (a job that meets it and
    // is not listed) on the list: the script, not the interpreter.
    write_trusted_log(&syslogd, &log);
    assert!(mpistat(&["ingest", log_arg], &site).status.success());
    let listed = list_text(&site);
    assert!(listed.contains(&b_app), "{listed}");
    assert!(
        !listed.contains(&a_app),
        "a.py's capture is spent: {listed}"
    );
    assert!(!listed.contains("python3"), "{listed}");

    // The weekly mail (printed) lists each script's jobs with the interpreter.
    let week = this_week();
    let digest = mpistat(
        &["digest", "--week", &week, "--user", &a.user, "--dry-run"],
        &site,
    );
    assert!(digest.status.success());
    let mail = String::from_utf8_lossy(&digest.stdout);
    let python = Path::new(&interpreter)
        .file_name()
        .unwrap()
        .to_string_lossy();
    for script in ["a.py", "b.py"] {
        assert!(mail.contains(&format!("{script} ({python})")), "{mail}");
    }

    // The admin pages: the user's jobs by application, a job page with both.
    let pages = dir.path().join("site");
    let report = [
        "site-report",
        "--week",
        &week,
        "--out",
        pages.to_str().unwrap(),
    ];
    assert!(mpistat(&report, &site).status.success());
    let user_page = std::fs::read_to_string(pages.join(format!("users/{}.html", a.user))).unwrap();
    for app in [&a_app, &b_app] {
        assert!(
            user_page.contains(&format!("{app} ({python})")),
            "{user_page}"
        );
    }
    let job_page = std::fs::read_to_string(pages.join(format!("jobs/{}.html", a.key()))).unwrap();
    assert!(
        job_page.contains(&format!("<th>application</th><td>{a_app}</td>")),
        "{job_page}"
    );
    assert!(job_page.contains(&format!(
        "<th>executable</th><td>{interpreter} (the interpreter)</td>"
    )));
}
}
