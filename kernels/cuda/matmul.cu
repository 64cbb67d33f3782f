/* Dense and grouped matmul through cuBLASLt.
 *
 * Design:
 *  - Row-major to column-major: a row-major [M,N] matrix is the column-major
 *    [N,M] matrix with the same bytes, so C = op(A) op(B) is computed as
 *    C^T = op(B)^T op(A)^T: cuBLAS's "A" is our B and its "B" is our A, and
 *    each keeps its own transpose flag (the stored-matrix view below).
 *  - One cuBLASLt handle and one 32 MiB workspace, created by cu_blas_init.
 *    Every matmul runs on cuda_stream(), so the workspace is never used by
 *    two matmuls at once.
 *  - The heuristic query costs host time on every call, so the descriptors
 *    and the chosen algorithm are cached per (M, N, K, transposes, dtypes,
 *    beta != 0, pointer alignments) in a small set-associative table (64 sets
 *    of 4, least recently used way replaced). The alignments are part of the
 *    key because the heuristic is told them: the default assumption is 256
 *    bytes, and an algorithm picked under it may refuse (or misread) a slice
 *    like an expert's rows of a grouped matmul, which is only as aligned as
 *    offsets[e] * N elements happens to be.
 *  - The grouped matmuls are one cached matmul per expert with rows. Expert
 *    row counts change every step, so some of those queries miss the cache;
 *    a grouped-GEMM kernel would avoid that, at the price of a second code
 *    path to validate.
 *  - K == 0 is C = beta*C by a small kernel (beta 0 writes zeros, so garbage
 *    or NaN in C does not survive); cuBLASLt is not asked to handle it.
 *  - Host state is not thread-safe: one host thread issues all ops.
 */
#include <cublasLt.h>
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

static const size_t WORKSPACE_BYTES = (size_t)32 << 20;

static cublasLtHandle_t g_lt;
static void *g_workspace;

/* ---- plan cache ---- */

typedef struct {
    int M, N, K;
    int transA, transB, beta_nz;
    cudaDataType ab_type, c_type;
    uint32_t align_a, align_b, align_c; /* of our A, B, C pointers */
} plan_key_t;

typedef struct {
    int used;
    unsigned long long last_use;
    plan_key_t key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t lay_a, lay_b, lay_c; /* cuBLAS's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
} plan_t;

enum { PLAN_SETS = 64, PLAN_WAYS = 4 };
static plan_t g_plans[PLAN_SETS][PLAN_WAYS];
static unsigned long long g_clock;

static int key_eq(const plan_key_t *a, const plan_key_t *b)
{
    return a->M == b->M && a->N == b->N && a->K == b->K && a->transA == b->transA && a->transB == b->transB &&
           a->beta_nz == b->beta_nz && a->ab_type == b->ab_type && a->c_type == b->c_type &&
           a->align_a == b->align_a && a->align_b == b->align_b && a->align_c == b->align_c;
}

static uint64_t key_hash(const plan_key_t *k)
{
    const uint64_t f[] = {(uint64_t)(uint32_t)k->M,      (uint64_t)(uint32_t)k->N,      (uint64_t)(uint32_t)k->K,
                          (uint64_t)k->transA,           (uint64_t)k->transB,           (uint64_t)k->beta_nz,
                          (uint64_t)(uint32_t)k->ab_type, (uint64_t)(uint32_t)k->c_type, k->align_a,
                          k->align_b,                    k->align_c};
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the fields */
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        h ^= f[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* Largest power of two dividing the address, at most 256 (what cuBLASLt's
 * alignment preferences express). */
static uint32_t ptr_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1)) != 0)
        al >>= 1;
    return al;
}

static void plan_destroy(plan_t *p)
{
    if (!p->used)
        return;
    CHECK_CUBLASLT(cublasLtMatrixLayoutDestroy(p->lay_c));
    CHECK_CUBLASLT(cublasLtMatrixLayoutDestroy(p->lay_b));
    CHECK_CUBLASLT(cublasLtMatrixLayoutDestroy(p->lay_a));
    CHECK_CUBLASLT(cublasLtMatmulDescDestroy(p->op));
    p->used = 0;
}

