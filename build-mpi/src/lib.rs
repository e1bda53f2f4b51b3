//! How mpistat's builds find an installed MPI: the family's compiler wrapper (`mpicc` for
//! Open MPI, `mpicc.mpich` for MPICH), the directories of its `mpi.h` and its link flags. Used by
//! the build scripts of `mpistat-profiler` (bindgen over `mpi.h`) and `mpistat-analyze-mpi`
//! (compiles its C shim with the wrapper and links the library), and by wrapgen's tests, so that
//! the discovery and its overrides are written once.
//!
//! Overrides: `MPISTAT_MPI_INCLUDE` / `MPISTAT_MPICH_INCLUDE` (directories of `mpi.h`, a path
//! list) and `MPISTAT_MPICC` (the compiler wrapper, for programs linked against MPI).

use std::path::PathBuf;
use std::process::Command;

/// An MPI family mpistat builds for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    OpenMpi,
    Mpich,
}

impl Family {
    /// The family a package is built for: the MPICH twin packages (`...-mpich`, whose manifests
    /// live in a `mpich/` directory beside the shared sources) or Open MPI.
    pub fn of_package(name: &str) -> Family {
        if name.ends_with("-mpich") {
            Family::Mpich
        } else {
            Family::OpenMpi
        }
    }

    /// The family's compiler wrapper as Debian installs it.
    pub fn wrapper(self) -> &'static str {
        match self {
            Family::OpenMpi => "mpicc",
            Family::Mpich => "mpicc.mpich",
        }
    }

    /// The environment variable that names the directories of the family's `mpi.h`.
    pub fn include_var(self) -> &'static str {
        match self {
            Family::OpenMpi => "MPISTAT_MPI_INCLUDE",
            Family::Mpich => "MPISTAT_MPICH_INCLUDE",
        }
    }

    /// The Debian package that installs the family's `mpi.h` and wrapper.
    pub fn dev_package(self) -> &'static str {
        match self {
            Family::OpenMpi => "libopenmpi-dev",
            Family::Mpich => "libmpich-dev",
        }
    }

    /// The directories holding the family's `mpi.h`: [`Family::include_var`] if set, else what
    /// the wrapper says (Open MPI: `--showme:incdirs`, MPICH: the `-I` words of `-show`);
    /// `None` when neither is there.
    pub fn include_dirs(self) -> Option<Vec<PathBuf>> {
        if let Ok(dirs) = std::env::var(self.include_var()) {
            return Some(std::env::split_paths(&dirs).collect());
        }
        let dirs: Vec<String> = match self {
            Family::OpenMpi => words_of(self.wrapper(), &["--showme:incdirs"])?,
            Family::Mpich => words_of(self.wrapper(), &["-show"])?
                .iter()
                .filter_map(|w| w.strip_prefix("-I").map(String::from))
                .collect(),
        };
        Some(dirs.into_iter().map(PathBuf::from).collect())
    }

    /// What to tell a builder whose family is missing.
    pub fn missing(self, what: &str) -> String {
        format!(
            "mpistat needs {what} of {family}: `{wrapper}` was not found or failed. Install {dev} \
             (Debian) or set {var} to the directory holding mpi.h (and MPISTAT_MPICC to the \
             compiler wrapper).",
            family = match self {
                Family::OpenMpi => "Open MPI",
                Family::Mpich => "MPICH",
            },
            wrapper = self.wrapper(),
            dev = self.dev_package(),
            var = self.include_var(),
        )
    }
}

/// The compiler wrapper to build against `family` with: `MPISTAT_MPICC` if set, else the
/// family's [`Family::wrapper`].
pub fn compiler(family: Family) -> String {
    std::env::var("MPISTAT_MPICC").unwrap_or_else(|_| family.wrapper().into())
}

/// The link words (`-L...`, `-l...`, ...) of a compiler wrapper: Open MPI's `--showme:link`, else
/// MPICH's `-link_info`; `None` when it answers neither.
pub fn link_words(wrapper: &str) -> Option<Vec<String>> {
    words_of(wrapper, &["--showme:link"]).or_else(|| words_of(wrapper, &["-link_info"]))
}

/// Words of a command's standard output, if it ran and succeeded.
pub fn words_of(program: &str, args: &[&str]) -> Option<Vec<String>> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_is_the_packages() {
        assert_eq!(Family::of_package("mpistat-profiler"), Family::OpenMpi);
        assert_eq!(Family::of_package("mpistat-profiler-mpich"), Family::Mpich);
        assert_eq!(
            Family::of_package("mpistat-analyze-mpi-mpich"),
            Family::Mpich
        );
        assert_eq!(Family::of_package("mpistat-analyze-mpi"), Family::OpenMpi);
    }

    #[test]
    fn an_installed_family_has_an_mpi_h() {
        for family in [Family::OpenMpi, Family::Mpich] {
            // Only what is installed can be checked; CI installs both (scripts/prereqs.sh).
            if let Some(dirs) = family.include_dirs() {
                assert!(
                    dirs.iter().any(|d| d.join("mpi.h").is_file()),
                    "{family:?}: no mpi.h in {dirs:?}"
                );
            }
        }
    }
}
