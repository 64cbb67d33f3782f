/* The comm API: collectives on a process group, blocking and non-blocking,
 * behind opaque handles so that the trainer never sees which backend (MPI
 * on host buffers; NCCL, or MPI through pinned staging, on device buffers)
 * carries them. See docs/parallel.md.
 *
 * Conventions:
 *  - counts and displacements are in elements of the given dtype, as size_t;
 *    v-collectives take one count (and displacement) per rank of the group;
 *  - every rank of the group calls every collective, in the same order;
 *  - a non-blocking call returns a request; its buffers (and the count and
 *    displacement arrays, which are copied, so those may be reused at once)
 *    must not be touched until comm_wait/comm_waitall returns or comm_test
 *    returned 1;
 *  - a count or displacement above comm_max_count() (INT_MAX for MPI):
 *    allreduce, exscan, bcast and gather_bytes split the call into pieces;
 *    reduce-scatter, allgather, alltoall(v) fail with an internal error
 *    naming the call.
 * Any failed backend call ends the job with FB_EXIT_INTERNAL.
 */
#ifndef FABULA_PARALLEL_COMM_H
#define FABULA_PARALLEL_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct comm comm_t;
typedef struct comm_request comm_request_t;

/* COMM_BF16 and COMM_F16 (2 bytes): activations of the CUDA backend. Host
 * comms move them as raw 2-byte elements; only device comms on NCCL reduce
 * them. */
typedef enum { COMM_F32, COMM_F64, COMM_I32, COMM_I64, COMM_BYTE, COMM_BF16, COMM_F16 } comm_dtype_t;
/* Reductions; COMM_BYTE cannot be reduced. */
typedef enum { COMM_SUM, COMM_MAX, COMM_MIN } comm_op_t;

size_t comm_dtype_size(comm_dtype_t t);

/* ---- groups of processes ------------------------------------------------ */

/* The group of all processes: world-wide collectives go through it.
 * Created by parallel_init, freed by parallel_finalize (never comm_free
 * it); a duplicate of MPI's world, so its traffic never matches messages of
 * other libraries there. */
comm_t *comm_world(void);
/* Another group over all processes, with statistics of its own (the caller
 * frees it). Collective over the world. */
comm_t *comm_create_world(void);
/* Ranks of `parent` with the same `color` (>= 0) form one new group, ordered
 * by `key` then parent rank. Collective over `parent`. */
comm_t *comm_split(comm_t *parent, int color, int key);
/* Collective over the group; *c becomes NULL (NULL is ignored). */
void comm_free(comm_t **c);
int comm_rank(const comm_t *c);
int comm_size(const comm_t *c);
/* The group's name in the hang watchdog's reports: `label` ("dp", "tp",
 * ...), "@", and the world rank of its first member ("dp@0", "dp@2" for two
 * stages' dp groups); "group" until set. NULL c is ignored. */
void comm_set_label(comm_t *c, const char *label);

/* ---- device buffers ----------------------------------------------------- */

/* A comm over the same ranks as `host` whose collectives take buffers in
 * the CUDA backend's device memory (cuda_backend_init must have bound this
 * rank's GPU). Collective over `host`. NCCL carries it when every rank of
 * the group has a GPU of its own and fabula was built with NCCL; otherwise
 * (e.g. two ranks sharing a GPU, which NCCL refuses) MPI does, through
 * pinned host staging buffers. comm_free releases it (before
 * cuda_backend_shutdown); comm_split of it gives a host comm. In a build
 * without CUDA it ends the job with an internal error; when the module
 * cannot be loaded, with exit 2 and the module's path.
 *
 * Ordering: a call reads what the compute stream produced before it; once
 * it returned (blocking) or comm_wait returned, later compute-stream work
 * sees its result. With NCCL neither blocks the host: the host sees the
 * result after the backend's to_host or synchronize. Ranks must issue
 * device collectives on all groups in one order (they share one stream). */
comm_t *comm_device_create(comm_t *host);
/* 1 when c is a device comm carried by NCCL, else 0. */
int comm_device_uses_nccl(const comm_t *c);
/* Nonzero: comm_device_create takes the staging path even where NCCL could
 * carry the group (tests; debugging NCCL). Set alike on every rank. */
