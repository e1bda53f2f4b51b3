#!/usr/bin/env bash
# Where MPI_Finalize's kilobytes are: runs tests/programs/footprint.c on 2 ranks with
# bench/finalize_walk.c preloaded before the release build's libmpistat.so and prints, per
# family, rank and step of the finalize (each ends where the profiler drops its code again), what
# each mapping grew by since MPI_Finalize's entry (kB) and which 64 KiB chunks of the profiler's
# code and read-only data were mapped, with the first functions (or sections) in each; then, with
# perf, the page faults from MPI_Finalize on (which symbol each new chunk was mapped for).
#
#     bench/finalize-walk.sh [openmpi|mpich ...]      (default: both)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
finalize_setup finalize-walk
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gcc -O2 -shared -fPIC -o "$work/walk.so" "$root/bench/finalize_walk.c" -ldl
preload="$work/walk.so:$root/target/release/libmpistat.so"
families=("$@")
[ $# -gt 0 ] || families=(openmpi mpich)
for family in "${families[@]}"; do
    {
        mkdir -p "$work/$family"
        "mpicc.$family" -O2 -o "$work/$family/fp" "$root/tests/programs/footprint.c"
        case $family in
        openmpi)
            mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 -x "LD_PRELOAD=$preload" \
                -x "MPISTAT_CONFIG=$work/openmpi.toml" -x "FINALIZE_WALK_DIR=$work/$family" \
                "$work/$family/fp" | grep finalize
            ;;
        mpich)
            mpirun.mpich -np 2 -env LD_PRELOAD "$preload" -env MPISTAT_CONFIG "$work/mpich.toml" \
                -env FINALIZE_WALK_DIR "$work/$family" "$work/$family/fp" | grep finalize
            ;;
        esac
        python3 - "$work/$family" "$root/target/release/libmpistat_$family.so" <<'EOF'
import glob, os, re, subprocess, sys
work, lib = sys.argv[1:]
# The library's sections and symbols by file offset (a shared object's are equal to addresses
# in the first segments; otherwise shifted by the segment's offset less its address).
segs = []
for line in subprocess.run(['readelf', '-lW', lib], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    if f[:1] == ['LOAD']:
        segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
def address(offset):
    for off, vaddr, size in segs:
        if off <= offset < off + size:
            return offset - off + vaddr
    return offset
syms = []
for line in subprocess.run(['nm', '-S', '--defined-only', lib], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    if len(f) == 4:
        syms.append((int(f[0], 16), int(f[1], 16), f[3]))
syms.sort()
def contents(offset):
    a = address(offset) & ~0xffff
    inside = [(s, n) for v, s, n in syms if a <= v < a + 0x10000]
    big = sorted(inside, key=lambda x: -x[0])[:3]
    demangle = subprocess.run(['c++filt'], input='\n'.join(n for _, n in big), capture_output=True, text=True).stdout.split('\n')
    return f'{sum(s for s, _ in inside) // 1024} kB named; ' + '; '.join(f'{d[:70]} ({s})' for (s, _), d in zip(big, demangle))
for path in sorted(glob.glob(f'{work}/walk.*'), key=lambda p: int(p.rsplit('.', 1)[1])):
    print(f'== {os.path.basename(work)} pid {path.rsplit(".", 1)[1]}')
    steps, cur = [], None
    for line in open(path):
        f = line.split()
        if f[0] == 'step':
            cur = {'label': f'{f[1]} {f[2]}', 'map': {}, 'chunk': []}
            steps.append(cur)
        elif f[0] == 'map':
            key = (os.path.basename(f[1]), f[2])
            cur['map'][key] = cur['map'].get(key, 0) + int(f[4])
        elif f[0] == 'chunk':
            # The profiler maps code page by page (footprint.rs): a chunk spans mappings.
            off, pages = int(f[3], 16), int(f[4])
            same = [c for c in cur['chunk'] if c[:2] == (f[1], f[2])
                    and address(c[2]) & ~0xffff == address(off) & ~0xffff]
            if same:
                cur['chunk'][cur['chunk'].index(same[0])] = same[0][:3] + (same[0][3] + pages,)
            else:
                cur['chunk'].append((f[1], f[2], off, pages))
    base = steps[0]
    for s in steps[1:]:
        grown = {k: v - base['map'].get(k, 0) for k, v in s['map'].items()}
        grown = {k: v for k, v in grown.items() if abs(v) >= 8}
        total = sum(s['map'].values()) - sum(base['map'].values())
        print(f'-- step {s["label"]}: total {total:+} kB; ' + ', '.join(f'{n} {p} {v:+}' for (n, p), v in sorted(grown.items(), key=lambda x: -x[1])))
        for name, perms, off, pages in s['chunk']:
            print(f'     {perms} {address(off) & ~0xffff:7x} {pages * 4:3} kB  {contents(off)}')
EOF
        # Which code or constant each new 64 KiB chunk was faulted in for (the kernel's page-fault
        # event with its data address; only the first touch of a chunk faults, fault-around maps
        # the rest): what callgrind cannot see (AVX variants, functions merged with a twin).
        command -v perf >/dev/null || continue
        case $family in
        openmpi) perf record -q -e page-faults -c 1 -d -o "$work/$family/faults" -- \
            mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 \
            -x "LD_PRELOAD=$root/target/release/libmpistat.so" -x "MPISTAT_CONFIG=$work/openmpi.toml" \
            "$work/$family/fp" >/dev/null ;;
        mpich) perf record -q -e page-faults -c 1 -d -o "$work/$family/faults" -- \
            mpirun.mpich -np 2 -env LD_PRELOAD "$root/target/release/libmpistat.so" \
            -env MPISTAT_CONFIG "$work/mpich.toml" "$work/$family/fp" >/dev/null ;;
        esac
        python3 - "$work/$family/faults" "$family" <<'EOF2'
