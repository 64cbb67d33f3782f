/* Model construction: the parameter table, buffers, views and init. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "model/model_memory.h"
#include "rng.h"
#include "util/error.h"

/* Activations and scratch come from one arena, sized at creation by a
 * first pass over the same allocation sequence (m->arena NULL: sizing).
 * Pieces start on 256-byte boundaries: the widest alignment any backend's
 * vector loads or cuBLASLt want. */
#define ARENA_ALIGN 256

static void *arena_take(model_t *m, size_t bytes)
{
    size_t at = m->arena_used;
    m->arena_used += (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    return m->arena ? m->arena + at : NULL;
}

static float *balloc_f(model_t *m, size_t n) { return arena_take(m, n * sizeof(float)); }
static fb_act *balloc_a(model_t *m, size_t n) { return arena_take(m, ACT_BYTES(m, n)); }
static int32_t *balloc_i(model_t *m, size_t n) { return arena_take(m, n * sizeof(int32_t)); }

/* What the backward recomputes (docs/model.md, "Recomputation"): a layer's
 * attention output, its log-sum-exp, the SwiGLU product and the expert
 * dropout mask under "selective", everything but the layer input under
 * "full". */
enum { PART_KEPT = 1, PART_SELECTIVE = 2 };

/* The buffers of one layer but its input: `parts` selects the kept ones,
 * the selectively recomputed ones or both; ffn_rows rows of the [*, I]
 * buffers (0: none in the arena, the ep buffers hold them), mask_rows of
 * the dropout mask, and the router's buffers when moe. */
/* Rows of the buffers that hold a token shard under sequence parallelism
 * (the most any rank's shard has: ceil(max_tokens / tp)), all tokens
 * without it. */
static size_t shard_cap(const model_t *m)
{
    const size_t T = (size_t)m->max_tokens, tp = (size_t)m->tp_size;
    return m->sp ? (T + tp - 1) / tp : T;
}

static void carve_layer(model_t *m, layer_acts_t *a, int parts, int moe, size_t ffn_rows, size_t mask_rows)
{
    const model_config_t *mc = &m->mc;
    const size_t T = (size_t)m->max_tokens, D = (size_t)mc->hidden_size, I = (size_t)mc->intermediate_size;
    const size_t S = shard_cap(m);
    const size_t H = (size_t)mc->num_attention_heads;
    const size_t E = (size_t)config_model_experts(mc);
    const size_t K = (size_t)config_model_experts_per_token(mc);
    const size_t R = T * K; /* most rows a dispatch can produce */
    if (parts & PART_KEPT) {
        a->h1 = balloc_a(m, S * D);
        a->rstd1 = balloc_f(m, S);
        a->q = balloc_a(m, T * (size_t)m->qdim);
        a->k = balloc_a(m, T * (size_t)m->kvdim);
        a->v = balloc_a(m, T * (size_t)m->kvdim);
        a->x_mid = balloc_a(m, S * D);
        a->h2 = balloc_a(m, S * D);
        a->rstd2 = balloc_f(m, S);
        if (ffn_rows) {
            a->g = balloc_a(m, ffn_rows * I);
            a->u = balloc_a(m, ffn_rows * I);
        }
        if (moe) {
            a->rlogits = balloc_f(m, T * E);
            a->probs = balloc_f(m, T * E);
            a->rlse = balloc_f(m, T);
            a->topk_w = balloc_f(m, T * K);
            a->topk_idx = balloc_i(m, T * K);
            a->aux_dprob = balloc_f(m, E);
            a->xp = balloc_a(m, R * D);
            a->eo = balloc_a(m, R * D);
            a->plan.d_row_token = balloc_i(m, R);
            a->plan.d_token_rows = balloc_i(m, R);
        }
    }
    if (parts & PART_SELECTIVE) {
        a->att = balloc_a(m, T * (size_t)m->qdim);
        a->lse = balloc_f(m, T * H);
        if (ffn_rows)
            a->act = balloc_a(m, ffn_rows * I);
        if (mask_rows)
            a->mask = arena_take(m, mask_rows * I);
    }
}

/* A layer's rows of the [*, I] buffers in the arena: T dense, R MoE; 0 for
 * an MoE layer under expert parallelism, whose rows are moe_ep's. */
static size_t ffn_rows_of(const model_t *m, int l)
{
    const size_t T = (size_t)m->max_tokens;
    if (!model_layer_is_moe(&m->mc, l))
        return T;
    return m->ep_size == 1 ? T * (size_t)m->mc.num_experts_per_tok : 0;
}

/* Points layer a's recomputed buffers at the shared set s. */
static void share_layer(layer_acts_t *a, const layer_acts_t *s, int parts)
{
    if (parts & PART_KEPT) {
        fb_act *x_in = a->x_in;
        moe_plan_t plan = a->plan;
        *a = *s;
        a->x_in = x_in;
        /* the plan's host arrays stay the layer's own */
        plan.d_row_token = s->plan.d_row_token;
        plan.d_token_rows = s->plan.d_token_rows;
        a->plan = plan;
        return;
    }
    a->att = s->att;
    a->lse = s->lse;
    a->act = s->act;
    a->mask = s->mask;
}

/* Every activation and scratch buffer of a micro-batch of up to
 * max_tokens tokens (docs/model.md, "Recomputation"): per layer its input and,
 * by model.recompute, all, all but the selective part, or nothing else;
 * the recomputed part once, the largest any layer needs, shared by all. */
static void carve_buffers(model_t *m)
{
    const model_config_t *mc = &m->mc;
    const size_t T = (size_t)m->max_tokens, D = (size_t)mc->hidden_size, I = (size_t)mc->intermediate_size;
    const size_t V = (size_t)mc->vocab_size;
    const size_t E = (size_t)config_model_experts(mc);
    const size_t K = (size_t)config_model_experts_per_token(mc);
    const size_t R = T * K; /* most rows a dispatch can produce */
    const size_t S = shard_cap(m);
    const int own = mc->recompute == MODEL_RECOMPUTE_NONE ? PART_KEPT | PART_SELECTIVE
                    : mc->recompute == MODEL_RECOMPUTE_SELECTIVE ? PART_KEPT : 0;
    const int shared = (PART_KEPT | PART_SELECTIVE) & ~own;
    m->arena_used = 0;
    m->tokens = balloc_i(m, T);
    m->positions = balloc_i(m, T);
    m->targets = balloc_i(m, T);
    m->cu_seqlens = balloc_i(m, T + 1);
    size_t ffn_max = 0, mask_max = 0;
    int any_moe = 0;
    /* a pipeline stage's layers only */
    FOR_STAGE_LAYERS(m, l) {
        layer_acts_t *a = &m->acts[l];
        const int moe = model_layer_is_moe(mc, l);
        const size_t rows = ffn_rows_of(m, l), mrows = moe && m->ep_size == 1 ? R : 0;
        a->x_in = balloc_a(m, S * D);
        if (own)
            carve_layer(m, a, own, moe, rows, mrows);
        any_moe |= moe;
        ffn_max = rows > ffn_max ? rows : ffn_max;
        mask_max = mrows > mask_max ? mrows : mask_max;
    }
    if (shared) {
        layer_acts_t s;
        memset(&s, 0, sizeof s);
        carve_layer(m, &s, shared, any_moe, ffn_max, mask_max);
        FOR_STAGE_LAYERS(m, l)
            share_layer(&m->acts[l], &s, shared);
    }
    m->x_final = balloc_a(m, S * D);
    if (m->has_head) {
        m->hf = balloc_a(m, T * D); /* all rows: the head's input */
        m->rstdf = balloc_f(m, S);
        m->logits = balloc_a(m, T * V);
        m->token_loss = balloc_f(m, T);
    }

    const size_t widest = (size_t)(m->qdim > mc->hidden_size ? m->qdim : mc->hidden_size);
    m->dx = balloc_a(m, S * D);
    m->dh = balloc_a(m, T * widest);
    m->dq = balloc_a(m, T * (size_t)m->qdim);
    m->dk = balloc_a(m, T * (size_t)m->kvdim);
    m->dv = balloc_a(m, T * (size_t)m->kvdim);
    m->datt = balloc_a(m, T * (size_t)m->qdim);
    m->dg = balloc_a(m, R * I);
    m->du = balloc_a(m, R * I);
    m->dact = balloc_a(m, R * I);
    m->dxp = balloc_a(m, R * D);
    m->dtmp = balloc_a(m, R * D);
    m->drl = balloc_a(m, T * E);
    m->dtw = balloc_f(m, T * K);
    if (m->sp) {
        m->spg = balloc_a(m, T * D);
        m->sps = balloc_a(m, S * D);
        m->sp_dnorm = balloc_f(m, D);
    }
}

static const param_view_t *find_view(const param_table_t *t, const char *name)
{
    const param_view_t *v = param_table_find(t, name);
    FB_ASSERT(v != NULL);
    return v;
}

static void find_views(model_t *m)
{
    const model_config_t *mc = &m->mc;
    const param_table_t *t = &m->table;
    char name[128];
    if (m->has_embed)
        m->v_embed = find_view(t, "model.embed_tokens.weight");
    if (m->has_head) {
        m->v_norm = find_view(t, "model.norm.weight");
        /* tied: the embedding, or on a stage without it the stage's copy */
        m->v_head = !mc->tie_word_embeddings ? find_view(t, "lm_head.weight")
                    : m->has_embed             ? m->v_embed
                                               : &t->views[t->tied_copy];
    }
    m->lv = fb_calloc((size_t)mc->num_hidden_layers, sizeof *m->lv);
    FOR_STAGE_LAYERS(m, l) {
        layer_views_t *lv = &m->lv[l];
#define FIND(field, suffix)                                                    \
    do {                                                                       \
        snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);          \
        lv->field = find_view(t, name);                                        \
    } while (0)
        FIND(ln1, "input_layernorm.weight");
        FIND(wq, "self_attn.q_proj.weight");
        FIND(wk, "self_attn.k_proj.weight");
        FIND(wv, "self_attn.v_proj.weight");
        FIND(wo, "self_attn.o_proj.weight");
        FIND(ln2, "post_attention_layernorm.weight");
        if (model_layer_is_moe(mc, l)) {
            /* the projections of the local experts start at the first one's */
            char ex[64];
            FIND(router, "block_sparse_moe.gate.weight");
            snprintf(ex, sizeof ex, "block_sparse_moe.experts.%d.w1.weight", t->expert_lo);
            FIND(w1, ex);
            snprintf(ex, sizeof ex, "block_sparse_moe.experts.%d.w3.weight", t->expert_lo);
            FIND(w3, ex);
            snprintf(ex, sizeof ex, "block_sparse_moe.experts.%d.w2.weight", t->expert_lo);
            FIND(w2, ex);
        } else {
            FIND(w_gate, "mlp.gate_proj.weight");
            FIND(w_up, "mlp.up_proj.weight");
            FIND(w_down, "mlp.down_proj.weight");
        }
#undef FIND
    }
}

