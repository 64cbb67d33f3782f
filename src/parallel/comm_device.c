/* Device comms: creation, which picks NCCL or staging for the whole group,
 * and the NCCL backend.
 *
 * NCCL calls go on the CUDA backend's comm stream after it has waited for
 * the compute stream, so they read what compute produced. Each request
 * holds an event recorded after its operation; comm_wait makes the compute
 * stream wait for that event and returns without blocking the host, which
 * is how gradient reductions overlap the rest of backward. */
#include "parallel/comm_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/mpi_check.h"

static int force_staging;

void comm_device_set_force_staging(int on) { force_staging = on != 0; }

#ifdef HAVE_NCCL

static ncclDataType_t nccl_type(comm_dtype_t t)
{
    switch (t) {
    case COMM_F32: return ncclFloat32;
    case COMM_F64: return ncclFloat64;
    case COMM_I32: return ncclInt32;
    case COMM_I64: return ncclInt64;
    case COMM_BYTE: return ncclUint8;
    case COMM_BF16: return ncclBfloat16;
    case COMM_F16: return ncclFloat16;
    }
    fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "nccl_type", "unknown comm_dtype_t");
}

static ncclRedOp_t nccl_op(comm_dtype_t t, comm_op_t op, const char *call)
{
    if (t == COMM_BYTE)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, call, "COMM_BYTE data cannot be reduced");
    switch (op) {
    case COMM_SUM: return ncclSum;
    case COMM_MAX: return ncclMax;
    case COMM_MIN: return ncclMin;
    }
    fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, call, "unknown comm_op_t");
}

/* Opens the group of NCCL calls of one API call. Zero-count pieces are left
 * out of it: every rank knows every count, so all leave out the same ones,
 * and an empty group is valid. */
static ncclComm_t nccl_begin(comm_t *c)
{
    cuda_comm_wait_compute();
    CHECK_NCCL(ncclGroupStart());
    return c->device->nccl;
}

