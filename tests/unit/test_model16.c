/* The model's 16-bit paths, run on the CPU: ops_cpu16(bf16 / fp16) against
 * fp32 (tests/cuda/test_cuda_model.c's comparison, which needs a GPU, made
 * to run anywhere). The model code that runs only when act_bytes != 4 (the
 * compute copy of the weights rounded per block, element offsets scaled by
 * act_bytes, the widening of kept logits) runs here.
 *
 *  1. The conversions of kernels/cpu/half_conv.h against a reference built
 *     on ldexp and a nearest-value search: every 16-bit pattern widened,
 *     then fp32 values at and around every rounding boundary and random
 *     bit patterns rounded (ties, overflow, fp16 subnormals, NaN, inf).
 *  2. The op tables, and op plumbing the model does not reach: grouped
 *     matmuls on rows that do not start at 0 (as expert parallelism calls
 *     them), combine_bwd with a dropped assignment, cross_entropy in place.
 *     The 16-bit op must equal the fp32 op on the same (16-bit
 *     representable) inputs, rounded, and leave alone what it does not write.
 *  3. The whole model, forward and backward on one packed micro-batch with
 *     uneven samples (the CUDA test's config, weights and batch), three runs
 *     per model and dtype:
 *       16-bit   ops_cpu16: the model's 16-bit paths;
 *       rounded  fp32 storage (the model's fp32 paths) through ops that round
 *                every fb_act output to a 16-bit value, the master weights
 *                rounded: the same arithmetic on the other code paths. The
 *                16-bit run must match it within MATCH_TOL (it is bitwise
 *                equal with a deterministic BLAS): a slip in the 16-bit paths
 *                (an offset, a block's weights not rounded in, the logits
 *                read wrongly) shows at O(1);
 *       fp32     ops_cpu() with the master weights rounded to the dtype (what
 *                the 16-bit compute copy holds: full-precision weights would
 *                add the gradient's sensitivity to the weights themselves,
 *                6e-3 for the dense layer-1 q_proj at bf16). Loss parts,
 *                kept logits (model_get_logits) and every parameter gradient
 *                are compared (Bounds, below).
 *     Models: dense GQA (cross_entropy in place on the logits), MoE top-2 of
 *     4 dropless, and MoE with tied embeddings and expert dropout (both MoE
 *     with logits kept); and the MoE with its random initial router, for
 *     the rounded comparison alone.
 *
 * Routing. A token whose second and third router logits lie within rounding
 * of each other goes to other experts at 16 bits than at fp32 (with the
 * random initial router, bf16 changes ~3 of 768 choices per layer here).
 * That moves an expert's gradient by O(1/sqrt(rows)) (7e-2 here), and with
 * expert dropout re-draws the masks of the later rows of the experts
 * involved (the mask is keyed by permuted row): a discrete change, not a
 * precision effect. So the MoE models compared with fp32 route on a feature
 * with a margin far above rounding: every embedding row holds a token class,
 * +-1 in column 0 or 1; the routers read only those two columns; the final
 * norm's weight is 0 on both, so the feature stays out of the logits. The
 * runs' per-sample routing counts (model_stats_t.tag_expert_tokens) must
 * be equal.
 *
 * Bounds. Every op rounds its fb_act outputs once (relative error up to
 * eps/2; eps = 2^-8 for bf16, 2^-11 for fp16) and accumulates in fp32. A
 * gradient here passes through some 50-100 such roundings, which add up (in
 * quadrature) to 2-3 eps, more for the worst conditioned tensors (the q/k
 * projections, whose gradients are differences across the near-uniform
 * attention of an initial model, and some norm weights): per tensor the
 * fp32 comparisons measure 2.0-4.4 eps at bf16 and 2.3-5.1 eps at fp16,
 * bf16's error 8x fp16's (median over the tensors), as rounding predicts
 * and a bug would not. So the loss parts, the logits and all gradients
 * together (one norm) must agree within the CUDA test's 1e-2 at bf16
 * (1e-2 / 8 at fp16), and each gradient tensor within 8 eps (3.1e-2 and
 * 3.9e-3): 1e-2 per tensor is 2.6 eps at bf16, which the dense model's
 * layer-1 q_proj gradient reaches (1.08e-2 against unrounded weights). The
 * fp16 runs (all three) use a loss scale of 2^16, fp16 training's initial
 * one: without it the output gradients (~1/(tokens*vocab)) would fall below
 * fp16's normal range. A power-of-two scale is exact in fp32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/half_conv.h"
#include "model/model.h"
#include "ops.h"
#include "rng.h"

/* Bounds against fp32 (see the top): TOL_OUT for the loss parts, the logits
 * and all gradients taken together; TOL_GRAD for each gradient tensor. */
#define BF16_EPS 0x1p-8
#define F16_EPS 0x1p-11
#define TOL_OUT(dt) ((dt) == FB_DTYPE_BF16 ? 1e-2 : 1e-2 / 8)
#define TOL_GRAD(dt) (8.0 * ((dt) == FB_DTYPE_BF16 ? BF16_EPS : F16_EPS))
#define F16_LOSS_SCALE 65536.0

static int fails;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        perror("malloc");
        exit(1);
    }
    return p;
}

/* ============================================================ conversions */

