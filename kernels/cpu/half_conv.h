/* Exact conversions between fp32 and the two 16-bit compute dtypes, on bit
 * patterns (uint16_t), for the CPU's 16-bit backend (ops_cpu16.c) and the
 * tests that check it.
 *
 * Narrowing rounds to nearest, ties to even, as the GPU's conversion
 * instructions do (__float2bfloat16_rn, __float2half_rn): overflow becomes
 * inf, fp16 results below its normal range become fp16 subnormals (or zero),
 * and a NaN stays a NaN of the same sign (made quiet, its top payload bits
 * kept). Widening is exact for every pattern. Integer arithmetic, and
 * where a float operation is used it is exact: the result does not depend
 * on the compiler, the FPU mode or _Float16 support.
 */
#ifndef FABULA_KERNELS_CPU_HALF_CONV_H
#define FABULA_KERNELS_CPU_HALF_CONV_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fb_f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float fb_f32_from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* ---- bfloat16: fp32's sign and exponent, the top 7 mantissa bits ---- */

static inline uint16_t fb_bf16_from_f32(float f)
{
    uint32_t x = fb_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncating could leave an inf */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* add just under half an ulp, plus one when the kept lsb is odd: a tie
     * then carries only towards the even neighbour; a carry out of the
     * mantissa bumps the exponent (up to inf), which is the right answer */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float fb_bf16_to_f32(uint16_t h) { return fb_f32_from_bits((uint32_t)h << 16); }

/* ---- IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits ---- */

static inline uint16_t fb_f16_from_f32(float f)
{
    const uint32_t x = fb_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x03ffu));
    if (ax >= 0x477ff000u) /* >= 65520, halfway from 65504 (odd) to 2^16: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: normal in fp16 */
        /* round the 13 dropped mantissa bits to nearest even (a carry moves
         * into the exponent), then rebias the exponent from 127 to 15 */
        uint32_t r = ax + 0x0fffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (ax <= 0x33000000u) /* <= 2^-25: half the smallest subnormal or less, ties to 0 */
        return sign;
    /* subnormal (possibly rounding up to the smallest normal, 0x0400): the
     * result is |f| / 2^-24 rounded to an integer. |f| = mant * 2^(e-150)
     * with the 24-bit significand mant, so the integer is mant >> (126 - e);
     * here 102 <= e <= 112, so the shift is 14..24. */
    const uint32_t e = ax >> 23;
    const uint32_t mant = (ax & 0x007fffffu) | 0x00800000u;
    const uint32_t shift = 126u - e;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

/* Branch-free (every case formed, one selected by masks), so that loops of
 * it vectorise. A subnormal m * 2^-24 is (float)m * 2^-24: m < 2^10 converts
 * exactly and the power-of-two scaling of a normal result is exact, so no
 * rounding mode or flush-to-zero setting can change it. */
static inline float fb_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x03ffu;
    const uint32_t special = 0x7f800000u | (m << 13);  /* inf, NaN (payload kept) */
    const uint32_t normal = ((e + 112u) << 23) | (m << 13);
    const uint32_t sub = fb_f32_bits((float)m * 0x1p-24f); /* zero too */
    const uint32_t is_special = 0u - (uint32_t)(e == 0x1fu), is_sub = 0u - (uint32_t)(e == 0u);
    const uint32_t mag = (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
    return fb_f32_from_bits(sign | mag);
}

#endif
