/* The experts' SwiGLU FFN and its backward (docs/model.md, "MoE FFN"). */
#include "model/expert_ffn.h"

static void progress(const expert_rows_t *r)
{
    if (r->progress)
        r->progress(r->progress_ctx);
}

static int dropout_on(const model_t *m) { return m->sc.training && m->mc.expert_dropout > 0.0; }

void model_expert_ffn_act(model_t *m, int l, const expert_rows_t *r)
{
    const ops_t *o = m->ops;
    const int I = m->mc.intermediate_size;
    o->swiglu_fwd(r->act, r->g, r->u, (size_t)r->rows * I);
    /* the mask of a row depends on its place in the layer's stream only,
     * however the rows are split into runs (and whether it is recomputed) */
    if (!dropout_on(m))
        return;
    const float p = (float)m->mc.expert_dropout;
    const uint64_t base = ((uint64_t)l << 40) + r->row0 * (uint64_t)m->full.intermediate_size;
    if (m->tp_size == 1) {
        o->dropout_fwd(r->act, r->mask, (size_t)r->rows * I, p, m->sc.dropout_seed, base);
        return;
    }
    /* Under tp a rank holds columns [tp_rank I, (tp_rank + 1) I) of the
     * full width: each row's slice is keyed by its full-width positions,
     * so every element gets the single-rank run's mask bit. */
    const uint64_t I_full = (uint64_t)m->full.intermediate_size, c0 = (uint64_t)m->tp_rank * (uint64_t)I;
    for (int i = 0; i < r->rows; i++)
        o->dropout_fwd(fb_act_at(o, r->act, (size_t)i * I), r->mask + (size_t)i * I, (size_t)I, p,
                       m->sc.dropout_seed, base + (uint64_t)i * I_full + c0);
}

void model_expert_ffn_forward(model_t *m, int l, const expert_rows_t *r, fb_act *y)
{
    const ops_t *o = m->ops;
    const layer_weights_t *w = &m->w.layers[l];
    const int D = m->mc.hidden_size, I = m->mc.intermediate_size;
    o->gmm_fwd(r->g, r->x, w->w1, r->off, r->ne, I, D);
    progress(r);
    o->gmm_fwd(r->u, r->x, w->w3, r->off, r->ne, I, D);
    progress(r);
    model_expert_ffn_act(m, l, r);
    o->gmm_fwd(y, r->act, w->w2, r->off, r->ne, D, I);
    progress(r);
}

void model_expert_ffn_backward(model_t *m, int l, const expert_rows_t *r, fb_act *dy, fb_act *tmp, fb_act *dg,
                               fb_act *du, fb_act *dact)
{
    const ops_t *o = m->ops;
    const layer_weights_t *w = &m->w.layers[l];
    const layer_grads_t *dw = &m->dw.layers[l];
    const int D = m->mc.hidden_size, I = m->mc.intermediate_size;
    o->gmm_bwd_weight(dw->w2, dy, r->act, r->off, r->ne, D, I);
    o->gmm_bwd_data(dact, dy, w->w2, r->off, r->ne, D, I);
    progress(r);
    if (dropout_on(m))
        o->dropout_bwd(dact, r->mask, (size_t)r->rows * I, (float)m->mc.expert_dropout);
    o->swiglu_bwd(dg, du, dact, r->g, r->u, (size_t)r->rows * I);
    o->gmm_bwd_weight(dw->w1, dg, r->x, r->off, r->ne, I, D);
    o->gmm_bwd_weight(dw->w3, du, r->x, r->off, r->ne, I, D);
    progress(r);
    /* dy is spent: d(inputs) takes its place */
    o->gmm_bwd_data(dy, dg, w->w1, r->off, r->ne, I, D);
    o->gmm_bwd_data(tmp, du, w->w3, r->off, r->ne, I, D);
    o->act_axpy(dy, tmp, (size_t)r->rows * D, 1.0f);
}
