/* Dense and grouped matmul on the CPU through CBLAS (row-major).
 *
 * The grouped matmuls are one BLAS call per expert over its contiguous rows.
 * The experts run one after another (each BLAS call is threaded inside);
 * calling BLAS from OpenMP threads would oversubscribe the cores. Experts
 * without rows are skipped: their Y/dX slices are empty and dW_e gets
 * nothing added. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

#include <stddef.h>

/* BLAS rejects leading dimensions below 1 and, with K == 0, some
 * implementations leave C untouched even when beta == 0; the op's contract
 * (C overwritten when beta == 0) is enforced here instead. */
static void scale_c(real *C, size_t n, real beta)
{
    if (beta == (real)0) {
        for (size_t i = 0; i < n; i++)
            C[i] = 0;
    } else if (beta != (real)1) {
        for (size_t i = 0; i < n; i++)
            C[i] *= beta;
    }
}

void CPU_FN(cpu_matmul)(real *C, const real *A, const real *B, int M, int N, int K, int transA,
                        int transB, real beta)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_c(C, (size_t)M * (size_t)N, beta);
        return;
    }
    /* op(A) is [M,K]: stored [M,K] (lda K) or, transposed, [K,M] (lda M). */
    int lda = transA ? M : K;
    int ldb = transB ? K : N;
    R_GEMM(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M,
           N, K, (real)1, A, lda, B, ldb, beta, C, N);
}

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
