#!/usr/bin/env bash
# Makes profiler/trace.ld's list again: the functions of the profiler that trace mode runs in its
# steady state (after MPI_Init's last release of the library's pages, before MPI_Finalize), as
# callgrind sees them on both ranks of tests/programs/footprint.c traced, in both families'
# builds, less those another script already places (.text.hot, .text.warm: hot.ld;
# .text.finalize: finalize.ld); then, after a comment line, what every mode runs at the end of
# MPI_Init (after the real one returns, before its release: its second profile part, counting)
# that no script places. Symbol hashes and crate disambiguators become wildcards, so the list
# survives rebuilds. Needs the release build and valgrind; prints the list, one pattern a line:
#
#     bench/trace-sections.sh > /tmp/list   # then replace the list in profiler/trace.ld
#
# trace.ld splits the list by hand: what a traced loop runs in every superstep or spill in
# `.text.trace`, the rest (run once: the spill file's opening, a new call site's tables) in
# `.text.once`; what the end of MPI_Init runs goes with its set-up in `.text.init` (finalize.ld's
# rules, which place it first: mpi_init_ends_with_two_chunks_of_our_code checks it);
# bench/trace-walk.sh shows a function in the wrong one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/target/release/libmpistat.so
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
trace_setup trace-sections
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Part 1, 2, ... of a rank's profile end at each release; the part dumped before
# `before_finalize` is the steady state.
callgrind=(valgrind --tool=callgrind --demangle=no '--dump-after=*release_init_pages*'
    '--dump-before=*before_finalize*')
for family in openmpi mpich; do
    "mpicc.$family" -O2 -o "$work/fp.$family" "$root/tests/programs/footprint.c"
    for trace in 0 1; do
        out=$work/$family.$trace
        mkdir -p "$out"
        footprint_run "$family" "$trace" "$lib" -- "${callgrind[@]}" \
            "--callgrind-out-file=$out/cg.%p" "$work/fp.$family" >/dev/null 2>&1
    done
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

def functions(family, trace, part):
    """The library's functions in each rank's profile part that `part` (the header) picks, by
    callgrind_annotate."""
    names = []
    for path in glob.glob(f'{work}/{family}.{trace}/cg.*.*'):
        if not part(path, open(path, errors='replace').read(4096)):
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

def steady(path, header):
    return re.search(r'^desc: Trigger: --dump-before=\S*before_finalize', header, re.M)

def init_end(path, header):
    return path.endswith('.2')

out, init = [], []
for family in ('openmpi', 'mpich'):
    elsewhere = placed(family)
    for to, trace, part in ((out, 1, steady), (init, 0, init_end)):
        for name in functions(family, trace, part):
            p = pattern(name)
            # The MPI_Finalize wrapper is finalize.ld's.
            if name not in elsewhere and p not in out + init and '_MPI_Finalize17h' not in p:
                to.append(p)
print('\n'.join(sorted(out)))
print("# the end of MPI_Init (general_MPI_Init's, after the real MPI_Init)")
print('\n'.join(sorted(init)))
PY
