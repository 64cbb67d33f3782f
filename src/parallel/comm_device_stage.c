/* The staging backend of device comms: MPI on pinned host copies, for a
 * group NCCL cannot carry (ranks sharing a GPU) or a build without NCCL.
 *
 * A call copies its device inputs into a pinned buffer on the compute
 * stream (so it reads what compute produced), waits for the copies, and
 * starts the host collective of comm_coll.c on a host comm sharing the
 * device comm's MPI communicator. Pieces scattered over a device buffer
 * travel packed, so the staging buffer holds only the data. At completion
 * (comm_wait, or a comm_test that finds the host collective done) the
 * results are copied back on the compute stream: later compute work sees
 * them without the host waiting for the copy.
 *
 * Each request holds a buffer of its own from a per-comm pool, since several
 * may be in flight. A buffer goes back to the pool with its copies back
 * possibly still queued; whoever takes it next waits for the compute stream
 * before the host writes into it (every call does, for its inputs). */
#include "parallel/comm_device.h"

#include <stdlib.h>

#include "parallel/mpi_check.h"

/* The smallest buffer made, so that small calls share a few buffers. */
#define STAGE_MIN_BYTES ((size_t)1 << 16)

/* Regions of one buffer start on this boundary (any dtype, and what DMA
 * prefers). */
static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

/* A free buffer of at least `bytes`: the smallest that fits, else the
 * largest free one, grown, else a new one. */
static int slot_acquire(struct comm_device *d, size_t bytes)
{
    int fit = -1, big = -1;
    for (int i = 0; i < d->nslots; i++) {
        const stage_slot_t *s = &d->slots[i];
        if (s->busy)
            continue;
        if (s->cap >= bytes && (fit < 0 || s->cap < d->slots[fit].cap))
            fit = i;
        if (big < 0 || s->cap > d->slots[big].cap)
            big = i;
    }
    if (fit < 0) {
        /* Headroom, so that a slowly growing exchange does not reallocate
         * every call. */
        size_t cap = bytes < STAGE_MIN_BYTES ? STAGE_MIN_BYTES : bytes + bytes / 4;
        if (big >= 0) {
            fit = big;
            /* Copies back from the old buffer may still be queued. */
            CHECK_CUDA(cudaStreamSynchronize(comm_device_compute_stream()));
            cuda_host_free(d->slots[fit].p);
        } else {
            d->slots = fb_realloc(d->slots, (size_t)(d->nslots + 1) * sizeof *d->slots);
            fit = d->nslots++;
        }
        d->slots[fit].p = cuda_host_alloc(cap);
        d->slots[fit].cap = cap;
    }
    d->slots[fit].busy = 1;
    return fit;
}

/* A request of c with a buffer of `sbytes` to send from (*send) and
 * `rbytes` to receive into (*recv), owing at most `maxcopies` copies back. */
static comm_request_t *stage_begin(comm_t *c, comm_kind_t kind, size_t sbytes, size_t rbytes, int maxcopies,
                                   char **send, char **recv)
{
    struct comm_device *d = c->device;
    comm_request_t *r = comm_request_new(c, kind, 0, NULL);
    struct comm_device_request *q = fb_calloc(1, sizeof *q);
    q->slot = slot_acquire(d, align_up(sbytes) + rbytes);
    q->copies = fb_malloc((size_t)(maxcopies > 0 ? maxcopies : 1) * sizeof *q->copies);
    r->device = q;
    *send = d->slots[q->slot].p;
    *recv = *send + align_up(sbytes);
    return r;
}

/* Queues a device-to-staging copy on the compute stream. */
static void to_stage(char *dst, const void *src, size_t bytes)
{
    if (bytes > 0)
        CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, comm_device_compute_stream()));
}

/* The inputs are in the staging buffer, and copies back from an earlier
 * user of the buffer are done, once the compute stream is. */
static void stage_ready(void) { CHECK_CUDA(cudaStreamSynchronize(comm_device_compute_stream())); }

