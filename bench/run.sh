#!/usr/bin/env bash
# Overhead of libmpistat: runs bench/overhead.c bare, under LD_PRELOAD (counting mode) and in
# trace mode (MPISTAT_TRACE=1; a tenth of the iterations, so that every call of the run fits the
# trace budget), and, when MPICH is installed, the same program built for MPICH bare and with the
# library preloaded (passed through untouched), alternating in one invocation (so all see the
# same machine state), plus process start-up cost, and prints a table with the budget beside the
# numbers. Speed is measured, not asserted: this fails only if something crashes. Then the trace
# analysis benchmark (bench/analysis.rs): bytes per event of the trace format, wall and CPU time
# per pass, events per second, and a scaling series.
#
#   bench/run.sh           full size (about two minutes)
#   bench/run.sh --small   CI size (a few seconds; noisy, a smoke test of the harness)
#   MPISTAT_BENCH_COUNTERS=per-call bench/run.sh   with software counters read around each call
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

small=0
case "${1:-}" in
    --small) small=1 ;;
    "") ;;
    *) echo "usage: $0 [--small]" >&2; exit 2 ;;
esac

if [[ $small == 1 ]]; then
    iters=10000 reps=3 rounds=2 starts=10
    analysis_size=(64 200000 2) # ranks, events, repetitions
else
    iters=100000 reps=5 rounds=5 starts=50
    analysis_size=(64 10000000 5)
fi

# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
cargo build --release -q -p mpistat-profiler
lib=$PWD/target/release/libmpistat.so

