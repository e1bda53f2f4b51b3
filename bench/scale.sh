#!/usr/bin/env bash
# The store at site scale (issues 16, 35 §3): generates N varied jobs (default 100,000) of U users
# (default 500) ending over November 2026, in parts of 200,000 (generate, ingest, delete), into
# the database given (an SQLite file, default; a PostgreSQL URL; or a PostgreSQL server of its
# own), then times every page of `mpistat serve` (cold: first request after a restart of serve,
# and of the PostgreSQL server when it is the script's own, with the page cache dropped when
# this may; warm: p50/p95 of R requests), 50 concurrent requests while another part is ingested
# (errors, times, and whether the pages then show every committed job), `mpistat site-report
# --month` (time, size, peak RSS), `mpistat digest --send` of a week to mail files for all users
# (time, peak RSS) and `mpistat rebuild-rollups`. Prints Markdown tables (each number with the
# load average when it was taken: the machine is shared) and a summary per backend; asserts
# nothing. Each part's ingest is printed as it ends (jobs stored before it, seconds, jobs/s,
# peak RSS, database size: throughput over the database's growth); the next part is generated
# meanwhile. With --concurrent K, every other part is split into K logs ingested by K processes
# at once (K log hosts, each with its own read positions), so that one run measures one
# process and K at once at every size of the database.
# Also times `GET /metrics` (issue 39): cold (as the pages), the first scrape after a restart
# (every name of the week added up, page cache warm) and warm (p50/p95: the names kept), its
# size and series. Its windows end at the current hour: the generated month's jobs are in them
# while the machine's clock is in November 2026 (the line says how many jobs the week had).
# Usage: bench/scale.sh [--database PATH|URL | --postgresql] [--concurrent K] [N [U]]
#        bench/scale.sh --small (CI: 3,000 jobs on SQLite in parts of 1,000, the second by
#        three processes at once, seconds)
# --database: a new SQLite file (refused if it exists) or an empty PostgreSQL database
# (`postgresql://ROLE@/DB?host=SOCKETDIR`), kept afterwards; default: a file in the work
# directory. --postgresql: initdb and pg_ctl (Debian's postgresql-15, as tests/src/postgresql.rs)
# in the work directory as MPISTAT_SCALE_PG_USER (default nobody), a Unix socket only, tuned by
# `pg_settings` below; this user's role owns database `mpistat`; all of it removed at the end.
# MPISTAT_SCALE_BIN=DIR: run DIR/mpistat and DIR/gen_records instead of building them (a long
# run that goes on while the worktree is rebuilt); MPISTAT_SCALE_INGEST_ONLY=1: stop after the
# ingest of all but the last part; MPISTAT_SCALE_METRICS_ONLY=1: ingest every part, then time
# /metrics only; MPISTAT_SCALE_JOBS=FIRST..END (with it): ingest only the month's jobs FIRST..END
# (jobs end in the order of their number: the windows' jobs of a month of N, in less time).
# MPISTAT_SCALE_PAGES_ONLY=1 (with --database): ingest nothing, time the pages and /metrics of
# the database as it is (one filled by an earlier MPISTAT_SCALE_INGEST_ONLY run, kept);
# MPISTAT_SCALE_PG_DATA=DIR: the data directory of that database's server, restarted (as its
# owner) before each cold page as the script's own is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh
# shellcheck source=bench/lib.sh
source bench/lib.sh
usage="usage: bench/scale.sh [--database PATH|URL | --postgresql] [--concurrent K] [N [U]] | bench/scale.sh --small"
repeats=20 records=100000 users=500 database= own_postgresql= concurrent= part=200000
positional=()
while (($#)); do
    case $1 in
        --small) records=3000 users=50 repeats=3 part=1000 concurrent=${concurrent:-3} ;;
        --database) database=${2:?$usage}; shift ;;
        --postgresql) own_postgresql=1 ;;
        --concurrent) concurrent=${2:?$usage}; shift ;;
        -*) echo "$usage" >&2; exit 2 ;;
        *) positional+=("$1") ;;
    esac
    shift
