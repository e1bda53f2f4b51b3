# shellcheck shell=bash
# Shared by the benchmarks: source it from the repository's root. site_toml and is_database_url
# serve those that ingest generated records (bench/scale.sh, bench/rebuild.sh); bench_work and
# syslog_sink those that run MPI jobs (bench/run.sh, bench/finalize.sh, bench/instructions.sh).

# site_toml WORK [DATABASE]: the site configuration of a benchmark's database on stdout (append
# more sections after it): DATABASE is an SQLite file's path or a `postgresql://` URL (default:
# WORK/mpistat.db). The generated users are invented (uid 2000.. may be someone else here):
# their names are not checked.
site_toml() {
    local database=${2:-$1/mpistat.db}
    if is_database_url "$database"; then
        printf '[database]\nurl = "%s"\n' "$database"
    else
        printf '[database]\npath = "%s"\n' "$database"
    fi
    cat <<TOML
[escalation]
list = "$1/escalation.list"
[ingest]
check_user_names = false
TOML
}

# is_database_url LOCATION: whether LOCATION names a PostgreSQL database rather than a file.
is_database_url() {
    [[ $1 == postgresql://* || $1 == postgres://* ]]
}

# bench_work NAME: a scratch directory in $work, removed at exit with the syslog sink, if any.
bench_work() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-$1.XXXXXX")
    sink_pid=
    trap bench_cleanup EXIT
}
bench_cleanup() {
    if [[ -n $sink_pid ]]; then
        kill "$sink_pid" 2>/dev/null || true
        wait "$sink_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}

# syslog_sink SOCKET [SIZES]: a syslog socket that drains and discards (with SIZES, appending each
# datagram's size there as a line), so that a preloaded MPI_Finalize pays for a real send, as on a
# site with a running syslogd, without touching the machine's syslog. Returns once it listens.
syslog_sink() {
    python3 - "$@" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
sizes = open(sys.argv[2], "a", buffering=1) if len(sys.argv) > 2 else None
while True:
    size = len(s.recv(65536))
    if sizes:
        sizes.write(f"{size}\n")
PY
    sink_pid=$!
    local _
    for _ in $(seq 50); do [[ -S $1 ]] && return; sleep 0.1; done
    echo "$0: the syslog sink did not start" >&2
    return 1
}

# finalize_setup NAME: for the benchmarks of MPI_Finalize (bench/finalize-*.sh): bench_work NAME
# (or $MPISTAT_KEEP_DIR, kept), a syslog_sink at $work/log.sock, and $work/openmpi.toml and
# $work/mpich.toml sending to it; MPICH's assumes every rank profiled (Hydra has no PMIx to say
# so), as bench/run.sh's does, so that its jobs run the reduction.
finalize_setup() {
    if [[ -n ${MPISTAT_KEEP_DIR:-} ]]; then
        work=$MPISTAT_KEEP_DIR sink_pid=
        mkdir -p "$work"
        rm -f "$work/log.sock"
        trap '[[ -z $sink_pid ]] || kill "$sink_pid"' EXIT
    else
        bench_work "$1"
    fi
    syslog_sink "$work/log.sock"
    printf '[syslog]\nsocket = "%s"\nfacility = "local5"\n' "$work/log.sock" >"$work/openmpi.toml"
    { cat "$work/openmpi.toml"; printf '[profiler]\nassume_all_ranks_profiled = true\n'; } >"$work/mpich.toml"
}

# trace_setup NAME: finalize_setup NAME, and trace mode's directory ($work/traces) in both
# configurations (bench/trace-walk.sh, bench/trace-sections.sh).
trace_setup() {
    finalize_setup "$1"
    local family
    for family in openmpi mpich; do
        printf '[trace]\ndirectory = "%s/traces/{job_id}"\n' "$work" >>"$work/$family.toml"
    done
}

# footprint_run FAMILY TRACE PRELOAD [NAME=VALUE...] -- COMMAND...: COMMAND on 2 ranks of FAMILY
# (openmpi or mpich) with PRELOAD preloaded, $work/FAMILY.toml, MPISTAT_TRACE=TRACE and the
# variables given.
footprint_run() {
    local family=$1 trace=$2 preload=$3 e
    shift 3
    local vars=("LD_PRELOAD=$preload" "MPISTAT_CONFIG=$work/$family.toml" "MPISTAT_TRACE=$trace")
    while [[ $1 != -- ]]; do vars+=("$1"); shift; done
    shift
    local args=()
    for e in "${vars[@]}"; do
        case $family in
        openmpi) args+=(-x "$e") ;;
        mpich) args+=(-env "${e%%=*}" "${e#*=}") ;;
        esac
    done
    case $family in
    openmpi) mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 "${args[@]}" "$@" ;;
    mpich) mpirun.mpich -np 2 "${args[@]}" "$@" ;;
    esac
}

# The other profiling libraries ("peers") of bench/run.sh's and bench/instructions.sh's --with:
# NAME=LIB[,VAR=VALUE...], LIB preloaded with those variables set, split at commas only (a value
# keeps its spaces). "{mpi}" in LIB stands for the MPI family, openmpi or mpich (bench/peers.sh
# builds one for each): such a peer runs under both, any other under Open MPI only.
# peer_check SPEC: stops the benchmark if SPEC is malformed or its library cannot be read.
peer_check() {
    local parts
    [[ $1 =~ ^[A-Za-z0-9_-]+=[^,]+ ]] || { echo "$0: --with NAME=LIB[,VAR=VALUE...]" >&2; exit 2; }
    IFS=, read -r -a parts <<<"${1#*=}"
    [[ -r ${parts[0]//\{mpi\}/openmpi} ]] || { echo "$0: --with ${1%%=*}: cannot read ${parts[0]//\{mpi\}/openmpi}" >&2; exit 2; }
}
# peer_env SPEC FAMILY: the variables of a run under the peer, VAR=VALUE a line, LD_PRELOAD first;
# nothing if the peer has no build for FAMILY.
peer_env() {
    local parts
    IFS=, read -r -a parts <<<"${1#*=}"
    local library=${parts[0]//\{mpi\}/$2}
    [[ $2 == openmpi || $library != "${parts[0]}" ]] && [[ -r $library ]] || return 0
    echo "LD_PRELOAD=$library"
    # No empty line for a peer without variables (env would take it for a command).
    if ((${#parts[@]} > 1)); then printf '%s\n' "${parts[@]:1}"; fi
}
