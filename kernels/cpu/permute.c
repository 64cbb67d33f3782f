/* Token permutation into expert-grouped rows, and the weighted combine back. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

#include <string.h>

/* A row whose source token is negative is padding and comes out zero. */
void CPU_FN(cpu_permute_fwd)(real *xp, const real *x, const int32_t *row_token, int nrows, int D)
{
#pragma omp parallel for schedule(static) if (nrows > 1)
    for (int r = 0; r < nrows; r++) {
        real *dst = xp + (size_t)r * D;
        if (row_token[r] < 0) {
            for (int j = 0; j < D; j++)
                dst[j] = 0;
            continue;
        }
        memcpy(dst, x + (size_t)row_token[r] * D, (size_t)D * sizeof(real));
    }
}

/* Gathers per token (each token's rows are known from token_rows), so there
 * is no scatter and no race. */
void CPU_FN(cpu_permute_bwd)(real *dx, const real *dxp, const int32_t *token_rows, int T, int K, int D)
{
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        real *d = dx + (size_t)t * D;
        for (int k = 0; k < K; k++) {
            int r = token_rows[(size_t)t * K + k];
            if (r < 0)
                continue;
            const real *src = dxp + (size_t)r * D;
            for (int j = 0; j < D; j++)
                d[j] += src[j];
        }
    }
}

void CPU_FN(cpu_combine_fwd)(real *y, const real *eo, const int32_t *token_rows, const real *w, int T,
                             int K, int D)
{
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        real *yt = y + (size_t)t * D;
        for (int j = 0; j < D; j++)
            yt[j] = 0;
        for (int k = 0; k < K; k++) {
            int r = token_rows[(size_t)t * K + k];
            if (r < 0)
                continue;
            real wk = w[(size_t)t * K + k];
            const real *e = eo + (size_t)r * D;
            for (int j = 0; j < D; j++)
                yt[j] += wk * e[j];
        }
    }
}

#define DOT_LANES 8

/* sum of a[j] b[j] in DOT_LANES lanes (lane i takes j % DOT_LANES == i of
 * the whole blocks), added in lane order, then the tail: an order fixed by
 * n alone that the compiler can vectorise, where one running sum stays
 * scalar and waits on each add (a dot of D per routed row; at 128 experts
 * top-32 that is 65,536 rows a layer). */
static inline real dot_lanes(const real *a, const real *b, int n)
{
    real lane[DOT_LANES] = {0};
    int j = 0;
    for (; j + DOT_LANES <= n; j += DOT_LANES)
        for (int i = 0; i < DOT_LANES; i++)
            lane[i] += a[j + i] * b[j + i];
    real s = 0;
    for (int i = 0; i < DOT_LANES; i++)
        s += lane[i];
    for (; j < n; j++)
        s += a[j] * b[j];
    return s;
}

/* Each kept (t, k) owns exactly one row r, so writing deo[r] from the
 * thread that owns t is race-free. */
void CPU_FN(cpu_combine_bwd)(real *deo, real *dw, const real *dy, const real *eo,
                             const int32_t *token_rows, const real *w, int T, int K, int D)
{
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        const real *g = dy + (size_t)t * D;
        for (int k = 0; k < K; k++) {
            size_t tk = (size_t)t * K + k;
            int r = token_rows[tk];
            if (r < 0) {
                dw[tk] = 0;
                continue;
            }
            real wk = w[tk];
            const real *e = eo + (size_t)r * D;
            real *de = deo + (size_t)r * D;
            for (int j = 0; j < D; j++)
                de[j] = wk * g[j];
            dw[tk] = dot_lanes(g, e, D);
        }
    }
}
