#!/usr/bin/env bash
# The mpistat demo: builds libmpistat.so, runs three small MPI programs under it with a private
# syslog daemon, as root and as user nobody, and shows what a site gets (the syslog lines,
# `mpistat show`, the database and the weekly mails of both users) and what a user gets when they
# ask for it (MPISTAT_DETAIL). Leaves the machine's own syslog alone.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD

# Bold narration on a terminal, plain text in logs.
if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
say() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }

say "Checking prerequisites (Open MPI, gfortran, rsyslog, Rust)"
# shellcheck source=scripts/prereqs.sh
source scripts/prereqs.sh

say "Building libmpistat.so (the front), libmpistat_openmpi.so, libmpistat_mpich.so and the mpistat command (cargo build --release)"
cargo build --release -p mpistat-front -p mpistat-profiler -p mpistat-profiler-mpich -p mpistat-digest
lib=$repo/target/release/libmpistat.so
mpistat=$repo/target/release/mpistat

work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-demo.XXXXXX")
rsyslog_pid=
cleanup() {
    if [[ -n $rsyslog_pid ]]; then
        kill "$rsyslog_pid" 2>/dev/null || true
        wait "$rsyslog_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

say "Compiling the sample programs in scripts/demo/ with mpicc and mpifort"
mpicc -O2 -Wall -Wextra -o "$work/ring" scripts/demo/ring.c -lm
mpicc -O2 -Wall -Wextra -o "$work/unbalanced" scripts/demo/unbalanced.c
mpifort -O2 -Wall -o "$work/heat" scripts/demo/heat.f90
echo "ring (C, halo exchange + Allreduce), unbalanced (C, load imbalance), heat (Fortran)"

say "Starting a private rsyslogd on $work/log.sock (facility local5 -> $work/mpistat.log)"
# Only our socket (the system's /dev/log stays with the system's daemon), the line format a site
# logs (etc/rsyslog.d/mpistat.conf: with the sender's kernel-attested uid), and nothing but local5.
cat >"$work/rsyslog.conf" <<EOF
global(workDirectory="$work")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="$work/log.sock" CreatePath="on" ParseTrusted="on" Annotate="on")
template(name="raw" type="string" string="%TIMESTAMP:::date-rfc3339% %HOSTNAME% uid=%\$!uid% pid=%\$!pid% %syslogtag%%msg%\\n")
local5.* action(type="omfile" file="$work/mpistat.log" template="raw")
EOF
# /usr/sbin is not on every user's PATH.
rsyslogd=$(command -v rsyslogd || echo /usr/sbin/rsyslogd)
"$rsyslogd" -n -f "$work/rsyslog.conf" -i "$work/rsyslogd.pid" &
rsyslog_pid=$!
for _ in $(seq 100); do [[ -S $work/log.sock ]] && break; sleep 0.1; done
[[ -S $work/log.sock ]] || { echo "rsyslogd did not create its socket" >&2; exit 1; }

say "Writing the site configuration (MPISTAT_CONFIG) that points the profiler at it"
cat >"$work/site.toml" <<EOF
[syslog]
socket = "$work/log.sock"
facility = "local5"
EOF
cat "$work/site.toml"

# What a site does once, in the module file or Slurm prolog: preload the profiler into every
# rank. Oversubscribing 4 ranks on a small machine needs yield_when_idle, or ranks spin.
export OMPI_MCA_mpi_yield_when_idle=1
unset MPISTAT_DETAIL
mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe -np 4
    -x "LD_PRELOAD=$lib" -x "MPISTAT_CONFIG=$work/site.toml")

# Records complete in the log: lines that are the last part (i = n-1 of "MPISTAT2 key i/n ...").
complete_records() {
    awk '{ for (f = 1; f < NF - 1; f++) if ($f ~ /^MPISTAT[0-9]+$/) {
               split($(f + 2), p, "/"); if (p[1] == p[2] - 1) n++; break } }
         END { print n + 0 }' "$work/mpistat.log" 2>/dev/null || echo 0
}

# Waits until the log holds $1 complete records (rsyslogd writes asynchronously).
wait_records() {
    local want=$1 have=0
    for _ in $(seq 50); do
        have=$(complete_records)
        [[ $have -ge $want ]] && return 0
        sleep 0.1
    done
    echo "warning: expected $want records in the log, found $have" >&2
}

