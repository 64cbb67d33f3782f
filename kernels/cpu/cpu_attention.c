/* Causal attention over packed variable-length samples with GQA.
 *
 * Row t of a sample attends to rows start(t)..t of the same sample. Query
 * head h reads kv head h / (H/KV). Scores are scaled by 1/sqrt(hd).
 *
 * Parallelism: the forward and dq run over (row, query head) pairs; dk and dv
 * run over (key row, kv head) pairs, each looping over the query heads of its
 * group and the later rows of its sample. Every output element is thus
 * written by one thread with a fixed summation order: no atomics, no shared
 * T x T buffer, and results that do not depend on the thread count.
 */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

#include <stdlib.h>

#include "util/error.h"

static real dot(const real *a, const real *b, int n)
{
    real s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* start[t] = first row of t's sample, end[t] = one past its last row. */
static void sample_bounds(int *start, int *end, const int32_t *cu_seqlens, int nseq)
{
    for (int i = 0; i < nseq; i++)
        for (int t = cu_seqlens[i]; t < cu_seqlens[i + 1]; t++) {
            start[t] = cu_seqlens[i];
            end[t] = cu_seqlens[i + 1];
        }
}

static int longest_sample(const int32_t *cu_seqlens, int nseq)
{
    int n = 1;
    for (int i = 0; i < nseq; i++)
        if (cu_seqlens[i + 1] - cu_seqlens[i] > n)
            n = cu_seqlens[i + 1] - cu_seqlens[i];
    return n;
}

void CPU_FN(cpu_attention_fwd)(real *out, real *lse, const real *q, const real *k, const real *v,
                               const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd)
{
    if (T <= 0)
        return;
    FB_ASSERT(KV > 0 && H % KV == 0);
    int *start = fb_malloc((size_t)T * sizeof(int));
    int *end = fb_malloc((size_t)T * sizeof(int));
    sample_bounds(start, end, cu_seqlens, nseq);
    int maxlen = longest_sample(cu_seqlens, nseq);
    int group = H / KV;
    size_t qs = (size_t)H * hd, ks = (size_t)KV * hd; /* row strides */
    real scale = (real)1 / R_SQRT((real)hd);

#pragma omp parallel
    {
        real *p = fb_malloc((size_t)maxlen * sizeof(real));
#pragma omp for schedule(static)
        for (long th = 0; th < (long)T * H; th++) {
            int t = (int)(th / H), h = (int)(th % H), g = h / group;
            const real *qt = q + t * qs + (size_t)h * hd;
            int s0 = start[t], n = t - s0 + 1;
            real m = -INFINITY;
            for (int j = 0; j < n; j++) {
                p[j] = scale * dot(qt, k + (size_t)(s0 + j) * ks + (size_t)g * hd, hd);
                if (p[j] > m)
                    m = p[j];
            }
            double sum = 0;
            for (int j = 0; j < n; j++) {
                p[j] = R_EXP(p[j] - m);
                sum += p[j];
            }
            real *o = out + t * qs + (size_t)h * hd;
            for (int d = 0; d < hd; d++)
                o[d] = 0;
            for (int j = 0; j < n; j++) {
                const real *vs = v + (size_t)(s0 + j) * ks + (size_t)g * hd;
                for (int d = 0; d < hd; d++)
                    o[d] += p[j] * vs[d];
            }
            real inv = (real)(1.0 / sum);
            for (int d = 0; d < hd; d++)
                o[d] *= inv;
            lse[th] = m + (real)log(sum);
        }
        free(p);
    }
    free(start);
    free(end);
}

/* With P[t,s] = exp(scale q_t.k_s - lse_t) and D_t = dout_t . out_t:
 *   dS[t,s] = P[t,s] (dout_t . v_s - D_t)
 *   dq_t = scale sum_s dS[t,s] k_s,  dk_s = scale sum_t dS[t,s] q_t,
 *   dv_s = sum_t P[t,s] dout_t.
 * P is recomputed in both passes instead of being stored. */
void CPU_FN(cpu_attention_bwd)(real *dq, real *dk, real *dv, const real *dout, const real *q,
                               const real *k, const real *v, const real *out, const real *lse,
                               const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd)
{
    if (T <= 0)
        return;
    FB_ASSERT(KV > 0 && H % KV == 0);
    int *start = fb_malloc((size_t)T * sizeof(int));
    int *end = fb_malloc((size_t)T * sizeof(int));
    sample_bounds(start, end, cu_seqlens, nseq);
    real *Dt = fb_malloc((size_t)T * H * sizeof(real));
    int group = H / KV;
    size_t qs = (size_t)H * hd, ks = (size_t)KV * hd;
    real scale = (real)1 / R_SQRT((real)hd);

#pragma omp parallel for schedule(static)
    for (long th = 0; th < (long)T * H; th++) {
        size_t off = (size_t)(th / H) * qs + (size_t)(th % H) * hd;
        Dt[th] = dot(dout + off, out + off, hd);
    }

#pragma omp parallel for schedule(static)
    for (long th = 0; th < (long)T * H; th++) {
        int t = (int)(th / H), h = (int)(th % H), g = h / group;
        size_t off = t * qs + (size_t)h * hd;
        const real *qt = q + off, *go = dout + off;
        real *dqt = dq + off;
        for (int d = 0; d < hd; d++)
            dqt[d] = 0;
        for (int s = start[t]; s <= t; s++) {
            const real *ksr = k + (size_t)s * ks + (size_t)g * hd;
            const real *vsr = v + (size_t)s * ks + (size_t)g * hd;
            real P = R_EXP(scale * dot(qt, ksr, hd) - lse[th]);
            real dS = P * (dot(go, vsr, hd) - Dt[th]);
            for (int d = 0; d < hd; d++)
                dqt[d] += dS * ksr[d];
        }
        for (int d = 0; d < hd; d++)
            dqt[d] *= scale;
    }

#pragma omp parallel for schedule(static)
    for (long sg = 0; sg < (long)T * KV; sg++) {
        int s = (int)(sg / KV), g = (int)(sg % KV);
        size_t off = s * ks + (size_t)g * hd;
        const real *ksr = k + off, *vsr = v + off;
        real *dks = dk + off, *dvs = dv + off;
        for (int d = 0; d < hd; d++)
            dks[d] = dvs[d] = 0;
        for (int h = g * group; h < (g + 1) * group; h++)
            for (int t = s; t < end[s]; t++) {
                size_t qoff = t * qs + (size_t)h * hd;
                const real *qt = q + qoff, *go = dout + qoff;
                long th = (long)t * H + h;
                real P = R_EXP(scale * dot(qt, ksr, hd) - lse[th]);
                real dS = P * (dot(go, vsr, hd) - Dt[th]);
                for (int d = 0; d < hd; d++) {
                    dks[d] += dS * qt[d];
                    dvs[d] += P * go[d];
                }
            }
        for (int d = 0; d < hd; d++)
            dks[d] *= scale;
    }
    free(Dt);
    free(start);
    free(end);
}
