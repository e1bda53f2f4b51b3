#!/usr/bin/env bash
# Makes profiler/finalize.ld's list again: the functions of the profiler that MPI_Finalize runs,
# as callgrind sees them inside `before_finalize` on both ranks of tests/programs/footprint.c, in
# both families' builds, a profile part per step (`release_init_pages` starts each), ordered as
# finalize.ld wants them: what a rank other than 0 runs (the common part), then, after
# `__mpistat_finalize_rank0`, what rank 0 runs besides the common part in the reductions'
# steps (a rule for each build), then, after `__mpistat_finalize_rank0_shared`, what several of rank
# 0's record steps run and what it runs besides the common part in the reductions' steps, then, after the init code, what it runs in the
# record's steps (the building, the JSON, the compressing into lines, the sending), step by step; a `#` line heads each of rank 0's lists. Symbol hashes and crate
# disambiguators become wildcards. Callgrind cannot see what valgrind's CPU lacks (AVX2 and
# AVX-512 variants) nor a function LLVM merged into a twin (its section has the twin's name):
# bench/finalize-walk.sh's page faults show those. Needs the release build (cargo build --release -p mpistat-front -p mpistat-profiler
# -p mpistat-profiler-mpich) and valgrind; prints the list, one pattern a line:
#
#     bench/finalize-sections.sh > /tmp/list
#     bench/finalize-sections.sh --write        # the lists into profiler/finalize.ld, in place
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/target/release/libmpistat.so
write=false
[ "${1:-}" != --write ] || write=true
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
finalize_setup finalize-sections
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A variable of the site's environment whitelist, as most jobs have one (the record's building
# then fills its map of them).
callgrind=(valgrind --tool=callgrind --demangle=no '--toggle-collect=*before_finalize*'
    '--dump-before=*release_init_pages*')
for family in openmpi mpich; do
    mkdir -p "$work/$family"
    "mpicc.$family" -O2 -o "$work/$family/fp" "$root/tests/programs/footprint.c"
    case $family in
    openmpi)
        mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 -x "LD_PRELOAD=$lib" \
            -x "MPISTAT_CONFIG=$work/openmpi.toml" -x OMP_NUM_THREADS=1 "${callgrind[@]}" \
            "--callgrind-out-file=$work/$family/cg.%p" "$work/$family/fp" >/dev/null 2>&1
        ;;
    mpich)
        mpirun.mpich -np 2 -env LD_PRELOAD "$lib" -env MPISTAT_CONFIG "$work/mpich.toml" -env OMP_NUM_THREADS 1 \
            "${callgrind[@]}" "--callgrind-out-file=$work/$family/cg.%p" "$work/$family/fp" \
            >/dev/null 2>&1
        ;;
    esac
done
python3 - "$work" "$root/target/release" >"$work/list" <<'EOF'
import glob, os, re, subprocess, sys

work, release = sys.argv[1:]

