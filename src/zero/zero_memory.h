/* What the ZeRO engine holds on one rank, as a function of the config, the
 * parameter table's shape and the reduction groups' sizes: zero_create
 * allocates by these formulas and zero_memory reports them, and `fabula plan
 * memory` calls the same function without a model or MPI (docs/zero.md,
 * docs/plan.md "Memory"). */
#ifndef FABULA_ZERO_ZERO_MEMORY_H
#define FABULA_ZERO_ZERO_MEMORY_H

#include <stddef.h>

#include "config/config.h"
#include "model/params.h"

/* The workspaces a group holds: the engine allocates them (zero_impl.h)
 * and the formulas count them. */
#define ZERO_GRAD_SLOTS 3   /* gradient workspaces per group (stage 2/3) */
#define ZERO_PARAM_SLOTS 4  /* gathered-parameter workspaces per group (stage 3) */

/* Bytes this rank holds, by kind (docs/zero.md has the formulas). */
typedef struct zero_memory {
    size_t params, grads, optimizer;    /* persistent state */
    size_t workspace;                   /* gather/reduce buffers, bucket-sized */
    size_t host_optimizer;              /* part of `optimizer` kept in host memory (offload) */
    size_t host_params;                 /* part of `params` kept in host memory (stage 3 offload_param) */
    size_t host_staging;                /* offload: host copies of the owned parameters and gradients */
    size_t buckets;                     /* transient, at most in flight: reduction bounce buffers and the MPI
                                         * library's scratch for an allreduce bucket (not in `workspace`) */
} zero_memory_t;

/* One reduction group's shape: its elements, its largest block range (the
 * workspace slot size), block 0's range (the tied-embedding slot) and, on
 * the first and last pipeline stage with tied embeddings, the embedding's
 * elements (the workspace its gradient is summed in over the two stages;
 * zero_group_shape_of leaves it 0: the table does not know the stages). */
typedef struct zero_group_shape {
    size_t numel, max_block, block0, tied_pp;
} zero_group_shape_t;

void zero_group_shape_of(const param_table_t *t, int group, zero_group_shape_t *shape);
/* Elements of the group rank `rank` of `size` owns: the ZeRO shard
 * [r S, (r+1) S) of S = ceil(numel / size), cut at numel. */
size_t zero_owned(size_t numel, int size, int rank);
/* The whole memory of a rank at cfg->zero's stage and offload, with group g
 * of shape[g] over size[g] ranks, this one rank[g]. */
zero_memory_t zero_memory_of(const config_t *cfg, const zero_group_shape_t shape[PARAM_NGROUPS],
                             const int size[PARAM_NGROUPS], const int rank[PARAM_NGROUPS]);

#endif
