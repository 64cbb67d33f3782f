/* Dense and grouped matmul on the CPU through CBLAS (row-major).
 *
 * BLAS itself always runs on one thread (blas_threads.h says why): a GEMM is
 * cut into blocks of C, from its shape alone (mm_cut), run in parallel,
 * each block one BLAS call.
 *
 * A grouped matmul is one GEMM per expert over its contiguous rows.
 * With one thread, fewer experts holding rows than threads, or one expert
 * holding most rows, the experts run one after another, each GEMM cut into
 * blocks as above. Otherwise
 * the experts are shared out whole among the OpenMP threads, each running
 * its experts' GEMMs alone (their blocks one after another): with 64-128
 * experts and a few rows
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

/* The blocks a GEMM is cut into, chosen from the shape alone and run the
 * same way at every thread count (in parallel, or one after another on one
 * thread or inside a grouped matmul's region): each block is one
 * single-threaded BLAS call, so C's bits depend on the shape only. They do
 * not equal the uncut GEMM's: OpenBLAS's Haswell kernels compute the rows
 * near its own internal block ends with other edge kernels, so a GEMM cut
 * at row 1024 differs from the whole in rows 1020-1060 (on its Prescott
 * kernels a cut at a multiple of 64 happened to agree). Blocks run along
 * the longer of C's two sides, in multiples of 64, at most 16 of them and
 * at least 256 long: each block packs the other operand again, which
 * costs a 1-thread GEMM 0-5% at 256 and 3-10% at 128 rows on this
 * machine's AVX2 kernels (bench/README.md, "GEMM blocks"). A GEMM
 * under 262144 multiply-adds (OpenBLAS's own threshold for threading,
 * 65536 x 4) or shorter than two blocks runs whole. */
#define MM_ALIGN 64
#define MM_MAX_BLOCKS 16
#define MM_MIN_BLOCK 256
#define MM_PAR_MIN_MACS 262144.0

typedef struct {
    int by_rows; /* blocks of C's rows, else of its columns */
    int len;     /* the side cut */
    int bs;      /* block length (the last one may be shorter) */
    int nb;      /* blocks; 1: the GEMM runs whole */
} mm_cut_t;

static mm_cut_t mm_cut(int M, int N, int K)
{
    mm_cut_t c = {.by_rows = M >= N, .len = M >= N ? M : N};
    c.bs = c.len, c.nb = 1;
    if ((double)M * N * K < MM_PAR_MIN_MACS || c.len < 2 * MM_MIN_BLOCK)
        return c;
    int per = (c.len + MM_MAX_BLOCKS - 1) / MM_MAX_BLOCKS;
    per = (per + MM_ALIGN - 1) / MM_ALIGN * MM_ALIGN;
    c.bs = per > MM_MIN_BLOCK ? per : MM_MIN_BLOCK;
    c.nb = (c.len + c.bs - 1) / c.bs;
    return c;
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
    const mm_cut_t cut = mm_cut(M, N, K);
    const int nested = omp_in_parallel(); /* inside a grouped matmul's region: this thread's whole GEMM */
    if (!nested)
        cpu_blas_pin_serial();
    if (cut.nb <= 1) {
        if (!nested && omp_get_max_threads() > 1 && cpu_blas_is_openmp()) {
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
#pragma omp parallel for schedule(static) if (!nested && omp_get_max_threads() > 1)
    for (int i = 0; i < cut.nb; i++) {
        int lo = i * cut.bs, hi = lo + cut.bs < cut.len ? lo + cut.bs : cut.len;
        gemm_block(C, A, B, M, N, K, transA, transB, beta, cut.by_rows, lo, hi, gemv_ok);
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
     * gets the same bits: the same blocks, the same BLAS calls. */
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
