/* Prints, per rank, how much of the profiler (libmpistat_<family>.so, loaded by the front) and of
 * the front (libmpistat.so) is resident after MPI_Init and a loop of common calls long enough to
 * fill the superstep buffer (so its merging runs too), from /proc/self/smaps: "code rss_kb=N
 * size_kb=M" for the code (r-xp mappings), "rodata rss_kb=N size_kb=M" for the first read-only
 * segment (dynamic symbols, constants, unwind tables; the read-only mappings before the code) and "relro rss_kb=N
 * size_kb=M" for the data the loader relocated and then made read-only (a later read-only
 * mapping: private to each process), the front's prefixed "front"; and "libc unwind rss_kb=N
 * size_kb=M" for libc's unwind tables (`.eh_frame_hdr`, then `.eh_frame` to the end of their
 * segment) past their first 64 KiB chunk, which an unwinding through libc's frames reads; and
 * "init code_chunks=N", the 64 KiB chunks of the profiler's code resident at the last of its
 * releases in MPI_Init (its malloc_trim at the end of MPI_Init, where the peak is; -1 without
 * one). With the argument "pcontrol"
 * each iteration also pauses counting around a barrier (MPI_Pcontrol(0) ... MPI_Pcontrol(1)); with
 * "late" the program calls MPI_Bcast for the first time after the loop (a rooted collective: no
 * superstep, so no cold point of the superstep schedule, follows its lazy binding).
 * Then what MPI_Finalize adds to the resident set at its peak: "finalize peak_kb=N", VmHWM after
 * it less VmHWM just after the peak was reset to the resident set (clear_refs "5"), and
 * "finalize steps_kb=N", the most the exact resident set grew by at the end of one of the
 * profiler's finalize steps (its malloc_trim calls: this program's, when linked with
 * -Wl,--export-dynamic-symbol=malloc_trim; 0 in a job without the profiler). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A "Key:   N kB" line of a /proc/self file, -1 if missing. */
static long proc_kb(const char *file, const char *key) {
    FILE *f = fopen(file, "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') sscanf(line + n + 1, "%ld", &kb);
    fclose(f);
    return kb;
}

/* The resident set in kB, exact: smaps_rollup sums the page tables (VmHWM comes from the
 * kernel's per-CPU counts, which it sums only now and then); -1 if unreadable. */
static long exact_rss_kb(void) { return proc_kb("/proc/self/smaps_rollup", "Rss"); }

/* Inside MPI_Finalize: the largest exact resident set seen at a step's end. */
static int finalizing;
static long finalize_most_kb;

/* Inside MPI_Init: how many 64 KiB chunks of the profiler's code were resident at its last
 * release, the end of MPI_Init, where its peak is (-1: no release seen). */
static int initializing;
static int init_code_chunks = -1;

/* The 64 KiB chunks (as the kernel's fault-around takes them) of libmpistat_*'s code with a page
 * present (/proc/self/pagemap); -1 if they cannot be read. */
static int code_chunks(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    int pagemap = open("/proc/self/pagemap", O_RDONLY);
    char line[1024];
    int chunks = 0;
    unsigned long counted = 1; /* the last chunk counted (never an aligned address) */
    if (!maps || pagemap < 0) {
        if (maps) fclose(maps);
        if (pagemap >= 0) close(pagemap);
        return -1;
    }
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3 || strcmp(perms, "r-xp") != 0 ||
            !strstr(line, "/libmpistat_"))
            continue;
        for (unsigned long c = start & ~0xffffUL; c < end; c += 0x10000) {
            int present = 0;
            for (unsigned long a = c < start ? start : c; a < c + 0x10000 && a < end && !present;
                 a += 4096) {
                uint64_t entry;
                present = pread(pagemap, &entry, 8, (off_t)(a / 4096) * 8) == 8 && (entry >> 63);
            }
            /* The profiler maps its steady code page by page: a chunk spans several mappings. */
            if (present && c != counted) {
                chunks++;
                counted = c;
            }
        }
    }
    fclose(maps);
    close(pagemap);
    return chunks;
}

/* The profiler starts dropping what each finalize step mapped with malloc_trim
 * (profiler/src/footprint.rs): read the resident set there, with the step's code, heap and
 * stack still in it. */
int malloc_trim(size_t pad) {
    static int (*real)(size_t);
    if (finalizing) {
        long kb = exact_rss_kb();
        if (kb > finalize_most_kb) finalize_most_kb = kb;
    }
    if (initializing) init_code_chunks = code_chunks();
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "malloc_trim");
    return real ? real(pad) : 0;
}

