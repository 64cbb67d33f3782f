/* The CUDA backend: device binding, streams, device memory, and the op
 * tables (one per compute dtype) that route every op to its launcher.
 *
 * All ops go to one compute stream, so they run in issue order without
 * host synchronisation; only to_host, sumsq and synchronize wait. A second
 * stream carries communication (src/parallel's NCCL backend), ordered
 * against compute with events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

extern "C" {
#include "ops.h"
}

static int g_device = -1;
static cudaStream_t g_compute, g_comm;
static cudaEvent_t g_order_event;
static void *g_scratch;
static size_t g_scratch_bytes;
static size_t g_in_use, g_peak;
static void free_cached(void);
static struct block *g_free;
static size_t g_nfree, g_free_cap;

cudaStream_t cuda_stream(void) { return g_compute; }

void *cuda_scratch(size_t bytes)
{
    if (bytes > g_scratch_bytes) {
        /* the old buffer may still be read by queued kernels */
        if (g_scratch) {
            CHECK_CUDA(cudaStreamSynchronize(g_compute));
            CHECK_CUDA(cudaFree(g_scratch));
        }
        size_t want = bytes + bytes / 4;
        CHECK_CUDA(cudaMalloc(&g_scratch, want));
        g_scratch_bytes = want;
    }
    return g_scratch;
}

extern "C" int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

extern "C" int cuda_backend_init(int device, char *err, size_t errlen)
{
    if (g_device == device)
        return 0;
    if (g_device >= 0) {
        snprintf(err, errlen, "CUDA backend already bound to device %d, asked for %d", g_device, device);
        return -1;
    }
    int n = cuda_device_count();
    if (device < 0 || device >= n) {
        snprintf(err, errlen, "no CUDA device %d (%d visible)", device, n);
        return -1;
    }
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaSetDevice(%d): %s", device, cudaGetErrorString(e));
        return -1;
    }
    CHECK_CUDA(cudaStreamCreateWithFlags(&g_compute, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&g_comm, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&g_order_event, cudaEventDisableTiming));
    g_device = device;
    cu_blas_init();
    return 0;
}

extern "C" void cuda_backend_shutdown(void)
{
    if (g_device < 0)
        return;
    CHECK_CUDA(cudaDeviceSynchronize());
    cu_blas_shutdown();
    free_cached();
    free(g_free);
    g_free = NULL;
    g_free_cap = 0;
    if (g_scratch)
        CHECK_CUDA(cudaFree(g_scratch));
    g_scratch = NULL;
    g_scratch_bytes = 0;
    cuda_events_release();
    CHECK_CUDA(cudaEventDestroy(g_order_event));
    CHECK_CUDA(cudaStreamDestroy(g_comm));
    CHECK_CUDA(cudaStreamDestroy(g_compute));
    g_device = -1;
}

extern "C" int cuda_backend_device(void) { return g_device; }

extern "C" void *cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    CHECK_CUDA(cudaMallocHost(&p, bytes ? bytes : 1));
    memset(p, 0, bytes);
    return p;
}

extern "C" void cuda_host_free(void *p)
{
    if (p)
        CHECK_CUDA(cudaFreeHost(p));
}

extern "C" void *cuda_compute_stream(void) { return (void *)g_compute; }
extern "C" void *cuda_comm_stream(void) { return (void *)g_comm; }

extern "C" void cuda_comm_wait_compute(void)
{
    CHECK_CUDA(cudaEventRecord(g_order_event, g_compute));
    CHECK_CUDA(cudaStreamWaitEvent(g_comm, g_order_event, 0));
}

extern "C" void cuda_compute_wait_comm(void)
{
    CHECK_CUDA(cudaEventRecord(g_order_event, g_comm));
    CHECK_CUDA(cudaStreamWaitEvent(g_compute, g_order_event, 0));
}

extern "C" size_t cuda_bytes_in_use(void) { return g_in_use; }
extern "C" size_t cuda_bytes_peak(void) { return g_peak; }

