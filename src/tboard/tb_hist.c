#include "tboard/tb_hist.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/error.h"

/* 774 positive limits below 1e20, their negatives, 0 and +-DBL_MAX. */
#define HIST_MAX_LIMITS 1600

static double limits[HIST_MAX_LIMITS];
static size_t nlimits;

/* The same product sequence on every machine (IEEE double), so a reader
 * can rebuild the edges exactly: v_0 = 1e-12, v_{k+1} = v_k * 1.1. */
static void build(void)
{
    double pos[HIST_MAX_LIMITS / 2];
    size_t np = 0;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1)
        pos[np++] = v;
    size_t k = 0;
    limits[k++] = -DBL_MAX;
    for (size_t i = np; i-- > 0;)
        limits[k++] = -pos[i];
    limits[k++] = 0.0;
    for (size_t i = 0; i < np; i++)
        limits[k++] = pos[i];
    limits[k++] = DBL_MAX;
    nlimits = k;
}

const double *tb_hist_limits(size_t *n)
{
    if (!nlimits)
        build();
    *n = nlimits;
    return limits;
}

size_t tb_hist_sums_len(void)
{
    size_t n;
    tb_hist_limits(&n);
    return TB_HIST_SUMS + n;
}

void tb_hist_reset(double *sums, double *exts)
{
    memset(sums, 0, tb_hist_sums_len() * sizeof *sums);
    exts[TB_HIST_MAX] = -INFINITY;
    exts[TB_HIST_NEGMIN] = -INFINITY;
}

long tb_hist_bucket(double x)
{
    if (isnan(x))
        return -1;
    size_t n;
    const double *lim = tb_hist_limits(&n);
    /* the first limit above x */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lim[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return (long)(lo < n ? lo : n - 1);
}

/* The float fast path: the top 16 bits of a float (sign, exponent, 7
 * mantissa bits) cut the line into intervals at most 2^-7 (0.8%) wide
 * relative to their values, narrower than a bucket (10%), so each holds at
 * most one bucket limit: the bucket of the interval's lowest value, plus one
 * when x reaches the next limit. One table lookup and one comparison per
 * element instead of a binary search over 1,551 limits. */
#define FAST_KEYS 65536
static uint16_t fast_bucket[FAST_KEYS];
static int fast_ready;

static float float_of(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void fast_build(void)
{
    size_t n;
    tb_hist_limits(&n);
    for (uint32_t key = 0; key < FAST_KEYS; key++) {
        const uint32_t lo = key << 16, hi = lo | 0xffffu;
        /* the lowest value: the smallest magnitude if positive, the largest if negative */
        float vmin = float_of(key & 0x8000u ? hi : lo), vmax = float_of(key & 0x8000u ? lo : hi);
        if (isnan(vmin))
            vmin = float_of(lo); /* -inf and the NaNs after it */
        if (isnan(vmin))
            continue;            /* NaNs only: never looked up */
        const long b = tb_hist_bucket(vmin);
        FB_ASSERT(b >= 0 && (size_t)b < n);
        fast_bucket[key] = (uint16_t)b;
        FB_ASSERT(isnan(vmax) || tb_hist_bucket(vmax) <= b + 1);
    }
    fast_ready = 1;
}

long tb_hist_bucket_f(float x)
{
    if (isnan(x))
        return -1;
    if (!fast_ready)
        fast_build();
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    long b = fast_bucket[bits >> 16];
    if ((size_t)b + 1 < nlimits && (double)x >= limits[b])
        b++;
    return b;
}

void tb_hist_add(double *sums, double *exts, const float *x, size_t n)
{
    double *counts = sums + TB_HIST_SUMS;
    if (!fast_ready)
        fast_build();
    double num = 0.0, sum = 0.0, sq = 0.0, mx = exts[TB_HIST_MAX], nmn = exts[TB_HIST_NEGMIN];
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        if (v != v)
            continue; /* NaN */
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        size_t b = fast_bucket[bits >> 16];
        b += b + 1 < nlimits && v >= limits[b];
        counts[b] += 1.0;
        num += 1.0;
        sum += v;
        sq += v * v;
        mx = v > mx ? v : mx;
        nmn = -v > nmn ? -v : nmn;
    }
    sums[TB_HIST_NUM] += num;
    sums[TB_HIST_SUM] += sum;
    sums[TB_HIST_SUMSQ] += sq;
    exts[TB_HIST_MAX] = mx;
    exts[TB_HIST_NEGMIN] = nmn;
}