typedef struct fmt16 {
    const char *name;
    int mant;                   /* stored mantissa bits */
    int bias;
    uint16_t inf;               /* the +inf pattern (the largest finite is inf - 1) */
    uint16_t (*narrow)(float);
    float (*widen)(uint16_t);
} fmt16_t;

/* The value of a pattern from its fields with ldexp (not half_conv.h). */
static double value16(const fmt16_t *f, uint16_t h)
{
    const int e = (h & 0x7fff) >> f->mant, m = h & ((1 << f->mant) - 1);
    double v;
    if ((h & 0x7fff) >= f->inf)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, 1 - f->bias - f->mant);
    else
        v = ldexp((1 << f->mant) + m, e - f->bias - f->mant);
    return (h & 0x8000) ? -v : v;
}

/* 2^(emax + 1): the power of two above the largest finite value. */
static double top16(const fmt16_t *f) { return ldexp(1.0, (f->inf >> f->mant) - f->bias); }

/* Round to nearest, ties to the even pattern, by searching the sorted
 * positive patterns; past the largest finite value the next "value" is
 * top16, so halfway there and beyond becomes inf. */
static uint16_t reference_narrow(const fmt16_t *f, float x)
{
    if (isnan(x))
        return 0;   /* callers check NaN separately */
    const uint16_t sign = signbit(x) ? 0x8000 : 0;
    const double a = fabs((double)x), top = top16(f);
    if (a >= top)
        return sign | f->inf;
    unsigned lo = 0, hi = f->inf; /* value(lo) <= a < value(hi), value(inf) taken as top */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (value16(f, (uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double vlo = value16(f, (uint16_t)lo), vhi = hi == f->inf ? top : value16(f, (uint16_t)hi);
    unsigned r;
    if (a - vlo < vhi - a)
        r = lo;
    else if (a - vlo > vhi - a)
        r = hi;
    else
        r = (lo & 1) ? hi : lo;
    return (uint16_t)(sign | r);
}

static int narrow_ok(const fmt16_t *f, float x)
{
    const uint16_t got = f->narrow(x);
    if (isnan(x))
        return (got & 0x7fff) > f->inf && (got & 0x8000) == (signbit(x) ? 0x8000 : 0);
    return got == reference_narrow(f, x);
}

static float f32_of(uint32_t b) { return fb_f32_from_bits(b); }

static void test_conversions(const fmt16_t *f)
{
    int bad = 0;
    long n = 0;
    /* widening: every pattern; narrowing it back returns it */
    for (uint32_t h = 0; h < 0x10000; h++, n++) {
        const float w = f->widen((uint16_t)h);
        const double v = value16(f, (uint16_t)h);
        int ok;
        if (isnan(v))
            ok = isnan(w) && isnan(f->widen(f->narrow(w))) && (f->narrow(w) & 0x8000) == (h & 0x8000);
        else
            ok = (double)w == v && !signbit(w) == !signbit(v) && f->narrow(w) == h;
        if (!ok && bad++ < 5)
            printf("  %s widen 0x%04x -> %a (expected %a)\n", f->name, (unsigned)h, (double)w, v);
    }
    /* narrowing: each positive finite value, the midpoint to the next one
     * (exactly representable in fp32) and the fp32 values either side of
     * both, in both signs */
    for (uint32_t h = 0; h < f->inf; h++) {
        const double v = value16(f, (uint16_t)h);
        const double next = h + 1 == f->inf ? top16(f) : value16(f, (uint16_t)(h + 1));
        const float pts[2] = {(float)v, (float)((v + next) / 2)};
        for (int i = 0; i < 2; i++) {
            const float c[3] = {nextafterf(pts[i], 0.0f), pts[i], nextafterf(pts[i], INFINITY)};
            for (int j = 0; j < 3; j++)
                for (int s = 0; s < 2; s++, n++) {
                    const float x = s ? -c[j] : c[j];
                    if (!narrow_ok(f, x) && bad++ < 5)
                        printf("  %s narrow %a -> 0x%04x (expected 0x%04x)\n", f->name, (double)x,
                               f->narrow(x), reference_narrow(f, x));
                }
        }
    }
    /* special values and random bit patterns (every exponent, NaNs too) */
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                0x7f800001u, 0x7f7fffffu, 0x00800000u, 0x00000001u, 0x807fffffu, 0x477ff000u,
                                0x477fefffu, 0x33000000u, 0x33000001u, 0x7f7f8000u, 0x7f7f7fffu};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++, n++)
        if (!narrow_ok(f, f32_of(special[i])) && bad++ < 5)
            printf("  %s narrow bits 0x%08x -> 0x%04x\n", f->name, (unsigned)special[i],
                   f->narrow(f32_of(special[i])));
    for (uint64_t i = 0; i < 2000000; i++, n++) {
        const uint32_t b = (uint32_t)fb_hash2(31, i);
        if (!narrow_ok(f, f32_of(b)) && bad++ < 5)
            printf("  %s narrow bits 0x%08x -> 0x%04x (expected 0x%04x)\n", f->name, (unsigned)b,
                   f->narrow(f32_of(b)), reference_narrow(f, f32_of(b)));
    }
    printf("  conversions %-4s %ld cases, %d wrong %s\n", f->name, n, bad, bad ? "FAIL" : "PASS");
    fails += bad != 0;
}

/* ======================================================== op plumbing */

/* fp32 values rounded to the 16-bit dtype (so both backends see the same
 * inputs), and their 16-bit patterns. */
static float *rounded_values(fb_dtype_t dt, size_t n, uint64_t seed, uint16_t *bits)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        const float v = 2.0f * fb_uniform_hash(seed, i) - 1.0f;
        bits[i] = dt == FB_DTYPE_BF16 ? fb_bf16_from_f32(v) : fb_f16_from_f32(v);
        x[i] = dt == FB_DTYPE_BF16 ? fb_bf16_to_f32(bits[i]) : fb_f16_to_f32(bits[i]);
    }
    return x;
}

