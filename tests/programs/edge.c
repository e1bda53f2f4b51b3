/* Edge inputs that a wrapper must pass through unchanged. Run on 4 ranks. Every rank prints lines
 * "r<rank> <what> <values>" with every result, status field, flag, error code and error class;
 * the test compares a profiled run's output with a bare run's (sorted lines). Nothing printed
 * depends on addresses or timing. */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int rank, size;

#define SHOW(what, fmt, ...) printf("r%d " what " " fmt "\n", rank, __VA_ARGS__)

static void show_status(const char *what, MPI_Status *st, MPI_Datatype type)
{
    int count = -7;
    MPI_Get_count(st, type, &count);
    printf("r%d %s status source %d tag %d count %d\n", rank, what, st->MPI_SOURCE, st->MPI_TAG, count);
}

static void show_error(const char *what, int err)
{
    int cls = -1;
    MPI_Error_class(err, &cls);
    printf("r%d %s error %s class %d\n", rank, what, err == MPI_SUCCESS ? "none" : "set", cls);
}

static void in_place(void)
{
    int v[3] = {rank, 2 * rank, 3};
    MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    SHOW("allreduce_in_place", "%d %d %d", v[0], v[1], v[2]);
    int g[8];
    for (int i = 0; i < 8; i++)
        g[i] = -1;
    g[2 * rank] = 10 * rank;
    g[2 * rank + 1] = 10 * rank + 1;
    /* With MPI_IN_PLACE the send count and type are ignored: pass garbage to prove it. */
    MPI_Allgather(MPI_IN_PLACE, -5, MPI_DATATYPE_NULL, g, 2, MPI_INT, MPI_COMM_WORLD);
    SHOW("allgather_in_place", "%d %d %d %d %d %d %d %d", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
}

static void bottom(void)
{
    /* An absolute-address struct type: int a and double b, used with MPI_BOTTOM. */
    int a = rank == 0 ? 42 : -1;
    double b = rank == 0 ? 2.5 : -1;
    MPI_Aint disp[2];
    MPI_Get_address(&a, &disp[0]);
    MPI_Get_address(&b, &disp[1]);
    int lens[2] = {1, 1};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, abs_type;
    MPI_Type_create_struct(2, lens, disp, types, &abs_type);
    MPI_Type_commit(&abs_type);
    MPI_Bcast(MPI_BOTTOM, 1, abs_type, 0, MPI_COMM_WORLD);
    SHOW("bottom_bcast", "%d %.2f", a, b);
    if (rank == 0) {
        a = 43;
        b = 3.5;
        MPI_Send(MPI_BOTTOM, 1, abs_type, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Status st;
        MPI_Recv(MPI_BOTTOM, 1, abs_type, 0, 5, MPI_COMM_WORLD, &st);
        SHOW("bottom_recv", "%d %.2f", a, b);
        show_status("bottom_recv", &st, abs_type);
    }
    MPI_Type_free(&abs_type);
}

static void ignored_statuses_and_null_requests(void)
{
    int x = rank, y = -1, flag = -1, index = -2;
    MPI_Request r[2];
    MPI_Irecv(&y, 1, MPI_INT, (rank + size - 1) % size, 9, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(&x, 1, MPI_INT, (rank + 1) % size, 9, MPI_COMM_WORLD, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    SHOW("statuses_ignore", "%d %d %d", y, r[0] == MPI_REQUEST_NULL, r[1] == MPI_REQUEST_NULL);

    MPI_Request null = MPI_REQUEST_NULL, nulls[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st, sts[3];
    memset(&st, 0x55, sizeof st);
    int err = MPI_Wait(&null, &st);
    SHOW("wait_null", "err %d source %d tag %d null %d", err, st.MPI_SOURCE, st.MPI_TAG, null == MPI_REQUEST_NULL);
    err = MPI_Waitall(3, nulls, sts);
    SHOW("waitall_null", "err %d source %d tag %d", err, sts[2].MPI_SOURCE, sts[2].MPI_TAG);
    err = MPI_Test(&null, &flag, &st);
    SHOW("test_null", "err %d flag %d source %d tag %d", err, flag, st.MPI_SOURCE, st.MPI_TAG);
    err = MPI_Waitany(3, nulls, &index, MPI_STATUS_IGNORE);
    SHOW("waitany_null", "err %d index %d", err, index);
    err = MPI_Testall(3, nulls, &flag, MPI_STATUSES_IGNORE);
    SHOW("testall_null", "err %d flag %d", err, flag);
}

static void proc_null(void)
{
    int buf[4] = {7, 7, 7, 7};
    MPI_Status st;
    memset(&st, 0x55, sizeof st);
    int err = MPI_Send(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    SHOW("send_proc_null", "err %d", err);
    err = MPI_Recv(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st);
    SHOW("recv_proc_null", "err %d buf %d", err, buf[0]);
    show_status("recv_proc_null", &st, MPI_INT);
    MPI_Request r;
    err = MPI_Irecv(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, &st);
    show_status("irecv_proc_null", &st, MPI_INT);
    err = MPI_Sendrecv(buf, 4, MPI_INT, MPI_PROC_NULL, 1, buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st);
    SHOW("sendrecv_proc_null", "err %d", err);
    show_status("sendrecv_proc_null", &st, MPI_INT);
}

static void derived_types(void)
{
    /* vector: 3 blocks of 2 ints, stride 4; indexed: blocks (2 at 0, 1 at 5, 3 at 8);
     * struct: {int, double} with natural layout. Rank 0 sends each to rank 2. */
    struct pair {
        int i;
        double d;
    };
    MPI_Datatype vec, idx, st_type;
    MPI_Type_vector(3, 2, 4, MPI_INT, &vec);
    int blens[3] = {2, 1, 3}, displs[3] = {0, 5, 8};
    MPI_Type_indexed(3, blens, displs, MPI_INT, &idx);
    int slens[2] = {1, 1};
    MPI_Aint sdisp[2] = {offsetof(struct pair, i), offsetof(struct pair, d)};
    MPI_Datatype stypes[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Type_create_struct(2, slens, sdisp, stypes, &st_type);
    MPI_Type_commit(&vec);
    MPI_Type_commit(&idx);
    MPI_Type_commit(&st_type);
    int v[12], w[12];
    struct pair p[2];
    for (int i = 0; i < 12; i++)
        v[i] = w[i] = rank == 0 ? 100 + i : -1;
    for (int i = 0; i < 2; i++) {
        p[i].i = rank == 0 ? 7 + i : -1;
        p[i].d = rank == 0 ? 0.25 + i : -1;
    }
    if (rank == 0) {
        MPI_Send(v, 1, vec, 2, 20, MPI_COMM_WORLD);
        MPI_Send(w, 1, idx, 2, 21, MPI_COMM_WORLD);
        MPI_Send(p, 2, st_type, 2, 22, MPI_COMM_WORLD);
    } else if (rank == 2) {
        MPI_Status st;
        MPI_Recv(v, 1, vec, 0, 20, MPI_COMM_WORLD, &st);
        show_status("vector", &st, MPI_INT);
        MPI_Recv(w, 1, idx, 0, 21, MPI_COMM_WORLD, &st);
        show_status("indexed", &st, MPI_INT);
        MPI_Recv(p, 2, st_type, 0, 22, MPI_COMM_WORLD, &st);
        show_status("struct", &st, st_type);
        for (int i = 0; i < 12; i++)
            printf("r%d vector_indexed %d %d %d\n", rank, i, v[i], w[i]);
        SHOW("struct_data", "%d %.2f %d %.2f", p[0].i, p[0].d, p[1].i, p[1].d);
    }
    int sz;
    MPI_Type_size(st_type, &sz);
    SHOW("type_sizes", "%d", sz);
    MPI_Type_free(&vec);
    MPI_Type_free(&idx);
    MPI_Type_free(&st_type);
}

static void zero_counts(void)
{
    int x = 5, y = 6;
    MPI_Status st;
    if (rank == 0) {
        MPI_Send(&x, 0, MPI_INT, 3, 30, MPI_COMM_WORLD);
    } else if (rank == 3) {
        MPI_Recv(&y, 1, MPI_INT, 0, 30, MPI_COMM_WORLD, &st);
        show_status("zero_recv", &st, MPI_INT);
    }
    MPI_Bcast(&x, 0, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&x, &y, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    SHOW("zero_collectives", "%d %d", x, y);
}

static void intercommunicator(void)
{
    /* Even ranks form group A, odd ranks group B; leaders are world ranks 0 and 1. */
    int color = rank % 2;
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local);
    int lrank;
    MPI_Comm_rank(local, &lrank);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color == 0 ? 1 : 0, 77, &inter);
    int flag, rsize;
    MPI_Comm_test_inter(inter, &flag);
    MPI_Comm_remote_size(inter, &rsize);
    SHOW("inter", "flag %d remote_size %d", flag, rsize);
    int v[2] = {-1, -1};
    if (color == 0) {
        if (lrank == 0) {
            v[0] = 123;
            v[1] = 456;
        }
        MPI_Bcast(v, 2, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    } else {
        MPI_Bcast(v, 2, MPI_INT, 0, inter);
    }
    SHOW("inter_bcast", "%d %d", v[0], v[1]);
    int mine = rank + 1, sum = -1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, inter);
    SHOW("inter_allreduce", "%d", sum);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
}

/* Repeated MPI_Allreduce calls take the wrappers' steady path, which passes MPI the count of the
   memo it was found equal to (not in place; in place the memo holds its complement): runs of
   each form and count, each run's first call a miss that changes the memo. */
static void steady_counts(void)
{
    const int counts[] = {2, 3, 2};
    for (int form = 0; form < 2; form++)
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 3; i++) {
                int n = counts[c], in[3] = {rank + i, 2 * rank + c, 5}, out[3] = {-1, -1, -1};
                if (form == 0)
                    MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
                else
                    MPI_Allreduce(MPI_IN_PLACE, memcpy(out, in, sizeof in), n, MPI_INT, MPI_SUM,
                                  MPI_COMM_WORLD);
                SHOW("steady_allreduce", "form %d count %d call %d: %d %d %d", form, n, i, out[0], out[1],
                     out[2]);
            }
}

static void errors_returned(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int x = 1;
    show_error("send_invalid_rank", MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD));
    show_error("send_negative_count", MPI_Send(&x, -1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD));
    show_error("bcast_invalid_root", MPI_Bcast(&x, 1, MPI_INT, size + 1, MPI_COMM_WORLD));
    show_error("allreduce_null_type", MPI_Allreduce(&x, &x, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD));
    /* The operation is no part of the wrappers' memo: after two good calls with these
       arguments, one with MPI_OP_NULL takes the steady path and fails there. */
    int y = 0;
    for (int i = 0; i < 2; i++)
        show_error("allreduce_good", MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    show_error("allreduce_null_op", MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        if (rank == 0)
            fprintf(stderr, "edge: run on 4 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    in_place();
    bottom();
    ignored_statuses_and_null_requests();
    proc_null();
    derived_types();
    zero_counts();
    intercommunicator();
    steady_counts();
    errors_returned();
    MPI_Barrier(MPI_COMM_WORLD);
    SHOW("done", "%d", 1);
    MPI_Finalize();
    return 0;
}
