#!/usr/bin/env bash
# Overhead of libmpistat: runs bench/overhead.c bare, under LD_PRELOAD (counting mode), in trace
# mode (MPISTAT_TRACE=1; a tenth of the iterations, so that every call of the run fits the trace
# budget) and under any other profiling library given with --with, interleaved in one invocation
# (so all see the same machine state), in two layouts: 2 ranks, and 4 ranks on 2 cores ("4o",
# oversubscribed: any extra work in a collective's wrapper shows on every rank there); and, when
# MPICH is installed, the same program built for MPICH on 2 ranks ("2m"), bare, with the
# library preloaded (the front loads the MPICH build, libmpistat_mpich.so), in trace mode, and
# under the --with libraries built for MPICH ("{mpi}" in their path, below). Mode
# "direct" preloads the Open MPI implementation (libmpistat_openmpi.so) itself instead of the front
# (libmpistat.so): the difference is what the front's trampolines add per call. Plus
# process start-up cost. Prints tables with the budgets beside the numbers
# (bench/overhead_table.py). Then the in-job A/B comparisons alone (overhead ... ab), in many
# short jobs of the 2-rank layouts, every mode interleaved: one job's A/B moves by ~15 ns, so a
# median over a few rounds is too coarse for a 30 ns budget, and the table's verdicts for the
# 2-rank layouts come from these jobs. Speed is measured, not asserted: this fails only if something
# crashes. Then the trace analysis benchmark (bench/analysis.rs): bytes per event of the trace
# format, wall and CPU time per pass, events per second, and a scaling series.
#
#   bench/run.sh           full size (a few minutes)
#   bench/run.sh --small   CI size (seconds; noisy, a smoke test of the harness)
#   bench/run.sh --with ipm=/opt/peers/{mpi}/ipm/lib/libipm.so --with mpip=/opt/lib/libmpiP.so \
#       --with talp=/opt/peers/{mpi}/dlb/lib/libdlb_mpi.so,"DLB_ARGS=--talp --talp-summary=none"
#                          also run under other profiling libraries (NAME=LIB[,VAR=VALUE...]:
#                          LIB preloaded with those variables set, values with spaces kept
#                          whole; "{mpi}" in LIB is openmpi or mpich, bench/peers.sh's builds,
#                          else the library runs under Open MPI only), for a side-by-side
#                          table. Each job runs in a directory of its own (peers write reports
#                          there); only the benchmark's own lines are kept (a peer's banner is
#                          dropped, its standard error logged), and a peer's job that fails (one
#                          that crashes on MPI_Pcontrol fails every A/B job) is told and skipped
#   bench/run.sh --floor   also the floor: bench/floor.c preloaded, a wrapper that only reads the
#                          clock twice per call (what any per-call timing costs on this machine)
#   MPISTAT_BENCH_COUNTERS=per-call bench/run.sh   with software counters read around each call
#   bench/run.sh --layouts 2,2m --rounds 3 --ab-jobs 20
#                          only these layouts, this many interleaved rounds and A/B-only jobs
#                          per mode and 2-rank layout (a busy machine: Open MPI's and MPICH's
#                          2-rank rows side by side in less time)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

small=0 floor=0
others=() # NAME=LIB[,VAR=VALUE...]
only_layouts= only_rounds= only_ab_jobs=
while (($#)); do
    case $1 in
        --small) small=1 ;;
        --floor) floor=1 ;;
        --layouts)
            [[ ${2:-} =~ ^(2|4o|2m)(,(2|4o|2m))*$ ]] || { echo "$0: --layouts 2,4o,2m (any of them)" >&2; exit 2; }
            only_layouts=${2//,/ }
            shift
            ;;
        --rounds)
            [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "$0: --rounds N" >&2; exit 2; }
            only_rounds=$2
            shift
            ;;
        --ab-jobs)
            [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "$0: --ab-jobs N" >&2; exit 2; }
            only_ab_jobs=$2
            shift
            ;;
        --with)
            others+=("${2:-}")
            shift
            ;;
        *) echo "usage: $0 [--small] [--floor] [--layouts L,...] [--rounds N] [--ab-jobs N] [--with NAME=LIB[,VAR=VALUE...]]..." >&2; exit 2 ;;
    esac
    shift
done

if [[ $small == 1 ]]; then
    iters=10000 reps=3 rounds=2 starts=10 ab_jobs=2
    analysis_size=(64 200000 2) # ranks, events, repetitions
else
    iters=100000 reps=5 rounds=5 starts=50 ab_jobs=12
    analysis_size=(64 10000000 5)
fi
rounds=${only_rounds:-$rounds}
ab_jobs=${only_ab_jobs:-$ab_jobs}

# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
cargo build --release -q -p mpistat-front -p mpistat-profiler -p mpistat-profiler-mpich
lib=$PWD/target/release/libmpistat.so
implementation=$PWD/target/release/libmpistat_openmpi.so

bench_work bench

# The program's malloc_trim is exported: libmpistat's calls find it, and it reads the exact
# resident set at each of MPI_Finalize's steps (bench/overhead.c).
cflags=(-O2 -Wall -Wextra -Werror -Wl,--export-dynamic-symbol=malloc_trim)
mpicc "${cflags[@]}" -o "$work/overhead" bench/overhead.c
mpich=0
if command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then
    mpicc.mpich "${cflags[@]}" -o "$work/overhead-mpich" bench/overhead.c
    mpich=1
fi
if ((floor)); then
    mpicc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/libfloor.so" bench/floor.c
    if ((mpich)); then
        mpicc.mpich -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/libfloor-mpich.so" bench/floor.c
    fi
fi

syslog_sink "$work/log.sock"
printf '[syslog]\nsocket = "%s"\n' "$work/log.sock" >"$work/site.toml"
# Trace mode: the traces go to the work directory; the budget holds every event of the run.
cp "$work/site.toml" "$work/site-trace.toml"
printf '[trace]\ndirectory = "%s/traces/{job_id}"\nbudget_bytes = 536870912\n' "$work" >>"$work/site-trace.toml"
# MPICH's Hydra has no PMIx, so whether every rank has the library is unknown: the MPICH runs
# assume it (every rank does here), so that they pay for the finalize reduction as Open MPI's do.
for f in site site-trace; do
    cp "$work/$f.toml" "$work/$f-mpich.toml"
    printf '[profiler]\nassume_all_ranks_profiled = true\n' >>"$work/$f-mpich.toml"
done
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
# Layouts: "2" is 2 ranks (bound as mpirun chooses); "4o" is 4 ranks on the first 2 CPUs,
# oversubscribed and unbound (Open MPI then yields when idle, as on any oversubscribed node).
layout_command() { # LAYOUT: prints the launcher's command line
    if [[ $1 == 2m ]]; then
        echo "mpiexec.mpich -np 2"
    elif [[ $1 == 4o ]]; then
        echo "taskset -c 0-$(($(nproc) >= 2 ? 1 : 0)) mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4"
    elif [[ $(nproc) -lt 2 ]]; then
        # Two busy-polling ranks on one core would measure the scheduler, not MPI.
        echo "mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1 -np 2"
    else
        echo "mpirun --allow-run-as-root -np 2"
    fi
}
layouts=(2 4o)
((mpich)) && layouts+=(2m)
if [[ -n $only_layouts ]]; then
    read -r -a layouts <<<"$only_layouts"
    if ((!mpich)) && [[ " ${layouts[*]} " == *" 2m "* ]]; then
        echo "$0: --layouts 2m: MPICH (mpicc.mpich, mpiexec.mpich) is not installed" >&2
        exit 2
    fi
fi

modes=(bare mpistat direct trace)
((floor)) && modes+=(floor)
declare -A other_spec=() # mode: NAME=LIB[,VAR=VALUE...]
for spec in "${others[@]}"; do
    peer_check "$spec"
    name=${spec%%=*}
    case $name in
        bare | mpistat | direct | trace | floor) echo "$0: --with $name: a mode of our own" >&2; exit 2 ;;
    esac
    other_spec[$name]=$spec
    modes+=("$name")
done

