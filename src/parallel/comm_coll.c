/* The collectives of the comm API over MPI. Each API call counts itself in
 * the group's statistics, turns size_t counts into the ints MPI takes
 * (splitting or refusing what does not fit, see comm.h), and makes one
 * blocking MPI call or starts non-blocking ones in a request. Blocking calls
 * use MPI's blocking collectives (often better tuned than the non-blocking
 * ones), not a start followed by a wait.
 *
 * A device comm (comm_device_create) goes to its backend first thing; its
 * blocking calls are the backend's start followed by comm_wait. */
#include "parallel/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_internal.h"
#include "parallel/mpi_check.h"
#include "util/error.h"

MPI_Datatype comm_mpi_type(comm_dtype_t t)
{
    switch (t) {
    case COMM_F32: return MPI_FLOAT;
    case COMM_F64: return MPI_DOUBLE;
    case COMM_I32: return MPI_INT32_T;
    case COMM_I64: return MPI_INT64_T;
    case COMM_BYTE: return MPI_BYTE;
    /* Moved as raw 2-byte elements; never reduced (mpi_op). */
    case COMM_BF16: return MPI_UINT16_T;
    case COMM_F16: return MPI_UINT16_T;
    }
    fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_mpi_type", "unknown comm_dtype_t");
}

static MPI_Op mpi_op(comm_dtype_t t, comm_op_t op, const char *call)
{
    if (t == COMM_BYTE)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, call, "COMM_BYTE data cannot be reduced");
    if (t == COMM_BF16 || t == COMM_F16)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, call,
                     t == COMM_BF16 ? "COMM_BF16 data cannot be reduced over MPI (host buffers or device staging); "
                                      "reduce fp32 data, or bf16 on a device comm that uses NCCL"
                                    : "COMM_F16 data cannot be reduced over MPI (host buffers or device staging); "
                                      "reduce fp32 data, or fp16 on a device comm that uses NCCL");
    switch (op) {
    case COMM_SUM: return MPI_SUM;
    case COMM_MAX: return MPI_MAX;
    case COMM_MIN: return MPI_MIN;
    }
    fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, call, "unknown comm_op_t");
}

/* A count or displacement as an MPI int, or an internal error naming the
 * API call and the argument (callers must split such exchanges). */
static int as_int(size_t v, const char *call, const char *what, int index)
{
    size_t limit = comm_max_count();
    if (v > limit) {
        char msg[256];
        if (index >= 0)
            snprintf(msg, sizeof msg, "%s[%d] = %zu elements is more than the %zu one call can carry; split the "
                     "exchange into smaller calls", what, index, v, limit);
        else
            snprintf(msg, sizeof msg, "%s = %zu elements is more than the %zu one call can carry; split the "
                     "exchange into smaller calls", what, v, limit);
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, call, msg);
    }
    return (int)v;
}

/* n ints copied from v into out, each checked. Returns their sum. */
static size_t to_ints(const size_t *v, int n, int *out, const char *call, const char *what)
{
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        out[i] = as_int(v[i], call, what, i);
        sum += v[i];
    }
    return sum;
}

/* Charges the time since t0 to `kind`. */
static void waited(comm_t *c, comm_kind_t kind, double t0) { comm_stats_add_wait(c, kind, MPI_Wtime() - t0); }

/* A blocking call on a device comm: its start `r` (begun at t0) is charged
 * here and the rest by comm_wait, so the whole call counts as waiting, as
 * a blocking host call does. */
static void device_blocking(comm_t *c, comm_kind_t kind, double t0, comm_request_t *r)
{
    waited(c, kind, t0);
    comm_wait(&r);
}

/* ---- allreduce: split into pieces of at most comm_max_count() ------------ */

void comm_allreduce(comm_t *c, void *buf, size_t count, comm_dtype_t t, comm_op_t op)
{
    if (c->backend) {
        double t0 = comm_wait_begin(c, COMM_KIND_ALLREDUCE);
        device_blocking(c, COMM_KIND_ALLREDUCE, t0, c->backend->allreduce(c, buf, count, t, op));
        return;
    }
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_iallreduce(c, buf, count, t, op);
        comm_wait(&r);
        return;
    }
    MPI_Datatype type = comm_mpi_type(t);
    MPI_Op mop = mpi_op(t, op, "comm_allreduce");
    size_t es = comm_dtype_size(t);
    comm_stats_count(c, COMM_KIND_ALLREDUCE, (uint64_t)(count * es));
    double t0 = comm_wait_begin(c, COMM_KIND_ALLREDUCE);
    char *p = buf;
    for (size_t done = 0; done < count;) {
        int n = comm_piece(count, done);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, p + done * es, n, type, mop, c->mpi));
        done += (size_t)n;
    }
    waited(c, COMM_KIND_ALLREDUCE, t0);
}

