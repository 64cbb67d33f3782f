#include "parallel/world.h"

#include <pthread.h>
#include <signal.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_internal.h"
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
    comm_wait_policy_init(node, local_size);
    CHECK_MPI(MPI_Comm_free(&node));
}

/* fb_fatal and fb_fail_call: every rank goes down at once, since the others
 * may be waiting for this one in a collective. A single rank exits without
 * MPI_Finalize: finalizing runs parallel HDF5's shutdown, which closes any
 * file left open (a checkpoint whose write failed, disk full) and crashes
 * on it. */
static _Noreturn void abort_job(int code)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized && world_size > 1)
        MPI_Abort(MPI_COMM_WORLD, code);
    /* hydra's proxy may see the PMI socket close before it reaps this
     * process and send SIGHUP to clean up: the job then ended "killed by
     * signal 1" (exit 1) instead of with its code (disk_full_writers.sh,
     * now and then under load). Nothing is left to handle a signal for. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    _Exit(code);
}

/* fb_fatal_all: every rank fails alike and leaves MPI by itself. */
static _Noreturn void exit_job(int code)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
    exit(code);
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
    fb_error_set_rank(world_rank);
    fb_set_abort_hook(abort_job);
    fb_set_exit_hook(exit_job);
    find_node_peers();
    comm_world_open();
}

void parallel_finalize(void)
{
    comm_world_close();
    fb_set_abort_hook(NULL);
    fb_set_exit_hook(NULL);
    CHECK_MPI(MPI_Finalize());
}

int parallel_rank(void) { return world_rank; }
int parallel_size(void) { return world_size; }
int parallel_local_rank(void) { return local_rank; }
int parallel_local_size(void) { return local_size; }
double parallel_wtime(void) { return MPI_Wtime(); }

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

const char *parallel_library_version_full(void)
{
    static char version[1024];
    char raw[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(raw, &len) != MPI_SUCCESS)
        return "unknown";
    /* One line for the validation table: the first lines (name, version,
     * release date, device), "; " between them, tabs as spaces; the
     * configure and compiler lines MPICH adds after them are left out. */
    size_t o = 0;
    int lines = 0;
    for (char *line = strtok(raw, "\n"); line && lines < 4; line = strtok(NULL, "\n")) {
        if (strstr(line, "configure") || strlen(line) > 160)
            continue;
        for (char *p = line; *p; p++)
            if (*p == '\t')
                *p = ' ';
        while (*line == ' ')
            line++;
        size_t n = strlen(line);
        while (n > 0 && line[n - 1] == ' ')
            n--;
        if (n == 0 || o + n + 3 >= sizeof version)
            continue;
        if (o) {
            version[o++] = ';';
            version[o++] = ' ';
        }
        memcpy(version + o, line, n);
        o += n;
        lines++;
    }
    version[o] = '\0';
    return version;
}

void parallel_agree_outcome(int code, const char *msg)
{
    comm_t *w = comm_world();
    const int rank = parallel_rank();
    long long first = code ? rank : parallel_size();
    comm_allreduce(w, &first, 1, COMM_I64, COMM_MIN);
    if (first == parallel_size())
        return;
    const int from = (int)first;
    int hdr[2] = {code, rank == from ? (int)strlen(msg) + 1 : 0};
    comm_bcast(w, hdr, sizeof hdr, from);
    char *text = fb_malloc((size_t)hdr[1]);
    if (rank == from)
        memcpy(text, msg, (size_t)hdr[1]);
    comm_bcast(w, text, (size_t)hdr[1], from);
    fb_fatal_all(hdr[0], "%s", text);
}
