//! Generates Rust declarations of libotf2's C interface (`otf2/otf2.h`, Debian's
//! `libopen-trace-format2-dev`) with bindgen, and links the library. The include directory and
//! link words come from `pkg-config otf2` when it knows the package, else the system's defaults;
//! `MPISTAT_OTF2_INCLUDE` and `MPISTAT_OTF2_LIB` (directories) override both, for an OTF2
//! installed elsewhere (a Score-P installation).

use std::path::PathBuf;
use std::process::Command;

fn pkg_config(flag: &str) -> Vec<String> {
    Command::new("pkg-config")
        .args([flag, "otf2"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn main() {
    println!("cargo:rerun-if-env-changed=MPISTAT_OTF2_INCLUDE");
    println!("cargo:rerun-if-env-changed=MPISTAT_OTF2_LIB");
    let mut include: Vec<String> = pkg_config("--cflags")
        .into_iter()
        .filter_map(|f| f.strip_prefix("-I").map(str::to_string))
        .collect();
    if let Ok(dir) = std::env::var("MPISTAT_OTF2_INCLUDE") {
        include.insert(0, dir);
    }
    let mut lib_dirs: Vec<String> = pkg_config("--libs")
        .into_iter()
        .filter_map(|f| f.strip_prefix("-L").map(str::to_string))
        .collect();
    if let Ok(dir) = std::env::var("MPISTAT_OTF2_LIB") {
        lib_dirs.insert(0, dir);
    }
    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={dir}");
    }
    println!("cargo:rustc-link-lib=dylib=open-trace-format2");
    let mut builder = bindgen::Builder::default()
        .header_contents("wrap.h", "#include <otf2/otf2.h>\n")
        .allowlist_function("OTF2_.*")
        .allowlist_type("OTF2_.*")
        .allowlist_var("OTF2_.*")
        .layout_tests(false)
        .generate_comments(false)
        .prepend_enum_name(false);
    for dir in &include {
        builder = builder.clang_arg(format!("-I{dir}"));
    }
    let bindings = builder.generate().unwrap_or_else(|_| {
        panic!(
            "bindgen failed on otf2/otf2.h: install libopen-trace-format2-dev (scripts/prereqs.sh) \
             or set MPISTAT_OTF2_INCLUDE"
        )
    });
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("otf2_bindings.rs");
    bindings
        .write_to_file(out)
        .expect("cannot write otf2_bindings.rs");
}
