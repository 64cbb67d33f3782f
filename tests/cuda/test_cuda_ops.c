/* Every op of the CUDA backend, ops_cuda(FB_DTYPE_BF16) and
 * ops_cuda(FB_DTYPE_F16), against the fp32 CPU backend ops_cpu().
 *
 * Inputs are random fp32 values rounded to the compute dtype on the host
 * (round to nearest even, by the helpers below), so both backends see the
 * same numbers: the CPU as fp32, the GPU as the packed 16-bit values. Every
 * output the op overwrites is poisoned before the GPU run (all bits set: NaN
 * in bf16, fp16 and fp32, -1 as int32, 255 as a mask byte), so an element
 * the GPU never writes fails; outputs the op accumulates into start from
 * identical random values on both sides.
 *
 * Metric, per output: max|gpu - cpu| / max|cpu| (normwise), and no
 * non-finite GPU element where the CPU's is finite; integer outputs, copies
 * and conversions exactly.
 *
 * Tolerances. u is the unit roundoff of the compute dtype: 2^-8 for bf16
 * (8 significant bits), 2^-11 for fp16 (11 bits). The inputs are identical,
 * so differences come only from how the GPU computes and rounds:
 *  - TOL_EW = 2u (bf16 7.8e-3, fp16 9.8e-4): elementwise and row-local ops
 *    whose fp32 result is rounded once (at most u of the element, so at
 *    most u normwise), plus u for fp32 intermediates computed differently
 *    (fast exp, FMA contraction) landing on the other side of a rounding
 *    boundary.
 *  - TOL_RED = 4u (bf16 1.6e-2, fp16 2.0e-3): matmuls, attention, sums over
 *    rows or over the top-k: fp32 accumulation in another order, and
 *    intermediates (attention's P and dS, partial sums) that the GPU may
 *    round to the compute dtype before the tensor cores read them; those
 *    rounding errors are independent, so normwise they stay within a
 *    couple of u.
 *  - rope: TOL_EW + pos_max * 2^-21. The angle pos * theta^(-2i/hd) is
 *    formed in fp32 on both sides, and a frequency a few ulps apart (CUDA's
 *    powf is within 2 ulp, glibc's within 1) moves an angle of 30000 rad by
 *    up to ~1e-2 rad. The term vanishes for the small-position runs.
 *  - fp32 outputs: TOL_F32 = 1e-6 where each element sees a few fp32
 *    roundings (axpy, scale, adamw; sumsq, accumulated in double);
 *    TOL_F32_EXP = 1e-5 for the router's fp32 softmax (exp implementations
 *    differ by a few ulp); TOL_F32_SUM = 1e-4 for fp32 outputs reduced from
 *    compute-dtype inputs (matmul_f32, gmm_bwd_weight, embedding_bwd, rstd,
 *    dw, lse, losses): the products are exact in fp32 and the sums of up to
 *    ~500 terms differ only by order, ~sqrt(K) 2^-24, far below 1e-4.
 *
 * With --attn-generic the program sets FABULA_ATTN_GENERIC=1 before the
 * backend starts (it reads the variable once per process) and runs only the
 * attention checks, on the generic kernels. Exit 0 all passed, 1 some
 * failed, 77 no CUDA device (automake's skip), 99 bad usage.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "ops.h"
#include "rng.h"
#include "util/error.h"

#define TOL_F32 1e-6
#define TOL_F32_EXP 1e-5
#define TOL_F32_SUM 1e-4

static const ops_t *gpu, *cpu;   /* the table under test and the reference */
static fb_dtype_t dtype;         /* gpu->act_dtype */
static const char *dname;
static double tol_ew, tol_red;   /* 2u and 4u of dtype */
static const char *attn_tag = ""; /* "[generic]" with --attn-generic */
static int nchecks, nfailed;
static char shape[160];          /* the case being checked, for the report lines */

/* ---------------------------------------------------------------- 16-bit formats */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t bf16_from_f32(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even at bit 16 */
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

static uint16_t f16_from_f32(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00u;
    if (a >= 0x477ff000u) /* >= 65520, halfway past 65504: even neighbour is inf */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* >= 2^-14: normal in fp16 */
        a += 0xfffu + ((a >> 13) & 1u);
        a -= (uint32_t)(127 - 15) << 23;
        return sign | (uint16_t)(a >> 13);
    }
    /* subnormal in fp16: a multiple of 2^-24; the scaling is exact and
     * nearbyintf rounds half to even in the default rounding mode */
    return sign | (uint16_t)nearbyintf(fabsf(f) * 0x1p24f);
}

static float f16_to_f32(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    int m = h & 0x3ff;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000u) ? -v : v;
}

static uint16_t pack16(float f) { return dtype == FB_DTYPE_BF16 ? bf16_from_f32(f) : f16_from_f32(f); }
static float unpack16(uint16_t b) { return dtype == FB_DTYPE_BF16 ? bf16_to_f32(b) : f16_to_f32(b); }
static float round_act(float f) { return unpack16(pack16(f)); }

/* ---------------------------------------------------------------- buffers of one case */

/* Host and device buffers are recorded and released together by case_end,
 * after the case's results have been read back. */
typedef struct {
    void **p;
    size_t n, cap;
} ptr_list_t;

static ptr_list_t host_bufs, dev_bufs;

static void ptr_list_push(ptr_list_t *l, void *p)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->p = fb_realloc(l->p, l->cap * sizeof *l->p);
    }
    l->p[l->n++] = p;
}

static void case_end(void)
{
    while (host_bufs.n)
        free(host_bufs.p[--host_bufs.n]);
    while (dev_bufs.n)
        gpu->release(dev_bufs.p[--dev_bufs.n]);
}

static void *halloc(size_t bytes)
{
    void *p = fb_calloc(bytes ? bytes : 1, 1);
    ptr_list_push(&host_bufs, p);
    return p;
}

static void *dalloc(size_t bytes)
{
    void *p = gpu->alloc(bytes ? bytes : 1);
    ptr_list_push(&dev_bufs, p);
    return p;
}

static void *up_raw(const void *host, size_t bytes)
{
    void *d = dalloc(bytes);
    if (bytes)
        gpu->to_backend(d, host, bytes);
    return d;
}

