/* Softmax cross-entropy with its gradient, one pass per row. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"
#include "cpu/row_exp.h"

#include "util/error.h"

/* dlogits may alias logits: within a row every logit is read (max, sum,
 * target) before the row is overwritten, and the final loop reads element j
 * just before writing it. Nothing here may be declared restrict. */
void CPU_FN(cpu_cross_entropy)(real *loss, real *dlogits, const real *logits, const int32_t *targets,
                               int T, int V, real grad_scale)
{
    for (int t = 0; t < T; t++)
        FB_ASSERT(targets[t] < V);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const real *l = logits + (size_t)t * V;
        real *d = dlogits + (size_t)t * V;
        int y = targets[t];
        if (y < 0) {
            loss[t] = 0;
            for (int j = 0; j < V; j++)
                d[j] = 0;
            continue;
        }
        real m = l[0];
        for (int j = 1; j < V; j++)
            if (l[j] > m)
                m = l[j];
        const double sum = row_exp_sum(l, V, m);
        double lse = (double)m + log(sum);
        loss[t] = (real)(lse - (double)l[y]);
        const real rl = (real)lse, py = R_EXP(l[y] - rl);
        /* the target's entry after the loop, from py taken before it: a
         * test for j == y inside would keep the loop from vectorising */
        for (int j = 0; j < V; j++)
            d[j] = grad_scale * R_EXP(l[j] - rl);
        d[y] = grad_scale * (py - (real)1);
    }
}