/* ---- memory ----
 *
 * A caching allocator: released blocks go to a free list by size class and
 * are handed out again without cudaMalloc/cudaFree, which synchronise the
 * device. Reuse is safe without waiting because every op runs on the one
 * compute stream, in issue order: a block's next user is queued after its
 * last one. (Collectives on the comm stream are waited for, which makes the
 * compute stream wait on them, before their buffers are released.) */

typedef struct block {
    void *p;
    size_t size; /* the size class */
} block_t;

static block_t *g_live;          /* open-addressing map: pointer -> size class */
static size_t g_live_cap, g_nlive;

static size_t size_class(size_t bytes)
{
    if (bytes <= 512)
        return 512;
    if (bytes <= ((size_t)1 << 20)) {
        size_t c = 1024;
        while (c < bytes)
            c <<= 1;
        return c;
    }
    const size_t two_mib = (size_t)2 << 20;
    return (bytes + two_mib - 1) / two_mib * two_mib;
}

static size_t live_slot(const void *p, size_t cap)
{
    uintptr_t h = (uintptr_t)p >> 8;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 7) & (cap - 1);
}

static void live_insert(void *p, size_t size);

static void live_grow(void)
{
    block_t *old = g_live;
    size_t oldcap = g_live_cap;
    g_live_cap = oldcap ? oldcap * 2 : 1024;
    g_live = (block_t *)calloc(g_live_cap, sizeof *g_live);
    if (!g_live)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "calloc", "out of host memory (allocation map)");
    g_nlive = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].p)
            live_insert(old[i].p, old[i].size);
    free(old);
}

static void live_insert(void *p, size_t size)
{
    if (2 * (g_nlive + 1) > g_live_cap)
        live_grow();
    size_t i = live_slot(p, g_live_cap);
    while (g_live[i].p)
        i = (i + 1) & (g_live_cap - 1);
    g_live[i].p = p;
    g_live[i].size = size;
    g_nlive++;
}

/* Removes p and returns its size class; 0 when p was not allocated here. */
static size_t live_remove(void *p)
{
    if (!g_live_cap)
        return 0;
    size_t i = live_slot(p, g_live_cap);
    while (g_live[i].p && g_live[i].p != p)
        i = (i + 1) & (g_live_cap - 1);
    if (!g_live[i].p)
        return 0;
    size_t size = g_live[i].size;
    g_live[i].p = NULL;
    g_nlive--;
    /* re-seat the rest of the probe run */
    for (size_t j = (i + 1) & (g_live_cap - 1); g_live[j].p; j = (j + 1) & (g_live_cap - 1)) {
        block_t b = g_live[j];
        g_live[j].p = NULL;
        g_nlive--;
        live_insert(b.p, b.size);
    }
    return size;
}

static void free_cached(void)
{
    if (!g_nfree)
        return;
    CHECK_CUDA(cudaDeviceSynchronize());
    for (size_t i = 0; i < g_nfree; i++)
        CHECK_CUDA(cudaFree(g_free[i].p));
    g_nfree = 0;
}

static void *cu_alloc(size_t bytes)
{
    if (g_device < 0)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "cu_alloc", "cuda_backend_init was not called");
    const size_t size = size_class(bytes);
    void *p = NULL;
    for (size_t i = 0; i < g_nfree; i++)
        if (g_free[i].size == size) {
            p = g_free[i].p;
            g_free[i] = g_free[--g_nfree];
            break;
        }
    if (!p) {
        cudaError_t e = cudaMalloc(&p, size);
        if (e == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            free_cached(); /* give the cache back and try once more */
            e = cudaMalloc(&p, size);
        }
        if (e != cudaSuccess) {
            char what[160];
            snprintf(what, sizeof what, "%s (asked %zu bytes; %zu in use through the op table)",
                     cudaGetErrorString(e), bytes, g_in_use);
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "cudaMalloc", what);
        }
    }
    if (bytes)
        CHECK_CUDA(cudaMemsetAsync(p, 0, bytes, g_compute));
    live_insert(p, size);
    g_in_use += size;
    if (g_in_use > g_peak)
        g_peak = g_in_use;
    return p;
}

