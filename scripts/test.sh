#!/usr/bin/env bash
# Runs every check CI runs, in two tiers, and prints each tier's duration. Run from anywhere;
# works in a fresh clone.
#   scripts/test.sh          the full run (what CI runs): the fast tier, then every end-to-end
#                            test (real MPI jobs, rsyslogd, Slurm, SMTP, packages...), one test
#                            binary per theme (tests/tests/<theme>/main.rs), and the benchmarks in their
#                            small size (they print numbers and fail only if they crash: speed is
#                            measured, not asserted)
#   scripts/test.sh --fast   build, format, lints, every crate's unit and property tests, and one
#                            smoke job per MPI family: minutes, for a change that needs no more
# It prints each section's duration, each tier's, and each end-to-end theme's.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS

tier=full
case "${1:-}" in
    --fast) tier=fast ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--fast]" >&2; exit 2 ;;
esac

section_start=$SECONDS
section_name=""
durations=()
# Notes the open section's duration, if a section is open.
close_section() {
    if [[ -n $section_name ]]; then
        durations+=("$(printf '  %-30s %5d s' "$section_name" $((SECONDS - section_start)))")
    fi
    section_name=""
}
# Closes the previous section and opens the next.
section() {
    close_section
    section_name=$*
    section_start=$SECONDS
    printf '\n==== %s ====\n' "$*"
}
tier_start=$SECONDS
# Closes the open section and notes the duration of the tier that ends here.
end_tier() {
    close_section
    durations+=("$(printf '%-32s %5d s' "tier $1" $((SECONDS - tier_start)))")
    tier_start=$SECONDS
}

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

# prereqs.sh installed Slurm and munge: the Slurm tests (tests/tests/deploy/slurm.rs) must run here, not
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

section "documentation (sizes, links)"
bash scripts/check-docs.sh

section "clippy"
if [[ $MPISTAT_HAVE_CLIPPY == 1 ]]; then
    cargo clippy --workspace --all-targets -- -D warnings
else
    echo "SKIPPED: clippy not installed"
fi

section "unit and property tests"
# Release, because the end-to-end tests preload target/release/libmpistat.so. The output is kept
# to total the "test result:" lines for the closing summary (the last of them is usually an empty
# doc-test run, which says nothing about the whole).
test_log=$(mktemp "${TMPDIR:-/tmp}/mpistat-test.XXXXXX")
trap 'rm -f "$test_log"' EXIT
failed=0
cargo test --release --workspace --exclude mpistat-e2e --no-fail-fast 2>&1 | tee -a "$test_log" ||
    failed=1

section "smoke job per MPI family"
# One exact record of a C program under each family: the whole in-job path (front, profiler,
# syslog) and the decoder. (The full run repeats it in its theme: a few seconds.)
cargo test --release -p mpistat-e2e --test job -- \
    basic::c_program_record_has_exact_calls_and_bytes 2>&1 | tee -a "$test_log" || failed=1
end_tier fast

if [[ $tier == full ]]; then
    section "end-to-end tests: build"
    cargo test --release -p mpistat-e2e --no-run
    # One binary per theme, in turn (each runs its MPI jobs one at a time: `serial()`).
    # A theme is tests/tests/<theme>/main.rs; a file directly in tests/tests/ is a binary too.
    for binary in tests/tests/*/main.rs tests/tests/*.rs; do
        [[ -e $binary ]] || continue
        theme=$(basename "${binary%/main.rs}" .rs)
        section "end-to-end tests: $theme"
        cargo test --release -p mpistat-e2e --test "$theme" --no-fail-fast 2>&1 |
            tee -a "$test_log" || failed=1
    done
    end_tier end-to-end

    section "benchmark (small)"
    bash bench/run.sh --small
    bash bench/instructions.sh --small
    bash bench/nodes.sh --small
    bash bench/finalize.sh --small
    bash bench/scale.sh --small
    end_tier benchmarks
fi

section "done ($tier run) in $((SECONDS - start)) s"
printf '%s\n' "${durations[@]}"
awk '/^test result:/ { for (i = 2; i <= NF; i++) {
         if ($i ~ /^passed;?$/) p += $(i - 1)
         if ($i ~ /^failed;?$/) f += $(i - 1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$test_log"
exit "$failed"
