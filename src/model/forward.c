/* Forward pass over one packed micro-batch (docs/model.md, "Forward"). */
#include <math.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/error.h"
#include "util/test_defect.h"

static void load_inputs(model_t *m, const model_input_t *in)
{
    if (in->T > m->max_tokens || in->T < 0)
        fb_fatal(FB_EXIT_INTERNAL, "micro-batch of %d tokens exceeds the %d the model was sized for",
                 in->T, m->max_tokens);
    const ops_t *o = m->ops;
    const size_t T = (size_t)in->T;
    m->T = in->T;
    m->nseq = in->nseq;
    if (T == 0)
        return;
    o->to_backend(m->tokens, in->tokens, T * sizeof(int32_t));
    o->to_backend(m->positions, in->positions, T * sizeof(int32_t));
    o->to_backend(m->targets, in->targets, T * sizeof(int32_t));
    o->to_backend(m->cu_seqlens, in->cu_seqlens, ((size_t)in->nseq + 1) * sizeof(int32_t));
}

static void attention_block(model_t *m, int l)
{
    const ops_t *o = m->ops;
    const model_config_t *mc = &m->mc;
    const layer_weights_t *w = &m->w.layers[l];
    layer_acts_t *a = &m->acts[l];
    const int T = m->T, D = mc->hidden_size, H = mc->num_attention_heads, KV = mc->num_key_value_heads;
    const float theta = (float)mc->rope_theta;
    const int Ts = model_sp_rows(m); /* this rank's rows of the residual stream */

    o->rmsnorm_fwd(a->h1, a->rstd1, a->x_in, w->ln1, Ts, D, (float)mc->rms_norm_eps);
    /* the tensor-parallel region takes every token: under sequence
     * parallelism the normed shards are all-gathered (the shard is kept) */
    const fb_act *h1 = model_sp_gather(m, a->h1);
    o->matmul(a->q, h1, w->wq, T, m->qdim, D, 0, 1, 0.0f);
    o->matmul(a->k, h1, w->wk, T, m->kvdim, D, 0, 1, 0.0f);
    o->matmul(a->v, h1, w->wv, T, m->kvdim, D, 0, 1, 0.0f);
    o->rope_fwd(a->q, m->positions, T, H, m->hd, theta);
    o->rope_fwd(a->k, m->positions, T, KV, m->hd, theta);
    o->attention_fwd(a->att, a->lse, a->q, a->k, a->v, m->cu_seqlens, m->nseq, T, H, KV, m->hd);
    o->copy(a->x_mid, a->x_in, ACT_BYTES(m, (size_t)Ts * D));
    /* test-only defect (docs/testing.md "Injected defects") */
    if (m->tp_size > 1 && fb_test_defect("tp_reduce_group")) {
        /* the output projection's partial sums "reduced" over a group of
         * one, this rank alone, instead of the tp group (its own rows of
         * them under sequence parallelism) */
        o->matmul(m->dtmp, a->att, w->wo, T, D, m->qdim, 0, 1, 0.0f);
        o->act_axpy(a->x_mid, ACT(m, m->dtmp, (size_t)model_sp_off(m) * D), (size_t)Ts * D, 1.0f);
    } else {
        model_tp_row_matmul_add(m, a->x_mid, a->att, w->wo, T, D, m->qdim);
    }
}

/* h2: the FFN's normed input, all T rows */
static void dense_ffn(model_t *m, int l, const fb_act *h2, fb_act *x_out)
{
    const ops_t *o = m->ops;
    const layer_weights_t *w = &m->w.layers[l];
    layer_acts_t *a = &m->acts[l];
    const int T = m->T, D = m->mc.hidden_size, I = m->mc.intermediate_size;
    o->matmul(a->g, h2, w->w_gate, T, I, D, 0, 1, 0.0f);
    o->matmul(a->u, h2, w->w_up, T, I, D, 0, 1, 0.0f);
    o->swiglu_fwd(a->act, a->g, a->u, (size_t)T * I);
    model_tp_row_matmul_add(m, x_out, a->act, w->w_down, T, D, I);
}

static void layer_forward(model_t *m, int l, model_stats_t *stats)
{
    const ops_t *o = m->ops;
    const model_config_t *mc = &m->mc;
    layer_acts_t *a = &m->acts[l];
    const int Ts = model_sp_rows(m), D = mc->hidden_size;
    fb_act *x_out = l + 1 < m->layer_hi ? m->acts[l + 1].x_in : m->x_final;
    attention_block(m, l);
    o->rmsnorm_fwd(a->h2, a->rstd2, a->x_mid, m->w.layers[l].ln2, Ts, D, (float)mc->rms_norm_eps);
    o->copy(x_out, a->x_mid, ACT_BYTES(m, (size_t)Ts * D));
    /* the router sees the gathered rows, the same on every tp rank, so the
     * routing is that of one rank */
    const fb_act *h2 = model_sp_gather(m, a->h2);
    if (model_layer_is_moe(mc, l))
        model_forward_moe(m, l, h2, x_out, stats);
    else
        dense_ffn(m, l, h2, x_out);
}