comm_request_t *comm_iallreduce(comm_t *c, void *buf, size_t count, comm_dtype_t t, comm_op_t op)
{
    if (c->backend)
        return c->backend->allreduce(c, buf, count, t, op);
    MPI_Datatype type = comm_mpi_type(t);
    MPI_Op mop = mpi_op(t, op, "comm_iallreduce");
    size_t es = comm_dtype_size(t);
    comm_stats_count(c, COMM_KIND_ALLREDUCE, (uint64_t)(count * es));
    comm_request_t *r = comm_request_new(c, COMM_KIND_ALLREDUCE, comm_pieces(count), NULL);
    char *p = buf;
    size_t done = 0;
    for (int i = 0; i < r->n; i++) {
        int n = comm_piece(count, done);
        CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, p + done * es, n, type, mop, c->mpi, &r->reqs[i]));
        done += (size_t)n;
    }
    return r;
}

/* ---- exscan: split like allreduce ------------------------------------------ */

void comm_exscan_sum(comm_t *c, void *buf, size_t count, comm_dtype_t t)
{
    if (c->backend)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_exscan_sum", "takes host comms only");
    MPI_Datatype type = comm_mpi_type(t);
    MPI_Op mop = mpi_op(t, COMM_SUM, "comm_exscan_sum");
    size_t es = comm_dtype_size(t);
    comm_stats_count(c, COMM_KIND_EXSCAN, (uint64_t)(count * es));
    char *p = buf;
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_request_new(c, COMM_KIND_EXSCAN, c->size > 1 ? comm_pieces(count) : 0, NULL);
        size_t done = 0;
        for (int i = 0; i < r->n; i++) {
            int n = comm_piece(count, done);
            CHECK_MPI(MPI_Iexscan(MPI_IN_PLACE, p + done * es, n, type, mop, c->mpi, &r->reqs[i]));
            done += (size_t)n;
        }
        comm_wait(&r);
    } else {
        double t0 = comm_wait_begin(c, COMM_KIND_EXSCAN);
        for (size_t done = 0; c->size > 1 && done < count;) {
            int n = comm_piece(count, done);
            CHECK_MPI(MPI_Exscan(MPI_IN_PLACE, p + done * es, n, type, mop, c->mpi));
            done += (size_t)n;
        }
        waited(c, COMM_KIND_EXSCAN, t0);
    }
    /* MPI leaves rank 0's buffer undefined; an empty prefix sums to 0. */
    if (c->rank == 0)
        memset(buf, 0, count * es);
}

/* ---- reduce-scatter ------------------------------------------------------ */

/* recvcounts as ints; the whole send buffer must fit one call too, since
 * MPI locates the pieces with int offsets. */
static int *scatter_counts(comm_t *c, const void *send, const void *recv, const size_t *recvcounts,
                           comm_dtype_t t, const char *call)
{
    int *ic = fb_malloc((size_t)c->size * sizeof *ic);
    size_t total = to_ints(recvcounts, c->size, ic, call, "recvcounts");
    as_int(total, call, "sum(recvcounts)", -1);
    FB_ASSERT(send != recv || total == 0);
    comm_stats_count(c, COMM_KIND_REDUCE_SCATTER, (uint64_t)(total * comm_dtype_size(t)));
    return ic;
}

void comm_reduce_scatter(comm_t *c, const void *send, void *recv, const size_t *recvcounts, comm_dtype_t t,
                         comm_op_t op)
{
    if (c->backend) {
        double t0 = comm_wait_begin(c, COMM_KIND_REDUCE_SCATTER);
        device_blocking(c, COMM_KIND_REDUCE_SCATTER, t0, c->backend->reduce_scatter(c, send, recv, recvcounts, t, op));
        return;
    }
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_ireduce_scatter(c, send, recv, recvcounts, t, op);
        comm_wait(&r);
        return;
    }
    MPI_Op mop = mpi_op(t, op, "comm_reduce_scatter");
    int *ic = scatter_counts(c, send, recv, recvcounts, t, "comm_reduce_scatter");
    double t0 = comm_wait_begin(c, COMM_KIND_REDUCE_SCATTER);
    CHECK_MPI(MPI_Reduce_scatter(send, recv, ic, comm_mpi_type(t), mop, c->mpi));
    waited(c, COMM_KIND_REDUCE_SCATTER, t0);
    free(ic);
}

