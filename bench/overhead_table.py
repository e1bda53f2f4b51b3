"""The overhead tables of bench/run.sh: medians over rounds of its raw lines, budgets beside them.

    python3 bench/overhead_table.py RAW MODE...     (MODE: bare first, then the profiled modes)

Raw lines: `LAYOUT MODE bench NAME ns_per_iter=F calls_per_iter=N ...`,
`LAYOUT MODE bench_ab NAME paused_ns=F counted_ns=F added_ns=F ratio=F ...`, `LAYOUT MODE mem ...`,
`LAYOUT MODE finalize ms=F peak_kb=N`, `- MODE startup NAME ns=N` (see bench/overhead.c).
"""
import re
import statistics
import sys
from collections import defaultdict

ADDED_NS_BUDGET = 30  # counting mode, per call, 2 ranks
COLLECTIVE_RATIO_BUDGET = 1.05  # counting mode, collectives, 4 ranks on 2 cores
TRACE_NS_BUDGET = 100  # trace mode, per call, 2 ranks
RSS_KB_BUDGET = 256  # per rank, steady state
INIT_PEAK_KB_BUDGET = 512  # per rank, peak resident set right after MPI_Init
FINALIZE_PEAK_KB_BUDGET = 256  # rank 0, what MPI_Finalize adds to the peak resident set
COLLECTIVES = {"allreduce1", "barrier", "bcast1"}
LAYOUT_NAMES = {
    "2": "2 ranks",
    "4o": "4 ranks on 2 cores (oversubscribed)",
    "2m": "MPICH, 2 ranks (\"mpistat\": the MPICH build, libmpistat_mpich.so, preloaded)",
}

raw_file, modes = sys.argv[1], sys.argv[2:]
bench = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # layout, name, mode: [ns]
calls = {}
ab = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # layout, name, mode: [(added, ratio, paused)]
mem = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # layout, key, mode: [kB]
# 2-rank layouts (Open MPI "2", MPICH "2m") only:
fin = defaultdict(lambda: defaultdict(list))  # layout, mode: [ms]
fin_peak = defaultdict(lambda: defaultdict(list))  # layout, mode: [kB]
fin_steps = defaultdict(lambda: defaultdict(list))  # layout, mode: [kB], exact, libmpistat's steps
start = defaultdict(lambda: defaultdict(list))  # command, mode: [ms]
clock_read_ns = None  # one rdtsc on this host (overhead clock)

for line in open(raw_file):
    layout, mode, kind, rest = line.rstrip("\n").split(" ", 3)
    kv = dict(re.findall(r"(\w+)=([-\d.]+)", rest))
    if kind == "bench":
        name = rest.split(" ", 1)[0]
        bench[layout][name][mode].append(float(kv["ns_per_iter"]))
        calls[name] = int(kv["calls_per_iter"])
    elif kind == "bench_ab":
        name = rest.split(" ", 1)[0]
        ab[layout][name][mode].append(
            (float(kv["added_ns"]), float(kv["ratio"]), float(kv["paused_ns"]))
        )
        calls[name] = int(kv["calls_per_iter"])
    elif kind == "mem":
        for key, value in kv.items():
            if key.endswith("_kb_mean"):
                mem[layout][key][mode].append(float(value))
    elif kind == "finalize" and layout in ("2", "2m"):
        fin[layout][mode].append(float(kv["ms"]))
        if "peak_kb" in kv:
            fin_peak[layout][mode].append(float(kv["peak_kb"]))
        if "steps_kb" in kv:
            fin_steps[layout][mode].append(float(kv["steps_kb"]))
    elif kind == "startup":
        start[rest.rsplit(" ", 1)[0]][mode].append(float(kv["ns"]) / 1e6)
    elif kind == "clock":
        clock_read_ns = float(kv["rdtsc_ns"])

med = statistics.median


def central_mean(values):
    """Mean of the middle 80 % (a tenth of the values dropped at each end). Per job, the in-job
    A/B and a paused call's time take one of two levels (the two vCPUs' placement on the host
    changes between jobs: one job's MPI_Comm_rank takes 3.7 ns bare, the next 5.4), so a median
    picks one level by chance; this is the expected cost over jobs, with a preempted job's
    outlier dropped."""
    values = sorted(values)
    cut = len(values) // 10
    kept = values[cut : len(values) - cut]
    return statistics.fmean(kept) if kept else float("nan")


def central_mean_se(values):
    """Standard error of [`central_mean`] (Tukey and McLaughlin: the winsorized standard deviation
    over (1 - 2 x the share cut at each end) x sqrt(n)), or None below 3 values."""
    values = sorted(values)
    n, cut = len(values), len(values) // 10
    if n < 3:
        return None
    winsorized = [min(max(v, values[cut]), values[n - 1 - cut]) for v in values]
    return statistics.stdev(winsorized) / ((n - 2 * cut) / n * n**0.5)


