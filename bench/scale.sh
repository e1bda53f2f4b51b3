#!/usr/bin/env bash
# Admin pages at site scale (issue 16): generates N varied jobs (default 100,000) of U users
# (default 500) ending over November 2026, in parts of 200,000 (generate, ingest, delete), then
# times every page of `mpistat serve` (cold: first request after a restart with the page cache
# dropped, when this may; warm: p50/p95 of R requests), 50 concurrent requests while another
# part is ingested (errors, times, and whether the pages then show every committed job),
# `mpistat site-report --month` (time, size, peak RSS) and `mpistat digest --send` of a week to
# mail files for all users (time, peak RSS). Prints a table; asserts nothing. Each part's
# ingest is printed as it ends (jobs stored before it, seconds, jobs/s, peak RSS, database
# size: throughput over the database's growth); the next part is generated meanwhile.
# Also times `GET /metrics` (issue 39): cold (as the pages), the first scrape after a restart
# (every name of the week added up, page cache warm) and warm (p50/p95: the names kept), its
# size and series. Its windows end at the current hour: the generated month's jobs are in them
# while the machine's clock is in November 2026 (the line says how many jobs the week had).
# Usage: bench/scale.sh [N [U]] | bench/scale.sh --small (CI: 3,000 jobs, seconds)
# MPISTAT_SCALE_BIN=DIR: run DIR/mpistat and DIR/gen_records instead of building them (a long
# run that goes on while the worktree is rebuilt); MPISTAT_SCALE_INGEST_ONLY=1: stop after the
# ingest of all but the last part; MPISTAT_SCALE_METRICS_ONLY=1: ingest every part, then time
# /metrics only; MPISTAT_SCALE_JOBS=FIRST..END (with it): ingest only the month's jobs FIRST..END
# (jobs end in the order of their number: the windows' jobs of a month of N, in less time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
# shellcheck source=bench/lib.sh
source bench/lib.sh
repeats=20
if [[ ${1:-} == --small ]]; then
    records=3000 users=50 repeats=3
else
    records=${1:-100000}
    users=${2:-500}
fi
part=200000
bin=${MPISTAT_SCALE_BIN:-}
if [[ -z $bin ]]; then
    cargo build --release -q -p mpistat-digest --bin mpistat --example gen_records
    bin=target/release
    gen=target/release/examples/gen_records
else
    gen=$bin/gen_records
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-bench-scale.XXXXXX")
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mpistat=$bin/mpistat
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The server trusts a header on loopback: a benchmark, not a site set-up.
{
    site_toml "$work"
    cat <<EOF
[mail]
transport = "directory"
directory = "$work/mail"
[serve]
listen = "127.0.0.1:$port"
auth = "header"
allow_unguarded_header = true
admins = ["admin"]
EOF
} > "$work/site.toml"
timed() { # timed NAME COMMAND...: runs it, keeps "seconds peak-MiB" in $work/NAME.time
    local name=$1
    shift
    /usr/bin/time -f '%e %M' -o "$work/$name.time" "$@"
    read -r seconds kib < "$work/$name.time"
    echo "$seconds $((kib / 1024))" > "$work/$name.time"
}
generate() { # generate FIRST END FILE
    "$gen" "$records" "$users" "$3" varied "$1" "$2"
}
ingest_file() { # ingest_file FILE
    timed ingest "$mpistat" ingest --config "$work/site.toml" "$1" 2> "$work/ingest.err"
    rm -f "$1"
}

