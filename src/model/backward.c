/* The hand-written backward: the forward's layer sequence reversed. The
 * residual stream's gradient lives in m->dx throughout; every rmsnorm_bwd
 * adds its branch's contribution into it. */
#include "model/model_impl.h"

/* dy: d(layer output), all T rows; dh2: scratch for d(h2) [T, D]. Returns
 * the tp sum of d(h2): dh2 itself, or this rank's shard (sequence
 * parallelism). */
static fb_act *dense_ffn_backward(model_t *m, int l, const fb_act *dy, fb_act *dh2)
{
    const ops_t *o = m->ops;
    const layer_weights_t *w = &m->w.layers[l];
    const layer_grads_t *dw = &m->dw.layers[l];
    const layer_acts_t *a = &m->acts[l];
    const int T = m->T, D = m->mc.hidden_size, I = m->mc.intermediate_size;
    o->matmul_f32(dw->w_down, dy, a->act, D, I, T, 1, 0, 1.0f);
    o->matmul(m->dact, dy, w->w_down, T, I, D, 0, 0, 0.0f);
    o->swiglu_bwd(m->dg, m->du, m->dact, a->g, a->u, (size_t)T * I);
    /* dy is dead: under sequence parallelism its buffer takes the
     * re-gathered normed input, of which only the shard was kept */
    const fb_act *h2 = model_sp_gather(m, a->h2);
    o->matmul_f32(dw->w_gate, m->dg, h2, I, D, T, 1, 0, 1.0f);
    o->matmul_f32(dw->w_up, m->du, h2, I, D, T, 1, 0, 1.0f);
    o->matmul(dh2, m->dg, w->w_gate, T, D, I, 0, 0, 0.0f);
    o->matmul(dh2, m->du, w->w_up, T, D, I, 0, 0, 1.0f);
    return model_tp_reduce_input_grad(m, dh2);
}

static void attention_backward(model_t *m, int l)
{
    const ops_t *o = m->ops;
    const model_config_t *mc = &m->mc;
    const layer_weights_t *w = &m->w.layers[l];
    const layer_grads_t *dw = &m->dw.layers[l];
    const layer_acts_t *a = &m->acts[l];
    const int T = m->T, D = mc->hidden_size, H = mc->num_attention_heads, KV = mc->num_key_value_heads;
    const float theta = (float)mc->rope_theta;

    /* the forward's reduce-scatter is an all-gather of d(output) here */
    const fb_act *dy = model_sp_gather(m, m->dx);
    o->matmul_f32(dw->wo, dy, a->att, D, m->qdim, T, 1, 0, 1.0f);
    o->matmul(m->datt, dy, w->wo, T, m->qdim, D, 0, 0, 0.0f);
    o->attention_bwd(m->dq, m->dk, m->dv, m->datt, a->q, a->k, a->v, a->att, a->lse, m->cu_seqlens,
                     m->nseq, T, H, KV, m->hd);
    o->rope_bwd(m->dq, m->positions, T, H, m->hd, theta);
    o->rope_bwd(m->dk, m->positions, T, KV, m->hd, theta);
    /* the input gradient from this rank's share of d(k), d(v): the tp sum
     * below adds the sharers' shares of a replicated kv head */
    o->matmul(m->dh, m->dq, w->wq, T, D, m->qdim, 0, 0, 0.0f);
    o->matmul(m->dh, m->dk, w->wk, T, D, m->kvdim, 0, 0, 1.0f);
    o->matmul(m->dh, m->dv, w->wv, T, D, m->kvdim, 0, 0, 1.0f);
    /* the weight gradients of a replicated kv head from the whole head's
     * d(k), d(v): summed over its sharers first */
    model_kv_allreduce(m, m->dk, (size_t)T * m->kvdim);
    model_kv_allreduce(m, m->dv, (size_t)T * m->kvdim);
    const fb_act *h1 = model_sp_gather(m, a->h1);
    o->matmul_f32(dw->wq, m->dq, h1, m->qdim, D, T, 1, 0, 1.0f);
    o->matmul_f32(dw->wk, m->dk, h1, m->kvdim, D, T, 1, 0, 1.0f);
    o->matmul_f32(dw->wv, m->dv, h1, m->kvdim, D, T, 1, 0, 1.0f);
    /* the forward's all-gather is a reduce-scatter here */
    const fb_act *dh1 = model_tp_reduce_input_grad(m, m->dh);
    model_rmsnorm_bwd(m, dw->ln1, dh1, a->x_in, w->ln1, a->rstd1);
}

static void head_backward(model_t *m)
{
    const ops_t *o = m->ops;
    const int T = m->T, D = m->mc.hidden_size, V = m->mc.vocab_size;
    o->matmul_f32(m->dw.head, m->dlogits, m->hf, V, D, T, 1, 0, 1.0f);
    o->matmul(m->dh, m->dlogits, m->w.head, T, D, V, 0, 0, 0.0f);
    /* the vocabulary shards' parts (under sequence parallelism, this
     * rank's token shard of their sum) */
    const fb_act *dhf = model_tp_reduce_input_grad(m, m->dh);
    o->zero(m->dx, ACT_BYTES(m, (size_t)model_sp_rows(m) * D));
    model_rmsnorm_bwd(m, m->dw.norm, dhf, m->x_final, m->w.norm, m->rstdf);
}

static void layer_backward(model_t *m, int l)
{
    const layer_acts_t *a = &m->acts[l];
    model_recompute_layer(m, l);
    const fb_act *dy = model_sp_gather(m, m->dx);
    const fb_act *dh2 = model_layer_is_moe(&m->mc, l) ? model_backward_moe(m, l, dy, m->dh)
                                                        : dense_ffn_backward(m, l, dy, m->dh);
    model_rmsnorm_bwd(m, m->dw.layers[l].ln2, dh2, a->x_mid, m->w.layers[l].ln2, a->rstd2);
    attention_backward(m, l);
}

void model_backward(model_t *m)
{
    const int L = m->mc.num_hidden_layers, empty = m->T == 0;
    /* An empty micro-batch computes nothing but still takes every block's
     * hooks and its layers' ep exchanges: the collectives behind them must
     * line up across ranks. */
    if (m->last) {
        model_block_begin(m, L + 1, 1);
        if (!empty)
            head_backward(m);
        model_block_end(m, L + 1, 1);
    }
    /* a stage without the head starts from d(output) in m->dx (model_stage_grad) */
    for (int l = m->layer_hi - 1; l >= m->layer_lo; l--) {
        model_block_begin(m, 1 + l, 1);
        if (empty) {
            /* the recomputed forward's exchanges too, as a rank with tokens issues them */
            if (m->mc.recompute == MODEL_RECOMPUTE_FULL)
                model_moe_idle_forward(m, l);
            model_moe_idle_backward(m, l);
        } else {
            layer_backward(m, l);
        }
        model_block_end(m, 1 + l, 1);
    }
    if (m->first) {
        model_block_begin(m, 0, 1);
        if (!empty)
            model_embedding_bwd(m);
        model_block_end(m, 0, 1);
    }
}