/* Resets VmHWM to the present resident set (Linux >= 4.0); 0 on success. */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int ok;
    if (!f) return -1;
    ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void report_residency(int rank, const char *library, const char *label) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[1024];
    int in = 0; /* 1: code, 2: first read-only segment, 3: relocated read-only data */
    int past_code = 0; /* read-only mappings after the code are the relocated data's */
    unsigned long start, end, offset, rss_kb[4] = {0}, size_kb[4] = {0};
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %lx", &start, &end, perms, &offset) == 4) {
            in = 0;
            /* (By position, not by offset: the profiler maps the end of the first segment page
             * by page, so it is several mappings, at offsets other than 0.) */
            if (strstr(line, library) != NULL) {
                if (strcmp(perms, "r-xp") == 0) in = 1, past_code = 1;
                else if (strcmp(perms, "r--p") == 0) in = past_code ? 3 : 2;
            }
            if (in) size_kb[in] += (end - start) / 1024;
        } else if (in && strncmp(line, "Rss:", 4) == 0) {
            unsigned long kb;
            if (sscanf(line + 4, "%lu", &kb) == 1) rss_kb[in] += kb;
        }
    }
    fclose(f);
    printf("rank %d %scode rss_kb=%lu size_kb=%lu\n", rank, label, rss_kb[1], size_kb[1]);
    printf("rank %d %srodata rss_kb=%lu size_kb=%lu\n", rank, label, rss_kb[2], size_kb[2]);
    printf("rank %d %srelro rss_kb=%lu size_kb=%lu\n", rank, label, rss_kb[3], size_kb[3]);
}

/* The loaded libc's unwind tables: from its PT_GNU_EH_FRAME (`.eh_frame_hdr`) to the end of the
 * segment holding it. */
static int find_libc_unwind_tables(struct dl_phdr_info *info, size_t size, void *data) {
    unsigned long *range = data, header = 0;
    (void)size;
    if (!strstr(info->dlpi_name, "/libc.so.6")) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME) header = info->dlpi_phdr[i].p_vaddr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        if (header && segment->p_type == PT_LOAD && segment->p_vaddr <= header &&
            header < segment->p_vaddr + segment->p_memsz) {
            range[0] = info->dlpi_addr + header;
            range[1] = info->dlpi_addr + segment->p_vaddr + segment->p_memsz;
        }
    }
    return 1;
}

/* Prints how much of libc's unwind tables this process has mapped (pages present in
 * /proc/self/pagemap: in the page cache alone they do not count). */
static void report_libc_unwind_tables(int rank) {
    unsigned long range[2] = {0, 0}, pages = 0;
    uint64_t entry;
    int pagemap = open("/proc/self/pagemap", O_RDONLY);
    dl_iterate_phdr(find_libc_unwind_tables, range);
    if (pagemap < 0 || !range[1]) return;
    /* From the 64 KiB boundary after the tables' start: the chunk before it, which fault-around
     * maps for the end of `.rodata` too, is resident or not by where the loader placed libc. */
    range[0] = (range[0] | 0xffffUL) + 1;
    for (unsigned long a = range[0]; a < range[1]; a += 4096)
        if (pread(pagemap, &entry, 8, (off_t)(a / 4096) * 8) == 8 && (entry >> 63)) pages++;
    close(pagemap);
    printf("rank %d libc unwind rss_kb=%lu size_kb=%lu\n", rank, pages * 4,
           range[1] > range[0] ? (range[1] - range[0]) / 1024 : 0);
}

int main(int argc, char **argv) {
    int rank, size, flag;
    double x = 1, y = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status status;
    /* "pcontrol": each iteration also pauses counting around a barrier (an mpiP-style region). */
    int pause = argc > 1 && strcmp(argv[1], "pcontrol") == 0;
    int late = argc > 1 && strcmp(argv[1], "late") == 0;
    initializing = 1;
    MPI_Init(&argc, &argv);
    initializing = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 5000; i++) {
        MPI_Test(&req, &flag, &status);
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &status);
        MPI_Sendrecv(&x, 1, MPI_DOUBLE, (rank + 1) % size, 0, &y, 1, MPI_DOUBLE,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (pause) {
            MPI_Pcontrol(0);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Pcontrol(1);
        }
    }
    if (late) MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    printf("rank %d init code_chunks=%d\n", rank, init_code_chunks);
    report_residency(rank, "/libmpistat_", "");
    report_residency(rank, "/libmpistat.so", "front ");
    report_libc_unwind_tables(rank);
    fflush(stdout);
    long before = reset_peak() == 0 ? proc_kb("/proc/self/status", "VmHWM") : -1;
    long entry_kb = exact_rss_kb();
    finalize_most_kb = entry_kb;
    finalizing = 1;
    MPI_Finalize();
    finalizing = 0;
    long peak = proc_kb("/proc/self/status", "VmHWM");
    if (before >= 0 && peak >= 0) printf("rank %d finalize peak_kb=%ld\n", rank, peak - before);
    if (entry_kb >= 0) printf("rank %d finalize steps_kb=%ld\n", rank, finalize_most_kb - entry_kb);
    return 0;
}
