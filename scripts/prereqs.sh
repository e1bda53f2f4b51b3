#!/usr/bin/env bash
# Installs what building, testing and demonstrating mpistat needs on Debian 12, and finds cargo.
#
# Sourced by scripts/test.sh, scripts/demo.sh and bench/run.sh (so that the PATH fix-up for
# ~/.cargo/bin reaches them) or run on its own. Idempotent: when every package is already
# installed, apt is not touched at all, so repeated runs cost a fraction of a second.
#
# After it, MPISTAT_HAVE_FMT and MPISTAT_HAVE_CLIPPY are 1 or 0.

# Debian packages: Open MPI (runtime, headers, wrappers), gfortran for the Fortran demo and tests,
# rsyslog for the private syslog daemon of the demo and e2e tests, rsyslog-relp and openssl for
# the relay test (a compute node's rsyslogd forwarding over RELP with TLS to a log host's, with
# certificates made by openssl), hpcc as a real-world MPI program, libclang/clang for bindgen (profiler/build.rs reads mpi.h), pkg-config, python3 (bench
# table, syslog sink), procps (pgrep/ps in tests), python3-aiosmtpd (the real SMTP server of the
# mail tests), chromium, chromium-driver and fonts-dejavu-core (one headless Chromium, driven by
# chromedriver, renders every admin page in the site-report test), time (peak memory in
# bench/site_report.sh), binutils (addr2line, readelf: `mpistat analyze` turns call sites into
# source lines), mpich and libmpich-dev (the MPICH family beside Open MPI, without changing the
# default MPI: mpicc.mpich, mpifort.mpich, mpiexec.mpich; libmpistat_mpich.so is built against
# its mpi.h and every e2e test of `for_each_mpi!` runs under it), curl (the
# serve tests connect as another user, also through a Unix socket), python3-mpi4py (an mpi4py
# job in the application test), slurmctld, slurmd, slurm-client and munge (the e2e tests run a
# private Slurm cluster of one node, tests/src/slurm.rs; the system's own daemons stay stopped
# and disabled), valgrind (bench/instructions.sh counts a wrapper's instructions with callgrind),
# postfix (the mail tests deliver through the host's real Postfix by sendmail and SMTP; installed
# "Local only", left stopped and disabled: the tests start it and stop it).
# logrotate and environment-modules (what the packages of scripts/package.sh depend on and the
# package test, tests/tests/deploy/package.rs, runs: `logrotate -f` with the installed rule, and
# `module load mpistat` with the installed modulefile; adduser and dpkg are in every Debian).
# prometheus (2.42: the metrics test, tests/tests/site/metrics.rs, starts a private Prometheus that
# scrapes `mpistat serve`'s /metrics and asks it PromQL; `promtool check metrics` validates the
# exposition; its system service stays stopped and disabled).
MPISTAT_APT_PACKAGES=(
    openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran rsyslog rsyslog-relp openssl hpcc
    libclang-dev clang pkg-config python3 procps
    gcc make python3-aiosmtpd chromium chromium-driver fonts-dejavu-core time binutils
    curl python3-mpi4py slurmctld slurmd slurm-client munge valgrind postfix
    logrotate environment-modules prometheus
    # OTF2 (crate mpistat-otf2): libotf2 and its headers to build against, otf2-print and
    # Python's otf2 for the tests that read and write archives with the reference tools.
    libopen-trace-format2-dev otf2-tools python3-otf2
    # PostgreSQL 15 (issue 35: the store's second backend): the tests run their own server
    # (initdb and pg_ctl as an unprivileged user on a Unix socket, tests/src/postgresql.rs) and
    # psql; the system's own service is left stopped and disabled.
    postgresql
)

# Packages whose daemons the tests run privately: installed here, their system services are
# disabled (and stopped) so that nothing of Slurm, Prometheus or PostgreSQL runs or starts at
# boot on a test machine.
MPISTAT_QUIET_SERVICES=(munge slurmctld slurmd prometheus postgresql)