comm_request_t *comm_ireduce_scatter(comm_t *c, const void *send, void *recv, const size_t *recvcounts,
                                     comm_dtype_t t, comm_op_t op)
{
    if (c->backend)
        return c->backend->reduce_scatter(c, send, recv, recvcounts, t, op);
    MPI_Op mop = mpi_op(t, op, "comm_ireduce_scatter");
    int *ic = scatter_counts(c, send, recv, recvcounts, t, "comm_ireduce_scatter");
    comm_request_t *r = comm_request_new(c, COMM_KIND_REDUCE_SCATTER, 1, ic);
    CHECK_MPI(MPI_Ireduce_scatter(send, recv, ic, comm_mpi_type(t), mop, c->mpi, &r->reqs[0]));
    return r;
}

/* ---- allgather (variable counts) ----------------------------------------- */

/* counts then displs as 2*size ints; counts the own piece as the payload. */
static int *gather_layout(comm_t *c, const size_t *counts, const size_t *displs, comm_dtype_t t, const char *call)
{
    int *iv = fb_malloc(2 * (size_t)c->size * sizeof *iv);
    to_ints(counts, c->size, iv, call, "counts");
    to_ints(displs, c->size, iv + c->size, call, "displs");
    comm_stats_count(c, COMM_KIND_ALLGATHER, (uint64_t)(counts[c->rank] * comm_dtype_size(t)));
    return iv;
}

/* MPICH 4.0 ignores displs[0] on a one-process communicator (it copies the
 * piece to the start of recv), so that case is a local copy. Returns 1 when
 * done that way. */
static int gather_alone(comm_t *c, const void *send, size_t sendcount, void *recv, const size_t *displs,
                        comm_dtype_t t)
{
    if (c->size != 1)
        return 0;
    size_t es = comm_dtype_size(t);
    if (sendcount > 0)
        memmove((char *)recv + displs[0] * es, send, sendcount * es);
    return 1;
}

void comm_allgatherv(comm_t *c, const void *send, size_t sendcount, void *recv, const size_t *counts,
                     const size_t *displs, comm_dtype_t t)
{
    FB_ASSERT(counts[c->rank] == sendcount);
    if (c->backend) {
        double t0 = comm_wait_begin(c, COMM_KIND_ALLGATHER);
        device_blocking(c, COMM_KIND_ALLGATHER, t0, c->backend->allgatherv(c, send, recv, counts, displs, t));
        return;
    }
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_iallgatherv(c, send, sendcount, recv, counts, displs, t);
        comm_wait(&r);
        return;
    }
    int *iv = gather_layout(c, counts, displs, t, "comm_allgatherv");
    if (gather_alone(c, send, sendcount, recv, displs, t)) {
        free(iv);
        return;
    }
    MPI_Datatype type = comm_mpi_type(t);
    double t0 = comm_wait_begin(c, COMM_KIND_ALLGATHER);
    CHECK_MPI(MPI_Allgatherv(send, iv[c->rank], type, recv, iv, iv + c->size, type, c->mpi));
    waited(c, COMM_KIND_ALLGATHER, t0);
    free(iv);
}

comm_request_t *comm_iallgatherv(comm_t *c, const void *send, size_t sendcount, void *recv, const size_t *counts,
                                 const size_t *displs, comm_dtype_t t)
{
    FB_ASSERT(counts[c->rank] == sendcount);
    if (c->backend)
        return c->backend->allgatherv(c, send, recv, counts, displs, t);
    int *iv = gather_layout(c, counts, displs, t, "comm_iallgatherv");
    if (gather_alone(c, send, sendcount, recv, displs, t))
        return comm_request_new(c, COMM_KIND_ALLGATHER, 0, iv);
    MPI_Datatype type = comm_mpi_type(t);
    comm_request_t *r = comm_request_new(c, COMM_KIND_ALLGATHER, 1, iv);
    CHECK_MPI(MPI_Iallgatherv(send, iv[c->rank], type, recv, iv, iv + c->size, type, c->mpi, &r->reqs[0]));
    return r;
}

