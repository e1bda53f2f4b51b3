/*
 * Per-call cost of MPI routines, for comparing a bare run with one under libmpistat.
 *
 *   mpirun -np 2 overhead [ITERS [REPS [ab]]]
 *   overhead clock
 *
 * "overhead clock" (no MPI) prints what one read of libmpistat's clock costs on this host: rdtsc
 * (its clock wherever the TSC is invariant), 10 million reads back to back, median of 5 runs.
 * bench/run.sh prints it beside its tables: any tool that times each call pays two reads a call
 * (bench/floor.c), and what a read costs depends on the host's CPU (10-13 ns on one virtual
 * machine's host, where the floor's MPI_Comm_rank cost 21-23 ns a call; about half on another's).
 *
 * With "ab", only the in-job A/B comparisons run, for every workload (the local ones too), and
 * only the bench_ab lines are printed: bench/run.sh runs many such short jobs, because one job's
 * A/B still moves by ~15 ns (a median over a few jobs is not enough for a 30 ns budget).
 *
 * Local routines (MPI_Comm_rank, MPI_Test on MPI_REQUEST_NULL, MPI_Iprobe with nothing pending)
 * run 10*ITERS calls per repetition, communicating ones (0-byte ping-pong between ranks 0 and 1,
 * and three global collectives: a 1-double MPI_Allreduce and MPI_Barrier, which end supersteps,
 * and a 1-double MPI_Bcast from rank 0, a rooted one that does not) ITERS. Each is warmed up, then timed REPS times; rank 0 prints the
 * median ns per iteration. The cheap routines are where a wrapper's fixed cost shows: they are the
 * worst case, not a typical application.
 *
 * The communicating workloads are also timed in one job as an A/B comparison: blocks of ITERS/20
 * iterations, 20 pairs, alternating counting paused (MPI_Pcontrol(0)) and on (MPI_Pcontrol(1)),
 * the order swapped every pair. Two jobs differ by more than a collective's overhead on a shared
 * or virtual machine (the hypervisor moves the two vCPUs nearer or farther apart between runs: a
 * 2-rank Allreduce takes ~350 or ~700 ns bare), so comparing separate bare and profiled jobs
 * needs many rounds; blocks of one job see the same machine. Under a bare run MPI_Pcontrol does
 * nothing, so there the difference is the method's own error. Paused is not bare: a paused
 * call still passes through the wrapper (its entry, the counting flag's test and the real call:
 * ~6 ns here), which the A/B cannot see; bench/overhead_table.py adds it back, measured as the
 * paused MPI_Comm_rank's time over the bare jobs' (a call whose own time varies least between
 * jobs).
 *
 * Output (rank 0, one line each, machine-readable):
 *   bench NAME ns_per_iter=F calls_per_iter=N iters=N reps=N
 *   bench_ab NAME paused_ns=F counted_ns=F added_ns=F ratio=F calls_per_iter=N block_iters=N pairs=N
 *       (ns per iteration: medians over the pairs; added and ratio: medians of the pairs' own)
 *   mem vmrss_kb_max=N vmrss_kb_mean=F vmhwm_kb_max=N vmhwm_kb_mean=F rssanon_kb_max=N rssanon_kb_mean=F
 *       pss_kb_max=N pss_kb_mean=F inithwm_kb_max=N inithwm_kb_mean=F msghwm_kb_max=N msghwm_kb_mean=F
 *       initexact_kb_max=N initexact_kb_mean=F
 * (inithwm: the peak resident set right after MPI_Init, where a profiler sets itself up;
 * initexact: the same exact, the most of the resident set at MPI_Init's return and, with
 * libmpistat, at each of its releases inside MPI_Init (see malloc_trim below); msghwm:
 * right after the job's first messages, a 0-byte ping-pong and an MPI_Iprobe, which map MPI's
 * point-to-point code: a job that communicates has that in its peak whatever runs at MPI_Init)
 *   finalize ms=F peak_kb=N [steps_kb=N]
 * (peak_kb: what MPI_Finalize adds to rank 0's peak resident set, VmHWM after it less VmHWM
 * before it, the peak reset first, clear_refs "5"; left out where the kernel cannot. The
 * kernel's peak lags the resident set by up to ~250 kB, so a bare MPI_Finalize may show less
 * than 0: compare modes, not the bare figure; steps_kb: the most libmpistat's finalize steps
 * added, exact, see malloc_trim below)
 *   clock rdtsc_ns=F       ("overhead clock")
 * calls_per_iter counts the wrapped calls on the timed path (a ping-pong round trip is four:
 * Send and Recv on each rank).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __x86_64__
#include <x86intrin.h>
#endif

static int rank, size;

/* clock_gettime rather than MPI_Wtime: the timer must not itself be a wrapped MPI call. */
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "overhead clock": one rdtsc's cost, ns (x86-64; elsewhere nothing is printed). */
static int print_clock_read(void)
{
#ifdef __x86_64__
    enum { RUNS = 5, READS = 10000000 };
    double ns[RUNS];
    volatile unsigned long long sink = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < READS; i++)
            sink += __rdtsc();
        ns[r] = (now_ns() - t0) / READS;
    }
    printf("clock rdtsc_ns=%.2f\n", median(ns, RUNS));
