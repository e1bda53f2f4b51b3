//! A program linked with the profiler ahead of the MPI library (what a site puts in the compiler
//! wrapper's data to make profiling the default: `-lmpistat` in Open MPI's `mpicc-wrapper-data.txt`,
//! `-Wl,--no-as-needed -lmpistat` in MPICH's `mpicc.mpich` configuration) is profiled without any
//! environment variable.

use mpistat_e2e::*;
use mpistat_record::Binding;

for_each_mpi! {
    fn program_linked_with_lmpistat_is_profiled_without_ld_preload(mpi) {
        let _serial = serial();
        let lib = library();
        let dir = lib
            .parent()
            .expect("library directory")
            .display()
            .to_string();
        // A program refers to no symbol that only MPICH's library defines (its handles are
        // constants), so with the linker's --as-needed (Debian's default) the `-lmpich` that
        // mpicc.mpich appends would be dropped: the recipe keeps it.
        let keep_mpi = match mpi {
            Mpi::OpenMpi => "-Wl,--as-needed",
            Mpi::Mpich => "-Wl,--no-as-needed",
        };
        let flags: &'static [&'static str] = Box::leak(Box::new([
            Box::leak(format!("-L{dir}").into_boxed_str()) as &str,
            Box::leak(format!("-Wl,-rpath,{dir}").into_boxed_str()),
            keep_mpi,
            "-lmpistat",
        ]));
        let linked = Program {
            source: "basic.c",
            name: "basic_linked",
            flags,
        }
        .path_for(mpi);
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