static float *at(float *const base[PARAM_NGROUPS], const param_view_t *v)
{
    return v ? base[v->group] + v->offset : NULL;
}

static fb_act *at_act(const model_t *m, fb_act *const base[PARAM_NGROUPS], const param_view_t *v)
{
    return v ? ACT(m, base[v->group], v->offset) : NULL;
}

/* Binds the pointers of a layer's tensors (weights or gradients, same
 * field names) of `block` into `base` with the accessor `AT`. */
#define BIND_BLOCK(m, w, block, AT)                                            \
    do {                                                                       \
        const int L_ = (m)->mc.num_hidden_layers;                              \
        if ((block) == 0) {                                                    \
            (w)->embed = AT((m)->v_embed);                                     \
            if ((m)->mc.tie_word_embeddings && (m)->has_head)                  \
                (w)->head = (w)->embed;                                        \
        } else if ((block) == L_ + 1) {                                        \
            (w)->norm = AT((m)->v_norm);                                       \
            if (!(m)->mc.tie_word_embeddings || !(m)->has_embed)               \
                (w)->head = AT((m)->v_head);                                   \
        } else {                                                               \
            const layer_views_t *lv_ = &(m)->lv[(block) - 1];                  \
            __typeof__((w)->layers) lw_ = &(w)->layers[(block) - 1];           \
            lw_->ln1 = AT(lv_->ln1);                                           \
            lw_->wq = AT(lv_->wq);                                             \
            lw_->wk = AT(lv_->wk);                                             \
            lw_->wv = AT(lv_->wv);                                             \
            lw_->wo = AT(lv_->wo);                                             \
            lw_->ln2 = AT(lv_->ln2);                                           \
            lw_->w_gate = AT(lv_->w_gate);                                     \
            lw_->w_up = AT(lv_->w_up);                                         \
            lw_->w_down = AT(lv_->w_down);                                     \
            lw_->router = AT(lv_->router);                                     \
            lw_->w1 = AT(lv_->w1);                                             \
            lw_->w3 = AT(lv_->w3);                                             \
            lw_->w2 = AT(lv_->w2);                                             \
        }                                                                      \
    } while (0)

