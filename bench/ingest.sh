#!/usr/bin/env bash
# Ingest and digest benchmark (issue 4): generates a syslog file of N job records (default 1
# million) of U users (default 1000), times `mpistat ingest` on it (records/s) and
# `mpistat digest --dry-run` of the week for all users. Prints numbers; asserts nothing.
# Usage: bench/ingest.sh [N [U]]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
records=${1:-1000000}
users=${2:-1000}
cargo build --release -q -p mpistat-digest --bin mpistat --example gen_records
work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-bench-ingest.XXXXXX")
trap 'rm -rf "$work"' EXIT
target/release/examples/gen_records "$records" "$users" "$work/records.log"
# The generator's gigabytes still being written back would compete with ingest's own syncs.
sync
# The generated users (user0.., uid 2000..) are invented. Their names are checked as at a site
# (each uid and name looked up once; none known here, so all believed) unless this host has an
# account with one of their uids or names, which would make their records forged: then not.
mapfile -t accounts < <(seq 2000 $((2000 + users - 1)); seq -f 'user%.0f' 0 $((users - 1)))
check_names=true
if [[ -n $(getent passwd "${accounts[@]}") ]]; then
    check_names=false
fi
# The escalation list too stays in $work (ingest writes it; the default is the system's).
printf '[database]\npath = "%s"\n[escalation]\nlist = "%s"\n[ingest]\ncheck_user_names = %s\n' \
    "$work/mpistat.db" "$work/escalation.list" "$check_names" > "$work/site.toml"
echo "input: $records records, $(wc -l < "$work/records.log") lines, $(du -h "$work/records.log" | cut -f1)"
echo "user names checked against this host's accounts: $check_names"
# Wall and CPU (user + system) seconds of a command, as "wall cpu" in $work/times: the machine may
# be shared, and CPU time says what the command itself cost.
timed() {
    local TIMEFORMAT='%R %U %S'
    { time "$@" 2>"$work/stderr" ; } 2>"$work/times"
    cat "$work/stderr" >&2
    read -r wall user sys <"$work/times"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
}
echo "load average before ingest: $(cut -d ' ' -f 1-3 /proc/loadavg)"
timed target/release/mpistat ingest --config "$work/site.toml" "$work/records.log"
awk -v n="$records" -v w="$wall" -v c="$cpu" 'BEGIN {
    printf "ingest: %.1f s wall, %.0f records/s; %.1f s CPU, %.0f records per CPU second\n",
        w, n / w, c, n / c }'
echo "database: $(du -h "$work/mpistat.db" | cut -f1)"
echo "load average before digest: $(cut -d ' ' -f 1-3 /proc/loadavg)"
timed target/release/mpistat digest --config "$work/site.toml" --week 2026-W47 --dry-run \
    >"$work/mails.txt"
awk -v u="$users" -v w="$wall" -v c="$cpu" \
    'BEGIN { printf "digest: %.1f s wall, %.1f s CPU for %d users\n", w, c, u }'
echo "mails: $(grep -c '^To: ' "$work/mails.txt")"
