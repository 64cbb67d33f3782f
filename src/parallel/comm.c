/* comm handles over MPI: communicators, requests and their completion,
 * statistics and the per-call count limit. The collectives are in
 * comm_coll.c; device comms hand completion and release to their backend
 * (comm_device.c). */
#include "parallel/comm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_internal.h"
#include "parallel/heartbeat.h"
#include "parallel/mpi_check.h"
#include "util/error.h"

/* 0: the backend's own limit. */
static size_t max_count_override;

size_t comm_max_count(void) { return max_count_override ? max_count_override : (size_t)INT_MAX; }

void comm_set_max_count(size_t n) { max_count_override = n > (size_t)INT_MAX ? (size_t)INT_MAX : n; }

int comm_piece(size_t count, size_t done)
{
    size_t m = comm_max_count();
    return (int)(count - done < m ? count - done : m);
}

int comm_pieces(size_t count)
{
    size_t m = comm_max_count();
    size_t k = count / m + (count % m != 0);
    FB_ASSERT(k <= (size_t)INT_MAX);
    return (int)k;
}

size_t comm_dtype_size(comm_dtype_t t)
{
    switch (t) {
    case COMM_F32: return sizeof(float);
    case COMM_F64: return sizeof(double);
    case COMM_I32: return sizeof(int32_t);
    case COMM_I64: return sizeof(int64_t);
    case COMM_BYTE: return 1;
    case COMM_BF16: return 2;
    case COMM_F16: return 2;
    }
    fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "comm_dtype_size", "unknown comm_dtype_t");
}

comm_t *comm_wrap(MPI_Comm mpi)
{
    /* Errors as return codes, so CHECK_MPI names the failed call; set here
     * rather than relying on inheritance from the parent. */
    CHECK_MPI(MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN));
    comm_t *c = fb_calloc(1, sizeof *c);
    c->mpi = mpi;
    CHECK_MPI(MPI_Comm_rank(mpi, &c->rank));
    CHECK_MPI(MPI_Comm_size(mpi, &c->size));
    snprintf(c->label, sizeof c->label, "%s", "group");
    return c;
}

comm_t *comm_create_world(void)
{
    MPI_Comm mpi;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &mpi));
    return comm_wrap(mpi);
}

static comm_t *world;

void comm_world_open(void)
{
    world = comm_create_world();
    comm_set_label(world, "world");
}

void comm_world_close(void) { comm_free(&world); }

comm_t *comm_world(void)
{
    FB_ASSERT(world);
    return world;
}

comm_t *comm_split(comm_t *parent, int color, int key)
{
    FB_ASSERT(parent && color >= 0);
    MPI_Comm mpi;
    CHECK_MPI(MPI_Comm_split(parent->mpi, color, key, &mpi));
    return comm_wrap(mpi);
}

void comm_free(comm_t **c)
{
    if (!c || !*c)
        return;
    if ((*c)->backend)
        (*c)->backend->release(*c);
    CHECK_MPI(MPI_Comm_free(&(*c)->mpi));
    free(*c);
    *c = NULL;
}

int comm_rank(const comm_t *c) { return c->rank; }
int comm_size(const comm_t *c) { return c->size; }

comm_request_t *comm_request_new(comm_t *c, comm_kind_t kind, int n, int *ints)
{
    comm_request_t *r = fb_calloc(1, sizeof *r);
    r->comm = c;
    r->kind = kind;
    r->seq = c->seq;
    r->n = n;
    r->reqs = fb_malloc((size_t)(n > 0 ? n : 1) * sizeof *r->reqs);
    for (int i = 0; i < n; i++)
        r->reqs[i] = MPI_REQUEST_NULL;
    r->ints = ints;
    return r;
}

void comm_wait(comm_request_t **req)
{
    if (!req || !*req)
        return;
    comm_request_t *r = *req;
    heartbeat_wait_begin(r->comm->label, comm_kind_name(r->kind), r->seq);
    double t0 = MPI_Wtime();
    if (r->comm->backend)
        r->comm->backend->finish(r);
    comm_wait_mpi(r->reqs, r->n);
    comm_stats_add_wait(r->comm, r->kind, MPI_Wtime() - t0);
    free(r->reqs);
    free(r->ints);
    free(r);
    *req = NULL;
}

/* One at a time: the time each wait blocks is charged to that request's
 * kind, and all must complete anyway. */
void comm_waitall(comm_request_t **reqs, int n)
{
    for (int i = 0; i < n; i++)
        comm_wait(&reqs[i]);
}

int comm_test(comm_request_t *req)
{
    FB_ASSERT(req);
    if (req->comm->backend)
        return req->comm->backend->test(req);
    /* Each MPI_Test drives progress; completed requests become
     * MPI_REQUEST_NULL, which tests as complete. */
    int all = 1;
    for (int i = 0; i < req->n; i++) {
        int done = 0;
        CHECK_MPI(MPI_Test(&req->reqs[i], &done, MPI_STATUS_IGNORE));
        all &= done != 0;
    }
    return all;
}

void comm_stats_count(comm_t *c, comm_kind_t kind, uint64_t bytes)
{
    c->seq++;
    c->stats[kind].calls++;
    c->stats[kind].bytes += bytes;
}

/* Every group's waits also add to one process-wide sum: the phase timers
 * (src/monitor) subtract it from the phases that contain waits. */
static double wait_total;

void comm_stats_add_wait(comm_t *c, comm_kind_t kind, double seconds)
{
    c->stats[kind].wait_seconds += seconds;
    wait_total += seconds;
    heartbeat_wait_end();
}

double comm_wait_begin(comm_t *c, comm_kind_t kind)
{
    heartbeat_wait_begin(c->label, comm_kind_name(kind), c->seq);
    return MPI_Wtime();
}

void comm_set_label(comm_t *c, const char *label)
{
    if (!c)
        return;
    /* one label names every instance of a kind of group (each stage has its
     * dp group): the world rank of the group's first member tells them apart */
    MPI_Group mine, all;
    int zero = 0, first = 0;
    CHECK_MPI(MPI_Comm_group(c->mpi, &mine));
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &all));
    CHECK_MPI(MPI_Group_translate_ranks(mine, 1, &zero, all, &first));
    CHECK_MPI(MPI_Group_free(&mine));
    CHECK_MPI(MPI_Group_free(&all));
    snprintf(c->label, sizeof c->label, "%.10s@%d", label, first);
}

double comm_wait_seconds_total(void) { return wait_total; }

const comm_stats_t *comm_stats(const comm_t *c, comm_kind_t kind)
{
    FB_ASSERT(kind >= 0 && kind < COMM_KIND_COUNT);
    return &c->stats[kind];
}

void comm_stats_reset(comm_t *c) { memset(c->stats, 0, sizeof c->stats); }

const char *comm_kind_name(comm_kind_t kind)
{
    static const char *const names[COMM_KIND_COUNT] = {"allreduce", "reduce_scatter", "allgather", "alltoallv",
                                                       "alltoall",  "bcast",          "barrier",   "exscan",
                                                       "gather",    "send",           "recv"};
    FB_ASSERT(kind >= 0 && kind < COMM_KIND_COUNT);
    return names[kind];
}