/* The compute copy of block `block`'s parameters: the fp32 parameters
 * themselves when the compute dtype is fp32, else each group's range of the
 * block rounded into m->wc. */
static void bind_weights(model_t *m, int block, float *const base[PARAM_NGROUPS])
{
    fb_act *cbase[PARAM_NGROUPS] = {0};
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        if (m->hooks.compute_bases || !m->wc[g]) {
            cbase[g] = (fb_act *)base[g];
            continue;
        }
        size_t lo, hi;
        param_table_block_range(&m->table, block, g, &lo, &hi);
        if (hi > lo)
            m->ops->to_act(ACT(m, m->wc[g], lo), base[g] + lo, hi - lo);
        cbase[g] = m->wc[g];
    }
#define AT_W(v) at_act(m, cbase, (v))
    BIND_BLOCK(m, &m->w, block, AT_W);
#undef AT_W
}

static void bind_grads(model_t *m, int block, float *const base[PARAM_NGROUPS])
{
#define AT_G(v) at(base, (v))
    BIND_BLOCK(m, &m->dw, block, AT_G);
#undef AT_G
}

/* Default hooks: the model's own full buffers. */
static void own_params_acquire(void *ctx, int block, int backward, float *base[PARAM_NGROUPS])
{
    (void)block, (void)backward;
    model_t *m = ctx;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        base[g] = m->params[g];
}

