/* What the model's activation buffers weigh, without creating a model: the
 * same sizing pass model_create runs (carve_buffers) and the same buffers
 * moe_ep_create allocates, so `fabula plan memory` and `fabula train`'s
 * start-up line agree to the byte (docs/plan.md, "Memory"). */
#ifndef FABULA_MODEL_MODEL_MEMORY_H
#define FABULA_MODEL_MODEL_MEMORY_H

#include <stddef.h>

#include "config/config.h"

/* The shapes one rank of a tensor-parallel group of tp ranks holds:
 * heads, kv heads, FFN width and vocabulary divided by tp (tp divides
 * them: config_parallel.c checks). */
void model_config_tp_local(const model_config_t *full, int tp, model_config_t *local);
/* The activation arena of a micro-batch of up to max_tokens tokens, stored
 * act_bytes an element, with an expert-parallel group of ep_size ranks
 * (whose expert rows then live in the ep buffers instead), on one rank of
 * a tensor-parallel group of tp_size; mc is the whole model. */
size_t model_arena_bytes(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size, int tp_size);
/* The expert-parallel dispatch and compute buffers moe_ep_create allocates
 * (capacity max_tokens * num_experts_per_tok rows per MoE layer); 0 when
 * ep_size is 1. Under tensor parallelism mc is a tp rank's shapes
 * (model_config_tp_local). */
size_t model_ep_buffer_bytes(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size);
/* The same buffers grown to the most rows a rank can receive at
 * model.capacity_factor (dropless: all ep_size ranks' rows): the peak a
 * step can reach. */
size_t model_ep_buffer_bytes_at_capacity(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size);
/* Their sum, with the tensor-parallel embedding's token maps: what
 * model_activation_bytes reports right after creation (mc the whole model). */
size_t model_activation_bytes_for(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                  int tp_size);
/* The same two for the pipeline stage of layers [layer_lo, layer_hi)
 * (model_create_pp): its layers' buffers, the head's on the last stage;
 * the expert-parallel buffers are sized for every MoE layer of the model
 * on each stage, as moe_ep_create allocates them. */
size_t model_arena_bytes_pp(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size, int tp_size,
                            int layer_lo, int layer_hi);
size_t model_activation_bytes_pp(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                 int tp_size, int layer_lo, int layer_hi);
/* ... and for an interleaved stage's nchunks runs of layers [lo[c], hi[c]). */
size_t model_arena_bytes_chunks(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                int tp_size, int nchunks, const int *lo, const int *hi);
size_t model_activation_bytes_chunks(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                     int tp_size, int nchunks, const int *lo, const int *hi);

#endif