static comm_request_t *nccl_end(comm_t *c, comm_kind_t kind)
{
    CHECK_NCCL(ncclGroupEnd());
    comm_request_t *r = comm_request_new(c, kind, 0, NULL);
    r->device = fb_calloc(1, sizeof *r->device);
    CHECK_CUDA(cudaEventCreateWithFlags(&r->device->done, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventRecord(r->device->done, comm_device_comm_stream()));
    return r;
}

static comm_request_t *nccl_allreduce(comm_t *c, void *buf, size_t count, comm_dtype_t t, comm_op_t op)
{
    ncclRedOp_t nop = nccl_op(t, op, "comm_allreduce");
    comm_stats_count(c, COMM_KIND_ALLREDUCE, (uint64_t)(count * comm_dtype_size(t)));
    ncclComm_t nc = nccl_begin(c);
    if (count > 0)
        CHECK_NCCL(ncclAllReduce(buf, buf, count, nccl_type(t), nop, nc, comm_device_comm_stream()));
    return nccl_end(c, COMM_KIND_ALLREDUCE);
}

/* ncclReduceScatter takes one count for every rank; unequal pieces become
 * one ncclReduce per piece, rooted at the rank that keeps it. */
static comm_request_t *nccl_reduce_scatter(comm_t *c, const void *send, void *recv, const size_t *recvcounts,
                                           comm_dtype_t t, comm_op_t op)
{
    ncclRedOp_t nop = nccl_op(t, op, "comm_reduce_scatter");
    size_t es = comm_dtype_size(t), total = 0;
    int equal = 1;
    for (int j = 0; j < c->size; j++) {
        total += recvcounts[j];
        equal &= recvcounts[j] == recvcounts[0];
    }
    FB_ASSERT(send != recv || total == 0);
    comm_stats_count(c, COMM_KIND_REDUCE_SCATTER, (uint64_t)(total * es));
    ncclComm_t nc = nccl_begin(c);
    cudaStream_t s = comm_device_comm_stream();
    if (total > 0 && equal) {
        CHECK_NCCL(ncclReduceScatter(send, recv, recvcounts[0], nccl_type(t), nop, nc, s));
    } else if (total > 0) {
        size_t off = 0;
        for (int j = 0; j < c->size; j++) {
            if (recvcounts[j] > 0)
                CHECK_NCCL(ncclReduce((const char *)send + off * es, recv, recvcounts[j], nccl_type(t), nop, j, nc, s));
            off += recvcounts[j];
        }
    }
    return nccl_end(c, COMM_KIND_REDUCE_SCATTER);
}

/* Pieces of one size back to back are one ncclAllGather; anything else is
 * one ncclBroadcast per piece from its owner. In place, the owner's send is
 * its piece of recv, which NCCL then leaves as it is. */
static comm_request_t *nccl_allgatherv(comm_t *c, const void *send, void *recv, const size_t *counts,
                                       const size_t *displs, comm_dtype_t t)
{
    size_t es = comm_dtype_size(t);
    int equal = 1;
    for (int j = 0; j < c->size; j++)
        equal &= counts[j] == counts[0] && displs[j] == (size_t)j * counts[0];
    comm_stats_count(c, COMM_KIND_ALLGATHER, (uint64_t)(counts[c->rank] * es));
    ncclComm_t nc = nccl_begin(c);
    cudaStream_t s = comm_device_comm_stream();
    if (equal) {
        if (counts[0] > 0)
            CHECK_NCCL(ncclAllGather(send, recv, counts[0], nccl_type(t), nc, s));
    } else {
        for (int j = 0; j < c->size; j++) {
            if (counts[j] == 0)
                continue;
            char *piece = (char *)recv + displs[j] * es;
            const void *src = j == c->rank ? send : piece;
            CHECK_NCCL(ncclBroadcast(src, piece, counts[j], nccl_type(t), j, nc, s));
        }
    }
    return nccl_end(c, COMM_KIND_ALLGATHER);
}

/* Point-to-point in one group (NCCL pairs them up; a rank sending to itself
 * is fine). */
static comm_request_t *nccl_alltoallv(comm_t *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
                                      void *recv, const size_t *recvcounts, const size_t *rdispls, comm_dtype_t t)
{
    size_t es = comm_dtype_size(t), sent = 0;
    for (int j = 0; j < c->size; j++)
        sent += j == c->rank ? 0 : sendcounts[j];
    comm_stats_count(c, COMM_KIND_ALLTOALLV, (uint64_t)(sent * es));
    ncclComm_t nc = nccl_begin(c);
    cudaStream_t s = comm_device_comm_stream();
    ncclDataType_t type = nccl_type(t);
    for (int j = 0; j < c->size; j++) {
        if (sendcounts[j] > 0)
            CHECK_NCCL(ncclSend((const char *)send + sdispls[j] * es, sendcounts[j], type, j, nc, s));
        if (recvcounts[j] > 0)
            CHECK_NCCL(ncclRecv((char *)recv + rdispls[j] * es, recvcounts[j], type, j, nc, s));
    }
    return nccl_end(c, COMM_KIND_ALLTOALLV);
}

static comm_request_t *nccl_alltoall(comm_t *c, const void *send, void *recv, size_t count, comm_dtype_t t)
{
    size_t es = comm_dtype_size(t);
    comm_stats_count(c, COMM_KIND_ALLTOALL, (uint64_t)(count * es * (size_t)(c->size - 1)));
    ncclComm_t nc = nccl_begin(c);
    cudaStream_t s = comm_device_comm_stream();
    ncclDataType_t type = nccl_type(t);
    for (int j = 0; j < c->size && count > 0; j++) {
        CHECK_NCCL(ncclSend((const char *)send + (size_t)j * count * es, count, type, j, nc, s));
        CHECK_NCCL(ncclRecv((char *)recv + (size_t)j * count * es, count, type, j, nc, s));
    }
    return nccl_end(c, COMM_KIND_ALLTOALL);
}

static comm_request_t *nccl_bcast(comm_t *c, void *buf, size_t bytes, int root)
{
    comm_stats_count(c, COMM_KIND_BCAST, (uint64_t)bytes);
    ncclComm_t nc = nccl_begin(c);
    if (bytes > 0)
        CHECK_NCCL(ncclBroadcast(buf, buf, bytes, ncclUint8, root, nc, comm_device_comm_stream()));
    return nccl_end(c, COMM_KIND_BCAST);
}

/* Everything this rank queued for communication has finished when it
 * enters the barrier. */
static void nccl_barrier(comm_t *c)
{
    comm_stats_count(c, COMM_KIND_BARRIER, 0);
    double t0 = MPI_Wtime();
    CHECK_CUDA(cudaStreamSynchronize(comm_device_comm_stream()));
    CHECK_MPI(MPI_Barrier(c->mpi));
    comm_stats_add_wait(c, COMM_KIND_BARRIER, MPI_Wtime() - t0);
}

/* The wait is queued on the compute stream; an event may be destroyed with
 * the wait still pending (CUDA keeps it until then). */
static void nccl_finish(comm_request_t *r)
{
    CHECK_CUDA(cudaStreamWaitEvent(comm_device_compute_stream(), r->device->done, 0));
    CHECK_CUDA(cudaEventDestroy(r->device->done));
    free(r->device);
    r->device = NULL;
}

static int nccl_test(comm_request_t *r)
{
    cudaError_t e = cudaEventQuery(r->device->done);
    if (e == cudaErrorNotReady) {
        /* Not an error, but the runtime may keep it as the last error,
         * where the next kernel launch check would find it. */
        (void)cudaGetLastError();
        return 0;
    }
    CHECK_CUDA(e);
    return 1;
}

/* Operations still queued on the comm stream use the communicator. */
static void nccl_release(comm_t *c)
{
    CHECK_CUDA(cudaStreamSynchronize(comm_device_comm_stream()));
    CHECK_NCCL(ncclCommDestroy(c->device->nccl));
    free(c->device);
    c->device = NULL;
}

static const comm_backend_t nccl_backend = {
    .allreduce = nccl_allreduce,
    .reduce_scatter = nccl_reduce_scatter,
    .allgatherv = nccl_allgatherv,
    .alltoallv = nccl_alltoallv,
    .alltoall = nccl_alltoall,
    .bcast = nccl_bcast,
    .barrier = nccl_barrier,
    .finish = nccl_finish,
    .test = nccl_test,
    .release = nccl_release,
};

/* Where a rank's GPU is: the node's name and the device's PCI address (not
 * its ordinal, which depends on CUDA_VISIBLE_DEVICES). Zero-filled, so that
 * whole records compare. */
typedef struct gpu_place {
    char host[MPI_MAX_PROCESSOR_NAME];
    char bus[64];
} gpu_place_t;

static int place_cmp(const void *a, const void *b) { return memcmp(a, b, sizeof(gpu_place_t)); }

/* 1 when no two ranks of c share a GPU (NCCL refuses a group where two
 * do). Every rank gathers every place, so all reach the same answer. */
static int gpus_distinct(comm_t *c, int device)
{
    gpu_place_t me;
    memset(&me, 0, sizeof me);
    int len = 0;
    CHECK_MPI(MPI_Get_processor_name(me.host, &len));
    CHECK_CUDA(cudaDeviceGetPCIBusId(me.bus, (int)sizeof me.bus - 1, device));
    gpu_place_t *all = fb_calloc((size_t)c->size, sizeof *all);
    CHECK_MPI(MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, c->mpi));
    qsort(all, (size_t)c->size, sizeof *all, place_cmp);
    int distinct = 1;
    for (int i = 1; i < c->size; i++)
        distinct &= place_cmp(&all[i - 1], &all[i]) != 0;
    free(all);
    return distinct;
}

