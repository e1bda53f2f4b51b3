#!/usr/bin/env bash
# The distributed analysis (mpistat-analyze, issue 17) against the one-process form (mpistat
# analyze), both printing the wait-state report of generated halo-exchange traces of several
# sizes: wall time, events/s and peak memory (max RSS) per process, interleaved in one
# invocation (one-process, then mpirun -n N for each N, per repetition), medians, and the ratio
# of each to the one-process run; resident bytes per event (RSS / the process's events, base
# included) of the one-process form and of the parallel processes (process 0 also holds the
# gathered wait-state report, so the others' are shown apart). Checks that every report is the
# same. Speed is measured, not asserted. Above the machine's core count the processes are
# oversubscribed (the header says how many cores there are).
#
#   bench/parallel_analysis.sh [RANKS,...] [EVENTS] [REPS] [N...]
#   (defaults 64,256,1024 2000000 3, N = 1 2 4; EVENTS in all, per trace)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
IFS=, read -r -a sizes <<<"${1:-64,256,1024}"
events=${2:-2000000}
reps=${3:-3}
shift $(($# < 3 ? $# : 3))
counts=("${@:-1 2 4}")
read -r -a counts <<<"${counts[*]}"

cargo build --release -q -p mpistat-digest -p mpistat-analyze-mpi
cargo build --release -q -p mpistat-analysis --example write_halo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One run: wall seconds, the largest and the smallest max RSS (KiB) over its processes.
run() {
    local name=$1
    shift
    local start end
    start=$(date +%s.%N)
    "$@" >"$work/$name.out" 2>"$work/$name.err"
    end=$(date +%s.%N)
    local rss
    rss=$(grep -h '^rss ' "$work/$name.err" | awk '{print $2}' | sort -n)
    echo "$(echo "$end - $start" | bc) $(tail -1 <<<"$rss") $(head -1 <<<"$rss")" >>"$work/$name.times"
    cmp -s "$work/one.out" "$work/$name.out" || { echo "$name: the report differs" >&2; exit 1; }
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
timed=(/usr/bin/time -f 'rss %M')
for ranks in "${sizes[@]}"; do
    rm -f "$work"/*.times
    real=$(target/release/examples/write_halo "$ranks" "$events" "$work/trace" | awk '{print $1}')
    for _ in $(seq "$reps"); do
        run one "${timed[@]}" target/release/mpistat analyze --format wait-states "$work/trace"
        for n in "${counts[@]}"; do
            run "n$n" mpirun --allow-run-as-root --oversubscribe -n "$n" \
                "${timed[@]}" target/release/mpistat-analyze --format wait-states "$work/trace"
        done
    done
    one_wall=$(cut -d' ' -f1 "$work/one.times" | median)
    one_rss=$(cut -d' ' -f2 "$work/one.times" | median)
    printf '\n%d ranks, %d events (%d a rank, %s of trace files), median of %d runs on %d cores\n' \
        "$ranks" "$real" "$((real / ranks))" "$(du -sh "$work/trace" | cut -f1)" "$reps" "$(nproc)"
    printf '%-14s %8s %7s %10s %12s %7s %13s %12s\n' form "wall s" "x one" "M events/s" \
        "max RSS MiB" "x one" "B/event (0)" "B/event (>0)"
    for name in one "${counts[@]/#/n}"; do
        wall=$(cut -d' ' -f1 "$work/$name.times" | median)
        rss=$(cut -d' ' -f2 "$work/$name.times" | median)
        low=$(cut -d' ' -f3 "$work/$name.times" | median)
        n=$([ "$name" = one ] && echo 1 || echo "${name#n}")
        label=$([ "$name" = one ] && echo "one process" || echo "mpirun -n $n")
        per=$(echo "$real / $n" | bc -l)
        others=$([ "$n" -gt 1 ] && printf '%.0f' "$(echo "$low * 1024 / $per" | bc -l)" || echo -)
        printf '%-14s %8.2f %7.2f %10.2f %12.0f %7.2f %13.0f %12s\n' "$label" "$wall" \
            "$(echo "$wall / $one_wall" | bc -l)" "$(echo "$real / $wall / 1000000" | bc -l)" \
            "$(echo "$rss / 1024" | bc -l)" "$(echo "$rss / $one_rss" | bc -l)" \
            "$(echo "$rss * 1024 / $per" | bc -l)" "$others"
    done
    rm -rf "$work/trace"
done
echo
echo "(max RSS: of the largest process, process 0, which also holds the gathered report;"
echo " B/event: RSS over the process's share of the events, base included: (0) process 0,"
echo " (>0) the smallest of the others; mpistat_analysis::memory bounds with 128 B/event + 64 MiB)"
