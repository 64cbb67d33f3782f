/* The process groups of DESIGN.md: world = pp x dp x tp. Pipeline stages
 * outermost: stage s holds the S = world / pp ranks s S .. s S + S - 1
 * (pp_rank = rank / S, the position inside the stage q = rank % S). Inside
 * a stage, tensor-parallel ranks innermost (tp_rank = q % tp: consecutive,
 * inside a node), then the expert-parallel ranks (ep_rank = (q / tp) % ep)
 * so that the token all-to-all stays inside a node too; the data-parallel
 * index is q / tp. So rank = pp_rank S + dp_rank tp + tp_rank.
 *
 *   pp   the pp ranks of equal q, one a stage  activations and their gradients (send/recv)
 *   emb  of pp: its first and last stage       tied embeddings' gradient (all-reduce); pp > 1
 *        (the middle stages: a group of their own, unused)
 *
 *   tp   the tp consecutive ranks              sharded matmuls (all-reduce)
 *   dp   ranks with the same tp_rank           dense parameters: reduce and ZeRO shard
 *   ep   ep ranks of one dp..: same tp_rank,   token dispatch/combine (all-to-all)
 *        rank / (tp * ep) equal
 *   edp  ranks with the same (tp_rank, ep_rank) expert parameters: reduce and ZeRO shard
 *
 * See docs/parallel.md. */
#ifndef FABULA_PARALLEL_GROUPS_H
#define FABULA_PARALLEL_GROUPS_H

#include "parallel/comm.h"

typedef struct groups {
    comm_t *world, *dp, *ep, *edp, *tp, *pp, *emb; /* emb NULL without pp */
    /* The same groups for buffers in device memory (groups_attach_device);
     * NULL on host backends. */
    comm_t *dp_dev, *ep_dev, *edp_dev, *tp_dev;
    int world_rank, world_size;
    int pp_rank, pp_size;       /* rank / S, pp (S = world / pp: a stage's ranks) */
    int tp_rank, tp_size;       /* rank % tp, tp */
    int dp_rank, dp_size;       /* q / tp, S / tp (q = rank % S; == world without tp and pp) */
    int ep_rank, ep_size;       /* (q / tp) % ep, ep */
    int edp_rank, edp_size;     /* q / (tp ep), S / (tp ep) */
} groups_t;

/* The rule of an expert-parallel size, one statement of it for the config
 * and for groups_create: ep (>= 1) on a world of `world` ranks laid out
 * pp x tp x (world / pp / tp) must be 1 for a dense model (experts 0 or
 * 1), divide world / tp / pp and divide the experts. Writes what ep must
 * be ("a divisor of ...", after "expected") for each rule it breaks into
 * why[0..max) and returns how many it breaks (0: ep fits). */
#define GROUPS_EP_WHY 160
int groups_ep_check(int world, int tp, int pp, int ep, int experts, char why[][GROUPS_EP_WHY], int max);

/* Collective over all processes (after parallel_init). `num_local_experts`
 * is the model's (0 or 1: dense). A layout that cannot be built (ep < 1, ep
 * not dividing the world size or the number of experts, ep > 1 on a dense
 * model) is a config error naming parallel.expert_parallel_size: exit
 * FB_EXIT_USAGE, message from rank 0. Ranks passing different arguments is an
 * internal error. */
void groups_create(groups_t *g, int ep_size, int num_local_experts);
/* The same with tensor parallelism over tp_size consecutive ranks; a tp_size
 * below 1 or not dividing the world size is a config error naming
 * parallel.tensor_parallel_size (the model's own divisibility is checked by
 * the config reader), and ep must divide world / tp. */
void groups_create_tp(groups_t *g, int tp_size, int ep_size, int num_local_experts);
/* The same with pp_size pipeline stages outermost; a pp_size below 1 or not
 * dividing the world size is a config error naming
 * parallel.pipeline_parallel_size; tp and ep then divide world / pp. */
void groups_create_pp(groups_t *g, int pp_size, int tp_size, int ep_size, int num_local_experts);
/* Collective: adds the device twins of dp, ep, edp and (tp > 1) tp (comm_device_create:
 * NCCL where each rank has its own GPU, else MPI staging through pinned
 * host memory). Call after the CUDA backend is bound. */
void groups_attach_device(groups_t *g);
/* Collective; frees the groups (and their device twins). */
void groups_free(groups_t *g);

#endif