mpistat_note() { printf 'prereqs: %s\n' "$*" >&2; }

# Runs a command as root: directly when we are root, else through sudo.
mpistat_as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        mpistat_note "need root (or sudo) to run: $*"
        return 1
    fi
}

# Prints the packages of "$@" that are not installed.
mpistat_missing_packages() {
    local p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
            printf '%s\n' "$p"
        fi
    done
}

mpistat_apt_install() {
    local missing
    mapfile -t missing < <(mpistat_missing_packages "$@")
    if [[ ${#missing[@]} -eq 0 ]]; then
        return 0
    fi
    mpistat_note "installing: ${missing[*]}"
    # Installing rsyslog, munge or Slurm must not start the system's daemons (the demo and tests
    # run private ones): a temporary policy-rc.d tells invoke-rc.d not to start services. Only
    # when the machine has none of its own, and removed again whatever apt does.
    local policy=/usr/sbin/policy-rc.d placed=0 rc=0
    if [[ ! -e $policy ]]; then
        if mpistat_as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"; then
            placed=1
        fi
    fi
    mpistat_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || rc=$?
    if [[ " ${missing[*]} " == *" postfix "* ]]; then
        # Asked otherwise (noninteractive takes the default, "Internet Site").
        echo "postfix postfix/main_mailer_type select Local only" |
            mpistat_as_root debconf-set-selections || rc=$?
    fi
    if [[ $rc -eq 0 ]]; then
        mpistat_as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null || rc=$?
    fi
    if [[ $placed -eq 1 ]]; then
        mpistat_as_root rm -f "$policy"
    fi
    mpistat_quiet_services "${missing[@]}"
    if [[ " ${missing[*]} " == *" postfix "* ]]; then
        mpistat_quiet_postfix
    fi
    return "$rc"
}

# Postfix just installed: stopped if it runs, and disabled for the next boot, with or without a
# running systemd (systemctl disable works offline; the package enables its unit either way).
mpistat_quiet_postfix() {
    [[ -x /usr/sbin/postfix ]] || return 0
    if [[ -d /run/systemd/system ]]; then
        mpistat_as_root systemctl disable --now postfix.service >/dev/null 2>&1 || true
    elif command -v systemctl >/dev/null 2>&1; then
        mpistat_as_root systemctl disable postfix.service >/dev/null 2>&1 || true
    fi
    if mpistat_as_root /usr/sbin/postfix status >/dev/null 2>&1; then
        mpistat_as_root /usr/sbin/postfix stop >/dev/null 2>&1 || true
    fi
}

# Open MPI stays the system's MPI (mpicc, mpifort, mpirun, mpi.h through the `mpi` and `mpirun`
# alternatives: the profiler is built against it) with MPICH installed beside it. Debian ranks
# Open MPI first on amd64, but a manual choice or another architecture may not: pin it when the
# alternatives point elsewhere.
mpistat_keep_open_mpi_default() {
    local group target
    for group in mpi mpirun; do
        target=/usr/bin/mpicc.openmpi
        [[ $group == mpirun ]] && target=/usr/bin/mpirun.openmpi
        [[ -x $target ]] || continue
        if [[ $(readlink -f "/etc/alternatives/$group" 2>/dev/null) != "$(readlink -f "$target")" ]]; then
            mpistat_note "pointing the $group alternative back at Open MPI"
            mpistat_as_root update-alternatives --set "$group" "$target" >/dev/null || return 1
        fi
    done
}

# Of the packages "$@" just installed, those in MPISTAT_QUIET_SERVICES enabled their units for
# the next boot: disable them, and stop any that runs (policy-rc.d may not have been ours to
# place). Without systemd running (containers, CI images) they are only disabled, as
# `systemctl disable` works offline: nothing starts them at the next boot either.
mpistat_quiet_services() {
    command -v systemctl >/dev/null 2>&1 || return 0
    local p s now=
    [[ -d /run/systemd/system ]] && now=--now
    for p in "$@"; do
        for s in "${MPISTAT_QUIET_SERVICES[@]}"; do
            if [[ $p == "$s" ]]; then
                mpistat_as_root systemctl disable $now "$s.service" >/dev/null 2>&1 || true
            fi
        done
    done
}

# The workspace's rust-version (Cargo.toml), e.g. 1.80.
mpistat_rust_version() {
    sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml" | head -n 1
}

# Whether the cargo on PATH is at least the workspace's rust-version.
mpistat_cargo_new_enough() {
    local have want
    have=$(cargo --version 2>/dev/null | awk '{print $2}') || return 1
    [[ -n $have ]] || return 1
    want=$(mpistat_rust_version)
    [[ $(printf '%s\n%s\n' "$want" "${have%%-*}" | sort -V | head -n 1) == "$want" ]]
}

mpistat_prereqs() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        mpistat_note "not a Debian system: install Open MPI, MPICH beside it, gfortran, rsyslog, clang/libclang and a Rust toolchain yourself"
    else
        mpistat_apt_install "${MPISTAT_APT_PACKAGES[@]}" || return 1
        mpistat_keep_open_mpi_default || return 1
    fi

    # rsyslogd lives in /usr/sbin, which is not on every user's PATH; the e2e tests run it by name.
    if ! command -v rsyslogd >/dev/null 2>&1 && [[ -x /usr/sbin/rsyslogd ]]; then
        export PATH="$PATH:/usr/sbin"
    fi

    # cargo: PATH, then rustup's default place, then Debian's packages. Debian 12's own cargo and
    # rustc (1.63) cannot read the workspace's lock file; bookworm-security has a newer toolchain
    # as rustc-web and cargo-web (1.96, installing /usr/bin/rustc and /usr/bin/cargo; they replace
    # Debian's cargo and rustc), with clippy as rust-web-clippy (no rustfmt of that version).
    if ! command -v cargo >/dev/null 2>&1 && [[ -x ${HOME:-/root}/.cargo/bin/cargo ]]; then
        export PATH="${HOME:-/root}/.cargo/bin:$PATH"
    fi
    if ! mpistat_cargo_new_enough; then
        mpistat_note "no cargo of at least Rust $(mpistat_rust_version) found; installing Debian's rustc-web and cargo-web"
        if command -v dpkg-query >/dev/null 2>&1; then
            mpistat_apt_install rustc-web cargo-web rust-web-clippy || return 1
        fi
        hash -r
        if ! mpistat_cargo_new_enough; then
            mpistat_note "WARNING: $(cargo --version 2>/dev/null || echo 'no cargo') is older than this workspace's rust-version ($(mpistat_rust_version)); install rustup's stable toolchain"
        fi
    fi

    # rustfmt and clippy come with rustup's default profile; without network access to the
    # toolchain server they cannot be added, so their checks are skipped with a warning.
    MPISTAT_HAVE_FMT=1
    MPISTAT_HAVE_CLIPPY=1
    if ! cargo fmt --version >/dev/null 2>&1; then
        MPISTAT_HAVE_FMT=0
        mpistat_note "WARNING: rustfmt is missing (rustup component add rustfmt); format check will be skipped"
    fi
    if ! cargo clippy --version >/dev/null 2>&1; then
        MPISTAT_HAVE_CLIPPY=0
        mpistat_note "WARNING: clippy is missing (rustup component add clippy); lint check will be skipped"
    fi
    export MPISTAT_HAVE_FMT MPISTAT_HAVE_CLIPPY
}

# Sourced: define and run, leaving the caller's shell options alone. Run: strict mode and exit.
if [[ ${BASH_SOURCE[0]} != "$0" ]]; then
    mpistat_prereqs
else
    set -euo pipefail
    mpistat_prereqs
    mpistat_note "ok ($(cargo --version))"
fi