#endif
    return 0;
}

/* The loops. Each returns nothing the compiler could fold: the MPI calls are external. */
static void loop_comm_rank(long n)
{
    int r;
    for (long i = 0; i < n; i++)
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
}

static void loop_test_null(long n)
{
    int flag;
    for (long i = 0; i < n; i++) {
        MPI_Request req = MPI_REQUEST_NULL;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    }
}

static void loop_iprobe(long n)
{
    int flag;
    for (long i = 0; i < n; i++)
        MPI_Iprobe(MPI_ANY_SOURCE, 4711, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

static void loop_pingpong(long n)
{
    char dummy = 0;
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(&dummy, 0, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(&dummy, 0, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(&dummy, 0, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&dummy, 0, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
}

static void loop_allreduce(long n)
{
    double in = 1.0, out = 0.0;
    for (long i = 0; i < n; i++)
        MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static void loop_barrier(long n)
{
    for (long i = 0; i < n; i++)
        MPI_Barrier(MPI_COMM_WORLD);
}

/* The root of a small MPI_Bcast returns as soon as its message is sent: unchecked, it runs
 * ahead, and the others' queues of unexpected messages grow (by megabytes over a run, which the
 * memory rows would count). A barrier every 64 broadcasts bounds that, for 1/64 of a barrier's
 * time per call in every mode. */
static void loop_bcast(long n)
{
    double x = 1.0;
    for (long i = 0; i < n; i++) {
        MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (i % 64 == 63)
            MPI_Barrier(MPI_COMM_WORLD);
    }
}

struct bench {
    const char *name;
    void (*loop)(long);
    long scale; /* iterations per repetition, in units of ITERS */
    int calls;  /* wrapped calls per iteration on the timed path */
    int ab;     /* also timed as an in-job A/B comparison (run_ab) */
};

/* ns per iteration of one block of n iterations, with counting at `level` (MPI_Pcontrol). */
static double block(const struct bench *b, long n, int level)
{
    MPI_Pcontrol(level);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ns();
    b->loop(n);
    double t = (now_ns() - t0) / (double)n;
    MPI_Pcontrol(1);
    return t;
}

static void run_ab(const struct bench *b, long iters)
{
    enum { PAIRS = 20 };
    long n = iters * b->scale / PAIRS;
    if (n < 1)
        n = 1;
    double paused[PAIRS], counted[PAIRS], added[PAIRS], ratio[PAIRS];
    block(b, n, 0); /* warm-up of both states */
    block(b, n, 1);
    for (int i = 0; i < PAIRS; i++) {
        if (i % 2) {
            counted[i] = block(b, n, 1);
            paused[i] = block(b, n, 0);
        } else {
            paused[i] = block(b, n, 0);
            counted[i] = block(b, n, 1);
        }
        added[i] = counted[i] - paused[i];
        ratio[i] = counted[i] / paused[i];
    }
    if (rank == 0)
        printf("bench_ab %s paused_ns=%.2f counted_ns=%.2f added_ns=%.2f ratio=%.4f "
               "calls_per_iter=%d block_iters=%ld pairs=%d\n",
               b->name, median(paused, PAIRS), median(counted, PAIRS), median(added, PAIRS),
               median(ratio, PAIRS), b->calls, n, PAIRS);
}

static void run(const struct bench *b, long iters, int reps)
{
    long n = iters * b->scale;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t)
        MPI_Abort(MPI_COMM_WORLD, 1);
    b->loop(n / 10 + 1); /* warm-up: first-touch, lazy connection set-up, caches */
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD); /* start the ranks together */
        double t0 = now_ns();
        b->loop(n);
        t[r] = (now_ns() - t0) / (double)n;
    }
    if (rank == 0)
        printf("bench %s ns_per_iter=%.2f calls_per_iter=%d iters=%ld reps=%d\n", b->name,
               median(t, reps), b->calls, n, reps);
    free(t);
}

/* A "VmRSS:   1234 kB" line of a /proc/self file, in kB; -1 if absent. */
static long proc_kb(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    char line[256];
    long kb = -1;
    size_t klen = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            kb = strtol(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

/* The resident set in kB, exact: smaps_rollup sums the page tables, where VmHWM comes from the
 * kernel's per-CPU counts, which it sums only now and then. */
static long exact_rss_kb(void)
{
    return proc_kb("/proc/self/smaps_rollup", "Rss");
}

/* Inside MPI_Init: the largest exact resident set seen at libmpistat's releases. */
static int initializing;
static long init_most_kb = -1;

/* Inside MPI_Finalize: the largest exact resident set seen, and the time spent reading it. */
static int finalizing;
static long finalize_most_kb = -1;
static double finalize_reading_ns;

/* libmpistat ends each step of its MPI_Finalize (the reductions, the record's building,
 * serialising, compressing, sending) by dropping the code and pages the step mapped, and it
 * starts that with malloc_trim (profiler/src/footprint.rs). This program's malloc_trim, exported
 * (bench/run.sh links it with --export-dynamic-symbol=malloc_trim) and so found before libc's,
 * reads the exact resident set there: at each step's end, with the step's heap and stack still
 * in it. VmHWM sees a peak only where the MPI library unmaps something, from approximate
 * counts (a bare MPI_Finalize reads -170 to -340 kB). A job without libmpistat never calls it.
 * Inside MPI_Init the same releases end libmpistat's start-up (before the real MPI_Init) and its
 * set-up of the job (at its end): their readings, with MPI_Init's return, are its exact peak. */
int malloc_trim(size_t pad)
{
    static int (*real)(size_t);
    if (initializing) {
        long kb = exact_rss_kb();
        if (kb > init_most_kb)
            init_most_kb = kb;
    }
    if (finalizing) {
        double t0 = now_ns();
        long kb = exact_rss_kb();
        if (kb > finalize_most_kb)
            finalize_most_kb = kb;
        finalize_reading_ns += now_ns() - t0;
    }
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "malloc_trim");
    return real ? real(pad) : 0;
}

/* Resets VmHWM to the present resident set (Linux >= 4.0); 0 on success. */
static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int ok;
    if (!f)
        return -1;
    ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "clock") == 0)
        return print_clock_read();
    long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    int ab_only = argc > 3 && strcmp(argv[3], "ab") == 0;
    if (iters < 1)
        iters = 1;
    if (reps < 1)
        reps = 1;

    initializing = 1;
    MPI_Init(&argc, &argv);
    initializing = 0;
    long init_hwm = proc_kb("/proc/self/status", "VmHWM");
    long init_exact = exact_rss_kb();
    if (init_most_kb > init_exact)
        init_exact = init_most_kb;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "overhead: needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 4711, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        loop_pingpong(1);
    }
    long msg_hwm = proc_kb("/proc/self/status", "VmHWM");

    static const struct bench benches[] = {
        {"comm_rank", loop_comm_rank, 10, 1, 0},
        {"test_null", loop_test_null, 10, 1, 0},
        {"iprobe", loop_iprobe, 10, 1, 0},
        {"pingpong0", loop_pingpong, 1, 4, 1},
        {"allreduce1", loop_allreduce, 1, 1, 1},
        {"barrier", loop_barrier, 1, 1, 1},
        {"bcast1", loop_bcast, 1, 1, 1},
    };
    enum { NBENCH = sizeof benches / sizeof benches[0] };
    if (ab_only) {
        for (size_t i = 0; i < NBENCH; i++)
            run_ab(&benches[i], iters);
        MPI_Finalize();
        return 0;
    }
    for (size_t i = 0; i < NBENCH; i++)
        run(&benches[i], iters, reps);

    /* RssAnon is the rank's private memory; VmRSS also counts code pages that all ranks of a
     * node share (most of what a preloaded library adds); Pss divides each shared page among
     * the processes that map it. Read after the loops and before the A/B blocks: their pauses
     * (MPI_Pcontrol) run the general copies of the wrappers, one more chunk of code that a job
     * which never pauses does not map. */
    enum { NREAD = 4, NMEM = NREAD + 3 };
    static const char *const mem_files[NREAD] = {"/proc/self/status", "/proc/self/status",
                                                 "/proc/self/status", "/proc/self/smaps_rollup"};
    static const char *const mem_keys[NREAD] = {"VmRSS", "VmHWM", "RssAnon", "Pss"};
    static const char *const mem_names[NMEM] = {"vmrss", "vmhwm",   "rssanon",  "pss",
                                                "inithwm", "msghwm", "initexact"};
    long mem[NMEM];
    for (int k = 0; k < NREAD; k++)
        mem[k] = proc_kb(mem_files[k], mem_keys[k]);
    mem[NREAD] = init_hwm;
    mem[NREAD + 1] = msg_hwm;
    mem[NREAD + 2] = init_exact;

    long *all = malloc(NMEM * (size_t)size * sizeof *all);
    if (!all)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Gather(mem, NMEM, MPI_LONG, all, NMEM, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mem");
        for (int k = 0; k < NMEM; k++) {
            long max = 0;
            double sum = 0;
            for (int r = 0; r < size; r++) {
                long v = all[NMEM * r + k];
                max = v > max ? v : max;
                sum += (double)v;
            }
            printf(" %s_kb_max=%ld %s_kb_mean=%.1f", mem_names[k], max, mem_names[k], sum / size);
        }
        printf("\n");
    }
    free(all);
    /* After the memory line: a profiler that fails on MPI_Pcontrol (run as it is, bench/run.sh
     * --with) ends the job here, and its memory is still told. */
    fflush(stdout);
    for (size_t i = 0; i < NBENCH; i++)
        if (benches[i].ab)
            run_ab(&benches[i], iters);

    /* Finalize is where libmpistat reduces its tables and rank 0 sends the record: time it on
     * rank 0 (which does the most), and print only afterwards. */
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    long before = reset_peak() == 0 ? proc_kb("/proc/self/status", "VmHWM") : -1;
    long entry_kb = exact_rss_kb();
    finalize_most_kb = entry_kb;
    finalizing = 1;
    double f0 = now_ns();
    MPI_Finalize();
    double f1 = now_ns();
    finalizing = 0;
    long peak = proc_kb("/proc/self/status", "VmHWM");
    if (rank == 0) {
        printf("finalize ms=%.3f", (f1 - f0 - finalize_reading_ns) / 1e6);
        if (before >= 0 && peak >= 0)
            printf(" peak_kb=%ld", peak - before);
        if (entry_kb >= 0)
            printf(" steps_kb=%ld", finalize_most_kb - entry_kb);
        printf("\n");
    }
    return 0;
}
