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
    weights_t w, dw;

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
};

void model_forward_moe(model_t *m, int l, const float *h2, float *x_out, model_stats_t *stats);
void model_backward_moe(model_t *m, int l, float *dh2_out);

#endif
