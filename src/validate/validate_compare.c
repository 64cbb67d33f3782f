#include "validate/validate_compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

const char *validate_quantity_name(int q)
{
    FB_ASSERT(q >= 0 && q < VALIDATE_NQ);
    return q < CURVE_NREAL ? curve_real_names[q] : q == VALIDATE_Q_DROPPED ? "dropped" : "tokens_per_expert";
}

/* The backend family: cpu16 is the CPU's twin of the GPU's 16-bit path,
 * bit-comparable with itself only. */
static int same_backend(const loss_curve_t *a, const loss_curve_t *b)
{
    return !strcmp(a->backend, b->backend) && !strcmp(a->precision, b->precision);
}

/* The worst step of a real quantity: with per-step bands, the one furthest
 * out of (or least inside) its band, whose band becomes the tolerance;
 * without, the largest difference. */
static void compare_real(validate_qresult_t *r, const double *x, const double *y, long steps, const double *band,
                         double tol)
{
    double worst_ratio = -1.0;
    for (long i = 0; i < steps; i++) {
        /* both NaN: no finite value on either side (no validation pass, a
         * skipped fp16 step's gradient norm) */
        if (isnan(x[i]) && isnan(y[i]))
            continue;
        /* a NaN on one side never compares equal: the worst step at once */
        double d = isnan(x[i]) || isnan(y[i]) ? INFINITY : fabs(x[i] - y[i]);
        int differs = memcmp(&x[i], &y[i], sizeof(double)) != 0;
        double ratio = band ? (d == 0.0 ? 0.0 : band[i] > 0.0 ? d / band[i] : INFINITY) : d;
        /* without bands: a tolerance the caller applies (0: equal doubles) */
        if (r->first_out == 0 && (band ? ratio > 1.0 : differs && d > tol))
            r->first_out = i + 1;
        if (ratio > worst_ratio || (r->worst_step == 0 && differs)) {
            worst_ratio = ratio;
            r->max_diff = d;
            r->worst_step = differs ? i + 1 : 0;
            r->run_value = x[i];
            r->curve_value = y[i];
            if (band)
                r->tolerance = band[i];
        }
    }
}

/* Counts: the first step where any differs (later differences follow from
 * it), with the sum of |differences| of that step and its first differing
 * pair. */
static void compare_counts(validate_qresult_t *r, const int64_t *x, const int64_t *y, long steps, size_t per_step)
{
    for (long i = 0; i < steps && r->worst_step == 0; i++) {
        double d = 0.0;
        for (size_t k = 0; k < per_step; k++) {
            int64_t a = x[(size_t)i * per_step + k], b = y[(size_t)i * per_step + k];
            if (a != b && d == 0.0) {
                r->run_value = (double)a;
                r->curve_value = (double)b;
            }
            d += (double)llabs(a - b);
        }
        if (d > 0.0) {
            r->max_diff = d;
            r->worst_step = i + 1;
        }
    }
}

/* The first step (1-based) whose counts differ; 0 when none does. */
static long first_routing_difference(const loss_curve_t *a, const loss_curve_t *b, long steps)
{
    if (a->moe_layers != b->moe_layers || a->experts != b->experts)
        return 1;
    const size_t per = (size_t)a->moe_layers * (size_t)a->experts;
    for (long i = 0; i < steps; i++)
        if (a->dropped[i] != b->dropped[i] ||
            memcmp(a->tokens_per_expert + (size_t)i * per, b->tokens_per_expert + (size_t)i * per,
                   per * sizeof(int64_t)) != 0)
            return i + 1;
    return 0;
}

validate_result_t validate_compare(const loss_curve_t *run, long steps, const loss_curve_t *ref,
                                   const curve_bands_t *bands, const char *blas)
{
    FB_ASSERT(steps >= 1 && steps <= run->steps && steps <= ref->steps);
    validate_result_t r;
    memset(&r, 0, sizeof r);
    r.steps = r.compared = steps;
    const int same = same_backend(run, ref);
    if (same && run->world_size == ref->world_size && !strcmp(ref->blas, blas)) {
        r.exact = 1;
        r.rule = "same backend, precision, world size and BLAS: bit-exact";
    } else if (same) {
        r.rule = run->world_size != ref->world_size ? "another world size (layout): the job's bands"
                                                    : "another BLAS or BLAS kernel set: the job's bands";
        r.routing_flip = first_routing_difference(run, ref, steps);
        if (r.routing_flip > 0)
            r.compared = r.routing_flip - 1;
    } else {
        r.rule = "another backend: losses, gradient norm and validation loss within 0.1 (not measured yet)";
    }
    for (int q = 0; q < CURVE_NREAL; q++) {
        validate_qresult_t *x = &r.q[q];
        x->compared = 1;
        if (r.exact) {
            compare_real(x, run->real[q], ref->real[q], r.compared, NULL, 0.0);
            x->tolerance = 0.0;
            x->pass = x->worst_step == 0;
        } else if (same) {
            compare_real(x, run->real[q], ref->real[q], r.compared, bands->band_by_step[q], 0.0);
            x->pass = x->max_diff <= x->tolerance;
        } else {
            compare_real(x, run->real[q], ref->real[q], r.compared, NULL, VALIDATE_TOL_OTHER_BACKEND);
            x->compared = q != CURVE_LR && q != CURVE_LOSS_SCALE;
            x->tolerance = VALIDATE_TOL_OTHER_BACKEND;
            x->pass = !x->compared || x->max_diff <= x->tolerance;
        }
    }
    for (int q = VALIDATE_Q_DROPPED; q <= VALIDATE_Q_TOKENS; q++) {
        validate_qresult_t *x = &r.q[q];
        x->compared = same;
        if (!same) {
            x->pass = 1;
            continue;
        }
        if (run->moe_layers != ref->moe_layers || run->experts != ref->experts) {
            x->max_diff = INFINITY;
            x->worst_step = 1;
        } else if (q == VALIDATE_Q_DROPPED)
            compare_counts(x, run->dropped, ref->dropped, steps, 1);
        else
            compare_counts(x, run->tokens_per_expert, ref->tokens_per_expert, steps,
                           (size_t)run->moe_layers * (size_t)run->experts);
        x->pass = x->worst_step == 0 || (!r.exact && r.routing_flip > VALIDATE_MIN_SAME_ROUTING);
        if (!x->pass)
            x->first_out = x->worst_step;
    }
    r.pass = 1;
    for (int q = 0; q < VALIDATE_NQ; q++)
        r.pass &= r.q[q].pass;
    return r;
}

char *validate_blas_line(const char *text)
{
    const char *b = strstr(text, "BLAS ");
    if (!b)
        return fb_strdup("unknown");
    b += strlen("BLAS ");
    size_t n = strcspn(b, "\n");
    char *s = fb_malloc(n + 1);
    memcpy(s, b, n);
    s[n] = '\0';
    return s;
}
