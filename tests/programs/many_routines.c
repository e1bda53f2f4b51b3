/* A job that calls well over 150 distinct MPI routines, each a few times, so that its record is
 * as big as records get (one entry per routine called). Run on exactly 2 ranks. Argument: a
 * directory for a scratch file (MPI-IO). Prints "r<rank> ok <n>" with a checksum of results. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, other;
static long sum;

static void add(long v) { sum = sum * 31 + v; }

static void env(void)
{
    char name[MPI_MAX_PROCESSOR_NAME], lib[MPI_MAX_LIBRARY_VERSION_STRING], err[MPI_MAX_ERROR_STRING];
    int len, v, sv, flag, cls, code;
    MPI_Get_processor_name(name, &len);
    MPI_Get_version(&v, &sv);
    MPI_Get_library_version(lib, &len);
    MPI_Initialized(&flag);
    MPI_Finalized(&flag);
    MPI_Query_thread(&v);
    MPI_Is_thread_main(&flag);
    MPI_Error_class(MPI_ERR_COUNT, &cls);
    MPI_Error_string(MPI_ERR_COUNT, err, &len);
    add(cls);
    add(MPI_Wtime() > 0);
    add(MPI_Wtick() > 0);
    MPI_Add_error_class(&cls);
    MPI_Add_error_code(cls, &code);
    MPI_Add_error_string(code, "mpistat test error");
    void *mem;
    MPI_Alloc_mem(1024, MPI_INFO_NULL, &mem);
    MPI_Free_mem(mem);
    MPI_Pcontrol(1);
}

static void info(void)
{
    MPI_Info a, b;
    char key[MPI_MAX_INFO_KEY], val[64];
    int n, flag, len;
    MPI_Info_create(&a);
    MPI_Info_set(a, "mpistat_key", "value");
    MPI_Info_get(a, "mpistat_key", sizeof val - 1, val, &flag);
    MPI_Info_get_nkeys(a, &n);
    MPI_Info_get_nthkey(a, 0, key);
    MPI_Info_get_valuelen(a, "mpistat_key", &len, &flag);
    MPI_Info_dup(a, &b);
    MPI_Info_delete(b, "mpistat_key");
    MPI_Info_free(&b);
    MPI_Info_free(&a);
    add(n + len);
}

static void groups(void)
{
    MPI_Group world, first, rest, u, i, d, ri, re;
    int zero = 0, r, s, cmp, ranks[2] = {0, 1}, out[2], range[1][3] = {{0, 0, 1}};
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_size(world, &s);
    MPI_Group_rank(world, &r);
    MPI_Group_incl(world, 1, &zero, &first);
    MPI_Group_excl(world, 1, &zero, &rest);
    MPI_Group_union(first, rest, &u);
    MPI_Group_intersection(u, world, &i);
    MPI_Group_difference(world, first, &d);
    MPI_Group_compare(u, world, &cmp);
    MPI_Group_translate_ranks(world, 2, ranks, u, out);
    MPI_Group_range_incl(world, 1, range, &ri);
    MPI_Group_range_excl(world, 1, range, &re);
    add(s + r + cmp + out[1]);
    MPI_Group *all[] = {&world, &first, &rest, &u, &i, &d, &ri, &re};
    for (unsigned k = 0; k < sizeof all / sizeof all[0]; k++)
        MPI_Group_free(all[k]);
}

static int copy_attr(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c, (void)k, (void)extra;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_attr(MPI_Comm c, int k, void *v, void *extra)
{
    (void)c, (void)k, (void)v, (void)extra;
    return MPI_SUCCESS;
}

static void quiet_handler(MPI_Comm *c, int *err, ...) { (void)c, (void)err; }

static void comms(void)
{
    MPI_Comm dup, dupi, idup, split, shared, created, grouped, inter, merged;
    MPI_Group world;
    MPI_Info inf;
    MPI_Request req;
    MPI_Errhandler eh, got;
    char name[MPI_MAX_OBJECT_NAME];
    int len, cmp, flag, key, legacy, *val, n, parent_null;
    static int attr = 42;
    MPI_Comm parent;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Info_create(&inf);
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, inf, &dupi);
    MPI_Comm_idup(MPI_COMM_WORLD, &idup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &split);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Comm_create(MPI_COMM_WORLD, world, &created);
    MPI_Comm_create_group(MPI_COMM_WORLD, world, 7, &grouped);
    MPI_Comm_compare(dup, MPI_COMM_WORLD, &cmp);
    MPI_Comm_set_name(dup, "mpistat-dup");
    MPI_Comm_get_name(dup, name, &len);
    MPI_Comm_set_info(dup, inf);
    MPI_Info_free(&inf);
    MPI_Comm_get_info(dup, &inf);
    MPI_Info_free(&inf);
    MPI_Comm_test_inter(dup, &flag);
    MPI_Comm_get_parent(&parent);
    parent_null = parent == MPI_COMM_NULL;
    add(cmp + len + flag + parent_null);

    MPI_Comm_create_keyval(copy_attr, delete_attr, &key, NULL);
    MPI_Comm_set_attr(dup, key, &attr);
    MPI_Comm_get_attr(dup, key, &val, &flag);
    MPI_Comm_delete_attr(dup, key);
    MPI_Comm_free_keyval(&key);
    MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &legacy, NULL);
    MPI_Attr_put(dup, legacy, &attr);
    MPI_Attr_get(dup, legacy, &val, &flag);
    MPI_Attr_delete(dup, legacy);
    MPI_Keyval_free(&legacy);
    add(*val);

    MPI_Comm_create_errhandler(quiet_handler, &eh);
    MPI_Comm_set_errhandler(dup, eh);
    MPI_Comm_get_errhandler(dup, &got);
    MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
    MPI_Errhandler_free(&got);
    MPI_Errhandler_free(&eh);

    /* Each rank alone in `split`; the two halves make an intercommunicator. */
    MPI_Intercomm_create(split, 0, MPI_COMM_WORLD, other, 11, &inter);
    MPI_Comm_remote_size(inter, &n);
    MPI_Group remote;
    MPI_Comm_remote_group(inter, &remote);
    MPI_Group_free(&remote);
    MPI_Intercomm_merge(inter, rank, &merged);
    add(n);

    MPI_Group_free(&world);
    MPI_Comm *all[] = {&dup, &dupi, &idup, &split, &shared, &created, &grouped, &inter, &merged};
    for (unsigned k = 0; k < sizeof all / sizeof all[0]; k++)
        MPI_Comm_free(all[k]);
}