work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-bench.XXXXXX")
sink_pid=
cleanup() {
    if [[ -n $sink_pid ]]; then
        kill "$sink_pid" 2>/dev/null || true
        wait "$sink_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

mpicc -O2 -Wall -Wextra -Werror -o "$work/overhead" bench/overhead.c
# The same program built for MPICH (beside Open MPI, scripts/prereqs.sh): the library passes its
# jobs through untouched, and this measures what that costs per call.
mpich=0
if command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then
    mpicc.mpich -O2 -Wall -Wextra -Werror -o "$work/overhead-mpich" bench/overhead.c
    mpich=1
fi

# A syslog socket that drains and discards, so the preloaded MPI_Finalize pays for a real send
# (as on a site with a running syslogd) without touching the machine's syslog.
python3 - "$work/log.sock" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
while True:
    s.recv(65536)
EOF
sink_pid=$!
for _ in $(seq 50); do [[ -S $work/log.sock ]] && break; sleep 0.1; done
printf '[syslog]\nsocket = "%s"\n' "$work/log.sock" >"$work/site.toml"
# Trace mode: the traces go to the work directory; the budget holds every event of the run.
cp "$work/site.toml" "$work/site-trace.toml"
printf '[trace]\ndirectory = "%s/traces/{job_id}"\nbudget_bytes = 536870912\n' "$work" >>"$work/site-trace.toml"
# MPISTAT_BENCH_COUNTERS=per-call|totals: the profiled runs also count the software events
# task-clock, page-faults and context-switches in that mode (default: the site's default set,
# which has only hardware events: on a machine without a PMU nothing is read around calls).
counter_env=()
if [[ -n ${MPISTAT_BENCH_COUNTERS:-} ]]; then
    printf '[profiler]\ncounters_fallback = "%s"\n' "$MPISTAT_BENCH_COUNTERS" >>"$work/site.toml"
    counter_env=(-x "MPISTAT_COUNTERS=task-clock,page-faults,context-switches")
fi

# The benchmark's own output only, none of the user's opt-ins.
unset MPISTAT_DETAIL LD_PRELOAD
mpirun_flags=(--allow-run-as-root -np 2)
if [[ $(nproc) -lt 2 ]]; then
    # Two busy-polling ranks on one core would measure the scheduler, not MPI.
    mpirun_flags+=(--oversubscribe)
    export OMPI_MCA_mpi_yield_when_idle=1
fi

raw=$work/raw.txt
run_overhead() { # MODE
    local extra=() n=$iters
    if [[ $1 == mpich || $1 == mpich-pass ]]; then
        if [[ $1 == mpich-pass ]]; then
            extra=(-genv LD_PRELOAD "$lib" -genv MPISTAT_CONFIG "$work/site.toml")
        fi
        mpiexec.mpich -np 2 "${extra[@]}" "$work/overhead-mpich" "$n" "$reps" </dev/null |
            sed "s/^/$1 /" >>"$raw"
        return
    fi
    if [[ $1 == mpistat ]]; then
        extra=(-x "LD_PRELOAD=$lib" -x "MPISTAT_CONFIG=$work/site.toml" "${counter_env[@]}")
    elif [[ $1 == trace ]]; then
        extra=(-x "LD_PRELOAD=$lib" -x "MPISTAT_CONFIG=$work/site-trace.toml" -x MPISTAT_TRACE=1)
        n=$((iters / 10))
    fi
    mpirun "${mpirun_flags[@]}" "${extra[@]}" "$work/overhead" "$n" "$reps" </dev/null |
        sed "s/^/$1 /" >>"$raw"
}

# Start-up cost of non-MPI programs, which a site-wide LD_PRELOAD also reaches. The real python
# binary, not a wrapper script (pyenv shims are shell scripts).
python_bin=$(python3 -c 'import sys; print(sys.executable)')
run_startup() { # MODE NAME COMMAND...
    local mode=$1 name=$2 t0 t1 i
    shift 2
    local vars=()
    if [[ $mode == mpistat ]]; then vars=("LD_PRELOAD=$lib" "MPISTAT_CONFIG=$work/site.toml"); fi
    t0=$(date +%s%N)
    for ((i = 0; i < starts; i++)); do env "${vars[@]}" "$@" </dev/null; done
    t1=$(date +%s%N)
    echo "$mode startup $name ns=$(((t1 - t0) / starts))" >>"$raw"
}

# One untimed run first: the first job after a build pays for page-cache misses.
mpirun "${mpirun_flags[@]}" "$work/overhead" 100 1 </dev/null >/dev/null

echo "bench: $rounds rounds x (bare, mpistat, trace$( ((mpich)) && echo ", MPICH bare and passed through")), $iters iterations x $reps repetitions, 2 ranks"
for ((round = 1; round <= rounds; round++)); do
    # Alternate which mode goes first, so slow drift of the machine does not favour either.
    if ((round % 2)); then order=(bare mpistat); else order=(mpistat bare); fi
    for mode in "${order[@]}"; do
        echo "round $round/$rounds: $mode"
        run_overhead "$mode"
        run_startup "$mode" "bash -c true" bash -c true
        run_startup "$mode" "python3 -c pass" "$python_bin" -c pass
    done
    echo "round $round/$rounds: trace"
    run_overhead trace
    rm -rf "$work/traces"
    if ((mpich)); then
        if ((round % 2)); then order=(mpich mpich-pass); else order=(mpich-pass mpich); fi
        for mode in "${order[@]}"; do
            echo "round $round/$rounds: $mode"
            run_overhead "$mode"
        done
    fi
done

# Keep the raw numbers when asked (MPISTAT_BENCH_RAW=file), e.g. to look at their spread.
if [[ -n ${MPISTAT_BENCH_RAW:-} ]]; then cp "$raw" "$MPISTAT_BENCH_RAW"; fi

python3 - "$raw" <<'EOF'
"""Aggregates the raw lines into the overhead table (medians over rounds)."""
import re, statistics, sys
from collections import defaultdict

ADDED_NS_BUDGET = 30   # per call, median
RSS_KB_BUDGET = 256    # per rank

bench = defaultdict(lambda: defaultdict(list))   # name -> mode -> [ns per iteration]
calls = {}
mem = defaultdict(lambda: defaultdict(list))     # key -> mode -> [kB]
fin = defaultdict(list)
start = defaultdict(lambda: defaultdict(list))

for line in open(sys.argv[1]):
    mode, kind, rest = line.rstrip("\n").split(" ", 2)
    kv = dict(re.findall(r"(\w+)=([-\d.]+)", rest))
    if kind == "bench":
        name = rest.split(" ", 1)[0]
        bench[name][mode].append(float(kv["ns_per_iter"]))
        calls[name] = int(kv["calls_per_iter"])
    elif kind == "mem":
        for k in ("vmrss_kb_mean", "vmhwm_kb_mean", "rssanon_kb_mean", "pss_kb_mean"):
            mem[k][mode].append(float(kv[k]))
    elif kind == "finalize":
        fin[mode].append(float(kv["ms"]))
    elif kind == "startup":
        start[rest.rsplit(" ", 1)[0]][mode].append(float(kv["ns"]) / 1e6)

med = statistics.median

def added(d, base="bare", mode="mpistat"):
    """Median of the per-round differences (rounds are paired: same machine state)."""
    n = min(len(d[base]), len(d[mode]))
    return med([d[mode][i] - d[base][i] for i in range(n)]) if n else float("nan")

def verdict(ok):
    return "within" if ok else "OVER"

print()
print(f"{'per call':<12} {'unit':<22} {'bare ns':>9} {'mpistat ns':>10} {'added ns':>9} "
      f"{'added/call':>10} {'ratio':>6}  budget <= {ADDED_NS_BUDGET} ns/call")
for name, d in bench.items():
    if not d["bare"] or not d["mpistat"]:
        continue
    b, p, a = med(d["bare"]), med(d["mpistat"]), added(d)
    c = calls[name]
    unit = "call" if c == 1 else f"round trip ({c} calls)"
    print(f"{name:<12} {unit:<22} {b:>9.1f} {p:>10.1f} {a:>9.1f} {a / c:>10.1f} {p / b:>6.2f}  "
          f"{verdict(a / c <= ADDED_NS_BUDGET)}")

print()
print(f"{'trace mode':<12} {'unit':<22} {'bare ns':>9} {'trace ns':>10} {'added ns':>9} "
      f"{'added/call':>10} {'ratio':>6}  (MPISTAT_TRACE=1 vs bare; counting mode above)")
for name, d in bench.items():
    if not d["bare"] or not d["trace"]:
        continue
    b, t = med(d["bare"]), med(d["trace"])
    c = calls[name]
    unit = "call" if c == 1 else f"round trip ({c} calls)"
    print(f"{name:<12} {unit:<22} {b:>9.1f} {t:>10.1f} {t - b:>9.1f} {(t - b) / c:>10.1f} {t / b:>6.2f}")

if any(d["mpich"] and d["mpich-pass"] for d in bench.values()):
    print()
    print(f"{'MPICH':<12} {'unit':<22} {'bare ns':>9} {'passed ns':>10} {'added ns':>9} "
          f"{'added/call':>10} {'ratio':>6}  (not profiled: passed through untouched)")
    for name, d in bench.items():
        if not d["mpich"] or not d["mpich-pass"]:
            continue
        b, p, a = med(d["mpich"]), med(d["mpich-pass"]), added(d, "mpich", "mpich-pass")
        c = calls[name]
        unit = "call" if c == 1 else f"round trip ({c} calls)"
        print(f"{name:<12} {unit:<22} {b:>9.1f} {p:>10.1f} {a:>9.1f} {a / c:>10.1f} {p / b:>6.2f}")

print()
print(f"{'memory per rank':<25} {'bare kB':>9} {'mpistat kB':>10} {'added kB':>9}  budget <= {RSS_KB_BUDGET} kB")
for key, label in (("vmrss_kb_mean", "VmRSS after loops"), ("vmhwm_kb_mean", "VmHWM (peak)"),
                   ("rssanon_kb_mean", "RssAnon (private)"),
                   ("pss_kb_mean", "Pss (shared split)")):
    d = mem[key]
    if d["bare"] and d["mpistat"]:
        a = added(d)
        print(f"{label:<25} {med(d['bare']):>9.0f} {med(d['mpistat']):>10.0f} {a:>9.0f}  "
              f"{verdict(a <= RSS_KB_BUDGET)}")

print()
print(f"{'time (ms)':<25} {'bare':>9} {'mpistat':>10} {'added':>9}")
if fin["bare"] and fin["mpistat"]:
    print(f"{'MPI_Finalize (rank 0)':<25} {med(fin['bare']):>9.2f} {med(fin['mpistat']):>10.2f} "
          f"{added(fin):>9.2f}   (median)")
if fin["trace"]:
    print(f"{'MPI_Finalize, trace mode':<25} {med(fin['bare']):>9.2f} {med(fin['trace']):>10.2f} "
          f"{med(fin['trace']) - med(fin['bare']):>9.2f}   (median; writes the trace)")
for name, d in start.items():
    if d["bare"] and d["mpistat"]:
        b, p = statistics.mean(d["bare"]), statistics.mean(d["mpistat"])
        print(f"{'start-up ' + name:<25} {b:>9.2f} {p:>10.2f} {p - b:>9.2f}   (mean per run)")
print()
print("Budget shown, not asserted. Cheap local calls are the worst case for a wrapper's fixed cost.")
EOF

echo
cargo run --release -q -p mpistat-analysis --bin mpistat-analysis-bench -- "${analysis_size[@]}"
