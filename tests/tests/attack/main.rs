//! Hostile users and inputs (users made with `useradd`): hostile environments and identities,
//! bounds on what a record or a request may take, edge inputs passed through unchanged, the
//! analysis's privileges.
//!
//! One test binary (cargo finds `tests/attack/main.rs`), one module per file beside it: a test's
//! name is `<file>::<test>` (`cargo test --release -p mpistat-e2e --test attack -- <file>::`).

mod analysis_privileges;
mod bounds;
mod edge_inputs;
mod hostile_env;
mod hostile_identity;
