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
printf '[database]\npath = "%s"\n' "$work/mpistat.db" > "$work/site.toml"
echo "input: $records records, $(wc -l < "$work/records.log") lines, $(du -h "$work/records.log" | cut -f1)"
start=$(date +%s.%N)
target/release/mpistat ingest --config "$work/site.toml" "$work/records.log"
end=$(date +%s.%N)
awk -v n="$records" -v s="$start" -v e="$end" \
    'BEGIN { printf "ingest: %.1f s, %.0f records/s\n", e - s, n / (e - s) }'
start=$(date +%s.%N)
target/release/mpistat digest --config "$work/site.toml" --week 2026-W47 --dry-run > "$work/mails.txt"
end=$(date +%s.%N)
awk -v u="$users" -v s="$start" -v e="$end" \
    'BEGIN { printf "digest: %.1f s for %d users\n", e - s, u }'
echo "mails: $(grep -c '^To: ' "$work/mails.txt")"
