#include "tboard/tb_hist.h"

#include <float.h>
#include <math.h>
#include <string.h>

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

void tb_hist_add(double *sums, double *exts, const float *x, size_t n)
{
    double *counts = sums + TB_HIST_SUMS;
    double num = 0.0, sum = 0.0, sq = 0.0, mx = exts[TB_HIST_MAX], nmn = exts[TB_HIST_NEGMIN];
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        const long b = tb_hist_bucket(v);
        if (b < 0)
            continue;
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
