/* Private to src/model: the model's buffers and per-layer views. */
#ifndef FABULA_MODEL_MODEL_IMPL_H
#define FABULA_MODEL_MODEL_IMPL_H

#include "model/model.h"
#include "model/moe_plan.h"

/* A layer's tensors: the compute copy of its weights (fb_act, in the
 * backend's compute dtype) or its fp32 gradients; both bound per block. */
#define LAYER_TENSORS(type)                                                    \
    type *ln1, *wq, *wk, *wv, *wo, *ln2;                                       \
    type *w_gate, *w_up, *w_down; /* dense FFN */                              \
    type *router;                 /* MoE: [E, D] */                            \
    type *w1, *w3, *w2;           /* MoE: [E, I, D], [E, I, D], [E, D, I] */

#define MODEL_MAX_CHUNKS PARALLEL_MAX_STAGES
/* every layer this stage holds, over all its chunks */
#define FOR_STAGE_LAYERS(m, l)                                                                                 \
    for (int c_ = 0; c_ < (m)->nchunks; c_++)                                                                  \
        for (int l = (m)->chunk_lo[c_]; l < (m)->chunk_hi[c_]; l++)

typedef struct layer_weights {
    LAYER_TENSORS(fb_act)
} layer_weights_t;

typedef struct layer_grads {
    LAYER_TENSORS(float)
} layer_grads_t;

typedef struct weights {
    fb_act *embed, *norm, *head;    /* head == embed when tied */
    layer_weights_t *layers;
} weights_t;

typedef struct grads {
    float *embed, *norm, *head;
    layer_grads_t *layers;
} grads_t;

/* The views behind each pointer of layer_weights_t / weights_t, found once
 * by name; binding a block is then base[group] + offset. */
typedef struct layer_views {
    const param_view_t *ln1, *wq, *wk, *wv, *wo, *ln2;
    const param_view_t *w_gate, *w_up, *w_down, *router, *w1, *w3, *w2;
} layer_views_t;

/* Activations of one layer for the backward: fb_act in the compute dtype,
 * fp32 for per-row statistics and the router. What model.recompute does not
 * keep points into one set all layers share (model.c, carve_buffers). */
typedef struct layer_acts {
    fb_act *x_in;                   /* [T, D] residual stream entering the layer */
    fb_act *h1;                     /* normed input of attention */
    float *rstd1;
    fb_act *q, *k, *v, *att;        /* q/k after RoPE; att [T, H*hd] */
    float *lse;                     /* [T*H] */
    fb_act *x_mid;                  /* [T, D] after the attention residual */
    fb_act *h2;                     /* normed input of the FFN */
    float *rstd2;
    fb_act *g, *u, *act;            /* FFN: [rows, I]; rows = T (dense) or R (MoE) */
    /* MoE only */
    float *rlogits, *probs, *rlse, *topk_w;   /* [T,E], [T,E], [T], [T,K] */
    float *aux_dprob;                           /* [E] load-balancing gradient per prob */
    int32_t *topk_idx;                          /* [T,K] */
    fb_act *xp, *eo;                            /* [R, D] permuted input, expert outputs */
    uint8_t *mask;                              /* [R*I] expert dropout */
    moe_plan_t plan;
} layer_acts_t;

struct model {
    model_config_t mc;
    const ops_t *ops;
    param_table_t table;
    float *params[PARAM_NGROUPS], *grads[PARAM_NGROUPS];
    /* The compute copy of the parameters when the compute dtype is not
     * fp32 (NULL on the CPU, where the fp32 parameters are used as they
     * are): each block's range is rounded into it as the block is acquired. */
    fb_act *wc[PARAM_NGROUPS];
    int wc_owned;                   /* a sibling shares its parent's */
    weights_t w;                    /* bound for the block being computed */
    grads_t dw;
    const param_view_t *v_embed, *v_norm, *v_head;
    layer_views_t *lv;
    model_hooks_t hooks;
    size_t alloc_bytes;             /* activations and scratch, the arena's and moe_ep's */
    char *arena;                    /* backend memory holding every buffer of carve_buffers() */
    size_t arena_bytes, arena_used;

    int max_tokens, hd, qdim, kvdim, nmoe;
    /* batch inputs in backend memory */
    int32_t *tokens, *positions, *targets, *cu_seqlens;
    int T, nseq;
    model_scales_t sc;