void comm_device_set_force_staging(int on);
/* The device comms live in a module, fabula-comm.so (docs/cuda.md,
 * "Modules"), loaded by the first comm_device_create or by this call: 0, or
 * -1 with "cannot load module PATH: dlerror()" in err (in a build without
 * CUDA: why there is none). Lets the backend choice fail early, with the
 * path, instead of in the middle of setting up the groups. */
int comm_device_module_load(char *err, size_t errlen);

/* ---- collectives -------------------------------------------------------- */

/* In place: buf[0..count) of every rank becomes the reduction over ranks. */
void comm_allreduce(comm_t *c, void *buf, size_t count, comm_dtype_t t, comm_op_t op);
comm_request_t *comm_iallreduce(comm_t *c, void *buf, size_t count, comm_dtype_t t, comm_op_t op);

/* In place: rank r's buf[0..count) becomes the sum of buf over ranks
 * 0..r-1 (MPI_Exscan); rank 0's becomes zeros. Host comms only. */
void comm_exscan_sum(comm_t *c, void *buf, size_t count, comm_dtype_t t);

/* `send` holds sum(recvcounts) elements, rank j's piece first for j = 0, 1,
 * ...; rank j receives the reduction of its piece, recvcounts[j] elements
 * (0 allowed), in `recv`. `send` and `recv` must not overlap. */
void comm_reduce_scatter(comm_t *c, const void *send, void *recv, const size_t *recvcounts, comm_dtype_t t,
                         comm_op_t op);
comm_request_t *comm_ireduce_scatter(comm_t *c, const void *send, void *recv, const size_t *recvcounts,
                                     comm_dtype_t t, comm_op_t op);

/* Rank j's `sendcount` (== counts[j]) elements land at recv + displs[j] on
 * every rank; elements outside the pieces are left untouched. */
void comm_allgatherv(comm_t *c, const void *send, size_t sendcount, void *recv, const size_t *counts,
                     const size_t *displs, comm_dtype_t t);
comm_request_t *comm_iallgatherv(comm_t *c, const void *send, size_t sendcount, void *recv, const size_t *counts,
                                 const size_t *displs, comm_dtype_t t);
/* In place: each rank's piece already sits at buf + displs[rank]. */
void comm_allgatherv_inplace(comm_t *c, void *buf, const size_t *counts, const size_t *displs, comm_dtype_t t);
comm_request_t *comm_iallgatherv_inplace(comm_t *c, void *buf, const size_t *counts, const size_t *displs,
                                         comm_dtype_t t);

/* sendcounts[j] elements from send + sdispls[j] go to rank j, which stores
 * them at its recv + rdispls[i] (i the sender, recvcounts[i] == what i sends
 * it). Zero counts (an empty row or column) are fine. */
void comm_alltoallv(comm_t *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                    const size_t *recvcounts, const size_t *rdispls, comm_dtype_t t);
comm_request_t *comm_ialltoallv(comm_t *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
                                void *recv, const size_t *recvcounts, const size_t *rdispls, comm_dtype_t t);

/* `count` elements to each rank: send[j*count ..] goes to rank j, recv[i*count
 * ..] comes from rank i. For small fixed-size exchanges (EP token counts). */
void comm_alltoall(comm_t *c, const void *send, void *recv, size_t count, comm_dtype_t t);
comm_request_t *comm_ialltoall(comm_t *c, const void *send, void *recv, size_t count, comm_dtype_t t);

/* `bytes` bytes of `root`'s buf to every rank. */
void comm_bcast(comm_t *c, void *buf, size_t bytes, int root);
comm_request_t *comm_ibcast(comm_t *c, void *buf, size_t bytes, int root);

void comm_barrier(comm_t *c);

/* One byte buffer of any size from every rank, collected on `root` in rank
 * order without holding them all at once (the BPE trainer merges word
 * counts this way). On root: sink(ctx, r, buf_r, n_r) for r = 0, 1, ...,
 * size-1 (its own buffer included), each buffer valid during its call only.
 * The other ranks send buf[0..n); sink is not called there. Host comms
 * only. */
typedef void (*comm_bytes_sink_fn)(void *ctx, int rank, const void *buf, size_t n);
void comm_gather_bytes(comm_t *c, const void *buf, size_t n, int root, comm_bytes_sink_fn sink, void *ctx);

