//! Which MPI family (ABI) ran a job, told from the record's `mpi_library` (the first line of
//! `MPI_Get_library_version`): the profiler is built once per family, and the report, the admin
//! pages and `mpistat show --json` name the family next to the library.

/// An MPI ABI family the profiler is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Open MPI (`libmpi.so.40`).
    OpenMpi,
    /// The MPICH ABI (`libmpi.so.12`): MPICH, Intel MPI, MVAPICH, Cray MPICH.
    Mpich,
}

impl Family {
    /// The family's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::OpenMpi => "Open MPI",
            Family::Mpich => "MPICH",
        }
    }

    /// The soname of the family's MPI library (its ABI).
    pub fn soname(self) -> &'static str {
        match self {
            Family::OpenMpi => "libmpi.so.40",
            Family::Mpich => "libmpi.so.12",
        }
    }

    /// The family of the MPI library `MPI_Get_library_version` names, if known.
    pub fn of_library(mpi_library: &str) -> Option<Family> {
        let library = mpi_library.trim_start();
        let upper = library.to_ascii_uppercase();
        if library.starts_with("Open MPI") {
            Some(Family::OpenMpi)
        } else if ["MPICH", "MVAPICH", "CRAY MPICH", "INTEL(R) MPI"]
            .iter()
            .any(|p| upper.starts_with(p))
        {
            Some(Family::Mpich)
        } else {
            None
        }
    }
}

/// `mpi_library` with its family, as reports show it: `Open MPI v4.1.4, ... (Open MPI family,
/// libmpi.so.40)`; an unknown library is shown as it is, an empty one as `unknown`.
pub fn describe_library(mpi_library: &str) -> String {
    let library = mpi_library.split_whitespace().collect::<Vec<_>>().join(" ");
    match Family::of_library(&library) {
        Some(f) => format!("{library} ({} family, {})", f.name(), f.soname()),
        None if library.is_empty() => "unknown".to_string(),
        None => library,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_of_known_libraries() {
        for (library, family) in [
            (
                "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4",
                Some(Family::OpenMpi),
            ),
            ("MPICH Version:\t4.0.2", Some(Family::Mpich)),
            ("MVAPICH2 Version      :\t2.3.7", Some(Family::Mpich)),
            (
                "Intel(R) MPI Library 2021.10 for Linux* OS",
                Some(Family::Mpich),
            ),
            ("CRAY MPICH version 8.1.25", Some(Family::Mpich)),
            ("Stub MPI 9.9", None),
            ("", None),
        ] {
            assert_eq!(Family::of_library(library), family, "{library}");
        }
    }

    #[test]
    fn described_with_family_and_whitespace_tidied() {
        assert_eq!(
            describe_library("MPICH Version:\t4.0.2"),
            "MPICH Version: 4.0.2 (MPICH family, libmpi.so.12)"
        );
        assert_eq!(
            describe_library("Open MPI v4.1.5, package: Debian OpenMPI"),
            "Open MPI v4.1.5, package: Debian OpenMPI (Open MPI family, libmpi.so.40)"
        );
        assert_eq!(describe_library("Stub MPI 9.9"), "Stub MPI 9.9");
        assert_eq!(describe_library(""), "unknown");
    }
}
