/* DeepSpeed learning-rate schedules as pure functions of the update index.
 *
 * How DeepSpeed's counter maps onto our `step`:
 *   Each scheduler (WarmupLR, WarmupDecayLR, WarmupCosineLR) keeps
 *   last_batch_iteration, starting at -1. Its constructor, with
 *   last_batch_iteration == -1, writes get_lr() into the optimizer; for a
 *   negative iteration get_lr() returns WarmupLR.min_lrs (WarmupLR and its
 *   subclass WarmupDecayLR) and [0.0] (WarmupCosineLR.get_lr). The engine
 *   (DeepSpeedEngine._take_model_step) calls optimizer.step() and only then
 *   lr_scheduler.step(), which increments last_batch_iteration and writes
 *   get_lr() for the next update; on an fp16 overflow it skips both.
 *   Hence update 0 uses the constructor's value and update k >= 1 uses
 *   get_lr() at last_batch_iteration = k - 1:
 *       schedule_lr(step = 0)     = WarmupLR: warmup_min_lr; WarmupCosineLR: 0
 *       schedule_lr(step = k > 0) = schedule_lr_at_iteration(k - 1)
 *   For WarmupLR/WarmupDecayLR the constructor's value equals the formula at
 *   iteration 0 (gamma = 0), so the first two updates share warmup_min_lr.
 *   WarmupCosineLR's first update really has lr 0 in DeepSpeed: the optimizer
 *   must still run it (Adam moments and its step count advance).
 *
 * The arithmetic follows lr_schedules.py operation by operation (same
 * association order, doubles like Python floats) so values agree to the last
 * bit wherever libm's log/cos agree with CPython's.
 */
#include "zero/schedule.h"

#include <math.h>

#include "util/error.h"

/* WarmupLR.__init__ / WarmupCosineLR.__init__: warmup_num_steps = max(2, n),
 * which keeps 1 / log(warmup_num_steps) finite for n = 0 or 1. */
static long clamped_warmup_steps(const sched_config_t *s)
{
    return s->warmup_num_steps < 2 ? 2 : s->warmup_num_steps;
}

/* The warm-up fraction in [0, 1) for iteration < warmup_num_steps
 * (WarmupLR._get_gamma's first branch, shared by get_lr_ratio). */
static double warmup_fraction(const sched_config_t *s, long it)
{
    long w = clamped_warmup_steps(s);
    if (s->warmup_type == WARMUP_LINEAR)
        return (double)it / (double)w;
    double inverse_log_warm_up = 1.0 / log((double)w);
    return inverse_log_warm_up * log((double)(it + 1));
}

/* WarmupLR._get_gamma and WarmupDecayLR._get_gamma. */
static double warmup_gamma(const sched_config_t *s, long it)
{
    long w = clamped_warmup_steps(s);
    if (it < w)
        return warmup_fraction(s, it);
    if (s->type == SCHED_WARMUP_LR)
        return 1.0;
    double remaining = (double)(s->total_num_steps - it);
    double span = (double)(s->total_num_steps - w);
    double g = remaining / (span > 1.0 ? span : 1.0);
    return g > 0.0 ? g : 0.0;
}

/* WarmupCosineLR.get_lr_ratio. Past total_num_steps the cosine rises again,
 * as in DeepSpeed (it does not clamp). */
static double cosine_ratio(const sched_config_t *s, long it)
{
    long w = clamped_warmup_steps(s);
    if (it < w) {
        double ratio = warmup_fraction(s, it);
        double ratio_delta = 1.0 - s->warmup_min_ratio;
        return s->warmup_min_ratio + ratio * ratio_delta;
    }
    long real_total_steps = s->total_num_steps - w;
    if (real_total_steps == 0)
        fb_fatal(FB_EXIT_USAGE,
                 "scheduler WarmupCosineLR: total_num_steps (%ld) must differ from warmup_num_steps (%ld) "
                 "(DeepSpeed divides by their difference)",
                 s->total_num_steps, w);
    double real_last_step = (double)(it - w + 1);
    double ratio_delta = 1.0 - s->cos_min_ratio;
    double ratio = (1.0 + cos(M_PI * real_last_step / (double)real_total_steps)) / 2.0;
    ratio = s->cos_min_ratio + ratio_delta * ratio;
    return ratio > 0.0 ? ratio : 0.0;
}

double schedule_lr_at_iteration(const sched_config_t *s, const optim_config_t *o, long iteration)
{
    FB_ASSERT(iteration >= 0);
    switch (s->type) {
    case SCHED_CONSTANT:
        return o->lr;
    case SCHED_WARMUP_LR:
    case SCHED_WARMUP_DECAY_LR: {
        double delta = s->warmup_max_lr - s->warmup_min_lr;
        return s->warmup_min_lr + delta * warmup_gamma(s, iteration);
    }
    case SCHED_WARMUP_COSINE_LR:
        return o->lr * cosine_ratio(s, iteration);
    }
    fb_fatal(FB_EXIT_INTERNAL, "schedule: unknown scheduler type %d", (int)s->type);
}

double schedule_lr(const sched_config_t *s, const optim_config_t *o, long step)
{
    FB_ASSERT(step >= 0);
    if (step > 0)
        return schedule_lr_at_iteration(s, o, step - 1);
    switch (s->type) {
    case SCHED_CONSTANT:
        return o->lr;
    case SCHED_WARMUP_LR:
    case SCHED_WARMUP_DECAY_LR:
        return s->warmup_min_lr;
    case SCHED_WARMUP_COSINE_LR:
        return 0.0;
    }
    fb_fatal(FB_EXIT_INTERNAL, "schedule: unknown scheduler type %d", (int)s->type);
}
