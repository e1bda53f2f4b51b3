//! A program linked with `-lmpistat` ahead of `-lmpi` (what a site puts in Open MPI's wrapper data
//! to make profiling the default) is profiled without any environment variable.

use mpistat_e2e::*;
use mpistat_record::Binding;

#[test]
fn program_linked_with_lmpistat_is_profiled_without_ld_preload() {
    let _serial = serial();
    let lib = library();
    let dir = lib
        .parent()
        .expect("library directory")
        .display()
        .to_string();
    let flags: &'static [&'static str] = Box::leak(Box::new([
        Box::leak(format!("-L{dir}").into_boxed_str()) as &str,
        Box::leak(format!("-Wl,-rpath,{dir}").into_boxed_str()),
        "-lmpistat",
    ]));
    let linked = Program {
        source: "basic.c",
        name: "basic_linked",
        flags,
    }
    .path();
    let syslogd = Syslogd::start();
    Job::new(linked, 4)
        .linked(&syslogd.site_config())
        .assert_success();
    let record = syslogd.single_record();
    assert_eq!(record.binding, Binding::C);
    assert_routines(&record, &basic_expectations(4));
}
