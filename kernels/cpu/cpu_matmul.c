/* Dense matmul on the CPU through CBLAS (row-major). */
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
