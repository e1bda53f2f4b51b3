//! The built family's `mpi.h` (Open MPI's) as Rust declarations (bindgen, see build.rs). Types only: nothing here
//! is linked; the real routines are found with `dlsym`.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    clippy::all
)]
include!(concat!(env!("OUT_DIR"), "/mpi_bindings.rs"));
