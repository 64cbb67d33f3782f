/* The CPU kernels behind 16-bit fb_act storage (ops_cpu16() in ops.h).
 *
 * The model has code that runs only when act_bytes != 4 (the rounded
 * compute copy of the weights, element offsets scaled by act_bytes, the
 * widening of kept logits, the bf16/fp16 expert all-to-all). This backend
 * runs that code on any machine: fb_act buffers hold bf16 or fp16 bit
 * patterns, and every op widens its 16-bit inputs into fp32 temporaries,
 * runs the fp32 CPU kernel (through ops_cpu()'s table) and rounds its 16-bit
 * outputs back to nearest even. An op's result is therefore the fp32
 * kernel's on the rounded inputs, rounded once: the rounding points of a GPU
 * backend that stores 16-bit values and accumulates in fp32, though not its
 * bits (summation orders differ).
 *
 * An output the op accumulates into (or updates in place) is widened first;
 * an overwritten one starts from a zeroed temporary, and only the elements
 * the fp32 kernel writes are rounded back, so what the op leaves alone stays
 * as it was. Temporaries are allocated per call: slow, but reentrant, and
 * this backend exists for tests.
 */
#include "ops.h"

#include <stdint.h>
#include <stdlib.h>

#include "cpu/cpu_kernels.h"
#include "cpu/half_conv.h"
#include "util/error.h"

#define CPU (ops_cpu())
/* an fp32 temporary as the fp32 table's fb_act (a float on the CPU) */
#define FA(p) ((fb_act *)(p))

static size_t nz(int x) { return x > 0 ? (size_t)x : 0; }

/* n fp32 elements, zeroed (calloc checks n * 4 for overflow) */
static float *tmp(size_t n) { return fb_calloc(n ? n : 1, sizeof(float)); }

/* element i of a 16-bit buffer, as bits and as fb_act */
static uint16_t *h16(const fb_act *p, size_t i) { return (uint16_t *)(uintptr_t)p + i; }
static fb_act *at16(const fb_act *p, size_t i) { return (fb_act *)(void *)h16(p, i); }

static void widen(fb_dtype_t dt, float *dst, const fb_act *src, size_t n)
{
    const uint16_t *s = h16(src, 0);
    if (dt == FB_DTYPE_BF16) {
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
        for (size_t i = 0; i < n; i++)
            dst[i] = fb_bf16_to_f32(s[i]);
    } else {
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
        for (size_t i = 0; i < n; i++)
            dst[i] = fb_f16_to_f32(s[i]);
    }
}

static void narrow(fb_dtype_t dt, fb_act *dst, const float *src, size_t n)
{
    uint16_t *d = h16(dst, 0);
    if (dt == FB_DTYPE_BF16) {
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
        for (size_t i = 0; i < n; i++)
            d[i] = fb_bf16_from_f32(src[i]);
    } else {
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
        for (size_t i = 0; i < n; i++)
            d[i] = fb_f16_from_f32(src[i]);
    }
}

/* A new fp32 copy of n elements of src. */
static float *widened(fb_dtype_t dt, const fb_act *src, size_t n)
{
    float *t = tmp(n);
    if (n)
        widen(dt, t, src, n);
    return t;
}

/* Rows an index array refers to: one past the largest index (negative
 * entries are padding or dropped assignments). */
static size_t rows_indexed(const int32_t *idx, size_t n)
{
    size_t rows = 0;
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= 0 && (size_t)idx[i] + 1 > rows)
            rows = (size_t)idx[i] + 1;
    return rows;
}

/* ---------------------------------------------------------------- ops */

static void h_to_act(fb_dtype_t dt, fb_act *dst, const float *src, size_t n) { narrow(dt, dst, src, n); }

static void h_act_to_f32(fb_dtype_t dt, float *dst, const fb_act *src, size_t n) { widen(dt, dst, src, n); }

static void h_matmul(fb_dtype_t dt, fb_act *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta,
                     int tb, float beta)
{
    const size_t mn = nz(M) * nz(N);
    float *a = widened(dt, A, nz(M) * nz(K)), *b = widened(dt, B, nz(K) * nz(N));
    float *c = beta != 0.0f ? widened(dt, C, mn) : tmp(mn);
    CPU->matmul(FA(c), FA(a), FA(b), M, N, K, ta, tb, beta);
    narrow(dt, C, c, mn);
    free(a);
    free(b);
    free(c);
}