static void own_grads_acquire(void *ctx, int block, float *base[PARAM_NGROUPS])
{
    (void)block;
    model_t *m = ctx;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        base[g] = m->grads[g];
}

void model_set_hooks(model_t *m, const model_hooks_t *hooks)
{
    if (hooks) {
        m->hooks = *hooks;
        return;
    }
    FB_ASSERT(m->params[PARAM_GROUP_DENSE] && m->grads[PARAM_GROUP_DENSE]);
    memset(&m->hooks, 0, sizeof m->hooks);
    m->hooks.ctx = m;
    m->hooks.params_acquire = own_params_acquire;
    m->hooks.grads_acquire = own_grads_acquire;
}

void model_params_acquire(model_t *m, int block, int backward)
{
    float *base[PARAM_NGROUPS] = {0};
    m->hooks.params_acquire(m->hooks.ctx, block, backward, base);
    bind_weights(m, block, base);
}

void model_params_release(model_t *m, int block, int backward)
{
    if (m->hooks.params_release)
        m->hooks.params_release(m->hooks.ctx, block, backward);
}

void model_grads_acquire(model_t *m, int block)
{
    float *base[PARAM_NGROUPS] = {0};
    m->hooks.grads_acquire(m->hooks.ctx, block, base);
    bind_grads(m, block, base);
}

void model_grads_release(model_t *m, int block)
{
    if (m->hooks.grads_release)
        m->hooks.grads_release(m->hooks.ctx, block);
}

/* The sizing pass alone, on a model that holds only what carve_buffers
 * reads: the shapes, the ep size and an op table's element size. */
void model_config_tp_local(const model_config_t *full, int tp, model_config_t *local)
{
    *local = *full;
    local->num_attention_heads /= tp;
    /* fewer kv heads than ranks: one (replicated) head a rank */
    local->num_key_value_heads = local->num_key_value_heads >= tp ? local->num_key_value_heads / tp : 1;
    local->intermediate_size /= tp;
    local->vocab_size /= tp;
}

/* The shapes of one tp rank of `full` (model_create_tp and the sizing
 * below): its heads, FFN columns and vocabulary rows; the head dimension
 * is the full model's. */
static void set_shapes(model_t *m, const model_config_t *full, int tp)
{
    const int kv = full->num_key_value_heads;
    FB_ASSERT(tp >= 1 && full->num_attention_heads % tp == 0 && (kv % tp == 0 || tp % kv == 0) &&
              full->intermediate_size % tp == 0 && full->vocab_size % tp == 0);
    m->full = *full;
    m->tp_size = tp;
    m->sp = full->sequence_parallel && tp > 1;
    m->hd = full->hidden_size / full->num_attention_heads;
    model_config_tp_local(full, tp, &m->mc);
    m->qdim = m->hd * m->mc.num_attention_heads;
    m->kvdim = m->hd * m->mc.num_key_value_heads;
}

/* The sizing pass alone, on a model that holds only what carve_buffers
 * reads: the shapes, the ep size and an op table's element size. */
size_t model_arena_bytes(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size, int tp_size)
{
    return model_arena_bytes_pp(mc, act_bytes, max_tokens, ep_size, tp_size, 0, mc->num_hidden_layers);
}

/* The stage's chunks into m, and chunk 0 as the one the passes run. */
static void set_chunks(model_t *m, const model_config_t *mc, int n, const int *lo, const int *hi)
{
    FB_ASSERT(n >= 1 && n <= MODEL_MAX_CHUNKS);
    m->nchunks = n;
    for (int c = 0; c < n; c++) {
        FB_ASSERT(lo[c] >= (c ? hi[c - 1] : 0) && lo[c] < hi[c] && hi[c] <= mc->num_hidden_layers);
        m->chunk_lo[c] = lo[c];
        m->chunk_hi[c] = hi[c];
    }
    m->has_embed = lo[0] == 0;
    m->has_head = hi[n - 1] == mc->num_hidden_layers;
    m->layer_lo = lo[0];
    m->layer_hi = hi[0];
    m->first = m->layer_lo == 0;
    m->last = m->layer_hi == mc->num_hidden_layers;
}

void model_set_chunk(model_t *m, int c)
{
    FB_ASSERT(c >= 0 && c < m->nchunks);
    m->layer_lo = m->chunk_lo[c];
    m->layer_hi = m->chunk_hi[c];
    m->first = m->layer_lo == 0;
    m->last = m->layer_hi == m->mc.num_hidden_layers;
}

int model_chunks(const model_t *m) { return m->nchunks; }

size_t model_arena_bytes_pp(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size, int tp_size,
                            int layer_lo, int layer_hi)
{
    return model_arena_bytes_chunks(mc, act_bytes, max_tokens, ep_size, tp_size, 1, &layer_lo, &layer_hi);
}

