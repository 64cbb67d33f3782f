/* Gradient checks of the CPU kernels in double precision.
 *
 * For every op with a backward: random inputs, a scalar loss L = sum(out * R)
 * for a random R, the analytic gradient from the backward op against central
 * finite differences of L, element by element. The forwards are also checked
 * against naive loops written independently here, so that a backward that is
 * consistent with a wrong forward cannot pass. Uses the _f64 instantiation
 * (libkernels_f64.a): in fp32 a finite difference has too few digits left.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "rng.h"
#include "testlib.h"
#include "util/error.h"

#define FD_STEP 1e-4
#define FD_TOL 1e-6     /* finite difference vs analytic, relative */
#define FWD_TOL 1e-12   /* forward vs naive loop, relative */
#define FD_MAX_CHECKED 64

/* ---------------------------------------------------------------- helpers */

static double *dvec(size_t n) { return testlib_scratch((n ? n : 1) * sizeof(double)); }

static uint64_t rng_counter;

/* Uniform in [-1, 1) with 53 random bits, from a fixed seed. */
static double urand(void)
{
    return (double)(fb_hash2(20240917, rng_counter++) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

static double *rand_vec(size_t n, double scale)
{
    double *p = dvec(n);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * urand();
    return p;
}

static double *copy_vec(const double *src, size_t n)
{
    double *p = dvec(n);
    memcpy(p, src, n * sizeof(double));
    return p;
}

/* sum(a * b) in long double, so that the loss adds no rounding of its own
 * that the finite difference would amplify. */
static long double dotl(const double *a, const double *b, size_t n)
{
    long double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (long double)a[i] * b[i];
    return s;
}

static double rel_err(double a, double b, double floor_)
{
    return fabs(a - b) / fmax(fmax(fabs(a), fabs(b)), floor_);
}

/* Max relative difference of two arrays; NaN anywhere counts as failure. */
static double max_rel_err(const double *a, const double *b, size_t n, double floor_)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = rel_err(a[i], b[i], floor_);
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static void report(const char *op, const char *what, double err, double tol)
{
    int ok = err < tol;
    printf("  %-16s %-26s max rel err %.2e  %s\n", op, what, err, ok ? "ok" : "FAIL");
    if (!ok)
        failures++;
}

static void check_true(const char *op, const char *what, int cond) { testlib_row(op, 26, what, cond); }

typedef double (*loss_fn)(void *ctx);

/* Central differences of f with respect to x[i], for every i (or, when x is
 * large, a fixed pseudo-random subset), against grad. The fourth-order
 * stencil (8 (f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))) / 12h has truncation
 * error O(h^4), so h can be 1e-4 and the rounding error of the losses, which
 * grows as 1/h, stays near 1e-9: the two-point stencil at h = 1e-6 was
 * rounding-limited at a few 1e-7, too close to the tolerance. */
static double fd_check(loss_fn f, void *ctx, double *x, const double *grad, size_t n)
{
    size_t count = n <= FD_MAX_CHECKED ? n : FD_MAX_CHECKED;
    double worst = 0;
    for (size_t c = 0; c < count; c++) {
        size_t i = n <= FD_MAX_CHECKED ? c : (size_t)(fb_hash2(777, c) % n);
        double x0 = x[i], h = FD_STEP;
        x[i] = x0 + h;
        double p1 = f(ctx);
        x[i] = x0 - h;
        double m1 = f(ctx);
        x[i] = x0 + 2 * h;
        double p2 = f(ctx);
        x[i] = x0 - 2 * h;
        double m2 = f(ctx);
        x[i] = x0;
        double e = rel_err(grad[i], (8 * (p1 - m1) - (p2 - m2)) / (12 * h), 1e-3);
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* ---------------------------------------------------------------- matmul */

static void naive_matmul(double *C, const double *A, const double *B, int M, int N, int K, int ta, int tb,
                         double beta)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long double s = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
                double b = tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j];
                s += (long double)a * b;
            }
            C[(size_t)i * N + j] = (double)(s + (beta != 0 ? (long double)beta * C[(size_t)i * N + j] : 0));
        }
}

struct linear_ctx {
    double *y, *x, *w, *r;
    int T, N, K;
};

