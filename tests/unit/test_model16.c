/* The model's 16-bit paths, run on the CPU: ops_cpu16(bf16 / fp16). The
 * model code that runs only when act_bytes != 4 (the compute copy of the
 * weights rounded per block, element offsets scaled by act_bytes, the
 * widening of kept logits) runs here, and so does the comparison with fp32
 * that tests/cuda/test_cuda_model.c makes on a GPU.
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
 *  3. The whole model, forward and backward, on the cases, micro-batch and
 *     weights of tests/model_compare.c, three runs per model and dtype:
 *       16-bit   ops_cpu16: the model's 16-bit paths;
 *       rounded  fp32 storage (the model's fp32 paths) through ops that round
 *                every fb_act output to a 16-bit value, the master weights
 *                rounded: the same arithmetic on the other code paths. The
 *                16-bit run must match it within MATCH_TOL (it is bitwise
 *                equal with a deterministic BLAS): a slip in the 16-bit paths
 *                (an offset, a block's weights not rounded in, the logits
 *                read wrongly) shows at O(1). Losses, kept logits, every
 *                gradient and the per-sample routing counts are compared;
 *       fp32     model_compare_vs_fp32: ops_cpu() with the master weights
 *                rounded, within bounds derived from rounding (model_compare.c;
 *                the fp16 runs, all three, use a loss scale of 2^16).
 *     Models: those of model_compare.c (dense GQA, MoE top-2 of 4 dropless,
 *     MoE with tied embeddings and expert dropout, the MoE routing on a
 *     built-in feature), and the MoE with its random initial router, for
 *     the rounded comparison alone: rounding flips some of its routing
 *     choices against fp32, but not against the rounded run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model_compare.h"
#include "cpu/half_conv.h"
#include "model/model.h"
#include "ops.h"
#include "rng.h"
#include "util/error.h"

static int fails;

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
    float *x = fb_malloc(n * sizeof *x);
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
static void r_dropout_rows_fwd(fb_act *x, uint8_t *m, size_t rows, size_t width, float p, uint64_t seed,
                               const uint64_t *row_offset)
{
    CPU->dropout_rows_fwd(x, m, rows, width, p, seed, row_offset);
    rnd(x, rows * width);
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
    t.dropout_rows_fwd = r_dropout_rows_fwd;
    return &t;
}

/* ============================================================ the model */

#define MATCH_TOL 1e-4

/* h (the 16-bit run of case c) against the rounded run: one line,
 * everything within MATCH_TOL. Returns the failures. */
static int compare_rounded(const model_compare_case_t *c, const model_compare_run_t *h, fb_dtype_t dt, void *arg)
{
    (void)arg;
    const model_input_t *in = model_compare_input();
    model_compare_run_t q;
    model_compare_run(c, ops_rounded(dt), in, model_compare_loss_scale(dt), dt, &q);
    double worst = fmax(model_compare_rel_scalar(h->lm, q.lm),
                        fmax(model_compare_rel_scalar(h->aux, q.aux), model_compare_rel_scalar(h->z, q.z)));
    if (c->keep_logits)
        worst = fmax(worst, model_compare_rel_norm(h->logits, q.logits, (size_t)in->T * (size_t)c->mc.vocab_size));
    param_table_t t;
    param_table_build(&t, &c->mc);
    for (int i = 0; i < t.n; i++) {
        const double r = model_compare_rel_norm(h->grads[i], q.grads[i], t.views[i].numel);
        worst = isnan(r) ? r : fmax(worst, r);
    }
    const long rd = model_compare_routing_diff(h, &q);
    const int ok = worst <= MATCH_TOL && rd == 0; /* NaN fails */
    printf("  %-8s %-9s vs rounded fp32: losses, %slogits and %d gradients, worst rel %.2e, routing diffs %ld %s\n",
           ops_cpu16(dt)->name, c->name, c->keep_logits ? "" : "no ", t.n, worst, rd, ok ? "PASS" : "FAIL");
    param_table_free(&t);
    model_compare_run_free(&q);
    return !ok;
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

    /* the MoE of model_compare.c with its random initial router */
    const model_compare_case_t *cases;
    const int ncases = model_compare_cases(&cases);
    model_compare_case_t moe_rand = {0};
    for (int i = 0; i < ncases; i++)
        if (!strcmp(cases[i].name, "moe"))
            moe_rand = cases[i];
    if (!moe_rand.name) {
        printf("FAIL: model_compare.c has no case \"moe\"\n");
        return 1;
    }
    moe_rand.name = "moe-rand";
    moe_rand.routing_feature = 0;

    const fb_dtype_t dts[2] = {FB_DTYPE_BF16, FB_DTYPE_F16};
    for (int d = 0; d < 2; d++) {
        const ops_t *o16 = ops_cpu16(dts[d]);
        fails += model_compare_vs_fp32_each(o16, dts[d], compare_rounded, NULL);
        model_compare_run_t h;
        model_compare_run(&moe_rand, o16, model_compare_input(), model_compare_loss_scale(dts[d]), FB_DTYPE_F32, &h);
        fails += compare_rounded(&moe_rand, &h, dts[d], NULL);
        model_compare_run_free(&h);
    }
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