done
records=${positional[0]:-$records}
users=${positional[1]:-$users}
concurrent=${concurrent:-1}
if [[ -n $database && -n $own_postgresql ]] || ! [[ $concurrent =~ ^[1-9][0-9]*$ ]]; then
    echo "$usage" >&2
    exit 2
fi
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

# PostgreSQL of the script's own (--postgresql). The settings a site would make for a host of
# this size (24 GB) whose main work is the database (the defaults are for a 128 MB machine);
# fsync and synchronous commits stay on, as on a site.
pg_bin=/usr/lib/postgresql/15/bin
pg_user=${MPISTAT_SCALE_PG_USER:-nobody}
pg_settings=(
    "shared_buffers = '2GB'"
    "effective_cache_size = '8GB'"
    "work_mem = '32MB'"
    "maintenance_work_mem = '512MB'"
    "max_wal_size = '8GB'"
    "checkpoint_timeout = '15min'"
)
pg_data=${MPISTAT_SCALE_PG_DATA:-}
pg_ctl() { # pg_ctl ARGS...: the script's own server's (or MPISTAT_SCALE_PG_DATA's) pg_ctl, as its owner
    local data=${pg_data:-$work/postgres/data}
    (cd "$(dirname "$data")" && runuser -u "$(stat -c %U "$data")" -- "$pg_bin/pg_ctl" -D "$data" "$@" > /dev/null)
}
start_postgresql() { # initdb, settings, start, and database `mpistat` of this user's role
    chmod 711 "$work"
    mkdir "$work/postgres"
    chown "$pg_user" "$work/postgres"
    (cd "$work/postgres" && runuser -u "$pg_user" -- "$pg_bin/initdb" --auth=peer --encoding=UTF8 \
        --locale=C -D "$work/postgres/data" > "$work/postgres/initdb.log")
    {
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$work/postgres'"
        printf '%s\n' "${pg_settings[@]}"
    } >> "$work/postgres/data/postgresql.conf"
    pg_ctl start -w -t 120 -l "$work/postgres/server.log"
    local role
    role=$(id -un)
    (cd "$work/postgres" && runuser -u "$pg_user" -- psql -X -q -h "$work/postgres" -d postgres \
        -c "CREATE ROLE \"$role\" LOGIN" -c "CREATE DATABASE mpistat OWNER \"$role\"")
    database="postgresql://$role@/mpistat?host=$work/postgres"
}

cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null || true
    [[ -z $own_postgresql || ! -d $work/postgres/data ]] || pg_ctl stop -w -m fast || true
    rm -rf "$work"
}
trap cleanup EXIT
if [[ -n $own_postgresql ]]; then
    start_postgresql
fi
database=${database:-$work/mpistat.db}
if is_database_url "$database"; then
    backend=postgresql
else
    backend=sqlite
    if [[ -e $database && -z ${MPISTAT_SCALE_PAGES_ONLY:-} ]]; then
        echo "scale.sh: $database exists: the benchmark fills a new database" >&2
        exit 2
    fi
