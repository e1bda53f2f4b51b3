#!/usr/bin/env bash
# Start-up and finalize cost per rank of libmpistat on one node and on several emulated nodes
# (tests/bin/node-rsh: one Open MPI daemon per host name, each in its own UTS namespace, TCP over
# loopback), next to bare runs, interleaved. Prints the median over rounds of the mean and the
# maximum over ranks of MPI_Init's and MPI_Finalize's time (bench/startstop.c). Measured, not
# asserted.
#
#   bench/nodes.sh            5 rounds
#   bench/nodes.sh --small    2 rounds (CI)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=5
[[ ${1:-} == --small ]] && rounds=2

# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
cargo build --release -q -p mpistat-front -p mpistat-profiler
lib=$PWD/target/release/libmpistat.so
work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-nodes.XXXXXX")
trap 'rm -rf "$work"' EXIT
mpicc -O2 -Wall -Wextra -Werror -o "$work/startstop" bench/startstop.c
# The record goes to a socket nobody reads: sending never waits (nothing listens, so it is refused).
printf '[syslog]\nsocket = "%s"\n' "$work/no-syslogd.sock" >"$work/site.toml"

# Layouts: NAME HOSTS (empty: this host, shared memory between ranks).
layouts=(
    "1x2 -"
    "2x1 nodea:1,nodeb:1"
    "1x4 -"
    "2x2 nodea:2,nodeb:2"
    "4x1 nodea:1,nodeb:1,nodec:1,noded:1"
)
run() { # LAYOUT HOSTS MODE
    local layout=$1 hosts=$2 mode=$3 ranks args=(--allow-run-as-root --oversubscribe --bind-to none)
    ranks=$((${layout%x*} * ${layout#*x}))
    args+=(-np "$ranks" --mca mpi_yield_when_idle 1)
    if [[ $hosts != - ]]; then
        args+=(--host "$hosts" --mca plm_rsh_agent "$PWD/tests/bin/node-rsh" --mca btl tcp,self
            --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
    fi
    [[ $mode == mpistat ]] && args+=(-x "LD_PRELOAD=$lib" -x "MPISTAT_CONFIG=$work/site.toml")
    rm -f "$work"/times.*
    mpirun "${args[@]}" -x "STARTSTOP_OUT=$work/times" "$work/startstop" 100 </dev/null
    awk -v l="$layout" -v m="$mode" '{ i += $2; f += $3; if ($2 > im) im = $2; if ($3 > fm) fm = $3; n++ }
        END { printf "%s %s %.3f %.3f %.3f %.3f\n", l, m, i / n, im, f / n, fm }' "$work"/times.* >>"$work/raw"
}

echo "nodes bench: $rounds rounds x ${#layouts[@]} layouts x (bare, mpistat)"
for ((round = 1; round <= rounds; round++)); do
    for entry in "${layouts[@]}"; do
        read -r layout hosts <<<"$entry"
        if ((round % 2)); then order=(bare mpistat); else order=(mpistat bare); fi
        for mode in "${order[@]}"; do run "$layout" "$hosts" "$mode"; done
    done
done

python3 - "$work/raw" <<'PY'
import statistics, sys
from collections import defaultdict
rows = defaultdict(lambda: defaultdict(list))  # layout -> mode -> [(init mean, init max, fin mean, fin max)]
for line in open(sys.argv[1]):
    layout, mode, *v = line.split()
    rows[layout][mode].append(tuple(map(float, v)))
med = statistics.median
print()
print("nodes x ranks  per rank (ms)          bare   mpistat    added   (median over rounds)")
for layout, modes in rows.items():
    for i, what in enumerate(("MPI_Init mean", "MPI_Init max", "MPI_Finalize mean", "MPI_Finalize max")):
        b = med(r[i] for r in modes["bare"])
        p = med(r[i] for r in modes["mpistat"])
        print(f"{layout if i == 0 else '':<14} {what:<20} {b:>8.2f} {p:>9.2f} {p - b:>8.2f}")
print("Emulated nodes share this machine's cores: the absolute times are loopback TCP's, the added")
print("time is what the profiler's own start-up and finalize steps cost.")
PY
