/* Grouped matmul: one BLAS call per expert over its contiguous rows.
 *
 * The experts run one after another (each BLAS call is threaded inside);
 * calling BLAS from OpenMP threads would oversubscribe the cores. Experts
 * without rows are skipped: their Y/dX slices are empty and dW_e gets
 * nothing added. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

void CPU_FN(cpu_gmm_fwd)(real *Y, const real *X, const real *W, const int32_t *offsets, int E, int N, int K)
{
    for (int e = 0; e < E; e++) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows <= 0)
            continue;
        CPU_FN(cpu_matmul)(Y + (size_t)offsets[e] * N, X + (size_t)offsets[e] * K, W + (size_t)e * N * K,
                           rows, N, K, 0, 1, (real)0);
    }
}

void CPU_FN(cpu_gmm_bwd_data)(real *dX, const real *dY, const real *W, const int32_t *offsets, int E, int N,
                              int K)
{
    for (int e = 0; e < E; e++) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows <= 0)
            continue;
        CPU_FN(cpu_matmul)(dX + (size_t)offsets[e] * K, dY + (size_t)offsets[e] * N, W + (size_t)e * N * K,
                           rows, K, N, 0, 0, (real)0);
    }
}

void CPU_FN(cpu_gmm_bwd_weight)(real *dW, const real *dY, const real *X, const int32_t *offsets, int E,
                                int N, int K)
{
    for (int e = 0; e < E; e++) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows <= 0)
            continue;
        CPU_FN(cpu_matmul)(dW + (size_t)e * N * K, dY + (size_t)offsets[e] * N, X + (size_t)offsets[e] * K,
                           N, K, rows, 1, 0, (real)1);
    }
}