static void plan_build(plan_t *p, const plan_key_t *k)
{
    const int32_t op_a = k->transB ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLAS's A is our B */
    const int32_t op_b = k->transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    CHECK_CUBLASLT(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));

    /* Column-major views of the stored matrices (rows, cols, ld):
     * our B stored [K,N] row-major is [N,K] col-major (ld N), used as is;
     * stored [N,K] (transB) is [K,N] col-major (ld K), transposed.
     * Our A stored [M,K] is [K,M] col-major (ld K), used as is;
     * stored [K,M] (transA) is [M,K] col-major (ld M), transposed.
     * C [M,N] row-major is [N,M] col-major (ld N). */
    const uint64_t M = (uint64_t)k->M, N = (uint64_t)k->N, K = (uint64_t)k->K;
    CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&p->lay_a, k->ab_type, k->transB ? K : N, k->transB ? N : K,
                                              (int64_t)(k->transB ? K : N)));
    CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&p->lay_b, k->ab_type, k->transA ? M : K, k->transA ? K : M,
                                              (int64_t)(k->transA ? M : K)));
    CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&p->lay_c, k->c_type, N, M, (int64_t)N));

    cublasLtMatmulPreference_t pref;
    const uint64_t ws = WORKSPACE_BYTES;
    CHECK_CUBLASLT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                        sizeof ws));
    CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                        &k->align_b, sizeof k->align_b));
    CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                        &k->align_a, sizeof k->align_a));
    CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                        &k->align_c, sizeof k->align_c));
    CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                        &k->align_c, sizeof k->align_c));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    memset(&res, 0, sizeof res);
    CHECK_CUBLASLT(cublasLtMatmulAlgoGetHeuristic(g_lt, p->op, p->lay_a, p->lay_b, p->lay_c, p->lay_c, pref, 1,
                                                  &res, &found));
    CHECK_CUBLASLT(cublasLtMatmulPreferenceDestroy(pref));
    if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic",
                     "no cuBLASLt algorithm for this matmul shape, dtype and alignment");
    p->algo = res.algo;
    p->key = *k;
    p->used = 1;
}

static const plan_t *plan_get(const plan_key_t *k)
{
    plan_t *set = g_plans[key_hash(k) % PLAN_SETS];
    plan_t *victim = &set[0];
    g_clock++;
    for (int w = 0; w < PLAN_WAYS; w++) {
        if (set[w].used && key_eq(&set[w].key, k)) {
            set[w].last_use = g_clock;
            return &set[w];
        }
        if (!set[w].used)
            victim = &set[w];
        else if (victim->used && set[w].last_use < victim->last_use)
            victim = &set[w];
    }
    plan_destroy(victim);
    plan_build(victim, k);
    victim->last_use = g_clock;
    return victim;
}

/* ---- lifetime ---- */

void cu_blas_init(void)
{
    if (g_lt)
        return;
    CHECK_CUBLASLT(cublasLtCreate(&g_lt));
    CHECK_CUDA(cudaMalloc(&g_workspace, WORKSPACE_BYTES));
}

void cu_blas_shutdown(void)
{
    if (!g_lt)
        return;
    /* matmuls in flight may still use the workspace */
    CHECK_CUDA(cudaDeviceSynchronize());
    for (int s = 0; s < PLAN_SETS; s++)
        for (int w = 0; w < PLAN_WAYS; w++)
            plan_destroy(&g_plans[s][w]);
    CHECK_CUDA(cudaFree(g_workspace));
    g_workspace = NULL;
    CHECK_CUBLASLT(cublasLtDestroy(g_lt));
    g_lt = NULL;
}

/* ---- dense matmul ---- */

template <typename T> __global__ void scale_kernel(T *c, size_t n, float beta)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        c[i] = beta == 0.0f ? from_f32<T>(0.0f) : from_f32<T>(beta * to_f32(c[i]));
}

/* C = beta*C, for K == 0 (the empty product). */
template <typename T> static void scale_c(T *C, size_t n, float beta)
{
    if (beta == 1.0f)
        return;
    const unsigned threads = 256;
    scale_kernel<T><<<cuda_blocks_for(n, threads), threads, 0, cuda_stream()>>>(C, n, beta);
    CHECK_CUDA_LAUNCH();
}

template <typename S> static cudaDataType dtype_of(void);
template <> cudaDataType dtype_of<__nv_bfloat16>(void) { return CUDA_R_16BF; }
template <> cudaDataType dtype_of<__half>(void) { return CUDA_R_16F; }
template <> cudaDataType dtype_of<float>(void) { return CUDA_R_32F; }