void comm_allgatherv_inplace(comm_t *c, void *buf, const size_t *counts, const size_t *displs, comm_dtype_t t)
{
    if (c->backend) {
        const char *mine = (const char *)buf + displs[c->rank] * comm_dtype_size(t);
        double t0 = comm_wait_begin(c, COMM_KIND_ALLGATHER);
        device_blocking(c, COMM_KIND_ALLGATHER, t0, c->backend->allgatherv(c, mine, buf, counts, displs, t));
        return;
    }
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_iallgatherv_inplace(c, buf, counts, displs, t);
        comm_wait(&r);
        return;
    }
    int *iv = gather_layout(c, counts, displs, t, "comm_allgatherv_inplace");
    double t0 = comm_wait_begin(c, COMM_KIND_ALLGATHER);
    CHECK_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, iv, iv + c->size, comm_mpi_type(t), c->mpi));
    waited(c, COMM_KIND_ALLGATHER, t0);
    free(iv);
}

comm_request_t *comm_iallgatherv_inplace(comm_t *c, void *buf, const size_t *counts, const size_t *displs,
                                         comm_dtype_t t)
{
    if (c->backend)
        return c->backend->allgatherv(c, (const char *)buf + displs[c->rank] * comm_dtype_size(t), buf, counts,
                                      displs, t);
    int *iv = gather_layout(c, counts, displs, t, "comm_iallgatherv_inplace");
    comm_request_t *r = comm_request_new(c, COMM_KIND_ALLGATHER, 1, iv);
    CHECK_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, iv, iv + c->size, comm_mpi_type(t), c->mpi,
                              &r->reqs[0]));
    return r;
}

/* ---- all-to-all ----------------------------------------------------------- */

/* sendcounts, sdispls, recvcounts, rdispls as 4*size ints; the payload is
 * what goes to other ranks. */
static int *alltoallv_layout(comm_t *c, const size_t *sendcounts, const size_t *sdispls, const size_t *recvcounts,
                             const size_t *rdispls, comm_dtype_t t, const char *call)
{
    int p = c->size;
    int *iv = fb_malloc(4 * (size_t)p * sizeof *iv);
    size_t sent = to_ints(sendcounts, p, iv, call, "sendcounts") - sendcounts[c->rank];
    to_ints(sdispls, p, iv + p, call, "sdispls");
    to_ints(recvcounts, p, iv + 2 * p, call, "recvcounts");
    to_ints(rdispls, p, iv + 3 * p, call, "rdispls");
    comm_stats_count(c, COMM_KIND_ALLTOALLV, (uint64_t)(sent * comm_dtype_size(t)));
    return iv;
}

void comm_alltoallv(comm_t *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                    const size_t *recvcounts, const size_t *rdispls, comm_dtype_t t)
{
    if (c->backend) {
        double t0 = comm_wait_begin(c, COMM_KIND_ALLTOALLV);
        device_blocking(c, COMM_KIND_ALLTOALLV, t0,
                        c->backend->alltoallv(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, t));
        return;
    }
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_ialltoallv(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, t);
        comm_wait(&r);
        return;
    }
    int p = c->size;
    int *iv = alltoallv_layout(c, sendcounts, sdispls, recvcounts, rdispls, t, "comm_alltoallv");
    MPI_Datatype type = comm_mpi_type(t);
    double t0 = comm_wait_begin(c, COMM_KIND_ALLTOALLV);
    CHECK_MPI(MPI_Alltoallv(send, iv, iv + p, type, recv, iv + 2 * p, iv + 3 * p, type, c->mpi));
    waited(c, COMM_KIND_ALLTOALLV, t0);
    free(iv);
}

comm_request_t *comm_ialltoallv(comm_t *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
                                void *recv, const size_t *recvcounts, const size_t *rdispls, comm_dtype_t t)
{
    if (c->backend)
        return c->backend->alltoallv(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, t);
    int p = c->size;
    int *iv = alltoallv_layout(c, sendcounts, sdispls, recvcounts, rdispls, t, "comm_ialltoallv");
    MPI_Datatype type = comm_mpi_type(t);
    comm_request_t *r = comm_request_new(c, COMM_KIND_ALLTOALLV, 1, iv);
    CHECK_MPI(MPI_Ialltoallv(send, iv, iv + p, type, recv, iv + 2 * p, iv + 3 * p, type, c->mpi, &r->reqs[0]));
    return r;
}

