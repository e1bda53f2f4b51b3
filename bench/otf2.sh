#!/usr/bin/env bash
# OTF2 export and import (issue 37): rates (events/s) and peak memory on the largest trace of
# bench/parallel_analysis.sh, the halo exchange of 1,024 ranks and ~2 M events (or RANKS EVENTS).
#
#   bash bench/otf2.sh [RANKS EVENTS]
#
# Rows: the export alone (`otf2_bench export`: mpistat trace directory -> OTF2 archive), the
# reading alone (`otf2_bench read`: every rank's OTF2 events onto the analysis model), and the
# whole one-process analysis of the mpistat directory, of the archive, and with `--otf2` (export
# then analysis). Rates are per mpistat event (the trace's), wall time and peak resident memory
# (max RSS) from /usr/bin/time. The reports of the directory and of the archive must be equal.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ranks=${1:-1024}
events=${2:-2000000}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
cargo build --release -q -p mpistat-analysis --example write_halo
cargo build --release -q -p mpistat-otf2 --example otf2_bench
cargo build --release -q -p mpistat-digest
work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-bench-otf2.XXXXXX")
trap 'rm -rf "$work"' EXIT
real=$(target/release/examples/write_halo "$ranks" "$events" "$work/trace" | awk '{print $1}')
trace_bytes=$(du -sb "$work/trace" | cut -f1)

# Runs "$@" under /usr/bin/time; prints NAME, wall s, M events/s, max RSS MiB.
row() {
    local name=$1
    shift
    /usr/bin/time -f '%e %M' -o "$work/time" "$@" >"$work/$name.out"
    read -r wall rss <"$work/time"
    awk -v n="$name" -v w="$wall" -v r="$rss" -v e="$real" \
        'BEGIN { printf "| %s | %.2f | %.2f | %.0f |\n", n, w, e / (w > 0 ? w : 0.01) / 1e6, r / 1024 }'
}

echo "halo trace: $ranks ranks, $real events, $trace_bytes bytes of mpistat trace files"
echo "| step | wall s | M events/s | max RSS MiB |"
echo "| --- | --- | --- | --- |"
row export target/release/examples/otf2_bench export "$work/trace" "$work/archive"
archive_bytes=$(du -sb "$work/archive" | cut -f1)
row read target/release/examples/otf2_bench read "$work/archive"
row analyze-dir target/release/mpistat analyze --format json "$work/trace"
row analyze-archive target/release/mpistat analyze --format json "$work/archive"
rm -rf "$work/archive2"
row export+analyze target/release/mpistat analyze --format json --otf2 "$work/archive2" "$work/trace"
echo "OTF2 events written: $(cat "$work/export.out"); model events read back: $(cat "$work/read.out")"
echo "archive: $archive_bytes bytes ($(awk -v a="$archive_bytes" -v e="$real" 'BEGIN { printf "%.1f", a / e }') bytes a trace event)"
if cmp -s "$work/analyze-dir.out" "$work/analyze-archive.out"; then
    echo "reports: the archive's analysis equals the directory's"
else
    echo "reports DIFFER" >&2
    exit 1
fi
