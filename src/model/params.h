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
} param_view_t;

typedef struct param_table {
    param_view_t *views;
    int n, cap;
    size_t numel[PARAM_NGROUPS];
} param_table_t;

/* Builds the table for a model config, in the order of docs/model.md. */
void param_table_build(param_table_t *t, const model_config_t *mc);
void param_table_free(param_table_t *t);
/* NULL if absent. */
const param_view_t *param_table_find(const param_table_t *t, const char *name);
size_t param_table_total(const param_table_t *t);

/* Whether layer l has an MoE FFN. */
int model_layer_is_moe(const model_config_t *mc, int l);

#endif