fi
sql() { # sql QUERY: its rows, one a line
    if [[ $backend == sqlite ]]; then
        sqlite3 "$database" "$1"
    else
        psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$database" -c "$1"
    fi
}
database_bytes() {
    if [[ $backend == sqlite ]]; then
        local bytes=0 file
        for file in "$database" "$database-wal"; do
            [[ ! -e $file ]] || bytes=$((bytes + $(stat -c %s "$file")))
        done
        echo "$bytes"
    else
        sql 'SELECT pg_database_size(current_database())'
    fi
}
tables_mib() { # tables_mib TABLE...: their size with their indexes
    local names
    names=$(printf ",'%s'" "$@")
    if [[ $backend == sqlite ]]; then
        sql "SELECT sum(pgsize) / 1048576 FROM dbstat WHERE name IN (${names:1})"
    else
        sql "SELECT (sum(pg_total_relation_size(t::regclass)) / 1048576)::bigint FROM unnest(ARRAY[${names:1}]) t"
    fi
}
largest_tables() { # the five largest tables (with their indexes) in MiB, "name size, ..."
    if [[ $backend == sqlite ]]; then
        sql "SELECT group_concat(t || ' ' || mib, ', ') FROM (SELECT coalesce(m.tbl_name, d.name) t,
            round(sum(pgsize) / 1048576.0, 1) mib FROM dbstat d LEFT JOIN sqlite_master m ON m.name = d.name
            GROUP BY t ORDER BY mib DESC LIMIT 5)"
    else
        sql "SELECT string_agg(relname || ' ' || mib, ', ') FROM (SELECT relname,
            round(pg_total_relation_size(oid) / 1048576.0, 1) mib FROM pg_class WHERE relkind = 'r'
            AND relnamespace = 'public'::regnamespace ORDER BY mib DESC LIMIT 5) t"
    fi
}
load() { cut -d' ' -f1 /proc/loadavg; }
mib() { echo "$(($1 / 1048576)) MiB"; }

mpistat=$bin/mpistat
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The server trusts a header on loopback: a benchmark, not a site set-up.
{
    site_toml "$work" "$database"
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
processes_of() { # processes_of FIRST: how many ingest processes take the part from job FIRST
    if ((concurrent > 1 && $1 / part % 2 == 1)); then echo "$concurrent"; else echo 1; fi
}
generate() { # generate FIRST END K: the month's jobs FIRST..END in K logs $work/partFIRST.I.log
    local i
    for ((i = 0; i < $3; i++)); do
        "$gen" "$records" "$users" "$work/part$1.$i.log" varied \
            "$(($1 + ($2 - $1) * i / $3))" "$(($1 + ($2 - $1) * (i + 1) / $3))"
    done
}
ingest_part() { # ingest_part FIRST K: K processes at once, one log each; the wall time in $work/wall
    local i pids=() started
    started=$(date +%s.%N)
    for ((i = 0; i < $2; i++)); do
        timed "ingest$i" "$mpistat" ingest --config "$work/site.toml" "$work/part$1.$i.log" 2> "$work/ingest$i.err" &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[i]}" || { cat "$work/ingest$i.err" >&2; exit 1; }
    done
    echo "$(date +%s.%N) - $started" | bc > "$work/wall"
    rm -f "$work/part$1".*.log
}