static double linear_loss(void *p)
{
    struct linear_ctx *c = p;
    cpu_matmul_f64(c->y, c->x, c->w, c->T, c->N, c->K, 0, 1, 0.0);
    return (double)dotl(c->y, c->r, (size_t)c->T * c->N);
}

static void test_matmul(void)
{
    const int M = 5, N = 7, K = 6;
    double worst = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int b = 0; b < 2; b++) {
                double beta = b ? 1.0 : 0.0;
                double *A = rand_vec((size_t)M * K, 1), *B = rand_vec((size_t)K * N, 1);
                double *C = rand_vec((size_t)M * N, 1), *ref = copy_vec(C, (size_t)M * N);
                if (!b) /* beta = 0 must overwrite, not scale, what was there */
                    for (int i = 0; i < M * N; i++)
                        C[i] = NAN;
                cpu_matmul_f64(C, A, B, M, N, K, ta, tb, beta);
                naive_matmul(ref, A, B, M, N, K, ta, tb, beta);
                double e = max_rel_err(C, ref, (size_t)M * N, 1e-3);
                if (!(e <= worst))
                    worst = isnan(e) ? INFINITY : e;
            }
    report("matmul", "fwd 4 trans x beta 0/1", worst, FWD_TOL);

    /* K = 0: C = beta C; beta = 0 clears it. M = 0: nothing written. */
    double *C = rand_vec(12, 1), *C0 = copy_vec(C, 12), *A = rand_vec(4, 1);
    cpu_matmul_f64(C, A, A, 3, 4, 0, 0, 0, 1.0);
    int ok = !memcmp(C, C0, 12 * sizeof(double));
    for (int i = 0; i < 12; i++)
        C[i] = NAN;
    cpu_matmul_f64(C, A, A, 3, 4, 0, 1, 1, 0.0);
    for (int i = 0; i < 12; i++)
        ok &= C[i] == 0.0;
    memcpy(C, C0, 12 * sizeof(double));
    cpu_matmul_f64(C, A, A, 0, 4, 2, 0, 0, 0.0);
    ok &= !memcmp(C, C0, 12 * sizeof(double));
    check_true("matmul", "K=0 and M=0 edge cases", ok);

    /* A linear layer y = x W^T and its two backward matmuls. */
    struct linear_ctx c = {.T = 4, .N = 3, .K = 5};
    c.x = rand_vec((size_t)c.T * c.K, 1);
    c.w = rand_vec((size_t)c.N * c.K, 1);
    c.r = rand_vec((size_t)c.T * c.N, 1);
    c.y = dvec((size_t)c.T * c.N);
    double *dx = dvec((size_t)c.T * c.K), *dw = dvec((size_t)c.N * c.K);
    cpu_matmul_f64(dx, c.r, c.w, c.T, c.K, c.N, 0, 0, 0.0);
    cpu_matmul_f64(dw, c.r, c.x, c.N, c.K, c.T, 1, 0, 0.0);
    report("matmul", "linear d/dx", fd_check(linear_loss, &c, c.x, dx, (size_t)c.T * c.K), FD_TOL);
    report("matmul", "linear d/dW", fd_check(linear_loss, &c, c.w, dw, (size_t)c.N * c.K), FD_TOL);
}

/* ---------------------------------------------------------------- embedding */

struct emb_ctx {
    double *out, *table, *r;
    const int32_t *tokens;
    int T, D;
};

static double emb_loss(void *p)
{
    struct emb_ctx *c = p;
    cpu_embedding_fwd_f64(c->out, c->tokens, c->table, c->T, c->D);
    return (double)dotl(c->out, c->r, (size_t)c->T * c->D);
}

static void test_embedding(void)
{
    static const int32_t tokens[] = {3, 1, 3, 0, 6, 3, 1, 2, 3};
    const int V = 7, D = 5, T = 9;
    struct emb_ctx c = {.tokens = tokens, .T = T, .D = D};
    c.table = rand_vec((size_t)V * D, 1);
    c.r = rand_vec((size_t)T * D, 1);
    c.out = dvec((size_t)T * D);
    emb_loss(&c);
    int ok = 1;
    for (int t = 0; t < T; t++)
        ok &= !memcmp(c.out + (size_t)t * D, c.table + (size_t)tokens[t] * D, D * sizeof(double));
    check_true("embedding", "fwd gathers rows", ok);

    double *prefill = rand_vec((size_t)V * D, 1), *dtable = copy_vec(prefill, (size_t)V * D);
    cpu_embedding_bwd_f64(dtable, c.r, tokens, T, D);
    for (int i = 0; i < V * D; i++)
        dtable[i] -= prefill[i];
    report("embedding", "d/dtable (accumulated)", fd_check(emb_loss, &c, c.table, dtable, (size_t)V * D), FD_TOL);
}