static fb_act *up_act(const float *host, size_t n)
{
    uint16_t *b = halloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        b[i] = pack16(host[i]);
    return up_raw(b, n * sizeof *b);
}

static float *up_f32(const float *host, size_t n) { return up_raw(host, n * sizeof(float)); }
static int32_t *up_i32(const int32_t *host, size_t n) { return up_raw(host, n * sizeof(int32_t)); }

/* A device buffer with every bit set. */
static void *poison(size_t bytes)
{
    unsigned char *h = halloc(bytes);
    memset(h, 0xff, bytes);
    return up_raw(h, bytes);
}

static fb_act *poison_act(size_t n) { return poison(n * gpu->act_bytes); }
static float *poison_f32(size_t n) { return poison(n * sizeof(float)); }

static void *down_raw(const void *dev, size_t bytes)
{
    void *h = halloc(bytes);
    if (bytes)
        gpu->to_host(h, dev, bytes);
    return h;
}

static float *down_act(const fb_act *dev, size_t n)
{
    const uint16_t *b = down_raw(dev, n * sizeof *b);
    float *f = halloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = unpack16(b[i]);
    return f;
}

static float *down_f32(const float *dev, size_t n) { return down_raw(dev, n * sizeof(float)); }

/* The CPU's fb_act is fp32. */
#define ACT(p) ((fb_act *)(p))
#define CACT(p) ((const fb_act *)(p))

/* ---------------------------------------------------------------- random host data */

static uint64_t rng_counter;

static float urand(void) { return fb_uniform_hash(0x5eed, rng_counter++) * 2.0f - 1.0f; }
static int irand(int n) { return (int)(fb_hash2(0x5eed, rng_counter++) % (uint64_t)n); }

static float *rnd_f32(size_t n, float scale)
{
    float *p = halloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * urand();
    return p;
}

/* Random values exactly representable in the compute dtype. */
static float *rnd_act(size_t n, float scale)
{
    float *p = rnd_f32(n, scale);
    for (size_t i = 0; i < n; i++)
        p[i] = round_act(p[i]);
    return p;
}

static float *zeros(size_t n) { return halloc(n * sizeof(float)); }

static float *dup_f32(const float *p, size_t n)
{
    float *q = halloc(n * sizeof *q);
    memcpy(q, p, n * sizeof *q);
    return q;
}

/* A CPU output rounded to the compute dtype, to feed both backends. */
static float *rounded(const float *p, size_t n)
{
    float *q = dup_f32(p, n);
    for (size_t i = 0; i < n; i++)
        q[i] = round_act(q[i]);
    return q;
}

/* ---------------------------------------------------------------- checks */

static void set_shape(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_shape(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(shape, sizeof shape, fmt, ap);
    va_end(ap);
}

static void report(const char *op, const char *out, const char *err, double tol, int ok, const char *note)
{
    nchecks++;
    nfailed += !ok;
    printf("%-26s %-4s %-44s %-9s %s tol %.1e %s%s\n", op, dname, shape, out, err, tol, ok ? "PASS" : "FAIL",
           note);
}

/* Normwise relative error; a non-finite GPU value where the CPU's is finite
 * (or a different non-finite value) fails whatever the error. */
static void check_f(const char *op, const char *out, const float *g, const float *c, size_t n, double tol)
{
    double maxabs = 0, maxerr = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double cv = c[i], gv = g[i];
        if (!isfinite(cv)) {
            bad += !(isnan(cv) ? isnan(gv) : gv == cv);
            continue;
        }
        if (!isfinite(gv)) {
            bad++;
            continue;
        }
        maxabs = fmax(maxabs, fabs(cv));
        maxerr = fmax(maxerr, fabs(gv - cv));
    }
    double rel = maxerr / (maxabs + 1e-30);
    char err[48], note[128] = "";
    snprintf(err, sizeof err, "rel %.3e", rel);
    if (bad)
        snprintf(note, sizeof note, "  (%zu of %zu non-finite where the CPU's is not)", bad, n);
    report(op, out, err, tol, bad == 0 && rel <= tol, note);
}

static void check_exact(const char *op, const char *out, const void *g, const void *c, size_t n, size_t elem)
{
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += memcmp((const char *)g + i * elem, (const char *)c + i * elem, elem) != 0;
    char err[48];
    snprintf(err, sizeof err, "diff %zu/%zu", diff, n);
    report(op, out, err, 0.0, diff == 0, "");
}

static void check_scalar(const char *op, const char *out, double g, double c, double tol)
{
    double rel = fabs(g - c) / (fabs(c) + 1e-300);
    char err[48];
    snprintf(err, sizeof err, "rel %.3e", rel);
    report(op, out, err, tol, isfinite(g) && rel <= tol, "");
}

/* ---------------------------------------------------------------- memory and conversions */

static void test_memory(void)
{
    const size_t n = 4099;
    set_shape("bytes %zu", n);
    unsigned char *h = halloc(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned char)(i * 7 + 3);
    void *a = up_raw(h, n), *b = poison(n);
    gpu->copy(b, a, n);
    gpu->zero((char *)b + 100, 1000);
    unsigned char *want = halloc(n);
    memcpy(want, h, n);
    memset(want + 100, 0, 1000);
    check_exact("copy+zero", "bytes", down_raw(b, n), want, n, 1);
    case_end();
}

/* Ties, overflow to inf (fp16), subnormals of fp16, signed zero, infinities,
 * then random values over 50 binades; the bits must be exactly those of the
 * host's round-to-nearest-even. */
static const float convert_special[] = {
    0.0f, -0.0f, 1.0f, -1.0f, 0x1.01p0f, 0x1.03p0f, -0x1.03p0f, 0x1.002p0f, 0x1.006p0f, 65504.0f,
    65519.0f, 65520.0f, 70000.0f, -70000.0f, 0x1p-14f, 1e-6f, 3e-8f, 0x1p-25f, 0x1.8p-25f, 0x1p-24f,
    0x1.8p-24f, 1e30f, -1e30f, 3e38f, INFINITY, -INFINITY,
};
#define NSPECIAL (sizeof convert_special / sizeof convert_special[0])

static float *convert_inputs(size_t n)
{
    float *x = halloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = i < NSPECIAL ? convert_special[i] : urand() * ldexpf(1.0f, irand(50) - 30);
    return x;
}

