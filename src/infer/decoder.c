/* The KV-cache decoder (infer/decoder.h). Buffers are sized once for
 * max_len new rows (the longest prefill); a decode step uses row 0 only. */
#include "infer/decoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/moe_plan.h"
#include "model/params.h"
#include "util/error.h"

typedef struct layer {
    const fb_act *ln1, *wq, *wk, *wv, *wo, *ln2;
    const fb_act *w_gate, *w_up, *w_down;   /* dense FFN */
    const fb_act *router, *w1, *w3, *w2;    /* MoE: [E,D], [E,I,D], [E,I,D], [E,D,I] */
    fb_act *kc, *vc;                        /* [max_len, KV*hd] after RoPE / as projected */
    int moe;
} layer_t;

struct decoder {
    model_t *m;
    const ops_t *o;
    model_config_t mc;
    int max_len, len, hd, qdim, kvdim, E, K;
    fb_act *wc[PARAM_NGROUPS];              /* compute copies (16-bit backends), else NULL */
    const fb_act *embed, *norm, *head;
    layer_t *layers;
    /* scratch for n <= max_len rows, backend memory */
    int32_t *tokens, *pos, *cu, *topk_idx, *row_token, *token_rows;
    fb_act *x, *h, *q, *att, *g, *u, *act, *xp, *eo, *tmp, *hf, *logits;
    float *rstd, *lse, *rl, *probs, *rlse, *topk_w, *logits_f32;
    /* host */
    int32_t *host_pos, *host_topk;
    moe_plan_t plan;
};

static const fb_act *weight(decoder_t *d, const char *fmt, int l)
{
    char name[160];
    snprintf(name, sizeof name, fmt, l);
    const param_view_t *v = param_table_find(model_params_table(d->m), name);
    if (!v)
        fb_fatal(FB_EXIT_INTERNAL, "decoder: the model has no parameter %s", name);
    if (d->wc[v->group])
        return fb_act_at(d->o, d->wc[v->group], v->offset);
    return (const fb_act *)(model_params(d->m, v->group) + v->offset);
}

static void *buf(decoder_t *d, size_t n, size_t elem) { return d->o->alloc((n ? n : 1) * elem); }