/* The 16-bit result must be the fp32 one rounded; the fp32 kernels run on
 * other buffers (BLAS may block differently), so allow one 16-bit ulp. */
static int close16(fb_dtype_t dt, uint16_t got, float want)
{
    const float g = dt == FB_DTYPE_BF16 ? fb_bf16_to_f32(got) : fb_f16_to_f32(got);
    const float ulp = dt == FB_DTYPE_BF16 ? 0x1p-7f : 0x1p-10f;
    return fabsf(g - want) <= ulp * fabsf(want) + 1e-30f;
}

#define SENTINEL16 0x7bcdu /* a pattern no op here writes */

static void test_op_plumbing(fb_dtype_t dt)
{
    const ops_t *h = ops_cpu16(dt), *c = ops_cpu();
    const char *nm = h->name;
    int bad = 0;

    /* grouped matmuls over rows 3..11 of 14 (expert 1 empty) */
    {
        enum { E = 3, N = 5, K = 6, ROWS = 14 };
        const int32_t off[E + 1] = {3, 7, 7, 11};
        uint16_t xb[ROWS * K], wb[E * N * K], yb[ROWS * N], dyb[ROWS * N], dxb[ROWS * K];
        float *x = rounded_values(dt, ROWS * K, 1, xb), *w = rounded_values(dt, E * N * K, 2, wb);
        float *dy = rounded_values(dt, ROWS * N, 3, dyb);
        float y[ROWS * N], dx[ROWS * K], dw32[E * N * K] = {0}, dw16[E * N * K] = {0};
        for (int i = 0; i < ROWS * N; i++)
            yb[i] = SENTINEL16;
        for (int i = 0; i < ROWS * K; i++)
            dxb[i] = SENTINEL16;
        c->gmm_fwd((fb_act *)y, (fb_act *)x, (fb_act *)w, off, E, N, K);
        h->gmm_fwd((fb_act *)yb, (fb_act *)xb, (fb_act *)wb, off, E, N, K);
        c->gmm_bwd_data((fb_act *)dx, (fb_act *)dy, (fb_act *)w, off, E, N, K);
        h->gmm_bwd_data((fb_act *)dxb, (fb_act *)dyb, (fb_act *)wb, off, E, N, K);
        c->gmm_bwd_weight(dw32, (fb_act *)dy, (fb_act *)x, off, E, N, K);
        h->gmm_bwd_weight(dw16, (fb_act *)dyb, (fb_act *)xb, off, E, N, K);
        for (int r = 0; r < ROWS; r++) {
            const int in = r >= off[0] && r < off[E];
            for (int j = 0; j < N; j++)
                bad += in ? !close16(dt, yb[r * N + j], y[r * N + j]) : yb[r * N + j] != SENTINEL16;
            for (int j = 0; j < K; j++)
                bad += in ? !close16(dt, dxb[r * K + j], dx[r * K + j]) : dxb[r * K + j] != SENTINEL16;
        }
        for (int i = 0; i < E * N * K; i++)
            bad += fabsf(dw16[i] - dw32[i]) > 1e-6f * (1.0f + fabsf(dw32[i]));
        free(x);
        free(w);
        free(dy);
    }
    /* combine_bwd: token 1's second choice dropped, row 4 never referenced */
    {
        enum { T = 3, K = 2, D = 4, R = 6 };
        const int32_t tr[T * K] = {0, 3, 2, -1, 5, 1};
        const float wts[T * K] = {0.6f, 0.4f, 1.0f, 0.0f, 0.7f, 0.3f};
        uint16_t dyb[T * D], eob[R * D], deob[R * D];
        float *dy = rounded_values(dt, T * D, 4, dyb), *eo = rounded_values(dt, R * D, 5, eob);
        float deo[R * D] = {0}, dw32[T * K], dw16[T * K];
        for (int i = 0; i < R * D; i++)
            deob[i] = SENTINEL16;
        c->combine_bwd((fb_act *)deo, dw32, (fb_act *)dy, (fb_act *)eo, tr, wts, T, K, D);
        h->combine_bwd((fb_act *)deob, dw16, (fb_act *)dyb, (fb_act *)eob, tr, wts, T, K, D);
        for (int r = 0; r < R; r++)
            for (int j = 0; j < D; j++)
                bad += r == 4 ? deob[r * D + j] != SENTINEL16 : !close16(dt, deob[r * D + j], deo[r * D + j]);
        for (int i = 0; i < T * K; i++)
            bad += fabsf(dw16[i] - dw32[i]) > 1e-6f;
        free(dy);
        free(eo);
    }
    /* cross_entropy in place and not: the same; a row without target */
    {
        enum { T = 4, V = 9 };
        const int32_t tg[T] = {2, -1, 8, 0};
        uint16_t lb[T * V], inplace[T * V], sep[T * V];
        float *l = rounded_values(dt, T * V, 6, lb);
        float d32[T * V], loss32[T], loss16a[T], loss16b[T];
        memcpy(inplace, lb, sizeof lb);
        c->cross_entropy(loss32, (fb_act *)d32, (fb_act *)l, tg, T, V, 0.25f);
        h->cross_entropy(loss16a, (fb_act *)sep, (fb_act *)lb, tg, T, V, 0.25f);
        h->cross_entropy(loss16b, (fb_act *)inplace, (fb_act *)inplace, tg, T, V, 0.25f);
        bad += memcmp(sep, inplace, sizeof sep) != 0;
        for (int i = 0; i < T * V; i++)
            bad += !close16(dt, sep[i], d32[i]);
        for (int t = 0; t < T; t++)
            bad += loss16a[t] != loss32[t] || loss16b[t] != loss32[t];
        free(l);
    }
    printf("  ops %-8s grouped matmuls at row 3, combine_bwd with a dropped row, cross_entropy in place: "
           "%d wrong %s\n", nm, bad, bad ? "FAIL" : "PASS");
    fails += bad != 0;
}

