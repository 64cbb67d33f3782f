/* ZeRO: where parameters, gradients and optimizer state live across the
 * data-parallel ranks, and the collectives that keep them consistent.
 *
 *   stage 0  everything replicated; gradients allreduced
 *   stage 1  optimizer state sharded; gradients reduce-scattered to their
 *            owner, updated parameters all-gathered
 *   stage 2  gradients sharded too: each block's gradients are reduced as
 *            soon as its backward is done, into the owner's shard, from a
 *            small workspace that is then reused
 *   stage 3  parameters sharded too: each block is all-gathered into a
 *            workspace before it runs (the next one prefetched) and dropped
 *            after
 *
 * In mixed precision (bf16/fp16 compute, stage >= 1) the fp32 master is a
 * shard like the moments, the model computes from a 16-bit copy (whole at
 * stages 1-2, a shard gathered per block at 3) that the engine rounds from
 * the master after each update, and offload moves the master, the moments,
 * the fp32 gradient shard and (stage 3) the 16-bit shard to the host, as
 * DeepSpeed places them (zero_placement_of). In fp32 the master is the
 * compute copy.
 *
 * Dense parameters are sharded over the `dp` group, expert parameters over
 * `edp`. The engine plugs into the model through model_hooks_t, so the model
 * code is the same for every stage. The CPU and GPU backends share this
 * code: only the op table differs. docs/zero.md has the details. */
#ifndef FABULA_TRAIN_ZERO_H
#define FABULA_TRAIN_ZERO_H

#include "config/config.h"
#include "model/model.h"
#include "parallel/comm.h"
#include "parallel/groups.h"
#include "zero/loss_scale.h"
#include "zero/zero_memory.h"

typedef struct zero zero_t;


/* Creates the model (with the buffers the stage keeps), and initialises the
 * parameters from `seed`. */
zero_t *zero_create(const config_t *cfg, const groups_t *groups, const ops_t *ops, int max_tokens, uint64_t seed);
/* Where initial parameters come from instead of the seed (model.init_from):
 * read() fills dst[0, hi - lo) with elements [lo, hi) of view v. Each rank
 * asks only for what it holds: whole views of its own table (its experts
 * only, with expert parallelism) at stages 0-2, the part of each view
 * inside its shard at stage 3. It ends the job itself on bad input. */
typedef struct zero_init_source {
    void *ctx;
    void (*read)(void *ctx, const param_view_t *v, size_t lo, size_t hi, float *dst);
} zero_init_source_t;
/* zero_create with the parameters from `src` (NULL: from `seed`). */
zero_t *zero_create_from(const config_t *cfg, const groups_t *groups, const ops_t *ops, int max_tokens,
                         uint64_t seed, const zero_init_source_t *src);
void zero_free(zero_t *z);
model_t *zero_model(zero_t *z);

/* Call once per optimizer step, then zero_begin_micro before each
 * micro-batch's forward. */
void zero_begin_step(zero_t *z);
void zero_begin_micro(zero_t *z, int micro, int nmicro);
/* After the last micro-batch's backward: every reduction complete. */
void zero_end_backward(zero_t *z);

/* The fp16 loss scaler of the run (fp16.*; factor 1 and never skipping
 * with fp16 off): each micro-batch's loss is multiplied by
 * loss_scale_value() (model_scales_t.loss_scale); checkpoints save and
 * restore it. zero_step advances it. */
loss_scale_t *zero_loss_scaler(zero_t *z);

typedef enum {
    ZERO_STEP_APPLIED = 0,  /* the parameters were updated */
    ZERO_STEP_SKIPPED,      /* fp16 overflow: nothing but the scaler changed */
    ZERO_STEP_DIVERGED      /* non-finite loss or gradient norm: nothing changed */
} zero_step_status_t;

typedef struct zero_step_report {
    zero_step_status_t status;
    double grad_norm;       /* global L2 norm of the unscaled gradient */
    double loss_scale;      /* the factor this step's gradients carried */
} zero_step_report_t;

/* One optimizer step, after zero_end_backward (collective; the norm is
 * agreed over all ranks, so every rank takes the same branch):
 *   1. the global norm of the reduced gradient, which carries the loss scale;
 *   2. fp16 on: an inf/NaN norm is an overflow, and loss_scale_update
 *      decides whether the step is skipped (DeepSpeed: no update, no Adam
 *      step count, so no schedule advance either);
 *   3. a non-finite `loss` (the step's objective, only tested here) or
 *      unscaled norm is a divergence: no update;
 *   4. unscaling and clipping as one pass over the gradient: clipping by
 *      cfg->gradient_clipping / (norm + 1e-6) when that is below 1 (the rule
 *      of torch.nn.utils.clip_grad_norm_ and DeepSpeed), on the unscaled norm;
 *   5. AdamW at `lr` on this rank's shard, then whatever gathering the stage
 *      needs. */
zero_step_report_t zero_step(zero_t *z, double lr, double loss);

zero_memory_t zero_memory(const zero_t *z);

/* This rank's state of reduction group `group` (PARAM_GROUP_*), for
 * checkpoints. The optimizer updates elements [lo, hi) of the group's flat
 * buffer (stage 0: all of it); [write_lo, write_hi) is this rank's part of a
 * partition of the buffer among the group's ranks (the ZeRO shard, at every
 * stage), so that writing it from every rank covers each element once.
 * params points at element lo (backend memory, or host when params_host),
 * m and v at element lo (host when moments_host). grads at element lo
 * (backend memory): the reduced gradient of [lo, hi), valid from
 * zero_end_backward to the next zero_begin_step, unscaled and clipped once
 * zero_step has applied the step. */
typedef struct zero_shard {
    size_t numel, lo, hi, write_lo, write_hi;
    float *params, *m, *v, *grads;
    int params_host, moments_host, grads_host;
} zero_shard_t;
zero_shard_t zero_shard(zero_t *z, int group);
/* Optimizer updates applied so far (Adam's bias correction uses it). */
long zero_step_count(const zero_t *z);
void zero_set_step_count(zero_t *z, long step);
/* After a checkpoint load has set every rank's [lo, hi) parameters:
 * rebuilds the copies the stage keeps (the 16-bit weights in mixed
 * precision; the stage 1/2 all-gather). */
void zero_sync_params(zero_t *z);

/* The full value of a parameter on every rank (collective): checkpoints,
 * validation and tests read parameters through this. */
void zero_get_param(zero_t *z, const param_view_t *v, float *host);

#endif