size_t model_arena_bytes_chunks(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                int tp_size, int nchunks, const int *lo, const int *hi)
{
    ops_t o;
    memset(&o, 0, sizeof o);
    o.act_bytes = act_bytes;
    model_t *m = fb_calloc(1, sizeof *m);
    set_shapes(m, mc, tp_size);
    set_chunks(m, mc, nchunks, lo, hi);
    m->ops = &o;
    m->max_tokens = max_tokens;
    m->ep_size = ep_size;
    m->acts = fb_calloc((size_t)mc->num_hidden_layers, sizeof *m->acts);
    carve_buffers(m);
    const size_t bytes = m->arena_used;
    free(m->acts);
    free(m);
    return bytes;
}

/* The tensor-parallel embedding's three token maps on the device
 * (model_create_tp). */
static size_t tp_device_bytes(int max_tokens, int tp_size)
{
    return tp_size > 1 ? 3 * (size_t)max_tokens * sizeof(int32_t) : 0;
}

size_t model_activation_bytes_for(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                  int tp_size)
{
    return model_activation_bytes_pp(mc, act_bytes, max_tokens, ep_size, tp_size, 0, mc->num_hidden_layers);
}

size_t model_activation_bytes_pp(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                 int tp_size, int layer_lo, int layer_hi)
{
    return model_activation_bytes_chunks(mc, act_bytes, max_tokens, ep_size, tp_size, 1, &layer_lo, &layer_hi);
}

size_t model_activation_bytes_chunks(const model_config_t *mc, size_t act_bytes, int max_tokens, int ep_size,
                                     int tp_size, int nchunks, const int *lo, const int *hi)
{
    model_config_t local;
    model_config_tp_local(mc, tp_size, &local);
    return model_arena_bytes_chunks(mc, act_bytes, max_tokens, ep_size, tp_size, nchunks, lo, hi) +
           model_ep_buffer_bytes(&local, act_bytes, max_tokens, ep_size) + tp_device_bytes(max_tokens, tp_size);
}

model_t *model_create(const model_config_t *mc, const ops_t *ops, int max_tokens)
{
    return model_create_flags(mc, ops, max_tokens, 0);
}

model_t *model_create_flags(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags)
{
    return model_create_ep(mc, ops, max_tokens, flags, NULL);
}

model_t *model_create_ep(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags, comm_t *ep)
{
    return model_create_tp(mc, ops, max_tokens, flags, ep, NULL);
}

model_t *model_create_tp(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags, comm_t *ep,
                         comm_t *tp)
{
    return model_create_pp(mc, ops, max_tokens, flags, ep, tp, 0, mc->num_hidden_layers);
}

model_t *model_create_pp(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags, comm_t *ep,
                         comm_t *tp, int layer_lo, int layer_hi)
{
    return model_create_chunks(mc, ops, max_tokens, flags, ep, tp, 1, &layer_lo, &layer_hi);
}

