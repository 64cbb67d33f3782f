/* Model construction: the parameter table, buffers, views and init. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "rng.h"
#include "util/error.h"

static float *balloc_f(model_t *m, size_t n) { return m->ops->alloc(n * sizeof(float)); }
static int32_t *balloc_i(model_t *m, size_t n) { return m->ops->alloc(n * sizeof(int32_t)); }

static float *view_ptr(float *const base[PARAM_NGROUPS], const param_table_t *t, const char *name)
{
    const param_view_t *v = param_table_find(t, name);
    FB_ASSERT(v != NULL);
    return base[v->group] + v->offset;
}

static void bind_weights(weights_t *w, float *const base[PARAM_NGROUPS], const param_table_t *t,
                         const model_config_t *mc)
{
    char name[128];
    w->embed = view_ptr(base, t, "model.embed_tokens.weight");
    w->norm = view_ptr(base, t, "model.norm.weight");
    w->head = mc->tie_word_embeddings ? w->embed : view_ptr(base, t, "lm_head.weight");
    w->layers = fb_calloc((size_t)mc->num_hidden_layers, sizeof *w->layers);
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        layer_weights_t *lw = &w->layers[l];
#define BIND(field, suffix)                                                    \
    do {                                                                       \
        snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);          \
        lw->field = view_ptr(base, t, name);                                   \
    } while (0)
        BIND(ln1, "input_layernorm.weight");
        BIND(wq, "self_attn.q_proj.weight");
        BIND(wk, "self_attn.k_proj.weight");
        BIND(wv, "self_attn.v_proj.weight");
        BIND(wo, "self_attn.o_proj.weight");
        BIND(ln2, "post_attention_layernorm.weight");
        if (model_layer_is_moe(mc, l)) {
            BIND(router, "block_sparse_moe.gate.weight");
            BIND(w1, "block_sparse_moe.experts.0.w1.weight");
            BIND(w3, "block_sparse_moe.experts.0.w3.weight");
            BIND(w2, "block_sparse_moe.experts.0.w2.weight");
        } else {
            BIND(w_gate, "mlp.gate_proj.weight");
            BIND(w_up, "mlp.up_proj.weight");
            BIND(w_down, "mlp.down_proj.weight");
        }
#undef BIND
    }
}

model_t *model_create(const model_config_t *mc, const ops_t *ops, int max_tokens)
{
    model_t *m = fb_calloc(1, sizeof *m);
    m->mc = *mc;
    m->ops = ops;
    m->max_tokens = max_tokens;
    m->hd = mc->hidden_size / mc->num_attention_heads;
    m->qdim = m->hd * mc->num_attention_heads;
    m->kvdim = m->hd * mc->num_key_value_heads;
    param_table_build(&m->table, mc);
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        m->params[g] = balloc_f(m, m->table.numel[g]);
        m->grads[g] = balloc_f(m, m->table.numel[g]);
    }
    bind_weights(&m->w, m->params, &m->table, mc);
    bind_weights(&m->dw, m->grads, &m->table, mc);

    const size_t T = (size_t)max_tokens, D = (size_t)mc->hidden_size, I = (size_t)mc->intermediate_size;
    const size_t H = (size_t)mc->num_attention_heads, V = (size_t)mc->vocab_size;
    const size_t E = mc->num_local_experts > 1 ? (size_t)mc->num_local_experts : 1;
    const size_t K = mc->num_local_experts > 1 ? (size_t)mc->num_experts_per_tok : 1;
    const size_t R = T * K; /* most rows a dispatch can produce */
    m->tokens = balloc_i(m, T);
    m->positions = balloc_i(m, T);
    m->targets = balloc_i(m, T);
    m->cu_seqlens = balloc_i(m, T + 1);
    m->acts = fb_calloc((size_t)mc->num_hidden_layers, sizeof *m->acts);
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        layer_acts_t *a = &m->acts[l];
        a->x_in = balloc_f(m, T * D);
        a->h1 = balloc_f(m, T * D);
        a->rstd1 = balloc_f(m, T);
        a->q = balloc_f(m, T * (size_t)m->qdim);
        a->k = balloc_f(m, T * (size_t)m->kvdim);
        a->v = balloc_f(m, T * (size_t)m->kvdim);
        a->att = balloc_f(m, T * (size_t)m->qdim);
        a->lse = balloc_f(m, T * H);
        a->x_mid = balloc_f(m, T * D);
        a->h2 = balloc_f(m, T * D);
        a->rstd2 = balloc_f(m, T);
        if (model_layer_is_moe(mc, l)) {
            m->nmoe++;
            a->g = balloc_f(m, R * I);
            a->u = balloc_f(m, R * I);
            a->act = balloc_f(m, R * I);
            a->rlogits = balloc_f(m, T * E);
            a->probs = balloc_f(m, T * E);
            a->rlse = balloc_f(m, T);
            a->topk_w = balloc_f(m, T * K);
            a->topk_idx = balloc_i(m, T * K);
            a->aux_dprob = balloc_f(m, E);
            a->xp = balloc_f(m, R * D);
            a->eo = balloc_f(m, R * D);
            a->mask = m->ops->alloc(R * I);
            a->plan.d_row_token = balloc_i(m, R);
            a->plan.d_token_rows = balloc_i(m, R);
        } else {
            a->g = balloc_f(m, T * I);
            a->u = balloc_f(m, T * I);
            a->act = balloc_f(m, T * I);
        }
    }
    m->x_final = balloc_f(m, T * D);
    m->hf = balloc_f(m, T * D);
    m->rstdf = balloc_f(m, T);
    m->logits = balloc_f(m, T * V);
    m->dlogits = m->logits;
    m->token_loss = balloc_f(m, T);

    const size_t widest = (size_t)(m->qdim > mc->hidden_size ? m->qdim : mc->hidden_size);
    m->dx = balloc_f(m, T * D);
    m->dh = balloc_f(m, T * widest);
    m->dq = balloc_f(m, T * (size_t)m->qdim);
    m->dk = balloc_f(m, T * (size_t)m->kvdim);
    m->dv = balloc_f(m, T * (size_t)m->kvdim);
    m->datt = balloc_f(m, T * (size_t)m->qdim);
    m->dg = balloc_f(m, R * I);
    m->du = balloc_f(m, R * I);
    m->dact = balloc_f(m, R * I);
    m->dxp = balloc_f(m, R * D);
    m->dtmp = balloc_f(m, R * D);
    m->drl = balloc_f(m, T * E);
    m->dtw = balloc_f(m, T * K);

    m->host_probs = fb_calloc(T * E, sizeof(float));
    m->host_rlse = fb_calloc(T, sizeof(float));
    m->host_loss = fb_calloc(T, sizeof(float));
    m->host_topk = fb_calloc(T * K, sizeof(int32_t));
    m->tokens_per_expert = fb_calloc((size_t)mc->num_hidden_layers * E, sizeof(long));
    m->dropped_per_layer = fb_calloc((size_t)mc->num_hidden_layers, sizeof(long));
    return m;
}

