/* How a rank waits for MPI (docs/parallel.md, "Waiting"): busy-polling
 * inside MPI, the library's own way, or testing and yielding the core
 * between tests. With more ranks on a node than CPUs they may run on, a
 * rank that spins in a collective holds the core its peer needs to reach
 * that collective, and every blocking exchange costs a scheduler time slice
 * (ZeRO-3 on 4 ranks over 2 cores spent 80% of its step so); yielding
 * hands the core over at once. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_internal.h"
#include "parallel/mpi_check.h"
#include "util/error.h"

static comm_wait_mode_t mode = COMM_WAIT_SPIN;
static int node_cpus;

/* The CPUs any rank of the node may run on: the union of their affinity
 * masks (a rank bound to one core still shares the node's cores with the
 * others, so its own mask alone says nothing). */
static int count_node_cpus(MPI_Comm node)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &set, (int)sizeof set, MPI_BYTE, MPI_BOR, node));
    return CPU_COUNT(&set);
}

void comm_wait_policy_init(MPI_Comm node, int local_size)
{
    /* Collective over the node whatever the setting, so every rank takes
     * the same path. */
    node_cpus = count_node_cpus(node);
    const char *env = getenv("FABULA_MPI_WAIT");
    if (!env || !*env || !strcmp(env, "auto"))
        mode = node_cpus > 0 && local_size > node_cpus ? COMM_WAIT_YIELD : COMM_WAIT_SPIN;
    else if (!strcmp(env, "spin"))
        mode = COMM_WAIT_SPIN;
    else if (!strcmp(env, "yield"))
        mode = COMM_WAIT_YIELD;
    else
        fb_fatal_all(FB_EXIT_USAGE, "FABULA_MPI_WAIT is '%s': expected auto, spin or yield", env);
}

comm_wait_mode_t comm_wait_mode(void) { return mode; }
int comm_node_cpus(void) { return node_cpus; }

int comm_wait_yields(const comm_t *c) { return mode == COMM_WAIT_YIELD && !c->backend; }

void comm_wait_mpi(MPI_Request *reqs, int n)
{
    if (mode != COMM_WAIT_YIELD) {
        /* One by one rather than MPI_Waitall: same completion, and GCC
         * misreads MPI_STATUSES_IGNORE as a zero-size status array. */
        for (int i = 0; i < n; i++)
            CHECK_MPI(MPI_Wait(&reqs[i], MPI_STATUS_IGNORE));
        return;
    }
    for (;;) {
        /* Completed requests become MPI_REQUEST_NULL, which tests as
         * complete. */
        int all = 1;
        for (int i = 0; i < n; i++) {
            int done = 0;
            CHECK_MPI(MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE));
            all &= done != 0;
        }
        if (all)
            return;
        sched_yield();
    }
}
