/* comm_gather_bytes: point-to-point on the group, one sender at a time, so
 * the root holds one buffer at a time. comm_gather: one MPI_Gather of a
 * fixed-size record. */
#include "parallel/comm.h"

#include <stdint.h>
#include <stdlib.h>

#include "parallel/comm_internal.h"
#include "parallel/mpi_check.h"
#include "util/error.h"

#define TAG_SIZE 7101
#define TAG_DATA 7102

void comm_gather_bytes(comm_t *c, const void *buf, size_t n, int root, comm_bytes_sink_fn sink, void *ctx)
{
    FB_ASSERT(root >= 0 && root < c->size);
    if (c->backend)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_gather_bytes", "takes host comms only");
    comm_stats_count(c, COMM_KIND_GATHER, (uint64_t)n);
    double t0 = comm_wait_begin(c, COMM_KIND_GATHER);
    if (c->rank != root) {
        uint64_t n64 = n;
        CHECK_MPI(MPI_Send(&n64, 1, MPI_UINT64_T, root, TAG_SIZE, c->mpi));
        for (size_t off = 0; off < n;) {
            int k = comm_piece(n, off);
            CHECK_MPI(MPI_Send((const char *)buf + off, k, MPI_BYTE, root, TAG_DATA, c->mpi));
            off += (size_t)k;
        }
        comm_stats_add_wait(c, COMM_KIND_GATHER, MPI_Wtime() - t0);
        return;
    }
    /* Rank order, one buffer at a time: memory stays at the largest one. */
    for (int r = 0; r < c->size; r++) {
        if (r == root) {
            sink(ctx, r, buf, n);
            continue;
        }
        uint64_t m = 0;
        CHECK_MPI(MPI_Recv(&m, 1, MPI_UINT64_T, r, TAG_SIZE, c->mpi, MPI_STATUS_IGNORE));
        char *in = fb_malloc(m ? (size_t)m : 1);
        for (size_t off = 0; off < (size_t)m;) {
            int k = comm_piece((size_t)m, off);
            CHECK_MPI(MPI_Recv(in + off, k, MPI_BYTE, r, TAG_DATA, c->mpi, MPI_STATUS_IGNORE));
            off += (size_t)k;
        }
        sink(ctx, r, in, (size_t)m);
        free(in);
    }
    comm_stats_add_wait(c, COMM_KIND_GATHER, MPI_Wtime() - t0);
}

void comm_gather(comm_t *c, const void *send, size_t bytes, void *recv, int root)
{
    FB_ASSERT(root >= 0 && root < c->size);
    if (c->backend)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_gather", "takes host comms only");
    if (bytes > comm_max_count())
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_gather", "record larger than one MPI count");
    FB_ASSERT(c->rank != root || recv);
    comm_stats_count(c, COMM_KIND_GATHER, (uint64_t)bytes);
    double t0 = comm_wait_begin(c, COMM_KIND_GATHER);
    CHECK_MPI(MPI_Gather(send, (int)bytes, MPI_BYTE, c->rank == root ? recv : NULL, (int)bytes, MPI_BYTE, root,
                         c->mpi));
    comm_stats_add_wait(c, COMM_KIND_GATHER, MPI_Wtime() - t0);
}