void model_free(model_t *m)
{
    if (!m)
        return;
    const ops_t *o = m->ops;
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        o->release(m->params[g]);
        o->release(m->grads[g]);
    }
    for (int l = 0; l < m->mc.num_hidden_layers; l++) {
        layer_acts_t *a = &m->acts[l];
        void *bufs[] = {a->x_in, a->h1, a->rstd1, a->q, a->k, a->v, a->att, a->lse, a->x_mid,
                        a->h2, a->rstd2, a->g, a->u, a->act, a->rlogits, a->probs, a->rlse,
                        a->topk_w, a->topk_idx, a->aux_dprob, a->xp, a->eo, a->mask, a->plan.d_row_token,
                        a->plan.d_token_rows};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i])
                o->release(bufs[i]);
        moe_plan_free(&a->plan);
    }
    void *bufs[] = {m->tokens, m->positions, m->targets, m->cu_seqlens, m->x_final, m->hf, m->rstdf,
                    m->logits, m->token_loss, m->dx, m->dh, m->dq, m->dk, m->dv, m->datt, m->dg,
                    m->du, m->dact, m->dxp, m->dtmp, m->drl, m->dtw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        o->release(bufs[i]);
    if (m->dlogits != m->logits)
        o->release(m->dlogits);
    free(m->acts);
    free(m->w.layers);
    free(m->dw.layers);
    free(m->host_probs);
    free(m->host_rlse);
    free(m->host_loss);
    free(m->host_topk);
    free(m->tokens_per_expert);
    free(m->dropped_per_layer);
    param_table_free(&m->table);
    free(m);
}

const param_table_t *model_params_table(const model_t *m) { return &m->table; }
const model_config_t *model_config(const model_t *m) { return &m->mc; }
const ops_t *model_ops(const model_t *m) { return m->ops; }
float *model_params(model_t *m, int group) { return m->params[group]; }
float *model_grads(model_t *m, int group) { return m->grads[group]; }

void model_set_keep_logits(model_t *m, int keep)
{
    if (keep && m->dlogits == m->logits)
        m->dlogits = m->ops->alloc((size_t)m->max_tokens * (size_t)m->mc.vocab_size * sizeof(float));
    else if (!keep && m->dlogits != m->logits) {
        m->ops->release(m->dlogits);
        m->dlogits = m->logits;
    }
    m->keep_logits = keep;
}

const float *model_logits(const model_t *m) { return m->logits; }

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a, then mixed */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return fb_mix64(h);
}

void model_init_weights(model_t *m, uint64_t seed)
{
    const double std = m->mc.initializer_range;
    const double scaled = std / sqrt(2.0 * m->mc.num_hidden_layers);
    for (int i = 0; i < m->table.n; i++) {
        const param_view_t *v = &m->table.views[i];
        float *host = fb_malloc(v->numel * sizeof *host);
        uint64_t key = fb_hash2(seed, name_hash(v->name));
        double s = v->init == PARAM_INIT_NORMAL_SCALED ? scaled : std;
        for (size_t j = 0; j < v->numel; j++) {
            if (v->init == PARAM_INIT_ONES) {
                host[j] = 1.0f;
                continue;
            }
            /* Box-Muller from two counter-based uniforms; u1 kept away from 0 */
            double u1 = ((double)(fb_hash2(key, 2 * j) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
            double u2 = (double)(fb_hash2(key, 2 * j + 1) >> 11) * (1.0 / 9007199254740992.0);
            host[j] = (float)(s * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
        }
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

double model_flops_per_token(const model_config_t *mc, double avg_ctx)
{
    /* 6 FLOPs per active weight (forward 2, backward 4) plus the attention
     * score and value products: 12 * L * d * ctx for a full causal context,
     * halved by causality on average -> with avg_ctx the mean attended span. */
    return 6.0 * (double)model_active_params(mc) +
           12.0 * mc->num_hidden_layers * (double)mc->hidden_size * avg_ctx;
}