static void test_convert(void)
{
    const size_t n = 4099 + NSPECIAL;
    set_shape("n %zu (incl. ties, overflow, subnormals)", n);
    float *x = convert_inputs(n);
    uint16_t *want = halloc(n * sizeof *want);
    uint32_t *back = halloc(n * sizeof *back);
    for (size_t i = 0; i < n; i++) {
        want[i] = pack16(x[i]);
        back[i] = f32_bits(unpack16(want[i]));
    }
    fb_act *d16 = poison_act(n);
    gpu->to_act(d16, up_f32(x, n), n);
    check_exact("to_act", "bits", down_raw(d16, n * 2), want, n, 2);
    float *d32 = poison_f32(n);
    gpu->act_to_f32(d32, d16, n);
    check_exact("act_to_f32", "bits", down_raw(d32, n * 4), back, n, 4);
    case_end();
}

/* ---------------------------------------------------------------- dense algebra */

static void test_matmul(int M, int N, int K, int ta, int tb, float beta)
{
    set_shape("M%d N%d K%d tA%d tB%d beta%g", M, N, K, ta, tb, beta);
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = rnd_act(na, 1), *B = rnd_act(nb, 1), *C0 = rnd_act(nc, 1);
    fb_act *dA = up_act(A, na), *dB = up_act(B, nb);

    fb_act *dC = beta == 0.0f ? poison_act(nc) : up_act(C0, nc);
    gpu->matmul(dC, dA, dB, M, N, K, ta, tb, beta);
    float *cC = beta == 0.0f ? zeros(nc) : dup_f32(C0, nc);
    cpu->matmul(ACT(cC), CACT(A), CACT(B), M, N, K, ta, tb, beta);
    check_f("matmul", "C", down_act(dC, nc), cC, nc, tol_red);

    float *F0 = rnd_f32(nc, 1);
    float *dF = beta == 0.0f ? poison_f32(nc) : up_f32(F0, nc);
    gpu->matmul_f32(dF, dA, dB, M, N, K, ta, tb, beta);
    float *cF = beta == 0.0f ? zeros(nc) : dup_f32(F0, nc);
    cpu->matmul_f32(cF, CACT(A), CACT(B), M, N, K, ta, tb, beta);
    check_f("matmul_f32", "C", down_f32(dF, nc), cF, nc, TOL_F32_SUM);
    case_end();
}

static void test_vector_ops(size_t n)
{
    set_shape("n %zu", n);
    float *x = rnd_f32(n, 1), *y = rnd_f32(n, 1);
    float *dx = up_f32(x, n), *dy = up_f32(y, n);
    gpu->axpy(dy, dx, n, -0.37f);
    cpu->axpy(y, x, n, -0.37f);
    check_f("axpy", "y", down_f32(dy, n), y, n, TOL_F32);
    gpu->scale(dx, n, 1.7f);
    cpu->scale(x, n, 1.7f);
    check_f("scale", "x", down_f32(dx, n), x, n, TOL_F32);
    check_scalar("sumsq", "sum", gpu->sumsq(dx, n), cpu->sumsq(x, n), TOL_F32);

    float *ya = rnd_act(n, 1), *xa = rnd_act(n, 1);
    fb_act *dya = up_act(ya, n);
    gpu->act_axpy(dya, up_act(xa, n), n, 0.75f);
    cpu->act_axpy(ACT(ya), CACT(xa), n, 0.75f);
    check_f("act_axpy", "y", down_act(dya, n), ya, n, tol_ew);
    case_end();
}

/* "inf or NaN when any element is": one bad element in a long vector. */
static void test_sumsq_nonfinite(size_t n, float bad)
{
    set_shape("n %zu, x[%zu] = %g", n, n / 3, bad);
    float *x = rnd_f32(n, 1);
    x[n / 3] = bad;
    double s = gpu->sumsq(up_f32(x, n), n);
    char err[48];
    snprintf(err, sizeof err, "got %g", s);
    report("sumsq", "nonfinite", err, 0.0, !isfinite(s), "");
    case_end();
}

/* ---------------------------------------------------------------- rows of the residual stream */

static void test_embedding(int vocab, int T, int D)
{
    set_shape("vocab %d T%d D%d", vocab, T, D);
    int32_t *tok = halloc((size_t)T * sizeof *tok);
    for (int t = 0; t < T; t++)
        tok[t] = irand(vocab);
    tok[0] = tok[T - 1] = vocab - 1; /* a repeat, and the last row of the table */
    const size_t nt = (size_t)vocab * D, no = (size_t)T * D;
    float *table = rnd_act(nt, 1);
    int32_t *dtok = up_i32(tok, (size_t)T);

    fb_act *dout = poison_act(no);
    gpu->embedding_fwd(dout, dtok, up_act(table, nt), T, D);
    float *out = zeros(no);
    cpu->embedding_fwd(ACT(out), tok, CACT(table), T, D);
    check_f("embedding_fwd", "out", down_act(dout, no), out, no, 0.0);

    float *dtab0 = rnd_f32(nt, 1), *g = rnd_act(no, 1);
    float *ddtab = up_f32(dtab0, nt);
    gpu->embedding_bwd(ddtab, up_act(g, no), dtok, T, D);
    float *cdtab = dup_f32(dtab0, nt);
    cpu->embedding_bwd(cdtab, CACT(g), tok, T, D);
    check_f("embedding_bwd", "dtable", down_f32(ddtab, nt), cdtab, nt, TOL_F32_SUM);
    case_end();
}

