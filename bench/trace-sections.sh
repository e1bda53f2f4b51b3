#!/usr/bin/env bash
# Makes profiler/trace.ld's list again: the functions of the profiler that trace mode runs in its
# steady state (after MPI_Init's last release of the library's pages, before MPI_Finalize), as
# callgrind sees them on both ranks of tests/programs/footprint.c traced, in both families'
# builds, less those another script already places (.text.hot, .text.warm: hot.ld;
# .text.finalize: finalize.ld). Symbol hashes and crate disambiguators become wildcards, so the
# list survives rebuilds. Needs the release build and valgrind; prints the list, one pattern a
# line:
#
#     bench/trace-sections.sh > /tmp/list   # then replace the list in profiler/trace.ld
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/target/release/libmpistat.so
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
finalize_setup trace-sections
for family in openmpi mpich; do
    printf '[trace]\ndirectory = "%s/traces/{job_id}"\n' "$work" >>"$work/$family.toml"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Part 1, 2, ... of a rank's profile end at each release; the part dumped before
# `before_finalize` is the steady state.
callgrind=(valgrind --tool=callgrind --demangle=no '--dump-after=*release_init_pages*'
    '--dump-before=*before_finalize*')
for family in openmpi mpich; do
    mkdir -p "$work/$family"
    "mpicc.$family" -O2 -o "$work/$family/fp" "$root/tests/programs/footprint.c"
    case $family in
    openmpi)
        mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 -x "LD_PRELOAD=$lib" \
            -x "MPISTAT_CONFIG=$work/openmpi.toml" -x MPISTAT_TRACE=1 "${callgrind[@]}" \
            "--callgrind-out-file=$work/$family/cg.%p" "$work/$family/fp" >/dev/null 2>&1
        ;;
    mpich)
        mpirun.mpich -np 2 -env LD_PRELOAD "$lib" -env MPISTAT_CONFIG "$work/mpich.toml" \
            -env MPISTAT_TRACE 1 "${callgrind[@]}" "--callgrind-out-file=$work/$family/cg.%p" \
            "$work/$family/fp" >/dev/null 2>&1
        ;;
    esac
done
python3 - "$work" "$root/target/release" <<'PY'
import glob, re, subprocess, sys

work, release = sys.argv[1:]

def placed(family):
    """The symbols the library already has in a section of hot.ld or finalize.ld."""
    lib = f'{release}/libmpistat_{family}.so'
    spans = []
    for line in subprocess.run(['readelf', '-SW', lib], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r'\] (\.text\.(?:hot|warm|finalize))\s+\S+\s+([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+)', line)
        if m:
            start = int(m.group(2), 16)
            spans.append((start, start + int(m.group(3), 16)))
    names = set()
    for line in subprocess.run(['nm', '--defined-only', lib], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and any(a <= int(f[0], 16) < b for a, b in spans):
            names.add(f[2])
    return names

def steady(family):
    """The library's functions in each rank's steady part, by callgrind_annotate."""
    names = []
    for path in glob.glob(f'{work}/{family}/cg.*.*'):
        if not re.search(r'^desc: Trigger: --dump-before=\S*before_finalize',
                         open(path, errors='replace').read(4096), re.M):
            continue
        out = subprocess.run(['callgrind_annotate', '--threshold=100', '--inclusive=no', path],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            # "Ir (pct)  file:function [object]"; valgrind names the library the front
            # loaded `???` in some parts.
            m = re.match(r'\s*[\d,]+ \(.*?\)\s+\S*?:(\S+) \[(.*)\]$', line)
            if m and (f'libmpistat_{family}' in m.group(2) or m.group(2) == '???') \
                    and m.group(1).startswith(('_ZN', '_R')) and m.group(1) not in names:
                names.append(m.group(1))
    return names

def pattern(name):
    name = re.sub(r'17h[0-9a-f]{16}E(\.llvm\.\d+)?$', '17h*', name)
    name = re.sub(r'\.llvm\.\d+$', '*', name)
    return re.sub(r'Cs[0-9A-Za-z]+_', 'Cs*_', name)

out = []
for family in ('openmpi', 'mpich'):
    elsewhere = placed(family)
    for name in steady(family):
        p = pattern(name)
        # The MPI_Finalize wrapper is finalize.ld's.
        if name not in elsewhere and p not in out and '_MPI_Finalize17h' not in p:
            out.append(p)
print('\n'.join(out))
PY
