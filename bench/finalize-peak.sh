#!/usr/bin/env bash
# What MPI_Finalize adds to each rank's peak (VmHWM after it less VmHWM just before, the peak
# reset right before; tests/programs/footprint.c on 2 ranks), profiled less bare, for this
# worktree's release build and, interleaved round by round so that the machine's load falls on
# both alike, another build's directory (--against DIR: libmpistat.so and libmpistat_<family>.so).
# Prints one line per round, family and library, then each one's range per rank.
#
#     bench/finalize-peak.sh [--rounds 5] [--against DIR] [--mpi openmpi,mpich]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=5 against='' mpis=openmpi,mpich
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --against) against=$(cd "$2" && pwd); shift 2 ;;
    --mpi) mpis=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--against DIR] [--mpi openmpi,mpich]" >&2; exit 2 ;;
    esac
done
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
finalize_setup finalize-peak
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
libs=("new=$root/target/release")
[ -n "$against" ] && libs+=("old=$against")
# "rank R finalize peak_kb=N" lines of one job as "N0 N1".
peaks() {
    local family=$1 preload=$2 out
    case $family in
    openmpi) out=$(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 ${preload:+-x "LD_PRELOAD=$preload"} \
        -x "MPISTAT_CONFIG=$work/openmpi.toml" "$work/fp-openmpi") ;;
    mpich) out=$(mpirun.mpich -np 2 ${preload:+-env LD_PRELOAD "$preload"} \
        -env MPISTAT_CONFIG "$work/mpich.toml" "$work/fp-mpich") ;;
    esac
    for r in 0 1; do
        sed -n "s/^rank $r finalize peak_kb=//p" <<<"$out"
    done | paste -sd' '
}
for family in ${mpis//,/ }; do
    "mpicc.$family" -O2 -o "$work/fp-$family" "$root/tests/programs/footprint.c"
done
for round in $(seq "$rounds"); do
    for family in ${mpis//,/ }; do
        read -r b0 b1 <<<"$(peaks "$family" "")"
        for lib in "${libs[@]}"; do
            read -r p0 p1 <<<"$(peaks "$family" "${lib#*=}/libmpistat.so")"
            echo "round $round $family ${lib%%=*} rank0 $((p0 - b0)) rank1 $((p1 - b1)) (bare $b0 $b1) load $(cut -d' ' -f1 /proc/loadavg)"
        done
    done
done | tee "$work/rounds"
echo "ranges (kB added, profiled less bare):"
awk '{ for (r = 0; r < 2; r++) { k = $3 " " $4 " rank" r; v = $(6 + 2 * r)
    if (!(k in lo) || v < lo[k]) lo[k] = v; if (!(k in hi) || v > hi[k]) hi[k] = v } }
    END { for (k in lo) print k, lo[k] "-" hi[k] }' "$work/rounds" | sort