static void test_rmsnorm(int T, int D)
{
    set_shape("T%d D%d", T, D);
    const size_t n = (size_t)T * D;
    const float eps = 1e-5f;
    float *x = rnd_act(n, 1), *w = halloc((size_t)D * sizeof *w);
    for (int j = 0; j < D; j++)
        w[j] = round_act(1.0f + 0.25f * urand());
    fb_act *dx = up_act(x, n), *dw = up_act(w, (size_t)D);

    fb_act *dout = poison_act(n);
    float *drstd = poison_f32((size_t)T);
    gpu->rmsnorm_fwd(dout, drstd, dx, dw, T, D, eps);
    float *out = zeros(n), *rstd = zeros((size_t)T);
    cpu->rmsnorm_fwd(ACT(out), rstd, CACT(x), CACT(w), T, D, eps);
    check_f("rmsnorm_fwd", "out", down_act(dout, n), out, n, tol_ew);
    check_f("rmsnorm_fwd", "rstd", down_f32(drstd, (size_t)T), rstd, (size_t)T, TOL_F32_SUM);

    /* both get the CPU's rstd */
    float *g = rnd_act(n, 1), *gx0 = rnd_act(n, 1), *gw0 = rnd_f32((size_t)D, 2);
    fb_act *dgx = up_act(gx0, n);
    float *dgw = up_f32(gw0, (size_t)D);
    gpu->rmsnorm_bwd(dgx, dgw, up_act(g, n), dx, dw, up_f32(rstd, (size_t)T), T, D);
    float *cgx = dup_f32(gx0, n), *cgw = dup_f32(gw0, (size_t)D);
    cpu->rmsnorm_bwd(ACT(cgx), cgw, CACT(g), CACT(x), CACT(w), rstd, T, D);
    check_f("rmsnorm_bwd", "dx", down_act(dgx, n), cgx, n, tol_red);
    check_f("rmsnorm_bwd", "dw", down_f32(dgw, (size_t)D), cgw, (size_t)D, TOL_F32_SUM);
    case_end();
}

static void test_rope(int T, int nheads, int hd, float theta, int posmax)
{
    set_shape("T%d heads %d hd%d theta %g pos<=%d", T, nheads, hd, theta, posmax);
    const size_t n = (size_t)T * nheads * hd;
    const double tol = tol_ew + posmax * 0x1p-21;
    int32_t *pos = halloc((size_t)T * sizeof *pos);
    for (int t = 0; t < T; t++)
        pos[t] = irand(posmax + 1);
    pos[0] = 0;
    pos[T - 1] = posmax;
    int32_t *dpos = up_i32(pos, (size_t)T);

    float *x = rnd_act(n, 1);
    fb_act *dx = up_act(x, n);
    gpu->rope_fwd(dx, dpos, T, nheads, hd, theta);
    cpu->rope_fwd(ACT(x), pos, T, nheads, hd, theta);
    check_f("rope_fwd", "x", down_act(dx, n), x, n, tol);

    float *g = rnd_act(n, 1);
    fb_act *dg = up_act(g, n);
    gpu->rope_bwd(dg, dpos, T, nheads, hd, theta);
    cpu->rope_bwd(ACT(g), pos, T, nheads, hd, theta);
    check_f("rope_bwd", "dx", down_act(dg, n), g, n, tol);
    case_end();
}

/* ---------------------------------------------------------------- attention */

static void test_attention(const int *lens, int nseq, int H, int KV, int hd)
{
    int32_t *cu = halloc((size_t)(nseq + 1) * sizeof *cu);
    for (int i = 0; i < nseq; i++)
        cu[i + 1] = cu[i] + lens[i];
    const int T = cu[nseq];
    set_shape("T%d nseq %d H%d KV%d hd%d", T, nseq, H, KV, hd);
    const size_t nq = (size_t)T * H * hd, nk = (size_t)T * KV * hd, nl = (size_t)T * H;
    char fwd[40], bwd[40];
    snprintf(fwd, sizeof fwd, "attention_fwd%s", attn_tag);
    snprintf(bwd, sizeof bwd, "attention_bwd%s", attn_tag);

    /* scale 2: scores of std ~1.3, softmax neither flat nor one-hot */
    float *q = rnd_act(nq, 2), *k = rnd_act(nk, 2), *v = rnd_act(nk, 1);
    fb_act *dq = up_act(q, nq), *dk = up_act(k, nk), *dv = up_act(v, nk);
    int32_t *dcu = up_i32(cu, (size_t)nseq + 1);

    fb_act *dout = poison_act(nq);
    float *dlse = poison_f32(nl);
    gpu->attention_fwd(dout, dlse, dq, dk, dv, dcu, nseq, T, H, KV, hd);
    float *out = zeros(nq), *lse = zeros(nl);
    cpu->attention_fwd(ACT(out), lse, CACT(q), CACT(k), CACT(v), cu, nseq, T, H, KV, hd);
    check_f(fwd, "out", down_act(dout, nq), out, nq, tol_red);
    check_f(fwd, "lse", down_f32(dlse, nl), lse, nl, TOL_F32_SUM);

    /* the backward of both gets the CPU forward's out (rounded) and lse */
    float *o = rounded(out, nq), *g = rnd_act(nq, 1);
    fb_act *gq = poison_act(nq), *gk = poison_act(nk), *gv = poison_act(nk);
    gpu->attention_bwd(gq, gk, gv, up_act(g, nq), dq, dk, dv, up_act(o, nq), up_f32(lse, nl), dcu, nseq, T, H, KV,
                       hd);
    float *cq = zeros(nq), *ck = zeros(nk), *cv = zeros(nk);
    cpu->attention_bwd(ACT(cq), ACT(ck), ACT(cv), CACT(g), CACT(q), CACT(k), CACT(v), CACT(o), lse, cu, nseq, T, H,
                       KV, hd);
    check_f(bwd, "dq", down_act(gq, nq), cq, nq, tol_red);
    check_f(bwd, "dk", down_act(gk, nk), ck, nk, tol_red);
    check_f(bwd, "dv", down_act(gv, nk), cv, nk, tol_red);
    case_end();
}

static void attention_suite(void)
{
    static const int packed[] = {1, 64, 200, 17, 129, 2};
    static const int tiny[] = {3, 1, 1};
    static const int hds[] = {16, 64, 128};
    for (int i = 0; i < 3; i++)
        test_attention(packed, 6, 4, 2, hds[i]);
    test_attention(tiny, 3, 4, 2, 64);
    test_attention(tiny, 3, 2, 2, 128);
}

/* Generation's decode_attention (docs/generate.md): rows past..T-1 against
 * a cache of all T rows, against the CPU op. */