static int type_copy(MPI_Datatype t, int k, void *extra, void *in, void *out, int *flag)
{
    (void)t, (void)k, (void)extra;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static void types(void)
{
    MPI_Datatype contig, vec, idx, hvec, hidx, iblk, hiblk, st, sub, dar, res, dup, f90i, f90r, f90c, m;
    int blens[2] = {1, 2}, displs[2] = {0, 3}, n, ni, na, nd, comb, flag, key, len;
    MPI_Aint hdispls[2] = {0, 16}, lb, extent, addr;
    MPI_Count size_x, lb_x, ext_x;
    double buf[8];
    MPI_Datatype types2[2] = {MPI_INT, MPI_DOUBLE};
    int sizes[2] = {4, 4}, subsizes[2] = {2, 2}, starts[2] = {1, 1};
    int gsizes[1] = {8}, distribs[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG},
        psizes[1] = {2};
    char name[MPI_MAX_OBJECT_NAME];
    static int attr = 5;
    int *val;

    MPI_Type_contiguous(4, MPI_INT, &contig);
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_indexed(2, blens, displs, MPI_INT, &idx);
    MPI_Type_create_hvector(2, 1, 16, MPI_DOUBLE, &hvec);
    MPI_Type_create_hindexed(2, blens, hdispls, MPI_INT, &hidx);
    MPI_Type_create_indexed_block(2, 1, displs, MPI_INT, &iblk);
    MPI_Type_create_hindexed_block(2, 1, hdispls, MPI_INT, &hiblk);
    MPI_Type_create_struct(2, blens, hdispls, types2, &st);
    MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &sub);
    MPI_Type_create_darray(2, rank, 1, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &dar);
    MPI_Type_create_resized(MPI_INT, 0, 8, &res);
    MPI_Type_dup(vec, &dup);
    MPI_Type_create_f90_integer(9, &f90i);
    MPI_Type_create_f90_real(6, 30, &f90r);
    MPI_Type_create_f90_complex(6, 30, &f90c);
    MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &m);
    MPI_Datatype *mine[] = {&contig, &vec, &idx, &hvec, &hidx, &iblk, &hiblk, &st, &sub, &dar, &res, &dup};
    for (unsigned k = 0; k < sizeof mine / sizeof mine[0]; k++)
        MPI_Type_commit(mine[k]);

    MPI_Type_size(st, &n);
    MPI_Type_size_x(st, &size_x);
    MPI_Type_get_extent(vec, &lb, &extent);
    MPI_Type_get_extent_x(vec, &lb_x, &ext_x);
    MPI_Type_get_true_extent(res, &lb, &extent);
    MPI_Type_get_true_extent_x(res, &lb_x, &ext_x);
    MPI_Type_set_name(dup, "mpistat-dup");
    MPI_Type_get_name(dup, name, &len);
    MPI_Type_get_envelope(dup, &ni, &na, &nd, &comb);
    MPI_Type_create_keyval(type_copy, MPI_TYPE_NULL_DELETE_FN, &key, NULL);
    MPI_Type_set_attr(dup, key, &attr);
    MPI_Type_get_attr(dup, key, &val, &flag);
    MPI_Type_delete_attr(dup, key);
    MPI_Type_free_keyval(&key);
    MPI_Get_address(&buf[1], &addr);
    add(n + (long)size_x + (long)ext_x + ni + na + nd + comb + *val + len);

    /* Pack and unpack, native and external32. */
    int in[4] = {1, 2, 3, 4}, back[4];
    char packed[256];
    int pos = 0, psize;
    MPI_Aint epos = 0, esize;
    MPI_Pack_size(4, MPI_INT, MPI_COMM_WORLD, &psize);
    MPI_Pack(in, 4, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD);
    pos = 0;
    MPI_Unpack(packed, sizeof packed, &pos, back, 4, MPI_INT, MPI_COMM_WORLD);
    MPI_Pack_external_size("external32", 4, MPI_INT, &esize);
    MPI_Pack_external("external32", in, 4, MPI_INT, packed, sizeof packed, &epos);
    epos = 0;
    MPI_Unpack_external("external32", packed, sizeof packed, &epos, back, 4, MPI_INT);
    add(psize + (long)esize + back[3]);

    /* Statuses. */
    MPI_Status status;
    int count, cancelled;
    MPI_Count count_x;
    MPI_Status_set_elements(&status, MPI_INT, 3);
    MPI_Get_elements(&status, MPI_INT, &count);
    MPI_Status_set_elements_x(&status, MPI_INT, 3);
    MPI_Get_elements_x(&status, MPI_INT, &count_x);
    MPI_Get_count(&status, MPI_INT, &count);
    MPI_Status_set_cancelled(&status, 0);
    MPI_Test_cancelled(&status, &cancelled);
    add(count + (long)count_x + cancelled);

    for (unsigned k = 0; k < sizeof mine / sizeof mine[0]; k++)
        MPI_Type_free(mine[k]);
}

