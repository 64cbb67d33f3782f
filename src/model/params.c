#include "model/params.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int model_layer_is_moe(const model_config_t *mc, int l)
{
    return mc->num_local_experts > 1 && l % mc->moe_layer_freq == 0;
}

static void add_view(param_table_t *t, int group, enum param_init init, int64_t d0, int64_t d1,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void add_view(param_table_t *t, int group, enum param_init init, int64_t d0, int64_t d1,
                     const char *fmt, ...)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->views = fb_realloc(t->views, (size_t)t->cap * sizeof *t->views);
    }
    param_view_t *v = &t->views[t->n++];
    memset(v, 0, sizeof *v);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(v->name, sizeof v->name, fmt, ap);
    va_end(ap);
    FB_ASSERT(len > 0 && (size_t)len < sizeof v->name);
    v->group = group;
    v->init = init;
    v->ndim = d1 > 0 ? 2 : 1;
    v->shape[0] = d0;
    v->shape[1] = d1 > 0 ? d1 : 0;
    v->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    v->offset = t->numel[group];
    t->numel[group] += v->numel;
}

void param_table_build(param_table_t *t, const model_config_t *mc)
{
    memset(t, 0, sizeof *t);
    const int64_t D = mc->hidden_size, V = mc->vocab_size, I = mc->intermediate_size;
    const int64_t hd = D / mc->num_attention_heads;
    const int64_t QD = hd * mc->num_attention_heads, KVD = hd * mc->num_key_value_heads;
    const int E = mc->num_local_experts;
    const int dense = PARAM_GROUP_DENSE, expert = PARAM_GROUP_EXPERT;

    add_view(t, dense, PARAM_INIT_NORMAL, V, D, "model.embed_tokens.weight");
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        const char *p = "model.layers";
        add_view(t, dense, PARAM_INIT_ONES, D, 0, "%s.%d.input_layernorm.weight", p, l);
        add_view(t, dense, PARAM_INIT_NORMAL, QD, D, "%s.%d.self_attn.q_proj.weight", p, l);
        add_view(t, dense, PARAM_INIT_NORMAL, KVD, D, "%s.%d.self_attn.k_proj.weight", p, l);
        add_view(t, dense, PARAM_INIT_NORMAL, KVD, D, "%s.%d.self_attn.v_proj.weight", p, l);
        add_view(t, dense, PARAM_INIT_NORMAL_SCALED, D, QD, "%s.%d.self_attn.o_proj.weight", p, l);
        add_view(t, dense, PARAM_INIT_ONES, D, 0, "%s.%d.post_attention_layernorm.weight", p, l);
        if (!model_layer_is_moe(mc, l)) {
            add_view(t, dense, PARAM_INIT_NORMAL, I, D, "%s.%d.mlp.gate_proj.weight", p, l);
            add_view(t, dense, PARAM_INIT_NORMAL, I, D, "%s.%d.mlp.up_proj.weight", p, l);
            add_view(t, dense, PARAM_INIT_NORMAL_SCALED, D, I, "%s.%d.mlp.down_proj.weight", p, l);
            continue;
        }
        add_view(t, dense, PARAM_INIT_NORMAL, E, D, "%s.%d.block_sparse_moe.gate.weight", p, l);
        /* Each projection of all experts is contiguous ([E, out, in]) so the
         * grouped matmul reads one strided block. */
        for (int e = 0; e < E; e++)
            add_view(t, expert, PARAM_INIT_NORMAL, I, D, "%s.%d.block_sparse_moe.experts.%d.w1.weight", p, l, e);
        for (int e = 0; e < E; e++)
            add_view(t, expert, PARAM_INIT_NORMAL, I, D, "%s.%d.block_sparse_moe.experts.%d.w3.weight", p, l, e);
        for (int e = 0; e < E; e++)
            add_view(t, expert, PARAM_INIT_NORMAL_SCALED, D, I, "%s.%d.block_sparse_moe.experts.%d.w2.weight", p, l, e);
    }
    add_view(t, dense, PARAM_INIT_ONES, D, 0, "model.norm.weight");
    if (!mc->tie_word_embeddings)
        add_view(t, dense, PARAM_INIT_NORMAL, V, D, "lm_head.weight");
}

void param_table_free(param_table_t *t)
{
    free(t->views);
    memset(t, 0, sizeof *t);
}

const param_view_t *param_table_find(const param_table_t *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->views[i].name, name))
            return &t->views[i];
    return NULL;
}

size_t param_table_total(const param_table_t *t)
{
    size_t n = 0;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        n += t->numel[g];
    return n;
}