/* ---------------------------------------------------------------- rmsnorm */

struct rms_ctx {
    double *out, *rstd, *x, *w, *r;
    int T, D;
    double eps;
};

static double rms_loss(void *p)
{
    struct rms_ctx *c = p;
    cpu_rmsnorm_fwd_f64(c->out, c->rstd, c->x, c->w, c->T, c->D, c->eps);
    return (double)dotl(c->out, c->r, (size_t)c->T * c->D);
}

static void test_rmsnorm(void)
{
    struct rms_ctx c = {.T = 4, .D = 12, .eps = 1e-5};
    size_t n = (size_t)c.T * c.D;
    c.x = rand_vec(n, 1);
    c.w = rand_vec((size_t)c.D, 1);
    c.r = rand_vec(n, 1);
    c.out = dvec(n);
    c.rstd = dvec((size_t)c.T);
    rms_loss(&c);

    double *ref = dvec(n), *ref_rstd = dvec((size_t)c.T);
    for (int t = 0; t < c.T; t++) {
        double ms = 0;
        for (int j = 0; j < c.D; j++)
            ms += c.x[t * c.D + j] * c.x[t * c.D + j] / c.D;
        ref_rstd[t] = 1 / sqrt(ms + c.eps);
        for (int j = 0; j < c.D; j++)
            ref[t * c.D + j] = c.x[t * c.D + j] / sqrt(ms + c.eps) * c.w[j];
    }
    report("rmsnorm", "fwd out vs naive", max_rel_err(c.out, ref, n, 1e-3), FWD_TOL);
    report("rmsnorm", "fwd rstd vs naive", max_rel_err(c.rstd, ref_rstd, (size_t)c.T, 1e-3), FWD_TOL);

    double *px = rand_vec(n, 1), *pw = rand_vec((size_t)c.D, 1);
    double *dx = copy_vec(px, n), *dw = copy_vec(pw, (size_t)c.D);
    cpu_rmsnorm_bwd_f64(dx, dw, c.r, c.x, c.w, c.rstd, c.T, c.D);
    for (size_t i = 0; i < n; i++)
        dx[i] -= px[i];
    for (int j = 0; j < c.D; j++)
        dw[j] -= pw[j];
    report("rmsnorm", "d/dx (accumulated)", fd_check(rms_loss, &c, c.x, dx, n), FD_TOL);
    report("rmsnorm", "d/dw (accumulated)", fd_check(rms_loss, &c, c.w, dw, (size_t)c.D), FD_TOL);
}

/* ---------------------------------------------------------------- rope */

struct rope_ctx {
    double *x, *y, *r;
    const int32_t *pos;
    int T, nh, hd;
    double theta;
};

static double rope_loss(void *p)
{
    struct rope_ctx *c = p;
    size_t n = (size_t)c->T * c->nh * c->hd;
    memcpy(c->y, c->x, n * sizeof(double));
    cpu_rope_fwd_f64(c->y, c->pos, c->T, c->nh, c->hd, c->theta);
    return (double)dotl(c->y, c->r, n);
}

static void test_rope(void)
{
    static const int32_t pos[] = {0, 1, 2, 0, 1, 2, 3, 0, 57};
    struct rope_ctx c = {.pos = pos, .T = 9, .nh = 3, .hd = 8, .theta = 10000.0};
    size_t n = (size_t)c.T * c.nh * c.hd;
    c.x = rand_vec(n, 1);
    c.r = rand_vec(n, 1);
    c.y = dvec(n);
    rope_loss(&c);

    /* Independent form: rotate_half(x) = (-x2, x1), y = x cos + rotate_half(x) sin. */
    double *ref = dvec(n);
    int half = c.hd / 2;
    for (int t = 0; t < c.T; t++)
        for (int h = 0; h < c.nh; h++)
            for (int d = 0; d < c.hd; d++) {
                int i = d % half;
                double a = pos[t] * pow(c.theta, -2.0 * i / c.hd);
                const double *xh = c.x + ((size_t)t * c.nh + h) * c.hd;
                double rot = d < half ? -xh[d + half] : xh[d - half];
                ref[((size_t)t * c.nh + h) * c.hd + d] = xh[d] * cos(a) + rot * sin(a);
            }
    report("rope", "fwd vs rotate_half", max_rel_err(c.y, ref, n, 1e-3), FWD_TOL);

    double *dx = copy_vec(c.r, n);
    cpu_rope_bwd_f64(dx, pos, c.T, c.nh, c.hd, c.theta);
    report("rope", "d/dx", fd_check(rope_loss, &c, c.x, dx, n), FD_TOL);
}

