//! Generates Rust declarations of the built family's `mpi.h` (types, constants, prototypes) with
//! bindgen, and tells the compiler which family that is (`--cfg mpistat_family="openmpi"` or
//! `"mpich"`). The family is the package's: `mpistat-profiler` (Open MPI) or
//! `mpistat-profiler-mpich` (the same sources, `profiler/mpich/Cargo.toml`).
//! The wrappers never link against libmpi (they resolve the real routines with `dlsym` at run
//! time); these bindings give them the types and let `sigcheck.rs` compare every wrapper's
//! signature with the header's at compile time.

use std::path::PathBuf;
use std::process::Command;

/// The families this build script knows, as `mpistat_family` values.
const FAMILIES: &[&str] = &["openmpi", "mpich"];

fn family() -> &'static str {
    match std::env::var("CARGO_PKG_NAME").as_deref() {
        Ok("mpistat-profiler-mpich") => "mpich",
        _ => "openmpi",
    }
}

/// Words of a command's standard output, if it ran and succeeded.
fn words_of(program: &str, args: &[&str]) -> Option<Vec<String>> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    })
}

/// The directories holding the family's `mpi.h`: `MPISTAT_MPI_INCLUDE` (Open MPI) or
/// `MPISTAT_MPICH_INCLUDE` (MPICH) if set, else what the family's compiler wrapper says.
fn mpi_include_dirs(family: &str) -> Vec<PathBuf> {
    let (var, found) = match family {
        "mpich" => (
            "MPISTAT_MPICH_INCLUDE",
            words_of("mpicc.mpich", &["-show"]).map(|w| {
                w.iter()
                    .filter_map(|a| a.strip_prefix("-I").map(String::from))
                    .collect()
            }),
        ),
        _ => (
            "MPISTAT_MPI_INCLUDE",
            words_of("mpicc", &["--showme:incdirs"]),
        ),
    };
    println!("cargo:rerun-if-env-changed={var}");
    if let Ok(dirs) = std::env::var(var) {
        return std::env::split_paths(&dirs).collect();
    }
    match found {
        Some(dirs) => dirs.into_iter().map(PathBuf::from).collect(),
        None if family == "mpich" => panic!(
            "mpistat-profiler-mpich needs MPICH's mpi.h: `mpicc.mpich -show` failed. Install \
             libmpich-dev (Debian) or set MPISTAT_MPICH_INCLUDE to the directory holding mpi.h."
        ),
        None => panic!(
            "mpistat needs Open MPI's mpi.h: `mpicc --showme:incdirs` failed. Install libopenmpi-dev \
             (Debian) or set MPISTAT_MPI_INCLUDE to the directory holding mpi.h."
        ),
    }
}

fn main() {
    let family = family();
    let values: Vec<String> = FAMILIES.iter().map(|f| format!("\"{f}\"")).collect();
    println!(
        "cargo::rustc-check-cfg=cfg(mpistat_family, values({}))",
        values.join(", ")
    );
    println!("cargo::rustc-cfg=mpistat_family=\"{family}\"");
    // The hot wrappers in one 64 KiB-aligned output section `.text.hot` (see hot.ld), with the
    // segments aligned to 64 KiB so that the loader places the library on such a boundary.
    // (The MPICH package's manifest is in `profiler/mpich/`, next to the shared sources.)
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let profiler = match family {
        "mpich" => manifest.parent().unwrap().to_path_buf(),
        _ => manifest,
    };
    let hot_ld = profiler.join("hot.ld");
    println!("cargo:rerun-if-changed={}", hot_ld.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", hot_ld.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,max-page-size=65536");
    let dirs = mpi_include_dirs(family);
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