    layer_acts_t *acts;
    fb_act *x_final, *hf, *logits, *dlogits;
    float *rstdf, *token_loss;
    int keep_logits;

    /* backward scratch */
    fb_act *dx, *dh, *dq, *dk, *dv, *datt, *dg, *du, *dact, *dxp, *dtmp, *drl;
    float *dtw;

    /* host scratch and statistics */
    float *host_probs, *host_rlse, *host_loss;
    int32_t *host_topk;
    long *tokens_per_expert, *routed_per_expert, *dropped_per_layer;
    double *aux_per_layer, *z_per_layer;
    /* this forward's sample tags (host, from model_input_t) and their counts */
    const uint8_t *in_tag;
    const int32_t *in_cu;
    int ntags, tag_cap;
    long *tag_expert_tokens;

    /* expert dropout keyed by each row's origin (expert_ffn.c): a
     * single-rank layer's row keys (host), and the per-row offsets handed
     * to the op (host staging, backend copy); grown when a layer first has
     * more rows, allocated only once expert dropout runs */
    uint64_t *drop_key_h, *drop_off_h, *drop_off;
    size_t drop_cap;

    /* expert parallelism (moe_ep.c); ep_size 1: every expert is local */
    comm_t *ep;                     /* the rows (backend buffers) */
    comm_t *ep_host;                /* the counts (host buffers) */
    int ep_size, ep_rank, a2a_chunks;
    struct moe_ep *epx;

    /* tensor parallelism (tp.c, docs/parallel.md); tp_size 1: none. mc then
     * holds this rank's share of the heads, kv heads (1, a replicated one,
     * when there are fewer than tp) and intermediate_size;
     * full the model's own config (model_config()) */
    comm_t *tp, *tp_host;           /* tp_host: the same group for host buffers */
    int tp_size, tp_rank;
    /* kv heads below tp (replicated k/v, docs/parallel.md): the tp / kv
     * ranks sharing this rank's kv head, on which d(k) and d(v) are summed
     * (kv for backend buffers, kv_host its host twin); NULL otherwise.
     * kv_owned: this model split them (a sibling borrows its parent's). */
    comm_t *kv, *kv_host;
    int kv_owned;
    model_config_t full;

    /* pipeline parallelism (docs/parallel.md): this stage's layers [layer_lo,
     * layer_hi); first: it holds the embedding, last: the final norm, the
     * head and the loss. Layer numbers stay the whole model's. */
    int layer_lo, layer_hi, first, last;
    /* interleaved 1F1B: the stage's chunks [chunk_lo[c], chunk_hi[c]), in
     * increasing order; layer_lo .. last above are those of the chunk the
     * passes run (model_set_chunk), has_embed and has_head the whole
     * stage's (layer 0, the last layer). One chunk without interleaving. */
    int nchunks, chunk_lo[MODEL_MAX_CHUNKS], chunk_hi[MODEL_MAX_CHUNKS], has_embed, has_head;
    /* the vocabulary-parallel embedding: this micro-batch's tokens that fall
     * in this rank's rows (backend and host copies, [max_tokens] each) */
    int32_t *tp_ids, *tp_row_token, *tp_token_rows;
    int32_t *tp_hids, *tp_hrow_token, *tp_htoken_rows;
    int tp_nrows;
    float *tp_hlogits;              /* host [max_tokens, vocab / tp] */
    double *tp_hred;                /* host [3 max_tokens] */
    float *tp_wide;                 /* host [max_tokens, hidden]: 16-bit tp sums on the host, in fp32 (tp.c) */

    /* sequence parallelism (tp.c; sp needs tp_size > 1): the residual
     * stream, the norms' inputs and outputs and the stage boundaries hold
     * this rank's token shard (model_sp_rows rows from model_sp_off);
     * spg [max_tokens, D] the gathered full rows, sps [shard, D] the
     * reduce-scattered ones, sp_dnorm [D] one norm weight's gradient part */
    int sp;
    fb_act *spg, *sps;
    float *sp_dnorm;
    size_t *sp_counts, *sp_displs;  /* [tp_size] host, per call */
};

/* Hook wrappers: acquire a block's parameters (or gradients) and bind the
 * pointers of w (or dw) that belong to it. */