static void test_decode_attention(int T, int past, int H, int KV, int hd)
{
    set_shape("T%d past %d H%d KV%d hd%d", T, past, H, KV, hd);
    const int n = T - past;
    const size_t nq = (size_t)n * H * hd, nk = (size_t)T * KV * hd;
    float *q = rnd_act(nq, 2), *k = rnd_act(nk, 2), *v = rnd_act(nk, 1);
    fb_act *dout = poison_act(nq);
    gpu->decode_attention(dout, up_act(q, nq), up_act(k, nk), up_act(v, nk), n, past, H, KV, hd);
    float *out = zeros(nq);
    cpu->decode_attention(ACT(out), CACT(q), CACT(k), CACT(v), n, past, H, KV, hd);
    check_f("decode_attention", "out", down_act(dout, nq), out, nq, tol_red);
    case_end();
}

/* ---------------------------------------------------------------- elementwise */

static void test_swiglu(size_t n)
{
    set_shape("n %zu", n);
    float *g = rnd_act(n, 4), *u = rnd_act(n, 1);
    fb_act *dg = up_act(g, n), *du = up_act(u, n);
    fb_act *dh = poison_act(n);
    gpu->swiglu_fwd(dh, dg, du, n);
    float *h = zeros(n);
    cpu->swiglu_fwd(ACT(h), CACT(g), CACT(u), n);
    check_f("swiglu_fwd", "h", down_act(dh, n), h, n, tol_ew);

    float *gh = rnd_act(n, 1);
    fb_act *gg = poison_act(n), *gu = poison_act(n);
    gpu->swiglu_bwd(gg, gu, up_act(gh, n), dg, du, n);
    float *cg = zeros(n), *cu = zeros(n);
    cpu->swiglu_bwd(ACT(cg), ACT(cu), CACT(gh), CACT(g), CACT(u), n);
    check_f("swiglu_bwd", "dg", down_act(gg, n), cg, n, tol_ew);
    check_f("swiglu_bwd", "du", down_act(gu, n), cu, n, tol_ew);
    case_end();
}

/* Each row at its own offset: the CPU's rows, bit for bit. */
static void test_dropout_rows(size_t rows, size_t width, float p, uint64_t seed)
{
    const size_t n = rows * width;
    set_shape("rows %zu width %zu p %g", rows, width, p);
    uint64_t *off = halloc(rows * sizeof *off);
    for (size_t r = 0; r < rows; r++)
        off[r] = fb_hash2(7, r);
    float *x = rnd_act(n, 1);
    fb_act *dx = up_act(x, n);
    uint8_t *dmask = poison(n);
    gpu->dropout_rows_fwd(dx, dmask, rows, width, p, seed, up_raw(off, rows * sizeof *off));
    uint8_t *mask = halloc(n);
    cpu->dropout_rows_fwd(ACT(x), mask, rows, width, p, seed, off);
    check_f("dropout_rows_fwd", "x", down_act(dx, n), x, n, tol_ew);
    check_exact("dropout_rows_fwd", "mask", down_raw(dmask, n), mask, n, 1);
    case_end();
}

static void test_dropout(size_t n, float p, uint64_t seed, uint64_t offset)
{
    set_shape("n %zu p %g offset %llu", n, p, (unsigned long long)offset);
    float *x = rnd_act(n, 1);
    fb_act *dx = up_act(x, n);
    uint8_t *dmask = poison(n);
    gpu->dropout_fwd(dx, dmask, n, p, seed, offset);
    uint8_t *mask = halloc(n);
    cpu->dropout_fwd(ACT(x), mask, n, p, seed, offset);
    check_f("dropout_fwd", "x", down_act(dx, n), x, n, tol_ew);
    check_exact("dropout_fwd", "mask", down_raw(dmask, n), mask, n, 1);

    /* both get the CPU's mask */
    float *g = rnd_act(n, 1);
    fb_act *dg = up_act(g, n);
    gpu->dropout_bwd(dg, up_raw(mask, n), n, p);
    cpu->dropout_bwd(ACT(g), mask, n, p);
    check_f("dropout_bwd", "dx", down_act(dg, n), g, n, tol_ew);
    case_end();
}

static void test_adamw(size_t n, int mode, long step)
{
    set_shape("n %zu adam_w_mode %d step %ld", n, mode, step);
    float *p = rnd_f32(n, 1), *g = rnd_f32(n, 0.1f), *m = rnd_f32(n, 0.01f), *v = rnd_f32(n, 1e-4f);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    float *dp = up_f32(p, n), *dm = up_f32(m, n), *dv = up_f32(v, n);
    gpu->adamw(dp, up_f32(g, n), dm, dv, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, mode, step);
    cpu->adamw(p, g, m, v, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, mode, step);
    check_f("adamw", "p", down_f32(dp, n), p, n, TOL_F32);
    check_f("adamw", "m", down_f32(dm, n), m, n, TOL_F32);
    check_f("adamw", "v", down_f32(dv, n), v, n, TOL_F32);
    case_end();
}

/* ---------------------------------------------------------------- loss */

static void test_cross_entropy(int T, int V)
{
    set_shape("T%d V%d", T, V);
    const size_t n = (size_t)T * V;
    const float gs = 0.5f;
    /* scale 6: a few non-target probabilities well above 1/V */
    float *logits = rnd_act(n, 6);
    int32_t *tgt = halloc((size_t)T * sizeof *tgt);
    for (int t = 0; t < T; t++)
        tgt[t] = t % 5 == 2 ? -1 : irand(V);
    tgt[0] = V - 1;
    tgt[1] = 0;
    int32_t *dtgt = up_i32(tgt, (size_t)T);
    fb_act *dlog = up_act(logits, n);

    float *dloss = poison_f32((size_t)T);
    fb_act *ddl = poison_act(n);
    gpu->cross_entropy(dloss, ddl, dlog, dtgt, T, V, gs);
    float *loss = zeros((size_t)T), *dl = zeros(n);
    cpu->cross_entropy(loss, ACT(dl), CACT(logits), tgt, T, V, gs);
    check_f("cross_entropy", "loss", down_f32(dloss, (size_t)T), loss, (size_t)T, TOL_F32_SUM);
    float *gdl = down_act(ddl, n);
    check_f("cross_entropy", "dlogits", gdl, dl, n, tol_red);
    /* the target's p - 1 dominates the norm; the softmax elsewhere on its own */
    float *gnt = dup_f32(gdl, n), *cnt = dup_f32(dl, n);
    for (int t = 0; t < T; t++)
        if (tgt[t] >= 0)
            gnt[(size_t)t * V + tgt[t]] = cnt[(size_t)t * V + tgt[t]] = 0;
    check_f("cross_entropy", "dlog_rest", gnt, cnt, n, tol_red);

    /* in place: dlogits == logits */
    float *dloss2 = poison_f32((size_t)T);
    gpu->cross_entropy(dloss2, dlog, dlog, dtgt, T, V, gs);
    float *loss2 = zeros((size_t)T), *inplace = dup_f32(logits, n);
    cpu->cross_entropy(loss2, ACT(inplace), CACT(inplace), tgt, T, V, gs);
    check_f("cross_entropy[inplace]", "loss", down_f32(dloss2, (size_t)T), loss2, (size_t)T, TOL_F32_SUM);
    check_f("cross_entropy[inplace]", "dlogits", down_act(dlog, n), inplace, n, tol_red);
    case_end();
}