def combined(*errors):
    """Standard error of a sum or difference of independent estimates, or None if one is."""
    if any(e is None for e in errors):
        return None
    return sum(e * e for e in errors) ** 0.5


def added(d, mode, base="bare"):
    """Median of the per-round differences (rounds are paired: same machine state)."""
    n = min(len(d[base]), len(d[mode]))
    return med([d[mode][i] - d[base][i] for i in range(n)]) if n else float("nan")


def verdict(ok, limit):
    return f"{'within' if ok else 'OVER'} ({limit})"


def judged(value, margin, limit, shown_limit):
    """The verdict on `value` (at most `limit`) when it is known to about `margin` (two standard
    errors, or None): within or OVER only where the whole interval is, else "unsure"."""
    if margin is not None and value - margin <= limit < value + margin:
        return f"unsure ({shown_limit}: the interval holds it)"
    return verdict(value <= limit, shown_limit)


def budget(layout, name, mode, per_call, ratio, per_call_margin=None, ratio_margin=None):
    """The verdict on a row. The floor's rows are judged by libmpistat's budget too, so the
    table says where a budget is below what any profiler that times a call costs on this host."""
    if mode in ("mpistat", "floor") and layout in ("2", "2m"):
        return judged(per_call, per_call_margin, ADDED_NS_BUDGET, f"<= {ADDED_NS_BUDGET} ns")
    if mode in ("mpistat", "floor") and layout == "4o" and name in COLLECTIVES:
        return judged(ratio, ratio_margin, COLLECTIVE_RATIO_BUDGET, f"<= x{COLLECTIVE_RATIO_BUDGET}")
    if mode == "trace" and layout in ("2", "2m"):
        return judged(per_call, per_call_margin, TRACE_NS_BUDGET, f"<= {TRACE_NS_BUDGET} ns")
    return ""


def paused_path(layout, mode):
    """(ns a paused call costs over a bare one in `layout`, its standard error) (the wrapper's
    entry, its flag test and the real call: what the in-job A/B cannot see), or None: the paused
    MPI_Comm_rank's time in `mode`'s jobs over the bare jobs' ([`central_mean`]).
    MPI_Comm_rank's own time varies little between jobs, unlike a communicating call's; the
    paused path is the same code for every routine, but for a routine of six or more arguments
    a few instructions longer (its general copy's seventh argument goes on the stack), which
    this does not see."""
    d = ab.get(layout, {}).get("comm_rank", {})
    if mode == "bare" or not d.get(mode) or not d.get("bare"):
        return None
    here, bare = [x[2] for x in d[mode]], [x[2] for x in d["bare"]]
    return (central_mean(here) - central_mean(bare),
            combined(central_mean_se(here), central_mean_se(bare)))


def separate_jobs_budget(layout, name, mode, per_call, ratio):
    """[`budget`] of a row of separate jobs; for a workload also timed as an in-job A/B, that
    comparison's verdict counts (jobs differ by more than a communicating call's overhead:
    bench/overhead.c), so the row points to it."""
    shown = budget(layout, name, mode, per_call, ratio)
    if shown and ab.get(layout, {}).get(name, {}).get(mode):
        return "(in-job A/B below)"
    return shown


if clock_read_ns is not None:
    print(f"One clock read (rdtsc) on this host: {clock_read_ns:.1f} ns; timing a call takes two.")
for layout, names in bench.items():
    print()
    print(f"{LAYOUT_NAMES.get(layout, layout)}: median ns per iteration; "
          "added = median of the paired per-round differences")
    print(f"{'workload':<12} {'unit':<22} {'mode':<10} {'ns':>9} {'added ns':>9} "
          f"{'added/call':>10} {'ratio':>6}  budget")
    for name, d in names.items():
        if not d["bare"]:
            continue
        c = calls[name]
        unit = "call" if c == 1 else f"round trip ({c} calls)"
        print(f"{name:<12} {unit:<22} {'bare':<10} {med(d['bare']):>9.1f}")
        for mode in modes[1:]:
            if not d[mode]:
                continue
            p, a = med(d[mode]), added(d, mode)
            ratio = p / med(d["bare"])
            print(f"{'':<12} {'':<22} {mode:<10} {p:>9.1f} {a:>9.1f} {a / c:>10.1f} "
                  f"{ratio:>6.2f}  {separate_jobs_budget(layout, name, mode, a / c, ratio)}")
print("(trace mode runs a tenth of the iterations, so that the whole run fits its trace budget)")