static void owe(comm_request_t *r, void *dst, const char *src, size_t bytes)
{
    if (bytes > 0)
        r->device->copies[r->device->ncopies++] = (stage_copy_t){dst, src, bytes};
}

static void copy_back(comm_request_t *r)
{
    struct comm_device_request *q = r->device;
    if (q->copied)
        return;
    for (int i = 0; i < q->ncopies; i++)
        CHECK_CUDA(cudaMemcpyAsync(q->copies[i].dst, q->copies[i].src, q->copies[i].bytes, cudaMemcpyHostToDevice,
                                   comm_device_compute_stream()));
    q->copied = 1;
}

static comm_request_t *stage_allreduce(comm_t *c, void *buf, size_t count, comm_dtype_t t, comm_op_t op)
{
    size_t bytes = count * comm_dtype_size(t);
    comm_stats_count(c, COMM_KIND_ALLREDUCE, (uint64_t)bytes);
    char *s, *unused;
    comm_request_t *r = stage_begin(c, COMM_KIND_ALLREDUCE, bytes, 0, 1, &s, &unused);
    to_stage(s, buf, bytes);
    stage_ready();
    owe(r, buf, s, bytes);
    r->device->inner = comm_iallreduce(c->device->host, s, count, t, op);
    return r;
}

static comm_request_t *stage_reduce_scatter(comm_t *c, const void *send, void *recv, const size_t *recvcounts,
                                            comm_dtype_t t, comm_op_t op)
{
    size_t es = comm_dtype_size(t), total = 0, mine = recvcounts[c->rank] * es;
    for (int j = 0; j < c->size; j++)
        total += recvcounts[j];
    FB_ASSERT(send != recv || total == 0);
    comm_stats_count(c, COMM_KIND_REDUCE_SCATTER, (uint64_t)(total * es));
    char *s, *rv;
    comm_request_t *r = stage_begin(c, COMM_KIND_REDUCE_SCATTER, total * es, mine, 1, &s, &rv);
    to_stage(s, send, total * es);
    stage_ready();
    owe(r, recv, rv, mine);
    r->device->inner = comm_ireduce_scatter(c->device->host, s, rv, recvcounts, t, op);
    return r;
}

/* Offsets of the pieces packed back to back; returns their total. */
static size_t packed_offsets(const size_t *counts, int n, size_t *offs)
{
    size_t total = 0;
    for (int j = 0; j < n; j++) {
        offs[j] = total;
        total += counts[j];
    }
    return total;
}

static comm_request_t *stage_allgatherv(comm_t *c, const void *send, void *recv, const size_t *counts,
                                        const size_t *displs, comm_dtype_t t)
{
    int p = c->size, me = c->rank;
    size_t es = comm_dtype_size(t), *packed = fb_malloc((size_t)p * sizeof *packed);
    size_t total = packed_offsets(counts, p, packed);
    comm_stats_count(c, COMM_KIND_ALLGATHER, (uint64_t)(counts[me] * es));
    char *s, *rv;
    comm_request_t *r = stage_begin(c, COMM_KIND_ALLGATHER, counts[me] * es, total * es, p, &s, &rv);
    to_stage(s, send, counts[me] * es);
    stage_ready();
    int inplace = send == (const char *)recv + displs[me] * es;
    for (int j = 0; j < p; j++)
        if (j != me || !inplace)
            owe(r, (char *)recv + displs[j] * es, rv + packed[j] * es, counts[j] * es);
    r->device->inner = comm_iallgatherv(c->device->host, s, counts[me], rv, counts, packed, t);
    free(packed);
    return r;
}

