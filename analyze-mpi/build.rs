//! Compiles `src/shim.c` with the MPI compiler wrapper (`MPISTAT_MPICC`, else `mpicc` for
//! `mpistat-analyze-mpi` and `mpicc.mpich` for `mpistat-analyze-mpi-mpich`, whose manifest is in
//! `mpich/`) and links the program against that MPI library, with the library directories the
//! wrapper names. Finding the wrapper and its flags is crate `mpistat-build-mpi`'s (shared with
//! the profiler's build).

use mpistat_build_mpi::{compiler, link_words, Family};

fn main() {
    println!("cargo:rerun-if-env-changed=MPISTAT_MPICC");
    let family = Family::of_package(&std::env::var("CARGO_PKG_NAME").unwrap_or_default());
    let sources = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let sources = match family {
        Family::Mpich => sources.parent().unwrap().join("src"),
        Family::OpenMpi => sources.join("src"),
    };
    let mpicc = compiler(family);
    let link =
        link_words(&mpicc).unwrap_or_else(|| panic!("{}", family.missing("the compiler wrapper")));
    println!(
        "cargo:rerun-if-changed={}",
        sources.join("shim.c").display()
    );
    cc::Build::new()
        .compiler(&mpicc)
        .file(sources.join("shim.c"))
        .compile("mpistat_mpi_shim");
    for word in link {
        if let Some(dir) = word.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        } else if let Some(lib) = word.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
}
