#!/usr/bin/env bash
# How MPI_Finalize scales with the job's size: P ranks on emulated nodes (tests/bin/node-rsh: one
# Open MPI daemon per host name, each in its own UTS namespace, TCP over loopback between nodes,
# shared memory inside one), bare and with libmpistat preloaded, interleaved, at P = 4, 64, 256
# and 1,024 (or the sizes given). Prints per P the median over rounds of MPI_Finalize's mean time
# a rank (bench/startstop.c), bare and preloaded; the profiler's part of it, mean and maximum over
# ranks: the time from the program's call to the MPI library's PMPI_Finalize, which
# bench/finalize_clock.c (a PMPI layer preloaded after the profiler) notes; and the record's size
# in bytes (every datagram the job sent to the syslog socket). Measured, not asserted. All ranks share this machine's cores (oversubscribed, yielding when idle): a step of
# a collective waits for its partner to be scheduled, so the absolute times are the scheduler's;
# what grows with P is the number of such steps (docs/footprint.md, "Finalize").
#
#   bench/finalize.sh                  P = 4, 64, 256, 1024; 3 rounds
#   bench/finalize.sh --small          P = 4, 16; 1 round (CI)
#   bench/finalize.sh --ranks 4,64 --rounds 5
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sizes=(4 64 256 1024) rounds=3
while (($#)); do
    case $1 in
        --small) sizes=(4 16) rounds=1 ;;
        --ranks)
            [[ ${2:-} =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "$0: --ranks P,P..." >&2; exit 2; }
            IFS=, read -r -a sizes <<<"$2"
            shift
            ;;
        --rounds)
            [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "$0: --rounds N" >&2; exit 2; }
            rounds=$2
            shift
            ;;
        *) echo "usage: $0 [--small] [--ranks P,...] [--rounds N]" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
cargo build --release -q -p mpistat-front -p mpistat-profiler
lib=$PWD/target/release/libmpistat.so
work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-finalize.XXXXXX")
sink_pid=
cleanup() {
    if [[ -n $sink_pid ]]; then
        kill "$sink_pid" 2>/dev/null || true
        wait "$sink_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mpicc -O2 -Wall -Wextra -Werror -o "$work/startstop" bench/startstop.c
mpicc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/libfinalize_clock.so" bench/finalize_clock.c

# A syslog socket that notes each datagram's size (a line of "BYTES"), so that the record's size
# is known and MPI_Finalize pays for a real send.
python3 - "$work/log.sock" "$work/datagrams" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(f"{len(s.recv(65536))}\n")
EOF
sink_pid=$!
for _ in $(seq 50); do [[ -S $work/log.sock ]] && break; sleep 0.1; done
printf '[syslog]\nsocket = "%s"\n' "$work/log.sock" >"$work/site.toml"

# The nodes of a job of P ranks: 2 ranks a node up to 4 ranks, then 16 ranks a node up to 64
# nodes (1,024 ranks), then as many nodes of P/64 ranks.
hosts_of() { # P: prints nodea:N,nodeb:N,...
    local p=$1 per nodes list= i
    if ((p <= 4)); then per=$(((p + 1) / 2)); else per=16; fi
    ((p / per > 64)) && per=$((p / 64))
    nodes=$(((p + per - 1) / per))
    for ((i = 0; i < nodes; i++)); do
        list+=${list:+,}node$i:$(((i + 1) * per <= p ? per : p - i * per))
    done
    echo "$list"
}
# Enough descriptors for a daemon with hundreds of ranks, and for their connections.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

run() { # P MODE
    local p=$1 mode=$2 args=(--allow-run-as-root --oversubscribe --bind-to none -np "$1"
        --mca mpi_yield_when_idle 1 --host "$(hosts_of "$1")" --mca plm_rsh_agent "$PWD/tests/bin/node-rsh"
        --mca btl tcp,vader,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
    [[ $mode == mpistat ]] && args+=(-x "LD_PRELOAD=$lib:$work/libfinalize_clock.so" -x "MPISTAT_CONFIG=$work/site.toml")
    rm -f "$work"/times.*
    : >"$work/datagrams"
    if ! mpirun "${args[@]}" -x "STARTSTOP_OUT=$work/times" "$work/startstop" 10 </dev/null >/dev/null 2>"$work/stderr"; then
        # Kept whole: the launcher's last lines rarely say which rank ended how.
        local kept=${TMPDIR:-/tmp}/mpistat-finalize-failed.$p.$mode.$$.log
        cp "$work/stderr" "$kept"
        echo "finalize bench: $p ranks, $mode: the job failed (this machine stops here; its output: $kept):" >&2
        grep -v setpgid "$work/stderr" | tail -5 >&2
        return 1
    fi
    # The sink writes each datagram's size as it comes: give it a moment after the job.
    sleep 0.2
    awk -v p="$p" -v m="$mode" -v bytes="$(awk '{ s += $1 } END { print s + 0 }' "$work/datagrams")" \
        '{ f += $3; h += $4; if ($4 > hm) hm = $4; n++ }
        END { printf "%s %s %.3f %.3f %.3f %d %d\n", p, m, f / n, h / n, hm, bytes, n }' "$work"/times.* >>"$work/raw"
}

echo "finalize bench: $rounds rounds x P = ${sizes[*]} x (bare, mpistat)"
largest=
for p in "${sizes[@]}"; do
    ok=1
    for ((round = 1; round <= rounds && ok; round++)); do
        if ((round % 2)); then order=(bare mpistat); else order=(mpistat bare); fi
        for mode in "${order[@]}"; do
            echo "round $round/$rounds: $p ranks on $(hosts_of "$p" | tr ',' '\n' | wc -l) nodes, $mode"
            run "$p" "$mode" || { ok=0; break; }
        done
    done
    ((ok)) || break
    largest=$p
done
[[ -n $largest ]] || { echo "finalize bench: no size ran" >&2; exit 1; }

python3 - "$work/raw" <<'PY'
import math, statistics, sys
from collections import defaultdict
rows = defaultdict(lambda: defaultdict(list))  # P -> mode -> [(finalize ms, ours ms, ours max ms, bytes)]
for line in open(sys.argv[1]):
    p, mode, mean, ours, ours_max, size, n = line.split()
    rows[int(p)][mode].append((float(mean), float(ours), float(ours_max), int(size)))
med = statistics.median
print()
print("ranks  log2 P   MPI_Finalize a rank (ms, median over rounds)       profiler's part    record")
print("                bare mean  mpistat mean  added mean        mean      max      bytes")
for p in sorted(rows):
    m = rows[p]
    if not m["bare"] or not m["mpistat"]:
        continue
    b, q = med(r[0] for r in m["bare"]), med(r[0] for r in m["mpistat"])
    ours, ours_max = med(r[1] for r in m["mpistat"]), med(r[2] for r in m["mpistat"])
    size = med(r[3] for r in m["mpistat"])
    print(f"{p:>5}  {math.log2(p):>6.1f}  {b:>9.2f}  {q:>12.2f}  {q - b:>10.2f}  {ours:>10.2f} {ours_max:>8.2f}  {size:>9.0f}")
PY
echo "The largest size run: $largest ranks (the record's bytes are every datagram of the job)."
