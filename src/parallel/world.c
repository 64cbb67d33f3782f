#include "parallel/world.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/abort.h"
#include "parallel/mpi_check.h"
#include "util/error.h"

static int world_rank, world_size = 1;
/* This rank's place among the ranks of its node, found once at start-up:
 * the split is collective over the world, so it cannot be done lazily by
 * whichever rank asks first. */
static int local_rank, local_size = 1;

static void find_node_peers(void)
{
    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_rank(node, &local_rank));
    CHECK_MPI(MPI_Comm_size(node, &local_size));
    CHECK_MPI(MPI_Comm_free(&node));
}

void parallel_init(int *argc, char ***argv)
{
    int provided = 0;
    CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    /* A binary built with one MPI but started by another launcher comes up
     * as N independent singletons that would all write the same files. */
    const char *launcher_size = getenv("OMPI_COMM_WORLD_SIZE");
    if (!launcher_size)
        launcher_size = getenv("PMI_SIZE");
    if (launcher_size && atoi(launcher_size) > world_size)
        fb_fatal(FB_EXIT_USAGE,
                 "the launcher started %s processes but MPI sees a world of %d: this fabula was built "
                 "with %s; start it with that MPI's mpiexec (e.g. mpiexec.mpich) or srun",
                 launcher_size, world_size, parallel_library_version());
    /* Errors come back as codes so CHECK_MPI can name the failed call. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    fb_error_set_mpi_active(1, world_rank);
    find_node_peers();
}

void parallel_finalize(void)
{
    fb_error_set_mpi_active(0, world_rank);
    CHECK_MPI(MPI_Finalize());
}

static void (*abort_hook)(void);

void parallel_set_abort_hook(void (*hook)(void)) { abort_hook = hook; }

_Noreturn void parallel_abort(int code)
{
    /* Cleared first: a hook that fails itself must not run again. */
    void (*hook)(void) = abort_hook;
    abort_hook = NULL;
    if (hook)
        hook();
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized && world_size > 1)
        MPI_Abort(MPI_COMM_WORLD, code);
    if (initialized && !finalized)
        MPI_Finalize();
    _Exit(code);
}

_Noreturn void parallel_exit(int code)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
    exit(code);
}

int parallel_rank(void) { return world_rank; }
int parallel_size(void) { return world_size; }

int world_local_rank(void) { return local_rank; }
int world_local_size(void) { return local_size; }
int parallel_local_size(void) { return local_size; }
double parallel_wtime(void) { return MPI_Wtime(); }
void parallel_barrier(void) { CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

/* MPI counts are int: large buffers go in INT_MAX-sized pieces. */
static void allreduce_chunked(void *buf, size_t n, size_t elsize, MPI_Datatype type, MPI_Op op)
{
    char *p = buf;
    while (n > 0) {
        int count = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, p, count, type, op, MPI_COMM_WORLD));
        p += (size_t)count * elsize;
        n -= (size_t)count;
    }
}

void parallel_allreduce_sum_f32(float *buf, size_t n)
{
    if (world_size > 1)
        allreduce_chunked(buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM);
}

void parallel_allreduce_sum_f64(double *buf, size_t n)
{
    if (world_size > 1)
        allreduce_chunked(buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM);
}

void parallel_allreduce_max_f64(double *buf, size_t n)
{
    if (world_size > 1)
        allreduce_chunked(buf, n, sizeof *buf, MPI_DOUBLE, MPI_MAX);
}

void parallel_allreduce_sum_i64(long long *buf, size_t n)
{
    if (world_size > 1)
        allreduce_chunked(buf, n, sizeof *buf, MPI_LONG_LONG, MPI_SUM);
}

void parallel_bcast(void *buf, size_t bytes, int root)
{
    char *p = buf;
    while (bytes > 0) {
        int count = bytes > (size_t)INT_MAX ? INT_MAX : (int)bytes;
        CHECK_MPI(MPI_Bcast(p, count, MPI_BYTE, root, MPI_COMM_WORLD));
        p += count;
        bytes -= (size_t)count;
    }
}

const char *parallel_library_version(void)
{
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(version, &len) != MPI_SUCCESS)
        return "unknown";
    char *nl = strchr(version, '\n');
    if (nl)
        *nl = '\0';
    return version;
}
