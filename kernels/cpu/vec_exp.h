/* exp(x) for float in straight-line code the compiler vectorises.
 *
 * libm's expf is a call per element, so no loop around it vectorises:
 * softmax rows, SwiGLU's sigmoid, the router and the cross-entropy ran one
 * element at a time (6-7% of a 1-thread step of bench/configs/cpu_bench.json,
 * perf). This is the Cephes expf: x = n ln2 + r with |r| <= ln2 / 2 (ln2
 * split in two for an exact n ln2), exp(r) by its degree-6 polynomial, and
 * 2^n built in the exponent bits. Within 1 ulp of glibc's expf and 8.2e-8
 * relative of exp over the normal range (tests/unit/test_vec_exp checks
 * both). Outside it the selects below give what a softmax or a sigmoid
 * needs: 0 below -87.34 (where exp is subnormal), +inf above 88.376 (where
 * 2^n would need n = 128), NaN for NaN. Every select is a bit mask, not a
 * branch: a branch stops the vectoriser. Same input, same bits, whatever
 * the thread count; another compiler or -march (FMA contraction) may round
 * the polynomial differently. Include after cpu/real.h or alone. */
#ifndef FABULA_KERNELS_CPU_VEC_EXP_H
#define FABULA_KERNELS_CPU_VEC_EXP_H

#include <math.h>
#include <stdint.h>

#include "cpu/half_conv.h" /* fb_f32_bits, fb_f32_from_bits */

/* c ? a : b by masking bits */
static inline float fb_select(int c, float a, float b)
{
    const uint32_t m = -(uint32_t)(c != 0);
    return fb_f32_from_bits((fb_f32_bits(a) & m) | (fb_f32_bits(b) & ~m));
}

static inline float fb_expf(float x)
{
    const float lo = -87.3365478515625f;   /* ln(2^-126): the smallest normal result */
    const float hi = 88.3762626647949219f; /* 127.5 ln2: n stays <= 127 */
    const int under = x < lo, over = x > hi;
    float xc = fb_select(under, lo, x);
    xc = fb_select(over, hi, xc);
    /* n = round(x / ln2), to nearest even by the 1.5 * 2^23 shift */
    const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* (NaN converted to an integer is undefined: convert 0 instead; p is
     * NaN already) */
    const float nn = fb_select(n != n, 0.0f, n);
    float y = p * fb_f32_from_bits((uint32_t)((int32_t)nn + 127) << 23);
    y = fb_select(under, 0.0f, y);
    return fb_select(over, INFINITY, y);
}

#endif
