/* The process groups of DESIGN.md: world = dp x ep, expert-parallel ranks
 * contiguous (ep_rank = rank % ep) so that the token all-to-all stays inside
 * a node.
 *
 *   dp   all ranks                     dense parameters: reduce and ZeRO shard
 *   ep   the ep consecutive ranks      token dispatch/combine (all-to-all)
 *   edp  ranks with the same ep_rank   expert parameters: reduce and ZeRO shard
 *
 * See docs/parallel.md. */
#ifndef FABULA_PARALLEL_GROUPS_H
#define FABULA_PARALLEL_GROUPS_H

#include "parallel/comm.h"

typedef struct groups {
    comm_t *world, *dp, *ep, *edp;
    /* The same groups for buffers in device memory (groups_attach_device);
     * NULL on host backends. */
    comm_t *dp_dev, *ep_dev, *edp_dev;
    int world_rank, world_size;
    int dp_rank, dp_size;       /* == world */
    int ep_rank, ep_size;       /* rank % ep, ep */
    int edp_rank, edp_size;     /* rank / ep, world / ep */
} groups_t;

/* Collective over all processes (after parallel_init). `num_local_experts`
 * is the model's (0 or 1: dense). A layout that cannot be built (ep < 1, ep
 * not dividing the world size or the number of experts, ep > 1 on a dense
 * model) is a config error naming parallel.expert_parallel_size: exit
 * FB_EXIT_USAGE, message from rank 0. Ranks passing different arguments is an
 * internal error. */
void groups_create(groups_t *g, int ep_size, int num_local_experts);
/* Collective: adds the device twins of dp, ep and edp (comm_device_create:
 * NCCL where each rank has its own GPU, else MPI staging through pinned
 * host memory). Call after the CUDA backend is bound. */
void groups_attach_device(groups_t *g);
/* Collective; frees the groups (and their device twins). */
void groups_free(groups_t *g);

#endif