static void h_matmul_f32(fb_dtype_t dt, float *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta,
                         int tb, float beta)
{
    float *a = widened(dt, A, nz(M) * nz(K)), *b = widened(dt, B, nz(K) * nz(N));
    CPU->matmul_f32(C, FA(a), FA(b), M, N, K, ta, tb, beta);
    free(a);
    free(b);
}

static void h_act_axpy(fb_dtype_t dt, fb_act *y, const fb_act *x, size_t n, float alpha)
{
    float *yf = widened(dt, y, n), *xf = widened(dt, x, n);
    CPU->act_axpy(FA(yf), FA(xf), n, alpha);
    narrow(dt, y, yf, n);
    free(yf);
    free(xf);
}

static void h_embedding_fwd(fb_dtype_t dt, fb_act *out, const int32_t *tok, const fb_act *tab, int T, int D)
{
    for (int t = 0; t < T; t++)
        FB_ASSERT(tok[t] >= 0);
    const size_t n = nz(T) * nz(D);
    float *tf = widened(dt, tab, rows_indexed(tok, nz(T)) * nz(D)), *o = tmp(n);
    CPU->embedding_fwd(FA(o), tok, FA(tf), T, D);
    narrow(dt, out, o, n);
    free(tf);
    free(o);
}

static void h_embedding_bwd(fb_dtype_t dt, float *dtab, const fb_act *dout, const int32_t *tok, int T, int D)
{
    float *d = widened(dt, dout, nz(T) * nz(D));
    CPU->embedding_bwd(dtab, FA(d), tok, T, D);
    free(d);
}

static void h_rmsnorm_fwd(fb_dtype_t dt, fb_act *out, float *rstd, const fb_act *x, const fb_act *w, int T, int D,
                          float eps)
{
    const size_t n = nz(T) * nz(D);
    float *xf = widened(dt, x, n), *wf = widened(dt, w, nz(D)), *o = tmp(n);
    CPU->rmsnorm_fwd(FA(o), rstd, FA(xf), FA(wf), T, D, eps);
    narrow(dt, out, o, n);
    free(xf);
    free(wf);
    free(o);
}

static void h_rmsnorm_bwd(fb_dtype_t dt, fb_act *dx, float *dw, const fb_act *dout, const fb_act *x,
                          const fb_act *w, const float *rstd, int T, int D)
{
    const size_t n = nz(T) * nz(D);
    float *dxf = widened(dt, dx, n), *df = widened(dt, dout, n), *xf = widened(dt, x, n);
    float *wf = widened(dt, w, nz(D));
    CPU->rmsnorm_bwd(FA(dxf), dw, FA(df), FA(xf), FA(wf), rstd, T, D);
    narrow(dt, dx, dxf, n);
    free(dxf);
    free(df);
    free(xf);
    free(wf);
}

/* rope_fwd and rope_bwd: in place */
static void h_rope(fb_dtype_t dt, int bwd, fb_act *x, const int32_t *pos, int T, int nh, int hd, float th)
{
    const size_t n = nz(T) * nz(nh) * nz(hd);
    float *xf = widened(dt, x, n);
    if (bwd)
        CPU->rope_bwd(FA(xf), pos, T, nh, hd, th);
    else
        CPU->rope_fwd(FA(xf), pos, T, nh, hd, th);
    narrow(dt, x, xf, n);
    free(xf);
}

static void h_attention_fwd(fb_dtype_t dt, fb_act *out, float *lse, const fb_act *q, const fb_act *k,
                            const fb_act *v, const int32_t *cu, int nseq, int T, int H, int KV, int hd)
{
    const size_t nq = nz(T) * nz(H) * nz(hd), nk = nz(T) * nz(KV) * nz(hd);
    float *qf = widened(dt, q, nq), *kf = widened(dt, k, nk), *vf = widened(dt, v, nk), *o = tmp(nq);
    CPU->attention_fwd(FA(o), lse, FA(qf), FA(kf), FA(vf), cu, nseq, T, H, KV, hd);
    narrow(dt, out, o, nq);
    free(qf);
    free(kf);
    free(vf);
    free(o);
}

