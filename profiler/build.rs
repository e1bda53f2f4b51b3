//! Generates Rust declarations of the built family's `mpi.h` (types, constants, prototypes) with
//! bindgen, and tells the compiler which family that is (`--cfg mpistat_family="openmpi"` or
//! `"mpich"`). The family is the package's: `mpistat-profiler` (Open MPI) or
//! `mpistat-profiler-mpich` (the same sources, `profiler/mpich/Cargo.toml`). Finding `mpi.h` is
//! crate `mpistat-build-mpi`'s (shared with `mpistat-analyze`'s build).
//! The wrappers never link against libmpi (they resolve the real routines with `dlsym` at run
//! time); these bindings give them the types and let `sigcheck.rs` compare every wrapper's
//! signature with the header's at compile time.

use mpistat_build_mpi::Family;
use std::path::PathBuf;

/// The families this build script knows, as `mpistat_family` values.
const FAMILIES: &[&str] = &["openmpi", "mpich"];

fn main() {
    let family = Family::of_package(&std::env::var("CARGO_PKG_NAME").unwrap_or_default());
    println!("cargo:rerun-if-env-changed={}", family.include_var());
    let family_name = match family {
        Family::OpenMpi => "openmpi",
        Family::Mpich => "mpich",
    };
    let values: Vec<String> = FAMILIES.iter().map(|f| format!("\"{f}\"")).collect();
    println!(
        "cargo::rustc-check-cfg=cfg(mpistat_family, values({}))",
        values.join(", ")
    );
    println!("cargo::rustc-cfg=mpistat_family=\"{family_name}\"");
    // The hot wrappers in one 64 KiB-aligned output section `.text.hot` (see hot.ld), with the
    // segments aligned to 64 KiB so that the loader places the library on such a boundary.
    // (The MPICH package's manifest is in `profiler/mpich/`, next to the shared sources.)
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let profiler = match family {
        Family::Mpich => manifest.parent().unwrap().to_path_buf(),
        _ => manifest,
    };
    let hot_ld = profiler.join("hot.ld");
    println!("cargo:rerun-if-changed={}", hot_ld.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", hot_ld.display());
    // MPI_Finalize's code in one more 64 KiB-aligned section `.text.finalize` (see finalize.ld).
    let finalize_ld = profiler.join("finalize.ld");
    println!("cargo:rerun-if-changed={}", finalize_ld.display());
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,-T,{}",
        finalize_ld.display()
    );
    // Trace mode's steady path in one more 64 KiB-aligned section `.text.trace` (see trace.ld).
    let trace_ld = profiler.join("trace.ld");
    println!("cargo:rerun-if-changed={}", trace_ld.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", trace_ld.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,max-page-size=65536");
    // Each segment starts on a page of its own, not where the one before ended: the relocated
    // data (RELRO) and the writable data each then take the fewest pages their size allows,
    // all of which every rank keeps (the loader writes them). Only the file grows (padding).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,separate-loadable-segments");
    let dirs = family
        .include_dirs()
        .unwrap_or_else(|| panic!("{}", family.missing("mpi.h")));
    let mut builder = bindgen::Builder::default()
        .header_contents("wrap.h", "#include <mpi.h>\n")
        .allowlist_function("P?MPI_.*")
        // (MPICH declares MPI_CART in `enum MPIR_Topo_type`.)
        .allowlist_type("MPI_.*|ompi_.*|MPIR_Topo_type")
        .allowlist_var("MPI_.*|OMPI_.*|ompi_mpi_.*|MPICH_.*")
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
