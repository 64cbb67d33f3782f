/* The decoder of docs/model.md: parameters, activations, forward and the
 * hand-written backward, all through the op table. */
#ifndef FABULA_MODEL_MODEL_H
#define FABULA_MODEL_MODEL_H

#include <stdint.h>

#include "config/config.h"
#include "model/params.h"
#include "ops.h"
#include "parallel/comm.h"

/* One packed micro-batch, in host memory (docs/model.md "Inputs"). */
typedef struct model_input {
    const int32_t *tokens, *positions, *targets, *cu_seqlens;
    int T, nseq;
    /* Optional: a tag per sample (the genre), tags < ntags; the MoE layers
     * then count each tag's expert choices (model_stats_t.tag_expert_tokens). */
    const uint8_t *seq_tag;
    int ntags;
} model_input_t;

/* How this micro-batch's losses enter the step's objective. */
typedef struct model_scales {
    double lm_denominator;  /* N: target tokens of the whole step (all micro-batches, all ranks) */
    double mb_weight;       /* T_mb / T_step: weight of this micro-batch's aux and z losses */
    int training;           /* expert dropout active */
    uint64_t dropout_seed;  /* distinct per (step, micro-batch) */
    /* The global-batch load-balancing loss (router_aux_loss_scope
     * "global_batch"): [num_hidden_layers * E] the share of the step's
     * tokens (all micro-batches, all ranks) that chose each expert (top-K,
     * before dropping), found by a first forward pass; it replaces this
     * micro-batch's own f_e. NULL: the micro-batch's own. */
    const double *aux_freq;
    /* fp16 loss scaling: the gradients are those of loss_scale times the
     * objective (0 is taken as 1); the reported losses are not scaled. */
    double loss_scale;
} model_scales_t;

/* sc->loss_scale, with 0 meaning 1. */
static inline double model_loss_scale(const model_scales_t *sc) { return sc->loss_scale > 0 ? sc->loss_scale : 1.0; }

/* What one forward pass measured. Per-layer arrays live in the model and are
 * overwritten by the next forward. */
typedef struct model_stats {
    double lm_sum;          /* sum of token losses (nats) */
    long ntargets;
    double aux;             /* mean over MoE layers of aux_l (before the coefficient) */
    double z;               /* mean over MoE layers of z_l */
    long dropped;           /* assignments dropped by capacity, all layers */
    const long *tokens_per_expert;   /* [num_hidden_layers * E], after dropping */
    const long *dropped_per_layer;   /* [num_hidden_layers] */
    const long *routed_per_expert;   /* [num_hidden_layers * E] top-K choices, before dropping */
    const double *aux_per_layer;     /* [num_hidden_layers] aux_l (0 for dense layers) */
    const double *z_per_layer;       /* [num_hidden_layers] z_l */
    /* [ntags * num_hidden_layers * E]: top-k choices (before dropping) of the
     * tokens of samples tagged `tag` at [(tag * L + l) * E + e]; NULL
     * without tags */
    const long *tag_expert_tokens;
} model_stats_t;

typedef struct model model_t;

/* Where a block's parameters and gradients live while the forward or the
 * backward uses them (blocks: param_view_t.block). By default, the model's
 * own full buffers. ZeRO installs hooks that gather sharded parameters into
 * a workspace before a block runs and reduce its gradients as soon as the
 * block's backward is done. Acquire calls return per-group bases such that
 * the tensor of view v is base[v->group] + v->offset. */
typedef struct model_hooks {
    void *ctx;
    void (*params_acquire)(void *ctx, int block, int backward, float *base[PARAM_NGROUPS]);
    void (*params_release)(void *ctx, int block, int backward);
    /* the returned gradient range must hold this micro-batch's sum so far */
    void (*grads_acquire)(void *ctx, int block, float *base[PARAM_NGROUPS]);
    /* the block's gradients of this micro-batch are final */
    void (*grads_release)(void *ctx, int block);
    /* params_acquire's bases point at weights already in the compute dtype
     * (fb_act, passed as float *): ZeRO's gathered 16-bit copies, which the
     * model then uses as they are instead of rounding fp32 ones */
    int compute_bases;
} model_hooks_t;