def hot_functions(family):
    """The functions the build places in `.text.hot` by attribute (`release_init_pages`,
    `ResidentMark::release_since`): every rank keeps that chunk, and a rule for them in
    finalize.ld would match nothing."""
    lib = f'{release}/libmpistat_{family}.so'
    start = size = 0
    for line in subprocess.run(['readelf', '-SW', lib], capture_output=True, text=True).stdout.splitlines():
        f = line.replace('[ ', '[').split()
        if len(f) > 5 and f[1] == '.text.hot':
            start, size = int(f[3], 16), int(f[5], 16)
    names = set()
    for line in subprocess.run(['nm', '--defined-only', lib], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and start <= int(f[0], 16) < start + size:
            names.add(f[2])
    return names

hot = {f: hot_functions(f) for f in ('openmpi', 'mpich')}

def functions(path, family, tables, state):
    """The functions of libmpistat_<family>.so in one callgrind profile part. Callgrind names an
    object or function once per process (`ob=(id) name`, elsewhere `ob=(id)`), in whichever part
    it writes first: `tables` holds the names of all the process's parts ([`names`]). It also
    leaves out `ob=` where the object is the one before, also across parts: `state` carries it
    from one part to the next, in dump order."""
    names, cob = [], None
    ob = state.get('ob')
    for line in open(path, errors='replace'):
        m = re.match(r'^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if not m:
            continue
        called, kind, key, _ = m.groups()
        name = tables[kind].get(key)
        if kind == 'ob':
            if called: cob = name
            else: ob = name
        else:
            obj = (cob or ob) if called else ob
            if called:
                cob = None
            # Valgrind may not name the library the front loaded (`???`) in some parts; the
            # front's own functions (crate `mpistat`, as `lazy_common`) are not ours there.
            ours = obj and (f'libmpistat_{family}' in obj
                            or (obj == '???' and not re.match(r'_ZN7mpistat\d', name)))
            if ours and name not in hot[family] and not name.startswith(('MPI_', 'PMPI_', '0x')):
                names.append(name)
    state['ob'] = ob
    return names

def names(paths):
    """The object and function names that the callgrind files `paths` define, by id."""
    tables = {'ob': {}, 'fn': {}}
    for path in paths:
        for line in open(path, errors='replace'):
            m = re.match(r'^c?(ob|fn)=\((\d+)\) (.*)$', line.rstrip('\n'))
            if m:
                tables[m.group(1)][m.group(2)] = m.group(3)
    return tables

def pattern(name):
    name = re.sub(r'17h[0-9a-f]{16}E(\.llvm\.\d+)?$', '17h*', name)
    name = re.sub(r'\.llvm\.\d+$', '*', name)
    return re.sub(r'Cs[0-9A-Za-z]+_', 'Cs*_', name)

def parts(family):
    """Per rank (rank 0 first: the lower pid), the functions of each of its steps, in order."""
    ranks = []
    bases = [p for p in glob.glob(f'{work}/{family}/cg.*') if re.fullmatch(r'cg\.\d+', os.path.basename(p))]
    for base in sorted(bases, key=lambda p: int(p.rsplit('.', 1)[1])):
        steps = sorted(glob.glob(base + '.*'), key=lambda p: int(p.rsplit('.', 1)[1]))
        tables, state = names(steps + [base]), {}
        ranks.append([f for f in (functions(p, family, tables, state) for p in steps + [base]) if f])
    return ranks

runs = {f: parts(f) for f in ('openmpi', 'mpich')}
def add(to, names, unless=()):
    for n in map(pattern, names):
        if n not in to and n not in unless:
            to.append(n)
def record_start(steps):
    """Rank 0's first step of the record: the user's look-up."""
    return next(i for i, names in enumerate(steps) if any('7Account10of_process' in n for n in names))
# Rank 0's steps, both families' names step by step (so that a step's code lies together in
# either build): the reductions' steps, then the record's five (the user's look-up, the building,
# the serialising, the compressing into lines, the sending with what runs after it).
starts = {f: record_start(ranks[0]) for f, ranks in runs.items()}
reduction_steps = [[n for f, ranks in runs.items() if i < starts[f] for n in ranks[0][i]]
                   for i in range(max(starts.values()))]
record_steps = [[], [], [], [], []]
for f, ranks in runs.items():
    for i, names in enumerate(ranks[0][starts[f]:]):
        record_steps[min(i, 4)].extend(names)
every, reductions, shared, build, json, compress, send = [], [], [], [], [], [], []
# What a rank other than 0 runs.
for ranks in runs.values():
    for steps in ranks[1:]:
        for names in steps:
            add(every, names)
for names in reduction_steps:
    add(reductions, names, every)
# Rank 0's reductions' code comes first in its part, in the common part's last chunk, step by
# step, so that those steps map no chunk past the common part's. A rule names each build's own
# objects (`*mpistat_mpich*`, `*mpistat_openmpi*`), so that the other build skips it and the
# generic functions of a legacy (`_ZN`) name, instantiated there, are our crate's copies; the
# others (std's `_R` names, compiler-builtins' C names) are not, and are placed in both builds.
family_reductions = {f: [] for f in runs}
for f, ranks in runs.items():
    for names in ranks[0][:starts[f]]:
        add(family_reductions[f], names, every)
def family_rules(f):
    return [f"*mpistat_{f}* {p}" if p.startswith('_ZN') else f"* {p}" for p in family_reductions[f]]
reduction_rules = []
add(reduction_rules, family_rules('mpich') + family_rules('openmpi'))
# What every rank runs and rank 0's record steps run too (the allocator, the vectors' growth)
# goes first in rank 0's shared code, in the common part's last chunk: in the common part's
# first, every record step mapped that chunk for them.
in_record = {pattern(n) for names in record_steps for n in names}
step_common = [n for n in every if n in in_record]
every = [n for n in every if n not in in_record]
# What more than one of the record's steps runs, and the look-up's few functions, go first in
# rank 0's part after those (in the common part's last chunk, which every step maps), then what
# rank 0 runs besides the common part in the reductions' steps; the rest of the record's code
# with its step.
groups = [{pattern(n) for n in names} - set(every) - set(step_common) - set(reductions) for names in record_steps]
add(shared, step_common)
for names in record_steps:
    add(shared, [n for n in names if sum(pattern(n) in g for g in groups) > 1], every + reductions)
add(shared, record_steps[0], every + reductions)
for to, names in zip((build, json, compress, send), record_steps[1:]):
    add(to, names, every + reductions + shared)
print('\n'.join(every))
print("# rank 0, each build: its reductions' steps (after __mpistat_finalize_rank0)")
print('\n'.join(reduction_rules))
print("# rank 0: what several of the record's steps run, the look-up, the reductions' steps (after __mpistat_finalize_rank0_shared)")
print('\n'.join(shared + reductions))
print("# rank 0: the record's building (after the init code)")
print('\n'.join(build))
print("# rank 0: the record's JSON (after __mpistat_record_json)")
print('\n'.join(json))
print("# rank 0: the record's compressing into lines (after __mpistat_record_compress)")
print('\n'.join(compress))
print("# rank 0: the record's sending (after __mpistat_record_send)")
print('\n'.join(send))
EOF
if ! $write; then
    cat "$work/list"
    exit 0
fi
# The lists replace finalize.ld's generated rules: the common part's after the MPI_Finalize
# wrapper's lines, rank 0's five after their marks; every other line stays as written.
python3 - "$work/list" "$root/profiler/finalize.ld" <<'EOF'
import re, sys
every, *rank0 = open(sys.argv[1]).read().split('\n# ')
# A rule is `PATTERN` (any object) or `FILES PATTERN`.
rank0 = [[line.split(' ') if ' ' in line else ['*', line] for line in part.split('\n')[1:] if line]
         for part in rank0]
every = [['*', p] for p in every.split()]
marks = ['__mpistat_finalize_rank0', '__mpistat_finalize_rank0_shared', '__mpistat_init_end', '__mpistat_record_json',
         '__mpistat_record_compress', '__mpistat_record_send']
path = sys.argv[2]
generated = re.compile(r'^    (\*|\*mpistat_mpich\*|\*mpistat_openmpi\*)\(\.text\.(\S+) \.text\.unlikely\.\2 \.rodata\.\2\)$')
out, region = [], None
for line in open(path).read().split('\n'):
    if region is not None and generated.match(line):
        continue
    if region is not None:
        out.extend(f'    {files}(.text.{p} .text.unlikely.{p} .rodata.{p})' for files, p in region)
        region = None
    out.append(line)
    if '*(.text._ZN*wrappers*_MPI_Finalize17h*)' in line:
        region = every
    for mark, part in zip(marks, rank0):
        if f'HIDDEN({mark} = .);' in line:
            region = part
open(path, 'w').write('\n'.join(out))
EOF