static void cu_release(void *p)
{
    if (!p)
        return;
    const size_t size = live_remove(p);
    if (!size)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "cu_release", "pointer not allocated by the CUDA backend");
    g_in_use -= size;
    if (g_nfree == g_free_cap) {
        g_free_cap = g_free_cap ? 2 * g_free_cap : 64;
        g_free = (struct block *)realloc(g_free, g_free_cap * sizeof *g_free);
        if (!g_free)
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "realloc", "out of host memory (free list)");
    }
    g_free[g_nfree].p = p;
    g_free[g_nfree].size = size;
    g_nfree++;
}

static void cu_zero(void *p, size_t bytes)
{
    if (bytes)
        CHECK_CUDA(cudaMemsetAsync(p, 0, bytes, g_compute));
}

static void cu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_compute));
}

/* From page-locked memory the copy stays queued (the caller keeps the source
 * untouched until synchronize, as ops.h says of host_alloc memory). From
 * pageable memory the CUDA documents promise no more than "might be
 * synchronous", so the copy is waited for: callers reuse or free such
 * buffers at once. */
static void cu_to_backend(void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g_compute));
    cudaPointerAttributes attr;
    CHECK_CUDA(cudaPointerGetAttributes(&attr, src));
    if (attr.type == cudaMemoryTypeUnregistered)
        CHECK_CUDA(cudaStreamSynchronize(g_compute));
}

static void cu_to_host(void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_compute));
    CHECK_CUDA(cudaStreamSynchronize(g_compute));
}

static void cu_to_host_async(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_compute));
}

static void cu_synchronize(void) { CHECK_CUDA(cudaStreamSynchronize(g_compute)); }

/* ---- the tables ---- */

/* fb_act is opaque to C; here it is S. */
#define A(p) ((S *)(p))
#define CA(p) ((const S *)(p))

