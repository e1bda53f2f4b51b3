//! Generates Rust declarations of Open MPI's `mpi.h` (types, constants, prototypes) with bindgen.
//! The wrappers never link against libmpi (they resolve the real routines with `dlsym` at run
//! time); these bindings give them the types and let `sigcheck.rs` compare every wrapper's
//! signature with the header's at compile time.

use std::path::PathBuf;
use std::process::Command;

fn mpi_include_dirs() -> Vec<PathBuf> {
    if let Ok(dirs) = std::env::var("MPISTAT_MPI_INCLUDE") {
        return std::env::split_paths(&dirs).collect();
    }
    let out = Command::new("mpicc").arg("--showme:incdirs").output();
    match out {
        Ok(o) if o.status.success() => {
            String::from_utf8_lossy(&o.stdout).split_whitespace().map(PathBuf::from).collect()
        }
        _ => panic!(
            "mpistat needs Open MPI's mpi.h: `mpicc --showme:incdirs` failed. Install libopenmpi-dev \
             (Debian) or set MPISTAT_MPI_INCLUDE to the directory holding mpi.h."
        ),
    }
}

fn main() {
    // The hot wrappers in one 64 KiB-aligned output section `.text.hot` (see hot.ld), with the
    // segments aligned to 64 KiB so that the loader places the library on such a boundary.
    let hot_ld = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("hot.ld");
    println!("cargo:rerun-if-changed={}", hot_ld.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", hot_ld.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,max-page-size=65536");
    println!("cargo:rerun-if-env-changed=MPISTAT_MPI_INCLUDE");
    let dirs = mpi_include_dirs();
    let mut builder = bindgen::Builder::default()
        .header_contents("wrap.h", "#include <mpi.h>\n")
        .allowlist_function("P?MPI_.*")
        .allowlist_type("MPI_.*|ompi_.*")
        .allowlist_var("MPI_.*|OMPI_.*|ompi_mpi_.*")
        .layout_tests(false)
        .generate_comments(false)
        .prepend_enum_name(false);
    for d in &dirs {
        builder = builder.clang_arg(format!("-I{}", d.display()));
    }
    let bindings = builder.generate().expect("bindgen failed on mpi.h");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("mpi_bindings.rs");
    bindings
        .write_to_file(out)
        .expect("cannot write mpi_bindings.rs");
}
