/* The experts' SwiGLU FFN and its backward (docs/model.md, "MoE FFN"). */
#include "model/expert_ffn.h"

#include <stdlib.h>

#include "rng.h"
#include "util/error.h"

/* The seed of every expert dropout draw: what varies (the step, the
 * micro-batch, the layer, the token and choice) is in each row's key. */
#define EXPERT_DROPOUT_SEED 0x65787064726f70ULL

static void progress(const expert_rows_t *r)
{
    if (r->progress)
        r->progress(r->progress_ctx);
}

int model_expert_dropout_on(const model_t *m) { return m->sc.training && m->mc.expert_dropout > 0.0; }

uint64_t model_expert_dropout_key(uint64_t seed, int l, int64_t a)
{
    return fb_hash2(seed, ((uint64_t)l << 40) + (uint64_t)a);
}

/* Room for `rows` rows in the dropout buffers (allocated at first use). */
static void drop_reserve(model_t *m, size_t rows)
{
    if (rows <= m->drop_cap && m->drop_off_h)
        return;
    const size_t cap = rows + rows / 4 + 1;
    if (m->drop_off) {
        m->ops->release(m->drop_off);
        m->alloc_bytes -= m->drop_cap * sizeof(uint64_t);
    }
    m->drop_key_h = fb_realloc(m->drop_key_h, cap * sizeof *m->drop_key_h);
    m->drop_off_h = fb_realloc(m->drop_off_h, cap * sizeof *m->drop_off_h);
    m->drop_off = m->ops->alloc(cap * sizeof(uint64_t));
    m->alloc_bytes += cap * sizeof(uint64_t);
    m->drop_cap = cap;
}

const uint64_t *model_expert_row_keys(model_t *m, int l, const moe_plan_t *p)
{
    if (!model_expert_dropout_on(m) || p->R == 0)
        return NULL;
    drop_reserve(m, (size_t)p->R);
    const int64_t TK = (int64_t)p->T * p->K;
    for (int64_t a = 0; a < TK; a++)
        if (p->token_rows[a] >= 0)
            m->drop_key_h[p->token_rows[a]] = model_expert_dropout_key(m->sc.dropout_seed, l, a);
    return m->drop_key_h;
}

void model_expert_ffn_act(model_t *m, const expert_rows_t *r)
{
    const ops_t *o = m->ops;
    const int I = m->mc.intermediate_size;
    o->swiglu_fwd(r->act, r->g, r->u, (size_t)r->rows * I);
    if (!model_expert_dropout_on(m) || r->rows == 0)
        return;
    FB_ASSERT(r->row_key);
    /* Each row's mask comes from its key, the token and choice it came
     * from: the same on one rank or across an ep group in any chunking, and
     * recomputed alike. Under tp a rank holds columns [tp_rank I,
     * (tp_rank + 1) I) of the full width, keyed by their full-width
     * position, so every element gets the single-rank run's bit. */
    const uint64_t c0 = (uint64_t)m->tp_rank * (uint64_t)I;
    drop_reserve(m, (size_t)r->rows);
    for (int i = 0; i < r->rows; i++)
        m->drop_off_h[i] = r->row_key[i] + c0;
    o->to_backend(m->drop_off, m->drop_off_h, (size_t)r->rows * sizeof(uint64_t));
    o->dropout_rows_fwd(r->act, r->mask, (size_t)r->rows, (size_t)I, (float)m->mc.expert_dropout,
                        EXPERT_DROPOUT_SEED, m->drop_off);
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
    model_expert_ffn_act(m, r);
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
    if (model_expert_dropout_on(m))
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
