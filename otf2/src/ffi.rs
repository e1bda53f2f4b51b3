//! libotf2's C interface, as bindgen declares it from `otf2/otf2.h` (see `build.rs`).
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    clippy::all
)]
include!(concat!(env!("OUT_DIR"), "/otf2_bindings.rs"));