model_t *model_create_chunks(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags,
                             comm_t *ep, comm_t *tp, int nchunks, const int *lo, const int *hi)
{
    model_t *m = fb_calloc(1, sizeof *m);
    set_chunks(m, mc, nchunks, lo, hi);
    /* from here on m->mc holds this tp rank's share of the shapes */
    set_shapes(m, mc, tp ? comm_size(tp) : 1);
    m->ops = ops;
    m->max_tokens = max_tokens;
    m->tp_rank = tp ? comm_rank(tp) : 0;
    m->tp = m->tp_size > 1 ? tp : NULL;
    m->ep_size = ep ? comm_size(ep) : 1;
    m->ep_rank = ep ? comm_rank(ep) : 0;
    m->ep = m->ep_size > 1 ? ep : NULL;
    m->ep_host = m->ep;
    m->a2a_chunks = 1;
    param_table_build_chunks(&m->table, mc, m->ep_size, m->ep_rank, m->tp_size, m->tp_rank, nchunks, lo, hi);
    mc = &m->mc;
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        if (!(flags & MODEL_NO_PARAM_BUFFER))
            m->params[g] = ops->alloc(m->table.numel[g] * sizeof(float));
        if (!(flags & MODEL_NO_GRAD_BUFFER))
            m->grads[g] = ops->alloc(m->table.numel[g] * sizeof(float));
    }
    if (ops->act_dtype != FB_DTYPE_F32 && !(flags & MODEL_NO_COMPUTE_BUFFER)) {
        for (int g = 0; g < PARAM_NGROUPS; g++)
            if (m->table.numel[g])
                m->wc[g] = ops->alloc(m->table.numel[g] * ops->act_bytes);
        m->wc_owned = 1;
    }
    find_views(m);
    m->w.layers = fb_calloc((size_t)mc->num_hidden_layers, sizeof *m->w.layers);
    m->dw.layers = fb_calloc((size_t)mc->num_hidden_layers, sizeof *m->dw.layers);
    if (!flags)
        model_set_hooks(m, NULL);

    m->acts = fb_calloc((size_t)mc->num_hidden_layers, sizeof *m->acts);
    for (int l = 0; l < mc->num_hidden_layers; l++)
        m->nmoe += model_layer_is_moe(mc, l);
    carve_buffers(m); /* sizing */
    m->arena_bytes = m->arena_used;
    m->arena = ops->alloc(m->arena_bytes);
    carve_buffers(m);
    m->alloc_bytes = m->arena_bytes;
    m->dlogits = m->logits;

    const size_t T = (size_t)max_tokens;
    const size_t E = (size_t)config_model_experts(mc);
    const size_t K = (size_t)config_model_experts_per_token(mc);
    m->host_probs = fb_calloc(T * E, sizeof(float));
    m->host_rlse = fb_calloc(T, sizeof(float));
    m->host_loss = fb_calloc(T, sizeof(float));
    m->host_topk = fb_calloc(T * K, sizeof(int32_t));
    m->tokens_per_expert = fb_calloc((size_t)mc->num_hidden_layers * E, sizeof(long));
    m->routed_per_expert = fb_calloc((size_t)mc->num_hidden_layers * E, sizeof(long));
    m->dropped_per_layer = fb_calloc((size_t)mc->num_hidden_layers, sizeof(long));
    m->aux_per_layer = fb_calloc((size_t)mc->num_hidden_layers, sizeof(double));
    m->z_per_layer = fb_calloc((size_t)mc->num_hidden_layers, sizeof(double));
    if (m->ep_size > 1)
        moe_ep_create(m);
    if (m->tp_size > 1) {
        m->tp_host = m->tp;
        m->tp_ids = ops->alloc(T * sizeof(int32_t));
        m->tp_row_token = ops->alloc(T * sizeof(int32_t));
        m->tp_token_rows = ops->alloc(T * sizeof(int32_t));
        m->tp_hids = fb_calloc(T, sizeof(int32_t));
        m->tp_hrow_token = fb_calloc(T, sizeof(int32_t));
        m->tp_htoken_rows = fb_calloc(T, sizeof(int32_t));
        m->tp_hlogits = fb_calloc(T * (size_t)m->mc.vocab_size, sizeof(float));
        m->tp_hred = fb_calloc(3 * T, sizeof(double));
        if (ops->act_dtype != FB_DTYPE_F32 && !ops->device_memory)
            m->tp_wide = fb_calloc(T * (size_t)mc->hidden_size, sizeof(float));
        m->sp_counts = fb_calloc((size_t)m->tp_size, sizeof(size_t));
        m->sp_displs = fb_calloc((size_t)m->tp_size, sizeof(size_t));
        m->alloc_bytes += tp_device_bytes(max_tokens, m->tp_size);
    }
    if (m->tp_size > m->full.num_key_value_heads && !(flags & MODEL_NO_KV_GROUP)) {
        /* the ranks of one kv head: consecutive, tp / kv of them */
        const int share = m->tp_size / m->full.num_key_value_heads;
        m->kv_host = comm_split(m->tp, m->tp_rank / share, m->tp_rank);
        m->kv = ops->device_memory ? comm_device_create(m->kv_host) : m->kv_host;
        m->kv_owned = 1;
    }
    /* what `fabula plan memory` predicts for this model must be what it
     * holds (a pipeline stage's: its own layers', docs/plan.md) */
    FB_ASSERT(m->alloc_bytes == model_activation_bytes_chunks(&m->full, ops->act_bytes, max_tokens, m->ep_size,
                                                              m->tp_size, nchunks, lo, hi));
    return m;
}

model_t *model_create_sibling(model_t *m)
{
    model_t *s = model_create_chunks(&m->full, m->ops, m->max_tokens,
                                     MODEL_NO_PARAM_BUFFER | MODEL_NO_GRAD_BUFFER | MODEL_NO_COMPUTE_BUFFER |
                                         MODEL_NO_KV_GROUP,
                                     m->ep, m->tp, m->nchunks, m->chunk_lo, m->chunk_hi);
    /* one compute copy for all micro-batches in flight: rounding a block
     * into it again writes the same values */
    memcpy(s->wc, m->wc, sizeof s->wc);
    s->kv = m->kv;
    s->kv_host = m->kv_host;
    /* m's hooks: ZeRO's, or the defaults, whose ctx is m (its buffers) */
    s->hooks = m->hooks;
    s->a2a_chunks = m->a2a_chunks;
    if (s->ep_size > 1)
        s->ep_host = m->ep_host;
    if (s->tp_size > 1)
        s->tp_host = m->tp_host;
    return s;
}

void model_stage_layers(const model_t *m, int *layer_lo, int *layer_hi)
{
    *layer_lo = m->layer_lo;
    *layer_hi = m->layer_hi;
}