/* ---------------------------------------------------------------- MoE */

static void shuffle(int *a, int n)
{
    for (int i = 0; i < n; i++)
        a[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = irand(i + 1), s = a[i];
        a[i] = a[j];
        a[j] = s;
    }
}

static void test_router(int T, int E, int K)
{
    set_shape("T%d E%d K%d", T, E, K);
    const size_t ne = (size_t)T * E, nk = (size_t)T * K;
    /* each row a shuffled ladder of levels 0.2 apart, plus a row offset:
     * no ties, and no top-k choice that rounding could flip */
    float *logits = halloc(ne * sizeof *logits);
    int *perm = halloc((size_t)E * sizeof *perm);
    for (int t = 0; t < T; t++) {
        shuffle(perm, E);
        float off = 3.0f * urand();
        for (int e = 0; e < E; e++)
            logits[(size_t)t * E + e] = 0.2f * (float)perm[e] - 0.1f * (float)E + off;
    }
    float *dprobs = poison_f32(ne), *dlse = poison_f32((size_t)T), *dw = poison_f32(nk);
    int32_t *didx = poison(nk * sizeof(int32_t));
    gpu->router_fwd(dprobs, dlse, didx, dw, up_f32(logits, ne), T, E, K);
    float *probs = zeros(ne), *lse = zeros((size_t)T), *w = zeros(nk);
    int32_t *idx = halloc(nk * sizeof *idx);
    cpu->router_fwd(probs, lse, idx, w, logits, T, E, K);
    check_f("router_fwd", "probs", down_f32(dprobs, ne), probs, ne, TOL_F32_EXP);
    check_f("router_fwd", "lse", down_f32(dlse, (size_t)T), lse, (size_t)T, TOL_F32_EXP);
    check_exact("router_fwd", "topk_idx", down_raw(didx, nk * sizeof(int32_t)), idx, nk, sizeof(int32_t));
    check_f("router_fwd", "topk_w", down_f32(dw, nk), w, nk, TOL_F32_EXP);

    /* both get the CPU forward's results */
    float *dtw = rnd_f32(nk, 1), *aux = rnd_f32((size_t)E, 0.5f);
    const float z = 0.1f;
    fb_act *ddl = poison_act(ne);
    gpu->router_bwd(ddl, up_f32(probs, ne), up_f32(lse, (size_t)T), up_i32(idx, nk), up_f32(w, nk), up_f32(dtw, nk),
                    up_f32(aux, (size_t)E), z, T, E, K);
    float *dl = zeros(ne);
    cpu->router_bwd(ACT(dl), probs, lse, idx, w, dtw, aux, z, T, E, K);
    check_f("router_bwd", "dlogits", down_act(ddl, ne), dl, ne, tol_red);
    case_end();
}

/* A routing plan as the model builds one (src/model/moe_plan.c): K distinct
 * experts per token, assignments taken in (k, t) order up to `capacity` per
 * expert, the rest dropped (-1), rows grouped by expert. Token 0 has all of
 * its assignments dropped. Every row 0..R-1 belongs to exactly one kept
 * assignment: combine_bwd writes only rows that some kept assignment names
 * (the CPU twin leaves others alone), so only such a plan lets its deo be
 * checked as overwritten. */
typedef struct {
    int R;
    int32_t *row_token;  /* [R] */
    int32_t *token_rows; /* [T*K] */
} plan_t;

static plan_t plan_make(int T, int E, int K, int capacity)
{
    const size_t nk = (size_t)T * K;
    int32_t *expert = halloc(nk * sizeof *expert), *slot = halloc(nk * sizeof *slot);
    int *perm = halloc((size_t)E * sizeof *perm), *kept = halloc((size_t)E * sizeof *kept);
    int *first = halloc((size_t)(E + 1) * sizeof *first);
    for (int t = 0; t < T; t++) {
        shuffle(perm, E);
        for (int k = 0; k < K; k++)
            expert[(size_t)t * K + k] = perm[k];
    }
    for (int k = 0; k < K; k++)
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)t * K + k;
            int e = expert[i];
            slot[i] = (t == 0 || kept[e] >= capacity) ? -1 : kept[e]++;
        }
    for (int e = 0; e < E; e++)
        first[e + 1] = first[e] + kept[e];
    plan_t p = {first[E], halloc((size_t)(first[E] ? first[E] : 1) * sizeof(int32_t)), halloc(nk * sizeof(int32_t))};
    for (size_t i = 0; i < nk; i++) {
        p.token_rows[i] = slot[i] < 0 ? -1 : first[expert[i]] + slot[i];
        if (slot[i] >= 0)
            p.row_token[p.token_rows[i]] = (int32_t)(i / (size_t)K);
    }
    return p;
}

