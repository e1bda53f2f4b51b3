#!/usr/bin/env bash
# The distributed analysis (mpistat-analyze, issue 17) against the one-process form (mpistat
# analyze), both printing the wait-state report of generated halo-exchange traces: wall time and
# peak memory (max RSS) of every process, interleaved in one invocation (one-process, then mpirun
# -n N for each N, per repetition), medians, and the ratio of each to the one-process run. Checks
# that every report is the same. Speed is measured, not asserted.
#
#   bench/parallel_analysis.sh [RANKS] [EVENTS] [REPS] [N...]   (defaults 64 2000000 3, N = 1 2 4)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ranks=${1:-64}
events=${2:-2000000}
reps=${3:-3}
shift $(($# < 3 ? $# : 3))
counts=("${@:-1 2 4}")
read -r -a counts <<<"${counts[*]}"

cargo build --release -q -p mpistat-digest -p mpistat-analyze-mpi
cargo build --release -q -p mpistat-analysis --example write_halo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target/release/examples/write_halo "$ranks" "$events" "$work/trace"

# One run: wall seconds and the largest max RSS (KiB) over its processes.
run() {
    local name=$1
    shift
    local start end
    start=$(date +%s.%N)
    "$@" >"$work/$name.out" 2>"$work/$name.err"
    end=$(date +%s.%N)
    local rss
    rss=$(grep -h '^rss ' "$work/$name.err" | awk '{print $2}' | sort -n | tail -1)
    echo "$(echo "$end - $start" | bc) ${rss:-0}" >>"$work/$name.times"
    cmp -s "$work/one.out" "$work/$name.out" || { echo "$name: the report differs" >&2; exit 1; }
}

timed=(/usr/bin/time -f 'rss %M')
for _ in $(seq "$reps"); do
    run one "${timed[@]}" target/release/mpistat analyze --format wait-states "$work/trace"
    for n in "${counts[@]}"; do
        run "n$n" mpirun --allow-run-as-root --oversubscribe -n "$n" \
            "${timed[@]}" target/release/mpistat-analyze --format wait-states "$work/trace"
    done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
one_wall=$(cut -d' ' -f1 "$work/one.times" | median)
one_rss=$(cut -d' ' -f2 "$work/one.times" | median)
printf '%d ranks, ~%d events, median of %d runs on %d cores\n' "$ranks" "$events" "$reps" "$(nproc)"
printf '%-14s %10s %10s %14s %10s %12s\n' form "wall s" "x one" "max RSS MiB" "x one" "M events/s"
for name in one "${counts[@]/#/n}"; do
    wall=$(cut -d' ' -f1 "$work/$name.times" | median)
    rss=$(cut -d' ' -f2 "$work/$name.times" | median)
    label=$([ "$name" = one ] && echo "one process" || echo "mpirun -n ${name#n}")
    printf '%-14s %10.2f %10.2f %14.0f %10.2f %12.2f\n' "$label" "$wall" \
        "$(echo "$wall / $one_wall" | bc -l)" "$(echo "$rss / 1024" | bc -l)" \
        "$(echo "$rss / $one_rss" | bc -l)" "$(echo "$events / $wall / 1000000" | bc -l)"
done
echo "(max RSS: of the largest process; process 0 also holds the gathered report)"