/* ---------------------------------------------------------------- attention */

struct attn_ctx {
    double *q, *k, *v, *out, *lse, *r;
    const int32_t *cu;
    int nseq, T, H, KV, hd;
};

static double attn_loss(void *p)
{
    struct attn_ctx *c = p;
    cpu_attention_fwd_f64(c->out, c->lse, c->q, c->k, c->v, c->cu, c->nseq, c->T, c->H, c->KV, c->hd);
    return (double)dotl(c->out, c->r, (size_t)c->T * c->H * c->hd);
}

static int sample_of(const int32_t *cu, int nseq, int t)
{
    for (int i = 0; i < nseq; i++)
        if (t < cu[i + 1])
            return i;
    return -1;
}

/* Full T x T scores with a mask, no max subtraction (inputs are small). */
static void naive_attention(double *out, double *lse, const struct attn_ctx *c)
{
    int T = c->T, H = c->H, KV = c->KV, hd = c->hd;
    double *w = dvec((size_t)T);
    for (int h = 0; h < H; h++) {
        int g = h * KV / H;
        for (int t = 0; t < T; t++) {
            double sum = 0;
            for (int s = 0; s < T; s++) {
                int visible = s <= t && sample_of(c->cu, c->nseq, s) == sample_of(c->cu, c->nseq, t);
                double sc = 0;
                for (int d = 0; d < hd; d++)
                    sc += c->q[((size_t)t * H + h) * hd + d] * c->k[((size_t)s * KV + g) * hd + d];
                w[s] = visible ? exp(sc / sqrt(hd)) : 0;
                sum += w[s];
            }
            lse[t * H + h] = log(sum);
            for (int d = 0; d < hd; d++) {
                double o = 0;
                for (int s = 0; s < T; s++)
                    o += w[s] / sum * c->v[((size_t)s * KV + g) * hd + d];
                out[((size_t)t * H + h) * hd + d] = o;
            }
        }
    }
}

/* cu: nseq+1 boundaries. Samples longer than the kernel's block of query
 * rows (128) exercise the blocked path. */
static void test_attention_case(int H, int KV, const int32_t *cu, int nseq, int hd)
{
    struct attn_ctx c = {.cu = cu, .nseq = nseq, .T = cu[nseq], .H = H, .KV = KV, .hd = hd};
    size_t nq = (size_t)c.T * H * c.hd, nk = (size_t)c.T * KV * c.hd;
    c.q = rand_vec(nq, 1);
    c.k = rand_vec(nk, 1);
    c.v = rand_vec(nk, 1);
    c.r = rand_vec(nq, 1);
    c.out = dvec(nq);
    c.lse = dvec((size_t)c.T * H);
    attn_loss(&c);

    char name[32];
    snprintf(name, sizeof name, "attention H%d/KV%d T%d", H, KV, c.T);
    double *ref = dvec(nq), *ref_lse = dvec((size_t)c.T * H);
    naive_attention(ref, ref_lse, &c);
    report(name, "fwd out vs masked naive", max_rel_err(c.out, ref, nq, 1e-3), FWD_TOL);
    report(name, "fwd lse vs masked naive", max_rel_err(c.lse, ref_lse, (size_t)c.T * H, 1e-3), FWD_TOL);

    double *dq = rand_vec(nq, 1), *dk = rand_vec(nk, 1), *dv = rand_vec(nk, 1); /* must be overwritten */
    cpu_attention_bwd_f64(dq, dk, dv, c.r, c.q, c.k, c.v, c.out, c.lse, cu, c.nseq, c.T, H, KV, c.hd);
    report(name, "d/dq", fd_check(attn_loss, &c, c.q, dq, nq), FD_TOL);
    report(name, "d/dk", fd_check(attn_loss, &c, c.k, dk, nk), FD_TOL);
    report(name, "d/dv", fd_check(attn_loss, &c, c.v, dv, nk), FD_TOL);
}

