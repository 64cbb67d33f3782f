/* The CPU backend's op table: host memory plus the fp32 kernels. */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "util/error.h"

/* 64 bytes: a cache line, and the widest SIMD load (AVX-512). */
#define CPU_ALIGN 64

static void *cpu_alloc(size_t bytes)
{
    size_t n = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (n < bytes) /* rounding wrapped around */
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "posix_memalign", "allocation size overflow");
    void *p = NULL;
    int rc = posix_memalign(&p, CPU_ALIGN, n ? n : CPU_ALIGN);
    if (rc != 0)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "posix_memalign", strerror(rc));
    memset(p, 0, n);
    return p;
}

static void cpu_release(void *p) { free(p); }

static void cpu_zero(void *p, size_t bytes)
{
    if (bytes)
        memset(p, 0, bytes);
}

/* Backend and host memory are the same on the CPU: every transfer is a copy. */
static void cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memcpy(dst, src, bytes);
}

/* Every CPU op has finished (its OpenMP regions joined, BLAS returned) by the
 * time it returns, so there is never outstanding work to wait for. */
static void cpu_synchronize(void) {}

/* ---- fb_act views: on the CPU an fb_act element is a float ---- */

#define F(p) ((float *)(p))
#define CF(p) ((const float *)(p))

static void cpu_to_act(fb_act *dst, const float *src, size_t n)
{
    if ((const void *)dst != (const void *)src && n)
        memcpy(dst, src, n * sizeof(float));
}

static void cpu_act_to_f32(float *dst, const fb_act *src, size_t n)
{
    if ((const void *)dst != (const void *)src && n)
        memcpy(dst, src, n * sizeof(float));
}

static void cpu_matmul_act(fb_act *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta, int tb,
                           float beta)
{
    cpu_matmul_f32(F(C), CF(A), CF(B), M, N, K, ta, tb, beta);
}

static void cpu_matmul_f32out(float *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta, int tb,
                              float beta)
{
    cpu_matmul_f32(C, CF(A), CF(B), M, N, K, ta, tb, beta);
}

static void cpu_act_axpy(fb_act *y, const fb_act *x, size_t n, float alpha) { cpu_axpy_f32(F(y), CF(x), n, alpha); }

static void cpu_embedding_fwd(fb_act *out, const int32_t *tok, const fb_act *tab, int T, int D)
{
    cpu_embedding_fwd_f32(F(out), tok, CF(tab), T, D);
}

static void cpu_embedding_bwd(float *dtab, const fb_act *dout, const int32_t *tok, int T, int D)
{
    cpu_embedding_bwd_f32(dtab, CF(dout), tok, T, D);
}

static void cpu_rmsnorm_fwd(fb_act *out, float *rstd, const fb_act *x, const fb_act *w, int T, int D, float eps)
{
    cpu_rmsnorm_fwd_f32(F(out), rstd, CF(x), CF(w), T, D, eps);
}

static void cpu_rmsnorm_bwd(fb_act *dx, float *dw, const fb_act *dout, const fb_act *x, const fb_act *w,
                            const float *rstd, int T, int D)
{
    cpu_rmsnorm_bwd_f32(F(dx), dw, CF(dout), CF(x), CF(w), rstd, T, D);
}

static void cpu_rope_fwd(fb_act *x, const int32_t *pos, int T, int nh, int hd, float th)
{
    cpu_rope_fwd_f32(F(x), pos, T, nh, hd, th);
}

static void cpu_rope_bwd(fb_act *x, const int32_t *pos, int T, int nh, int hd, float th)
{
    cpu_rope_bwd_f32(F(x), pos, T, nh, hd, th);
}

static void cpu_attention_fwd(fb_act *out, float *lse, const fb_act *q, const fb_act *k, const fb_act *v,
                              const int32_t *cu, int nseq, int T, int H, int KV, int hd)
{
    cpu_attention_fwd_f32(F(out), lse, CF(q), CF(k), CF(v), cu, nseq, T, H, KV, hd);
}

static void cpu_attention_bwd(fb_act *dq, fb_act *dk, fb_act *dv, const fb_act *dout, const fb_act *q,
                              const fb_act *k, const fb_act *v, const fb_act *out, const float *lse,
                              const int32_t *cu, int nseq, int T, int H, int KV, int hd)
{
    cpu_attention_bwd_f32(F(dq), F(dk), F(dv), CF(dout), CF(q), CF(k), CF(v), CF(out), lse, cu, nseq, T, H, KV,
                          hd);
}

static void cpu_decode_attention(fb_act *out, const fb_act *q, const fb_act *kc, const fb_act *vc, int n, int past,
                                 int H, int KV, int hd)
{
    cpu_decode_attention_f32(F(out), CF(q), CF(kc), CF(vc), n, past, H, KV, hd);
}

static void cpu_swiglu_fwd(fb_act *h, const fb_act *g, const fb_act *u, size_t n)
{
    cpu_swiglu_fwd_f32(F(h), CF(g), CF(u), n);
}

static void cpu_swiglu_bwd(fb_act *dg, fb_act *du, const fb_act *dh, const fb_act *g, const fb_act *u, size_t n)
{
    cpu_swiglu_bwd_f32(F(dg), F(du), CF(dh), CF(g), CF(u), n);
}

