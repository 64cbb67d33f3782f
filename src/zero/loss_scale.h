/* fp16 loss scaling with DeepSpeed's semantics (docs/mixed-precision.md).
 *
 * Before backward the trainer multiplies the loss by loss_scale_value(); after
 * the gradients are reduced it checks them for inf/NaN (agreed over all
 * ranks), then calls loss_scale_update() once per optimizer step. When that
 * returns 1 the step is skipped: no optimizer update, no Adam step count, no
 * lr schedule advance; otherwise the gradients are divided by the factor
 * that was used for this step (read it before the update).
 *
 * The dynamic rule is DeepSpeed's DynamicLossScaler.update_scale
 * (deepspeed/runtime/fp16/loss_scaler.py, deepspeedai/DeepSpeed master):
 *   overflow:  if hysteresis == 1 or cur_hysteresis == 1:
 *                  cur_scale = max(cur_scale / 2, min_scale)
 *              else cur_hysteresis -= 1
 *              last_overflow_iter = cur_iter
 *   clean:     if consecutive_hysteresis: cur_hysteresis = hysteresis
 *              stable = cur_iter - last_overflow_iter - 1
 *              if stable > 0 and stable % window == 0:
 *                  if not consecutive_hysteresis: cur_hysteresis = hysteresis
 *                  cur_scale *= 2
 *   both:      cur_iter += 1
 * Two deliberate differences: an overflow at min_scale keeps skipping steps
 * instead of raising (DeepSpeed's raise_error_at_min_scale=True aborts the
 * run), and a doubling that would reach +inf is not applied.
 *
 * validation/loss_scale_ref.py is the independent transcription the tests
 * compare against (tests/e2e/loss_scale.sh).
 */
#ifndef FABULA_TRAIN_LOSS_SCALE_H
#define FABULA_TRAIN_LOSS_SCALE_H

#include <stddef.h>

#include "config/config.h"

/* What a checkpoint stores; DeepSpeed's attribute names. */
typedef struct loss_scale_state {
    double cur_scale;           /* the factor of the next step */
    long cur_iter;              /* loss_scale_update calls so far: steps, skipped ones included */
    long last_overflow_iter;    /* cur_iter of the latest overflow; -1 before the first */
    int cur_hysteresis;         /* overflows left, in [1, hysteresis], before the scale drops */
} loss_scale_state_t;

typedef struct loss_scale {
    /* Settings, from fp16_config_t by loss_scale_init. */
    int enabled;                /* fp16.enabled; 0: factor 1, nothing skipped */
    int dynamic;                /* fp16.loss_scale == 0 */
    double min_scale;           /* fp16.min_loss_scale */
    long scale_window;          /* fp16.loss_scale_window (> 0) */
    int hysteresis;             /* fp16.hysteresis (>= 1): DeepSpeed's delayed_shift */
    int consecutive_hysteresis; /* fp16.consecutive_hysteresis */
    loss_scale_state_t st;
} loss_scale_t;

/* A scaler at step 0: dynamic from 2^initial_scale_power, static at
 * loss_scale, or disabled (factor 1) when fp16 is off. */
void loss_scale_init(loss_scale_t *s, const fp16_config_t *c);

/* The factor this step's loss (and so its gradients) is multiplied by. */
double loss_scale_value(const loss_scale_t *s);

/* Ends a step whose reduced gradients did (`overflow` != 0) or did not hold
 * an inf/NaN, and returns 1 when the step must be skipped. With fp16 on
 * every overflow skips, the static scaler's too (as in DeepSpeed); with fp16
 * off nothing is skipped. Only a dynamic scaler changes its factor. */
int loss_scale_update(loss_scale_t *s, int overflow);

/* Puts a checkpoint's state into a freshly initialised scaler. A dynamic
 * scaler takes all four fields; a static or disabled one takes cur_iter
 * only and keeps its configured factor. The state is only meaningful
 * between dynamic scalers: when the checkpoint's scaler was static or fp16
 * was off, do not call this and keep the fresh initial scale. A
 * cur_hysteresis above the configured hysteresis (a resume with a smaller
 * fp16.hysteresis) is lowered to it. Returns 0, or -1 with the reason in
 * why[n] for a state no scaler can be in (non-positive or non-finite scale,
 * cur_iter < 0, last_overflow_iter outside [-1, cur_iter), cur_hysteresis
 * < 1); then `s` is unchanged. */
int loss_scale_restore(loss_scale_t *s, const loss_scale_state_t *st, char *why, size_t n);

#endif
