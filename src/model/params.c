#include "model/params.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int model_layer_is_moe(const model_config_t *mc, int l)
{
    return config_model_is_moe(mc) && l % mc->moe_layer_freq == 0;
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
    v->block = t->build_block;
    v->tp_dim = -1;
    v->tp_copies = t->tp_size;
    v->tp_copy = t->tp_rank;
    v->full_shape[0] = v->shape[0];
    v->full_shape[1] = v->shape[1];
    t->numel[group] += v->numel;
}

/* Cuts the view just added down to this rank's slice along `dim`. */
static void tp_split(param_table_t *t, int dim)
{
    if (t->tp_size == 1)
        return;
    param_view_t *v = &t->views[t->n - 1];
    FB_ASSERT(v->ndim == 2 && v->shape[dim] % t->tp_size == 0);
    const int64_t part = v->shape[dim] / t->tp_size;
    v->tp_dim = dim;
    v->tp_off = part * t->tp_rank;
    v->tp_copies = 1;
    v->tp_copy = 0;
    v->shape[dim] = part;
    t->numel[v->group] -= v->numel;
    v->numel = (size_t)v->shape[0] * (size_t)v->shape[1];
    t->numel[v->group] += v->numel;
}

/* The same for a k/v projection of `kv` heads of `hd` rows: split by heads
 * when tp divides them, else one head a rank (rank t: head t kv / tp, the
 * one its query heads [t H/tp, (t+1) H/tp) use), the same slice on the
 * tp / kv ranks sharing that head. */
static void tp_split_kv(param_table_t *t, int kv, int64_t hd)
{
    if (t->tp_size == 1 || kv % t->tp_size == 0) {
        tp_split(t, 0);
        return;
    }
    FB_ASSERT(t->tp_size % kv == 0);
    param_view_t *v = &t->views[t->n - 1];
    const int share = t->tp_size / kv;
    v->tp_dim = 0;
    v->tp_off = hd * (t->tp_rank / share);
    v->tp_copies = share;
    v->tp_copy = t->tp_rank % share;
    v->shape[0] = hd;
    t->numel[v->group] -= v->numel;
    v->numel = (size_t)v->shape[0] * (size_t)v->shape[1];
    t->numel[v->group] += v->numel;
}

void param_table_build(param_table_t *t, const model_config_t *mc) { param_table_build_ep(t, mc, 1, 0); }

void param_table_build_ep(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank)
{
    param_table_build_tp(t, mc, ep_size, ep_rank, 1, 0);
}

void param_table_build_tp(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank, int tp_size,
                          int tp_rank)
{
    param_table_build_pp(t, mc, ep_size, ep_rank, tp_size, tp_rank, 0, mc->num_hidden_layers);
}

void param_table_build_pp(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank, int tp_size,
                          int tp_rank, int layer_lo, int layer_hi)
{
    param_table_build_chunks(t, mc, ep_size, ep_rank, tp_size, tp_rank, 1, &layer_lo, &layer_hi);
}