enum {
    MODEL_NO_PARAM_BUFFER = 1, /* parameters live elsewhere (ZeRO-3): hooks required */
    MODEL_NO_GRAD_BUFFER = 2,  /* gradients live elsewhere (ZeRO-2/3): hooks required */
    MODEL_NO_COMPUTE_BUFFER = 4 /* no 16-bit copy of the weights: the hooks hand out compute-dtype bases */
};

/* max_tokens: the largest micro-batch (tokens) the activations must hold. */
model_t *model_create(const model_config_t *mc, const ops_t *ops, int max_tokens);
model_t *model_create_flags(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags);
/* Expert parallelism (docs/expert-parallel.md): the model holds the experts
 * of ep_rank = comm_rank(ep) (num_local_experts / comm_size(ep) per MoE
 * layer) and exchanges tokens with the other ranks of `ep` in every MoE
 * layer, forward and backward: all ranks of `ep` must run forward and
 * backward together (an empty micro-batch included). ep NULL or of size 1:
 * the single-rank model. The group must outlive the model. */
model_t *model_create_ep(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags, comm_t *ep);
/* Tensor parallelism (docs/parallel.md): the model holds tp_rank's share
 * (comm_rank(tp) of comm_size(tp)) of the attention heads, kv heads and FFN
 * columns of every layer, its experts' included, and sums the row-parallel
 * products over `tp` once per sub-block, forward and backward: all ranks of
 * `tp` run every pass together on the same micro-batch. tp NULL or of size
 * 1: model_create_ep. The group must outlive the model. model_config() is
 * the whole model's. */
model_t *model_create_tp(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags, comm_t *ep,
                         comm_t *tp);
/* Pipeline parallelism (docs/parallel.md): the stage of layers [layer_lo,
 * layer_hi) of the whole model (0 and num_hidden_layers: model_create_tp).
 * A stage without layer 0 reads its input hidden states from
 * model_stage_input() instead of embedding tokens; one without the last
 * layer leaves its output in model_stage_output() and computes no head or
 * loss, and its backward starts from d(loss)/d(output), put into
 * model_stage_grad() beforehand; after the backward of a stage without
 * layer 0, model_stage_grad() holds d(loss)/d(input). Statistics count this
 * stage's layers only (lm_sum and ntargets: the last stage's). */
model_t *model_create_pp(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags, comm_t *ep,
                         comm_t *tp, int layer_lo, int layer_hi);
/* Interleaved 1F1B (docs/parallel.md): the stage of nchunks runs of layers
 * [lo[c], hi[c]) in increasing order, one parameter table over all of them;
 * the passes run chunk model_set_chunk(m, c) (chunk 0 at creation) as the
 * stage of that chunk's layers alone (its input from model_stage_input()
 * unless it holds layer 0, its output in model_stage_output() unless it
 * holds the last layer). model_stage_layers() is that chunk's. */
model_t *model_create_chunks(const model_config_t *mc, const ops_t *ops, int max_tokens, unsigned flags,
                             comm_t *ep, comm_t *tp, int nchunks, const int *lo, const int *hi);
void model_set_chunk(model_t *m, int c);
int model_chunks(const model_t *m);
/* Another model over the same stage, parameters and gradients (with m's
 * hooks: ZeRO's, or m's own buffers), with activations of its own: the
 * pipeline keeps one per micro-batch in flight. Free it before m. */
model_t *model_create_sibling(model_t *m);
void model_stage_layers(const model_t *m, int *layer_lo, int *layer_hi);
/* Backend buffers of [max_tokens, hidden_size] compute-dtype elements;
 * model_stage_bytes(m, T) the bytes of T rows of them. */
fb_act *model_stage_input(model_t *m);
fb_act *model_stage_output(model_t *m);
fb_act *model_stage_grad(model_t *m);
size_t model_stage_bytes(const model_t *m, int T);
/* The same tp group for host buffers (the vocabulary-parallel
 * cross-entropy's row statistics) when the `tp` given at creation carries
 * device buffers; by default that `tp` carries both. */
void model_set_tp_host_comm(model_t *m, comm_t *tp_host);
/* Splits each MoE layer's token exchange into `chunks` pieces so that the
 * all-to-all of one overlaps the expert compute of another (default 1; the
 * same on every rank of the ep group). No effect without expert parallelism. */
void model_set_a2a_chunks(model_t *m, int chunks);
/* The same ep group for host buffers (the per-expert row counts each MoE
 * layer exchanges first) when the `ep` given at creation carries device
 * buffers (comm_device_create); by default that `ep` carries both. */