/* ---------------------------------------------------------------- swiglu */

struct swiglu_ctx {
    double *h, *g, *u, *r;
    size_t n;
};

static double swiglu_loss(void *p)
{
    struct swiglu_ctx *c = p;
    cpu_swiglu_fwd_f64(c->h, c->g, c->u, c->n);
    return (double)dotl(c->h, c->r, c->n);
}

static void test_swiglu(void)
{
    struct swiglu_ctx c = {.n = 50};
    c.g = rand_vec(c.n, 4);
    c.u = rand_vec(c.n, 1);
    c.r = rand_vec(c.n, 1);
    c.h = dvec(c.n);
    swiglu_loss(&c);
    double *ref = dvec(c.n);
    for (size_t i = 0; i < c.n; i++)
        ref[i] = c.g[i] / (1 + exp(-c.g[i])) * c.u[i];
    report("swiglu", "fwd vs naive", max_rel_err(c.h, ref, c.n, 1e-3), FWD_TOL);

    double *dg = dvec(c.n), *du = dvec(c.n);
    cpu_swiglu_bwd_f64(dg, du, c.r, c.g, c.u, c.n);
    report("swiglu", "d/dg", fd_check(swiglu_loss, &c, c.g, dg, c.n), FD_TOL);
    report("swiglu", "d/du", fd_check(swiglu_loss, &c, c.u, du, c.n), FD_TOL);
}

/* ---------------------------------------------------------------- cross-entropy */

struct ce_ctx {
    double *loss, *dl, *logits;
    const int32_t *targets;
    int T, V;
    double gs;
};

/* dlogits is the gradient of grad_scale * sum_t loss_t. */
static double ce_loss(void *p)
{
    struct ce_ctx *c = p;
    cpu_cross_entropy_f64(c->loss, c->dl, c->logits, c->targets, c->T, c->V, c->gs);
    long double s = 0;
    for (int t = 0; t < c->T; t++)
        s += c->loss[t];
    return (double)(c->gs * s);
}

static void test_cross_entropy(void)
{
    static const int32_t targets[] = {3, -1, 0, 8, -1, 5};
    struct ce_ctx c = {.targets = targets, .T = 6, .V = 9, .gs = 0.37};
    size_t n = (size_t)c.T * c.V;
    c.logits = rand_vec(n, 3);
    c.loss = dvec((size_t)c.T);
    c.dl = dvec(n);
    ce_loss(&c);
    double *ref = dvec((size_t)c.T);
    for (int t = 0; t < c.T; t++) {
        if (targets[t] < 0)
            continue;
        double s = 0;
        for (int j = 0; j < c.V; j++)
            s += exp(c.logits[t * c.V + j]);
        ref[t] = log(s) - c.logits[t * c.V + targets[t]];
    }
    report("cross_entropy", "fwd loss vs naive", max_rel_err(c.loss, ref, (size_t)c.T, 1e-3), FWD_TOL);

    double *dl = copy_vec(c.dl, n), *loss = copy_vec(c.loss, (size_t)c.T);
    report("cross_entropy", "d/dlogits", fd_check(ce_loss, &c, c.logits, dl, n), FD_TOL);

    double *inplace = copy_vec(c.logits, n), *loss2 = dvec((size_t)c.T);
    cpu_cross_entropy_f64(loss2, inplace, inplace, targets, c.T, c.V, c.gs);
    check_true("cross_entropy", "in place == out of place",
               !memcmp(inplace, dl, n * sizeof(double)) && !memcmp(loss2, loss, (size_t)c.T * sizeof(double)));
}

/* ---------------------------------------------------------------- router */

struct router_ctx {
    double *logits, *probs, *lse, *w, *r, *aux;
    int32_t *idx, *idx0;
    int T, E, K, unstable;
    double z;
};

/* L = sum(R * topk_w) + sum_t aux . probs_t + z/2 sum_t lse_t^2: each term
 * exercises one of router_bwd's three inputs. */