void model_recompute_layer(model_t *m, int l)
{
    const ops_t *o = m->ops;
    const model_config_t *mc = &m->mc;
    layer_acts_t *a = &m->acts[l];
    const int T = m->T, I = mc->intermediate_size;
    switch (mc->recompute) {
    case MODEL_RECOMPUTE_FULL:
        /* the layer's output lands where the forward left it, in the next
         * layer's input: dead since that layer's backward, and bit-equal */
        layer_forward(m, l, NULL);
        return;
    case MODEL_RECOMPUTE_SELECTIVE:
        o->attention_fwd(a->att, a->lse, a->q, a->k, a->v, m->cu_seqlens, m->nseq, T, mc->num_attention_heads,
                         mc->num_key_value_heads, m->hd);
        if (model_layer_is_moe(mc, l))
            model_recompute_moe_act(m, l);
        else
            o->swiglu_fwd(a->act, a->g, a->u, (size_t)T * I);
        return;
    default: return;
    }
}

static void head_forward(model_t *m)
{
    const model_config_t *mc = &m->mc;
    const int T = m->T, D = mc->hidden_size, V = mc->vocab_size;
    /* the vocabulary-parallel head takes every token's row: under sequence
     * parallelism the normed shards are gathered into m->hf */
    m->ops->rmsnorm_fwd(m->sp ? m->sps : m->hf, m->rstdf, m->x_final, m->w.norm, model_sp_rows(m), D,
                        (float)mc->rms_norm_eps);
    if (m->sp)
        model_sp_gather_to(m, m->sps, m->hf);
    m->ops->matmul(m->logits, m->hf, m->w.head, T, V, D, 0, 1, 0.0f);
}

void model_forward(model_t *m, const model_input_t *in, const model_scales_t *sc, model_stats_t *stats)
{
    const model_config_t *mc = &m->mc;
    load_inputs(m, in);
    m->sc = *sc;
    const int T = m->T, L = mc->num_hidden_layers;
    const int empty = T == 0;
    memset(stats, 0, sizeof *stats);
    stats->tokens_per_expert = m->tokens_per_expert;
    stats->routed_per_expert = m->routed_per_expert;
    stats->dropped_per_layer = m->dropped_per_layer;
    model_moe_stats_begin(m, in, stats);
    /* the layers this pass does not run count nothing (interleaved stages:
     * another chunk's pass left its figures there) */
    if (empty || m->nchunks > 1) {
        const size_t nexp = (size_t)L * config_model_experts(mc);
        memset(m->tokens_per_expert, 0, nexp * sizeof(long));
        memset(m->routed_per_expert, 0, nexp * sizeof(long));
        memset(m->dropped_per_layer, 0, (size_t)L * sizeof(long));
    }

    /* An empty micro-batch computes nothing but still takes every block's
     * hooks and its layers' ep exchanges: the collectives behind them must
     * line up across ranks. */
    if (m->first) {
        model_block_begin(m, 0, 0);
        if (!empty)
            model_embedding_fwd(m, in);
        model_block_end(m, 0, 0);
    }
    for (int l = m->layer_lo; l < m->layer_hi; l++) {
        model_block_begin(m, 1 + l, 0);
        if (empty)
            model_moe_idle_forward(m, l);
        else
            layer_forward(m, l, stats);
        model_block_end(m, 1 + l, 0);
    }
    if (m->last) {
        model_block_begin(m, L + 1, 0);
        if (!empty)
            head_forward(m);
        model_block_end(m, L + 1, 0);
    }
    if (empty)
        return;

    if (m->last) {
        model_cross_entropy(m, in->targets, (float)(model_loss_scale(sc) / sc->lm_denominator));
        double sum = 0.0;
        for (int t = 0; t < T; t++)
            sum += m->host_loss[t];
        long ntargets = 0;
        for (int t = 0; t < T; t++)
            ntargets += in->targets[t] >= 0;
        stats->lm_sum = sum;
        stats->ntargets = ntargets;
    }
    /* nmoe counts the whole model's MoE layers: the stages' parts sum to the mean */
    if (m->nmoe > 0) {
        stats->aux /= m->nmoe;
        stats->z /= m->nmoe;
    }
    stats->tokens_per_expert = m->tokens_per_expert;
    stats->routed_per_expert = m->routed_per_expert;
    stats->dropped_per_layer = m->dropped_per_layer;
}