static void test_table(fb_dtype_t dt, const char *name)
{
    const ops_t *o = ops_cpu16(dt);
    int ok = o->name && !strcmp(o->name, name) && o->act_dtype == dt && o->act_bytes == 2 && o->device_memory == 0;
#define HAS(f) ok &= o->f != NULL
    HAS(alloc); HAS(release); HAS(zero); HAS(copy); HAS(to_backend); HAS(to_host); HAS(to_host_async);
    HAS(synchronize); HAS(host_alloc); HAS(host_release); HAS(to_act); HAS(act_to_f32); HAS(matmul);
    HAS(matmul_f32); HAS(axpy); HAS(act_axpy); HAS(scale); HAS(sumsq); HAS(embedding_fwd); HAS(embedding_bwd);
    HAS(rmsnorm_fwd); HAS(rmsnorm_bwd); HAS(rope_fwd); HAS(rope_bwd); HAS(attention_fwd); HAS(attention_bwd);
    HAS(swiglu_fwd); HAS(swiglu_bwd); HAS(cross_entropy); HAS(router_fwd); HAS(router_bwd); HAS(permute_fwd);
    HAS(permute_bwd); HAS(combine_fwd); HAS(combine_bwd); HAS(gmm_fwd); HAS(gmm_bwd_data);
    HAS(gmm_bwd_weight); HAS(dropout_fwd); HAS(dropout_bwd); HAS(adamw);
#undef HAS
    printf("  table %-8s act_bytes %zu, every entry set %s\n", name, o->act_bytes, ok ? "PASS" : "FAIL");
    fails += !ok;
}

/* ================================================= rounded fp32 backend */

/* ops_cpu() with every fb_act output rounded in place to a 16-bit value:
 * the 16-bit backend's arithmetic on fp32 storage. Rounding is idempotent
 * on 16-bit values, so rounding rows an op did not write (all of them
 * written by these ops or zero) changes nothing. One dtype at a time. */
static fb_dtype_t rnd_dt;

static void rnd(fb_act *p, size_t n)
{
    float *x = (float *)(void *)p;
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_dt == FB_DTYPE_BF16 ? fb_bf16_to_f32(fb_bf16_from_f32(x[i])) : fb_f16_to_f32(fb_f16_from_f32(x[i]));
}

static size_t nz(int x) { return x > 0 ? (size_t)x : 0; }

/* one past the largest row index in idx[0..n) */
static size_t rows_of(const int32_t *idx, size_t n)
{
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= 0 && (size_t)idx[i] + 1 > r)
            r = (size_t)idx[i] + 1;
    return r;
}