if ab:
    print()
    print("In-job A/B: in one job, blocks alternating counting paused (MPI_Pcontrol(0)) and on;")
    print("added = mean over jobs (their middle 80 %) of each job's median per-pair difference:")
    print("immune within a job to what makes jobs differ (a VM's vCPU placement, other load), which")
    print("still moves one job's A/B by ~15 ns, hence many jobs; bare shows the method's own error.")
    print("A paused call still passes through the wrapper: 'paused' is what that costs per call")
    print("over bare (MPI_Comm_rank's paused time over the bare jobs'), and total/call = added/call")
    print("+ paused, the cost of a call against bare, which the budgets judge. Other tools: their")
    print("own reading of MPI_Pcontrol. With --floor, 'over floor' is total/call less the floor's:")
    print("the part of the cost that is not the two clock reads every timing tool makes (a read's")
    print("cost, above, depends on the host: where it is 11 ns, the floor alone nears a budget;")
    print("the floor's rows are judged by the same budgets, so a budget the floor fails is one")
    print("that no profiler timing every call meets on this host).")
    print("'±' is two standard errors (of the jobs' middle-80 % mean; total/call's combines the")
    print("A/B's and the paused path's): a budget inside that interval is judged 'unsure', as a")
    print("rerun may land on either side of it.")
    print(f"{'layout':<6} {'workload':<12} {'mode':<10} {'added ns':>9} {'added/call':>10} "
          f"{'paused':>7} {'total/call':>10} {'±':>5} {'over floor':>10} {'ratio':>7} {'±':>6} "
          f"{'jobs':>5}  budget")

    def two_se(se):
        return None if se is None else 2 * se

    def total_per_call(layout, name, mode):
        """(added/call, paused, total/call, its margin, ratio, its margin) of an A/B row; a
        margin is two standard errors, or None."""
        d = ab[layout][name][mode]
        per_call = [x[0] / calls[name] for x in d]
        ratios = [x[1] for x in d]
        a = central_mean(per_call)
        paused, paused_se = paused_path(layout, mode) or (None, None)
        total_se = central_mean_se(per_call) if paused is None else combined(
            central_mean_se(per_call), paused_se)
        return (a, paused, a + (paused or 0), two_se(total_se),
                central_mean(ratios), two_se(central_mean_se(ratios)))

    def margin_shown(margin, width, digits):
        return f"{margin:>{width}.{digits}f}" if margin is not None else f"{'':>{width}}"

    for layout, names in ab.items():
        for name, d in names.items():
            floor = total_per_call(layout, name, "floor")[2] if d.get("floor") else None
            for mode in modes:
                if not d[mode]:
                    continue
                a, paused, total, margin, r, r_margin = total_per_call(layout, name, mode)
                c = calls[name]
                shown = (budget(layout, name, mode, total, r, margin, r_margin)
                         if mode != "bare" else "")
                paused_shown = f"{paused:>7.1f}" if paused is not None else f"{'':>7}"
                over = (f"{total - floor:>10.1f}" if floor is not None and mode not in ("bare", "floor")
                        else f"{'':>10}")
                print(f"{layout:<6} {name:<12} {mode:<10} {a * c:>9.1f} {a:>10.1f} {paused_shown} "
                      f"{total:>10.1f} {margin_shown(margin, 5, 1)} {over} {r:>7.3f} "
                      f"{margin_shown(r_margin, 6, 3)} {len(d[mode]):>5}  {shown}")

if "direct" in modes:
    print()
    print("The front's trampoline: ns per call that preloading the front (libmpistat.so, mode "
          "mpistat) adds over preloading the implementation (libmpistat_openmpi.so, mode direct); "
          "median of the paired per-round differences")
    print(f"{'layout':<6} {'workload':<12} {'front ns':>9} {'direct ns':>9} {'added/call':>10}")
    for layout, names in bench.items():
        for name, d in names.items():
            if d["mpistat"] and d["direct"]:
                print(f"{layout:<6} {name:<12} {med(d['mpistat']):>9.1f} {med(d['direct']):>9.1f} "
                      f"{added(d, 'mpistat', 'direct') / calls[name]:>10.1f}")

