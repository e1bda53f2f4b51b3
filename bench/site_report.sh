#!/usr/bin/env bash
# Site-report benchmark (issue 5): generates N varied job records (default 100,000) of U users
# (default 500) ending over November 2026, ingests them, and times `mpistat site-report --month
# 2026-11` (every page: overview, charts, tables, critical jobs, one page per user and per job).
# Prints numbers (time, pages, size, peak memory); asserts nothing.
# Usage: bench/site_report.sh [N [U]]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
records=${1:-100000}
users=${2:-500}
cargo build --release -q -p mpistat-digest --bin mpistat --example gen_records
work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-bench-site.XXXXXX")
trap 'rm -rf "$work"' EXIT
target/release/examples/gen_records "$records" "$users" "$work/records.log" varied
# The generated users are invented (uid 2000.. may be someone else here): names not checked.
printf '[database]\npath = "%s"\n[ingest]\ncheck_user_names = false\n' "$work/mpistat.db" \
    > "$work/site.toml"
target/release/mpistat ingest --config "$work/site.toml" "$work/records.log"
echo "input: $records jobs of $users users, database $(du -h "$work/mpistat.db" | cut -f1)"
sync
/usr/bin/time -f '%e %U %S %M' -o "$work/time" \
    target/release/mpistat site-report --config "$work/site.toml" --month 2026-11 --out "$work/site"
read -r seconds user_s sys_s max_kib < "$work/time"
pages=$(find "$work/site" -name '*.html' | wc -l)
echo "site-report --month: ${seconds} s wall (${user_s} s user, ${sys_s} s system; $(nproc) cores) for ${pages} pages ($(du -sh "$work/site" | cut -f1)), peak RSS $((max_kib / 1024)) MiB"