njobs=0
for prog in ring unbalanced heat; do
    say "Running $prog on 4 ranks: ${mpirun_cmd[*]} $prog"
    echo "(the user sees only the program's own output: the profiler prints nothing)"
    "${mpirun_cmd[@]}" "$work/$prog" </dev/null
    njobs=$((njobs + 1))
    wait_records "$njobs"
done

# A second user: nobody needs to reach the programs, the library, the site configuration and the
# socket (all in $work, which only root could enter so far; the repository may be private too).
chmod 755 "$work"
# The front loads the implementation from its own directory: copy both.
cp "$lib" "$work/libmpistat.so"
cp "${lib%/*}/libmpistat_openmpi.so" "$work/libmpistat_openmpi.so"
chmod 644 "$work/site.toml" "$work/libmpistat.so" "$work/libmpistat_openmpi.so"
mkdir "$work/nobody"
chown nobody:nogroup "$work/nobody"
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups
    env HOME="$work/nobody" TMPDIR="$work/nobody")
nobody_mpirun=(mpirun --oversubscribe -np 4
    -x "LD_PRELOAD=$work/libmpistat.so" -x "MPISTAT_CONFIG=$work/site.toml")
for prog in unbalanced ring; do
    say "Running $prog as user nobody: ${as_nobody[*]} ${nobody_mpirun[*]} $prog"
    (cd "$work/nobody" && "${as_nobody[@]}" "${nobody_mpirun[@]}" "$work/$prog" </dev/null)
    njobs=$((njobs + 1))
    wait_records "$njobs"
done

if [[ ! -s $work/mpistat.log ]]; then
    echo "error: no record reached the private syslog ($work/mpistat.log is empty)" >&2
    exit 1
fi

say "What reached syslog: $(wc -l <"$work/mpistat.log") lines for $njobs jobs; the first few (cut at 160 characters)"
head -n 6 "$work/mpistat.log" | cut -c 1-160

say "mpistat show $work/mpistat.log"
"$mpistat" show "$work/mpistat.log"

say "mpistat show --json $work/mpistat.log (one JSON object per job and line; the first, pretty-printed and cut)"
"$mpistat" show --json "$work/mpistat.log" >"$work/records.jsonl"
# Through a file: `head` closing a pipe early would fail the script under pipefail.
head -n 1 "$work/records.jsonl" | python3 -m json.tool >"$work/first.json"
head -n 40 "$work/first.json"
echo "... ($(wc -l <"$work/records.jsonl") records, $(wc -c <"$work/records.jsonl") bytes of JSON in all)"

say "A user who opts in: MPISTAT_DETAIL=stderr mpirun ... unbalanced"
"${mpirun_cmd[@]}" -x MPISTAT_DETAIL=stderr "$work/unbalanced" </dev/null

say "A forger: user nobody replays the lines of the first record (it claims uid $(id -u)) into syslog"
first_key=$(grep -o -m 1 -E 'MPISTAT[0-9]+ [0-9a-f]+' "$work/mpistat.log" | cut -d ' ' -f 2)
# (--size: record lines are up to 7680 bytes; logger cuts at 1 KiB unless told.)
grep -E "MPISTAT[0-9]+ $first_key " "$work/mpistat.log" | sed 's/.* mpistat: //' | while IFS= read -r message; do
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
        logger --size 8192 -u "$work/log.sock" -p local5.info -t mpistat -- "$message"
done
sleep 0.5

say "mpistat ingest --report: jobs into a database ($work/mpistat.db), the forgery rejected"
cat >>"$work/site.toml" <<EOF
[database]
path = "$work/mpistat.db"

[mail]
transport = "directory"
directory = "$work/mail"
EOF
"$mpistat" ingest --config "$work/site.toml" --report "$work/mpistat.log"

week=$(date -u +%G-W%V)
say "mpistat digest --week $week --send: one mail per user, written to $work/mail (transport directory)"
"$mpistat" digest --config "$work/site.toml" --week "$week" --send
ls "$work/mail"
say "The level-1 lines of the mails of both users (mpistat digest --dry-run prints their text parts)"
"$mpistat" digest --config "$work/site.toml" --week "$week" --dry-run >"$work/mails.txt"
awk '/^To: / { print; print "" } / you +site:/ { show = 1 } /^MPI routines/ { show = 0 }
     show { print }' "$work/mails.txt"

say "Done. The private rsyslogd is stopped and $work removed on exit."
