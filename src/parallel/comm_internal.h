/* What comm.c (handles, completion, statistics) and comm_coll.c (the
 * collectives) share about the MPI backend. Private to src/parallel. */
#ifndef FABULA_PARALLEL_COMM_INTERNAL_H
#define FABULA_PARALLEL_COMM_INTERNAL_H

#include <mpi.h>

#include "parallel/comm.h"

struct comm {
    MPI_Comm mpi;
    int rank, size;
    comm_stats_t stats[COMM_KIND_COUNT];
};

/* One call of the API may become several MPI requests (a split allreduce or
 * bcast). `ints` holds the int count/displacement arrays MPI reads until the
 * requests complete. */
struct comm_request {
    comm_t *comm;
    comm_kind_t kind;
    int n;
    MPI_Request *reqs;
    int *ints;
};

/* A request of `n` MPI requests (all MPI_REQUEST_NULL) owning `ints`. */
comm_request_t *comm_request_new(comm_t *c, comm_kind_t kind, int n, int *ints);

/* Counts the call and its payload in c's statistics. */
void comm_stats_count(comm_t *c, comm_kind_t kind, uint64_t bytes);
void comm_stats_add_wait(comm_t *c, comm_kind_t kind, double seconds);

#endif
