#!/usr/bin/env bash
# The rollup rebuild on a live site (issue 16): makes a month of N varied jobs (default 100,000)
# of U users (default 500) with `gen_records` and ingests it, then runs `mpistat
# rebuild-rollups` while another process commits a small write every 0.2 s (as ingest's writer
# would: it waits for the write lock up to its busy timeout), and prints the rebuild's time,
# peak RSS and the longest and median wait of that writer; then the same with the binary in
# MPISTAT_REBUILD_BASELINE (a directory holding an older `mpistat`, e.g. the one-transaction
# rebuild) on the same database, and the ratios. Asserts nothing.
# Usage: bench/rebuild.sh [N [U]]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
records=${1:-100000}
users=${2:-500}
cargo build --release -q -p mpistat-digest --bin mpistat --example gen_records
work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-bench-rebuild.XXXXXX")
trap 'rm -rf "$work"' EXIT
site_toml "$work" > "$work/site.toml"
target/release/examples/gen_records "$records" "$users" "$work/month.log" varied 0 "$records"
target/release/mpistat ingest --config "$work/site.toml" "$work/month.log" 2> /dev/null
rm "$work/month.log"

# rebuild BIN: prints "seconds peak-MiB longest-wait-s median-wait-s commits"
rebuild() {
    python3 - "$work/mpistat.db" "$work/stop" > "$work/waits" <<'EOF' &
import os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=600, isolation_level=None)
waits = []
while not os.path.exists(sys.argv[2]):
    start = time.monotonic()
    db.execute("BEGIN IMMEDIATE")
    waits.append(time.monotonic() - start)
    db.execute("INSERT OR REPLACE INTO positions_probe VALUES (1)")
    db.execute("COMMIT")
    time.sleep(0.2)
waits.sort()
print(f"{waits[-1]:.3f} {waits[len(waits) // 2]:.3f} {len(waits)}")
EOF
    local probe=$!
    /usr/bin/time -f '%e %M' -o "$work/time" "$1" rebuild-rollups --config "$work/site.toml" 2> /dev/null
    touch "$work/stop"
    wait "$probe"
    rm "$work/stop"
    read -r seconds kib < "$work/time"
    echo "$seconds $((kib / 1024)) $(cat "$work/waits")"
}
sqlite3 "$work/mpistat.db" "CREATE TABLE positions_probe (x INTEGER PRIMARY KEY)"
printf '%-34s %9s %9s %16s %16s %8s\n' "rebuild-rollups, $records jobs" "s" "peak MiB" "longest wait s" "median wait s" "commits"
read -r s m longest median commits < <(rebuild target/release/mpistat)
printf '%-34s %9s %9s %16s %16s %8s\n' "in steps (this tree)" "$s" "$m" "$longest" "$median" "$commits"
if [[ -n ${MPISTAT_REBUILD_BASELINE:-} ]]; then
    read -r bs bm blongest bmedian bcommits < <(rebuild "$MPISTAT_REBUILD_BASELINE/mpistat")
    printf '%-34s %9s %9s %16s %16s %8s\n' "baseline ($MPISTAT_REBUILD_BASELINE)" "$bs" "$bm" "$blongest" "$bmedian" "$bcommits"
    printf '%-34s %9.2f %9.2f %16.3f\n' "ratio (this / baseline)" \
        "$(echo "$s / $bs" | bc -l)" "$(echo "$m / $bm" | bc -l)" "$(echo "$longest / $blongest" | bc -l)"
fi