static double router_loss(void *p)
{
    struct router_ctx *c = p;
    cpu_router_fwd_f64(c->probs, c->lse, c->idx, c->w, c->logits, c->T, c->E, c->K);
    if (c->idx0 && memcmp(c->idx, c->idx0, (size_t)c->T * c->K * sizeof(int32_t)))
        c->unstable = 1;
    long double s = dotl(c->w, c->r, (size_t)c->T * c->K);
    for (int t = 0; t < c->T; t++) {
        s += dotl(c->probs + (size_t)t * c->E, c->aux, (size_t)c->E);
        s += 0.5L * c->z * c->lse[t] * c->lse[t];
    }
    return (double)s;
}

static void test_router(void)
{
    struct router_ctx c = {.T = 6, .E = 4, .K = 2, .z = 0.3};
    size_t n = (size_t)c.T * c.E, nk = (size_t)c.T * c.K;
    /* Logits 0.6 apart in a per-row order, plus noise below 0.2: the top-k
     * choice cannot flip under a finite-difference step. */
    c.logits = dvec(n);
    for (int t = 0; t < c.T; t++)
        for (int e = 0; e < c.E; e++)
            c.logits[t * c.E + e] = 0.6 * ((e * 3 + t) % c.E) + 0.2 * urand();
    c.probs = dvec(n);
    c.lse = dvec((size_t)c.T);
    c.w = dvec(nk);
    c.r = rand_vec(nk, 1);
    c.aux = rand_vec((size_t)c.E, 1);
    c.idx = fb_calloc(nk, sizeof(int32_t));
    c.idx0 = NULL;
    router_loss(&c);

    /* Independent forward: softmax, then a stable sort by prob descending. */
    double worst = 0;
    int order_ok = 1;
    for (int t = 0; t < c.T; t++) {
        double s = 0, p[16];
        int ord[16];
        for (int e = 0; e < c.E; e++)
            s += exp(c.logits[t * c.E + e]);
        for (int e = 0; e < c.E; e++) {
            p[e] = exp(c.logits[t * c.E + e]) / s;
            worst = fmax(worst, rel_err(c.probs[t * c.E + e], p[e], 1e-3));
            ord[e] = e;
        }
        worst = fmax(worst, rel_err(c.lse[t], log(s), 1e-3));
        for (int i = 1; i < c.E; i++)
            for (int j = i; j > 0 && p[ord[j]] > p[ord[j - 1]]; j--) {
                int tmp = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = tmp;
            }
        double ws = 0;
        for (int k = 0; k < c.K; k++)
            ws += p[ord[k]];
        for (int k = 0; k < c.K; k++) {
            order_ok &= c.idx[t * c.K + k] == ord[k];
            worst = fmax(worst, rel_err(c.w[t * c.K + k], p[ord[k]] / ws, 1e-3));
        }
    }
    report("router", "fwd probs/lse/w vs naive", worst, FWD_TOL);
    check_true("router", "fwd top-k order", order_ok);

    /* Ties go to the lower expert index. */
    double tie_logits[8] = {0.5, 0.5, 0.5, 0.5, 0.1, 0.9, 0.2, 0.9};
    double tp[8], tl[2], tw[4];
    int32_t ti[4];
    cpu_router_fwd_f64(tp, tl, ti, tw, tie_logits, 2, 4, 2);
    check_true("router", "ties: lower index first", ti[0] == 0 && ti[1] == 1 && ti[2] == 1 && ti[3] == 3);

    double *dl = rand_vec(n, 1); /* overwritten */
    cpu_router_bwd_f64(dl, c.probs, c.lse, c.idx, c.w, c.r, c.aux, c.z, c.T, c.E, c.K);
    c.idx0 = fb_calloc(nk, sizeof(int32_t));
    memcpy(c.idx0, c.idx, nk * sizeof(int32_t));
    report("router", "d/dlogits (w, aux, z)", fd_check(router_loss, &c, c.logits, dl, n), FD_TOL);
    check_true("router", "top-k stable under the step", !c.unstable);
    free(c.idx);
    free(c.idx0);
}

/* ---------------------------------------------------------------- permute / combine */

struct perm_ctx {
    double *x, *xp, *eo, *w, *y, *r1, *r2;
    int32_t *row_token, *token_rows;
    int T, K, D, R;
};