/* M, N, K > 0. */
template <typename S, typename T>
static void lt_matmul(T *C, const S *A, const S *B, int M, int N, int K, int transA, int transB, float beta)
{
    if (!g_lt)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "cu_matmul", "cu_blas_init was not called");
    plan_key_t key;
    memset(&key, 0, sizeof key);
    key.M = M;
    key.N = N;
    key.K = K;
    key.transA = transA != 0;
    key.transB = transB != 0;
    key.beta_nz = beta != 0.0f;
    key.ab_type = dtype_of<S>();
    key.c_type = dtype_of<T>();
    key.align_a = ptr_align(A);
    key.align_b = ptr_align(B);
    key.align_c = ptr_align(C);
    const plan_t *p = plan_get(&key);
    const float alpha = 1.0f;
    CHECK_CUBLASLT(cublasLtMatmul(g_lt, p->op, &alpha, B, p->lay_a, A, p->lay_b, &beta, C, p->lay_c, C, p->lay_c,
                                  &p->algo, g_workspace, WORKSPACE_BYTES, cuda_stream()));
}

template <typename S, typename T>
static void matmul_any(T *C, const S *A, const S *B, int M, int N, int K, int transA, int transB, float beta)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_c(C, (size_t)M * (size_t)N, beta);
        return;
    }
    lt_matmul(C, A, B, M, N, K, transA, transB, beta);
}

template <typename S>
void cu_matmul(S *C, const S *A, const S *B, int M, int N, int K, int transA, int transB, float beta)
{
    matmul_any(C, A, B, M, N, K, transA, transB, beta);
}

template <typename S>
void cu_matmul_f32(float *C, const S *A, const S *B, int M, int N, int K, int transA, int transB, float beta)
{
    matmul_any(C, A, B, M, N, K, transA, transB, beta);
}

/* ---- grouped matmul: one matmul per expert with rows ---- */

template <typename S> void cu_gmm_fwd(S *Y, const S *X, const S *W, const int32_t *offsets, int E, int N, int K)
{
    for (int e = 0; e < E; e++) {
        const int rows = offsets[e + 1] - offsets[e];
        if (rows <= 0)
            continue;
        const size_t r0 = (size_t)offsets[e];
        matmul_any(Y + r0 * N, X + r0 * K, W + (size_t)e * N * K, rows, N, K, 0, 1, 0.0f);
    }
}

template <typename S>
void cu_gmm_bwd_data(S *dX, const S *dY, const S *W, const int32_t *offsets, int E, int N, int K)
{
    for (int e = 0; e < E; e++) {
        const int rows = offsets[e + 1] - offsets[e];
        if (rows <= 0)
            continue;
        const size_t r0 = (size_t)offsets[e];
        matmul_any(dX + r0 * K, dY + r0 * N, W + (size_t)e * N * K, rows, K, N, 0, 0, 0.0f);
    }
}

template <typename S>
void cu_gmm_bwd_weight(float *dW, const S *dY, const S *X, const int32_t *offsets, int E, int N, int K)
{
    for (int e = 0; e < E; e++) {
        const int rows = offsets[e + 1] - offsets[e];
        if (rows <= 0)
            continue;
        const size_t r0 = (size_t)offsets[e];
        matmul_any(dW + (size_t)e * N * K, dY + r0 * N, X + r0 * K, N, K, rows, 1, 0, 1.0f);
    }
}

/* ---- instantiations ---- */

#define FB_INSTANTIATE(S)                                                                                      \
    template void cu_matmul<S>(S *, const S *, const S *, int, int, int, int, int, float);                   \
    template void cu_matmul_f32<S>(float *, const S *, const S *, int, int, int, int, int, float);           \
    template void cu_gmm_fwd<S>(S *, const S *, const S *, const int32_t *, int, int, int);                  \
    template void cu_gmm_bwd_data<S>(S *, const S *, const S *, const int32_t *, int, int, int);             \
    template void cu_gmm_bwd_weight<S>(float *, const S *, const S *, const int32_t *, int, int, int);
FB_INSTANTIATE(__nv_bfloat16)
FB_INSTANTIATE(__half)
#undef FB_INSTANTIATE
