/* The hand-written backward: the forward's layer sequence reversed. The
 * residual stream's gradient lives in m->dx throughout; every rmsnorm_bwd
 * adds its branch's contribution into it. */
#include "model/model_impl.h"

static void dense_ffn_backward(model_t *m, int l, fb_act *dh2)
{
    const ops_t *o = m->ops;
    const layer_weights_t *w = &m->w.layers[l];
    const layer_grads_t *dw = &m->dw.layers[l];
    const layer_acts_t *a = &m->acts[l];
    const int T = m->T, D = m->mc.hidden_size, I = m->mc.intermediate_size;
    o->matmul_f32(dw->w_down, m->dx, a->act, D, I, T, 1, 0, 1.0f);
    o->matmul(m->dact, m->dx, w->w_down, T, I, D, 0, 0, 0.0f);
    o->swiglu_bwd(m->dg, m->du, m->dact, a->g, a->u, (size_t)T * I);
    o->matmul_f32(dw->w_gate, m->dg, a->h2, I, D, T, 1, 0, 1.0f);
    o->matmul_f32(dw->w_up, m->du, a->h2, I, D, T, 1, 0, 1.0f);
    o->matmul(dh2, m->dg, w->w_gate, T, D, I, 0, 0, 0.0f);
    o->matmul(dh2, m->du, w->w_up, T, D, I, 0, 0, 1.0f);
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

    o->matmul_f32(dw->wo, m->dx, a->att, D, m->qdim, T, 1, 0, 1.0f);
    o->matmul(m->datt, m->dx, w->wo, T, m->qdim, D, 0, 0, 0.0f);
    o->attention_bwd(m->dq, m->dk, m->dv, m->datt, a->q, a->k, a->v, a->att, a->lse, m->cu_seqlens,
                     m->nseq, T, H, KV, m->hd);
    o->rope_bwd(m->dq, m->positions, T, H, m->hd, theta);
    o->rope_bwd(m->dk, m->positions, T, KV, m->hd, theta);
    o->matmul_f32(dw->wq, m->dq, a->h1, m->qdim, D, T, 1, 0, 1.0f);
    o->matmul_f32(dw->wk, m->dk, a->h1, m->kvdim, D, T, 1, 0, 1.0f);
    o->matmul_f32(dw->wv, m->dv, a->h1, m->kvdim, D, T, 1, 0, 1.0f);
    o->matmul(m->dh, m->dq, w->wq, T, D, m->qdim, 0, 0, 0.0f);
    o->matmul(m->dh, m->dk, w->wk, T, D, m->kvdim, 0, 0, 1.0f);
    o->matmul(m->dh, m->dv, w->wv, T, D, m->kvdim, 0, 0, 1.0f);
    o->rmsnorm_bwd(m->dx, dw->ln1, m->dh, a->x_in, w->ln1, a->rstd1, T, D);
}

/* The hook sequences of forward and backward without the arithmetic: what
 * an empty micro-batch does, so that every rank issues the same collectives. */
void model_visit_blocks_forward(model_t *m)
{
    const int L = m->mc.num_hidden_layers;
    for (int b = 0; b <= L; b++) {
        model_params_acquire(m, b, 0);
        if (b >= 1)
            model_moe_idle_forward(m, b - 1);
        model_params_release(m, b, 0);
    }
    if (m->mc.tie_word_embeddings)
        model_params_acquire(m, 0, 0);
    model_params_acquire(m, L + 1, 0);
    model_params_release(m, L + 1, 0);
    if (m->mc.tie_word_embeddings)
        model_params_release(m, 0, 0);
}

static void visit_blocks_backward(model_t *m)
{
    const int L = m->mc.num_hidden_layers, tied = m->mc.tie_word_embeddings;
    if (tied) {
        model_params_acquire(m, 0, 1);
        model_grads_acquire(m, 0);
    }
    model_params_acquire(m, L + 1, 1);
    model_grads_acquire(m, L + 1);
    model_params_release(m, L + 1, 1);
    if (tied)
        model_params_release(m, 0, 1);
    model_grads_release(m, L + 1);
    for (int l = L - 1; l >= 0; l--) {
        model_params_acquire(m, 1 + l, 1);
        model_grads_acquire(m, 1 + l);
        model_moe_idle_backward(m, l);
        model_params_release(m, 1 + l, 1);
        model_grads_release(m, 1 + l);
    }
    if (!tied)
        model_grads_acquire(m, 0);
    model_grads_release(m, 0);
}

void model_backward(model_t *m)
{
    if (m->T == 0) {
        visit_blocks_backward(m);
        return;
    }
    const ops_t *o = m->ops;
    const model_config_t *mc = &m->mc;
    const int T = m->T, D = mc->hidden_size, V = mc->vocab_size;

    const int L = mc->num_hidden_layers, tied = mc->tie_word_embeddings;

    /* With tied embeddings the head's gradient lands in block 0, which
     * stays acquired until the embedding's own backward at the end. */
    if (tied) {
        model_params_acquire(m, 0, 1);
        model_grads_acquire(m, 0);
    }
    model_params_acquire(m, L + 1, 1);
    model_grads_acquire(m, L + 1);
    o->matmul_f32(m->dw.head, m->dlogits, m->hf, V, D, T, 1, 0, 1.0f);
    o->matmul(m->dh, m->dlogits, m->w.head, T, D, V, 0, 0, 0.0f);
    o->zero(m->dx, ACT_BYTES(m, (size_t)T * D));
    o->rmsnorm_bwd(m->dx, m->dw.norm, m->dh, m->x_final, m->w.norm, m->rstdf, T, D);
    model_params_release(m, L + 1, 1);
    if (tied)
        model_params_release(m, 0, 1);
    model_grads_release(m, L + 1);

    for (int l = L - 1; l >= 0; l--) {
        const layer_acts_t *a = &m->acts[l];
        model_params_acquire(m, 1 + l, 1);
        model_grads_acquire(m, 1 + l);
        if (model_layer_is_moe(mc, l))
            model_backward_moe(m, l, m->dh);
        else
            dense_ffn_backward(m, l, m->dh);
        o->rmsnorm_bwd(m->dx, m->dw.layers[l].ln2, m->dh, a->x_mid, m->w.layers[l].ln2, a->rstd2, T, D);
        attention_backward(m, l);
        model_params_release(m, 1 + l, 1);
        model_grads_release(m, 1 + l);
    }
    if (!tied)
        model_grads_acquire(m, 0);
    o->embedding_bwd(m->dw.embed, m->dx, m->tokens, T, D);
    model_grads_release(m, 0);
}
