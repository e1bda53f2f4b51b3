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

# CI runs as root; Open MPI refuses that unless told. (The tests pass --allow-run-as-root too;
# this also covers any mpirun they start indirectly.)
if [[ $(id -u) -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# prereqs.sh installed Slurm and munge: the Slurm tests (tests/tests/slurm.rs) must run here, not
# skip themselves as they do where Slurm is missing.
export MPISTAT_REQUIRE_SLURM=1
# Both MPI families are installed: the spec table must cover each one's mpi.h
# (wrapgen/tests/spec_table.rs), and the e2e tests run under both (`for_each_mpi!`).
export MPISTAT_REQUIRE_ALL_FAMILIES=1

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
# Release, because the end-to-end tests preload target/release/libmpistat.so. The output is kept
# to total the "test result:" lines for the closing summary (the last of them is usually an empty
# doc-test run, which says nothing about the whole).
test_log=$(mktemp "${TMPDIR:-/tmp}/mpistat-test.XXXXXX")
trap 'rm -f "$test_log"' EXIT
cargo test --release --workspace --no-fail-fast 2>&1 | tee "$test_log"

section "benchmark (small)"
bash bench/run.sh --small
bash bench/instructions.sh --small
bash bench/nodes.sh --small
bash bench/scale.sh --small

section "done in $((SECONDS - start)) s"
awk '/^test result:/ { for (i = 2; i <= NF; i++) {
         if ($i ~ /^passed;?$/) p += $(i - 1)
         if ($i ~ /^failed;?$/) f += $(i - 1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$test_log"
