//! The deterministic C program: exact calls and bytes per routine, nothing printed by us; under
//! Open MPI and under MPICH.

use mpistat_e2e::*;
use mpistat_record::Binding;

for_each_mpi! {
    fn c_program_record_has_exact_calls_and_bytes(mpi) {
        let _serial = serial();
        check_basic_program(program_for("basic.c", mpi), Binding::C, mpi);
    }
}

for_each_mpi! {
    fn record_goes_to_the_configured_facility(mpi) {
        let _serial = serial();
        // This daemon writes only local2: a record sent with the default local5 would not show up.
        let syslogd = Syslogd::with_facility("local2");
        Job::new(program_for("basic.c", mpi), 2)
            .mpi(mpi)
            .profiled(&syslogd.site_config())
            .assert_success();
        let record = syslogd.single_record();
        assert_eq!(record.ranks, 2);
        assert_routines(&record, &basic_expectations(2));
    }
}