void param_table_build_chunks(param_table_t *t, const model_config_t *mc, int ep_size, int ep_rank, int tp_size,
                              int tp_rank, int nchunks, const int *lo, const int *hi)
{
    memset(t, 0, sizeof *t);
    t->tied_copy = -1;
    FB_ASSERT(nchunks >= 1);
    for (int c = 0; c < nchunks; c++)
        FB_ASSERT(lo[c] >= (c ? hi[c - 1] : 0) && lo[c] < hi[c] && hi[c] <= mc->num_hidden_layers);
    const int layer_lo = lo[0], layer_hi = hi[nchunks - 1];
    FB_ASSERT(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size);
    t->tp_size = tp_size;
    t->tp_rank = tp_rank;
    FB_ASSERT(ep_size >= 1 && ep_rank >= 0 && ep_rank < ep_size);
    FB_ASSERT(config_model_is_moe(mc) ? mc->num_local_experts % ep_size == 0 : ep_size == 1);
    t->ep_size = ep_size;
    t->ep_rank = ep_rank;
    t->experts_local = config_model_is_moe(mc) ? mc->num_local_experts / ep_size : 0;
    t->expert_lo = ep_rank * t->experts_local;
    const int64_t D = mc->hidden_size, V = mc->vocab_size, I = mc->intermediate_size;
    const int64_t hd = D / mc->num_attention_heads;
    const int64_t QD = hd * mc->num_attention_heads, KVD = hd * mc->num_key_value_heads;
    const int E = mc->num_local_experts;
    const int dense = PARAM_GROUP_DENSE, expert = PARAM_GROUP_EXPERT;

    t->build_block = 0;
    if (layer_lo == 0) {
        add_view(t, dense, PARAM_INIT_NORMAL, V, D, "model.embed_tokens.weight");
        tp_split(t, 0);
    }
    for (int c = 0; c < nchunks; c++)
    for (int l = lo[c]; l < hi[c]; l++) {
        const char *p = "model.layers";
        t->build_block = 1 + l;
        add_view(t, dense, PARAM_INIT_ONES, D, 0, "%s.%d.input_layernorm.weight", p, l);
        add_view(t, dense, PARAM_INIT_NORMAL, QD, D, "%s.%d.self_attn.q_proj.weight", p, l);
        tp_split(t, 0);
        add_view(t, dense, PARAM_INIT_NORMAL, KVD, D, "%s.%d.self_attn.k_proj.weight", p, l);
        tp_split_kv(t, mc->num_key_value_heads, hd);
        add_view(t, dense, PARAM_INIT_NORMAL, KVD, D, "%s.%d.self_attn.v_proj.weight", p, l);
        tp_split_kv(t, mc->num_key_value_heads, hd);
        add_view(t, dense, PARAM_INIT_NORMAL_SCALED, D, QD, "%s.%d.self_attn.o_proj.weight", p, l);
        tp_split(t, 1);
        add_view(t, dense, PARAM_INIT_ONES, D, 0, "%s.%d.post_attention_layernorm.weight", p, l);
        if (!model_layer_is_moe(mc, l)) {
            add_view(t, dense, PARAM_INIT_NORMAL, I, D, "%s.%d.mlp.gate_proj.weight", p, l);
            tp_split(t, 0);
            add_view(t, dense, PARAM_INIT_NORMAL, I, D, "%s.%d.mlp.up_proj.weight", p, l);
            tp_split(t, 0);
            add_view(t, dense, PARAM_INIT_NORMAL_SCALED, D, I, "%s.%d.mlp.down_proj.weight", p, l);
            tp_split(t, 1);
            continue;
        }
        add_view(t, dense, PARAM_INIT_NORMAL, E, D, "%s.%d.block_sparse_moe.gate.weight", p, l);
        /* Each projection of all experts is contiguous ([E, out, in]) so the
         * grouped matmul reads one strided block. */
        const int e0 = t->expert_lo, e1 = t->expert_lo + t->experts_local;
        for (int e = e0; e < e1; e++) {
            add_view(t, expert, PARAM_INIT_NORMAL, I, D, "%s.%d.block_sparse_moe.experts.%d.w1.weight", p, l, e);
            tp_split(t, 0);
        }
        for (int e = e0; e < e1; e++) {
            add_view(t, expert, PARAM_INIT_NORMAL, I, D, "%s.%d.block_sparse_moe.experts.%d.w3.weight", p, l, e);
            tp_split(t, 0);
        }
        for (int e = e0; e < e1; e++) {
            add_view(t, expert, PARAM_INIT_NORMAL_SCALED, D, I, "%s.%d.block_sparse_moe.experts.%d.w2.weight", p, l, e);
            tp_split(t, 1);
        }
    }
    t->build_block = 1 + mc->num_hidden_layers;
    if (layer_hi == mc->num_hidden_layers) { /* the final norm and the head are the last stage's */
        add_view(t, dense, PARAM_INIT_ONES, D, 0, "model.norm.weight");
        if (!mc->tie_word_embeddings) {
            add_view(t, dense, PARAM_INIT_NORMAL, V, D, "lm_head.weight");
            tp_split(t, 0);
        } else if (layer_lo > 0) {
            /* the same name, so the same initial values as the first stage's */
            t->tied_copy = t->n;
            add_view(t, dense, PARAM_INIT_NORMAL, V, D, "model.embed_tokens.weight");
            tp_split(t, 0);
        }
    }

    t->nblocks = mc->num_hidden_layers + 2;
    t->block_range = fb_calloc((size_t)t->nblocks, sizeof *t->block_range);
    for (int b = 0; b < t->nblocks; b++)
        for (int g = 0; g < PARAM_NGROUPS; g++)
            t->block_range[b][g][0] = t->block_range[b][g][1] = (size_t)-1;
    for (int i = 0; i < t->n; i++) {
        const param_view_t *v = &t->views[i];
        size_t *r = t->block_range[v->block][v->group];
        if (r[0] == (size_t)-1)
            r[0] = v->offset;
        FB_ASSERT(r[1] == (size_t)-1 || r[1] == v->offset); /* contiguous */
        r[1] = v->offset + v->numel;
    }
    for (int b = 0; b < t->nblocks; b++)
        for (int g = 0; g < PARAM_NGROUPS; g++)
            if (t->block_range[b][g][0] == (size_t)-1)
                t->block_range[b][g][0] = t->block_range[b][g][1] = 0;
}

void param_table_block_range(const param_table_t *t, int block, int group, size_t *lo, size_t *hi)
{
    FB_ASSERT(block >= 0 && block < t->nblocks);
    *lo = t->block_range[block][group][0];
    *hi = t->block_range[block][group][1];
}

void param_table_free(param_table_t *t)
{
    free(t->views);
    free(t->block_range);
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

size_t param_view_full_pos(const param_view_t *v, size_t e)
{
    if (v->tp_dim == 0)
        return (size_t)v->tp_off * (size_t)v->full_shape[1] + e;
    if (v->tp_dim != 1)
        return e;
    const size_t cols = (size_t)v->shape[1];
    return e / cols * (size_t)v->full_shape[1] + (size_t)v->tp_off + e % cols;
}

size_t param_view_run(const param_view_t *v, size_t e)
{
    FB_ASSERT(e < v->numel);
    if (v->tp_dim != 1)
        return v->numel - e;
    const size_t cols = (size_t)v->shape[1];
    return cols - e % cols;
}
