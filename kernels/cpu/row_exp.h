/* exp over a row and the row's sum, for softmax-like loops (attention,
 * router, cross-entropy). Include after cpu/real.h.
 *
 * The sum is a double accumulated in ROW_EXP_LANES lanes, lane j taking the
 * elements i with i % ROW_EXP_LANES == j of the whole blocks and the tail
 * added after the lanes, in that fixed order: a sum in one running
 * variable cannot be vectorised (the order of a float sum is part of its
 * result), and this order depends on n alone, so a row gives the same bits
 * whatever the thread count. */
#ifndef FABULA_KERNELS_CPU_ROW_EXP_H
#define FABULA_KERNELS_CPU_ROW_EXP_H

#define ROW_EXP_LANES 8

/* y[i] = exp(x[i] - shift) for i < n (y may be x); returns their sum */
static inline double row_exp_store(real *y, const real *x, int n, real shift)
{
    double lane[ROW_EXP_LANES] = {0};
    int i = 0;
    for (; i + ROW_EXP_LANES <= n; i += ROW_EXP_LANES)
        for (int j = 0; j < ROW_EXP_LANES; j++) {
            const real e = R_EXP(x[i + j] - shift);
            y[i + j] = e;
            lane[j] += (double)e;
        }
    double s = 0;
    for (int j = 0; j < ROW_EXP_LANES; j++)
        s += lane[j];
    for (; i < n; i++) {
        y[i] = R_EXP(x[i] - shift);
        s += (double)y[i];
    }
    return s;
}

/* the sum of exp(x[i] - shift) for i < n, in the same order */
static inline double row_exp_sum(const real *x, int n, real shift)
{
    double lane[ROW_EXP_LANES] = {0};
    int i = 0;
    for (; i + ROW_EXP_LANES <= n; i += ROW_EXP_LANES)
        for (int j = 0; j < ROW_EXP_LANES; j++)
            lane[j] += (double)R_EXP(x[i + j] - shift);
    double s = 0;
    for (int j = 0; j < ROW_EXP_LANES; j++)
        s += lane[j];
    for (; i < n; i++)
        s += (double)R_EXP(x[i] - shift);
    return s;
}

#endif
