#!/usr/bin/env bash
# Runs every check CI runs: build, format, lints, all tests (unit, property and end-to-end MPI
# jobs), then the overhead benchmark in its small size (it prints numbers and fails only if it
# crashes: speed is measured, not asserted). Run from anywhere; works in a fresh clone.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS

section() { printf '\n==== %s ====\n' "$*"; }

section "prerequisites"
# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
cargo --version
mpirun --version | head -n 1

section "build (release)"
cargo build --release --workspace

section "format check"
if [[ $MPISTAT_HAVE_FMT == 1 ]]; then
    cargo fmt --all -- --check
else
    echo "SKIPPED: rustfmt not installed"
fi

section "clippy"
if [[ $MPISTAT_HAVE_CLIPPY == 1 ]]; then
    cargo clippy --workspace --all-targets -- -D warnings
else
    echo "SKIPPED: clippy not installed"
fi

section "tests"
# Release, because the end-to-end tests preload target/release/libmpistat.so.
cargo test --release --workspace

section "benchmark (small)"
bash bench/run.sh --small

section "done in $((SECONDS - start)) s"
