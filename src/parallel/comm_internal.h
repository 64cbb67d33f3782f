/* What comm.c (handles, completion, statistics), comm_coll.c (the
 * collectives) and the device backends (comm_device*.c) share. Private to
 * src/parallel. */
#ifndef FABULA_PARALLEL_COMM_INTERNAL_H
#define FABULA_PARALLEL_COMM_INTERNAL_H

#include <mpi.h>

#include "parallel/comm.h"

struct comm_backend;
struct comm_device;
struct comm_device_request;

/* A host comm has backend == NULL and takes host buffers (MPI, the code of
 * comm_coll.c). A device comm (comm_device_create) has a backend, whose
 * functions every collective of the API dispatches to first, and its state
 * in `device`. */
struct comm {
    MPI_Comm mpi;
    int rank, size;
    char label[24];     /* the group's name in hang reports (comm_set_label) */
    uint64_t seq;       /* calls started on this group: the same numbering on every rank */
    comm_stats_t stats[COMM_KIND_COUNT];
    const struct comm_backend *backend;
    struct comm_device *device;
};

/* One call of the API may become several MPI requests (a split allreduce or
 * bcast). `ints` holds the int count/displacement arrays MPI reads until the
 * requests complete. On a device comm `device` is the backend's part. */
struct comm_request {
    comm_t *comm;
    comm_kind_t kind;
    uint64_t seq;       /* the group's call number (struct comm's seq) when it started */
    int n;
    MPI_Request *reqs;
    int *ints;
    struct comm_device_request *device;
};

/* The collectives of a device comm. Each starts the operation, counts it
 * in c's statistics like the host path, and returns its request; a blocking
 * call of the API is the start followed by comm_wait. Arguments are those
 * of the API call (allgatherv in place passes send = recv + displs[rank]). */
typedef struct comm_backend {
    comm_request_t *(*allreduce)(comm_t *c, void *buf, size_t count, comm_dtype_t t, comm_op_t op);
    comm_request_t *(*reduce_scatter)(comm_t *c, const void *send, void *recv, const size_t *recvcounts,
                                      comm_dtype_t t, comm_op_t op);
    comm_request_t *(*allgatherv)(comm_t *c, const void *send, void *recv, const size_t *counts,
                                  const size_t *displs, comm_dtype_t t);
    comm_request_t *(*alltoallv)(comm_t *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
                                 void *recv, const size_t *recvcounts, const size_t *rdispls, comm_dtype_t t);
    comm_request_t *(*alltoall)(comm_t *c, const void *send, void *recv, size_t count, comm_dtype_t t);
    comm_request_t *(*bcast)(comm_t *c, void *buf, size_t bytes, int root);
    /* Counts itself and its time. */
    void (*barrier)(comm_t *c);
    /* comm_wait's part: completes r (see comm.h for what that means on the
     * device) and frees r->device; comm_wait times it and frees r. */
    void (*finish)(comm_request_t *r);
    /* comm_test's part: 1 when complete (finish then returns at once). */
    int (*test)(comm_request_t *r);
    /* comm_free's part, before the MPI communicator is freed: releases
     * c->device. */
    void (*release)(comm_t *c);
} comm_backend_t;

/* MPI counts are int: a call on `count` elements goes in pieces of at most
 * comm_max_count(). comm_piece is the length of the piece that starts at
 * element `done` (< count); comm_pieces how many pieces there are. */
int comm_piece(size_t count, size_t done);
int comm_pieces(size_t count);

/* The MPI datatype of a comm dtype (16-bit floats as raw 2-byte elements). */
MPI_Datatype comm_mpi_type(comm_dtype_t t);

/* docs/parallel.md, "Waiting". Set once by parallel_init (collective over
 * the node communicator) from FABULA_MPI_WAIT and the node's ranks and
 * CPUs; exits 2 on a bad value. */
void comm_wait_policy_init(MPI_Comm node, int local_size);
/* Completes reqs[0..n) the policy's way (all become MPI_REQUEST_NULL). */
void comm_wait_mpi(MPI_Request *reqs, int n);
/* 1 when c's blocking calls go through their non-blocking form and
 * comm_wait (a host comm under the yield policy). */
int comm_wait_yields(const comm_t *c);

/* comm_world()'s life: parallel_init opens it, parallel_finalize closes it. */
void comm_world_open(void);
void comm_world_close(void);

/* A host comm over `mpi` (which it owns): sets MPI_ERRORS_RETURN on it. */
comm_t *comm_wrap(MPI_Comm mpi);

/* A request of `n` MPI requests (all MPI_REQUEST_NULL) owning `ints`. */
comm_request_t *comm_request_new(comm_t *c, comm_kind_t kind, int n, int *ints);

/* Counts the call and its payload in c's statistics. */
void comm_stats_count(comm_t *c, comm_kind_t kind, uint64_t bytes);
void comm_stats_add_wait(comm_t *c, comm_kind_t kind, double seconds);

/* A blocking call of kind `kind` on c begins: the heartbeat says so (its
 * end is comm_stats_add_wait's); returns MPI_Wtime(). */
double comm_wait_begin(comm_t *c, comm_kind_t kind);

#endif
