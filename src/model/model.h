/* The decoder of docs/model.md: parameters, activations, forward and the
 * hand-written backward, all through the op table. */
#ifndef FABULA_MODEL_MODEL_H
#define FABULA_MODEL_MODEL_H

#include <stdint.h>

#include "config/config.h"
#include "model/params.h"
#include "ops.h"

/* One packed micro-batch, in host memory (docs/model.md "Inputs"). */
typedef struct model_input {
    const int32_t *tokens, *positions, *targets, *cu_seqlens;
    int T, nseq;
} model_input_t;

/* How this micro-batch's losses enter the step's objective. */
typedef struct model_scales {
    double lm_denominator;  /* N: target tokens of the whole step (all micro-batches, all ranks) */
    double mb_weight;       /* T_mb / T_step: weight of this micro-batch's aux and z losses */
    int training;           /* expert dropout active */
    uint64_t dropout_seed;  /* distinct per (step, micro-batch) */
} model_scales_t;

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
} model_stats_t;

typedef struct model model_t;

/* max_tokens: the largest micro-batch (tokens) the activations must hold. */
model_t *model_create(const model_config_t *mc, const ops_t *ops, int max_tokens);
void model_free(model_t *m);

const param_table_t *model_params_table(const model_t *m);
const model_config_t *model_config(const model_t *m);
const ops_t *model_ops(const model_t *m);
/* Flat buffers of one group, in backend memory. */
float *model_params(model_t *m, int group);
float *model_grads(model_t *m, int group);

/* Deterministic init from a seed (docs/model.md "Initialisation"). */
void model_init_weights(model_t *m, uint64_t seed);
/* Copies a host tensor into the named parameter (validation, checkpoints). */
void model_set_param(model_t *m, const param_view_t *v, const float *host);
void model_get_param(const model_t *m, const param_view_t *v, float *host);
void model_get_grad(const model_t *m, const param_view_t *v, float *host);

void model_zero_grads(model_t *m);

/* Forward over one micro-batch; keeps the activations for model_backward and
 * leaves d(loss)/d(logits) ready. With keep_logits set, logits survive in
 * model_logits() (costs T*V more memory). */
void model_forward(model_t *m, const model_input_t *in, const model_scales_t *sc, model_stats_t *stats);
/* Accumulates the parameter gradients of the objective of model_scales_t. */
void model_backward(model_t *m);

void model_set_keep_logits(model_t *m, int keep);
const float *model_logits(const model_t *m);

/* FLOPs of one forward+backward per token (6 N_active + attention), for MFU
 * and throughput reports; avg_ctx is the mean attended length. */
double model_flops_per_token(const model_config_t *mc, double avg_ctx);
long model_active_params(const model_config_t *mc);

#endif
