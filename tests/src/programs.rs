//! The test programs of `tests/programs/`, compiled with each MPI family's wrappers once per test
//! binary, and `for_each_mpi!` that runs a test under each family.

use crate::workspace::{library, target_dir, workspace_root};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The directory holding the test programs' sources.
pub fn programs_dir() -> PathBuf {
    workspace_root().join("tests/programs")
}

/// The MPI a test program is built with and launched by: Open MPI, the system's default (`mpicc`,
/// `mpifort`, `mpirun`), or MPICH installed beside it (`mpicc.mpich`, `mpifort.mpich`,
/// `mpiexec.mpich`). Each family has its own build of the profiler, which the front ([`library`]) loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mpi {
    #[default]
    OpenMpi,
    Mpich,
}

impl Mpi {
    pub const ALL: [Mpi; 2] = [Mpi::OpenMpi, Mpi::Mpich];

    /// The name of the family in records (`record::family::of_library`).
    pub fn family(self) -> mpistat_record::family::Family {
        match self {
            Mpi::OpenMpi => mpistat_record::family::Family::OpenMpi,
            Mpi::Mpich => mpistat_record::family::Family::Mpich,
        }
    }

    fn compiler(self, language: Language) -> &'static str {
        match (self, language) {
            (Mpi::OpenMpi, Language::C) => "mpicc",
            (Mpi::OpenMpi, Language::Cxx) => "mpicxx",
            (Mpi::OpenMpi, Language::Fortran) => "mpifort",
            (Mpi::Mpich, Language::C) => "mpicc.mpich",
            (Mpi::Mpich, Language::Cxx) => "mpicxx.mpich",
            (Mpi::Mpich, Language::Fortran) => "mpifort.mpich",
        }
    }

    /// What the executable's name gets appended.
    fn suffix(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "",
            Mpi::Mpich => ".mpich",
        }
    }
}

/// A test program's language, by its source's extension: `.c`, `.cc` (C++, with the MPI's C++
/// bindings), else Fortran (`.f90`, `.F90`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Language {
    C,
    Cxx,
    Fortran,
}

impl Language {
    fn of(source: &str) -> Language {
        if source.ends_with(".c") {
            Language::C
        } else if source.ends_with(".cc") {
            Language::Cxx
        } else {
            Language::Fortran
        }
    }
}

/// `tests/programs/basic.c`, for any MPI ([`Program::path_for`]).
pub const BASIC: Program = Program {
    source: "basic.c",
    name: "basic",
    flags: &[],
};

/// A test program: a source in `tests/programs/` compiled under `name` with extra compiler `flags`
/// (one source can give several programs, e.g. the Fortran binding variants).
#[derive(Clone, Copy, Debug)]
pub struct Program {
    pub source: &'static str,
    pub name: &'static str,
    pub flags: &'static [&'static str],
}

impl Program {
    /// Compile (once per test binary) and return the executable's path. C sources (`.c`) use
    /// `mpicc`, C++ sources (`.cc`) `mpicxx`, Fortran sources (`.f90`, `.F90`) `mpifort`. Panics
    /// with the compiler's output on failure.
    pub fn path(&self) -> PathBuf {
        self.path_for(Mpi::OpenMpi)
    }

    /// [`Program::path`] built with `mpi`'s compiler wrappers.
    pub fn path_for(&self, mpi: Mpi) -> PathBuf {
        type Built = HashMap<(&'static str, Mpi), PathBuf>;
        static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
        let built = BUILT.get_or_init(Default::default);
        let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = built.get(&(self.name, mpi)) {
            return p.clone();
        }
        let path = self.compile(mpi);
        built.insert((self.name, mpi), path.clone());
        path
    }

    fn compile(&self, mpi: Mpi) -> PathBuf {
        let src = programs_dir().join(self.source);
        assert!(src.is_file(), "no test program {}", src.display());
        let out_dir = target_dir().join("e2e-programs");
        std::fs::create_dir_all(&out_dir).expect("create target/e2e-programs");
        let name = format!("{}{}", self.name, mpi.suffix());
        let out = out_dir.join(&name);
        // Compile to a private name, then rename: another test binary may be using `out`.
        let tmp = out_dir.join(format!(".{name}.{}", std::process::id()));
        let language = Language::of(self.source);
        let compiler = mpi.compiler(language);
        let lang_flags: &[&str] = match language {
            Language::Fortran => &["-ffree-line-length-none", "-Wall"],
            Language::C => &["-std=gnu11", "-Wall", "-pthread"],
            Language::Cxx => &["-Wall", "-pthread"],
        };
        let output = Command::new(compiler)
            .args(["-O1", "-g"])
            .args(lang_flags)
            .arg("-o")
            .arg(&tmp)
            .arg(&src)
            // After the source, as wrapper compilers place libraries: with --as-needed a library
            // named before the objects that use it would be dropped.
            .args(self.flags)
            .current_dir(&out_dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
        assert!(
            output.status.success(),
            "{compiler} failed on {}:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::rename(&tmp, &out).expect("rename compiled program");
        out
    }
}

/// `source` built as `name` for `mpi`, linked with the front as a site's compiler wrappers do
/// (`-lmpistat` ahead of the MPI library, found through an rpath to [`library`]'s directory).
/// A program refers to no symbol that only MPICH's library defines (its handles are constants),
/// so with the linker's `--as-needed` (Debian's default) the `-lmpich` that `mpicc.mpich`
/// appends would be dropped: the flags keep it.
pub fn linked_with_front(source: &'static str, name: &'static str, mpi: Mpi) -> PathBuf {
    let dir = library()
        .parent()
        .expect("library directory")
        .display()
        .to_string();
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
    Program {
        source,
        name,
        flags,
    }
    .path_for(mpi)
}

/// A C or Fortran program built from `source` alone (named after the source without extension,
/// and, but for C, with it: `waitany_order.c` and its Fortran twin `waitany_order.f90` are two
/// programs, which one name made one in a test binary, whichever was built first).
pub fn program(source: &'static str) -> PathBuf {
    program_for(source, Mpi::OpenMpi)
}

/// [`program`] built with `mpi`'s compiler wrappers.
pub fn program_for(source: &'static str, mpi: Mpi) -> PathBuf {
    let name = match source.rsplit_once('.') {
        Some((stem, "c")) => stem,
        // A few bytes a call, in a test.
        Some((stem, extension)) => Box::leak(format!("{stem}-{extension}").into_boxed_str()),
        None => source,
    };
    Program {
        source,
        name,
        flags: &[],
    }
    .path_for(mpi)
}

/// One end-to-end test per MPI family: `for_each_mpi! { fn name(mpi) { body } }` makes module
/// `name` with the tests `open_mpi` and `mpich`, each running the body with its [`Mpi`] (so a
/// failure names the family: `basic::mpich`).
#[macro_export]
macro_rules! for_each_mpi {
    ($(#[$meta:meta])* fn $name:ident($mpi:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($mpi: $crate::programs::Mpi) $body

            #[test]
            fn open_mpi() {
                run($crate::programs::Mpi::OpenMpi)
            }

            #[test]
            fn mpich() {
                run($crate::programs::Mpi::Mpich)
            }
        }
    };
}
