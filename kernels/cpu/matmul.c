/* Dense and grouped matmul on the CPU through CBLAS (row-major).
 *
 * BLAS itself always runs on one thread (blas_threads.h says why): a GEMM is
 * cut into blocks of C run in parallel, each block one BLAS call.
 *
 * A grouped matmul is one BLAS call per expert over its contiguous rows.
 * With one thread, fewer experts holding rows than threads, or one expert
 * holding most rows, the experts run one after another, each GEMM cut into
 * blocks as above. Otherwise
 * the experts are shared out whole among the OpenMP threads, each running
 * its experts' whole GEMMs: with 64-128 experts and a few rows
 * each, a threaded GEMM per expert spends its time forking and joining.
 * Experts go largest first to whichever thread is free (schedule(dynamic,1)
 * over a list sorted by rows: longest-processing-time first), so one late
 * big expert does not leave the other threads idle. Each expert's GEMM is
 * the same call either way and writes only its own slice of Y/dX/dW, so the
 * result does not depend on the schedule or the thread count. Experts
 * without rows are skipped: their Y/dX slices are empty and dW_e gets
 * nothing added. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

#include <stddef.h>
#include <stdlib.h>

#include <omp.h>

#include "cpu/blas_threads.h"
#include "util/error.h"

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

/* The blocks a GEMM is cut into: of the longer of C's two sides, in
 * multiples of 64 (so that every block starts where OpenBLAS's own tiling of
 * the whole GEMM would, and gives its bits), at most 16 of them, chosen from
 * the shape only: the same cut at any thread count. */
#define MM_ALIGN 64
#define MM_MAX_BLOCKS 16
/* Below this many multiply-adds a GEMM runs whole on one thread: the
 * fork and join would cost more than the split saves (OpenBLAS's own
 * threshold for threading, 65536 x 4). */
#define MM_PAR_MIN_MACS 262144.0

static int mm_block(int len)
{
    int per = (len + MM_MAX_BLOCKS - 1) / MM_MAX_BLOCKS;
    return (per + MM_ALIGN - 1) / MM_ALIGN * MM_ALIGN;
}

/* One row times a weight stored [N, K] (a decode step's x W^T): rows
 * [lo, hi) of W against x as a GEMV. A GEMM with M = 1 packs W's panels
 * first, reading the weights about twice; at one token a step the weights'
 * bytes are the whole cost (bench/README.md "Generation"). Only the dense
 * matmul takes this path: an expert's GEMM of one row stays a GEMM, so the
 * training's bits (validation/curves) do not change. */
static void gemv_rows(real *C, const real *A, const real *B, int K, real beta, int lo, int hi)
{
    R_GEMV(CblasRowMajor, CblasNoTrans, hi - lo, K, (real)1, B + (size_t)lo * K, K, A, 1, beta, C + lo, 1);
}

static void gemm(real *C, const real *A, const real *B, int M, int N, int K, int transA, int transB, real beta,
                 int gemv_ok)
{
    if (gemv_ok && M == 1 && transB && !transA) {
        gemv_rows(C, A, B, K, beta, 0, N);
        return;
    }
    /* op(A) is [M,K]: stored [M,K] (lda K) or, transposed, [K,M] (lda M). */
    int lda = transA ? M : K;
    int ldb = transB ? K : N;
    R_GEMM(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K,
           (real)1, A, lda, B, ldb, beta, C, N);
}

/* Block [lo, hi) of C's rows (by_rows) or columns. */
static void gemm_block(real *C, const real *A, const real *B, int M, int N, int K, int transA, int transB,
                       real beta, int by_rows, int lo, int hi, int gemv_ok)
{
    if (gemv_ok && M == 1 && transB && !transA && !by_rows) {
        gemv_rows(C, A, B, K, beta, lo, hi);
        return;
    }
    int lda = transA ? M : K;
    int ldb = transB ? K : N;
    const real *a = A, *b = B;
    int m = M, n = N;
    if (by_rows) {
        a = transA ? A + lo : A + (size_t)lo * K;
        m = hi - lo;
        C += (size_t)lo * N;
    } else {
        b = transB ? B + (size_t)lo * K : B + lo;
        n = hi - lo;
        C += lo;
    }
    R_GEMM(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, K,
           (real)1, a, lda, b, ldb, beta, C, N);
}

