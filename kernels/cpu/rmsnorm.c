/* RMSNorm forward and backward (Llama: out = (x * rstd) * w). */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

void CPU_FN(cpu_rmsnorm_fwd)(real *out, real *rstd, const real *x, const real *w, int T, int D, real eps)
{
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        const real *xr = x + (size_t)t * D;
        real *o = out + (size_t)t * D;
        double ss = 0;
        for (int j = 0; j < D; j++)
            ss += (double)xr[j] * (double)xr[j];
        real r = (real)(1.0 / sqrt(ss / D + (double)eps));
        rstd[t] = r;
        for (int j = 0; j < D; j++)
            o[j] = xr[j] * r * w[j];
    }
}

/* With r = (mean(x^2) + eps)^-1/2 and out_j = x_j r w_j:
 *   dx_i = r w_i dout_i - x_i r^3 / D * sum_j dout_j w_j x_j
 *   dw_j = sum_t dout_tj x_tj r_t
 * dx is parallel over rows; dw is a reduction over rows, so it runs in a
 * second pass parallel over columns, each column summed in row order. */
#define RMS_COL_BLOCK 64

void CPU_FN(cpu_rmsnorm_bwd)(real *dx, real *dw, const real *dout, const real *x, const real *w,
                             const real *rstd, int T, int D)
{
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const real *xr = x + (size_t)t * D;
        const real *g = dout + (size_t)t * D;
        real *d = dx + (size_t)t * D;
        real r = rstd[t];
        double dot = 0;
        for (int j = 0; j < D; j++)
            dot += (double)g[j] * (double)w[j] * (double)xr[j];
        real c = (real)(dot * (double)r * (double)r * (double)r / D);
        for (int j = 0; j < D; j++)
            d[j] += r * w[j] * g[j] - xr[j] * c;
    }
    int nblocks = (D + RMS_COL_BLOCK - 1) / RMS_COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nblocks; b++) {
        int j0 = b * RMS_COL_BLOCK;
        int j1 = j0 + RMS_COL_BLOCK < D ? j0 + RMS_COL_BLOCK : D;
        const int nj = j1 - j0;
        double acc[RMS_COL_BLOCK] = {0};
        /* lanes are columns, each summed over rows in order: vectorises
         * without reordering any sum */
        for (int t = 0; t < T; t++) {
            const real *restrict xr = x + (size_t)t * D + j0;
            const real *restrict g = dout + (size_t)t * D + j0;
            const real r = rstd[t];
#pragma omp simd
            for (int j = 0; j < nj; j++)
                acc[j] += (double)(g[j] * xr[j] * r);
        }
        for (int j = 0; j < nj; j++)
            dw[j0 + j] += (real)acc[j];
    }
}