fb_act *model_stage_input(model_t *m) { return m->acts[m->layer_lo].x_in; }
fb_act *model_stage_output(model_t *m) { return m->x_final; }
fb_act *model_stage_grad(model_t *m) { return m->dx; }
/* under sequence parallelism the stages pass their token shards, tp rank
 * to the same tp rank */
size_t model_stage_bytes(const model_t *m, int T)
{
    return ACT_BYTES(m, (size_t)model_sp_rows_of(m, T) * (size_t)m->mc.hidden_size);
}

void model_set_ep_host_comm(model_t *m, comm_t *ep_host)
{
    FB_ASSERT(!ep_host || comm_size(ep_host) == m->ep_size);
    if (m->ep_size > 1)
        m->ep_host = ep_host ? ep_host : m->ep;
}

void model_set_tp_host_comm(model_t *m, comm_t *tp_host)
{
    FB_ASSERT(!tp_host || comm_size(tp_host) == m->tp_size);
    if (m->tp_size > 1)
        m->tp_host = tp_host ? tp_host : m->tp;
}

void model_set_a2a_chunks(model_t *m, int chunks)
{
    FB_ASSERT(chunks >= 1);
    m->a2a_chunks = chunks;
}

void model_free(model_t *m)
{
    if (!m)
        return;
    const ops_t *o = m->ops;
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        if (m->wc[g] && m->wc_owned)
            o->release(m->wc[g]);
        if (m->params[g])
            o->release(m->params[g]);
        if (m->grads[g])
            o->release(m->grads[g]);
    }
    FOR_STAGE_LAYERS(m, l)
        moe_plan_free(&m->acts[l].plan);
    o->release(m->arena);
    if (m->dlogits != m->logits)
        o->release(m->dlogits);
    free(m->acts);
    free(m->w.layers);
    free(m->dw.layers);
    free(m->lv);
    free(m->host_probs);
    free(m->host_rlse);
    free(m->host_loss);
    free(m->host_topk);
    free(m->tokens_per_expert);
    free(m->routed_per_expert);
    free(m->dropped_per_layer);
    free(m->aux_per_layer);
    free(m->z_per_layer);
    free(m->tag_expert_tokens);
    if (m->tp_ids) {
        o->release(m->tp_ids);
        o->release(m->tp_row_token);
        o->release(m->tp_token_rows);
    }
    free(m->tp_hids);
    free(m->tp_hrow_token);
    free(m->tp_htoken_rows);
    free(m->tp_hlogits);
    free(m->tp_hred);
    free(m->tp_wide);
    free(m->sp_counts);
    free(m->sp_displs);
    if (m->kv_owned) {
        if (m->kv != m->kv_host)
            comm_free(&m->kv);
        comm_free(&m->kv_host);
    }
    moe_ep_free(m);
    free(m->drop_key_h);
    free(m->drop_off_h);
    if (m->drop_off)
        o->release(m->drop_off);
    param_table_free(&m->table);
    free(m);
}

const param_table_t *model_params_table(const model_t *m) { return &m->table; }
const model_config_t *model_config(const model_t *m) { return &m->full; }
const ops_t *model_ops(const model_t *m) { return m->ops; }
size_t model_activation_bytes(const model_t *m) { return m->alloc_bytes; }
float *model_params(model_t *m, int group) { return m->params[group]; }
fb_act *model_compute_weights(model_t *m, int group) { return m->wc[group]; }
float *model_grads(model_t *m, int group) { return m->grads[group]; }

void model_set_keep_logits(model_t *m, int keep)
{
    if (keep && m->dlogits == m->logits)
        m->dlogits = m->ops->alloc(ACT_BYTES(m, (size_t)m->max_tokens * (size_t)m->mc.vocab_size));
    else if (!keep && m->dlogits != m->logits) {
        m->ops->release(m->dlogits);
        m->dlogits = m->logits;
    }
    m->keep_logits = keep;
}

comm_dtype_t model_act_comm_dtype(const model_t *m)
{
    switch (m->ops->act_dtype) {
    case FB_DTYPE_BF16: return COMM_BF16;
    case FB_DTYPE_F16: return COMM_F16;
    default: return COMM_F32;
    }
}

void model_get_logits(const model_t *m, float *host)
{
    const size_t n = (size_t)m->T * (size_t)m->mc.vocab_size;
    if (m->ops->act_dtype == FB_DTYPE_F32) {
        m->ops->to_host(host, m->logits, n * sizeof(float));
        return;
    }
    float *wide = m->ops->alloc(n * sizeof(float));
    m->ops->act_to_f32(wide, m->logits, n);
    m->ops->to_host(host, wide, n * sizeof(float));
    m->ops->release(wide);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a, then mixed */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return fb_mix64(h);
}

