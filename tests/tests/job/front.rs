//! The front library (`libmpistat.so`, `front/`) and the implementations it loads from its own
//! directory: a front without its implementation, or with one of another contract version,
//! passes every call through (same output, same exit status, no record); an implementation
//! preloaded directly, without the front, still profiles.

use mpistat_e2e::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory holding a copy of the front, and `implementation` as `libmpistat_openmpi.so` if
/// given (built from C source with `cc`).
fn front_in_dir(label: &str, implementation: Option<&str>) -> (Scratch, PathBuf) {
    let dir = Scratch::new(label);
    let front = dir.path().join("libmpistat.so");
    std::fs::copy(library(), &front).expect("copy the front");
    if let Some(source) = implementation {
        let c = dir.path().join("implementation.c");
        std::fs::write(&c, source).expect("write the implementation");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(dir.path().join("libmpistat_openmpi.so"))
            .arg(&c)
            .output()
            .expect("run cc");
        assert!(out.status.success(), "{out:?}");
    }
    (dir, front)
}

/// basic.c built for `mpi`, run bare and with `front` preloaded (the user asks for the report):
/// the same exit status and output, and no record.
fn passed_through(mpi: Mpi, front: &Path) {
    let syslogd = Syslogd::start();
    let job = Job::new(BASIC.path_for(mpi), 4)
        .mpi(mpi)
        .env("MPISTAT_DETAIL", "stderr");
    let bare = job.bare();
    bare.assert_success();
    let preloaded = job
        .clone()
        .env("LD_PRELOAD", front.display().to_string())
        .linked(&syslogd.site_config());
    preloaded.assert_success();
    assert_same_output(&bare, &preloaded);
    syslogd.assert_no_records();
}

#[test]
fn a_front_without_its_implementation_passes_every_call_through() {
    let _serial = serial();
    let (_dir, front) = front_in_dir("front-alone", None);
    for mpi in [Mpi::OpenMpi, Mpi::Mpich] {
        passed_through(mpi, &front);
    }
}

/// An "implementation" that speaks another version of the contract, and would print and fail
/// every job if its routines were used.
const OTHER_CONTRACT: &str = r#"
#include <stdio.h>
#include <stdlib.h>
unsigned mpistat_impl_attach(void *resolve_next) { (void) resolve_next; return 999; }
static int refuse(const char *name) { printf("%s reached the wrong implementation\n", name); exit(9); }
int MPI_Init(int *argc, char ***argv) { (void) argc; (void) argv; return refuse("MPI_Init"); }
int PMPI_Init(int *argc, char ***argv) { (void) argc; (void) argv; return refuse("PMPI_Init"); }
int MPI_Send(void) { return refuse("MPI_Send"); }
int MPI_Finalize(void) { return refuse("MPI_Finalize"); }
"#;

#[test]
fn an_implementation_of_another_contract_version_is_not_used() {
    let _serial = serial();
    let (_dir, front) = front_in_dir("front-other-contract", Some(OTHER_CONTRACT));
    passed_through(Mpi::OpenMpi, &front);
}

#[test]
fn the_implementation_preloaded_directly_still_profiles() {
    let _serial = serial();
    let syslogd = Syslogd::start();
    Job::new(program("basic.c"), 4)
        .env(
            "LD_PRELOAD",
            implementation("openmpi").display().to_string(),
        )
        .linked(&syslogd.site_config())
        .assert_success();
    let record = syslogd.single_record();
    assert_eq!(record.partial, None);
    assert_routines(&record, &basic_expectations(4));
}