#define CPU ops_cpu()
static void r_matmul(fb_act *C, const fb_act *A, const fb_act *B, int M, int N, int K, int ta, int tb, float beta)
{
    CPU->matmul(C, A, B, M, N, K, ta, tb, beta);
    rnd(C, nz(M) * nz(N));
}
static void r_act_axpy(fb_act *y, const fb_act *x, size_t n, float a)
{
    CPU->act_axpy(y, x, n, a);
    rnd(y, n);
}
static void r_embedding_fwd(fb_act *o, const int32_t *tk, const fb_act *tb, int T, int D)
{
    CPU->embedding_fwd(o, tk, tb, T, D);
    rnd(o, nz(T) * nz(D));
}
static void r_rmsnorm_fwd(fb_act *o, float *r, const fb_act *x, const fb_act *w, int T, int D, float eps)
{
    CPU->rmsnorm_fwd(o, r, x, w, T, D, eps);
    rnd(o, nz(T) * nz(D));
}
static void r_rmsnorm_bwd(fb_act *dx, float *dw, const fb_act *d, const fb_act *x, const fb_act *w, const float *r,
                          int T, int D)
{
    CPU->rmsnorm_bwd(dx, dw, d, x, w, r, T, D);
    rnd(dx, nz(T) * nz(D));
}
static void r_rope_fwd(fb_act *x, const int32_t *p, int T, int nh, int hd, float th)
{
    CPU->rope_fwd(x, p, T, nh, hd, th);
    rnd(x, nz(T) * nz(nh) * nz(hd));
}
static void r_rope_bwd(fb_act *x, const int32_t *p, int T, int nh, int hd, float th)
{
    CPU->rope_bwd(x, p, T, nh, hd, th);
    rnd(x, nz(T) * nz(nh) * nz(hd));
}
static void r_attention_fwd(fb_act *o, float *lse, const fb_act *q, const fb_act *k, const fb_act *v,
                            const int32_t *cu, int ns, int T, int H, int KV, int hd)
{
    CPU->attention_fwd(o, lse, q, k, v, cu, ns, T, H, KV, hd);
    rnd(o, nz(T) * nz(H) * nz(hd));
}
static void r_attention_bwd(fb_act *dq, fb_act *dk, fb_act *dv, const fb_act *d, const fb_act *q, const fb_act *k,
                            const fb_act *v, const fb_act *o, const float *lse, const int32_t *cu, int ns, int T,
                            int H, int KV, int hd)
{
    CPU->attention_bwd(dq, dk, dv, d, q, k, v, o, lse, cu, ns, T, H, KV, hd);
    rnd(dq, nz(T) * nz(H) * nz(hd));
    rnd(dk, nz(T) * nz(KV) * nz(hd));
    rnd(dv, nz(T) * nz(KV) * nz(hd));
}
static void r_swiglu_fwd(fb_act *h, const fb_act *g, const fb_act *u, size_t n)
{
    CPU->swiglu_fwd(h, g, u, n);
    rnd(h, n);
}
static void r_swiglu_bwd(fb_act *dg, fb_act *du, const fb_act *dh, const fb_act *g, const fb_act *u, size_t n)
{
    CPU->swiglu_bwd(dg, du, dh, g, u, n);
    rnd(dg, n);
    rnd(du, n);
}
static void r_cross_entropy(float *ls, fb_act *dl, const fb_act *l, const int32_t *tg, int T, int V, float gs)
{
    CPU->cross_entropy(ls, dl, l, tg, T, V, gs);
    rnd(dl, nz(T) * nz(V));
}
static void r_router_bwd(fb_act *dl, const float *p, const float *lse, const int32_t *i, const float *w,
                         const float *dw, const float *aux, float z, int T, int E, int K)
{
    CPU->router_bwd(dl, p, lse, i, w, dw, aux, z, T, E, K);
    rnd(dl, nz(T) * nz(E));
}
static void r_permute_fwd(fb_act *xp, const fb_act *x, const int32_t *rt, int R, int D)
{
    CPU->permute_fwd(xp, x, rt, R, D);
    rnd(xp, nz(R) * nz(D));
}
static void r_permute_bwd(fb_act *dx, const fb_act *dxp, const int32_t *tr, int T, int K, int D)
{
    CPU->permute_bwd(dx, dxp, tr, T, K, D);
    rnd(dx, nz(T) * nz(D));
}
static void r_combine_fwd(fb_act *y, const fb_act *eo, const int32_t *tr, const float *w, int T, int K, int D)
{
    CPU->combine_fwd(y, eo, tr, w, T, K, D);
    rnd(y, nz(T) * nz(D));
}
static void r_combine_bwd(fb_act *de, float *dw, const fb_act *dy, const fb_act *eo, const int32_t *tr,
                          const float *w, int T, int K, int D)
{
    CPU->combine_bwd(de, dw, dy, eo, tr, w, T, K, D);
    rnd(de, rows_of(tr, nz(T) * nz(K)) * nz(D));
}
/* grouped rows end at the largest of the offsets (row boundaries) */
static size_t rows_end(const int32_t *o, int E)
{
    int32_t end = 0;
    for (int e = 0; e <= E; e++)
        end = o[e] > end ? o[e] : end;
    return (size_t)end;
}

static void r_gmm_fwd(fb_act *Y, const fb_act *X, const fb_act *W, const int32_t *o, int E, int N, int K)
{
    CPU->gmm_fwd(Y, X, W, o, E, N, K);
    rnd(Y, rows_end(o, E) * nz(N));
}
static void r_gmm_bwd_data(fb_act *dX, const fb_act *dY, const fb_act *W, const int32_t *o, int E, int N, int K)
{
    CPU->gmm_bwd_data(dX, dY, W, o, E, N, K);
    rnd(dX, rows_end(o, E) * nz(K));
}
static void r_dropout_fwd(fb_act *x, uint8_t *m, size_t n, float p, uint64_t seed, uint64_t off)
{
    CPU->dropout_fwd(x, m, n, p, seed, off);
    rnd(x, n);
}
static void r_dropout_bwd(fb_act *dx, const uint8_t *m, size_t n, float p)
{
    CPU->dropout_bwd(dx, m, n, p);
    rnd(dx, n);
}
#undef CPU

