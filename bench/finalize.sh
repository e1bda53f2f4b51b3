#!/usr/bin/env bash
# How MPI_Finalize scales with the job's size: P ranks on emulated nodes (tests/bin/node-rsh: one
# launcher daemon per host name, Open MPI's orted or MPICH's Hydra proxy, each in its own UTS
# namespace, TCP over loopback between nodes, shared memory inside one), bare and with libmpistat
# preloaded, interleaved, at P = 4, 64, 256 and 1,024 (or the sizes given), under Open MPI and,
# when installed, MPICH. Prints per MPI and P the median over rounds of MPI_Finalize's mean time
# a rank (bench/startstop.c), bare and preloaded; the profiler's part of it, mean and maximum over
# ranks: the time from the program's call to the MPI library's PMPI_Finalize, which
# bench/finalize_clock.c (a PMPI layer preloaded after the profiler) notes; and the record's size
# in bytes (every datagram the job sent to the syslog socket). Measured, not asserted. All ranks share this machine's cores (oversubscribed, yielding when idle): a step of
# a collective waits for its partner to be scheduled, so the absolute times are the scheduler's;
# what grows with P is the number of such steps (docs/footprint.md, "Finalize").
#
#   bench/finalize.sh                  P = 4, 64, 256, 1024; 3 rounds
#   bench/finalize.sh --small          P = 4, 16; 1 round (CI)
#   bench/finalize.sh --ranks 4,64 --rounds 5 --mpi mpich
#   bench/finalize.sh --iters 3000     the job's MPI_Allreduce calls (default 10): its supersteps,
#                                      whose vectors the reduction sends in 8 KiB pieces past ~1,000
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sizes=(4 64 256 1024) rounds=3 iters=10 families=(openmpi)
command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null && families+=(mpich)
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
        --iters)
            [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "$0: --iters N" >&2; exit 2; }
            iters=$2
            shift
            ;;
        --mpi)
            [[ ${2:-} =~ ^(openmpi|mpich)(,(openmpi|mpich))?$ ]] || { echo "$0: --mpi openmpi,mpich (either or both)" >&2; exit 2; }
            IFS=, read -r -a families <<<"$2"
            shift
            ;;
        *) echo "usage: $0 [--small] [--ranks P,...] [--rounds N] [--iters N] [--mpi openmpi,mpich]" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
# shellcheck source=bench/lib.sh
source bench/lib.sh
cargo build --release -q -p mpistat-front -p mpistat-profiler -p mpistat-profiler-mpich
lib=$PWD/target/release/libmpistat.so
bench_work finalize
for family in "${families[@]}"; do
    cc=mpicc
    [[ $family == mpich ]] && cc=mpicc.mpich
    "$cc" -O2 -Wall -Wextra -Werror -o "$work/startstop-$family" bench/startstop.c
    "$cc" -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/libfinalize_clock-$family.so" bench/finalize_clock.c
done

# The record's size: the sink notes each datagram's size (a line of "BYTES").
syslog_sink "$work/log.sock" "$work/datagrams"
printf '[syslog]\nsocket = "%s"\n' "$work/log.sock" >"$work/site.toml"
# MPICH's Hydra has no PMIx, so whether every rank has the library is unknown: assume it (every
# rank does here), so that MPICH's jobs pay for the finalize reduction as Open MPI's do.
cp "$work/site.toml" "$work/site-mpich.toml"
printf '[profiler]\nassume_all_ranks_profiled = true\n' >>"$work/site-mpich.toml"

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

# The launcher's command line for P ranks on their nodes: FAMILY P MODE (one word a line).
launch_command() {
    local family=$1 p=$2 mode=$3 preload=$lib:$work/libfinalize_clock-$1.so
    if [[ $family == openmpi ]]; then
        printf '%s\n' mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$p" \
            --mca mpi_yield_when_idle 1 --host "$(hosts_of "$p")" --mca plm_rsh_agent "$PWD/tests/bin/node-rsh" \
            --mca btl tcp,vader,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
            -x "STARTSTOP_OUT=$work/times"
        [[ $mode == bare ]] || printf '%s\n' -x "LD_PRELOAD=$preload" -x "MPISTAT_CONFIG=$work/site.toml"
    else
        # Hydra starts one proxy a host through the same stand-in for ssh.
        printf '%s\n' mpiexec.mpich -launcher rsh -launcher-exec "$PWD/tests/bin/node-rsh" \
            -hosts "$(hosts_of "$p")" -n "$p" -genv STARTSTOP_OUT "$work/times"
        [[ $mode == bare ]] || printf '%s\n' -genv LD_PRELOAD "$preload" -genv MPISTAT_CONFIG "$work/site-mpich.toml"
    fi
}

