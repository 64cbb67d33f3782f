/* Private to src/model: the experts' SwiGLU FFN over rows grouped by
 * expert, y = w2 (silu(w1 x) * (w3 x)) with expert dropout on the product,
 * and its backward. The single-rank MoE layer (moe.c) runs it on all its
 * permuted rows, the ep path (moe_ep.c) on each received chunk. */
#ifndef FABULA_MODEL_EXPERT_FFN_H
#define FABULA_MODEL_EXPERT_FFN_H

#include "model/model_impl.h"

/* One run of rows through experts [0, ne) of layer l's bound weights. */
typedef struct expert_rows {
    int rows;
    int ne;
    const int32_t *off;         /* host [ne+1]: row offsets of each expert */
    fb_act *x;                  /* [rows, D] input */
    fb_act *g, *u, *act;        /* [rows, I]: written by the forward, read by the backward */
    uint8_t *mask;              /* [rows*I] expert dropout */
    /* host [rows]: each row's dropout key, model_expert_dropout_key() of the
     * token and choice it came from (NULL when expert dropout is off) */
    const uint64_t *row_key;
    /* Called between the grouped matmuls (NULL: none): the ep path drives
     * its exchanges in flight from here. */
    void (*progress)(void *ctx);
    void *progress_ctx;
} expert_rows_t;

/* r->act (and r->mask) from r->g and r->u: the SwiGLU product and its
 * expert dropout, which selective recomputation rebuilds in the backward. */
void model_expert_ffn_act(model_t *m, const expert_rows_t *r);

/* Whether expert dropout runs in this pass (training, a rate above 0). */
int model_expert_dropout_on(const model_t *m);
/* The dropout key of the expert row of choice k of token t of a
 * micro-batch whose dropout seed is `seed`, at layer l: a = t K + k. The
 * element in full-width column c draws u(EXPERT_DROPOUT_SEED, key + c), so
 * a row's mask depends on where the row came from, not on the rank or the
 * place it is computed at (ep, chunks, tp). */
uint64_t model_expert_dropout_key(uint64_t seed, int l, int64_t a);
/* host [p->R] the keys of the rows of a single-rank plan (m->drop_key_h),
 * or NULL when expert dropout is off. */
const uint64_t *model_expert_row_keys(model_t *m, int l, const moe_plan_t *p);

/* y [rows, D] (overwritten) = the experts' outputs of r->x. */
void model_expert_ffn_forward(model_t *m, int l, const expert_rows_t *r, fb_act *y);

/* dy [rows, D]: d(outputs) in, d(inputs) out. Accumulates layer l's expert
 * weight gradients; tmp [rows, D] and dg, du, dact [rows, I] are scratch. */
void model_expert_ffn_backward(model_t *m, int l, const expert_rows_t *r, fb_act *dy, fb_act *tmp, fb_act *dg,
                               fb_act *du, fb_act *dact);

#endif