static void test_moe_rows(int T, int E, int K, int D, int capacity)
{
    plan_t p = plan_make(T, E, K, capacity);
    const int R = p.R;
    set_shape("T%d E%d K%d D%d R%d cap %d", T, E, K, D, R, capacity);
    const size_t nx = (size_t)T * D, nr = (size_t)R * D, nk = (size_t)T * K;
    int32_t *drt = up_i32(p.row_token, (size_t)R), *dtr = up_i32(p.token_rows, nk);

    float *x = rnd_act(nx, 1);
    fb_act *dxp = poison_act(nr);
    gpu->permute_fwd(dxp, up_act(x, nx), drt, R, D);
    float *xp = zeros(nr);
    cpu->permute_fwd(ACT(xp), CACT(x), p.row_token, R, D);
    check_f("permute_fwd", "xp", down_act(dxp, nr), xp, nr, 0.0);

    float *dx0 = rnd_act(nx, 1), *gxp = rnd_act(nr, 1);
    fb_act *ddx = up_act(dx0, nx);
    gpu->permute_bwd(ddx, up_act(gxp, nr), dtr, T, K, D);
    float *cdx = dup_f32(dx0, nx);
    cpu->permute_bwd(ACT(cdx), CACT(gxp), p.token_rows, T, K, D);
    check_f("permute_bwd", "dx", down_act(ddx, nx), cdx, nx, tol_red);

    float *eo = rnd_act(nr, 1), *w = rnd_f32(nk, 0.5f);
    for (size_t i = 0; i < nk; i++)
        w[i] += 0.5f; /* gate weights in [0, 1) */
    fb_act *deo = up_act(eo, nr);
    float *dw = up_f32(w, nk);
    fb_act *dy = poison_act(nx);
    gpu->combine_fwd(dy, deo, dtr, dw, T, K, D);
    float *y = zeros(nx);
    cpu->combine_fwd(ACT(y), CACT(eo), p.token_rows, w, T, K, D);
    check_f("combine_fwd", "y", down_act(dy, nx), y, nx, tol_red);

    float *gy = rnd_act(nx, 1);
    fb_act *gdeo = poison_act(nr);
    float *gdw = poison_f32(nk);
    gpu->combine_bwd(gdeo, gdw, up_act(gy, nx), deo, dtr, dw, T, K, D);
    float *cdeo = zeros(nr), *cdw = zeros(nk);
    cpu->combine_bwd(ACT(cdeo), cdw, CACT(gy), CACT(eo), p.token_rows, w, T, K, D);
    check_f("combine_bwd", "deo", down_act(gdeo, nr), cdeo, nr, tol_ew);
    check_f("combine_bwd", "dw", down_f32(gdw, nk), cdw, nk, TOL_F32_SUM);
    case_end();
}

static void test_gmm(int E, const int *rows, int N, int K)
{
    int32_t *off = halloc((size_t)(E + 1) * sizeof *off);
    char *s = shape;
    s += snprintf(s, sizeof shape, "E%d N%d K%d rows", E, N, K);
    for (int e = 0; e < E; e++) {
        off[e + 1] = off[e] + rows[e];
        s += snprintf(s, sizeof shape - (size_t)(s - shape), " %d", rows[e]);
    }
    const int R = off[E];
    const size_t nx = (size_t)R * K, ny = (size_t)R * N, nw = (size_t)E * N * K;
    float *X = rnd_act(nx, 1), *W = rnd_act(nw, 1);
    fb_act *dX = up_act(X, nx), *dW = up_act(W, nw);

    fb_act *dY = poison_act(ny);
    gpu->gmm_fwd(dY, dX, dW, off, E, N, K);
    float *Y = zeros(ny);
    cpu->gmm_fwd(ACT(Y), CACT(X), CACT(W), off, E, N, K);
    check_f("gmm_fwd", "Y", down_act(dY, ny), Y, ny, tol_red);

    float *gY = rnd_act(ny, 1);
    fb_act *dgY = up_act(gY, ny), *gX = poison_act(nx);
    gpu->gmm_bwd_data(gX, dgY, dW, off, E, N, K);
    float *cX = zeros(nx);
    cpu->gmm_bwd_data(ACT(cX), CACT(gY), CACT(W), off, E, N, K);
    check_f("gmm_bwd_data", "dX", down_act(gX, nx), cX, nx, tol_red);

    /* experts without rows must keep their initial dW */
    float *gW0 = rnd_f32(nw, 1);
    float *gW = up_f32(gW0, nw);
    gpu->gmm_bwd_weight(gW, dgY, dX, off, E, N, K);
    float *cW = dup_f32(gW0, nw);
    cpu->gmm_bwd_weight(cW, CACT(gY), CACT(X), off, E, N, K);
    check_f("gmm_bwd_weight", "dW", down_f32(gW, nw), cW, nw, TOL_F32_SUM);
    case_end();
}

/* ---------------------------------------------------------------- sub-buffers */

/* Element offsets of 1 leave the pointers 2 or 4 bytes past an allocation's
 * alignment, as slices of a buffer can; the element before the slice must
 * stay untouched. Last, so that a fault here cannot hide other results. */
static void test_unaligned(void)
{
    const size_t n = 1001;
    set_shape("n %zu at element offset 1", n);
    float *x = convert_inputs(n + 1);
    uint16_t *want = halloc((n + 1) * sizeof *want);
    uint32_t *back = halloc((n + 1) * sizeof *back);
    want[0] = 0xffff;
    back[0] = 0xffffffffu;
    for (size_t i = 1; i <= n; i++) {
        want[i] = pack16(x[i]);
        back[i] = f32_bits(unpack16(want[i]));
    }
    float *dx = up_f32(x, n + 1);
    fb_act *d16 = poison_act(n + 1);
    gpu->to_act(fb_act_at(gpu, d16, 1), dx + 1, n);
    check_exact("to_act", "bits", down_raw(d16, (n + 1) * 2), want, n + 1, 2);
    float *d32 = poison_f32(n + 1);
    gpu->act_to_f32(d32 + 1, fb_act_at(gpu, d16, 1), n);
    check_exact("act_to_f32", "bits", down_raw(d32, (n + 1) * 4), back, n + 1, 4);

    float *y = rnd_act(n + 1, 1), *a = rnd_act(n + 1, 1);
    fb_act *dy = up_act(y, n + 1);
    gpu->act_axpy(fb_act_at(gpu, dy, 1), fb_act_at(gpu, up_act(a, n + 1), 1), n, -1.25f);
    cpu->act_axpy(ACT(y + 1), CACT(a + 1), n, -1.25f);
    check_f("act_axpy", "y", down_act(dy, n + 1), y, n + 1, tol_ew);
    case_end();
}

/* ---------------------------------------------------------------- driver */