static int alltoall_count(comm_t *c, size_t count, comm_dtype_t t, const char *call)
{
    int n = as_int(count, call, "count", -1);
    comm_stats_count(c, COMM_KIND_ALLTOALL, (uint64_t)(count * comm_dtype_size(t) * (size_t)(c->size - 1)));
    return n;
}

void comm_alltoall(comm_t *c, const void *send, void *recv, size_t count, comm_dtype_t t)
{
    if (c->backend) {
        double t0 = comm_wait_begin(c, COMM_KIND_ALLTOALL);
        device_blocking(c, COMM_KIND_ALLTOALL, t0, c->backend->alltoall(c, send, recv, count, t));
        return;
    }
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_ialltoall(c, send, recv, count, t);
        comm_wait(&r);
        return;
    }
    int n = alltoall_count(c, count, t, "comm_alltoall");
    MPI_Datatype type = comm_mpi_type(t);
    double t0 = comm_wait_begin(c, COMM_KIND_ALLTOALL);
    CHECK_MPI(MPI_Alltoall(send, n, type, recv, n, type, c->mpi));
    waited(c, COMM_KIND_ALLTOALL, t0);
}

comm_request_t *comm_ialltoall(comm_t *c, const void *send, void *recv, size_t count, comm_dtype_t t)
{
    if (c->backend)
        return c->backend->alltoall(c, send, recv, count, t);
    int n = alltoall_count(c, count, t, "comm_ialltoall");
    MPI_Datatype type = comm_mpi_type(t);
    comm_request_t *r = comm_request_new(c, COMM_KIND_ALLTOALL, 1, NULL);
    CHECK_MPI(MPI_Ialltoall(send, n, type, recv, n, type, c->mpi, &r->reqs[0]));
    return r;
}

/* ---- bcast: split into pieces like allreduce ------------------------------ */

void comm_bcast(comm_t *c, void *buf, size_t bytes, int root)
{
    FB_ASSERT(root >= 0 && root < c->size);
    if (c->backend) {
        double t0 = comm_wait_begin(c, COMM_KIND_BCAST);
        device_blocking(c, COMM_KIND_BCAST, t0, c->backend->bcast(c, buf, bytes, root));
        return;
    }
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_ibcast(c, buf, bytes, root);
        comm_wait(&r);
        return;
    }
    comm_stats_count(c, COMM_KIND_BCAST, (uint64_t)bytes);
    double t0 = comm_wait_begin(c, COMM_KIND_BCAST);
    char *p = buf;
    for (size_t done = 0; done < bytes;) {
        int n = comm_piece(bytes, done);
        CHECK_MPI(MPI_Bcast(p + done, n, MPI_BYTE, root, c->mpi));
        done += (size_t)n;
    }
    waited(c, COMM_KIND_BCAST, t0);
}

comm_request_t *comm_ibcast(comm_t *c, void *buf, size_t bytes, int root)
{
    FB_ASSERT(root >= 0 && root < c->size);
    if (c->backend)
        return c->backend->bcast(c, buf, bytes, root);
    comm_stats_count(c, COMM_KIND_BCAST, (uint64_t)bytes);
    size_t done = 0;
    comm_request_t *r = comm_request_new(c, COMM_KIND_BCAST, comm_pieces(bytes), NULL);
    char *p = buf;
    for (int i = 0; i < r->n; i++) {
        int n = comm_piece(bytes, done);
        CHECK_MPI(MPI_Ibcast(p + done, n, MPI_BYTE, root, c->mpi, &r->reqs[i]));
        done += (size_t)n;
    }
    return r;
}

void comm_barrier(comm_t *c)
{
    if (c->backend) {
        c->backend->barrier(c);
        return;
    }
    comm_stats_count(c, COMM_KIND_BARRIER, 0);
    if (comm_wait_yields(c)) {
        comm_request_t *r = comm_request_new(c, COMM_KIND_BARRIER, 1, NULL);
        CHECK_MPI(MPI_Ibarrier(c->mpi, &r->reqs[0]));
        comm_wait(&r);
        return;
    }
    double t0 = comm_wait_begin(c, COMM_KIND_BARRIER);
    CHECK_MPI(MPI_Barrier(c->mpi));
    waited(c, COMM_KIND_BARRIER, t0);
}