static comm_request_t *stage_alltoallv(comm_t *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
                                       void *recv, const size_t *recvcounts, const size_t *rdispls, comm_dtype_t t)
{
    int p = c->size;
    size_t es = comm_dtype_size(t), *ps = fb_malloc(2 * (size_t)p * sizeof *ps), *pr = ps + p;
    size_t stotal = packed_offsets(sendcounts, p, ps), rtotal = packed_offsets(recvcounts, p, pr);
    comm_stats_count(c, COMM_KIND_ALLTOALLV, (uint64_t)((stotal - sendcounts[c->rank]) * es));
    char *s, *rv;
    comm_request_t *r = stage_begin(c, COMM_KIND_ALLTOALLV, stotal * es, rtotal * es, p, &s, &rv);
    for (int j = 0; j < p; j++)
        to_stage(s + ps[j] * es, (const char *)send + sdispls[j] * es, sendcounts[j] * es);
    stage_ready();
    for (int i = 0; i < p; i++)
        owe(r, (char *)recv + rdispls[i] * es, rv + pr[i] * es, recvcounts[i] * es);
    r->device->inner = comm_ialltoallv(c->device->host, s, sendcounts, ps, rv, recvcounts, pr, t);
    free(ps);
    return r;
}

static comm_request_t *stage_alltoall(comm_t *c, const void *send, void *recv, size_t count, comm_dtype_t t)
{
    size_t es = comm_dtype_size(t), bytes = count * es * (size_t)c->size;
    comm_stats_count(c, COMM_KIND_ALLTOALL, (uint64_t)(count * es * (size_t)(c->size - 1)));
    char *s, *rv;
    comm_request_t *r = stage_begin(c, COMM_KIND_ALLTOALL, bytes, bytes, 1, &s, &rv);
    to_stage(s, send, bytes);
    stage_ready();
    owe(r, recv, rv, bytes);
    r->device->inner = comm_ialltoall(c->device->host, s, rv, count, t);
    return r;
}

static comm_request_t *stage_bcast(comm_t *c, void *buf, size_t bytes, int root)
{
    comm_stats_count(c, COMM_KIND_BCAST, (uint64_t)bytes);
    char *s, *unused;
    comm_request_t *r = stage_begin(c, COMM_KIND_BCAST, bytes, 0, 1, &s, &unused);
    if (c->rank == root)
        to_stage(s, buf, bytes);
    stage_ready();
    if (c->rank != root)
        owe(r, buf, s, bytes);
    r->device->inner = comm_ibcast(c->device->host, s, bytes, root);
    return r;
}

static void stage_barrier(comm_t *c)
{
    comm_stats_count(c, COMM_KIND_BARRIER, 0);
    double t0 = MPI_Wtime();
    comm_barrier(c->device->host);
    comm_stats_add_wait(c, COMM_KIND_BARRIER, MPI_Wtime() - t0);
}

static void stage_finish(comm_request_t *r)
{
    struct comm_device_request *q = r->device;
    comm_wait(&q->inner);
    copy_back(r);
    r->comm->device->slots[q->slot].busy = 0;
    free(q->copies);
    free(q);
    r->device = NULL;
}

/* comm_test of the host collective drives MPI's progress. */
static int stage_test(comm_request_t *r)
{
    if (!r->device->copied) {
        if (!comm_test(r->device->inner))
            return 0;
        copy_back(r);
    }
    return 1;
}

static void stage_release(comm_t *c)
{
    struct comm_device *d = c->device;
    /* Copies back from the buffers may still be queued. */
    CHECK_CUDA(cudaStreamSynchronize(comm_device_compute_stream()));
    for (int i = 0; i < d->nslots; i++) {
        FB_ASSERT(!d->slots[i].busy); /* a request outlived its comm */
        cuda_host_free(d->slots[i].p);
    }
    free(d->slots);
    free(d->host); /* the MPI communicator is c's, freed by comm_free */
    free(d);
    c->device = NULL;
}

static const comm_backend_t stage_backend = {
    .allreduce = stage_allreduce,
    .reduce_scatter = stage_reduce_scatter,
    .allgatherv = stage_allgatherv,
    .alltoallv = stage_alltoallv,
    .alltoall = stage_alltoall,
    .bcast = stage_bcast,
    .barrier = stage_barrier,
    .finish = stage_finish,
    .test = stage_test,
    .release = stage_release,
};

void comm_stage_init(comm_t *c)
{
    comm_t *h = fb_calloc(1, sizeof *h);
    h->mpi = c->mpi;
    h->rank = c->rank;
    h->size = c->size;
    c->device->host = h;
    c->backend = &stage_backend;
}
