/* Private to src/model: the model's buffers and per-layer views. */
#ifndef FABULA_MODEL_MODEL_IMPL_H
#define FABULA_MODEL_MODEL_IMPL_H

#include "model/model.h"
#include "model/moe_plan.h"

/* Pointers into a group buffer (parameters, or gradients: same layout). */
typedef struct layer_weights {
    float *ln1, *wq, *wk, *wv, *wo, *ln2;
    float *w_gate, *w_up, *w_down;  /* dense FFN */
    float *router;                  /* MoE: [E, D] */
    float *w1, *w3, *w2;            /* MoE: [E, I, D], [E, I, D], [E, D, I] */
} layer_weights_t;

typedef struct weights {
    float *embed, *norm, *head;     /* head == embed when tied */
    layer_weights_t *layers;
} weights_t;

/* The views behind each pointer of layer_weights_t / weights_t, found once
 * by name; binding a block is then base[group] + offset. */
typedef struct layer_views {
    const param_view_t *ln1, *wq, *wk, *wv, *wo, *ln2;
    const param_view_t *w_gate, *w_up, *w_down, *router, *w1, *w3, *w2;
} layer_views_t;

/* Activations of one layer kept for the backward. */
typedef struct layer_acts {
    float *x_in;                    /* [T, D] residual stream entering the layer */
    float *h1, *rstd1;              /* normed input of attention */
    float *q, *k, *v, *att, *lse;   /* q/k after RoPE; att [T, H*hd]; lse [T*H] */
    float *x_mid;                   /* [T, D] after the attention residual */
    float *h2, *rstd2;              /* normed input of the FFN */
    float *g, *u, *act;             /* FFN: [rows, I]; rows = T (dense) or R (MoE) */
    /* MoE only */
    float *rlogits, *probs, *rlse, *topk_w;   /* [T,E], [T,E], [T], [T,K] */
    float *aux_dprob;                           /* [E] load-balancing gradient per prob */
    int32_t *topk_idx;                          /* [T,K] */
    float *xp, *eo;                             /* [R, D] permuted input, expert outputs */
    uint8_t *mask;                              /* [R*I] expert dropout */
    moe_plan_t plan;
} layer_acts_t;

struct model {
    model_config_t mc;
    const ops_t *ops;
    param_table_t table;
    float *params[PARAM_NGROUPS], *grads[PARAM_NGROUPS];
    weights_t w, dw;                /* bound for the block being computed */
    const param_view_t *v_embed, *v_norm, *v_head;
    layer_views_t *lv;
    model_hooks_t hooks;
    size_t alloc_bytes;             /* activations and scratch */

    int max_tokens, hd, qdim, kvdim, nmoe;
    /* batch inputs in backend memory */
    int32_t *tokens, *positions, *targets, *cu_seqlens;
    int T, nseq;
    model_scales_t sc;

    layer_acts_t *acts;
    float *x_final, *hf, *rstdf, *logits, *dlogits, *token_loss;
    int keep_logits;

    /* backward scratch */
    float *dx, *dh, *dq, *dk, *dv, *datt, *dg, *du, *dact, *dxp, *dtmp, *drl, *dtw;

    /* host scratch and statistics */
    float *host_probs, *host_rlse, *host_loss;
    int32_t *host_topk;
    long *tokens_per_expert, *dropped_per_layer;
    double *aux_per_layer, *z_per_layer;
    /* this forward's sample tags (host, from model_input_t) and their counts */
    const uint8_t *in_tag;
    const int32_t *in_cu;
    int ntags, tag_cap;
    long *tag_expert_tokens;

    /* expert parallelism (moe_ep.c); ep_size 1: every expert is local */
    comm_t *ep;
    int ep_size, ep_rank, a2a_chunks;
    struct moe_ep *epx;
};

/* Hook wrappers: acquire a block's parameters (or gradients) and bind the
 * pointers of w (or dw) that belong to it. */
void model_params_acquire(model_t *m, int block, int backward);
void model_params_release(model_t *m, int block, int backward);
void model_grads_acquire(model_t *m, int block);
void model_grads_release(model_t *m, int block);
void model_visit_blocks_forward(model_t *m);

void model_forward_moe(model_t *m, int l, const float *h2, float *x_out, model_stats_t *stats);
void model_backward_moe(model_t *m, int l, float *dh2_out);

/* Per-layer MoE statistics (moe_stats.c): reset at the start of a forward
 * (pointing stats at the model's arrays), and the tag counts of layer l from
 * the host copy of its top-k choices. */
void model_moe_stats_begin(model_t *m, const model_input_t *in, model_stats_t *stats);
void model_moe_count_tags(model_t *m, int l);

/* The expert side of an MoE layer across the ep group (moe_ep.c).
 * Forward: sends this rank's permuted rows a->xp (expert-sorted; `offsets`
 * [E+1] the plan's, NULL when this rank has no tokens), runs the local
 * experts on what arrives, and leaves the expert outputs of this rank's rows
 * in a->eo. Backward: sends d(expert outputs) m->dxp, accumulates the local
 * experts' weight gradients, and leaves d(expert inputs) in m->dtmp. */
void moe_ep_create(model_t *m);
void moe_ep_free(model_t *m);
void moe_ep_forward(model_t *m, int l, const int32_t *offsets);
void moe_ep_backward(model_t *m, int l);
/* What a rank without tokens does in MoE layer l so that the exchanges of
 * the ep group line up (no-ops without expert parallelism). */
void model_moe_idle_forward(model_t *m, int l);
void model_moe_idle_backward(model_t *m, int l);

#endif