static double permute_loss(void *p)
{
    struct perm_ctx *c = p;
    cpu_permute_fwd_f64(c->xp, c->x, c->row_token, c->R, c->D);
    return (double)dotl(c->xp, c->r1, (size_t)c->R * c->D);
}

static double combine_loss(void *p)
{
    struct perm_ctx *c = p;
    cpu_combine_fwd_f64(c->y, c->eo, c->token_rows, c->w, c->T, c->K, c->D);
    return (double)dotl(c->y, c->r2, (size_t)c->T * c->D);
}

static void test_permute(void)
{
    enum { T = 5, K = 2, E = 3, D = 4 };
    int32_t row_token[T * K], token_rows[T * K];
    int expert[T * K], kept[T * K];
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            expert[t * K + k] = (t + 2 * k) % E;
            /* (1,1) and (3,0) over capacity; token 4 loses both. */
            kept[t * K + k] = !((t == 1 && k == 1) || (t == 3 && k == 0) || t == 4);
            token_rows[t * K + k] = -1;
        }
    int R = 0;
    for (int e = 0; e < E; e++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                if (kept[t * K + k] && expert[t * K + k] == e) {
                    row_token[R] = t;
                    token_rows[t * K + k] = R++;
                }
    struct perm_ctx c = {.row_token = row_token, .token_rows = token_rows, .T = T, .K = K, .D = D, .R = R};
    c.x = rand_vec((size_t)T * D, 1);
    c.xp = dvec((size_t)R * D);
    c.eo = rand_vec((size_t)R * D, 1);
    c.w = rand_vec((size_t)T * K, 1);
    c.y = dvec((size_t)T * D);
    c.r1 = rand_vec((size_t)R * D, 1);
    c.r2 = rand_vec((size_t)T * D, 1);
    permute_loss(&c);
    combine_loss(&c);

    int ok = 1;
    for (int r = 0; r < R; r++)
        ok &= !memcmp(c.xp + (size_t)r * D, c.x + (size_t)row_token[r] * D, D * sizeof(double));
    check_true("permute", "fwd gathers rows", ok);
    double *ref = dvec((size_t)T * D);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++)
            if (kept[t * K + k])
                for (int j = 0; j < D; j++)
                    ref[t * D + j] += c.w[t * K + k] * c.eo[(size_t)token_rows[t * K + k] * D + j];
    report("combine", "fwd vs naive", max_rel_err(c.y, ref, (size_t)T * D, 1e-3), FWD_TOL);

    double *px = rand_vec((size_t)T * D, 1), *dx = copy_vec(px, (size_t)T * D);
    cpu_permute_bwd_f64(dx, c.r1, token_rows, T, K, D);
    for (int i = 0; i < T * D; i++)
        dx[i] -= px[i];
    report("permute", "d/dx (accumulated)", fd_check(permute_loss, &c, c.x, dx, (size_t)T * D), FD_TOL);

    double *deo = rand_vec((size_t)R * D, 1), *dw = rand_vec((size_t)T * K, 1); /* overwritten */
    cpu_combine_bwd_f64(deo, dw, c.r2, c.eo, token_rows, c.w, T, K, D);
    report("combine", "d/d expert out", fd_check(combine_loss, &c, c.eo, deo, (size_t)R * D), FD_TOL);
    report("combine", "d/dw (dropped: 0)", fd_check(combine_loss, &c, c.w, dw, (size_t)T * K), FD_TOL);
}

/* ---------------------------------------------------------------- gmm */

struct gmm_ctx {
    double *X, *W, *Y, *r;
    const int32_t *off;
    int E, N, K;
};

static double gmm_loss(void *p)
{
    struct gmm_ctx *c = p;
    cpu_gmm_fwd_f64(c->Y, c->X, c->W, c->off, c->E, c->N, c->K);
    return (double)dotl(c->Y, c->r, (size_t)c->off[c->E] * c->N);
}

