/* The CPU kernels' exp (kernels/cpu/vec_exp.h) and row sums
 * (kernels/cpu/row_exp.h): against glibc's expf (within 1 ulp) and exp in
 * double (within 8.2e-8 relative) over the normal range, sampled every
 * 257th float; its values outside that range; a vectorised loop and
 * one-at-a-time calls give the same bits; the row sums equal the
 * documented lane order computed here and exp's sum in double. */
#define FB_REAL_BITS 32
#include "cpu/real.h"
#include "cpu/row_exp.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* one call per element, never vectorised: the function is reached
 * through a volatile pointer */
__attribute__((noinline)) static float exp_one(float x) { return fb_expf(x); }
static float (*volatile exp_call)(float) = exp_one;

__attribute__((noinline)) static void exp_loop(float *restrict y, const float *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = fb_expf(x[i]);
}

static int64_t ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return llabs((int64_t)ia - (int64_t)ib);
}

static void test_accuracy(void)
{
    const float lo = -87.3365478515625f, hi = 88.3762626647949219f;
    int64_t worst_ulp = 0;
    double worst_rel = 0;
    float at_ulp = 0, at_rel = 0;
    long n = 0;
    /* the bit patterns of [0, hi] and of [lo, -0], every STEP-th */
    enum { STEP = 257 };
    const uint32_t ranges[2][2] = {{0, fb_f32_bits(hi)}, {0x80000000u, fb_f32_bits(lo)}};
    for (int r = 0; r < 2; r++)
        for (uint64_t b = ranges[r][0]; b <= ranges[r][1]; b += STEP) {
            const float x = fb_f32_from_bits((uint32_t)b);
            const float y = fb_expf(x);
            const int64_t u = ulps(y, expf(x));
            const double e = exp((double)x), rel = fabs((double)y - e) / e;
            if (u > worst_ulp)
                worst_ulp = u, at_ulp = x;
            if (rel > worst_rel)
                worst_rel = rel, at_rel = x;
            n++;
        }
    printf("exp: %ld points in [%g, %g]: worst %lld ulp from expf (at %g), %.3g relative from exp (at %g)\n", n,
           (double)lo, (double)hi, (long long)worst_ulp, (double)at_ulp, worst_rel, (double)at_rel);
    EXPECT(worst_ulp <= 1, "%lld ulp from expf at %g", (long long)worst_ulp, (double)at_ulp);
    EXPECT(worst_rel <= 8.2e-8, "%.3g relative from exp at %g", worst_rel, (double)at_rel);
    EXPECT(fb_expf(0.0f) == 1.0f, "exp(0) = %.9g", (double)fb_expf(0.0f));
    EXPECT(fb_expf(-0.0f) == 1.0f, "exp(-0) = %.9g", (double)fb_expf(-0.0f));
}

static void test_outside(void)
{
    const float zero_at[] = {-87.34f, -100.0f, -1e30f, -INFINITY};
    for (size_t i = 0; i < sizeof zero_at / sizeof zero_at[0]; i++)
        EXPECT(fb_expf(zero_at[i]) == 0.0f && !signbit(fb_expf(zero_at[i])), "exp(%g) = %g, expected +0",
               (double)zero_at[i], (double)fb_expf(zero_at[i]));
    const float inf_at[] = {88.38f, 88.8f, 1e30f, INFINITY};
    for (size_t i = 0; i < sizeof inf_at / sizeof inf_at[0]; i++)
        EXPECT(isinf(fb_expf(inf_at[i])) && fb_expf(inf_at[i]) > 0, "exp(%g) = %g, expected +inf",
               (double)inf_at[i], (double)fb_expf(inf_at[i]));
    EXPECT(isnan(fb_expf(NAN)), "exp(NaN) = %g", (double)fb_expf(NAN));
    EXPECT(isfinite(fb_expf(88.37f)), "exp(88.37) = %g: finite below the cut", (double)fb_expf(88.37f));
}

static void test_loop_bits(void)
{
    enum { N = 4099 }; /* not a multiple of any vector width: the tail runs too */
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++)
        x[i] = -95.0f + 190.0f * (float)i / N + (i % 7) * 1e-3f;
    x[17] = NAN, x[18] = INFINITY, x[19] = -INFINITY;
    exp_loop(y, x, N);
    int same = 1, first = -1;
    for (int i = 0; i < N && same; i++) {
        const float z = exp_call(x[i]);
        same = memcmp(&z, &y[i], sizeof z) == 0;
        if (!same)
            first = i;
    }
    EXPECT(same, "the loop and one call at a time differ first at x = %g", first >= 0 ? (double)x[first] : 0.0);
    free(x);
    free(y);
}

static void test_row_sums(void)
{
    const int lengths[] = {1, 7, 8, 9, 64, 1000, 4097};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int n = lengths[li];
        float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        for (int i = 0; i < n; i++)
            x[i] = (float)((i * 7919) % 2000) * 0.01f - 12.0f;
        const float shift = 3.5f;
        const double s_store = row_exp_store(y, x, n, shift), s_sum = row_exp_sum(x, n, shift);
        /* the documented order: lane j takes i % 8 == j of the whole
         * blocks, the lanes added in order, then the tail */
        double lane[ROW_EXP_LANES] = {0}, want = 0, exact = 0;
        const int whole = n / ROW_EXP_LANES * ROW_EXP_LANES;
        int stored = 1;
        for (int i = 0; i < n; i++) {
            const float e = exp_call(x[i] - shift);
            stored &= memcmp(&e, &y[i], sizeof e) == 0;
            if (i < whole)
                lane[i % ROW_EXP_LANES] += (double)e;
            exact += exp((double)x[i] - shift);
        }
        for (int j = 0; j < ROW_EXP_LANES; j++)
            want += lane[j];
        for (int i = whole; i < n; i++)
            want += (double)exp_call(x[i] - shift);
        EXPECT(stored, "n %d: row_exp_store's values are not exp's", n);
        EXPECT(s_store == want && s_sum == want, "n %d: sums %.17g / %.17g, the lane order gives %.17g", n, s_store,
               s_sum, want);
        EXPECT(fabs(s_sum - exact) <= 2e-7 * exact, "n %d: sum %.17g against exp's %.17g", n, s_sum, exact);
        /* in place, as the attention softmax calls it */
        memcpy(y, x, (size_t)n * sizeof *y);
        EXPECT(row_exp_store(y, y, n, shift) == want, "n %d: in place gives another sum", n);
        free(x);
        free(y);
    }
}

int main(void)
{
    test_accuracy();
    test_outside();
    test_loop_bits();
    test_row_sums();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