void model_params_acquire(model_t *m, int block, int backward);
void model_params_release(model_t *m, int block, int backward);
void model_grads_acquire(model_t *m, int block);
void model_grads_release(model_t *m, int block);
/* The hook calls around block `block` (0 embedding, 1+l layer l, L+1 the
 * final norm and head) in the forward (backward 0) or the backward
 * (blocks.c). Between them the block's pointers of w (and dw) are bound. */
void model_block_begin(model_t *m, int block, int backward);
void model_block_end(model_t *m, int block, int backward);

/* Sums x [n] over the tp group in place (no-op without tp); the _f32 one
 * for fp32 buffers. */
void model_tp_allreduce(model_t *m, fb_act *x, size_t n);
void model_tp_allreduce_f32(model_t *m, float *x, size_t n);
/* model_create_pp's internal flag: borrow the kv group (a sibling) instead
 * of splitting one. */
#define MODEL_NO_KV_GROUP (1u << 16)

/* Sums x [n] over the ranks sharing this rank's kv head in place (no-op
 * unless the kv heads are fewer than the tp ranks). */
void model_kv_allreduce(model_t *m, fb_act *x, size_t n);
/* y[M,N] += (a[M,K] w[N,K]^T) summed over the tp group: a row-parallel
 * projection (o, down) whose K columns are split over the tp ranks. Uses
 * m->dtmp as scratch under tp. */
void model_tp_row_matmul_add(model_t *m, fb_act *y, const fb_act *a, const fb_act *w, int M, int N, int K);

/* Sequence parallelism (docs/parallel.md). Rows and first row of this
 * rank's token shard of the current micro-batch (T and 0 without sp). */
int model_sp_rows(const model_t *m);
int model_sp_rows_of(const model_t *m, int T);
int model_sp_off(const model_t *m);
/* The full [T, D] rows from every rank's shard, in m->spg (all-gather
 * before a tensor-parallel region); without sp, `shard` itself. */
fb_act *model_sp_gather(model_t *m, const fb_act *shard);
void model_sp_gather_to(model_t *m, const fb_act *shard, fb_act *full);
/* The tp sum of partial [T, D] rows, this rank's shard of it in `shard`. */
void model_sp_reduce_scatter(model_t *m, const fb_act *partial, fb_act *shard);
/* y += the tp sum of partial [T, D] (the end of a tensor-parallel region
 * in the forward): an all-reduce into the full y, or under sp a
 * reduce-scatter into the shard y. `partial` is clobbered. */
void model_tp_reduce_add(model_t *m, fb_act *y, fb_act *partial);
/* The tp sum of a region's partial input gradient [T, D]: in place
 * (all-reduce), or under sp this rank's shard of it in m->sps. */
fb_act *model_tp_reduce_input_grad(model_t *m, fb_act *partial);
/* m->dx += d(rmsnorm input) over this rank's rows, and the weight's
 * gradient into dw (under sp summed over the tp group first). */
void model_rmsnorm_bwd(model_t *m, float *dw, const fb_act *dout, const fb_act *x, const fb_act *w,
                       const float *rstd);

/* The embedding lookup (vocabulary-parallel under tp: masked lookup and a
 * tp sum) and its gradient; the cross-entropy of the logits into
 * m->host_loss and m->dlogits (vocabulary-parallel under tp). */
void model_embedding_fwd(model_t *m, const model_input_t *in);
void model_embedding_bwd(model_t *m);
void model_cross_entropy(model_t *m, const int32_t *host_targets, float grad_scale);

void model_forward_moe(model_t *m, int l, const fb_act *h2, fb_act *x_out, model_stats_t *stats);
fb_act *model_backward_moe(model_t *m, int l, const fb_act *dy, fb_act *dh2_out);
/* Before layer l's backward, the activations model.recompute did not keep
 * (forward.c): the whole layer again from its input ("full"; statistics
 * are not counted twice), or the attention core and the SwiGLU products
 * ("selective"; moe.c rebuilds the experts' without expert parallelism,
 * whose buffers keep them). */
void model_recompute_layer(model_t *m, int l);
void model_recompute_moe_act(model_t *m, int l);

/* fb_act helpers: element i of p, and the bytes of n elements. */
#define ACT(m, p, i) fb_act_at((m)->ops, (p), (size_t)(i))
#define ACT_BYTES(m, n) ((size_t)(n) * (m)->ops->act_bytes)
/* The comm dtype of fb_act elements (for the expert all-to-all). */
comm_dtype_t model_act_comm_dtype(const model_t *m);

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