static void my_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static MPI_Op op;

static void ops(void)
{
    int commute, a[2] = {1, 2}, b[2] = {3, 4};
    MPI_Op_create(my_sum, 1, &op);
    MPI_Op_commutative(op, &commute);
    MPI_Reduce_local(a, b, 2, MPI_INT, op);
    add(commute + b[1]);
}

static int greq_query(void *extra, MPI_Status *st)
{
    (void)extra;
    MPI_Status_set_elements(st, MPI_BYTE, 0);
    MPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}
static int greq_free(void *extra) { (void)extra; return MPI_SUCCESS; }
static int greq_cancel(void *extra, int done) { (void)extra, (void)done; return MPI_SUCCESS; }

static void p2p(void)
{
    int s = rank, r = -1, v[4] = {rank, rank, rank, rank}, flag, idx, outcount, idxs[2];
    MPI_Request q[2];
    MPI_Status st[2];
    MPI_Message msg;

    if (rank == 0) {
        MPI_Send(&s, 1, MPI_INT, other, 1, MPI_COMM_WORLD);
        MPI_Ssend(&s, 1, MPI_INT, other, 2, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&r, 1, MPI_INT, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(&r, 1, MPI_INT, other, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Sendrecv(&s, 1, MPI_INT, other, 3, &r, 1, MPI_INT, other, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv_replace(v, 4, MPI_INT, other, 4, other, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    add(r + v[0]);

    MPI_Irecv(&r, 1, MPI_INT, other, 5, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(&s, 1, MPI_INT, other, 5, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, st);
    MPI_Irecv(&r, 1, MPI_INT, other, 6, MPI_COMM_WORLD, &q[0]);
    MPI_Issend(&s, 1, MPI_INT, other, 6, MPI_COMM_WORLD, &q[1]);
    MPI_Waitany(2, q, &idx, st);
    MPI_Wait(&q[1 - idx], MPI_STATUS_IGNORE);
    MPI_Irecv(&r, 1, MPI_INT, other, 7, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(&s, 1, MPI_INT, other, 7, MPI_COMM_WORLD, &q[1]);
    outcount = 0;
    for (int done = 0; done < 2; done += outcount == MPI_UNDEFINED ? 0 : outcount)
        MPI_Waitsome(2, q, &outcount, idxs, st);
    MPI_Irecv(&r, 1, MPI_INT, other, 8, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(&s, 1, MPI_INT, other, 8, MPI_COMM_WORLD, &q[1]);
    do
        MPI_Testall(2, q, &flag, st);
    while (!flag);
    MPI_Irecv(&r, 1, MPI_INT, other, 9, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(&s, 1, MPI_INT, other, 9, MPI_COMM_WORLD, &q[1]);
    do
        MPI_Testany(2, q, &idx, &flag, st);
    while (!flag);
    do
        MPI_Test(&q[1 - idx], &flag, MPI_STATUS_IGNORE);
    while (!flag);
    MPI_Irecv(&r, 1, MPI_INT, other, 10, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(&s, 1, MPI_INT, other, 10, MPI_COMM_WORLD, &q[1]);
    for (int done = 0; done < 2;) {
        MPI_Testsome(2, q, &outcount, idxs, st);
        if (outcount != MPI_UNDEFINED)
            done += outcount;
    }
    add(r);

    /* Ready sends: the receive is posted before the barrier. */
    MPI_Irecv(&r, 1, MPI_INT, other, 12, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(v, 1, MPI_INT, other, 13, MPI_COMM_WORLD, &q[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Rsend(&s, 1, MPI_INT, other, 12, MPI_COMM_WORLD);
    MPI_Request rq;
    MPI_Irsend(&s, 1, MPI_INT, other, 13, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);

    /* Buffered sends. */
    int bsize = 4 * (MPI_BSEND_OVERHEAD + 64);
    void *bbuf = malloc(bsize), *detached;
    MPI_Buffer_attach(bbuf, bsize);
    MPI_Bsend(&s, 1, MPI_INT, other, 14, MPI_COMM_WORLD);
    MPI_Ibsend(&s, 1, MPI_INT, other, 15, MPI_COMM_WORLD, &rq);
    MPI_Recv(&r, 1, MPI_INT, other, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&r, 1, MPI_INT, other, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);

    /* Persistent requests. */
    MPI_Request pq[2];
    MPI_Recv_init(&r, 1, MPI_INT, other, 16, MPI_COMM_WORLD, &pq[0]);
    MPI_Send_init(&s, 1, MPI_INT, other, 16, MPI_COMM_WORLD, &pq[1]);
    MPI_Startall(2, pq);
    MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
    MPI_Start(&pq[0]);
    MPI_Request ps;
    MPI_Ssend_init(&s, 1, MPI_INT, other, 16, MPI_COMM_WORLD, &ps);
    MPI_Start(&ps);
    MPI_Wait(&pq[0], MPI_STATUS_IGNORE);
    MPI_Wait(&ps, MPI_STATUS_IGNORE);
    MPI_Request_free(&ps);
    MPI_Bsend_init(&s, 1, MPI_INT, other, 16, MPI_COMM_WORLD, &ps);
    MPI_Start(&pq[0]);
    MPI_Start(&ps);
    MPI_Wait(&pq[0], MPI_STATUS_IGNORE);
    MPI_Wait(&ps, MPI_STATUS_IGNORE);
    MPI_Request_free(&ps);
    MPI_Start(&pq[0]); /* posted before the barrier: the ready send below finds it */
    MPI_Rsend_init(&s, 1, MPI_INT, other, 16, MPI_COMM_WORLD, &ps);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Start(&ps);
    MPI_Wait(&ps, MPI_STATUS_IGNORE);
    MPI_Wait(&pq[0], MPI_STATUS_IGNORE);
    MPI_Request_free(&ps);
    MPI_Request_free(&pq[0]);
    MPI_Request_free(&pq[1]);
    MPI_Buffer_detach(&detached, &bsize);
    free(bbuf);

    /* Probes and matched receives. */
    MPI_Send(&s, 1, MPI_INT, other, 20, MPI_COMM_WORLD);
    MPI_Send(&s, 1, MPI_INT, other, 21, MPI_COMM_WORLD);
    MPI_Send(&s, 1, MPI_INT, other, 22, MPI_COMM_WORLD);
    MPI_Send(&s, 1, MPI_INT, other, 23, MPI_COMM_WORLD);
    MPI_Probe(other, 20, MPI_COMM_WORLD, st);
    MPI_Recv(&r, 1, MPI_INT, other, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    do
        MPI_Iprobe(other, 21, MPI_COMM_WORLD, &flag, st);
    while (!flag);
    MPI_Recv(&r, 1, MPI_INT, other, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Mprobe(other, 22, MPI_COMM_WORLD, &msg, st);
    MPI_Mrecv(&r, 1, MPI_INT, &msg, MPI_STATUS_IGNORE);
    do
        MPI_Improbe(other, 23, MPI_COMM_WORLD, &flag, &msg, st);
    while (!flag);
    MPI_Imrecv(&r, 1, MPI_INT, &msg, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);

    /* A receive nobody sends to, cancelled. */
    MPI_Irecv(&r, 1, MPI_INT, other, 99, MPI_COMM_WORLD, &rq);
    MPI_Cancel(&rq);
    MPI_Wait(&rq, st);
    MPI_Test_cancelled(st, &flag);
    add(flag);

    /* A generalized request, completed at once. */
    MPI_Grequest_start(greq_query, greq_free, greq_cancel, NULL, &rq);
    MPI_Grequest_complete(rq);
    MPI_Request_get_status(rq, &flag, st);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    add(flag);
}

static void collectives(void)
{
    int s[2] = {rank + 1, rank + 2}, r[4], counts[2] = {1, 1}, displs[2] = {0, 1}, one[2] = {1, 1};
    int bytes_displs[2] = {0, sizeof(int)};
    MPI_Datatype ints[2] = {MPI_INT, MPI_INT};
    MPI_Request q[17];
    int rr[17][4];

    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(s, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(s, 1, MPI_INT, r, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gatherv(s, 1, MPI_INT, r, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatter(s, 1, MPI_INT, r, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatterv(s, counts, displs, MPI_INT, r, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allgather(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Allgatherv(s, 1, MPI_INT, r, counts, displs, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoall(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallv(s, counts, displs, MPI_INT, r, counts, displs, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallw(s, one, bytes_displs, ints, r, one, bytes_displs, ints, MPI_COMM_WORLD);
    MPI_Reduce(s, r, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(s, r, 2, MPI_INT, op, MPI_COMM_WORLD);
    MPI_Reduce_scatter(s, r, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(s, r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Scan(s, r, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(s, r, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    add(r[0]);

    MPI_Ibarrier(MPI_COMM_WORLD, &q[0]);
    MPI_Ibcast(s, 1, MPI_INT, 0, MPI_COMM_WORLD, &q[1]);
    MPI_Igather(s, 1, MPI_INT, rr[2], 1, MPI_INT, 0, MPI_COMM_WORLD, &q[2]);
    MPI_Igatherv(s, 1, MPI_INT, rr[3], counts, displs, MPI_INT, 0, MPI_COMM_WORLD, &q[3]);
    MPI_Iscatter(s, 1, MPI_INT, rr[4], 1, MPI_INT, 0, MPI_COMM_WORLD, &q[4]);
    MPI_Iscatterv(s, counts, displs, MPI_INT, rr[5], 1, MPI_INT, 0, MPI_COMM_WORLD, &q[5]);
    MPI_Iallgather(s, 1, MPI_INT, rr[6], 1, MPI_INT, MPI_COMM_WORLD, &q[6]);
    MPI_Iallgatherv(s, 1, MPI_INT, rr[7], counts, displs, MPI_INT, MPI_COMM_WORLD, &q[7]);
    MPI_Ialltoall(s, 1, MPI_INT, rr[8], 1, MPI_INT, MPI_COMM_WORLD, &q[8]);
    MPI_Ialltoallv(s, counts, displs, MPI_INT, rr[9], counts, displs, MPI_INT, MPI_COMM_WORLD, &q[9]);
    MPI_Ialltoallw(s, one, bytes_displs, ints, rr[10], one, bytes_displs, ints, MPI_COMM_WORLD, &q[10]);
    MPI_Ireduce(s, rr[11], 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &q[11]);
    MPI_Iallreduce(s, rr[12], 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[12]);
    MPI_Ireduce_scatter(s, rr[13], counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[13]);
    MPI_Ireduce_scatter_block(s, rr[14], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[14]);
    MPI_Iscan(s, rr[15], 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[15]);
    MPI_Iexscan(s, rr[16], 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[16]);
    MPI_Waitall(17, q, MPI_STATUSES_IGNORE);
    add(rr[12][1]);
}

static void topology(void)
{
    int dims[1] = {0}, periods[1] = {1}, coords[1], crank, ndims, src, dst, keep[1] = {1}, newrank, status;
    MPI_Comm cart, sub, graph, dist;
    MPI_Dims_create(size, 1, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    MPI_Cart_get(cart, 1, dims, periods, coords);
    MPI_Cartdim_get(cart, &ndims);
    MPI_Cart_rank(cart, coords, &crank);
    MPI_Cart_coords(cart, crank, 1, coords);
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    MPI_Cart_sub(cart, keep, &sub);
    MPI_Cart_map(MPI_COMM_WORLD, 1, dims, periods, &newrank);
    MPI_Topo_test(cart, &status);
    add(ndims + crank + src + dst + newrank + status);

    int index[2] = {1, 2}, edges[2] = {1, 0}, nnodes, nedges, nn, nb[2], gidx[2], gedges[2];
    MPI_Graph_create(MPI_COMM_WORLD, 2, index, edges, 0, &graph);
    MPI_Graphdims_get(graph, &nnodes, &nedges);
    MPI_Graph_get(graph, 2, 2, gidx, gedges);
    MPI_Graph_neighbors_count(graph, rank, &nn);
    MPI_Graph_neighbors(graph, rank, 2, nb);
    MPI_Graph_map(MPI_COMM_WORLD, 2, index, edges, &newrank);
    add(nnodes + nedges + nn + nb[0] + newrank);

    int peer[1] = {other}, indeg, outdeg, weighted, srcs[1], dsts[1];
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, peer, MPI_UNWEIGHTED, 1, peer, MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &dist);
    MPI_Dist_graph_neighbors_count(dist, &indeg, &outdeg, &weighted);
    MPI_Dist_graph_neighbors(dist, 1, srcs, MPI_UNWEIGHTED, 1, dsts, MPI_UNWEIGHTED);
    int s = rank, r[2], one[1] = {1}, zero[1] = {0};
    MPI_Aint azero[1] = {0};
    MPI_Datatype t[1] = {MPI_INT};
    MPI_Request q[5];
    MPI_Neighbor_allgather(&s, 1, MPI_INT, r, 1, MPI_INT, dist);
    MPI_Neighbor_allgatherv(&s, 1, MPI_INT, r, one, zero, MPI_INT, dist);
    MPI_Neighbor_alltoall(&s, 1, MPI_INT, r, 1, MPI_INT, dist);
    MPI_Neighbor_alltoallv(&s, one, zero, MPI_INT, r, one, zero, MPI_INT, dist);
    MPI_Neighbor_alltoallw(&s, one, azero, t, r, one, azero, t, dist);
    int rs[5][2];
    MPI_Ineighbor_allgather(&s, 1, MPI_INT, rs[0], 1, MPI_INT, dist, &q[0]);
    MPI_Ineighbor_allgatherv(&s, 1, MPI_INT, rs[1], one, zero, MPI_INT, dist, &q[1]);
    MPI_Ineighbor_alltoall(&s, 1, MPI_INT, rs[2], 1, MPI_INT, dist, &q[2]);
    MPI_Ineighbor_alltoallv(&s, one, zero, MPI_INT, rs[3], one, zero, MPI_INT, dist, &q[3]);
    MPI_Ineighbor_alltoallw(&s, one, azero, t, rs[4], one, azero, t, dist, &q[4]);
    MPI_Waitall(5, q, MPI_STATUSES_IGNORE);
    add(indeg + outdeg + srcs[0] + r[0] + rs[4][0]);

    MPI_Comm_free(&cart);
    MPI_Comm_free(&sub);
    MPI_Comm_free(&graph);
    MPI_Comm_free(&dist);
}

static void files(const char *dir)
{
    char path[4096];
    MPI_File fh;
    MPI_Offset fsize, pos, disp;
    MPI_Info inf;
    MPI_Group g;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    int amode, v = rank, r = -1;
    MPI_Aint ext;
    MPI_Request q;

    snprintf(path, sizeof path, "%s/many_routines.dat", dir);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_File_set_size(fh, 0);
    MPI_File_preallocate(fh, 64);
    MPI_File_get_size(fh, &fsize);
    MPI_File_get_group(fh, &g);
    MPI_Group_free(&g);
    MPI_File_get_amode(fh, &amode);
    MPI_Info_create(&inf);
    MPI_File_set_info(fh, inf);
    MPI_Info_free(&inf);
    MPI_File_get_info(fh, &inf);
    MPI_Info_free(&inf);
    MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    MPI_File_get_view(fh, &disp, &et, &ft, rep);
    MPI_File_get_type_extent(fh, MPI_INT, &ext);
    MPI_File_set_atomicity(fh, 0);
    MPI_File_get_atomicity(fh, &amode);
    MPI_File_write_at(fh, rank, &v, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_write_at_all(fh, 2 + rank, &v, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_sync(fh);
    MPI_File_read_at(fh, other, &r, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_read_at_all(fh, 2 + other, &r, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_iwrite_at(fh, 4 + rank, &v, 1, MPI_INT, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_File_iread_at(fh, 4 + rank, &r, 1, MPI_INT, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 6 + rank, MPI_SEEK_SET);
    MPI_File_get_position(fh, &pos);
    MPI_File_get_byte_offset(fh, pos, &disp);
    MPI_File_write(fh, &v, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 6 + rank, MPI_SEEK_SET);
    MPI_File_read(fh, &r, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 8 + 2 * rank, MPI_SEEK_SET);
    MPI_File_write_all(fh, &v, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 8 + 2 * rank, MPI_SEEK_SET);
    MPI_File_read_all(fh, &r, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_get_position_shared(fh, &pos);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    add((long)fsize + r + (long)ext);
}

static void windows(void)
{
    int v = 1, res = -1, cmp = 0, *base, *shared, disp_unit, len;
    MPI_Aint ssize;
    MPI_Win win, swin;
    MPI_Group g;
    char name[MPI_MAX_OBJECT_NAME];

    /* Allocated windows: Open MPI's shared-memory component serves them on one node. */
    MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < 4; i++)
        base[i] = rank;
    MPI_Win_set_name(win, "mpistat-win");
    MPI_Win_get_name(win, name, &len);
    MPI_Win_get_group(win, &g);
    MPI_Group_free(&g);
    MPI_Win_fence(0, win);
    MPI_Put(&v, 1, MPI_INT, other, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Get(&res, 1, MPI_INT, other, 1, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Accumulate(&v, 1, MPI_INT, other, 2, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    MPI_Win_lock(MPI_LOCK_SHARED, other, 0, win);
    MPI_Get_accumulate(&v, 1, MPI_INT, &res, 1, MPI_INT, other, 3, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_flush(other, win);
    MPI_Fetch_and_op(&v, &res, MPI_INT, other, 3, MPI_SUM, win);
    MPI_Win_flush_local(other, win);
    MPI_Compare_and_swap(&v, &cmp, &res, MPI_INT, other, 0, win);
    MPI_Win_unlock(other, win);
    MPI_Win_lock_all(0, win);
    MPI_Win_flush_all(win);
    MPI_Win_flush_local_all(win);
    MPI_Win_sync(win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);

    MPI_Win_allocate_shared(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &shared, &swin);
    MPI_Win_shared_query(swin, other, &ssize, &disp_unit, &base);
    MPI_Win_free(&swin);
    add(len + res + (long)ssize + disp_unit);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "run on 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    other = 1 - rank;
    env();
    info();
    groups();
    comms();
    types();
    ops();
    p2p();
    collectives();
    topology();
    files(argc > 1 ? argv[1] : "/tmp");
    windows();
    MPI_Op_free(&op);
    printf("r%d ok %ld\n", rank, sum);
    MPI_Finalize();
    return 0;
}