static void cpu_cross_entropy(float *loss, fb_act *dl, const fb_act *l, const int32_t *tg, int T, int V, float gs)
{
    cpu_cross_entropy_f32(loss, F(dl), CF(l), tg, T, V, gs);
}

static void cpu_router_bwd(fb_act *dl, const float *probs, const float *lse, const int32_t *idx, const float *w,
                           const float *dw, const float *aux, float z, int T, int E, int K)
{
    cpu_router_bwd_f32(F(dl), probs, lse, idx, w, dw, aux, z, T, E, K);
}

static void cpu_permute_fwd(fb_act *xp, const fb_act *x, const int32_t *rt, int R, int D)
{
    cpu_permute_fwd_f32(F(xp), CF(x), rt, R, D);
}

static void cpu_permute_bwd(fb_act *dx, const fb_act *dxp, const int32_t *tr, int T, int K, int D)
{
    cpu_permute_bwd_f32(F(dx), CF(dxp), tr, T, K, D);
}

static void cpu_combine_fwd(fb_act *y, const fb_act *eo, const int32_t *tr, const float *w, int T, int K, int D)
{
    cpu_combine_fwd_f32(F(y), CF(eo), tr, w, T, K, D);
}

static void cpu_combine_bwd(fb_act *deo, float *dw, const fb_act *dy, const fb_act *eo, const int32_t *tr,
                            const float *w, int T, int K, int D)
{
    cpu_combine_bwd_f32(F(deo), dw, CF(dy), CF(eo), tr, w, T, K, D);
}

static void cpu_gmm_fwd(fb_act *Y, const fb_act *X, const fb_act *W, const int32_t *off, int E, int N, int K)
{
    cpu_gmm_fwd_f32(F(Y), CF(X), CF(W), off, E, N, K);
}

static void cpu_gmm_bwd_data(fb_act *dX, const fb_act *dY, const fb_act *W, const int32_t *off, int E, int N, int K)
{
    cpu_gmm_bwd_data_f32(F(dX), CF(dY), CF(W), off, E, N, K);
}

static void cpu_gmm_bwd_weight(float *dW, const fb_act *dY, const fb_act *X, const int32_t *off, int E, int N, int K)
{
    cpu_gmm_bwd_weight_f32(dW, CF(dY), CF(X), off, E, N, K);
}

static void cpu_dropout_fwd(fb_act *x, uint8_t *mask, size_t n, float p, uint64_t seed, uint64_t off)
{
    cpu_dropout_fwd_f32(F(x), mask, n, p, seed, off);
}

static void cpu_dropout_bwd(fb_act *dx, const uint8_t *mask, size_t n, float p)
{
    cpu_dropout_bwd_f32(F(dx), mask, n, p);
}

static void cpu_dropout_rows_fwd(fb_act *x, uint8_t *mask, size_t rows, size_t width, float p, uint64_t seed,
                                 const uint64_t *row_offset)
{
    cpu_dropout_rows_fwd_f32(F(x), mask, rows, width, p, seed, row_offset);
}

static const ops_t cpu_ops = {
    .name = "cpu",
    .act_dtype = FB_DTYPE_F32,
    .act_bytes = sizeof(float),
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .to_backend = cpu_copy,
    .to_host = cpu_copy,
    .to_host_async = cpu_copy,
    .synchronize = cpu_synchronize,
    .host_alloc = cpu_alloc,
    .host_release = cpu_release,
    .to_act = cpu_to_act,
    .act_to_f32 = cpu_act_to_f32,
    .matmul = cpu_matmul_act,
    .matmul_f32 = cpu_matmul_f32out,
    .axpy = cpu_axpy_f32,
    .act_axpy = cpu_act_axpy,
    .scale = cpu_scale_f32,
    .sumsq = cpu_sumsq_f32,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .rope_fwd = cpu_rope_fwd,
    .rope_bwd = cpu_rope_bwd,
    .attention_fwd = cpu_attention_fwd,
    .attention_bwd = cpu_attention_bwd,
    .decode_attention = cpu_decode_attention,
    .swiglu_fwd = cpu_swiglu_fwd,
    .swiglu_bwd = cpu_swiglu_bwd,
    .cross_entropy = cpu_cross_entropy,
    .router_fwd = cpu_router_fwd_f32,
    .router_bwd = cpu_router_bwd,
    .permute_fwd = cpu_permute_fwd,
    .permute_bwd = cpu_permute_bwd,
    .combine_fwd = cpu_combine_fwd,
    .combine_bwd = cpu_combine_bwd,
    .gmm_fwd = cpu_gmm_fwd,
    .gmm_bwd_data = cpu_gmm_bwd_data,
    .gmm_bwd_weight = cpu_gmm_bwd_weight,
    .dropout_fwd = cpu_dropout_fwd,
    .dropout_bwd = cpu_dropout_bwd,
    .dropout_rows_fwd = cpu_dropout_rows_fwd,
    .adamw = cpu_adamw_f32,
};

const ops_t *ops_cpu(void) { return &cpu_ops; }
