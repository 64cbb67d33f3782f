/* fp16 loss scaler: DeepSpeed's DynamicLossScaler.update_scale and static
 * LossScaler (see loss_scale.h for the rule and the two departures). */
#include "zero/loss_scale.h"

#include <math.h>
#include <stdio.h>

#include "util/test_defect.h"

void loss_scale_init(loss_scale_t *s, const fp16_config_t *c)
{
    s->enabled = c->enabled != 0;
    s->dynamic = s->enabled && c->loss_scale == 0.0;
    s->min_scale = c->min_loss_scale;
    s->scale_window = c->loss_scale_window;
    s->hysteresis = c->hysteresis;
    s->consecutive_hysteresis = c->consecutive_hysteresis;
    if (!s->enabled)
        s->st.cur_scale = 1.0;
    else if (s->dynamic)
        s->st.cur_scale = ldexp(1.0, c->initial_scale_power);
    else
        s->st.cur_scale = c->loss_scale;
    s->st.cur_iter = 0;
    s->st.last_overflow_iter = -1;
    s->st.cur_hysteresis = c->hysteresis;
}

double loss_scale_value(const loss_scale_t *s)
{
    return s->enabled ? s->st.cur_scale : 1.0;
}

static void dynamic_update(loss_scale_t *s, int overflow)
{
    loss_scale_state_t *st = &s->st;
    if (overflow) {
        /* At min_scale DeepSpeed (raise_error_at_min_scale=True) aborts; here
         * the scale stays at the floor and steps keep being skipped, so a
         * transient burst of overflows does not end a long run. */
        if (s->hysteresis == 1 || st->cur_hysteresis == 1)
            st->cur_scale = fmax(st->cur_scale / 2.0, s->min_scale);
        else
            st->cur_hysteresis--;
        st->last_overflow_iter = st->cur_iter;
        return;
    }
    if (s->consecutive_hysteresis)
        st->cur_hysteresis = s->hysteresis;
    /* Clean steps before this one since the last overflow (or the start). */
    long stable = st->cur_iter - st->last_overflow_iter - 1;
    long window = s->scale_window;
    /* test-only defect (docs/testing.md "Injected defects") */
    if (window > 1 && fb_test_defect("loss_scale_rule"))
        window--; /* grows after window - 1 clean steps */
    if (stable > 0 && stable % window == 0) {
        if (!s->consecutive_hysteresis)
            st->cur_hysteresis = s->hysteresis;
        /* An infinite scale would turn every gradient into inf/NaN and then
         * never come down (inf / 2 = inf): stay at the largest finite one. */
        double up = st->cur_scale * 2.0;
        if (isfinite(up))
            st->cur_scale = up;
    }
}

int loss_scale_update(loss_scale_t *s, int overflow)
{
    overflow = overflow != 0;
    if (s->dynamic)
        dynamic_update(s, overflow);
    s->st.cur_iter++;
    return s->enabled && overflow;
}

int loss_scale_restore(loss_scale_t *s, const loss_scale_state_t *st, char *why, size_t n)
{
    if (!(isfinite(st->cur_scale) && st->cur_scale > 0.0)) {
        snprintf(why, n, "loss scale %g is not a positive finite number", st->cur_scale);
        return -1;
    }
    if (st->cur_iter < 0 || st->last_overflow_iter < -1 || st->last_overflow_iter >= st->cur_iter) {
        snprintf(why, n, "iteration counters cur_iter=%ld last_overflow_iter=%ld are inconsistent (need -1 <= "
                 "last_overflow_iter < cur_iter)", st->cur_iter, st->last_overflow_iter);
        return -1;
    }
    if (st->cur_hysteresis < 1) {
        snprintf(why, n, "hysteresis counter %d is below 1", st->cur_hysteresis);
        return -1;
    }
    s->st.cur_iter = st->cur_iter;
    if (!s->dynamic)
        return 0;
    s->st.cur_scale = st->cur_scale;
    s->st.last_overflow_iter = st->last_overflow_iter;
    s->st.cur_hysteresis = st->cur_hysteresis < s->hysteresis ? st->cur_hysteresis : s->hysteresis;
    return 0;
}
