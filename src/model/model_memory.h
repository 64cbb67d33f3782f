/* What the model's activation buffers weigh, without creating a model: the
 * same sizing pass model_create runs (carve_buffers) and the same buffers
 * moe_ep_create allocates, so `fabula plan memory` and `fabula train`'s
 * start-up line agree to the byte (docs/plan.md, "Memory"). */
#ifndef FABULA_MODEL_MODEL_MEMORY_H
#define FABULA_MODEL_MODEL_MEMORY_H

#include <stddef.h>

#include "config/config.h"

/* The activation arena of a micro-batch of up to max_tokens tokens, stored
 * act_bytes an element, with an expert-parallel group of ep_size ranks
 * (whose expert rows then live in the ep buffers instead). */
size_t model_arena_bytes(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size);
/* The expert-parallel dispatch and compute buffers moe_ep_create allocates
 * (capacity max_tokens * num_experts_per_tok rows per MoE layer); 0 when
 * ep_size is 1. */
size_t model_ep_buffer_bytes(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size);
/* The same buffers grown to the most rows a rank can receive at
 * model.capacity_factor (dropless: all ep_size ranks' rows): the peak a
 * step can reach. */
size_t model_ep_buffer_bytes_at_capacity(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size);
/* Their sum: what model_activation_bytes reports right after creation. */
size_t model_activation_bytes_for(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size);

#endif