raw=$work/raw.txt
# What one clock read costs on this host (overhead clock: no MPI), before anything else runs.
"$work/overhead" clock | sed "s/^/- - /" >"$raw"
run_overhead() { # LAYOUT MODE [ab]
    local layout=$1 mode=$2 only=${3:-} extra=() n=$iters launcher program=$work/overhead var vars
    if [[ $layout == 2m ]]; then
        # MPICH: bare, the MPICH build preloaded, trace mode, the floor and the --with libraries
        # built for MPICH.
        case $mode in
            bare) ;;
            mpistat) extra=(-genv LD_PRELOAD "$lib" -genv MPISTAT_CONFIG "$work/site-mpich.toml") ;;
            trace)
                extra=(-genv LD_PRELOAD "$lib" -genv MPISTAT_CONFIG "$work/site-trace-mpich.toml" -genv MPISTAT_TRACE 1)
                n=$((iters / 10))
                ;;
            floor) extra=(-genv LD_PRELOAD "$work/libfloor-mpich.so") ;;
            direct) return ;; # the front's trampolines are measured under Open MPI
            *)
                mapfile -t vars < <(peer_env "${other_spec[$mode]}" mpich)
                ((${#vars[@]})) || return 0
                for var in "${vars[@]}"; do extra+=(-genv "${var%%=*}" "${var#*=}"); done
                ;;
        esac
        program=$work/overhead-mpich
    else
        case $mode in
            bare) ;;
            mpistat) extra=(-x "LD_PRELOAD=$lib" -x "MPISTAT_CONFIG=$work/site.toml" "${counter_env[@]}") ;;
            direct) extra=(-x "LD_PRELOAD=$implementation" -x "MPISTAT_CONFIG=$work/site.toml" "${counter_env[@]}") ;;
            trace)
                extra=(-x "LD_PRELOAD=$lib" -x "MPISTAT_CONFIG=$work/site-trace.toml" -x MPISTAT_TRACE=1)
                n=$((iters / 10))
                ;;
            floor) extra=(-x "LD_PRELOAD=$work/libfloor.so") ;;
            *)
                mapfile -t vars < <(peer_env "${other_spec[$mode]}" openmpi)
                for var in "${vars[@]}"; do extra+=(-x "$var"); done
                ;;
        esac
    fi
    read -r -a launcher <<<"$(layout_command "$layout")"
    mkdir -p "$work/cwd-$mode"
    # A peer's standard error (its reports, warnings, a crash's backtrace) goes to a log; ours
    # stays on the terminal (it prints nothing unless something is wrong).
    local errors=/dev/stderr
    [[ -n ${other_spec[$mode]:-} ]] && errors=$work/cwd-$mode/stderr.log
    # Only the benchmark's lines (overhead.c's kinds), whatever else a profiler prints.
    if ! (cd "$work/cwd-$mode" && "${launcher[@]}" "${extra[@]}" "$program" "$n" "$reps" ${only:+"$only"} </dev/null 2>>"$errors" |
        awk -v p="$layout $mode" '$1 ~ /^(bench|bench_ab|mem|finalize)$/ { print p, $0 }' >>"$raw"); then
        # Ours must not fail; a peer as it is may (its lines so far are kept).
        [[ -n ${other_spec[$mode]:-} ]] || exit 1
        echo "bench: $layout ranks, $mode${only:+ ($only)}: the job failed; skipped. The end of its standard error:" >&2
        tail -n 4 "$errors" | sed 's/^/    /' >&2
    fi
    rm -rf "$work/traces"
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
    echo "- $mode startup $name ns=$(((t1 - t0) / starts))" >>"$raw"
}

# One untimed run first: the first job after a build pays for page-cache misses.
read -r -a launcher <<<"$(layout_command 2)"
"${launcher[@]}" "$work/overhead" 100 1 </dev/null >/dev/null

echo "bench: $rounds rounds x layouts (${layouts[*]}) x modes (${modes[*]}), $iters iterations x $reps repetitions"
for ((round = 1; round <= rounds; round++)); do
    # Rotate which mode goes first, so slow drift of the machine favours none of them.
    first=$((round % ${#modes[@]}))
    order=("${modes[@]:first}" "${modes[@]:0:first}")
    for layout in "${layouts[@]}"; do
        for mode in "${order[@]}"; do
            echo "round $round/$rounds: $layout ranks, $mode"
            run_overhead "$layout" "$mode"
        done
    done
    for mode in bare mpistat; do
        run_startup "$mode" "bash -c true" bash -c true
        run_startup "$mode" "python3 -c pass" "$python_bin" -c pass
    done
done

# The A/B comparisons alone, in short jobs of the 2-rank layouts (see the top).
ab_layouts=()
for layout in "${layouts[@]}"; do [[ $layout == 4o ]] || ab_layouts+=("$layout"); done
if ((ab_jobs > 0 && ${#ab_layouts[@]} > 0)); then
    echo "bench: $ab_jobs A/B-only jobs x layouts (${ab_layouts[*]}) x modes (${modes[*]})"
fi
for ((job = 1; job <= ab_jobs && ${#ab_layouts[@]} > 0; job++)); do
    first=$((job % ${#modes[@]}))
    order=("${modes[@]:first}" "${modes[@]:0:first}")
    for layout in "${ab_layouts[@]}"; do
        for mode in "${order[@]}"; do
            run_overhead "$layout" "$mode" ab
        done
    done
done

# Keep the raw numbers when asked (MPISTAT_BENCH_RAW=file), e.g. to look at their spread.
if [[ -n ${MPISTAT_BENCH_RAW:-} ]]; then cp "$raw" "$MPISTAT_BENCH_RAW"; fi

python3 bench/overhead_table.py "$raw" "${modes[@]}"

echo
cargo run --release -q -p mpistat-analysis --bin mpistat-analysis-bench -- "${analysis_size[@]}"
