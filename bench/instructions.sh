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
#   bench/instructions.sh --only irecv_wait [--small]
#                                   one workload alone (N = 20,000, or 5,000 with --small):
#                                   a step on one routine in a minute or two
#   bench/instructions.sh --with ipm=/opt/peers/{mpi}/ipm/lib/libipm.so \
#       --with mpip-k0=/opt/peers/{mpi}/mpip/lib/libmpiP.so,"MPIP=-k 0"
#                                   also count other profiling libraries, as bench/run.sh's
#                                   --with (NAME=LIB[,VAR=VALUE...]: LIB preloaded with those
#                                   variables set, values with spaces kept whole; "{mpi}" in LIB
#                                   is openmpi or mpich, bench/peers.sh's builds, else the peer
#                                   runs under Open MPI only: "-" in its MPICH rows); each run's
#                                   output goes to a log (banners do no harm), and a peer whose
#                                   run fails shows "failed" in its column while the rest goes on
set -euo pipefail
shopt -s inherit_errexit # a failed count inside $(...) stops the script

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

all=(comm_rank test_null iprobe allreduce1 barrier bcast1 irecv_wait)
workloads=("${all[@]}") calls=20000 only=
peers=() # NAME=LIB[,VAR=VALUE...]
while (($#)); do
    case $1 in
        --small)
            [[ -n $only ]] || workloads=(comm_rank allreduce1)
            calls=5000
            ;;
        --only)
            [[ " ${all[*]} " == *" ${2:-} "* ]] || { echo "$0: no workload '${2:-}'" >&2; exit 2; }
            workloads=("$2") only=1
            shift
            ;;
        --with)
            peer_check "${2:-}"
            peers+=("$2")
            shift
            ;;
        *) echo "usage: $0 [--small] [--only WORKLOAD] [--with NAME=LIB[,VAR=VALUE...]]..." >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
cargo build --release -q -p mpistat-front -p mpistat-profiler -p mpistat-profiler-mpich
lib=$PWD/target/release/libmpistat.so

bench_work instructions

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

# The environment a mode's run adds: MODE FAMILY (a peer's index in $peers for a peer).
mode_env() {
    local mode=$1 family=$2
    case $mode in
        bare) ;;
        mpistat) echo "LD_PRELOAD=$lib" ;;
        floor) echo "LD_PRELOAD=$work/floor-$family.so" ;;
        *) peer_env "${peers[mode]}" "$family" ;;
    esac
}

# Instructions the timed loop executed: WORKLOAD FAMILY MODE CALLS. A failed run of ours stops
# the script; a peer's prints "failed" (it may not run as it is here: its own problem).
loop_count() {
    local workload=$1 family=$2 mode=$3 n=$4 vars=()
    mapfile -t vars < <(mode_env "$mode" "$family")
    local out=$work/$workload-$family-$mode-$n.callgrind
    # In a directory of its own: peers write their reports into the working directory.
    mkdir -p "$work/cwd-$mode"
    if ! (cd "$work/cwd-$mode" && env "${vars[@]}" MPISTAT_CONFIG="$work/site.toml" OMPI_ALLOW_RUN_AS_ROOT=1 \
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 valgrind --tool=callgrind --toggle-collect=timed_loop \
        --callgrind-out-file="$out" "$work/instructions-$family" "$workload" "$n" \
        >"$out.log" 2>&1) || [[ ! -s $out ]]; then
        if [[ $mode =~ ^[0-9]+$ ]]; then
            echo "$0: $workload under ${peers[mode]%%=*} failed (exit or no count); its log:" >&2
            tail -n 20 "$out.log" >&2
            echo failed
            return
        fi
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
    [[ $first == failed ]] && { echo failed; return; }
    twice=$(loop_count "$@" $((2 * calls)))
    [[ $twice == failed ]] && { echo failed; return; }
    awk -v a="$first" -v b="$twice" -v n="$calls" 'BEGIN { printf "%.1f", (b - a) / n }'
}

# A call's instructions over bare, or why there are none: PER_CALL BARE.
added() {
    case $1 in
        failed | -) echo "$1" ;;
        *) awk -v p="$1" -v b="$2" 'BEGIN { printf "%.1f", p - b }' ;;
    esac
}

echo "Instructions a call added over bare (callgrind, 1 rank, a call past the first $calls;"
echo "bare: the whole call, the loop's own included):"
header=$(printf '%-12s %-8s %9s %9s %9s %11s' workload MPI bare mpistat floor "over floor")
for peer in "${peers[@]}"; do header+=$(printf ' %9s' "${peer%%=*}"); done
echo "$header"
for workload in "${workloads[@]}"; do
    for family in "${families[@]}"; do
        bare=$(per_call "$workload" "$family" bare)
        profiled=$(per_call "$workload" "$family" mpistat)
        floor=$(per_call "$workload" "$family" floor)
        row=$(awk -v w="$workload" -v f="$family" -v b="$bare" -v p="$profiled" -v fl="$floor" \
            'BEGIN { printf "%-12s %-8s %9.1f %9.1f %9.1f %11.1f", w, f, b, p - b, fl - b, p - fl }')
        for i in "${!peers[@]}"; do
            peer=-
            [[ -n $(peer_env "${peers[i]}" "$family") ]] && peer=$(per_call "$workload" "$family" "$i")
            row+=$(printf ' %9s' "$(added "$peer" "$bare")")
        done
        echo "$row"
    done
done