run() { # FAMILY P MODE
    local family=$1 p=$2 mode=$3 command
    mapfile -t command < <(launch_command "$@")
    rm -f "$work"/times.*
    : >"$work/datagrams"
    if ! "${command[@]}" "$work/startstop-$family" "$iters" </dev/null >/dev/null 2>"$work/stderr"; then
        # Kept whole: the launcher's last lines rarely say which rank ended how.
        local kept=${TMPDIR:-/tmp}/mpistat-finalize-failed.$family.$p.$mode.$$.log
        cp "$work/stderr" "$kept"
        echo "finalize bench: $family, $p ranks, $mode: the job failed (this machine stops here; its output: $kept):" >&2
        grep -v setpgid "$work/stderr" | tail -5 >&2
        return 1
    fi
    # The sink writes each datagram's size as it comes: give it a moment after the job.
    sleep 0.2
    awk -v f="$family" -v p="$p" -v m="$mode" -v bytes="$(awk '{ s += $1 } END { print s + 0 }' "$work/datagrams")" \
        '{ fin += $3; h += $4; if ($4 > hm) hm = $4; n++ }
        END { printf "%s %s %s %.3f %.3f %.3f %d %d\n", f, p, m, fin / n, h / n, hm, bytes, n }' "$work"/times.* >>"$work/raw"
}

echo "finalize bench: $rounds rounds x MPI (${families[*]}) x P = ${sizes[*]} x (bare, mpistat)"
declare -A largest=() # family: the largest P run
for family in "${families[@]}"; do
    for p in "${sizes[@]}"; do
        ok=1
        for ((round = 1; round <= rounds && ok; round++)); do
            if ((round % 2)); then order=(bare mpistat); else order=(mpistat bare); fi
            for mode in "${order[@]}"; do
                echo "round $round/$rounds: $family, $p ranks on $(hosts_of "$p" | tr ',' '\n' | wc -l) nodes, $mode"
                run "$family" "$p" "$mode" || { ok=0; break; }
            done
        done
        ((ok)) || break
        largest[$family]=$p
    done
    [[ -n ${largest[$family]:-} ]] || { echo "finalize bench: $family: no size ran" >&2; exit 1; }
done

python3 - "$work/raw" <<'PY'
import math, statistics, sys
from collections import defaultdict
rows = defaultdict(lambda: defaultdict(list))  # (MPI, P) -> mode -> [(finalize ms, ours ms, ours max ms, bytes)]
for line in open(sys.argv[1]):
    family, p, mode, mean, ours, ours_max, size, n = line.split()
    rows[family, int(p)][mode].append((float(mean), float(ours), float(ours_max), int(size)))
med = statistics.median
print()
print("MPI      ranks  log2 P   MPI_Finalize a rank (ms, median over rounds)       profiler's part    record")
print("                         bare mean  mpistat mean  added mean        mean      max      bytes")
for family, p in sorted(rows, key=lambda k: (k[0] != "openmpi", k[1])):
    m = rows[family, p]
    if not m["bare"] or not m["mpistat"]:
        continue
    b, q = med(r[0] for r in m["bare"]), med(r[0] for r in m["mpistat"])
    ours, ours_max = med(r[1] for r in m["mpistat"]), med(r[2] for r in m["mpistat"])
    size = med(r[3] for r in m["mpistat"])
    print(f"{family:<7}  {p:>5}  {math.log2(p):>6.1f}  {b:>9.2f}  {q:>12.2f}  {q - b:>10.2f}  {ours:>10.2f} {ours_max:>8.2f}  {size:>9.0f}")
PY
for family in "${families[@]}"; do echo "The largest size run under $family: ${largest[$family]} ranks."; done
echo "(The record's bytes are every datagram of the job.)"
