/* Point-to-point transfers of the comm API (comm.h): the pipeline stages'
 * activations forward and their gradients backward. Pieces of at most
 * comm_max_count() elements, as the collectives split theirs; MPI keeps
 * messages of one (source, tag) in order, so the pieces arrive in order. */
#include "parallel/comm.h"

#include <stdlib.h>

#include "parallel/comm_internal.h"
#include "parallel/mpi_check.h"
#include "util/error.h"

comm_request_t *comm_isend(comm_t *c, const void *buf, size_t count, comm_dtype_t t, int dest, int tag)
{
    FB_ASSERT(!c->backend && dest >= 0 && dest < c->size && dest != c->rank);
    const size_t esz = comm_dtype_size(t);
    comm_stats_count(c, COMM_KIND_SEND, (uint64_t)(count * esz));
    const int n = count ? comm_pieces(count) : 0;
    comm_request_t *r = comm_request_new(c, COMM_KIND_SEND, n, NULL);
    const char *p = buf;
    size_t done = 0;
    for (int i = 0; i < n; i++) {
        const int k = comm_piece(count, done);
        CHECK_MPI(MPI_Isend(p + done * esz, k, comm_mpi_type(t), dest, tag, c->mpi, &r->reqs[i]));
        done += (size_t)k;
    }
    return r;
}

void comm_recv(comm_t *c, void *buf, size_t count, comm_dtype_t t, int src, int tag)
{
    FB_ASSERT(!c->backend && src >= 0 && src < c->size && src != c->rank);
    const size_t esz = comm_dtype_size(t);
    comm_stats_count(c, COMM_KIND_RECV, (uint64_t)(count * esz));
    const double t0 = comm_wait_begin(c, COMM_KIND_RECV);
    char *p = buf;
    if (comm_wait_yields(c)) {
        /* the wait policy's test-and-yield loop (docs/parallel.md, "Waiting") */
        const int n = count ? comm_pieces(count) : 0;
        comm_request_t *r = comm_request_new(c, COMM_KIND_RECV, n, NULL);
        size_t done = 0;
        for (int i = 0; i < n; i++) {
            const int k = comm_piece(count, done);
            CHECK_MPI(MPI_Irecv(p + done * esz, k, comm_mpi_type(t), src, tag, c->mpi, &r->reqs[i]));
            done += (size_t)k;
        }
        comm_wait(&r);
        return;
    }
    for (size_t done = 0; done < count;) {
        const int k = comm_piece(count, done);
        CHECK_MPI(MPI_Recv(p + done * esz, k, comm_mpi_type(t), src, tag, c->mpi, MPI_STATUS_IGNORE));
        done += (size_t)k;
    }
    comm_stats_add_wait(c, COMM_KIND_RECV, MPI_Wtime() - t0);
}