static void matmul(real *C, const real *A, const real *B, int M, int N, int K, int transA, int transB, real beta,
                   int gemv_ok)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_c(C, (size_t)M * (size_t)N, beta);
        return;
    }
    /* inside a grouped matmul's region: this thread's whole GEMM */
    if (omp_in_parallel()) {
        gemm(C, A, B, M, N, K, transA, transB, beta, gemv_ok);
        return;
    }
    cpu_blas_pin_serial();
    int by_rows = M >= N, len = by_rows ? M : N;
    int bs = mm_block(len), nb = (len + bs - 1) / bs;
    if (omp_get_max_threads() <= 1 || nb <= 1 || (double)M * N * K < MM_PAR_MIN_MACS) {
        if (omp_get_max_threads() > 1 && cpu_blas_is_openmp()) {
            /* an OpenMP OpenBLAS would thread it: an active region keeps it
             * on one thread */
#pragma omp parallel num_threads(2)
#pragma omp single
            gemm(C, A, B, M, N, K, transA, transB, beta, gemv_ok);
        } else {
            gemm(C, A, B, M, N, K, transA, transB, beta, gemv_ok);
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < nb; i++) {
        int lo = i * bs, hi = lo + bs < len ? lo + bs : len;
        gemm_block(C, A, B, M, N, K, transA, transB, beta, by_rows, lo, hi, gemv_ok);
    }
}

void CPU_FN(cpu_matmul)(real *C, const real *A, const real *B, int M, int N, int K, int transA, int transB,
                        real beta)
{
    matmul(C, A, B, M, N, K, transA, transB, beta, 1);
}

/* The three grouped matmuls: expert e's GEMM on its rows. */
enum gmm_kind { GMM_FWD, GMM_BWD_DATA, GMM_BWD_WEIGHT };

static void gmm_one(enum gmm_kind kind, real *out, const real *a, const real *b, const int32_t *offsets, int e,
                    int N, int K)
{
    int rows = offsets[e + 1] - offsets[e];
    size_t r0 = (size_t)offsets[e];
    const real *we = b + (size_t)e * N * K;
    switch (kind) {
    case GMM_FWD: /* Y_e [rows,N] = X_e [rows,K] W_e^T, W_e [N,K] */
        matmul(out + r0 * N, a + r0 * K, we, rows, N, K, 0, 1, (real)0, 0);
        break;
    case GMM_BWD_DATA: /* dX_e [rows,K] = dY_e [rows,N] W_e */
        matmul(out + r0 * K, a + r0 * N, we, rows, K, N, 0, 0, (real)0, 0);
        break;
    case GMM_BWD_WEIGHT: /* dW_e [N,K] += dY_e^T X_e (b is X here, not a weight) */
        matmul(out + (size_t)e * N * K, a + r0 * N, b + r0 * K, N, K, rows, 1, 0, (real)1, 0);
        break;
    }
}

/* Experts with rows, most rows first (ties by index, so the list, though not
 * the result, is reproducible). Returns how many. */
static int gmm_order(int *order, const int32_t *offsets, int E)
{
    int n = 0;
    for (int e = 0; e < E; e++) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows <= 0)
            continue;
        int i = n++;
        while (i > 0 && offsets[order[i - 1] + 1] - offsets[order[i - 1]] < rows) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = e;
    }
    return n;
}

static void gmm(enum gmm_kind kind, real *out, const real *a, const real *b, const int32_t *offsets, int E, int N,
                int K)
{
    if (E <= 0)
        return;
    int *order = fb_malloc((size_t)E * sizeof *order);
    int n = gmm_order(order, offsets, E);
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    /* Whole experts per thread take at least the biggest expert's time, the
     * blocked GEMMs one after another ideally total/threads: share experts
     * out unless the biggest is over twice that share (small experts lose
     * more than that to each GEMM's fork and join). Either way each expert
     * gets the same bits (the blocks give the one-thread GEMM's). */
    long total = n > 0 ? offsets[E] - offsets[0] : 0;
    long biggest = n > 0 ? offsets[order[0] + 1] - offsets[order[0]] : 0;
    if (threads <= 1 || n < threads || biggest * threads > 2 * total) {
        for (int e = 0; e < E; e++)
            if (offsets[e + 1] - offsets[e] > 0)
                gmm_one(kind, out, a, b, offsets, e, N, K);
    } else {
        cpu_blas_pin_serial();
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < n; i++)
            gmm_one(kind, out, a, b, offsets, order[i], N, K);
    }
    free(order);
}

void CPU_FN(cpu_gmm_fwd)(real *Y, const real *X, const real *W, const int32_t *offsets, int E, int N, int K)
{
    gmm(GMM_FWD, Y, X, W, offsets, E, N, K);
}

void CPU_FN(cpu_gmm_bwd_data)(real *dX, const real *dY, const real *W, const int32_t *offsets, int E, int N,
                              int K)
{
    gmm(GMM_BWD_DATA, dX, dY, W, offsets, E, N, K);
}

void CPU_FN(cpu_gmm_bwd_weight)(real *dW, const real *dY, const real *X, const int32_t *offsets, int E, int N,
                                int K)
{
    gmm(GMM_BWD_WEIGHT, dW, dY, X, offsets, E, N, K);
}
