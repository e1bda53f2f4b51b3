//! The Fortran twins of the deterministic program, one per binding: exact calls and bytes, and
//! the record says `binding == Fortran`; under Open MPI and under MPICH (`mpifort.mpich`).

use mpistat_e2e::*;
use mpistat_record::Binding;

/// `basic.F90` compiled for one binding with `mpi`'s `mpifort`.
fn basic_fortran(
    name: &'static str,
    define: &'static [&'static str],
    mpi: Mpi,
) -> std::path::PathBuf {
    Program {
        source: "basic.F90",
        name,
        flags: define,
    }
    .path_for(mpi)
}

for_each_mpi! {
    fn mpif_h_program_record_is_exact_and_fortran(mpi) {
        let _serial = serial();
        check_basic_program(
            basic_fortran("basic_mpif_h", &["-DMPIF_H"], mpi),
            Binding::Fortran,
            mpi,
        );
    }
}

for_each_mpi! {
    fn use_mpi_program_record_is_exact_and_fortran(mpi) {
        let _serial = serial();
        check_basic_program(
            basic_fortran("basic_use_mpi", &["-DUSE_MPI"], mpi),
            Binding::Fortran,
            mpi,
        );
    }
}

for_each_mpi! {
    fn use_mpi_f08_program_record_is_exact_and_fortran(mpi) {
        let _serial = serial();
        check_basic_program(
            basic_fortran("basic_use_mpi_f08", &["-DUSE_F08"], mpi),
            Binding::Fortran,
            mpi,
        );
    }
}
