#!/usr/bin/env bash
# Instructions a call: what libmpistat and the floor (bench/floor.c: two clock reads and a
# counter) add to one call of each routine of bench/instructions.c, counted by valgrind's
# callgrind in the timed loop only, at one rank, under Open MPI and MPICH. Unlike time, the
# count does not depend on the host or on the run: the same build gives the same numbers, so a
# change to the hot path shows here by the instruction where bench/run.sh cannot resolve a few
# nanoseconds. Instructions are not time (a clock read is one instruction and ~25 cycles; the
# rest runs several a cycle), so the budgets are judged by bench/run.sh, not here.
#
# Each count is the difference of two runs, N and 2N calls, over N: the instructions of a call
# past the first N, as in a long job (the first calls of a job cost more: every superstep is
# stored alone until the superstep buffer is full, then in ever larger batches).
#
#   bench/instructions.sh           every workload, N = 20,000 (about 4 minutes)
#   bench/instructions.sh --small   MPI_Allreduce and MPI_Comm_rank, N = 5,000 (CI, a minute)
set -euo pipefail
shopt -s inherit_errexit # a failed count inside $(...) stops the script

cd "$(dirname "${BASH_SOURCE[0]}")/.."

workloads=(comm_rank test_null iprobe allreduce1 barrier bcast1 irecv_wait) calls=20000
case ${1:-} in
    "") ;;
    --small) workloads=(comm_rank allreduce1) calls=5000 ;;
    *) echo "usage: $0 [--small]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
cargo build --release -q -p mpistat-front -p mpistat-profiler -p mpistat-profiler-mpich
lib=$PWD/target/release/libmpistat.so

work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-instructions.XXXXXX")
trap 'rm -rf "$work"' EXIT

families=(openmpi)
mpicc -O2 -Wall -Wextra -Werror -o "$work/instructions-openmpi" bench/instructions.c
mpicc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/floor-openmpi.so" bench/floor.c
if command -v mpicc.mpich >/dev/null; then
    families+=(mpich)
    mpicc.mpich -O2 -Wall -Wextra -Werror -o "$work/instructions-mpich" bench/instructions.c
    mpicc.mpich -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/floor-mpich.so" bench/floor.c
fi
# The record goes to a socket nobody listens on: the machine's syslog is left alone (and
# MPI_Finalize is not counted anyway).
printf '[syslog]\nsocket = "%s"\n' "$work/nobody.sock" >"$work/site.toml"

# Instructions the timed loop executed: WORKLOAD FAMILY MODE CALLS.
loop_count() {
    local workload=$1 family=$2 mode=$3 n=$4 preload=()
    case $mode in
        mpistat) preload=("LD_PRELOAD=$lib") ;;
        floor) preload=("LD_PRELOAD=$work/floor-$family.so") ;;
    esac
    local out=$work/$workload-$family-$mode-$n.callgrind
    if ! env "${preload[@]}" MPISTAT_CONFIG="$work/site.toml" OMPI_ALLOW_RUN_AS_ROOT=1 \
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 valgrind --tool=callgrind --toggle-collect=timed_loop \
        --callgrind-out-file="$out" "$work/instructions-$family" "$workload" "$n" \
        >"$out.log" 2>&1; then
        echo "$0: $workload under $family, $mode failed:" >&2
        cat "$out.log" >&2
        exit 1
    fi
    awk '/^totals:/ { print $2 }' "$out"
}

# Instructions of one call past the first $calls: WORKLOAD FAMILY MODE.
per_call() {
    local first twice
    first=$(loop_count "$@" "$calls")
    twice=$(loop_count "$@" $((2 * calls)))
    awk -v a="$first" -v b="$twice" -v n="$calls" 'BEGIN { printf "%.1f", (b - a) / n }'
}

echo "Instructions a call added over bare (callgrind, 1 rank, a call past the first $calls;"
echo "bare: the whole call, the loop's own included):"
printf '%-12s %-8s %9s %9s %9s %11s\n' workload MPI bare mpistat floor "over floor"
for workload in "${workloads[@]}"; do
    for family in "${families[@]}"; do
        bare=$(per_call "$workload" "$family" bare)
        profiled=$(per_call "$workload" "$family" mpistat)
        floor=$(per_call "$workload" "$family" floor)
        awk -v w="$workload" -v f="$family" -v b="$bare" -v p="$profiled" -v fl="$floor" \
            'BEGIN { printf "%-12s %-8s %9.1f %9.1f %9.1f %11.1f\n", w, f, b, p - b, fl - b, p - fl }'
    done
done
