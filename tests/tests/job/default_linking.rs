//! A program linked with the profiler ahead of the MPI library (what a site puts in the compiler
//! wrapper's data to make profiling the default: `-lmpistat` in Open MPI's `mpicc-wrapper-data.txt`,
//! `-Wl,--no-as-needed -lmpistat` in MPICH's `mpicc.mpich` configuration) is profiled without any
//! environment variable.

use mpistat_e2e::*;
use mpistat_record::Binding;

for_each_mpi! {
    fn program_linked_with_lmpistat_is_profiled_without_ld_preload(mpi) {
        let _serial = serial();
        let linked = linked_with_front("basic.c", "basic_linked", mpi);
        let syslogd = Syslogd::start();
        Job::new(linked, 4)
            .mpi(mpi)
            .linked(&syslogd.site_config())
            .assert_success();
        let record = syslogd.single_record();
        assert_eq!(record.binding, Binding::C);
        assert_routines(&record, &basic_expectations(4));
    }
}
