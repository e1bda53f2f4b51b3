/* What the MPI library maps for each of the calls the profiler's MPI_Finalize makes, one at a
 * time (docs/footprint.md, "The MPI library's own code"): after tests/programs/footprint.c's loop
 * (no profiler), it runs the calls named by its argument in order and prints, per rank, the
 * 64 KiB chunks of the MPI libraries (and libc) newly present in /proc/self/pagemap after each:
 *
 *     mpicc.mpich -O2 -o calls bench/finalize_mpi_calls.c
 *     mpirun.mpich -np 2 ./calls dup,bor,sum,min,max,maxloc,rsum,rmin,rmax,ver,p2p
 *
 * dup: MPI_Comm_dup of MPI_COMM_WORLD (later calls use it); the other ways to a communicator of
 * one's own (each also becomes the one later calls use): cgroup: MPI_Comm_create_group of
 * MPI_COMM_WORLD's group (its MPI_Comm_group first); create: MPI_Comm_create with that group;
 * split: MPI_Comm_split (one color, key = rank); idup: MPI_Comm_idup and MPI_Wait; dupinfo:
 * MPI_Comm_dup_with_info (MPI_INFO_NULL); seterr: MPI_Comm_set_errhandler(MPI_ERRORS_RETURN) on
 * the current one; wret: MPI_Comm_get_errhandler of MPI_COMM_WORLD (kept) and MPI_ERRORS_RETURN set
 * on it; wback: the kept one set back and freed. With MPISTAT_CALLS_NO_LOOP=1 in the environment the program's loop is skipped,
 * so that the calls run right after MPI_Init (what making the communicator there would map).
 * bor/sum/min/max: MPI_Allreduce on
 * MPI_UINT64_T; rsum/rmin/rmax: MPI_Reduce on it; maxloc: MPI_Reduce of MPI_LONG_INT with
 * MPI_MAXLOC; ver: MPI_Get_library_version; p2p: MPI_Send from rank 1, MPI_Recv on rank 0;
 * barrier; free: MPI_Comm_free. The order matters: a chunk counts for the first call that maps
 * it, so run several orders. */
