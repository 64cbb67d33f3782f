/* Elementwise ops: axpy, scale, sum of squares, SwiGLU, dropout. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

#include <string.h>

#include "rng.h"

void CPU_FN(cpu_axpy)(real *y, const real *x, size_t n, real alpha)
{
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (size_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

void CPU_FN(cpu_scale)(real *x, size_t n, real s)
{
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

/* The partition into SUMSQ_BLOCKS contiguous blocks depends only on n, and
 * the block sums are added in block order, so the result is the same for any
 * thread count while the blocks still run in parallel. */
#define SUMSQ_BLOCKS 64

double CPU_FN(cpu_sumsq)(const real *x, size_t n)
{
    double part[SUMSQ_BLOCKS];
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (int b = 0; b < SUMSQ_BLOCKS; b++) {
        size_t lo = n * (size_t)b / SUMSQ_BLOCKS;
        size_t hi = n * (size_t)(b + 1) / SUMSQ_BLOCKS;
        /* eight lanes within the block, added in lane order, then the
         * block's tail: an order fixed by n, and a loop that vectorises */
        double lane[8] = {0};
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int j = 0; j < 8; j++)
                lane[j] += (double)x[i + j] * (double)x[i + j];
        double s = 0;
        for (int j = 0; j < 8; j++)
            s += lane[j];
        for (; i < hi; i++)
            s += (double)x[i] * (double)x[i];
        part[b] = s;
    }
    double s = 0;
    for (int b = 0; b < SUMSQ_BLOCKS; b++)
        s += part[b];
    return s;
}

static real sigmoid(real g) { return (real)1 / ((real)1 + R_EXP(-g)); }

void CPU_FN(cpu_swiglu_fwd)(real *h, const real *g, const real *u, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (size_t i = 0; i < n; i++)
        h[i] = g[i] * sigmoid(g[i]) * u[i];
}

/* d silu(g)/dg = s + g s (1 - s), s = sigmoid(g). */
void CPU_FN(cpu_swiglu_bwd)(real *dg, real *du, const real *dh, const real *g, const real *u, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (size_t i = 0; i < n; i++) {
        real s = sigmoid(g[i]);
        real silu = g[i] * s;
        real d = dh[i];
        dg[i] = d * u[i] * (s + silu * ((real)1 - s));
        du[i] = d * silu;
    }
}

/* v if keep, else +0, by masking v's bits: no branch, so the dropout loops
 * vectorise (a select on the uint8 mask does not; a multiply by the mask
 * would turn a dropped inf or NaN into NaN, not 0). */
static inline real keep_or_zero(real v, int keep)
{
    real_bits u;
    memcpy(&u, &v, sizeof u);
    u &= -(real_bits)(keep != 0);
    memcpy(&v, &u, sizeof v);
    return v;
}

void CPU_FN(cpu_dropout_fwd)(real *x, uint8_t *mask, size_t n, real p, uint64_t seed, uint64_t offset)
{
    real keep_scale = (real)1 / ((real)1 - p);
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (size_t i = 0; i < n; i++) {
        int keep = (real)fb_uniform_hash(seed, offset + i) >= p;
        mask[i] = (uint8_t)keep;
        x[i] = keep_or_zero(x[i] * keep_scale, keep);
    }
}

void CPU_FN(cpu_dropout_rows_fwd)(real *x, uint8_t *mask, size_t rows, size_t width, real p, uint64_t seed,
                                  const uint64_t *row_offset)
{
    real keep_scale = (real)1 / ((real)1 - p);
    const size_t n = rows * width;
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (size_t r = 0; r < rows; r++) {
        real *xr = x + r * width;
        uint8_t *mr = mask + r * width;
        for (size_t c = 0; c < width; c++) {
            int keep = (real)fb_uniform_hash(seed, row_offset[r] + c) >= p;
            mr[c] = (uint8_t)keep;
            xr[c] = keep_or_zero(xr[c] * keep_scale, keep);
        }
    }
}

void CPU_FN(cpu_dropout_bwd)(real *dx, const uint8_t *mask, size_t n, real p)
{
    real keep_scale = (real)1 / ((real)1 - p);
    real *restrict d = dx;
    const uint8_t *restrict mk = mask;
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
    for (size_t i = 0; i < n; i++)
        d[i] = keep_or_zero(d[i] * keep_scale, mk[i]);
}
