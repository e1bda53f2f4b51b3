//! The deterministic C program: exact calls and bytes per routine, nothing printed by us.

use mpistat_e2e::*;
use mpistat_record::Binding;

#[test]
fn c_program_record_has_exact_calls_and_bytes() {
    let _serial = serial();
    check_basic_program(program("basic.c"), Binding::C);
}

#[test]
fn record_goes_to_the_configured_facility() {
    let _serial = serial();
    // This daemon writes only local2: a record sent with the default local5 would not show up.
    let syslogd = Syslogd::with_facility("local2");
    Job::new(program("basic.c"), 2)
        .profiled(&syslogd.site_config())
        .assert_success();
    let record = syslogd.single_record();
    assert_eq!(record.ranks, 2);
    assert_routines(&record, &basic_expectations(2));
}
