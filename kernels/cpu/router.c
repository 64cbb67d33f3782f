/* MoE router: softmax, top-k with renormalised weights, and the backward. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"
#include "cpu/row_exp.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* One token: softmax of its logits into p, lse, and the top K. */
static void route_row(real *p, real *lse, int32_t *idx, real *w, const real *l, int E, int K, unsigned char *taken)
{
    real m = l[0];
    for (int e = 1; e < E; e++)
        if (l[e] > m)
            m = l[e];
    const double sum = row_exp_store(p, l, E, m);
    real inv = (real)(1.0 / sum);
    for (int e = 0; e < E; e++)
        p[e] *= inv;
    *lse = (real)((double)m + log(sum));

    /* K passes of "largest not yet taken"; the strict > keeps the lower
     * index on ties. The taken flags make it O(K E): scanning the chosen
     * list for every expert, O(K^2 E), cost 3% of a step at 128 experts
     * top-32 (bench/README.md, "Router top-k"). */
    memset(taken, 0, (size_t)E);
    double wsum = 0;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!taken[e] && (best < 0 || p[e] > p[best]))
                best = e;
        taken[best] = 1;
        idx[k] = best;
        wsum += p[best];
    }
    for (int k = 0; k < K; k++)
        w[k] = (real)((double)p[idx[k]] / wsum);
}

void CPU_FN(cpu_router_fwd)(real *probs, real *lse, int32_t *topk_idx, real *topk_w, const real *logits,
                            int T, int E, int K)
{
#pragma omp parallel if (T > 1)
    {
        unsigned char *taken = fb_malloc((size_t)E);
#pragma omp for schedule(static)
        for (int t = 0; t < T; t++)
            route_row(probs + (size_t)t * E, lse + t, topk_idx + (size_t)t * K, topk_w + (size_t)t * K,
                      logits + (size_t)t * E, E, K, taken);
        free(taken);
    }
}

/* Per row, with S the sum of the chosen probs and w_k = p_{i_k} / S:
 *   dp_e = aux_dprob[e] + sum over k with i_k = e of (dw_k - sum_j dw_j w_j) / S
 *   dlogits_e = p_e (dp_e - sum_f p_f dp_f) + z_scale lse p_e
 * (softmax Jacobian; the z-loss reaches the logits through d lse/dl = p). */
void CPU_FN(cpu_router_bwd)(real *dlogits, const real *probs, const real *lse, const int32_t *topk_idx,
                            const real *topk_w, const real *dtopk_w, const real *aux_dprob, real z_scale,
                            int T, int E, int K)
{
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const real *p = probs + (size_t)t * E;
        const int32_t *idx = topk_idx + (size_t)t * K;
        const real *w = topk_w + (size_t)t * K;
        const real *dw = dtopk_w + (size_t)t * K;
        real *dl = dlogits + (size_t)t * E;
        /* dl holds dp until the final pass overwrites it. */
        real S = 0, wdw = 0;
        for (int k = 0; k < K; k++) {
            S += p[idx[k]];
            wdw += dw[k] * w[k];
        }
        for (int e = 0; e < E; e++)
            dl[e] = aux_dprob[e];
        for (int k = 0; k < K; k++)
            dl[idx[k]] += (dw[k] - wdw) / S;
        double pdp = 0;
        for (int e = 0; e < E; e++)
            pdp += (double)p[e] * (double)dl[e];
        real zl = z_scale * lse[t];
        for (int e = 0; e < E; e++)
            dl[e] = p[e] * (dl[e] - (real)pdp) + zl * p[e];
    }
}