/* `bytes` bytes from every rank, the same size everywhere, into root's
 * recv (size x bytes, rank order; one MPI_Gather). recv is ignored on the
 * other ranks (NULL allowed). For the monitor's per-rank record; host comms
 * only, bytes at most comm_max_count(). */
void comm_gather(comm_t *c, const void *send, size_t bytes, void *recv, int root);

/* ---- point to point ----------------------------------------------------- */

/* `count` elements of buf to rank `dest` of c with `tag` (the pipeline's
 * activations and their gradients between consecutive stages). The send
 * does not block: buf must stay untouched until comm_wait on the request.
 * comm_recv blocks until `count` elements from rank `src` with `tag` have
 * arrived in buf (the sender's count must be the same). Host comms only;
 * count 0 sends and receives nothing (both sides must agree on it). */
comm_request_t *comm_isend(comm_t *c, const void *buf, size_t count, comm_dtype_t t, int dest, int tag);
void comm_recv(comm_t *c, void *buf, size_t count, comm_dtype_t t, int src, int tag);

/* ---- completion --------------------------------------------------------- */

/* Blocks until *req is complete, frees it and sets *req = NULL (a NULL *req
 * returns at once). On an NCCL device comm it only makes the compute
 * stream wait for the operation (no host block). */
void comm_wait(comm_request_t **req);
/* Waits for every non-NULL reqs[i]; all become NULL. */
void comm_waitall(comm_request_t **reqs, int n);
/* 1 when complete (then comm_wait returns at once), else 0. Never blocks.
 * It also drives the backend's progress: MPI implementations advance
 * non-blocking collectives mostly inside MPI calls, so a trainer overlapping
 * reductions with backward calls this between kernels. */
int comm_test(comm_request_t *req);

/* How blocking calls and comm_wait wait on host comms (docs/parallel.md,
 * "Waiting"): spinning inside MPI, or testing and yielding the core
 * between tests, which FABULA_MPI_WAIT=auto (the default) picks when a
 * node has more ranks than CPUs. */
typedef enum { COMM_WAIT_SPIN, COMM_WAIT_YIELD } comm_wait_mode_t;
comm_wait_mode_t comm_wait_mode(void);
/* The CPUs the ranks of this node may run on (0: unknown). */
int comm_node_cpus(void);

/* ---- statistics --------------------------------------------------------- */

typedef enum {
    COMM_KIND_ALLREDUCE,
    COMM_KIND_REDUCE_SCATTER,
    COMM_KIND_ALLGATHER,
    COMM_KIND_ALLTOALLV,
    COMM_KIND_ALLTOALL,
    COMM_KIND_BCAST,
    COMM_KIND_BARRIER,
    COMM_KIND_EXSCAN,
    COMM_KIND_GATHER,
    COMM_KIND_SEND,
    COMM_KIND_RECV,
    COMM_KIND_COUNT
} comm_kind_t;

/* Per group and kind of call, counted by this rank. `bytes` is the payload
 * this rank hands to the call (docs/parallel.md: allreduce the buffer,
 * reduce-scatter the whole send buffer, allgather its own piece, alltoall(v)
 * what it addresses to other ranks, bcast and exscan the buffer,
 * gather_bytes its own buffer, send and recv their buffer). `wait_seconds` is the
 * time spent inside blocking calls and comm_wait/comm_waitall. */
typedef struct comm_stats {
    uint64_t calls;
    uint64_t bytes;
    double wait_seconds;
} comm_stats_t;

const comm_stats_t *comm_stats(const comm_t *c, comm_kind_t kind);
void comm_stats_reset(comm_t *c);
/* Seconds this process spent in blocking calls and waits, over every group
 * since the start (the sum of all wait_seconds, including freed groups).
 * On an NCCL device comm a wait does not block the host: such groups add
 * little here (docs/monitoring.md). */
double comm_wait_seconds_total(void);
const char *comm_kind_name(comm_kind_t kind);

/* ---- limits ------------------------------------------------------------- */

/* The largest count or displacement one backend call takes (INT_MAX for
 * MPI). comm_set_max_count lowers it (0 restores the backend's), so tests
 * can exercise splitting and the over-limit error on small buffers. NCCL
 * takes size_t counts: device comms on NCCL have no limit. */
size_t comm_max_count(void);
void comm_set_max_count(size_t n);

#endif