#define _GNU_SOURCE
#include <mpi.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define MAXC 100000
static unsigned long seen[MAXC]; static int nseen;
static int rank;
static int known(unsigned long k){for(int i=0;i<nseen;i++)if(seen[i]==k)return 1;return 0;}
static void walk(const char *label, int print) {
    FILE *maps = fopen("/proc/self/maps", "r"); int pm = open("/proc/self/pagemap", O_RDONLY);
    char line[1024]; int added = 0; char detail[8192] = "";
    while (fgets(line, sizeof line, maps)) {
        unsigned long s, e, o; char p[8]; int n = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &s, &e, p, &o, &n) < 4) continue;
        char *name = line + n; name[strcspn(name, "\n")] = 0;
        const char *libs[] = {"libmpich", "libmpi.so", "mca_", "libucp", "libuct", "libucs", "libopen-pal", "libc.so", "libhwloc", "libpmix", "libopen-rte", 0};
        int li = -1; for (int i = 0; libs[i]; i++) if (strstr(name, libs[i])) { li = i; break; }
        if (li < 0) continue;
        for (unsigned long c = s & ~0xffffUL; c < e; c += 0x10000) {
            unsigned long from = c < s ? s : c; int pages = 0; uint64_t ent;
            for (unsigned long a = from; a < c + 0x10000 && a < e; a += 4096)
                if (pread(pm, &ent, 8, (off_t)(a / 4096) * 8) == 8 && (ent >> 63)) pages++;
            if (!pages) continue;
            unsigned long key = c;
            if (!known(key)) { if (nseen < MAXC) seen[nseen++] = key; added += pages * 4;
                if (print) { char b[256]; snprintf(b, sizeof b, " %s:%s:%lx(%dk)", strrchr(name,'/')+1, p, o + (from - s), pages*4); strncat(detail, b, sizeof detail - strlen(detail) - 1);} }
        }
    }
    fclose(maps); close(pm);
    if (print) printf("rank %d %-28s +%4d kB%s\n", rank, label, added, detail);
}
int main(int argc, char **argv) {
    int size, flag; double x = 1, y = 0; MPI_Request req = MPI_REQUEST_NULL; MPI_Status status;
    const char *order = argc > 1 ? argv[1] : "dup,bor,sum,min,max,maxloc,rsum,rmin,rmax,ver,p2p";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    int loops = getenv("MPISTAT_CALLS_NO_LOOP") ? 0 : 5000;
    for (int i = 0; i < loops; i++) {
        MPI_Test(&req, &flag, &status);
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &status);
        MPI_Sendrecv(&x, 1, MPI_DOUBLE, (rank + 1) % size, 0, &y, 1, MPI_DOUBLE, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    walk("base", 0);
    MPI_Comm c = MPI_COMM_WORLD;
    MPI_Errhandler kept = MPI_ERRHANDLER_NULL;
    static uint64_t a[700], b[700]; struct { long v; int r; } la[100], lb[100];
    for (int i = 0; i < 700; i++) a[i] = i * rank;
    for (int i = 0; i < 100; i++) {
        la[i].v = i;
        la[i].r = rank;
    }
    char *ord = strdup(order);
    for (char *t = strtok(ord, ","); t; t = strtok(NULL, ",")) {
        if (!strcmp(t, "dup")) MPI_Comm_dup(MPI_COMM_WORLD, &c);
        else if (!strcmp(t, "cgroup") || !strcmp(t, "create")) {
            MPI_Group g;
            MPI_Comm_group(MPI_COMM_WORLD, &g);
            if (t[1] == 'g') MPI_Comm_create_group(MPI_COMM_WORLD, g, 0x6d73, &c);
            else MPI_Comm_create(MPI_COMM_WORLD, g, &c);
            MPI_Group_free(&g);
        }
        else if (!strcmp(t, "split")) MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c);
        else if (!strcmp(t, "idup")) { MPI_Request r; MPI_Comm_idup(MPI_COMM_WORLD, &c, &r); MPI_Wait(&r, MPI_STATUS_IGNORE); }
        else if (!strcmp(t, "dupinfo")) MPI_Comm_dup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &c);
        else if (!strcmp(t, "seterr")) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        else if (!strcmp(t, "wret")) { MPI_Comm_get_errhandler(MPI_COMM_WORLD, &kept); MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); }
        else if (!strcmp(t, "wback")) { MPI_Comm_set_errhandler(MPI_COMM_WORLD, kept); MPI_Errhandler_free(&kept); }
        else if (!strcmp(t, "bor")) MPI_Allreduce(a, b, 613, MPI_UINT64_T, MPI_BOR, c);
        else if (!strcmp(t, "sum")) MPI_Allreduce(a, b, 4, MPI_UINT64_T, MPI_SUM, c);
        else if (!strcmp(t, "min")) MPI_Allreduce(a, b, 4, MPI_UINT64_T, MPI_MIN, c);
        else if (!strcmp(t, "max")) MPI_Allreduce(a, b, 4, MPI_UINT64_T, MPI_MAX, c);
        else if (!strcmp(t, "rsum")) MPI_Reduce(a, b, 40, MPI_UINT64_T, MPI_SUM, 0, c);
        else if (!strcmp(t, "rmin")) MPI_Reduce(a, b, 40, MPI_UINT64_T, MPI_MIN, 0, c);
        else if (!strcmp(t, "rmax")) MPI_Reduce(a, b, 40, MPI_UINT64_T, MPI_MAX, 0, c);
        else if (!strcmp(t, "maxloc")) MPI_Reduce(la, lb, 40, MPI_LONG_INT, MPI_MAXLOC, 0, c);
        else if (!strcmp(t, "ver")) { char v[MPI_MAX_LIBRARY_VERSION_STRING]; int l; MPI_Get_library_version(v, &l); }
        else if (!strcmp(t, "p2p")) { if (rank == 0) MPI_Recv(b, 40, MPI_UINT64_T, 1, 7, c, MPI_STATUS_IGNORE); else if (rank == 1) MPI_Send(a, 40, MPI_UINT64_T, 0, 7, c); }
        else if (!strcmp(t, "free")) MPI_Comm_free(&c);
        else if (!strcmp(t, "barrier")) MPI_Barrier(c);
        walk(t, 1);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