# The month, in parts (the last one is kept for the concurrency run), each generated while
# the one before it is ingested.
start=$(date +%s.%N)
declare -A ingested=() ingest_wall=() ingest_peak=() rates=()
last=$(( records > part ? (records - 1) / part * part : records * 9 / 10 ))
from=0
if [[ -n ${MPISTAT_SCALE_METRICS_ONLY:-} ]]; then
    last=$records
    jobs=${MPISTAT_SCALE_JOBS:-0..$records}
    from=${jobs%..*} last=${jobs#*..}
fi
if [[ -n ${MPISTAT_SCALE_PAGES_ONLY:-} ]]; then
    from=$last
else
    generate "$from" "$((from + part < last ? from + part : last))" "$(processes_of "$from")"
fi
for ((first = from; first < last; first += part)); do
    end=$((first + part < last ? first + part : last))
    k=$(processes_of "$first")
    next=
    if ((end < last)); then
        generate "$end" "$((end + part < last ? end + part : last))" "$(processes_of "$end")" &
        next=$!
    fi
    ingest_part "$first" "$k"
    wall=$(cat "$work/wall")
    peak=0 each=
    for ((i = 0; i < k; i++)); do
        read -r s m < "$work/ingest$i.time"
        peak=$((m > peak ? m : peak))
        each+=" $(echo "($end - $first) / $k / $s" | bc)"
    done
    ingested[$k]=$(( ${ingested[$k]:-0} + end - first ))
    ingest_wall[$k]=$(echo "${ingest_wall[$k]:-0} + $wall" | bc)
    ingest_peak[$k]=$((peak > ${ingest_peak[$k]:-0} ? peak : ${ingest_peak[$k]:-0}))
    rates[$k]+=$each
    printf 'ingest part: %9d jobs stored before, %7d jobs by %d at once in %7.1f s: %6.0f jobs/s (each:%s), peak RSS %5d MiB, database %s, load %s\n' \
        "$((first - from))" "$((end - first))" "$k" "$wall" "$(echo "($end - $first) / $wall" | bc -l)" "$each" \
        "$peak" "$(mib "$(database_bytes)")" "$(load)"
    [[ -z $next ]] || wait "$next"
done
stored=$(sql 'SELECT count(*) FROM jobs')
summary=("| $backend: $records jobs of $users users in 2026-11 | |" "| --- | --- |")
for k in $(printf '%s\n' "${!ingested[@]}" | sort -n); do
    read -r slowest fastest < <(tr ' ' '\n' <<< "${rates[$k]}" | sed '/^$/d' | sort -n | sed -n '1p;$p' | paste -sd' ')
    summary+=("| ingest, $k at once (with rollups) | ${ingested[$k]} jobs in $(printf '%.1f' "${ingest_wall[$k]}") s: $(echo "${ingested[$k]} / ${ingest_wall[$k]}" | bc) jobs/s in all, $slowest-${fastest:-$slowest} jobs/s a process; peak RSS ${ingest_peak[$k]} MiB a process |")
done
bytes=$(database_bytes)
summary+=("| disk | $(mib "$bytes") for $stored jobs: $((bytes / (stored > 0 ? stored : 1))) bytes a job; largest tables with their indexes (MiB): $(largest_tables) |")
printf '%s\n' "${summary[@]:2}"
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
stop_server() {
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
}
start_cold_server() { # serve with nothing of the database in memory that a restart can drop
    [[ -z $own_postgresql && -z $pg_data ]] || pg_ctl restart -w -t 120 -m fast
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then echo 1 > /proc/sys/vm/drop_caches; fi
    start_server
}
get() { # get PATH: prints "seconds bytes status"
    curl -s -o /dev/null -H 'REMOTE_USER: admin' -w '%{time_total} %{size_download} %{http_code}\n' \
        "http://127.0.0.1:$port/$1"
}
percentile() { # percentile P < numbers
    sort -n | awk -v p="$1" '{v[NR] = $1} END {i = int((NR - 1) * p / 100) + 1; print v[i]}'
}
metrics_line() { # /metrics: cold, first scrape of an hour, warm p50/p95, size, series
    start_cold_server
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
    printf '/metrics (%s jobs in the 7d window, %s series): cold %.3f s, first after a restart %.3f s, warm p50 %.4f s, p95 %.4f s, %s bytes, load %s\n' \
        "$week" "$series" "$cold" "$first" "$(cut -d' ' -f1 < "$work/warm" | percentile 50)" \
        "$(cut -d' ' -f1 < "$work/warm" | percentile 95)" "$size" "$(load)"
    printf 'hour rollups: %s rows of rollup_hour_groups, %s MiB with rollup_hours\n' \
        "$(sql 'SELECT count(*) FROM rollup_hour_groups')" "$(tables_mib rollup_hours rollup_hour_groups)"
}
if [[ -n ${MPISTAT_SCALE_METRICS_ONLY:-} ]]; then
    metrics_line
    exit 0
fi
month='period=2026-11'
# A job as the live pages link it (with its end time), and as an old link without it.
job=$(sql "SELECT key || '.html?end=' || end_ms FROM jobs LIMIT 1 OFFSET 12345 % (SELECT count(*) FROM jobs)")
pages=(
    "index.html?$month" "charts.html?$month" "tables.html?$month" "critical.html?$month"
    "critical.html?$month&sort=end&from=1000" "users.html?$month" "users.html?$month&sort=mpi&from=100"
    "users/user7.html?$month" "users/user7.html?$month&sort=cpu&from=100" "users/user$((users / 2)).html?$month"
    "search.html?$month&q=user1" "search.html?$month&q=1234" "jobs/$job" "jobs/${job%%\?*}"
    "index.html?period=2026-W47" "users.html?period=2026-11-02..2026-11-08" "metrics"
)
echo
echo "| serve (admin), $backend, month of $records jobs | cold s | p50 s | p95 s | size | load |"
echo "| --- | --- | --- | --- | --- | --- |"
for page in "${pages[@]}"; do
    start_cold_server
    read -r cold size status < <(get "$page")
    for _ in $(seq "$repeats"); do get "$page"; done > "$work/warm"
    stop_server
    p50=$(cut -d' ' -f1 < "$work/warm" | percentile 50)
    p95=$(cut -d' ' -f1 < "$work/warm" | percentile 95)
    bad=$(awk '$3 != 200' "$work/warm" | wc -l)
    [[ $status == 200 && $bad == 0 ]] || size="HTTP $status"
    printf '| `%s` | %.3f | %.3f | %.3f | %s | %s |\n' "${page:0:60}" "$cold" "$p50" "$p95" "$size" "$(load)"
done
metrics_line
[[ -z ${MPISTAT_SCALE_PAGES_ONLY:-} ]] || exit 0

# 50 concurrent requests (of all pages, in rounds) while the last part is ingested.
start_server
before=$(sql 'SELECT count(*) FROM jobs')
generate "$last" "$records" 1
ingest_part "$last" 1 &
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
after=$(sql 'SELECT count(*) FROM jobs')
shown=$(curl -s -H 'REMOTE_USER: admin' "http://127.0.0.1:$port/index.html?$month" |
    sed -n 's|.*<th>analysed jobs</th><td class="n">\([0-9]*\)</td>.*|\1|p')
errors=$(awk '$2 != 200' "$work/concurrent" | wc -l)
stop_server
summary+=("| 50 concurrent requests while ingest stores the last part | $rounds rounds, $((after - before)) jobs stored: $(wc -l < "$work/concurrent") requests, $errors not 200, p50 $(cut -d' ' -f1 < "$work/concurrent" | percentile 50) s, p95 $(cut -d' ' -f1 < "$work/concurrent" | percentile 95) s, max $(cut -d' ' -f1 < "$work/concurrent" | percentile 100) s; then the overview shows $shown of $after jobs (load $(load)) |")
echo
echo "${summary[-1]}"

sync
timed site "$mpistat" site-report --config "$work/site.toml" --month 2026-11 --out "$work/site" 2> /dev/null
read -r s m < "$work/site.time"
biggest=$(find "$work/site" -name '*.html' -printf '%s %P\n' | sort -n | tail -1)
summary+=("| \`site-report --month\` | $s s, peak RSS $m MiB, $(find "$work/site" -name '*.html' | wc -l) pages, $(du -sh "$work/site" | cut -f1), biggest page ${biggest% *} bytes (${biggest#* }) (load $(load)) |")
echo "${summary[-1]}"
rm -rf "$work/site"
timed digest "$mpistat" digest --config "$work/site.toml" --week 2026-W47 --send 2> /dev/null
read -r s m < "$work/digest.time"
summary+=("| \`digest --week 2026-W47 --send\` (to files) | $s s, peak RSS $m MiB, $(find "$work/mail" -type f | wc -l) mails (load $(load)) |")
echo "${summary[-1]}"
timed rebuild "$mpistat" rebuild-rollups --config "$work/site.toml" 2> /dev/null
read -r s m < "$work/rebuild.time"
summary+=("| \`rebuild-rollups\` | $s s, peak RSS $m MiB (load $(load)) |")
echo
printf '%s\n' "${summary[@]}"
echo "whole run $(printf '%.0f' "$(echo "$(date +%s.%N) - $start" | bc)") s"
