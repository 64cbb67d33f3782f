/* The parameter index: every named tensor of the model as a view into one
 * flat fp32 buffer per reduction group. Gradients and optimizer moments use
 * the same layout, so buckets, ZeRO shards, checkpoints and exports are all
 * slices of this one table. */
#ifndef FABULA_MODEL_PARAMS_H
#define FABULA_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* Dense parameters reduce over all data-parallel ranks; expert parameters
 * over the ranks holding the same experts. */
enum { PARAM_GROUP_DENSE = 0, PARAM_GROUP_EXPERT = 1, PARAM_NGROUPS = 2 };

enum param_init { PARAM_INIT_NORMAL, PARAM_INIT_NORMAL_SCALED, PARAM_INIT_ONES };

typedef struct param_view {
    char name[96];      /* Hugging Face name, e.g. model.layers.0.self_attn.q_proj.weight */
    int group;          /* PARAM_GROUP_* */
    int ndim;
    int64_t shape[2];
    size_t offset;      /* in elements, inside the group's buffer */
    size_t numel;
    enum param_init init;
    int block;          /* 0 embedding, 1+l layer l, L+1 final norm and head */
    /* Tensor parallelism (docs/parallel.md): this rank's slice of the
     * Hugging Face tensor of shape full_shape, rows (tp_dim 0) or columns
     * (tp_dim 1) [tp_off, tp_off + shape[tp_dim]); tp_dim -1: the whole
     * tensor, replicated on every tp rank. */
    int tp_dim;
    int64_t full_shape[2];
    int64_t tp_off;
    /* How many tp ranks hold this very slice and which copy this rank's is
     * (0..tp_copies-1): tp and tp_rank for a replicated tensor, tp / kv for
     * the k/v slices with fewer kv heads than tp ranks (one head replicated
     * over the ranks whose query heads use it, docs/parallel.md), else 1
     * and 0. Copy 0 alone writes it to a checkpoint; the gradient norm
     * counts 1/tp_copies of it on each. */
    int tp_copies, tp_copy;
} param_view_t;

typedef struct param_table {
    param_view_t *views;
    int n, cap;
    size_t numel[PARAM_NGROUPS];
    /* Blocks are the units the forward and backward visit in order; a
     * block's views are contiguous in each group: [lo, hi). */
    int nblocks;
    size_t (*block_range)[PARAM_NGROUPS][2];
    int build_block;    /* block of the views being added (build only) */
    /* Expert parallelism: each MoE layer's expert group holds only the
     * global experts [expert_lo, expert_lo + experts_local), still named by
     * their global index (docs/expert-parallel.md). ep 1: all of them. */
    int ep_size, ep_rank, expert_lo, experts_local;
    /* Tensor parallelism: the embedding, lm_head, q/k/v, gate/up and the
     * experts' w1/w3 split by rows (vocabulary, heads, FFN columns), o, down
     * and w2 by columns; tp 1: none. */
    int tp_size, tp_rank;
    /* Tied embeddings under pipeline parallelism: the last stage (without
     * layer 0) holds its own copy of model.embed_tokens.weight as the head,
     * in block num_hidden_layers + 1; the view's index, -1 elsewhere. Its
     * gradient is summed with the first stage's (docs/parallel.md). */
    int tied_copy;
} param_table_t;

/* Builds the table for a model config, in the order of docs/model.md. */
void param_table_build(param_table_t *t, const model_config_t *mc);
/* The same for ep_rank of an expert-parallel group of ep_size ranks: the
 * expert group keeps num_local_experts / ep_size experts per MoE layer
 * (ep_size must divide num_local_experts). */
void param_table_build_ep(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank);
/* ... and for tp_rank of a tensor-parallel group of tp_size ranks (tp_size
 * divides the vocabulary, the attention heads and intermediate_size, and
 * divides the kv heads or is a multiple of them: then rank t holds kv head
 * t kv / tp, replicated over tp / kv ranks). */
void param_table_build_tp(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank, int tp_size,
                          int tp_rank);
/* ... and for the pipeline stage holding layers [layer_lo, layer_hi): the
 * embedding only where layer_lo is 0, the final norm and the head only where
 * layer_hi is num_hidden_layers (with tied embeddings and layer_lo > 0, the
 * head is a copy of the embedding: tied_copy). Blocks keep their whole-model numbers (an
 * absent block's ranges are empty). */
void param_table_build_pp(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank, int tp_size,
                          int tp_rank, int layer_lo, int layer_hi);
/* Where this rank's slice of a tensor sits in its Hugging Face tensor
 * (full_shape, row-major): local element e (row-major in the slice) is at
 * full position param_view_full_pos(v, e). A row slice (tp_dim 0) and a
 * whole tensor are one contiguous run; a column slice (tp_dim 1) is
 * contiguous only along its rows: param_view_run(v, e) elements from e on
 * are contiguous in both (at most to the end of the slice). */
size_t param_view_full_pos(const param_view_t *v, size_t e);
size_t param_view_run(const param_view_t *v, size_t e);
/* ... and for the interleaved stage holding nchunks runs of layers
 * [lo[c], hi[c]), in increasing order (the embedding where lo[0] is 0, the
 * head where hi[nchunks - 1] is num_hidden_layers). */
void param_table_build_chunks(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank, int tp_size,
                              int tp_rank, int nchunks, const int *lo, const int *hi);
void param_table_free(param_table_t *t);
/* NULL if absent. */
const param_view_t *param_table_find(const param_table_t *t, const char *name);
size_t param_table_total(const param_table_t *t);
/* Elements of group g used by block b: [*lo, *hi) (empty when lo == hi). */
void param_table_block_range(const param_table_t *t, int block, int group, size_t *lo, size_t *hi);

/* Whether layer l has an MoE FFN. */
int model_layer_is_moe(const model_config_t *mc, int l);

#endif