import re, sys, subprocess
# Each rank's page faults from MPI_Finalize on: the profiler's by address in the library (and its
# 64 KiB chunk), with the symbol read or run and the code that faulted; the others by mapping.
data, family = sys.argv[1], sys.argv[2]
lib = f'libmpistat_{family}.so'
bases = {}
for l in subprocess.run(['perf', 'script', '-i', data, '--show-mmap-events'], capture_output=True, text=True).stdout.splitlines():
    m = re.search(r' (\d+)/\d+: \[(0x[0-9a-f]+)\(0x[0-9a-f]+\) @ 0 .*r--p \S*/' + re.escape(lib) + '$', l)
    if m: bases[m.group(1)] = int(m.group(2), 16)
out = subprocess.run(['perf', 'script', '-i', data, '-F', 'pid,ip,sym,dso,addr'], capture_output=True, text=True).stdout
for pid, base in sorted(bases.items()):
    rows = [l for l in out.splitlines() if l.split()[:1] == [pid]]
    # The first fault in MPI_Finalize's code (the front's lazy entry, or the wrapper's).
    start = next((i for i, l in enumerate(rows) if 'MPI_Finalize' in l), None)
    if start is None: continue
    print(f'== pid {pid}: {len(rows) - start} faults from MPI_Finalize on')
    other = {}
    for l in rows[start:]:
        m = re.match(r'\s*\d+\s+([0-9a-f]+) (.*?) \(([^)]*)\)\s+([0-9a-f]+) (.*?) \(([^)]*)\)', l)
        if not m: continue
        a, asym, adso, ip, isym, idso = m.groups()
        off = int(a, 16) - base
        if lib in adso:
            print(f'  {off & ~0xffff:7x} {off:7x} {asym[:60]:60} <- {isym[:60]}')
        else:
            k = adso.split('/')[-1]
            other[k] = other.get(k, 0) + 1
    print('  elsewhere (4 kB faults):', ', '.join(f'{k} {v}' for k, v in sorted(other.items(), key=lambda x: -x[1])))
EOF2
    }
done