template <typename S> struct table {
    static void to_act(fb_act *d, const float *s, size_t n) { cu_to_act<S>(A(d), s, n); }
    static void act_to_f32(float *d, const fb_act *s, size_t n) { cu_act_to_f32<S>(d, CA(s), n); }
    static void matmul(fb_act *C, const fb_act *Am, const fb_act *B, int M, int N, int K, int ta, int tb, float beta)
    {
        cu_matmul<S>(A(C), CA(Am), CA(B), M, N, K, ta, tb, beta);
    }
    static void matmul_f32(float *C, const fb_act *Am, const fb_act *B, int M, int N, int K, int ta, int tb,
                           float beta)
    {
        cu_matmul_f32<S>(C, CA(Am), CA(B), M, N, K, ta, tb, beta);
    }
    static void act_axpy(fb_act *y, const fb_act *x, size_t n, float a) { cu_act_axpy<S>(A(y), CA(x), n, a); }
    static void embedding_fwd(fb_act *out, const int32_t *tok, const fb_act *tab, int T, int D)
    {
        cu_embedding_fwd<S>(A(out), tok, CA(tab), T, D);
    }
    static void embedding_bwd(float *dt, const fb_act *dout, const int32_t *tok, int T, int D)
    {
        cu_embedding_bwd<S>(dt, CA(dout), tok, T, D);
    }
    static void rmsnorm_fwd(fb_act *out, float *rstd, const fb_act *x, const fb_act *w, int T, int D, float eps)
    {
        cu_rmsnorm_fwd<S>(A(out), rstd, CA(x), CA(w), T, D, eps);
    }
    static void rmsnorm_bwd(fb_act *dx, float *dw, const fb_act *dout, const fb_act *x, const fb_act *w,
                            const float *rstd, int T, int D)
    {
        cu_rmsnorm_bwd<S>(A(dx), dw, CA(dout), CA(x), CA(w), rstd, T, D);
    }
    static void rope_fwd(fb_act *x, const int32_t *pos, int T, int nh, int hd, float th)
    {
        cu_rope_fwd<S>(A(x), pos, T, nh, hd, th);
    }
    static void rope_bwd(fb_act *x, const int32_t *pos, int T, int nh, int hd, float th)
    {
        cu_rope_bwd<S>(A(x), pos, T, nh, hd, th);
    }
    static void attention_fwd(fb_act *out, float *lse, const fb_act *q, const fb_act *k, const fb_act *v,
                              const int32_t *cu, int nseq, int T, int H, int KV, int hd)
    {
        cu_attention_fwd<S>(A(out), lse, CA(q), CA(k), CA(v), cu, nseq, T, H, KV, hd);
    }
    static void attention_bwd(fb_act *dq, fb_act *dk, fb_act *dv, const fb_act *dout, const fb_act *q,
                              const fb_act *k, const fb_act *v, const fb_act *out, const float *lse,
                              const int32_t *cu, int nseq, int T, int H, int KV, int hd)
    {
        cu_attention_bwd<S>(A(dq), A(dk), A(dv), CA(dout), CA(q), CA(k), CA(v), CA(out), lse, cu, nseq, T, H, KV,
                            hd);
    }
    static void decode_attention(fb_act *out, const fb_act *q, const fb_act *kc, const fb_act *vc, int n, int past,
                                 int H, int KV, int hd)
    {
        cu_decode_attention<S>(A(out), CA(q), CA(kc), CA(vc), n, past, H, KV, hd);
    }
    static void swiglu_fwd(fb_act *h, const fb_act *g, const fb_act *u, size_t n)
    {
        cu_swiglu_fwd<S>(A(h), CA(g), CA(u), n);
    }
    static void swiglu_bwd(fb_act *dg, fb_act *du, const fb_act *dh, const fb_act *g, const fb_act *u, size_t n)
    {
        cu_swiglu_bwd<S>(A(dg), A(du), CA(dh), CA(g), CA(u), n);
    }
    static void cross_entropy(float *loss, fb_act *dl, const fb_act *l, const int32_t *tg, int T, int V, float gs)
    {
        cu_cross_entropy<S>(loss, A(dl), CA(l), tg, T, V, gs);
    }
    static void router_bwd(fb_act *dl, const float *probs, const float *lse, const int32_t *idx, const float *w,
                           const float *dw, const float *aux, float z, int T, int E, int K)
    {
        cu_router_bwd<S>(A(dl), probs, lse, idx, w, dw, aux, z, T, E, K);
    }
    static void permute_fwd(fb_act *xp, const fb_act *x, const int32_t *rt, int R, int D)
    {
        cu_permute_fwd<S>(A(xp), CA(x), rt, R, D);
    }
    static void permute_bwd(fb_act *dx, const fb_act *dxp, const int32_t *tr, int T, int K, int D)
    {
        cu_permute_bwd<S>(A(dx), CA(dxp), tr, T, K, D);
    }
    static void combine_fwd(fb_act *y, const fb_act *eo, const int32_t *tr, const float *w, int T, int K, int D)
    {
        cu_combine_fwd<S>(A(y), CA(eo), tr, w, T, K, D);
    }
    static void combine_bwd(fb_act *deo, float *dw, const fb_act *dy, const fb_act *eo, const int32_t *tr,
                            const float *w, int T, int K, int D)
    {
        cu_combine_bwd<S>(A(deo), dw, CA(dy), CA(eo), tr, w, T, K, D);
    }
    static void gmm_fwd(fb_act *Y, const fb_act *X, const fb_act *W, const int32_t *off, int E, int N, int K)
    {
        cu_gmm_fwd<S>(A(Y), CA(X), CA(W), off, E, N, K);
    }
    static void gmm_bwd_data(fb_act *dX, const fb_act *dY, const fb_act *W, const int32_t *off, int E, int N, int K)
    {
        cu_gmm_bwd_data<S>(A(dX), CA(dY), CA(W), off, E, N, K);
    }
    static void gmm_bwd_weight(float *dW, const fb_act *dY, const fb_act *X, const int32_t *off, int E, int N, int K)
    {
        cu_gmm_bwd_weight<S>(dW, CA(dY), CA(X), off, E, N, K);
    }
    static void dropout_fwd(fb_act *x, uint8_t *mask, size_t n, float p, uint64_t seed, uint64_t off)
    {
        cu_dropout_fwd<S>(A(x), mask, n, p, seed, off);
    }
    static void dropout_bwd(fb_act *dx, const uint8_t *mask, size_t n, float p)
    {
        cu_dropout_bwd<S>(A(dx), mask, n, p);
    }
    static void dropout_rows_fwd(fb_act *x, uint8_t *mask, size_t rows, size_t width, float p, uint64_t seed,
                                 const uint64_t *row_offset)
    {
        cu_dropout_rows_fwd<S>(A(x), mask, rows, width, p, seed, row_offset);
    }

    static ops_t make(const char *name, fb_dtype_t dt)
    {
        ops_t o;
        memset(&o, 0, sizeof o);
        o.name = name;
        o.act_dtype = dt;
        o.act_bytes = sizeof(S);
        o.device_memory = 1;
        o.alloc = cu_alloc;
        o.release = cu_release;
        o.zero = cu_zero;
        o.copy = cu_copy;
        o.to_backend = cu_to_backend;
        o.to_host = cu_to_host;
        o.to_host_async = cu_to_host_async;
        o.synchronize = cu_synchronize;
        o.host_alloc = cuda_host_alloc;
        o.host_release = cuda_host_free;
        o.to_act = to_act;
        o.act_to_f32 = act_to_f32;
        o.matmul = matmul;
        o.matmul_f32 = matmul_f32;
        o.axpy = cu_axpy;
        o.act_axpy = act_axpy;
        o.scale = cu_scale;
        o.sumsq = cu_sumsq;
        o.embedding_fwd = embedding_fwd;
        o.embedding_bwd = embedding_bwd;
        o.rmsnorm_fwd = rmsnorm_fwd;
        o.rmsnorm_bwd = rmsnorm_bwd;
        o.rope_fwd = rope_fwd;
        o.rope_bwd = rope_bwd;
        o.attention_fwd = attention_fwd;
        o.attention_bwd = attention_bwd;
        o.decode_attention = decode_attention;
        o.swiglu_fwd = swiglu_fwd;
        o.swiglu_bwd = swiglu_bwd;
        o.cross_entropy = cross_entropy;
        o.router_fwd = cu_router_fwd;
        o.router_bwd = router_bwd;
        o.permute_fwd = permute_fwd;
        o.permute_bwd = permute_bwd;
        o.combine_fwd = combine_fwd;
        o.combine_bwd = combine_bwd;
        o.gmm_fwd = gmm_fwd;
        o.gmm_bwd_data = gmm_bwd_data;
        o.gmm_bwd_weight = gmm_bwd_weight;
        o.dropout_fwd = dropout_fwd;
        o.dropout_bwd = dropout_bwd;
        o.dropout_rows_fwd = dropout_rows_fwd;
        o.adamw = cu_adamw;
        return o;
    }
};

extern "C" const ops_t *ops_cuda(fb_dtype_t act_dtype)
{
    static ops_t bf16, f16;
    static int made;
    if (!made) {
        bf16 = table<__nv_bfloat16>::make("cuda-bf16", FB_DTYPE_BF16);
        f16 = table<__half>::make("cuda-fp16", FB_DTYPE_F16);
        made = 1;
    }
    switch (act_dtype) {
    case FB_DTYPE_BF16: return &bf16;
    case FB_DTYPE_F16: return &f16;
    default:
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "ops_cuda", "the CUDA backend computes in bf16 or fp16");
    }
}
