#include "parallel/group_nodes.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "parallel/comm.h"
#include "parallel/mpi_check.h"
#include "parallel/world.h"

static const char *const kind_names[GROUP_NODES_KINDS] = {"tp", "dp", "ep", "pp"};

/* Whether every group of c lies inside one node (-1: groups of one rank). */
static int inside_one_node(comm_t *c, int leader)
{
    if (!c)
        return -1;
    int size = comm_size(c);
    comm_allreduce(comm_world(), &size, 1, COMM_I32, COMM_MAX);
    if (size <= 1)
        return -1;
    int lo = leader, hi = leader;
    comm_allreduce(c, &lo, 1, COMM_I32, COMM_MIN);
    comm_allreduce(c, &hi, 1, COMM_I32, COMM_MAX);
    int inside = lo == hi;
    comm_allreduce(comm_world(), &inside, 1, COMM_I32, COMM_MIN);
    return inside;
}

void group_nodes_find(const groups_t *g, group_nodes_t *out)
{
    memset(out, 0, sizeof *out);
    /* a node's ranks are those that can share memory; its leader the
     * lowest world rank among them */
    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int rank = parallel_rank(), leader = 0, local = 0;
    CHECK_MPI(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node));
    CHECK_MPI(MPI_Comm_size(node, &local));
    CHECK_MPI(MPI_Comm_free(&node));
    int counts[3] = {leader == rank, local, -local};
    comm_allreduce(comm_world(), counts, 1, COMM_I32, COMM_SUM);
    comm_allreduce(comm_world(), counts + 1, 2, COMM_I32, COMM_MAX);
    out->nodes = counts[0];
    out->ranks_max = counts[1];
    out->ranks_min = -counts[2];
    comm_t *kinds[GROUP_NODES_KINDS] = {g->tp, g->dp, g->ep, g->pp};
    for (int k = 0; k < GROUP_NODES_KINDS; k++)
        out->inside[k] = inside_one_node(kinds[k], leader);
}

void group_nodes_text(const group_nodes_t *n, char *buf, size_t cap)
{
    size_t o = 0;
    if (n->ranks_min == n->ranks_max)
        o += (size_t)snprintf(buf, cap, "%d node%s x %d rank%s", n->nodes, n->nodes == 1 ? "" : "s", n->ranks_max,
                              n->ranks_max == 1 ? "" : "s");
    else
        o += (size_t)snprintf(buf, cap, "%d nodes x %d-%d ranks", n->nodes, n->ranks_min, n->ranks_max);
    for (int k = 0; k < GROUP_NODES_KINDS && o < cap; k++)
        if (n->inside[k] >= 0)
            o += (size_t)snprintf(buf + o, cap - o, "; %s groups %s", kind_names[k],
                                  n->inside[k] ? "inside a node" : "across nodes");
}