decoder_t *decoder_create(model_t *m, int max_len)
{
    FB_ASSERT(max_len >= 1);
    decoder_t *d = fb_calloc(1, sizeof *d);
    d->m = m;
    d->o = model_ops(m);
    d->mc = *model_config(m);
    d->max_len = max_len;
    const ops_t *o = d->o;
    const model_config_t *mc = &d->mc;
    const param_table_t *t = model_params_table(m);
    if (t->ep_size != 1)
        fb_fatal(FB_EXIT_INTERNAL, "decoder: the model holds one of %d expert-parallel slices; it needs all",
                 t->ep_size);
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        if (t->numel[g] == 0)
            continue;
        float *p = model_params(m, g);
        if (!p)
            fb_fatal(FB_EXIT_INTERNAL, "decoder: the model does not hold its parameters (sharded by ZeRO-3)");
        /* fp32 compute: the parameters are the compute weights */
        if (o->act_dtype != FB_DTYPE_F32) {
            d->wc[g] = o->alloc(t->numel[g] * o->act_bytes);
            o->to_act(d->wc[g], p, t->numel[g]);
        }
    }
    const int D = mc->hidden_size, I = mc->intermediate_size, V = mc->vocab_size, L = mc->num_hidden_layers;
    d->hd = D / mc->num_attention_heads;
    d->qdim = mc->num_attention_heads * d->hd;
    d->kvdim = mc->num_key_value_heads * d->hd;
    d->E = config_model_is_moe(mc) ? mc->num_local_experts : 0;
    d->K = d->E ? mc->num_experts_per_tok : 0;
    d->embed = weight(d, "model.embed_tokens.weight", 0);
    d->norm = weight(d, "model.norm.weight", 0);
    d->head = mc->tie_word_embeddings ? d->embed : weight(d, "lm_head.weight", 0);
    d->layers = fb_calloc((size_t)L, sizeof *d->layers);
    const size_t n = (size_t)max_len, nk = d->K ? n * d->K : n, rows = nk > n ? nk : n;
    for (int l = 0; l < L; l++) {
        layer_t *y = &d->layers[l];
        y->ln1 = weight(d, "model.layers.%d.input_layernorm.weight", l);
        y->wq = weight(d, "model.layers.%d.self_attn.q_proj.weight", l);
        y->wk = weight(d, "model.layers.%d.self_attn.k_proj.weight", l);
        y->wv = weight(d, "model.layers.%d.self_attn.v_proj.weight", l);
        y->wo = weight(d, "model.layers.%d.self_attn.o_proj.weight", l);
        y->ln2 = weight(d, "model.layers.%d.post_attention_layernorm.weight", l);
        y->moe = model_layer_is_moe(mc, l);
        if (y->moe) {
            y->router = weight(d, "model.layers.%d.block_sparse_moe.gate.weight", l);
            /* expert 0's tensor starts each [E, out, in] block (params.h) */
            y->w1 = weight(d, "model.layers.%d.block_sparse_moe.experts.0.w1.weight", l);
            y->w3 = weight(d, "model.layers.%d.block_sparse_moe.experts.0.w3.weight", l);
            y->w2 = weight(d, "model.layers.%d.block_sparse_moe.experts.0.w2.weight", l);
        } else {
            y->w_gate = weight(d, "model.layers.%d.mlp.gate_proj.weight", l);
            y->w_up = weight(d, "model.layers.%d.mlp.up_proj.weight", l);
            y->w_down = weight(d, "model.layers.%d.mlp.down_proj.weight", l);
        }
        y->kc = buf(d, n * d->kvdim, o->act_bytes);
        y->vc = buf(d, n * d->kvdim, o->act_bytes);
    }
    d->tokens = buf(d, n, sizeof(int32_t));
    d->pos = buf(d, n, sizeof(int32_t));
    d->cu = buf(d, 2, sizeof(int32_t));
    d->x = buf(d, n * D, o->act_bytes);
    d->h = buf(d, n * D, o->act_bytes);
    d->tmp = buf(d, n * D, o->act_bytes);
    d->q = buf(d, n * d->qdim, o->act_bytes);
    d->att = buf(d, n * d->qdim, o->act_bytes);
    d->g = buf(d, rows * I, o->act_bytes);
    d->u = buf(d, rows * I, o->act_bytes);
    d->act = buf(d, rows * I, o->act_bytes);
    d->rstd = buf(d, n, sizeof(float));
    d->lse = buf(d, n * mc->num_attention_heads, sizeof(float));
    d->hf = buf(d, (size_t)D, o->act_bytes);
    d->logits = buf(d, (size_t)V, o->act_bytes);
    d->logits_f32 = buf(d, (size_t)V, sizeof(float));
    d->host_pos = fb_malloc(n * sizeof(int32_t));
    if (d->E) {
        d->xp = buf(d, nk * D, o->act_bytes);
        d->eo = buf(d, nk * D, o->act_bytes);
        d->rl = buf(d, n * d->E, sizeof(float));
        d->probs = buf(d, n * d->E, sizeof(float));
        d->rlse = buf(d, n, sizeof(float));
        d->topk_w = buf(d, nk, sizeof(float));
        d->topk_idx = buf(d, nk, sizeof(int32_t));
        d->row_token = buf(d, nk, sizeof(int32_t));
        d->token_rows = buf(d, nk, sizeof(int32_t));
        d->host_topk = fb_malloc(nk * sizeof(int32_t));
    }
    return d;
}