for layout, title in (("2", "2 ranks"), ("4o", "4 ranks on 2 cores"), ("2m", "MPICH 2 ranks")):
    if not mem[layout]:
        continue
    print()
    print(f"{'memory/rank, ' + title:<34} {'mode':<10} {'kB':>9} {'added kB':>9}  budget")
    for key, label, limit in (
        ("inithwm_kb_mean", "VmHWM right after MPI_Init", INIT_PEAK_KB_BUDGET),
        # Exact (smaps_rollup): at MPI_Init's return and libmpistat's releases inside it. VmHWM
        # comes from the kernel's approximate per-CPU counts, off by up to ~250 kB.
        ("initexact_kb_mean", "  exact, at its releases", INIT_PEAK_KB_BUDGET),
        ("msghwm_kb_mean", "VmHWM after the first messages", INIT_PEAK_KB_BUDGET),
        ("vmhwm_kb_mean", "VmHWM (peak, after the loops)", INIT_PEAK_KB_BUDGET),
        ("vmrss_kb_mean", "VmRSS after the loops", RSS_KB_BUDGET),
        ("rssanon_kb_mean", "RssAnon (private)", RSS_KB_BUDGET),
        ("pss_kb_mean", "Pss (shared pages split)", RSS_KB_BUDGET),
    ):
        d = mem[layout][key]
        if not d["bare"]:
            continue
        print(f"{label:<34} {'bare':<10} {med(d['bare']):>9.0f}")
        for mode in modes[1:]:
            if d[mode]:
                a = added(d, mode)
                # Trace mode has the same budgets for MPI_Init's peak and the steady state (its
                # events are kept in a 32 KiB chunk, the rest spilled to a file); its peaks after
                # the first messages are not judged: each routine's first traced call finds its
                # call site by unwinding (the unwinder's code and tables, dropped again after).
                judged = mode in ("mpistat", "direct") or (
                    mode == "trace" and key not in ("msghwm_kb_mean", "vmhwm_kb_mean")
                )
                shown = verdict(a <= limit, f"<= {limit} kB") if judged else ""
                # VmHWM right after MPI_Init has an exact twin, the row below it, which is judged.
                if judged and key == "inithwm_kb_mean" and mem[layout]["initexact_kb_mean"][mode]:
                    shown = "approximate: see exact"
                print(f"{'':<34} {mode:<10} {med(d[mode]):>9.0f} {a:>9.0f}  {shown}")

for layout, title in (("2", "2 ranks"), ("2m", "MPICH 2 ranks")):
    f = fin[layout]
    if not f["bare"]:
        continue
    print()
    print(f"{'time (ms), ' + title:<28} {'mode':<10} {'median':>9} {'added':>9}")
    for mode in modes:
        if f[mode]:
            more = "" if mode == "bare" else f"{med(f[mode]) - med(f['bare']):>9.2f}"
            note = "   (writes the trace)" if mode == "trace" else ""
            print(f"{'MPI_Finalize (rank 0)':<28} {mode:<10} {med(f[mode]):>9.2f} {more}{note}")
    p = fin_peak[layout]
    if p["bare"]:
        print(f"{'peak kB, ' + title:<28} {'mode':<10} {'median':>9} {'added':>9}  budget")
        for mode in modes:
            if p[mode]:
                a = med(p[mode]) - med(p["bare"])
                shown = "" if mode == "bare" else f"{a:>9.0f}"
                # Trace mode writes the trace's last buffer and its definitions at finalize.
                judged = mode in ("mpistat", "direct")
                limit = FINALIZE_PEAK_KB_BUDGET
                budget = verdict(a <= limit, f"<= {limit} kB") if judged else ""
                # Its exact twin, "at its steps" below, is judged.
                if judged and fin_steps[layout][mode]:
                    budget = "approximate: see exact"
                print(f"{'MPI_Finalize adds (rank 0)':<28} {mode:<10} {med(p[mode]):>9.0f} {shown}  {budget}")
    # Exact, at the end of each of libmpistat's finalize steps (bench/overhead.c's malloc_trim):
    # a job without it has no steps. The VmHWM rows above come from the kernel's approximate
    # per-CPU counts, and a bare MPI_Finalize reads less than 0 there.
    steps = fin_steps[layout]
    for mode in ("mpistat", "direct", "trace"):
        if steps[mode]:
            a = med(steps[mode])
            judged = mode in ("mpistat", "direct")
            limit = FINALIZE_PEAK_KB_BUDGET
            budget = verdict(a <= limit, f"<= {limit} kB") if judged else ""
            spread = f"({min(steps[mode]):.0f}-{max(steps[mode]):.0f})"
            print(f"{'  exact, at its steps':<28} {mode:<10} {spread:>9} {a:>9.0f}  {budget}")
for name, d in start.items():
    if d["bare"] and d["mpistat"]:
        b, p = statistics.mean(d["bare"]), statistics.mean(d["mpistat"])
        print(f"{'start-up ' + name:<28} {'mpistat':<10} {p:>9.2f} {p - b:>9.2f}"
              f"   (mean per run; bare {b:.2f})")
print()
print("Budgets shown, not asserted. Cheap local calls are the worst case for a wrapper's fixed cost.")