void model_set_ep_host_comm(model_t *m, comm_t *ep_host);
/* NULL restores the default (the model's own buffers). */
void model_set_hooks(model_t *m, const model_hooks_t *hooks);
/* Bytes of activations and scratch the model holds (for memory reports). */
size_t model_activation_bytes(const model_t *m);
void model_free(model_t *m);

const param_table_t *model_params_table(const model_t *m);
const model_config_t *model_config(const model_t *m);
const ops_t *model_ops(const model_t *m);
/* Flat buffers of one group, in backend memory (NULL when created without). */
float *model_params(model_t *m, int group);
/* The whole compute-dtype copy of group `group`'s weights on a 16-bit
 * backend (NULL in fp32 or with MODEL_NO_COMPUTE_BUFFER): ZeRO 1/2 in mixed
 * precision keep the weights there and gather each owner's rounded update
 * into it. */
fb_act *model_compute_weights(model_t *m, int group);
float *model_grads(model_t *m, int group);

/* Deterministic init from a seed (docs/model.md "Initialisation"). */
void model_init_weights(model_t *m, uint64_t seed);
/* The initial values of one view, on the host (what model_init_weights
 * writes): lets a sharded owner initialise just its slice. */
void model_init_view(const model_t *m, const param_view_t *v, uint64_t seed, float *host);
/* Copies a host tensor into the named parameter (validation, checkpoints). */
void model_set_param(model_t *m, const param_view_t *v, const float *host);
void model_get_param(const model_t *m, const param_view_t *v, float *host);
void model_get_grad(const model_t *m, const param_view_t *v, float *host);

void model_zero_grads(model_t *m);

/* Forward over one micro-batch; keeps the activations for model_backward and
 * leaves d(loss)/d(logits) ready. With keep_logits set, logits survive in
 * model_get_logits() (costs T*V more memory). */
void model_forward(model_t *m, const model_input_t *in, const model_scales_t *sc, model_stats_t *stats);
/* Accumulates the parameter gradients of the objective of model_scales_t. */
void model_backward(model_t *m);

void model_set_keep_logits(model_t *m, int keep);
/* The kept logits of the last forward, widened to fp32: [T, vocab] on the host. */
void model_get_logits(const model_t *m, float *host);

/* The reported loss of docs/model.md "Losses": lm + aux_coef * aux +
 * z_coef * z (lm already divided by the step's target tokens; aux and z the
 * token-weighted means before their coefficients). */
double model_loss_total(const model_config_t *mc, double lm, double aux, double z);

/* Matmul weights one token passes through: attention, the dense FFN or the
 * router and top-k experts, the LM head (not the embedding lookup). */
long model_active_params(const model_config_t *mc);
/* RMSNorm weights: two per layer and the final norm. */
long model_norm_params(const model_config_t *mc);
/* FLOPs of one forward+backward per token: 6 per active weight (forward 2,
 * backward 4) plus 12 L d per attended position. ctx is the attended length:
 * its mean (half the sample) for the loader's causal cost model, the full
 * sequence for bench/README.md's MFU convention, which also counts the
 * RMSNorm weights (count_norms). */
double model_flops_per_token(const model_config_t *mc, double ctx, int count_norms);
/* Model FLOPs of forward + backward over a packed micro-batch of `tokens`
 * tokens whose samples' lengths squared sum to `sum_len_sq`: the
 * convention above with every sample's full len x len attention square
 * (bench/README.md, "FLOP convention"), so packing counts Σ len², not T². */
double model_flops_packed(const model_config_t *mc, double tokens, double sum_len_sq);
/* The part of model_flops_per_token the experts' top-k assignments make
 * (6 x k x 3 D I per MoE layer): what capacity drops take away, a dropped
 * assignment being neither computed forward nor backward. */
double model_expert_flops_per_token(const model_config_t *mc);
/* Top-k expert assignments of one token over all MoE layers (0: dense). */
long model_assignments_per_token(const model_config_t *mc);
/* c of the loader's sample cost len + c len^2 (data.attention_cost "auto"):
 * from the FLOPs above, a causal sample of length len costs
 * 6 N_active len + 6 L d len^2, proportional to len + (L d / N_active) len^2. */
double model_attention_cost(const model_config_t *mc);

#endif