static const ops_t *ops_rounded(fb_dtype_t dt)
{
    static ops_t t;
    t = *ops_cpu();
    rnd_dt = dt;
    t.name = "cpu-rounded";
    t.matmul = r_matmul;
    t.act_axpy = r_act_axpy;
    t.embedding_fwd = r_embedding_fwd;
    t.rmsnorm_fwd = r_rmsnorm_fwd;
    t.rmsnorm_bwd = r_rmsnorm_bwd;
    t.rope_fwd = r_rope_fwd;
    t.rope_bwd = r_rope_bwd;
    t.attention_fwd = r_attention_fwd;
    t.attention_bwd = r_attention_bwd;
    t.swiglu_fwd = r_swiglu_fwd;
    t.swiglu_bwd = r_swiglu_bwd;
    t.cross_entropy = r_cross_entropy;
    t.router_bwd = r_router_bwd;
    t.permute_fwd = r_permute_fwd;
    t.permute_bwd = r_permute_bwd;
    t.combine_fwd = r_combine_fwd;
    t.combine_bwd = r_combine_bwd;
    t.gmm_fwd = r_gmm_fwd;
    t.gmm_bwd_data = r_gmm_bwd_data;
    t.dropout_fwd = r_dropout_fwd;
    t.dropout_bwd = r_dropout_bwd;
    return &t;
}

/* ============================================================ the model */

#define MATCH_TOL 1e-4

typedef struct run {
    double lm, aux, z;
    float **grads;      /* per view */
    float *logits;      /* [T, V] when kept */
    long *tag_counts;   /* [NSEQ * L * E] routing choices per sample; NULL for a dense model */
    size_t ntag_counts;
} run_t;

typedef struct model_case {
    const char *name;
    model_config_t mc;
    int keep_logits;
    int routing_feature;    /* the routing feature and routers described at the top */
} model_case_t;

static void build_batch(int T, int nseq, int V, int32_t *tok, int32_t *pos, int32_t *tgt, int32_t *cu)
{
    /* uneven samples: lengths from the counter-based hash */
    int left = T;
    cu[0] = 0;
    for (int s = 0; s < nseq; s++) {
        int len = s == nseq - 1 ? left : 1 + (int)(fb_uniform_hash(77, (uint64_t)s) * (2.0f * T / nseq - 1));
        if (len > left - (nseq - 1 - s))
            len = left - (nseq - 1 - s);
        cu[s + 1] = cu[s] + len;
        left -= len;
    }
    for (int s = 0; s < nseq; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            tok[t] = (int32_t)(fb_hash2(5, (uint64_t)t) % (uint64_t)V);
            pos[t] = t - cu[s];
            tgt[t] = t + 1 < cu[s + 1] ? (int32_t)(fb_hash2(5, (uint64_t)t + 1) % (uint64_t)V) : -1;
        }
}

/* Rewrites parameter `name` on the host with f(values, its view, arg). */
static void edit_param(model_t *m, const char *name, void (*f)(float *, const param_view_t *, int), int arg)
{
    const param_view_t *v = param_table_find(model_params_table(m), name);
    if (!v) {
        printf("FAIL: no parameter %s\n", name);
        exit(1);
    }
    float *h = xmalloc(v->numel * sizeof *h);
    model_get_param(m, v, h);
    f(h, v, arg);
    model_set_param(m, v, h);
    free(h);
}

/* Four token classes (by hash): +1 or -1 in column 0 or in column 1, 0 in
 * the other. Over the vocabulary each column averages ~0: with tied
 * embeddings the head gradient of a column is a sum over the vocabulary of
 * the softmax gradient times that column, which a constant (or one-signed)
 * column turns into a cancellation that rounding dominates. */
static void feature_embed(float *h, const param_view_t *v, int arg)
{
    (void)arg;
    const int64_t D = v->shape[1];
    for (int64_t t = 0; t < v->shape[0]; t++) {
        const unsigned c = (unsigned)(fb_hash2(7, (uint64_t)t) % 4);
        h[t * D] = c == 0 ? 1.0f : c == 1 ? -1.0f : 0.0f;
        h[t * D + 1] = c == 2 ? 1.0f : c == 3 ? -1.0f : 0.0f;
    }
}

static void feature_norm(float *h, const param_view_t *v, int arg)
{
    (void)v, (void)arg;
    h[0] = h[1] = 0.0f;
}

/* logit_e = 0.05 * (a_e h2[0] + b_e h2[1]). A token's class column of h2
 * is ~+-15 (the rest of the row is ~0.02 before the norm), the other one
 * below 1, so the four classes pick the experts of roles {0, 1}, {3, 2},
 * {2, 0} and {1, 3}, the second logit ~1.5 above the third. The router's
 * other columns are 0. Layer l gives role e to expert (e + l) mod E. */
static void feature_router(float *h, const param_view_t *v, int layer)
{
    static const float a[4] = {2.0f, 1.0f, -1.0f, -2.0f}, b[4] = {1.0f, -2.0f, 2.0f, -1.0f};
    const int64_t E = v->shape[0], D = v->shape[1];
    memset(h, 0, v->numel * sizeof *h);
    for (int64_t e = 0; e < E; e++) {
        const int64_t r = (e + layer) % E;
        h[r * D] = 0.05f * a[e % 4];
        h[r * D + 1] = 0.05f * b[e % 4];
    }
}

static void round_all(float *h, const param_view_t *v, int dt)
{
    for (size_t j = 0; j < v->numel; j++)
        h[j] = dt == FB_DTYPE_BF16 ? fb_bf16_to_f32(fb_bf16_from_f32(h[j])) : fb_f16_to_f32(fb_f16_from_f32(h[j]));
}

/* One forward and backward. round_dt: round the master weights to that
 * 16-bit dtype (FB_DTYPE_F32: leave them). */
