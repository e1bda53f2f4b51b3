#!/usr/bin/env bash
# What trace mode keeps resident of the profiler in its steady state: runs
# tests/programs/footprint.c on 2 ranks, counting and traced, with bench/finalize_walk.c preloaded
# before the release build's libmpistat.so, and prints per family, mode and rank the 64 KiB
# chunks of the profiler's mappings that have a page present at MPI_Finalize's entry (after the
# loops), with the sections and the largest functions in each, and their number per mapping; and
# each rank's resident kB by kind of mapping (ours and the front's by segment, heap, anonymous,
# other objects' code, read-only and writable data), to set counting against traced.
#
#     bench/trace-walk.sh [openmpi|mpich ...]      (default: both)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/target/release/libmpistat.so
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
trace_setup trace-walk
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gcc -O2 -shared -fPIC -o "$work/walk.so" "$root/bench/finalize_walk.c" -ldl
families=("$@")
[ $# -gt 0 ] || families=(openmpi mpich)
for family in "${families[@]}"; do
    "mpicc.$family" -O2 -o "$work/fp.$family" "$root/tests/programs/footprint.c"
    for trace in 0 1; do
        out=$work/$family.$trace
        mkdir -p "$out"
        footprint_run "$family" "$trace" "$work/walk.so:$lib" "FINALIZE_WALK_DIR=$out" -- \
            "$work/fp.$family" >/dev/null
        python3 - "$out" "$root/target/release/libmpistat_$family.so" "$family $([ "$trace" = 1 ] && echo traced || echo counting)" <<'PY'
import glob, re, subprocess, sys
work, lib, title = sys.argv[1:]
def run(*args):
    return subprocess.run(args, capture_output=True, text=True).stdout.splitlines()
segments, sections, symbols = [], [], []
for line in run('readelf', '-lW', lib):
    f = line.split()
    if f[:1] == ['LOAD']:
        segments.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
for line in run('readelf', '-SW', lib):
    m = re.search(r'\] (\S+)\s+\S+\s+([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+)', line)
    if m and int(m.group(2), 16):
        sections.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1)))
for line in run('nm', '-S', '--defined-only', '-C', lib):
    f = line.split(maxsplit=3)
    if len(f) == 4:
        symbols.append((int(f[0], 16), int(f[1], 16), f[3]))
def address(offset):
    """A file offset's address (a shared object's segments are shifted by offset - vaddr)."""
    for off, vaddr, size in segments:
        if off <= offset < off + size:
            return offset - off + vaddr
    return offset
def contents(chunk):
    names = [n for a, s, n in sections if a < chunk + 0x10000 and chunk < a + s]
    inside = sorted(((s, n) for a, s, n in symbols if chunk <= a < chunk + 0x10000), reverse=True)[:2]
    return ','.join(names) + ': ' + '; '.join(n[:60] for _, n in inside)
def kind(name, perms, offset):
    """What a mapping holds: ours (the implementation, the front) by segment, the rest by kind."""
    base = name.rsplit('/', 1)[-1]
    owner = 'ours ' if base.startswith('libmpistat_') else 'front ' if base == 'libmpistat.so' else ''
    if not owner and name.startswith('['):
        return name.strip('[]')
    segment = ('code' if 'x' in perms else 'rodata' if perms == 'r--p' and offset == 0
               else 'relro' if perms == 'r--p' else 'data' if 'w' in perms else 'ro')
    return owner + segment if owner else ('other ' + ('code' if segment == 'code' else
                                                       'data' if segment == 'data' else 'ro'))
for path in sorted(glob.glob(f'{work}/walk.*'), key=lambda p: int(p.rsplit('.', 1)[1])):
    chunks, kinds = [], {}
    for line in open(path):
        f = line.split()
        if f[0] == 'step' and f[1] != '0':
            break
        if f[0] == 'chunk':
            chunks.append((f[2], address(int(f[3], 16)) & ~0xffff, int(f[4]) * 4))
        if f[0] == 'map':
            k = kind(' '.join(f[1:-3]), f[-3], int(f[-2], 16))
            kinds[k] = kinds.get(k, 0) + int(f[-1])
    # The profiler maps its steady code page by page (footprint.rs): a chunk spans mappings.
    merged = {}
    for perms, chunk, kb in chunks:
        merged[perms, chunk] = merged.get((perms, chunk), 0) + kb
    chunks = [(perms, chunk, kb) for (perms, chunk), kb in merged.items()]
    per = {}
    for perms, _, _ in chunks:
        per[perms] = per.get(perms, 0) + 1
    print(f'== {title}, pid {path.rsplit(".", 1)[1]}: chunks ' + ', '.join(f'{p} {n}' for p, n in sorted(per.items())))
    print('   kB resident by kind: ' + ', '.join(f'{k} {n}' for k, n in sorted(kinds.items())))
    for perms, chunk, kb in chunks:
        print(f'   {perms} {chunk:7x} {kb:3} kB  {contents(chunk)}')
PY
    done
done
