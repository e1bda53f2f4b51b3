#!/usr/bin/env bash
# Builds mpistat's Debian packages from this workspace into target/debian/ (docs/deploy.md):
#
#   mpistat          every host: the `mpistat` command, /etc/mpistat/site.toml, rsyslog's
#                    configuration (the attesting socket, the records file, the relay roles)
#   mpistat-node     where jobs run: the front libmpistat.so and each MPI family's profiler in one
#                    directory, the modulefile, Slurm's TaskProlog/TaskEpilog, MPICH's link
#                    profile, mpistat-analyze and mpistat-analyze-mpich
#   mpistat-loghost  where the database is kept: the systemd units, the `mpistat` system user and
#                    its state directory, the logrotate rule for the records file, the Grafana
#                    dashboard of serve's /metrics (docs/metrics.md)
#
# Usage: scripts/package.sh [--no-build]
#   --no-build   package what target/release holds (the package test: it must not race a build)
#
# Only dpkg-deb (and binutils' strip/objdump) are used: no packaging tool beyond dpkg itself.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build=1
for arg in "$@"; do
    case $arg in
    --no-build) build=0 ;;
    *)
        echo "usage: scripts/package.sh [--no-build]" >&2
        exit 2
        ;;
    esac
done

if [[ $build -eq 1 ]]; then
    # shellcheck source=scripts/prereqs.sh
    source "$root/scripts/prereqs.sh"
    cargo build --release -p mpistat-front -p mpistat-profiler -p mpistat-profiler-mpich \
        -p mpistat-digest -p mpistat-analyze-mpi -p mpistat-analyze-mpi-mpich
fi

target=${CARGO_TARGET_DIR:-$root/target}
release=$target/release
out=$target/debian
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$multiarch
[[ -n $version && -n $multiarch ]] || {
    echo "package.sh: cannot tell the version or the multiarch triplet" >&2
    exit 1
}

for f in libmpistat.so libmpistat_openmpi.so libmpistat_mpich.so mpistat mpistat-analyze \
    mpistat-analyze-mpich; do
    [[ -f $release/$f ]] || {
        echo "package.sh: $release/$f is missing (run without --no-build)" >&2
        exit 1
    }
done

# What ships must agree with where it goes: the TaskProlog preloads the front from this path.
prolog_lib=$(sed -n 's/^lib=//p' etc/slurm/mpistat-taskprolog.sh)
if [[ $prolog_lib != "$libdir/libmpistat.so" ]]; then
    echo "package.sh: etc/slurm/mpistat-taskprolog.sh has lib=$prolog_lib, the package installs $libdir/libmpistat.so" >&2
    exit 1
fi

stage=$out/stage
rm -rf "$stage"
mkdir -p "$stage" "$out"

# put SRC DEST MODE: one file into the package tree.
put() { install -D -m "$3" "$1" "$2"; }

# The Debian packages providing the shared libraries the ELF files "$@" need ("libc6, libgcc-s1").
shlibs() {
    local needed lib path pkgs=()
    needed=$(objdump -p "$@" | awk '/NEEDED/ {print $2}' | sort -u)
    for lib in $needed; do
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|64bit|AArch64/ {print $NF; exit}')
        [[ -z $path ]] && path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
        [[ -n $path ]] || continue
        # dpkg knows a file by the path its package has (/lib or /usr/lib: usrmerge).
        pkgs+=("$(dpkg -S "$path" "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)")
    done
    printf '%s\n' "${pkgs[@]}" | grep -v '^$' | sort -u | paste -sd, | sed 's/,/, /g'
}