static void run_model(const model_case_t *mc_, const ops_t *ops, const model_input_t *in, double loss_scale,
                      fb_dtype_t round_dt, run_t *r)
{
    const model_config_t *mc = &mc_->mc;
    model_t *m = model_create(mc, ops, in->T);
    model_set_keep_logits(m, mc_->keep_logits);
    model_init_weights(m, 1234);
    if (mc_->routing_feature) {
        edit_param(m, "model.embed_tokens.weight", feature_embed, 0);
        edit_param(m, "model.norm.weight", feature_norm, 0);
        for (int l = 0; l < mc->num_hidden_layers; l++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", l);
            edit_param(m, name, feature_router, l);
        }
    }
    const param_table_t *t = model_params_table(m);
    if (round_dt != FB_DTYPE_F32)
        for (int i = 0; i < t->n; i++)
            edit_param(m, t->views[i].name, round_all, (int)round_dt);
    model_zero_grads(m);
    long ntargets = 0;
    for (int i = 0; i < in->T; i++)
        ntargets += in->targets[i] >= 0;
    model_scales_t sc = {.lm_denominator = (double)ntargets, .mb_weight = 1.0, .training = 1, .dropout_seed = 9,
                         .loss_scale = loss_scale};
    model_stats_t st;
    model_forward(m, in, &sc, &st);
    r->ntag_counts = 0;
    r->tag_counts = NULL;
    if (mc->num_local_experts > 1) {
        r->ntag_counts = (size_t)in->ntags * (size_t)mc->num_hidden_layers * (size_t)mc->num_local_experts;
        r->tag_counts = xmalloc(r->ntag_counts * sizeof *r->tag_counts);
        memcpy(r->tag_counts, st.tag_expert_tokens, r->ntag_counts * sizeof *r->tag_counts);
    }
    model_backward(m);
    ops->synchronize();
    r->lm = st.lm_sum / (double)ntargets;
    r->aux = st.aux;
    r->z = st.z;
    r->grads = xmalloc((size_t)t->n * sizeof *r->grads);
    for (int i = 0; i < t->n; i++) {
        r->grads[i] = xmalloc(t->views[i].numel * sizeof(float));
        model_get_grad(m, &t->views[i], r->grads[i]);
    }
    r->logits = NULL;
    if (mc_->keep_logits) {
        r->logits = xmalloc((size_t)in->T * (size_t)mc->vocab_size * sizeof(float));
        model_get_logits(m, r->logits);
    }
    model_free(m);
}

static void free_run(run_t *r, int n)
{
    for (int i = 0; i < n; i++)
        free(r->grads[i]);
    free(r->grads);
    free(r->logits);
    free(r->tag_counts);
}