/* The group's rank 0 makes the id, MPI carries it to the others. */
static void nccl_init(comm_t *c)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->mpi));
    CHECK_NCCL(ncclCommInitRank(&c->device->nccl, c->size, id, c->rank));
    c->backend = &nccl_backend;
}

/* NCCL unless a rank asks for staging or two ranks share a GPU; decided
 * together, since a group must take one path. */
static int want_nccl(comm_t *c, int device)
{
    int want = !force_staging;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, c->mpi));
    return want && gpus_distinct(c, device);
}

#endif /* HAVE_NCCL */

comm_t *comm_device_create(comm_t *host)
{
    FB_ASSERT(host);
    int device = cuda_backend_device();
    if (device < 0)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_device_create",
                     "no GPU is bound to this rank: call cuda_backend_init first");
    MPI_Comm mpi;
    CHECK_MPI(MPI_Comm_dup(host->mpi, &mpi));
    comm_t *c = comm_wrap(mpi);
    c->device = fb_calloc(1, sizeof *c->device);
#ifdef HAVE_NCCL
    if (want_nccl(c, device)) {
        nccl_init(c);
        return c;
    }
#endif
    comm_stage_init(c);
    return c;
}

int comm_device_uses_nccl(const comm_t *c)
{
#ifdef HAVE_NCCL
    return c && c->backend == &nccl_backend;
#else
    (void)c;
    return 0;
#endif
}
