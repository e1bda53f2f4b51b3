//! Places the front's trampolines at the end of its code segment, on a 64 KiB boundary
//! (`trampolines.ld`), with the segments aligned to 64 KiB so that the loader places the library
//! on such a boundary.

fn main() {
    let script =
        std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("trampolines.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", script.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,max-page-size=65536");
}