static void h_decode_attention(fb_dtype_t dt, fb_act *out, const fb_act *q, const fb_act *kc, const fb_act *vc,
                               int n, int past, int H, int KV, int hd)
{
    const size_t nq = nz(n) * nz(H) * nz(hd), nk = (nz(past) + nz(n)) * nz(KV) * nz(hd);
    float *qf = widened(dt, q, nq), *kf = widened(dt, kc, nk), *vf = widened(dt, vc, nk), *o = tmp(nq);
    CPU->decode_attention(FA(o), FA(qf), FA(kf), FA(vf), n, past, H, KV, hd);
    narrow(dt, out, o, nq);
    free(qf);
    free(kf);
    free(vf);
    free(o);
}

static void h_attention_bwd(fb_dtype_t dt, fb_act *dq, fb_act *dk, fb_act *dv, const fb_act *dout,
                            const fb_act *q, const fb_act *k, const fb_act *v, const fb_act *out,
                            const float *lse, const int32_t *cu, int nseq, int T, int H, int KV, int hd)
{
    const size_t nq = nz(T) * nz(H) * nz(hd), nk = nz(T) * nz(KV) * nz(hd);
    float *df = widened(dt, dout, nq), *qf = widened(dt, q, nq), *of = widened(dt, out, nq);
    float *kf = widened(dt, k, nk), *vf = widened(dt, v, nk);
    float *dqf = tmp(nq), *dkf = tmp(nk), *dvf = tmp(nk);
    CPU->attention_bwd(FA(dqf), FA(dkf), FA(dvf), FA(df), FA(qf), FA(kf), FA(vf), FA(of), lse, cu, nseq, T, H,
                       KV, hd);
    narrow(dt, dq, dqf, nq);
    narrow(dt, dk, dkf, nk);
    narrow(dt, dv, dvf, nk);
    float *all[] = {df, qf, of, kf, vf, dqf, dkf, dvf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void h_swiglu_fwd(fb_dtype_t dt, fb_act *h, const fb_act *g, const fb_act *u, size_t n)
{
    float *gf = widened(dt, g, n), *uf = widened(dt, u, n), *hf = tmp(n);
    CPU->swiglu_fwd(FA(hf), FA(gf), FA(uf), n);
    narrow(dt, h, hf, n);
    free(gf);
    free(uf);
    free(hf);
}

static void h_swiglu_bwd(fb_dtype_t dt, fb_act *dg, fb_act *du, const fb_act *dh, const fb_act *g,
                         const fb_act *u, size_t n)
{
    float *dhf = widened(dt, dh, n), *gf = widened(dt, g, n), *uf = widened(dt, u, n);
    float *dgf = tmp(n), *duf = tmp(n);
    CPU->swiglu_bwd(FA(dgf), FA(duf), FA(dhf), FA(gf), FA(uf), n);
    narrow(dt, dg, dgf, n);
    narrow(dt, du, duf, n);
    free(dhf);
    free(gf);
    free(uf);
    free(dgf);
    free(duf);
}

/* dlogits may alias logits: the fp32 kernel allows it, so one temporary
 * serves as both; the logits are read only from it. */
static void h_cross_entropy(fb_dtype_t dt, float *loss, fb_act *dl, const fb_act *l, const int32_t *tg, int T,
                            int V, float gs)
{
    const size_t n = nz(T) * nz(V);
    float *lf = widened(dt, l, n);
    float *df = (const void *)dl == (const void *)l ? lf : tmp(n);
    CPU->cross_entropy(loss, FA(df), FA(lf), tg, T, V, gs);
    narrow(dt, dl, df, n);
    if (df != lf)
        free(df);
    free(lf);
}

static void h_router_bwd(fb_dtype_t dt, fb_act *dl, const float *probs, const float *lse, const int32_t *idx,
                         const float *w, const float *dw, const float *aux, float z, int T, int E, int K)
{
    const size_t n = nz(T) * nz(E);
    float *d = tmp(n);
    CPU->router_bwd(FA(d), probs, lse, idx, w, dw, aux, z, T, E, K);
    narrow(dt, dl, d, n);
    free(d);
}

static void h_permute_fwd(fb_dtype_t dt, fb_act *xp, const fb_act *x, const int32_t *rt, int R, int D)
{
    const size_t n = nz(R) * nz(D);
    float *xf = widened(dt, x, rows_indexed(rt, nz(R)) * nz(D)), *o = tmp(n);
    CPU->permute_fwd(FA(o), FA(xf), rt, R, D);
    narrow(dt, xp, o, n);
    free(xf);
    free(o);
}

static void h_permute_bwd(fb_dtype_t dt, fb_act *dx, const fb_act *dxp, const int32_t *tr, int T, int K, int D)
{
    const size_t n = nz(T) * nz(D);
    float *dxf = widened(dt, dx, n), *dpf = widened(dt, dxp, rows_indexed(tr, nz(T) * nz(K)) * nz(D));
    CPU->permute_bwd(FA(dxf), FA(dpf), tr, T, K, D);
    narrow(dt, dx, dxf, n);
    free(dxf);
    free(dpf);
}

static void h_combine_fwd(fb_dtype_t dt, fb_act *y, const fb_act *eo, const int32_t *tr, const float *w, int T,
                          int K, int D)
{
    const size_t n = nz(T) * nz(D);
    float *ef = widened(dt, eo, rows_indexed(tr, nz(T) * nz(K)) * nz(D)), *yf = tmp(n);
    CPU->combine_fwd(FA(yf), FA(ef), tr, w, T, K, D);
    narrow(dt, y, yf, n);
    free(ef);
    free(yf);
}

/* deo gets only the rows of kept assignments; the others stay as they are. */
static void h_combine_bwd(fb_dtype_t dt, fb_act *deo, float *dw, const fb_act *dy, const fb_act *eo,
                          const int32_t *tr, const float *w, int T, int K, int D)
{
    const size_t tk = nz(T) * nz(K), rows = rows_indexed(tr, tk), d = nz(D);
    float *dyf = widened(dt, dy, nz(T) * d), *ef = widened(dt, eo, rows * d), *def = tmp(rows * d);
    CPU->combine_bwd(FA(def), dw, FA(dyf), FA(ef), tr, w, T, K, D);
    /* each kept assignment has its own row: the rows go to threads whole */
#pragma omp parallel for schedule(static) if (tk * d >= CPU_PAR_MIN_ELEMS)
    for (size_t i = 0; i < tk; i++)
        if (tr[i] >= 0)
            narrow(dt, at16(deo, (size_t)tr[i] * d), def + (size_t)tr[i] * d, d);
    free(dyf);
    free(ef);
    free(def);
}

/* Grouped matmuls touch rows [lo, hi) of their row buffers, lo and hi the
 * extremes of offsets; the temporaries hold just those, with the offsets
 * shifted by lo (returned; the caller frees it). */
static int32_t *gmm_rebase(const int32_t *offsets, int E, int32_t *lo, int32_t *hi)
{
    *lo = *hi = offsets[0];
    for (int e = 1; e <= E; e++) {
        *lo = offsets[e] < *lo ? offsets[e] : *lo;
        *hi = offsets[e] > *hi ? offsets[e] : *hi;
    }
    FB_ASSERT(*lo >= 0);
    int32_t *off = fb_malloc(((size_t)nz(E) + 1) * sizeof *off);
    for (int e = 0; e <= E; e++)
        off[e] = offsets[e] - *lo;
    return off;
}

/* Rounds back the rows of experts that have any (what the kernel wrote).
 * When the offsets never decrease (the MoE layer's always do) those rows
 * are [off[0], off[E]) exactly: one threaded narrow, not one per expert
 * (with 128 experts each run is too short to thread). */
static void gmm_narrow_rows(fb_dtype_t dt, fb_act *Y, const float *yf, const int32_t *off, int32_t lo, int E,
                            size_t cols)
{
    int sorted = 1;
    for (int e = 0; e < E; e++)
        sorted &= off[e + 1] >= off[e];
    if (sorted) {
        if (off[E] > off[0])
            narrow(dt, at16(Y, ((size_t)lo + (size_t)off[0]) * cols), yf + (size_t)off[0] * cols,
                   (size_t)(off[E] - off[0]) * cols);
        return;
    }
    for (int e = 0; e < E; e++)
        if (off[e + 1] > off[e])
            narrow(dt, at16(Y, ((size_t)lo + (size_t)off[e]) * cols), yf + (size_t)off[e] * cols,
                   (size_t)(off[e + 1] - off[e]) * cols);
}

static void h_gmm_fwd(fb_dtype_t dt, fb_act *Y, const fb_act *X, const fb_act *W, const int32_t *offsets, int E,
                      int N, int K)
{
    int32_t lo, hi;
    int32_t *off = gmm_rebase(offsets, E, &lo, &hi);
    const size_t rows = (size_t)(hi - lo);
    float *xf = widened(dt, at16(X, (size_t)lo * nz(K)), rows * nz(K));
    float *wf = widened(dt, W, nz(E) * nz(N) * nz(K)), *yf = tmp(rows * nz(N));
    CPU->gmm_fwd(FA(yf), FA(xf), FA(wf), off, E, N, K);
    gmm_narrow_rows(dt, Y, yf, off, lo, E, nz(N));
    free(off);
    free(xf);
    free(wf);
    free(yf);
}

static void h_gmm_bwd_data(fb_dtype_t dt, fb_act *dX, const fb_act *dY, const fb_act *W, const int32_t *offsets,
                           int E, int N, int K)
{
    int32_t lo, hi;
    int32_t *off = gmm_rebase(offsets, E, &lo, &hi);
    const size_t rows = (size_t)(hi - lo);
    float *dyf = widened(dt, at16(dY, (size_t)lo * nz(N)), rows * nz(N));
    float *wf = widened(dt, W, nz(E) * nz(N) * nz(K)), *dxf = tmp(rows * nz(K));
    CPU->gmm_bwd_data(FA(dxf), FA(dyf), FA(wf), off, E, N, K);
    gmm_narrow_rows(dt, dX, dxf, off, lo, E, nz(K));
    free(off);
    free(dyf);
    free(wf);
    free(dxf);
}

static void h_gmm_bwd_weight(fb_dtype_t dt, float *dW, const fb_act *dY, const fb_act *X, const int32_t *offsets,
                             int E, int N, int K)
{
    int32_t lo, hi;
    int32_t *off = gmm_rebase(offsets, E, &lo, &hi);
    const size_t rows = (size_t)(hi - lo);
    float *dyf = widened(dt, at16(dY, (size_t)lo * nz(N)), rows * nz(N));
    float *xf = widened(dt, at16(X, (size_t)lo * nz(K)), rows * nz(K));
    CPU->gmm_bwd_weight(dW, FA(dyf), FA(xf), off, E, N, K);
    free(off);
    free(dyf);
    free(xf);
}

static void h_dropout_fwd(fb_dtype_t dt, fb_act *x, uint8_t *mask, size_t n, float p, uint64_t seed, uint64_t o)
{
    float *xf = widened(dt, x, n);
    CPU->dropout_fwd(FA(xf), mask, n, p, seed, o);
    narrow(dt, x, xf, n);
    free(xf);
}

static void h_dropout_rows_fwd(fb_dtype_t dt, fb_act *x, uint8_t *mask, size_t rows, size_t width, float p,
                               uint64_t seed, const uint64_t *row_offset)
{
    float *xf = widened(dt, x, rows * width);
    CPU->dropout_rows_fwd(FA(xf), mask, rows, width, p, seed, row_offset);
    narrow(dt, x, xf, rows * width);
    free(xf);
}

static void h_dropout_bwd(fb_dtype_t dt, fb_act *dx, const uint8_t *mask, size_t n, float p)
{
    float *xf = widened(dt, dx, n);
    CPU->dropout_bwd(FA(xf), mask, n, p);
    narrow(dt, dx, xf, n);
    free(xf);
}

/* ------------------------------------- dtype-independent: ops_cpu()'s own */

static void *c_alloc(size_t bytes) { return CPU->alloc(bytes); }
static void c_release(void *p) { CPU->release(p); }
static void c_zero(void *p, size_t bytes) { CPU->zero(p, bytes); }
static void c_copy(void *dst, const void *src, size_t bytes) { CPU->copy(dst, src, bytes); }
static void c_to_backend(void *dst, const void *src, size_t bytes) { CPU->to_backend(dst, src, bytes); }
static void c_to_host(void *dst, const void *src, size_t bytes) { CPU->to_host(dst, src, bytes); }
static void c_to_host_async(void *dst, const void *src, size_t bytes) { CPU->to_host_async(dst, src, bytes); }
static void c_synchronize(void) { CPU->synchronize(); }
static void *c_host_alloc(size_t bytes) { return CPU->host_alloc(bytes); }
static void c_host_release(void *p) { CPU->host_release(p); }
static void c_axpy(float *y, const float *x, size_t n, float a) { CPU->axpy(y, x, n, a); }
static void c_scale(float *x, size_t n, float s) { CPU->scale(x, n, s); }
static double c_sumsq(const float *x, size_t n) { return CPU->sumsq(x, n); }

static void c_router_fwd(float *probs, float *lse, int32_t *idx, float *w, const float *logits, int T, int E,
                         int K)
{
    CPU->router_fwd(probs, lse, idx, w, logits, T, E, K);
}

static void c_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                    float eps, float wd, int adam_w_mode, long step)
{
    CPU->adamw(p, g, m, v, n, lr, b1, b2, eps, wd, adam_w_mode, step);
}

/* ------------------------------------------------ the two tables */

/* The entries of one dtype: thin wrappers passing DT to the h_ ops. */
#define OPS16_TABLE(S, DT, NAME)                                                                                   \
    static void to_act##S(fb_act *d, const float *s, size_t n) { h_to_act(DT, d, s, n); }                        \
    static void act_to_f32##S(float *d, const fb_act *s, size_t n) { h_act_to_f32(DT, d, s, n); }                \
    static void matmul##S(fb_act *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta, int tb,      \
                          float beta)                                                                             \
    {                                                                                                             \
        h_matmul(DT, C, A, B, M, N, K, ta, tb, beta);                                                             \
    }                                                                                                             \
    static void matmul_f32##S(float *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta, int tb,   \
                              float beta)                                                                         \
    {                                                                                                             \
        h_matmul_f32(DT, C, A, B, M, N, K, ta, tb, beta);                                                         \
    }                                                                                                             \
    static void act_axpy##S(fb_act *y, const fb_act *x, size_t n, float a) { h_act_axpy(DT, y, x, n, a); }       \
    static void embedding_fwd##S(fb_act *o, const int32_t *tk, const fb_act *tb, int T, int D)                   \
    {                                                                                                             \
        h_embedding_fwd(DT, o, tk, tb, T, D);                                                                     \
    }                                                                                                             \
    static void embedding_bwd##S(float *dt, const fb_act *d, const int32_t *tk, int T, int D)                    \
    {                                                                                                             \
        h_embedding_bwd(DT, dt, d, tk, T, D);                                                                     \
    }                                                                                                             \
    static void rmsnorm_fwd##S(fb_act *o, float *r, const fb_act *x, const fb_act *w, int T, int D, float eps)   \
    {                                                                                                             \
        h_rmsnorm_fwd(DT, o, r, x, w, T, D, eps);                                                                 \
    }                                                                                                             \
    static void rmsnorm_bwd##S(fb_act *dx, float *dw, const fb_act *d, const fb_act *x, const fb_act *w,         \
                               const float *r, int T, int D)                                                      \
    {                                                                                                             \
        h_rmsnorm_bwd(DT, dx, dw, d, x, w, r, T, D);                                                              \
    }                                                                                                             \
    static void rope_fwd##S(fb_act *x, const int32_t *p, int T, int nh, int hd, float th)                        \
    {                                                                                                             \
        h_rope(DT, 0, x, p, T, nh, hd, th);                                                                       \
    }                                                                                                             \
    static void rope_bwd##S(fb_act *x, const int32_t *p, int T, int nh, int hd, float th)                        \
    {                                                                                                             \
        h_rope(DT, 1, x, p, T, nh, hd, th);                                                                       \
    }                                                                                                             \
    static void attention_fwd##S(fb_act *o, float *lse, const fb_act *q, const fb_act *k, const fb_act *v,       \
                                 const int32_t *cu, int ns, int T, int H, int KV, int hd)                         \
    {                                                                                                             \
        h_attention_fwd(DT, o, lse, q, k, v, cu, ns, T, H, KV, hd);                                               \
    }                                                                                                             \
    static void attention_bwd##S(fb_act *dq, fb_act *dk, fb_act *dv, const fb_act *d, const fb_act *q,           \
                                 const fb_act *k, const fb_act *v, const fb_act *o, const float *lse,             \
                                 const int32_t *cu, int ns, int T, int H, int KV, int hd)                         \
    {                                                                                                             \
        h_attention_bwd(DT, dq, dk, dv, d, q, k, v, o, lse, cu, ns, T, H, KV, hd);                                \
    }                                                                                                             \
    static void decode_attention##S(fb_act *o, const fb_act *q, const fb_act *kc, const fb_act *vc, int n,        \
                                    int past, int H, int KV, int hd)                                              \
    {                                                                                                             \
        h_decode_attention(DT, o, q, kc, vc, n, past, H, KV, hd);                                                 \
    }                                                                                                             \
    static void swiglu_fwd##S(fb_act *h, const fb_act *g, const fb_act *u, size_t n)                             \
    {                                                                                                             \
        h_swiglu_fwd(DT, h, g, u, n);                                                                             \
    }                                                                                                             \
    static void swiglu_bwd##S(fb_act *dg, fb_act *du, const fb_act *dh, const fb_act *g, const fb_act *u,        \
                              size_t n)                                                                           \
    {                                                                                                             \
        h_swiglu_bwd(DT, dg, du, dh, g, u, n);                                                                    \
    }                                                                                                             \
    static void cross_entropy##S(float *ls, fb_act *dl, const fb_act *l, const int32_t *tg, int T, int V,        \
                                 float gs)                                                                        \
    {                                                                                                             \
        h_cross_entropy(DT, ls, dl, l, tg, T, V, gs);                                                             \
    }                                                                                                             \
    static void router_bwd##S(fb_act *dl, const float *p, const float *lse, const int32_t *i, const float *w,    \
                              const float *dw, const float *aux, float z, int T, int E, int K)                    \
    {                                                                                                             \
        h_router_bwd(DT, dl, p, lse, i, w, dw, aux, z, T, E, K);                                                  \
    }                                                                                                             \
    static void permute_fwd##S(fb_act *xp, const fb_act *x, const int32_t *rt, int R, int D)                     \
    {                                                                                                             \
        h_permute_fwd(DT, xp, x, rt, R, D);                                                                       \
    }                                                                                                             \
    static void permute_bwd##S(fb_act *dx, const fb_act *dxp, const int32_t *tr, int T, int K, int D)            \
    {                                                                                                             \
        h_permute_bwd(DT, dx, dxp, tr, T, K, D);                                                                  \
    }                                                                                                             \
    static void combine_fwd##S(fb_act *y, const fb_act *eo, const int32_t *tr, const float *w, int T, int K,     \
                               int D)                                                                             \
    {                                                                                                             \
        h_combine_fwd(DT, y, eo, tr, w, T, K, D);                                                                 \
    }                                                                                                             \
    static void combine_bwd##S(fb_act *de, float *dw, const fb_act *dy, const fb_act *eo, const int32_t *tr,     \
                               const float *w, int T, int K, int D)                                               \
    {                                                                                                             \
        h_combine_bwd(DT, de, dw, dy, eo, tr, w, T, K, D);                                                        \
    }                                                                                                             \
    static void gmm_fwd##S(fb_act *Y, const fb_act *X, const fb_act *W, const int32_t *o, int E, int N, int K)   \
    {                                                                                                             \
        h_gmm_fwd(DT, Y, X, W, o, E, N, K);                                                                       \
    }                                                                                                             \
    static void gmm_bwd_data##S(fb_act *dX, const fb_act *dY, const fb_act *W, const int32_t *o, int E, int N,   \
                                int K)                                                                            \
    {                                                                                                             \
        h_gmm_bwd_data(DT, dX, dY, W, o, E, N, K);                                                                \
    }                                                                                                             \
    static void gmm_bwd_weight##S(float *dW, const fb_act *dY, const fb_act *X, const int32_t *o, int E, int N,  \
                                  int K)                                                                          \
    {                                                                                                             \
        h_gmm_bwd_weight(DT, dW, dY, X, o, E, N, K);                                                              \
    }                                                                                                             \
    static void dropout_fwd##S(fb_act *x, uint8_t *m, size_t n, float p, uint64_t seed, uint64_t off)            \
    {                                                                                                             \
        h_dropout_fwd(DT, x, m, n, p, seed, off);                                                                 \
    }                                                                                                             \
    static void dropout_bwd##S(fb_act *dx, const uint8_t *m, size_t n, float p) { h_dropout_bwd(DT, dx, m, n, p); } \
    static void dropout_rows_fwd##S(fb_act *x, uint8_t *m, size_t rows, size_t width, float p, uint64_t seed,     \
                                    const uint64_t *row_offset)                                                   \
    {                                                                                                             \
        h_dropout_rows_fwd(DT, x, m, rows, width, p, seed, row_offset);                                           \
    }                                                                                                             \
    static const ops_t ops##S = {                                                                                 \
        .name = NAME,                                                                                             \
        .act_dtype = DT,                                                                                          \
        .act_bytes = sizeof(uint16_t),                                                                            \
        .device_memory = 0,                                                                                       \
        .alloc = c_alloc,                                                                                         \
        .release = c_release,                                                                                     \
        .zero = c_zero,                                                                                           \
        .copy = c_copy,                                                                                           \
        .to_backend = c_to_backend,                                                                               \
        .to_host = c_to_host,                                                                                     \
        .to_host_async = c_to_host_async,                                                                         \
        .synchronize = c_synchronize,                                                                             \
        .host_alloc = c_host_alloc,                                                                               \
        .host_release = c_host_release,                                                                           \
        .to_act = to_act##S,                                                                                      \
        .act_to_f32 = act_to_f32##S,                                                                              \
        .matmul = matmul##S,                                                                                      \
        .matmul_f32 = matmul_f32##S,                                                                              \
        .axpy = c_axpy,                                                                                           \
        .act_axpy = act_axpy##S,                                                                                  \
        .scale = c_scale,                                                                                         \
        .sumsq = c_sumsq,                                                                                         \
        .embedding_fwd = embedding_fwd##S,                                                                        \
        .embedding_bwd = embedding_bwd##S,                                                                        \
        .rmsnorm_fwd = rmsnorm_fwd##S,                                                                            \
        .rmsnorm_bwd = rmsnorm_bwd##S,                                                                            \
        .rope_fwd = rope_fwd##S,                                                                                  \
        .rope_bwd = rope_bwd##S,                                                                                  \
        .attention_fwd = attention_fwd##S,                                                                        \
        .attention_bwd = attention_bwd##S,                                                                        \
        .decode_attention = decode_attention##S,                                                                  \
        .swiglu_fwd = swiglu_fwd##S,                                                                              \
        .swiglu_bwd = swiglu_bwd##S,                                                                              \
        .cross_entropy = cross_entropy##S,                                                                        \
        .router_fwd = c_router_fwd,                                                                               \
        .router_bwd = router_bwd##S,                                                                              \
        .permute_fwd = permute_fwd##S,                                                                            \
        .permute_bwd = permute_bwd##S,                                                                            \
        .combine_fwd = combine_fwd##S,                                                                            \
        .combine_bwd = combine_bwd##S,                                                                            \
        .gmm_fwd = gmm_fwd##S,                                                                                    \
        .gmm_bwd_data = gmm_bwd_data##S,                                                                          \
        .gmm_bwd_weight = gmm_bwd_weight##S,                                                                      \
        .dropout_fwd = dropout_fwd##S,                                                                            \
        .dropout_bwd = dropout_bwd##S,                                                                            \
        .dropout_rows_fwd = dropout_rows_fwd##S,                                                                  \
        .adamw = c_adamw,                                                                                         \
    };

OPS16_TABLE(_bf16, FB_DTYPE_BF16, "cpu-bf16")
OPS16_TABLE(_f16, FB_DTYPE_F16, "cpu-fp16")

const ops_t *ops_cpu16(fb_dtype_t dt)
{
    switch (dt) {
    case FB_DTYPE_BF16: return &ops_bf16;
    case FB_DTYPE_F16: return &ops_f16;
    default:
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "ops_cpu16", "16-bit storage is bf16 or fp16");
    }
}