/* A missing entry would crash mid-run; say which instead. */
static int table_complete(const ops_t *o)
{
    int ok = 1;
#define OPS_ENTRY(f)                                                                                                   \
    if (!o->f) {                                                                                                       \
        fprintf(stderr, "FAIL: backend %s has no %s\n", o->name, #f);                                                 \
        ok = 0;                                                                                                        \
    }
    OPS_ENTRY(alloc) OPS_ENTRY(release) OPS_ENTRY(zero) OPS_ENTRY(copy) OPS_ENTRY(to_backend) OPS_ENTRY(to_host)
    OPS_ENTRY(synchronize) OPS_ENTRY(to_act) OPS_ENTRY(act_to_f32) OPS_ENTRY(matmul) OPS_ENTRY(matmul_f32)
    OPS_ENTRY(axpy) OPS_ENTRY(act_axpy) OPS_ENTRY(scale) OPS_ENTRY(sumsq) OPS_ENTRY(embedding_fwd)
    OPS_ENTRY(embedding_bwd) OPS_ENTRY(rmsnorm_fwd) OPS_ENTRY(rmsnorm_bwd) OPS_ENTRY(rope_fwd) OPS_ENTRY(rope_bwd)
    OPS_ENTRY(attention_fwd) OPS_ENTRY(attention_bwd) OPS_ENTRY(swiglu_fwd) OPS_ENTRY(swiglu_bwd)
    OPS_ENTRY(cross_entropy) OPS_ENTRY(router_fwd) OPS_ENTRY(router_bwd) OPS_ENTRY(permute_fwd)
    OPS_ENTRY(permute_bwd) OPS_ENTRY(combine_fwd) OPS_ENTRY(combine_bwd) OPS_ENTRY(gmm_fwd) OPS_ENTRY(gmm_bwd_data)
    OPS_ENTRY(gmm_bwd_weight) OPS_ENTRY(dropout_fwd) OPS_ENTRY(dropout_bwd)
    OPS_ENTRY(dropout_rows_fwd) OPS_ENTRY(adamw)
#undef OPS_ENTRY
    return ok;
}

static int use_backend(fb_dtype_t dt)
{
    gpu = ops_cuda(dt);
    dtype = dt;
    dname = dt == FB_DTYPE_BF16 ? "bf16" : "f16";
    const double u = dt == FB_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    tol_ew = 2 * u;
    tol_red = 4 * u;
    if (!gpu || gpu->act_dtype != dt || gpu->act_bytes != 2) {
        fprintf(stderr, "FAIL: ops_cuda(%s) is %s, act_dtype %d, act_bytes %zu\n", dname, gpu ? "a table" : "NULL",
                gpu ? (int)gpu->act_dtype : -1, gpu ? gpu->act_bytes : (size_t)0);
        return 0;
    }
    return table_complete(gpu);
}

static void run_all(void)
{
    test_memory();
    test_convert();

    static const int small[][3] = {{37, 53, 29}, {1, 7, 5}};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 4; c++)
            for (int b = 0; b < 3; b++)
                test_matmul(small[s][0], small[s][1], small[s][2], c >> 1, c & 1, betas[b]);
    for (int c = 0; c < 4; c++)
        for (int b = 0; b < 2; b++)
            test_matmul(256, 384, 512, c >> 1, c & 1, betas[b]);

    test_vector_ops(100003);
    test_vector_ops(3);
    set_shape("n 0");
    check_scalar("sumsq", "sum", gpu->sumsq(NULL, 0), 0.0, 0.0);
    test_sumsq_nonfinite((1u << 20) + 5, NAN);
    test_sumsq_nonfinite((1u << 20) + 5, INFINITY);
    test_sumsq_nonfinite(1000, -INFINITY);

    test_embedding(50, 300, 200);
    test_embedding(1000, 64, 37);
    test_rmsnorm(33, 768);
    test_rmsnorm(7, 100);
    test_rmsnorm(5, 5000);
    test_rope(41, 4, 64, 10000.0f, 511);
    test_rope(41, 4, 64, 10000.0f, 30000);
    test_rope(19, 2, 128, 500000.0f, 30000);
    test_rope(23, 3, 16, 10000.0f, 2047);

    attention_suite();
    test_decode_attention(300, 299, 4, 2, 64);
    test_decode_attention(300, 296, 8, 1, 128);
    test_decode_attention(17, 16, 2, 2, 16);

    test_swiglu(100003);
    test_swiglu(5);
    test_cross_entropy(37, 50304);
    test_cross_entropy(64, 1000);

    test_router(45, 8, 2);
    test_router(45, 64, 6);
    test_moe_rows(50, 4, 2, 72, 22);
    test_moe_rows(97, 64, 6, 40, 9);
    static const int rows4[] = {37, 0, 64, 5};
    static const int rows8[] = {0, 100, 1, 257, 31, 64, 128, 0};
    test_gmm(4, rows4, 95, 77);
    test_gmm(8, rows8, 384, 256);

    test_dropout(100003, 0.1f, 1234567, (1ull << 40) + 77);
    test_dropout(77, 0.5f, 42, 0);
    test_dropout_rows(301, 333, 0.1f, 1234567);
    test_dropout_rows(3, 7, 0.5f, 42);
    test_adamw(100003, 1, 3);
    test_adamw(1001, 0, 1);

    test_unaligned();
}

int main(int argc, char **argv)
{
    /* line-buffered: a crash still leaves every finished line in the log */
    setvbuf(stdout, NULL, _IOLBF, 0);
    int generic = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--attn-generic") == 0) {
            generic = 1;
        } else {
            fprintf(stderr, "usage: %s [--attn-generic]\n", argv[0]);
            return 99;
        }
    }
    if (generic) {
        if (setenv("FABULA_ATTN_GENERIC", "1", 1) != 0) {
            perror("setenv FABULA_ATTN_GENERIC");
            return 99;
        }
        attn_tag = "[generic]";
    }
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    char err[512] = "";
    if (cuda_backend_init(0, err, sizeof err) != 0) {
        fprintf(stderr, "FAIL: cuda_backend_init(0): %s\n", err);
        return 1;
    }
    cpu = ops_cpu();
    if (!table_complete(cpu))
        return 1;

    static const fb_dtype_t dts[] = {FB_DTYPE_BF16, FB_DTYPE_F16};
    for (int d = 0; d < 2; d++) {
        if (!use_backend(dts[d]))
            return 1;
        if (generic)
            attention_suite();
        else
            run_all();
    }
    cuda_backend_shutdown();
    printf("%d checks, %d failed\n", nchecks, nfailed);
    return nfailed ? 1 : 0;
}