# The month, in parts (the last one is kept for the concurrency run), each generated while
# the one before it is ingested.
start=$(date +%s.%N)
ingest_seconds=0
ingest_peak=0
last=$(( records > part ? (records - 1) / part * part : records * 9 / 10 ))
from=0
if [[ -n ${MPISTAT_SCALE_METRICS_ONLY:-} ]]; then
    last=$records
    jobs=${MPISTAT_SCALE_JOBS:-0..$records}
    from=${jobs%..*} last=${jobs#*..}
fi
generate "$from" "$((from + part < last ? from + part : last))" "$work/part$from.log"
for ((first = from; first < last; first += part)); do
    end=$((first + part < last ? first + part : last))
    next=
    if ((end < last)); then
        generate "$end" "$((end + part < last ? end + part : last))" "$work/part$end.log" &
        next=$!
    fi
    ingest_file "$work/part$first.log"
    read -r s m < "$work/ingest.time"
    ingest_seconds=$(echo "$ingest_seconds + $s" | bc)
    ((m > ingest_peak)) && ingest_peak=$m
    printf 'ingest part: %9d jobs stored before, %7d jobs in %7.1f s: %6.0f jobs/s, peak RSS %5d MiB, database %s, load %s\n' \
        "$((first - from))" "$((end - first))" "$s" "$(echo "($end - $first) / $s" | bc -l)" "$m" \
        "$(du -h "$work/mpistat.db" | cut -f1)" "$(cut -d' ' -f1 /proc/loadavg)"
    [[ -z $next ]] || wait "$next"
done
echo "input: $records jobs of $users users in 2026-11; ingest (all but the last part, incl. rollups): ${ingest_seconds} s ($(echo "($last - $from) / $ingest_seconds" | bc) jobs/s), peak RSS ${ingest_peak} MiB; database $(du -h "$work/mpistat.db" | cut -f1)"
[[ -z ${MPISTAT_SCALE_INGEST_ONLY:-} ]] || exit 0

start_server() {
    "$mpistat" serve --config "$work/site.toml" 2> "$work/serve.err" &
    server=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && return
        sleep 0.1
    done
    echo "serve did not start: $(cat "$work/serve.err")" >&2
    exit 1
}
get() { # get PATH: prints "seconds bytes status"
    curl -s -o /dev/null -H 'REMOTE_USER: admin' -w '%{time_total} %{size_download} %{http_code}\n' \
        "http://127.0.0.1:$port/$1"
}
percentile() { # percentile P < numbers
    sort -n | awk -v p="$1" '{v[NR] = $1} END {i = int((NR - 1) * p / 100) + 1; print v[i]}'
}
stop_server() {
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
}
metrics_line() { # /metrics: cold, first scrape of an hour, warm p50/p95, size, series
    start_server
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then echo 1 > /proc/sys/vm/drop_caches; fi
    read -r cold size status < <(get metrics)
    stop_server
    start_server
    read -r first _ _ < <(get metrics)
    for _ in $(seq "$repeats"); do get metrics; done > "$work/warm"
    curl -s -H 'REMOTE_USER: admin' "http://127.0.0.1:$port/metrics" > "$work/metrics.txt"
    stop_server
    local week series
    week=$(sed -n 's/^mpistat_jobs{window="7d"} //p' "$work/metrics.txt")
    series=$(grep -vc '^#' "$work/metrics.txt")
    [[ $status == 200 ]] || size="HTTP $status"
    printf '/metrics (%s jobs in the 7d window, %s series): cold %.3f s, first after a restart %.3f s, warm p50 %.4f s, p95 %.4f s, %s bytes\n' \
        "$week" "$series" "$cold" "$first" "$(cut -d' ' -f1 < "$work/warm" | percentile 50)" \
        "$(cut -d' ' -f1 < "$work/warm" | percentile 95)" "$size"
    printf 'hour rollups: %s\n' "$(sqlite3 "$work/mpistat.db" "SELECT count(*) || ' rows of rollup_hour_groups, ' ||
        (SELECT sum(pgsize) / 1048576 FROM dbstat WHERE name IN ('rollup_hours', 'rollup_hour_groups'))
        || ' MiB with rollup_hours' FROM rollup_hour_groups")"
}
if [[ -n ${MPISTAT_SCALE_METRICS_ONLY:-} ]]; then
    metrics_line
    exit 0
fi
month='period=2026-11'
# A job as the live pages link it (with its end time), and as an old link without it.
job=$(sqlite3 "$work/mpistat.db" "SELECT key || '.html?end=' || end_ms FROM jobs LIMIT 1 OFFSET 12345 % (SELECT count(*) FROM jobs)")
pages=(
    "index.html?$month" "charts.html?$month" "tables.html?$month" "critical.html?$month"
    "critical.html?$month&sort=end&from=1000" "users.html?$month" "users.html?$month&sort=mpi&from=100"
    "users/user7.html?$month" "users/user7.html?$month&sort=cpu&from=100" "users/user$((users / 2)).html?$month"
    "search.html?$month&q=user1" "search.html?$month&q=1234" "jobs/$job" "jobs/${job%%\?*}"
    "index.html?period=2026-W47" "users.html?period=2026-11-02..2026-11-08" "metrics"
)
printf '\n%-48s %8s %8s %8s %10s\n' "serve (admin), month of $records jobs" "cold s" "p50 s" "p95 s" "size"
for page in "${pages[@]}"; do
    start_server
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then echo 1 > /proc/sys/vm/drop_caches; fi
    read -r cold size status < <(get "$page")
    for _ in $(seq "$repeats"); do get "$page"; done > "$work/warm"
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    p50=$(cut -d' ' -f1 < "$work/warm" | percentile 50)
    p95=$(cut -d' ' -f1 < "$work/warm" | percentile 95)
    bad=$(awk '$3 != 200' "$work/warm" | wc -l)
    [[ $status == 200 && $bad == 0 ]] || size="HTTP $status"
    printf '%-48s %8.3f %8.3f %8.3f %10s\n' "${page:0:48}" "$cold" "$p50" "$p95" "$size"
done
metrics_line

# 50 concurrent requests (of all pages, in rounds) while the last part is ingested.
start_server
before=$(sqlite3 "$work/mpistat.db" 'SELECT count(*) FROM jobs')
generate "$last" "$records" "$work/last.log"
ingest_file "$work/last.log" &
ingesting=$!
rounds=0
: > "$work/concurrent"
while kill -0 "$ingesting" 2>/dev/null || ((rounds == 0)); do
    for i in $(seq 50); do echo "${pages[i % ${#pages[@]}]}"; done |
        xargs -P 50 -I{} curl -s -o /dev/null -H 'REMOTE_USER: admin' \
            -w '%{time_total} %{http_code}\n' "http://127.0.0.1:$port/{}" >> "$work/concurrent"
    rounds=$((rounds + 1))
done
wait "$ingesting"
after=$(sqlite3 "$work/mpistat.db" 'SELECT count(*) FROM jobs')
shown=$(curl -s -H 'REMOTE_USER: admin' "http://127.0.0.1:$port/index.html?$month" |
    sed -n 's|.*<th>analysed jobs</th><td class="n">\([0-9]*\)</td>.*|\1|p')
errors=$(awk '$2 != 200' "$work/concurrent" | wc -l)
echo
echo "concurrency: $rounds rounds of 50 concurrent requests while ingest stored $((after - before)) jobs: $(wc -l < "$work/concurrent") requests, $errors not 200, p50 $(cut -d' ' -f1 < "$work/concurrent" | percentile 50) s, p95 $(cut -d' ' -f1 < "$work/concurrent" | percentile 95) s, max $(cut -d' ' -f1 < "$work/concurrent" | percentile 100) s; after the last commit the overview shows $shown of $after jobs"
kill "$server"
wait "$server" 2>/dev/null || true
server=

sync
timed site "$mpistat" site-report --config "$work/site.toml" --month 2026-11 --out "$work/site" 2> /dev/null
read -r s m < "$work/site.time"
biggest=$(find "$work/site" -name '*.html' -printf '%s %P\n' | sort -n | tail -1)
echo "site-report --month: $s s, peak RSS $m MiB, $(find "$work/site" -name '*.html' | wc -l) pages, $(du -sh "$work/site" | cut -f1), biggest page ${biggest% *} bytes (${biggest#* })"
timed digest "$mpistat" digest --config "$work/site.toml" --week 2026-W47 --send 2> /dev/null
read -r s m < "$work/digest.time"
echo "digest --week 2026-W47 --send (to files): $s s, peak RSS $m MiB, $(find "$work/mail" -type f | wc -l) mails"
timed rebuild "$mpistat" rebuild-rollups --config "$work/site.toml" 2> /dev/null
read -r s m < "$work/rebuild.time"
echo "rebuild-rollups: $s s, peak RSS $m MiB; whole run $(printf '%.0f' "$(echo "$(date +%s.%N) - $start" | bc)") s"