static void test_gmm(void)
{
    static const int32_t off[] = {0, 3, 3, 7}; /* expert 1 has no rows */
    struct gmm_ctx c = {.off = off, .E = 3, .N = 5, .K = 4};
    int rows = off[c.E];
    size_t nx = (size_t)rows * c.K, nw = (size_t)c.E * c.N * c.K, ny = (size_t)rows * c.N;
    c.X = rand_vec(nx, 1);
    c.W = rand_vec(nw, 1);
    c.r = rand_vec(ny, 1);
    c.Y = dvec(ny);
    gmm_loss(&c);
    double *ref = dvec(ny);
    for (int e = 0; e < c.E; e++)
        for (int i = off[e]; i < off[e + 1]; i++)
            for (int n = 0; n < c.N; n++)
                for (int k = 0; k < c.K; k++)
                    ref[i * c.N + n] += c.X[i * c.K + k] * c.W[((size_t)e * c.N + n) * c.K + k];
    report("gmm", "fwd vs naive", max_rel_err(c.Y, ref, ny, 1e-3), FWD_TOL);

    double *dX = rand_vec(nx, 1); /* overwritten */
    double *pw = rand_vec(nw, 1), *dW = copy_vec(pw, nw);
    cpu_gmm_bwd_data_f64(dX, c.r, c.W, off, c.E, c.N, c.K);
    cpu_gmm_bwd_weight_f64(dW, c.r, c.X, off, c.E, c.N, c.K);
    for (size_t i = 0; i < nw; i++)
        dW[i] -= pw[i];
    report("gmm", "d/dX", fd_check(gmm_loss, &c, c.X, dX, nx), FD_TOL);
    report("gmm", "d/dW (accumulated)", fd_check(gmm_loss, &c, c.W, dW, nw), FD_TOL);
}

/* ---------------------------------------------------------------- dropout */

struct drop_ctx {
    double *x, *y, *r;
    uint8_t *mask;
    size_t n;
    double p;
    uint64_t seed, offset;
};

static double drop_loss(void *p)
{
    struct drop_ctx *c = p;
    memcpy(c->y, c->x, c->n * sizeof(double));
    cpu_dropout_fwd_f64(c->y, c->mask, c->n, c->p, c->seed, c->offset);
    return (double)dotl(c->y, c->r, c->n);
}

static void test_dropout(void)
{
    struct drop_ctx c = {.n = 200, .p = 0.3, .seed = 99, .offset = 1000};
    c.x = rand_vec(c.n, 1);
    c.y = dvec(c.n);
    c.r = rand_vec(c.n, 1);
    c.mask = fb_calloc(c.n, 1);
    drop_loss(&c);
    int mask_ok = 1;
    size_t kept = 0;
    double *ref = dvec(c.n);
    for (size_t i = 0; i < c.n; i++) {
        int keep = (double)fb_uniform_hash(c.seed, c.offset + i) >= c.p;
        mask_ok &= c.mask[i] == keep;
        kept += (size_t)keep;
        ref[i] = keep ? c.x[i] / (1 - c.p) : 0;
    }
    check_true("dropout", "mask = hash(seed, off+i) >= p", mask_ok && kept > c.n / 2 && kept < c.n);
    report("dropout", "fwd kept x / (1-p)", max_rel_err(c.y, ref, c.n, 1e-3), FWD_TOL);

    double *dx = copy_vec(c.r, c.n);
    cpu_dropout_bwd_f64(dx, c.mask, c.n, c.p);
    report("dropout", "d/dx (through mask)", fd_check(drop_loss, &c, c.x, dx, c.n), FD_TOL);
    free(c.mask);
}

int main(void)
{
    printf("test_ops_fd: fp64 kernels, 4th-order central differences h=%g, tolerance %g\n", FD_STEP, FD_TOL);
    test_matmul();
    test_embedding();
    test_rmsnorm();
    test_rope();
    static const int32_t short_samples[] = {0, 1, 6, 13};
    static const int32_t long_samples[] = {0, 3, 300};
    test_attention_case(4, 2, short_samples, 3, 8);
    test_attention_case(4, 4, short_samples, 3, 8);
    test_attention_case(2, 1, long_samples, 2, 4);
    /* a sample past the kernel's first block of query rows with 4 query
     * heads on one kv head, and with one query head a kv head */
    static const int32_t mid_samples[] = {0, 5, 150};
    test_attention_case(4, 1, mid_samples, 2, 4);
    test_attention_case(2, 2, mid_samples, 2, 4);
    test_swiglu();
    test_cross_entropy();
    test_router();
    test_permute();
    test_gmm();
    test_dropout();
    testlib_scratch_free_all();
    printf("test_ops_fd: %s (%d failure%s)\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