/* ||a - b|| / ||b|| (||a - b|| when b is 0); NaN when a has a NaN */
static double rel_norm(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t j = 0; j < n; j++) {
        const double d = (double)a[j] - b[j];
        num += d * d;
        den += (double)b[j] * b[j];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double rel_scalar(double a, double b) { return a == b ? 0.0 : fabs(a - b) / (fabs(b) + 1e-12); }

/* Routing choices that differ between two runs, counted per sample. */
static long routing_diff(const run_t *a, const run_t *b)
{
    long d = 0;
    for (size_t i = 0; i < a->ntag_counts; i++)
        d += labs(a->tag_counts[i] - b->tag_counts[i]);
    return d;
}

/* h against the rounded run: one line, everything within MATCH_TOL. */
static void compare_rounded(const char *nm, const model_case_t *c, const model_input_t *in, const param_table_t *t,
                            const run_t *h, const run_t *q)
{
    double worst = fmax(rel_scalar(h->lm, q->lm), fmax(rel_scalar(h->aux, q->aux), rel_scalar(h->z, q->z)));
    if (c->keep_logits)
        worst = fmax(worst, rel_norm(h->logits, q->logits, (size_t)in->T * (size_t)c->mc.vocab_size));
    for (int i = 0; i < t->n; i++) {
        const double r = rel_norm(h->grads[i], q->grads[i], t->views[i].numel);
        worst = isnan(r) ? r : fmax(worst, r);
    }
    const long rd = routing_diff(h, q);
    const int ok = worst <= MATCH_TOL && rd == 0; /* NaN fails */
    printf("  %-8s %-9s vs rounded fp32: losses, %slogits and %d gradients, worst rel %.2e, routing diffs %ld %s\n",
           nm, c->name, c->keep_logits ? "" : "no ", t->n, worst, rd, ok ? "PASS" : "FAIL");
    fails += !ok;
}

/* h against fp32: a line per loss part, the logits, each gradient and all
 * gradients together. */
static void compare_fp32(const char *nm, const model_case_t *c, const model_input_t *in, const param_table_t *t,
                         const run_t *h, const run_t *f, fb_dtype_t dt)
{
    const double tol_out = TOL_OUT(dt), tol_grad = TOL_GRAD(dt);
    const double parts[3][2] = {{f->lm, h->lm}, {f->aux, h->aux}, {f->z, h->z}};
    const char *names[3] = {"lm loss", "aux loss", "z loss"};
    for (int i = 0; i < 3; i++) {
        const double rel = rel_scalar(parts[i][1], parts[i][0]);
        const int ok = rel <= tol_out;
        printf("  %-8s %-9s %-9s fp32 %.6f 16-bit %.6f rel %.2e %s\n", nm, c->name, names[i], parts[i][0],
               parts[i][1], rel, ok ? "PASS" : "FAIL");
        fails += !ok;
    }
    if (f->tag_counts) {
        const long rd = routing_diff(h, f);
        printf("  %-8s %-9s routing   choices differing from fp32 %ld %s\n", nm, c->name, rd, rd ? "FAIL" : "PASS");
        fails += rd != 0;
    }
    if (c->keep_logits) {
        const double rel = rel_norm(h->logits, f->logits, (size_t)in->T * (size_t)c->mc.vocab_size);
        const int ok = rel <= tol_out; /* NaN fails */
        printf("  %-8s %-9s logits    rel %.2e %s\n", nm, c->name, rel, ok ? "PASS" : "FAIL");
        fails += !ok;
    }
    double worst = 0.0, num = 0.0, den = 0.0;
    for (int i = 0; i < t->n; i++) {
        const double rel = rel_norm(h->grads[i], f->grads[i], t->views[i].numel);
        const int ok = rel <= tol_grad; /* NaN fails */
        printf("  %-8s %-9s grad %-50s rel %.2e %s\n", nm, c->name, t->views[i].name, rel, ok ? "PASS" : "FAIL");
        fails += !ok;
        worst = isnan(rel) || rel > worst ? rel : worst;
        for (size_t j = 0; j < t->views[i].numel; j++) {
            const double d = (double)h->grads[i][j] - f->grads[i][j];
            num += d * d;
            den += (double)f->grads[i][j] * f->grads[i][j];
        }
    }
    const double all = sqrt(num / den);
    const int ok = all <= tol_out;
    printf("  %-8s %-9s %d gradients: worst rel %.2e = %.1f eps (bound %.1e); all together rel %.2e (bound %.1e) %s\n",
           nm, c->name, t->n, worst, worst / (dt == FB_DTYPE_BF16 ? BF16_EPS : F16_EPS), tol_grad, all, tol_out,
           ok ? "PASS" : "FAIL");
    fails += !ok;
}

static void compare(const model_case_t *c, const model_input_t *in, fb_dtype_t dt, int vs_fp32)
{
    const double scale = dt == FB_DTYPE_BF16 ? 0.0 : F16_LOSS_SCALE;
    const ops_t *o16 = ops_cpu16(dt);
    run_t h, q, f;
    run_model(c, o16, in, scale, FB_DTYPE_F32, &h);
    run_model(c, ops_rounded(dt), in, scale, dt, &q);
    param_table_t t;
    param_table_build(&t, &c->mc);
    compare_rounded(o16->name, c, in, &t, &h, &q);
    if (vs_fp32) {
        run_model(c, ops_cpu(), in, scale, dt, &f);
        compare_fp32(o16->name, c, in, &t, &h, &f, dt);
        free_run(&f, t.n);
    }
    free_run(&h, t.n);
    free_run(&q, t.n);
    param_table_free(&t);
}

int main(void)
{
    const fmt16_t bf16 = {"bf16", 7, 127, 0x7f80, fb_bf16_from_f32, fb_bf16_to_f32};
    const fmt16_t f16 = {"fp16", 10, 15, 0x7c00, fb_f16_from_f32, fb_f16_to_f32};
    test_conversions(&bf16);
    test_conversions(&f16);
    test_table(FB_DTYPE_BF16, "cpu-bf16");
    test_table(FB_DTYPE_F16, "cpu-fp16");
    test_op_plumbing(FB_DTYPE_BF16);
    test_op_plumbing(FB_DTYPE_F16);

    enum { T = 384, NSEQ = 5, V = 1000 };
    static int32_t tok[T], pos[T], tgt[T], cu[NSEQ + 1];
    static const uint8_t tags[NSEQ] = {0, 1, 2, 3, 4};
    build_batch(T, NSEQ, V, tok, pos, tgt, cu);
    model_input_t in = {tok, pos, tgt, cu, T, NSEQ, tags, NSEQ};

    const model_config_t dense = {
        .vocab_size = V, .hidden_size = 256, .intermediate_size = 512, .num_hidden_layers = 2,
        .num_attention_heads = 4, .num_key_value_heads = 2, .num_local_experts = 0, .num_experts_per_tok = 0,
        .moe_layer_freq = 1, .rope_theta = 10000.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = 0,
        .router_aux_loss_coef = 0.01, .router_z_loss_coef = 0.001, .capacity_factor = 0.0,
        .expert_dropout = 0.0, .initializer_range = 0.02, .max_position_embeddings = 4096,
    };
    model_case_t cases[4] = {{"dense", dense, 0, 0}, {"moe", dense, 1, 1}, {"moe-tied", dense, 1, 1},
                             {"moe-rand", dense, 1, 0}};
    for (int i = 1; i < 4; i++) {
        cases[i].mc.num_local_experts = 4;
        cases[i].mc.num_experts_per_tok = 2;
    }
    cases[2].mc.tie_word_embeddings = 1;
    cases[2].mc.expert_dropout = 0.1;

    const fb_dtype_t dts[2] = {FB_DTYPE_BF16, FB_DTYPE_F16};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 4; i++)
            compare(&cases[i], &in, dts[d], i < 3);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
