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
/* Elements per piece of an offloaded update, and of the backend staging
 * that rounds a host-resident master into 16-bit weights (16 MiB of fp32) */
#define ZERO_OFFLOAD_CHUNK ((size_t)1 << 22)

/* Bytes this rank holds, by kind (docs/zero.md has the formulas). */
typedef struct zero_memory {
    size_t params, grads, optimizer;    /* persistent fp32 state: master weights, gradients, Adam m and v */
    size_t weights16;                   /* the 16-bit weights of a 16-bit backend: whole at stages 0-2 (the
                                         * model's compute copy), the owned shard at stage 3 */
    size_t workspace;                   /* gather/reduce buffers, bucket-sized */
    size_t host_optimizer;              /* part of `optimizer` kept in host memory (offload) */
    size_t host_params;                 /* part of `params` kept in host memory (offload) */
    size_t host_grads;                  /* part of `grads` kept in host memory (16-bit, offload_optimizer) */
    size_t host_weights16;              /* part of `weights16` kept in host memory (16-bit, offload_param) */
    size_t host_staging;                /* offload: host copies of owned state the update reads on the host */
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
/* Where a rank's states live (docs/zero.md, "Mixed precision"): a function
 * of the stage, the offloads and the backend's compute element size. */
typedef struct zero_placement {
    int stage;
    int mixed;          /* stage >= 1 with 16-bit compute: fp32 master shard + 16-bit weights */
    int master_host;    /* the fp32 master shard in host memory */
    int half_host;      /* the 16-bit shard in host memory (mixed stage 3, offload_param) */
    int grad_host;      /* the fp32 gradient shard in host memory (mixed stage 2/3, offload_optimizer) */
    size_t act_bytes;   /* bytes of a compute element: 4 in fp32 */
} zero_placement_t;
zero_placement_t zero_placement_of(const config_t *cfg, size_t act_bytes);
/* The whole memory of a rank at cfg->zero's stage and offload, with group g
 * of shape[g] over size[g] ranks, this one rank[g], computing with
 * act_bytes-byte elements (4: fp32). */
zero_memory_t zero_memory_of(const config_t *cfg, const zero_group_shape_t shape[PARAM_NGROUPS],
                             const int size[PARAM_NGROUPS], const int rank[PARAM_NGROUPS], size_t act_bytes);

#endif