void decoder_free(decoder_t *d)
{
    if (!d)
        return;
    const ops_t *o = d->o;
    for (int l = 0; l < d->mc.num_hidden_layers; l++) {
        o->release(d->layers[l].kc);
        o->release(d->layers[l].vc);
    }
    void *bufs[] = {d->tokens, d->pos, d->cu, d->x, d->h, d->tmp, d->q, d->att, d->g, d->u, d->act, d->rstd,
                    d->lse, d->hf, d->logits, d->logits_f32, d->xp, d->eo, d->rl, d->probs, d->rlse, d->topk_w,
                    d->topk_idx, d->row_token, d->token_rows, d->wc[0], d->wc[1]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            o->release(bufs[i]);
    free(d->layers);
    free(d->host_pos);
    free(d->host_topk);
    moe_plan_free(&d->plan);
    free(d);
}

int decoder_len(const decoder_t *d) { return d->len; }
int decoder_max_len(const decoder_t *d) { return d->max_len; }
int decoder_vocab_size(const decoder_t *d) { return d->mc.vocab_size; }

void decoder_truncate(decoder_t *d, int len)
{
    FB_ASSERT(len >= 0 && len <= d->len);
    d->len = len;
}

/* The new rows' attention: the prefill of a fresh sequence is one causal
 * sample (the training's kernel); anything later reads the cache. */
static void attention(decoder_t *d, layer_t *y, int n, int past)
{
    const ops_t *o = d->o;
    const model_config_t *mc = &d->mc;
    const int D = mc->hidden_size, H = mc->num_attention_heads, KV = mc->num_key_value_heads;
    const float theta = (float)mc->rope_theta;
    fb_act *kn = fb_act_at(o, y->kc, (size_t)past * d->kvdim), *vn = fb_act_at(o, y->vc, (size_t)past * d->kvdim);
    o->rmsnorm_fwd(d->h, d->rstd, d->x, y->ln1, n, D, (float)mc->rms_norm_eps);
    o->matmul(d->q, d->h, y->wq, n, d->qdim, D, 0, 1, 0.0f);
    o->matmul(kn, d->h, y->wk, n, d->kvdim, D, 0, 1, 0.0f);
    o->matmul(vn, d->h, y->wv, n, d->kvdim, D, 0, 1, 0.0f);
    o->rope_fwd(d->q, d->pos, n, H, d->hd, theta);
    o->rope_fwd(kn, d->pos, n, KV, d->hd, theta);
    if (past == 0)
        o->attention_fwd(d->att, d->lse, d->q, kn, vn, d->cu, 1, n, H, KV, d->hd);
    else
        o->decode_attention(d->att, d->q, y->kc, y->vc, n, past, H, KV, d->hd);
    o->matmul(d->x, d->att, y->wo, n, D, d->qdim, 0, 1, 1.0f);
}

static void dense_ffn(decoder_t *d, const layer_t *y, int n)
{
    const ops_t *o = d->o;
    const int D = d->mc.hidden_size, I = d->mc.intermediate_size;
    o->matmul(d->g, d->h, y->w_gate, n, I, D, 0, 1, 0.0f);
    o->matmul(d->u, d->h, y->w_up, n, I, D, 0, 1, 0.0f);
    o->swiglu_fwd(d->act, d->g, d->u, (size_t)n * I);
    o->matmul(d->x, d->act, y->w_down, n, D, I, 0, 1, 1.0f);
}

/* model_forward_moe without capacity, losses or statistics: the same
 * router op and plan, so a token picks the experts it picks there. */
static void moe_ffn(decoder_t *d, const layer_t *y, int n)
{
    const ops_t *o = d->o;
    const int D = d->mc.hidden_size, I = d->mc.intermediate_size, E = d->E, K = d->K;
    o->matmul_f32(d->rl, d->h, y->router, n, E, D, 0, 1, 0.0f);
    o->router_fwd(d->probs, d->rlse, d->topk_idx, d->topk_w, d->rl, n, E, K);
    o->to_host(d->host_topk, d->topk_idx, (size_t)n * K * sizeof(int32_t));
    moe_plan_t *p = &d->plan;
    moe_plan_build(p, d->host_topk, n, E, K, 0);
    o->to_backend(d->row_token, p->row_token, (size_t)p->R * sizeof(int32_t));
    o->to_backend(d->token_rows, p->token_rows, (size_t)n * K * sizeof(int32_t));
    o->permute_fwd(d->xp, d->h, d->row_token, p->R, D);
    o->gmm_fwd(d->g, d->xp, y->w1, p->offsets, E, I, D);
    o->gmm_fwd(d->u, d->xp, y->w3, p->offsets, E, I, D);
    o->swiglu_fwd(d->act, d->g, d->u, (size_t)p->R * I);
    o->gmm_fwd(d->eo, d->act, y->w2, p->offsets, E, D, I);
    o->combine_fwd(d->tmp, d->eo, d->token_rows, d->topk_w, n, K, D);
    o->act_axpy(d->x, d->tmp, (size_t)n * D, 1.0f);
}

void decoder_append(decoder_t *d, const int32_t *tokens, int n, float *logits)
{
    FB_ASSERT(n >= 1 && d->len + n <= d->max_len);
    const ops_t *o = d->o;
    const model_config_t *mc = &d->mc;
    const int D = mc->hidden_size, V = mc->vocab_size, past = d->len;
    for (int i = 0; i < n; i++)
        d->host_pos[i] = past + i;
    const int32_t cu[2] = {0, n};
    o->to_backend(d->tokens, tokens, (size_t)n * sizeof(int32_t));
    o->to_backend(d->pos, d->host_pos, (size_t)n * sizeof(int32_t));
    o->to_backend(d->cu, cu, sizeof cu);
    o->embedding_fwd(d->x, d->tokens, d->embed, n, D);
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        layer_t *y = &d->layers[l];
        attention(d, y, n, past);
        o->rmsnorm_fwd(d->h, d->rstd, d->x, y->ln2, n, D, (float)mc->rms_norm_eps);
        if (y->moe)
            moe_ffn(d, y, n);
        else
            dense_ffn(d, y, n);
    }
    /* only the last row's logits are wanted */
    const fb_act *last = fb_act_at(o, d->x, (size_t)(n - 1) * D);
    o->rmsnorm_fwd(d->hf, d->rstd, last, d->norm, 1, D, (float)mc->rms_norm_eps);
    o->matmul(d->logits, d->hf, d->head, 1, V, D, 0, 1, 0.0f);
    o->act_to_f32(d->logits_f32, d->logits, (size_t)V);
    o->to_host(logits, d->logits_f32, (size_t)V * sizeof(float));
    d->len += n;
}
