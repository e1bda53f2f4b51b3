#!/usr/bin/env bash
# Syslog delivery benchmark (issue 15): what sending a record costs at MPI_Finalize, and how many
# syslog parts records have. Prints numbers; asserts nothing.
#
# 1. A record of 20, 100 and 1000 parts of the largest size (wire::MAX_MESSAGE bytes) sent by the
#    profiler's own send (syslog.rs, through its `bench_send_cost` test) to a private rsyslogd
#    that writes them to a file, then to the same daemon stopped (SIGSTOP): median and max of 5.
# 2. Parts per record of the sample programs (scripts/demo/, 4 ranks) and of
#    tests/programs/many_routines.c (2 ranks), from the record lines detail mode prints; with
#    BEFORE_LIB (another build of libmpistat.so, e.g. of the main branch) its parts beside.
#
# Usage: bench/syslog.sh [BEFORE_LIB]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
before=${1:-}
cargo build --release -q -p mpistat-front -p mpistat-profiler -p mpistat-digest
lib=$PWD/target/release/libmpistat.so

work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-bench-syslog.XXXXXX")
rsyslog_pid=
cleanup() {
    if [[ -n $rsyslog_pid ]]; then
        kill -CONT "$rsyslog_pid" 2>/dev/null || true
        kill "$rsyslog_pid" 2>/dev/null || true
        wait "$rsyslog_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# A private rsyslogd as in the demo (the machine's /dev/log is left alone).
cat >"$work/rsyslog.conf" <<EOF
global(workDirectory="$work")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="$work/log.sock" RateLimit.Interval="0")
local5.* action(type="omfile" file="$work/mpistat.log")
EOF
rsyslogd=$(command -v rsyslogd || echo /usr/sbin/rsyslogd)
"$rsyslogd" -n -f "$work/rsyslog.conf" -i "$work/rsyslogd.pid" &
rsyslog_pid=$!
for _ in $(seq 100); do [[ -S $work/log.sock ]] && break; sleep 0.1; done
[[ -S $work/log.sock ]] || { echo "rsyslogd did not create its socket" >&2; exit 1; }

echo "== Cost of sending a record at MPI_Finalize (parts of the largest size, stall_ms = 100)"
echo "   net.unix.max_dgram_qlen = $(cat /proc/sys/net/unix/max_dgram_qlen)"
send_cost() {
    MPISTAT_BENCH_SYSLOG=$work/log.sock MPISTAT_BENCH_STATE=$1 \
        cargo test --release -q -p mpistat-profiler --lib syslog::tests::bench_send_cost \
        -- --ignored --nocapture --test-threads 1 2>/dev/null | grep ' parts: '
}
send_cost live
kill -STOP "$rsyslog_pid"
send_cost stopped
kill -CONT "$rsyslog_pid"

echo
echo "== Parts per record"
mpicc -O2 -o "$work/ring" scripts/demo/ring.c -lm
mpicc -O2 -o "$work/unbalanced" scripts/demo/unbalanced.c
mpifort -O2 -o "$work/heat" scripts/demo/heat.f90
mpicc -O1 -w -o "$work/many_routines" tests/programs/many_routines.c
printf '[syslog]\nsocket = "%s"\nfacility = "local5"\n' "$work/log.sock" >"$work/site.toml"
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset MPISTAT_DETAIL LD_PRELOAD

# The record lines a run of $2 with library $1 printed in detail mode (file $3).
record_lines() {
    local lib=$1 prog=$2 out=$3 ranks=4
    [[ $prog == many_routines ]] && ranks=2
    rm -f "$work/detail"
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks" \
        -x "LD_PRELOAD=$lib" -x "MPISTAT_CONFIG=$work/site.toml" -x "MPISTAT_DETAIL=$work/detail" \
        "$work/$prog" "$work" >/dev/null </dev/null
    grep '^MPISTAT' "$work/detail" >"$out"
}
# Parts of the record in file $1 (the n of "i/n").
parts() { awk 'NR == 1 { split($3, p, "/"); print p[2] }' "$1"; }

printf '%-14s %9s %14s %14s %14s\n' program routines "payload bytes" "parts before" "parts now"
for prog in ring unbalanced heat many_routines; do
    record_lines "$lib" "$prog" "$work/now.lines"
    routines=$(target/release/mpistat show --json "$work/now.lines" 2>/dev/null |
        python3 -c 'import json, sys; print(len(json.loads(sys.stdin.readline())["routines"]))')
    payload=$(awk '{ split($3, p, "/"); if (p[1] > 0) n += length($6) } END { print n }' "$work/now.lines")
    was=-
    if [[ -n $before ]]; then
        record_lines "$before" "$prog" "$work/before.lines"
        was=$(parts "$work/before.lines")
    fi
    printf '%-14s %9s %14s %14s %14s\n' "$prog" "$routines" "$payload" "$was" "$(parts "$work/now.lines")"
done