# make NAME SHLIBS: control file, conffiles, maintainer scripts, then the .deb.
make_deb() {
    local name=$1 deps=$2 tree=$stage/$1
    mkdir -p "$tree/DEBIAN"
    sed -e "s/@VERSION@/$version/g" -e "s/@ARCH@/$arch/g" -e "s/@SHLIBS@/$deps/g" \
        "packaging/$name/control" >"$tree/DEBIAN/control"
    local size
    size=$(du -k -s --exclude=DEBIAN "$tree" | cut -f1)
    echo "Installed-Size: $size" >>"$tree/DEBIAN/control"
    # Every file under /etc is a conffile: dpkg keeps the admin's changes.
    if [[ -d $tree/etc ]]; then
        (cd "$tree" && find etc -type f | sort | sed 's|^|/|') >"$tree/DEBIAN/conffiles"
    fi
    local script
    for script in preinst postinst prerm postrm; do
        if [[ -f packaging/$name/$script ]]; then
            put "packaging/$name/$script" "$tree/DEBIAN/$script" 0755
        fi
    done
    local doc=$tree/usr/share/doc/$name
    put packaging/copyright "$doc/copyright" 0644
    dpkg-deb --root-owner-group -Zxz --build "$tree" "$out/${name}_${version}_$(
        sed -n 's/^Architecture: //p' "$tree/DEBIAN/control"
    ).deb" >/dev/null
}

# mpistat: the command, the configuration, rsyslog.
t=$stage/mpistat
put "$release/mpistat" "$t/usr/bin/mpistat" 0755
strip --strip-unneeded "$t/usr/bin/mpistat"
put etc/site.toml "$t/etc/mpistat/site.toml" 0644
put etc/rsyslog.d/mpistat.conf "$t/etc/rsyslog.d/mpistat.conf" 0644
for role in relay-node relay-loghost; do
    for f in defs.conf route.conf; do
        put "etc/rsyslog/$role/$f" "$t/usr/share/mpistat/rsyslog/$role/$f" 0644
    done
done
for f in README.md ARCHITECTURE.md docs/*.md; do
    put "$f" "$t/usr/share/doc/mpistat/$(basename "$f")" 0644
done
make_deb mpistat "$(shlibs "$t/usr/bin/mpistat")"

# mpistat-node: the library (front and implementations in ONE directory), job-side tools.
t=$stage/mpistat-node
for f in libmpistat.so libmpistat_openmpi.so libmpistat_mpich.so; do
    put "$release/$f" "$t$libdir/$f" 0644
    strip --strip-unneeded "$t$libdir/$f"
done
for f in mpistat-analyze mpistat-analyze-mpich; do
    put "$release/$f" "$t/usr/bin/$f" 0755
    strip --strip-unneeded "$t/usr/bin/$f"
done
put etc/slurm/mpistat-taskprolog.sh "$t/usr/lib/mpistat/slurm/mpistat-taskprolog.sh" 0755
put etc/slurm/mpistat-taskepilog.sh "$t/usr/lib/mpistat/slurm/mpistat-taskepilog.sh" 0755
mkdir -p "$t/usr/share/modules/modulefiles"
sed "s|@LIBDIR@|$libdir|g" packaging/mpistat-node/modulefile \
    >"$t/usr/share/modules/modulefiles/mpistat"
chmod 0644 "$t/usr/share/modules/modulefiles/mpistat"
put packaging/mpistat-node/mpich-link.conf "$t/etc/mpich/mpistat-link.conf" 0644
# The profilers need no MPI library of their own (they use the job's); the analyses do.
make_deb mpistat-node "$(shlibs "$t$libdir"/libmpistat*.so "$t/usr/bin/mpistat-analyze" \
    "$t/usr/bin/mpistat-analyze-mpich" | tr ',' '\n' | grep -v -e libopenmpi -e libmpich |
    paste -sd, | sed 's/^ *//; s/, */, /g')"

# mpistat-loghost: the services and their user.
t=$stage/mpistat-loghost
for f in systemd/*.service systemd/*.timer; do
    put "$f" "$t/lib/systemd/system/$(basename "$f")" 0644
done
# Drop-ins a site adds when it needs them (docs/mail.md: sendmail through Postfix), not active.
for f in systemd/*.service.d/*.conf; do
    put "$f" "$t/usr/share/mpistat/systemd/${f#systemd/}" 0644
done
put packaging/mpistat-loghost/logrotate "$t/etc/logrotate.d/mpistat" 0644
# For the site's Grafana to import or provision (docs/metrics.md), not active.
for f in etc/grafana/*.json; do
    put "$f" "$t/usr/share/mpistat/grafana/$(basename "$f")" 0644
done
make_deb mpistat-loghost ""

rm -rf "$stage"
ls -l "$out"/*.deb