void model_init_view(const model_t *m, const param_view_t *v, uint64_t seed, float *host)
{
    const double std = m->mc.initializer_range;
    const double s = v->init == PARAM_INIT_NORMAL_SCALED ? std / sqrt(2.0 * m->mc.num_hidden_layers) : std;
    const uint64_t key = fb_hash2(seed, name_hash(v->name));
    /* a tensor-parallel slice draws the elements of the full tensor it
     * holds: element (r, c) of the slice is (r + r0, c + c0) of the tensor */
    const size_t cols = v->ndim == 2 ? (size_t)v->shape[1] : v->numel;
    const size_t full_cols = v->ndim == 2 ? (size_t)v->full_shape[1] : v->numel;
    const size_t r0 = v->tp_dim == 0 ? (size_t)v->tp_off : 0, c0 = v->tp_dim == 1 ? (size_t)v->tp_off : 0;
    if (v->init == PARAM_INIT_ONES) {
        for (size_t j = 0; j < v->numel; j++)
            host[j] = 1.0f;
        return;
    }
    /* Each element is a function of (key, j) alone, so threads change
     * nothing but the time (start-up at 100M parameters was seconds). */
#pragma omp parallel for schedule(static) if (v->numel >= 65536)
    for (size_t i = 0; i < v->numel; i++) {
        const size_t j = (i / cols + r0) * full_cols + i % cols + c0;
        /* Box-Muller from two counter-based uniforms; u1 kept away from 0 */
        double u1 = ((double)(fb_hash2(key, 2 * j) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
        double u2 = (double)(fb_hash2(key, 2 * j + 1) >> 11) * (1.0 / 9007199254740992.0);
        host[i] = (float)(s * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
    }
}

void model_init_weights(model_t *m, uint64_t seed)
{
    for (int i = 0; i < m->table.n; i++) {
        const param_view_t *v = &m->table.views[i];
        float *host = fb_malloc(v->numel * sizeof *host);
        model_init_view(m, v, seed, host);
        model_set_param(m, v, host);
        free(host);
    }
}

void model_set_param(model_t *m, const param_view_t *v, const float *host)
{
    m->ops->to_backend(m->params[v->group] + v->offset, host, v->numel * sizeof(float));
}

void model_get_param(const model_t *m, const param_view_t *v, float *host)
{
    m->ops->to_host(host, m->params[v->group] + v->offset, v->numel * sizeof(float));
}

void model_get_grad(const model_t *m, const param_view_t *v, float *host)
{
    m->ops->to_host(host, m->grads[v->group] + v->offset, v->numel * sizeof(float));
}

void model_zero_grads(model_t *m)
{
    for (int g = 0; g < PARAM_NGROUPS; g++)
        if (m->grads[g])
            m->ops->zero(m->grads[g], m->table.numel[g] * sizeof(float));
}

long model_active_params(const model_config_t *mc)
{
    const long D = mc->hidden_size, I = mc->intermediate_size, V = mc->vocab_size;
    const long hd = D / mc->num_attention_heads;
    const long attn = D * hd * (2L * mc->num_attention_heads + 2L * mc->num_key_value_heads);
    long n = 0;
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        n += attn;
        if (model_layer_is_moe(mc, l))
            n += (long)mc->num_local_experts * D + (long)mc->num_experts_per_tok * 3L * D * I;
        else
            n += 3L * D * I;
    }
    /* the embedding lookup is not a matmul; the head is */
    n += V * D;
    return n;
}

double model_attention_cost(const model_config_t *mc)
{
    double n_active = (double)model_active_params(mc);
    FB_ASSERT(n_active > 0.0);
    return (double)mc->num_hidden_layers * (double)mc->hidden_size / n_active;
}

long model_norm_params(const model_config_t *mc)
{
    return (2L * mc->num_hidden_layers + 1L) * mc->hidden_size;
}

double model_flops_per_token(const model_config_t *mc, double ctx, int count_norms)
{
    double n = (double)model_active_params(mc);
    if (count_norms)
        n += (double)model_norm_params(mc);
    return 6.0 * n + 12.0 * mc->num_hidden_layers * (double)mc->hidden_size * ctx;
}

double model_flops_packed(const model_config_t *mc, double tokens, double sum_len_sq)
{
    return model_flops_per_token(mc, 0.0, 1) * tokens +
           12.0 * mc->num_hidden_layers * (double)mc->hidden_size * sum_len_sq;
}

long model_assignments_per_token(const model_config_t *mc)
{
    long n = 0;
    for (int l = 0; l < mc->num_hidden_layers; l++)
        if (model_layer_is_moe(mc, l))
            n += mc->num_experts_per_tok;
    return n;
}

double model_expert_flops_per_token(const model_config_t *mc)
{
    return 6.0 * 3.0 * (double)mc->hidden_size * (double)mc->intermediate_size *
           (double)model_assignments_per_token(mc);
}

double model_loss_total(const model_config_t *mc, double lm, double aux, double z)
{
    return lm + mc->router_aux_loss_coef * aux + mc->router_z_loss_coef * z;
}
