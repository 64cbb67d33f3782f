#include "parallel/gather_bytes.h"

#include <stdint.h>
#include <stdlib.h>

#include "parallel/mpi_check.h"
#include "parallel/world.h"
#include "util/error.h"

#define PIECE ((size_t)1 << 30)
#define TAG_SIZE 7101
#define TAG_DATA 7102

void parallel_gather_bytes(const void *buf, size_t n, int root, parallel_bytes_sink_fn sink, void *ctx)
{
    int rank = parallel_rank(), size = parallel_size();
    if (rank != root) {
        uint64_t n64 = n;
        CHECK_MPI(MPI_Send(&n64, 1, MPI_UINT64_T, root, TAG_SIZE, MPI_COMM_WORLD));
        for (size_t off = 0; off < n; off += PIECE) {
            size_t k = n - off < PIECE ? n - off : PIECE;
            CHECK_MPI(MPI_Send((const char *)buf + off, (int)k, MPI_BYTE, root, TAG_DATA, MPI_COMM_WORLD));
        }
        return;
    }
    /* Rank order, one buffer at a time: memory stays at the largest one. */
    for (int r = 0; r < size; r++) {
        if (r == root) {
            sink(ctx, r, buf, n);
            continue;
        }
        uint64_t m = 0;
        CHECK_MPI(MPI_Recv(&m, 1, MPI_UINT64_T, r, TAG_SIZE, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        char *in = fb_malloc(m ? (size_t)m : 1);
        for (size_t off = 0; off < m; off += PIECE) {
            size_t k = (size_t)m - off < PIECE ? (size_t)m - off : PIECE;
            CHECK_MPI(MPI_Recv(in + off, (int)k, MPI_BYTE, r, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        sink(ctx, r, in, (size_t)m);
        free(in);
    }
}
