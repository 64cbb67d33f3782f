/* The fp32 CPU backend, through its op table, against the fp64 twin.
 *
 * Every op of ops_cpu() runs on random inputs under 1, 2 and 3 OpenMP
 * threads. Checked for each output:
 *  - the three runs are bit-identical (no reduction depends on threads);
 *  - outputs the op must overwrite were poisoned (NaN) and none survive;
 *  - the values match the cpu_*_f64 instantiation run on the same inputs
 *    (normwise relative error max|a-b| / max|b|), integers exactly.
 * AdamW is checked against a naive double implementation of PyTorch's
 * formula, the memory entries and kernels_print_backends() directly.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"

#include <cblas.h>

#include "cpu/cpu_kernels.h"
#include "kernels_info.h"
#include "ops.h"
#include "rng.h"
#include "testlib.h"
#include "util/error.h"

#define NCFG 3
static const int thread_counts[NCFG] = {1, 2, 3};

#define TOL_MM 1e-4  /* long dot products: matmul, gmm, attention */
#define TOL_EW 1e-5  /* elementwise and row-local ops */

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_counter;

static float frand1(void) { return fb_uniform_hash(4242, rng_counter++) * 2.0f - 1.0f; }

static float *frand(size_t n, float scale)
{
    float *p = testlib_scratch(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale * frand1();
    return p;
}

static double *to_d(const float *x, size_t n)
{
    double *p = testlib_scratch(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        p[i] = x[i];
    return p;
}

/* OpenMP's and, for a pthreads OpenBLAS, BLAS's thread count. */
static void set_threads(int cfg)
{
    omp_set_num_threads(thread_counts[cfg]);
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(thread_counts[cfg]);
#endif
}

typedef enum { K_F32, K_I32, K_U8 } kind_t;

/* One output of an op under test. */
typedef struct {
    const char *name;
    kind_t kind;
    size_t n;
    const void *init; /* contents before the call (accumulating or in-place), or NULL: poisoned */
    void *f[NCFG];    /* f32-table results, one per thread count */
    void *ref;        /* f64 twin: double for K_F32, the same type otherwise */
} obuf_t;

static size_t elem_size(kind_t k) { return k == K_U8 ? 1 : 4; }

static obuf_t obuf(const char *name, kind_t kind, size_t n, const void *init)
{
    obuf_t o = {.name = name, .kind = kind, .n = n, .init = init};
    for (int c = 0; c < NCFG; c++)
        o.f[c] = testlib_scratch(n * elem_size(kind));
    o.ref = testlib_scratch(n * (kind == K_F32 ? sizeof(double) : elem_size(kind)));
    return o;
}

#define POISON_I32 INT32_MIN
#define POISON_U8 0xAB

static void poison(void *p, kind_t kind, int dbl, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (kind == K_F32 && dbl)
            ((double *)p)[i] = NAN;
        else if (kind == K_F32)
            ((float *)p)[i] = NAN;
        else if (kind == K_I32)
            ((int32_t *)p)[i] = POISON_I32;
        else
            ((uint8_t *)p)[i] = POISON_U8;
    }
}

static int is_poison(const void *p, kind_t kind, int dbl, size_t i)
{
    if (kind == K_F32)
        return dbl ? isnan(((const double *)p)[i]) : isnan(((const float *)p)[i]);
    if (kind == K_I32)
        return ((const int32_t *)p)[i] == POISON_I32;
    return ((const uint8_t *)p)[i] == POISON_U8;
}

/* Sets the thread count of configuration cfg and readies its buffer. */
static void prep(obuf_t *o, int cfg)
{
    set_threads(cfg);
    if (o->init)
        memcpy(o->f[cfg], o->init, o->n * elem_size(o->kind));
    else
        poison(o->f[cfg], o->kind, 0, o->n);
}

static void prep_ref(obuf_t *o)
{
    if (!o->init)
        poison(o->ref, o->kind, 1, o->n);
    else if (o->kind == K_F32)
        for (size_t i = 0; i < o->n; i++)
            ((double *)o->ref)[i] = ((const float *)o->init)[i];
    else
        memcpy(o->ref, o->init, o->n * elem_size(o->kind));
}

static void check(const char *op, const obuf_t *o, double tol)
{
    int det = 1;
    for (int c = 1; c < NCFG; c++)
        det &= !memcmp(o->f[0], o->f[c], o->n * elem_size(o->kind));
    size_t left = 0;
    if (!o->init)
        for (size_t i = 0; i < o->n; i++)
            left += (size_t)(is_poison(o->f[0], o->kind, 0, i) || is_poison(o->ref, o->kind, 1, i));
    double err = 0;
    if (o->kind == K_F32) {
        const float *a = o->f[0];
        const double *b = o->ref;
        double diff = 0, mag = 0;
        for (size_t i = 0; i < o->n; i++) {
            double d = fabs(a[i] - b[i]);
            if (!(d <= diff))
                diff = isnan(d) ? INFINITY : d;
            mag = fmax(mag, fabs(b[i]));
        }
        err = diff / fmax(mag, 1e-30);
    } else {
        err = memcmp(o->f[0], o->ref, o->n * elem_size(o->kind)) ? INFINITY : 0;
    }
    int ok = det && !left && err < tol;
    printf("  %-16s %-9s err %.2e (tol %.0e)  threads 1/2/3 %s  unwritten %zu  %s\n", op, o->name, err, tol,
           det ? "identical" : "DIFFER", left, ok ? "ok" : "FAIL");
    if (!ok)
        failures++;
}

static void check_true(const char *op, const char *what, int cond) { testlib_row(op, 45, what, cond); }

/* ---------------------------------------------------------------- memory */

static void test_memory(const ops_t *ops)
{
    const size_t n = 1000;
    unsigned char *a = ops->alloc(n);
    int ok = ((uintptr_t)a % 64) == 0;
    for (size_t i = 0; i < n; i++)
        ok &= a[i] == 0;
    check_true("alloc", "64-byte aligned, zero-filled", ok);

    unsigned char *host = testlib_scratch(n), *back = testlib_scratch(n);
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    unsigned char *b = ops->alloc(n);
    ops->to_backend(a, host, n);
    ops->copy(b, a, n);
    ops->synchronize();
    ops->to_host(back, b, n);
    check_true("copy", "to_backend -> copy -> to_host round trip", !memcmp(host, back, n));
    ops->zero(b, n);
    ops->to_host(back, b, n);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= back[i] == 0;
    check_true("zero", "clears every byte", ok);
    ops->release(a);
    ops->release(b);
    void *z = ops->alloc(0);
    check_true("alloc", "alloc(0) is a valid pointer", z != NULL);
    ops->release(z);
}

/* ---------------------------------------------------------------- dense */

static void test_matmul_shape(const ops_t *ops, int M, int N, int K)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int b = 0; b < 2; b++) {
                float beta = (float)b;
                float *A = frand((size_t)M * K, 1), *B = frand((size_t)K * N, 1);
                obuf_t C = obuf("C", K_F32, (size_t)M * N, b ? frand((size_t)M * N, 1) : NULL);
                for (int c = 0; c < NCFG; c++) {
                    prep(&C, c);
                    ops->matmul(C.f[c], (fb_act *)A, (fb_act *)B, M, N, K, ta, tb, beta);
                }
                prep_ref(&C);
                cpu_matmul_f64(C.ref, to_d(A, (size_t)M * K), to_d(B, (size_t)K * N), M, N, K, ta, tb, beta);
                char name[40];
                snprintf(name, sizeof name, "matmul %c%c b=%d %d", ta ? 'T' : 'N', tb ? 'T' : 'N', b, M);
                check(name, &C, TOL_MM);
            }
}

/* 70x50x60 runs whole; 520x96x130 is cut into blocks of rows and
 * 40x600x300 into blocks of columns, run in parallel at 2 and 3 threads and
 * one after another at 1, which must give the same bits (and BLAS, told
 * 1/2/3 threads by set_threads, must not thread). One row (a decode step) against a transposed B is a GEMV:
 * 1x50x60 whole, 1x1200x300 cut into blocks of columns. */
static void test_matmul(const ops_t *ops)
{
    static const int shapes[][3] = {{70, 50, 60}, {520, 96, 130}, {40, 600, 300}, {1, 50, 60}, {1, 1200, 300}};
    for (int sh = 0; sh < 5; sh++)
        test_matmul_shape(ops, shapes[sh][0], shapes[sh][1], shapes[sh][2]);
    /* K = 0 with beta = 0 must still write zeros over whatever was there. */
    obuf_t C = obuf("C", K_F32, 12, NULL);
    float *A = frand(4, 1);
    for (int c = 0; c < NCFG; c++) {
        prep(&C, c);
        ops->matmul(C.f[c], (fb_act *)A, (fb_act *)A, 3, 4, 0, 0, 0, 0.0f);
    }
    prep_ref(&C);
    cpu_matmul_f64(C.ref, to_d(A, 4), to_d(A, 4), 3, 4, 0, 0, 0, 0.0);
    check("matmul K=0", &C, TOL_MM);
}

static void test_blas1(const ops_t *ops)
{
    const size_t n = 100000; /* above CPU_PAR_MIN_ELEMS: the threaded path */
    float *x = frand(n, 1);
    obuf_t y = obuf("y", K_F32, n, frand(n, 1));
    for (int c = 0; c < NCFG; c++) {
        prep(&y, c);
        ops->axpy(y.f[c], x, n, 0.7f);
    }
    prep_ref(&y);
    cpu_axpy_f64(y.ref, to_d(x, n), n, (double)0.7f);
    check("axpy", &y, TOL_EW);

    obuf_t s = obuf("x", K_F32, n, x);
    for (int c = 0; c < NCFG; c++) {
        prep(&s, c);
        ops->scale(s.f[c], n, -1.3f);
    }
    prep_ref(&s);
    cpu_scale_f64(s.ref, n, (double)-1.3f);
    check("scale", &s, TOL_EW);

    double ss[NCFG], naive = 0;
    for (int c = 0; c < NCFG; c++) {
        set_threads(c);
        ss[c] = ops->sumsq(x, n);
    }
    for (size_t i = 0; i < n; i++)
        naive += (double)x[i] * x[i];
    double err = fabs(ss[0] - naive) / naive;
    int ok = ss[0] == ss[1] && ss[0] == ss[2] && err < 1e-12;
    printf("  %-16s %-9s err %.2e (tol 1e-12) vs sequential double, threads 1/2/3 %s  %s\n", "sumsq", "result",
           err, ss[0] == ss[1] && ss[0] == ss[2] ? "identical" : "DIFFER", ok ? "ok" : "FAIL");
    failures += !ok;
}

/* ---------------------------------------------------------------- embedding, norms, rope */

static void test_embedding(const ops_t *ops)
{
    const int V = 50, D = 80, T = 96; /* D spans two column blocks */
    int32_t *tok = testlib_scratch(T * sizeof(int32_t));
    for (int t = 0; t < T; t++)
        tok[t] = (int32_t)(fb_hash2(5, (uint64_t)t) % 20); /* many repeats */
    float *table = frand((size_t)V * D, 1), *dout = frand((size_t)T * D, 1);
    obuf_t out = obuf("out", K_F32, (size_t)T * D, NULL);
    obuf_t dt = obuf("dtable", K_F32, (size_t)V * D, frand((size_t)V * D, 1));
    for (int c = 0; c < NCFG; c++) {
        prep(&out, c);
        ops->embedding_fwd(out.f[c], tok, (fb_act *)table, T, D);
        prep(&dt, c);
        ops->embedding_bwd(dt.f[c], (fb_act *)dout, tok, T, D);
    }
    prep_ref(&out);
    prep_ref(&dt);
    cpu_embedding_fwd_f64(out.ref, tok, to_d(table, (size_t)V * D), T, D);
    cpu_embedding_bwd_f64(dt.ref, to_d(dout, (size_t)T * D), tok, T, D);
    check("embedding_fwd", &out, TOL_EW);
    check("embedding_bwd", &dt, TOL_EW);
}

static void test_rmsnorm(const ops_t *ops)
{
    const int T = 96, D = 80;
    size_t n = (size_t)T * D;
    float *x = frand(n, 2), *w = frand((size_t)D, 1), *dout = frand(n, 1);
    obuf_t out = obuf("out", K_F32, n, NULL), rstd = obuf("rstd", K_F32, (size_t)T, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&out, c);
        prep(&rstd, c);
        ops->rmsnorm_fwd(out.f[c], rstd.f[c], (fb_act *)x, (fb_act *)w, T, D, 1e-5f);
    }
    prep_ref(&out);
    prep_ref(&rstd);
    cpu_rmsnorm_fwd_f64(out.ref, rstd.ref, to_d(x, n), to_d(w, (size_t)D), T, D, (double)1e-5f);
    check("rmsnorm_fwd", &out, TOL_EW);
    check("rmsnorm_fwd", &rstd, TOL_EW);

    const float *r32 = rstd.f[0];
    obuf_t dx = obuf("dx", K_F32, n, frand(n, 1)), dw = obuf("dw", K_F32, (size_t)D, frand((size_t)D, 1));
    for (int c = 0; c < NCFG; c++) {
        prep(&dx, c);
        prep(&dw, c);
        ops->rmsnorm_bwd(dx.f[c], dw.f[c], (fb_act *)dout, (fb_act *)x, (fb_act *)w, r32, T, D);
    }
    prep_ref(&dx);
    prep_ref(&dw);
    cpu_rmsnorm_bwd_f64(dx.ref, dw.ref, to_d(dout, n), to_d(x, n), to_d(w, (size_t)D), to_d(r32, (size_t)T), T,
                        D);
    check("rmsnorm_bwd", &dx, TOL_EW);
    check("rmsnorm_bwd", &dw, TOL_EW);
}

static void test_rope(const ops_t *ops)
{
    const int T = 96, nh = 4, hd = 16;
    size_t n = (size_t)T * nh * hd;
    int32_t *pos = testlib_scratch(T * sizeof(int32_t));
    for (int t = 0; t < T; t++)
        pos[t] = t < 40 ? t : t - 40; /* restarts with a new sample */
    obuf_t x = obuf("x", K_F32, n, frand(n, 1)), dx = obuf("dx", K_F32, n, frand(n, 1));
    for (int c = 0; c < NCFG; c++) {
        prep(&x, c);
        ops->rope_fwd(x.f[c], pos, T, nh, hd, 10000.0f);
        prep(&dx, c);
        ops->rope_bwd(dx.f[c], pos, T, nh, hd, 10000.0f);
    }
    prep_ref(&x);
    prep_ref(&dx);
    cpu_rope_fwd_f64(x.ref, pos, T, nh, hd, 10000.0);
    cpu_rope_bwd_f64(dx.ref, pos, T, nh, hd, 10000.0);
    check("rope_fwd", &x, TOL_EW);
    check("rope_bwd", &dx, TOL_EW);
}

/* ---------------------------------------------------------------- attention */

static void test_attention_case(const ops_t *ops, const int32_t *cu, int nseq, int H, int KV, int hd)
{
    const int T = cu[nseq];
    size_t nq = (size_t)T * H * hd, nk = (size_t)T * KV * hd;
    float *q = frand(nq, 1), *k = frand(nk, 1), *v = frand(nk, 1), *dout = frand(nq, 1);
    obuf_t out = obuf("out", K_F32, nq, NULL), lse = obuf("lse", K_F32, (size_t)T * H, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&out, c);
        prep(&lse, c);
        ops->attention_fwd(out.f[c], lse.f[c], (fb_act *)q, (fb_act *)k, (fb_act *)v, cu, nseq, T, H, KV, hd);
    }
    prep_ref(&out);
    prep_ref(&lse);
    double *qd = to_d(q, nq), *kd = to_d(k, nk), *vd = to_d(v, nk);
    cpu_attention_fwd_f64(out.ref, lse.ref, qd, kd, vd, cu, nseq, T, H, KV, hd);
    check("attention_fwd", &out, TOL_MM);
    check("attention_fwd", &lse, TOL_MM);

    const float *o32 = out.f[0], *l32 = lse.f[0];
    obuf_t dq = obuf("dq", K_F32, nq, NULL), dk = obuf("dk", K_F32, nk, NULL), dv = obuf("dv", K_F32, nk, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&dq, c);
        prep(&dk, c);
        prep(&dv, c);
        ops->attention_bwd(dq.f[c], dk.f[c], dv.f[c], (fb_act *)dout, (fb_act *)q, (fb_act *)k, (fb_act *)v, (fb_act *)o32, l32, cu, nseq, T, H, KV, hd);
    }
    prep_ref(&dq);
    prep_ref(&dk);
    prep_ref(&dv);
    cpu_attention_bwd_f64(dq.ref, dk.ref, dv.ref, to_d(dout, nq), qd, kd, vd, to_d(o32, nq),
                          to_d(l32, (size_t)T * H), cu, nseq, T, H, KV, hd);
    check("attention_bwd", &dq, TOL_MM);
    check("attention_bwd", &dk, TOL_MM);
    check("attention_bwd", &dv, TOL_MM);
}

static void test_attention(const ops_t *ops)
{
    /* one sample longer than the kernel's 128-row block */
    static const int32_t cu[] = {0, 17, 57, 96, 300};
    test_attention_case(ops, cu, 4, 4, 2, 16);
    /* one item (1 sample x 1 kv head) for 2 and 3 threads, GEMMs big enough
     * for OpenBLAS to thread them: they must still give the one-thread bits */
    static const int32_t one[] = {0, 512};
    test_attention_case(ops, one, 1, 2, 1, 64);
}

/* ---------------------------------------------------------------- swiglu, dropout */

static void test_swiglu(const ops_t *ops)
{
    const size_t n = 100000;
    float *g = frand(n, 5), *u = frand(n, 1), *dh = frand(n, 1);
    obuf_t h = obuf("h", K_F32, n, NULL), dg = obuf("dg", K_F32, n, NULL), du = obuf("du", K_F32, n, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&h, c);
        ops->swiglu_fwd(h.f[c], (fb_act *)g, (fb_act *)u, n);
        prep(&dg, c);
        prep(&du, c);
        ops->swiglu_bwd(dg.f[c], du.f[c], (fb_act *)dh, (fb_act *)g, (fb_act *)u, n);
    }
    prep_ref(&h);
    prep_ref(&dg);
    prep_ref(&du);
    double *gd = to_d(g, n), *ud = to_d(u, n);
    cpu_swiglu_fwd_f64(h.ref, gd, ud, n);
    cpu_swiglu_bwd_f64(dg.ref, du.ref, to_d(dh, n), gd, ud, n);
    check("swiglu_fwd", &h, TOL_EW);
    check("swiglu_bwd", &dg, TOL_EW);
    check("swiglu_bwd", &du, TOL_EW);
}

static void test_dropout(const ops_t *ops)
{
    const size_t n = 100000;
    const float p = 0.25f; /* exact in both precisions: same mask */
    obuf_t x = obuf("x", K_F32, n, frand(n, 1)), mask = obuf("mask", K_U8, n, NULL);
    obuf_t dx = obuf("dx", K_F32, n, frand(n, 1));
    for (int c = 0; c < NCFG; c++) {
        prep(&x, c);
        prep(&mask, c);
        ops->dropout_fwd(x.f[c], mask.f[c], n, p, 1234, 5678);
        prep(&dx, c);
        ops->dropout_bwd(dx.f[c], mask.f[0], n, p);
    }
    prep_ref(&x);
    prep_ref(&mask);
    prep_ref(&dx);
    cpu_dropout_fwd_f64(x.ref, mask.ref, n, p, 1234, 5678);
    cpu_dropout_bwd_f64(dx.ref, mask.ref, n, p);
    check("dropout_fwd", &x, TOL_EW);
    check("dropout_fwd", &mask, 1);
    check("dropout_bwd", &dx, TOL_EW);
}

/* Each row at its own offset (expert dropout keyed by the row's origin):
 * row r is dropout_fwd of that row alone at offset row_offset[r], the
 * offsets spread over the whole 64-bit range as the keys' hashes are. */
static void test_dropout_rows(const ops_t *ops)
{
    const size_t rows = 301, width = 333, n = rows * width;
    const float p = 0.25f;
    uint64_t *off = testlib_scratch(rows * sizeof *off);
    for (size_t r = 0; r < rows; r++)
        off[r] = fb_hash2(99, r) ^ (r % 3 == 0 ? 0 : (uint64_t)r << 60);
    obuf_t x = obuf("x", K_F32, n, frand(n, 1)), mask = obuf("mask", K_U8, n, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&x, c);
        prep(&mask, c);
        ops->dropout_rows_fwd(x.f[c], mask.f[c], rows, width, p, 1234, off);
    }
    prep_ref(&x);
    prep_ref(&mask);
    for (size_t r = 0; r < rows; r++)
        cpu_dropout_fwd_f64((double *)x.ref + r * width, (uint8_t *)mask.ref + r * width, width, p, 1234, off[r]);
    check("dropout_rows_fwd", &x, TOL_EW);
    check("dropout_rows_fwd", &mask, 1);
}

/* ---------------------------------------------------------------- cross-entropy */

static void test_cross_entropy(const ops_t *ops)
{
    const int T = 64, V = 300;
    size_t n = (size_t)T * V;
    int32_t *tg = testlib_scratch(T * sizeof(int32_t));
    for (int t = 0; t < T; t++)
        tg[t] = t % 7 == 3 ? -1 : (int32_t)(fb_hash2(9, (uint64_t)t) % V);
    float *logits = frand(n, 4);
    obuf_t loss = obuf("loss", K_F32, (size_t)T, NULL), dl = obuf("dlogits", K_F32, n, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&loss, c);
        prep(&dl, c);
        ops->cross_entropy(loss.f[c], dl.f[c], (fb_act *)logits, tg, T, V, 0.01f);
    }
    prep_ref(&loss);
    prep_ref(&dl);
    cpu_cross_entropy_f64(loss.ref, dl.ref, to_d(logits, n), tg, T, V, (double)0.01f);
    check("cross_entropy", &loss, TOL_EW);
    check("cross_entropy", &dl, TOL_EW);

    float *inplace = testlib_scratch(n * sizeof(float)), *loss2 = testlib_scratch(T * sizeof(float));
    memcpy(inplace, logits, n * sizeof(float));
    set_threads(1);
    ops->cross_entropy(loss2, (fb_act *)inplace, (fb_act *)inplace, tg, T, V, 0.01f);
    check_true("cross_entropy", "in place (dlogits == logits) == out of place",
               !memcmp(inplace, dl.f[0], n * sizeof(float)) && !memcmp(loss2, loss.f[0], T * sizeof(float)));
}

/* ---------------------------------------------------------------- router */

static void test_router(const ops_t *ops)
{
    const int T = 96, E = 8, K = 2;
    size_t n = (size_t)T * E, nk = (size_t)T * K;
    float *logits = frand(n, 2), *dw = frand(nk, 1), *aux = frand((size_t)E, 0.1f);
    obuf_t probs = obuf("probs", K_F32, n, NULL), lse = obuf("lse", K_F32, (size_t)T, NULL);
    obuf_t idx = obuf("topk_idx", K_I32, nk, NULL), w = obuf("topk_w", K_F32, nk, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&probs, c);
        prep(&lse, c);
        prep(&idx, c);
        prep(&w, c);
        ops->router_fwd(probs.f[c], lse.f[c], idx.f[c], w.f[c], logits, T, E, K);
    }
    prep_ref(&probs);
    prep_ref(&lse);
    prep_ref(&idx);
    prep_ref(&w);
    cpu_router_fwd_f64(probs.ref, lse.ref, idx.ref, w.ref, to_d(logits, n), T, E, K);
    check("router_fwd", &probs, TOL_EW);
    check("router_fwd", &lse, TOL_EW);
    check("router_fwd", &idx, 1);
    check("router_fwd", &w, TOL_EW);

    const float *p32 = probs.f[0], *l32 = lse.f[0], *w32 = w.f[0];
    const int32_t *i32 = idx.f[0];
    obuf_t dl = obuf("dlogits", K_F32, n, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&dl, c);
        ops->router_bwd(dl.f[c], p32, l32, i32, w32, dw, aux, 0.05f, T, E, K);
    }
    prep_ref(&dl);
    cpu_router_bwd_f64(dl.ref, to_d(p32, n), to_d(l32, (size_t)T), i32, to_d(w32, nk), to_d(dw, nk),
                       to_d(aux, (size_t)E), (double)0.05f, T, E, K);
    check("router_bwd", &dl, TOL_EW);
}

/* The top-k of many experts with ties, against an independent selection:
 * the experts sorted by falling probability, a tie to the lower index
 * (the router's documented rule), the first K taken. */
static const float *topk_probs;

static int by_prob_then_index(const void *a, const void *b)
{
    const int i = *(const int *)a, j = *(const int *)b;
    if (topk_probs[i] != topk_probs[j])
        return topk_probs[i] > topk_probs[j] ? -1 : 1;
    return i - j;
}

static void test_router_topk_ties(const ops_t *ops)
{
    const int T = 64, E = 128, K = 32;
    size_t n = (size_t)T * E, nk = (size_t)T * K;
    float *logits = testlib_scratch(n * sizeof(float)), *probs = testlib_scratch(n * sizeof(float));
    float *lse = testlib_scratch((size_t)T * sizeof(float)), *w = testlib_scratch(nk * sizeof(float));
    int32_t *idx = testlib_scratch(nk * sizeof(int32_t));
    int order[128];
    /* 7 distinct values: every token has ties inside and across its top 32 */
    for (size_t i = 0; i < n; i++)
        logits[i] = (float)((i * 2654435761u >> 7) % 7) * 0.25f;
    set_threads(1);
    ops->router_fwd(probs, lse, idx, w, logits, T, E, K);
    int same = 1, weights = 1;
    for (int t = 0; t < T; t++) {
        topk_probs = probs + (size_t)t * E;
        for (int e = 0; e < E; e++)
            order[e] = e;
        qsort(order, (size_t)E, sizeof order[0], by_prob_then_index);
        double sum = 0;
        for (int k = 0; k < K; k++) {
            same &= idx[(size_t)t * K + k] == order[k];
            sum += topk_probs[order[k]];
        }
        for (int k = 0; k < K; k++)
            weights &= fabs(w[(size_t)t * K + k] - topk_probs[order[k]] / sum) < 1e-6;
    }
    check_true("router_fwd", "128 experts top-32 with ties: the sorted selection", same);
    check_true("router_fwd", "128 experts top-32 with ties: weights p / sum of the chosen", weights);
}

/* ---------------------------------------------------------------- permute, combine, gmm */

static void test_permute(const ops_t *ops)
{
    const int T = 96, K = 2, E = 8, D = 40;
    int32_t *token_rows = testlib_scratch((size_t)T * K * sizeof(int32_t));
    int32_t *row_token = testlib_scratch((size_t)T * K * sizeof(int32_t));
    int R = 0;
    for (int e = 0; e < E; e++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++) {
                int ex = (int)((uint64_t)(t * 5 + k * 3) % (uint64_t)E);
                int dropped = (t * K + k) % 11 == 4;
                if (e == 0)
                    token_rows[t * K + k] = -1;
                if (ex == e && !dropped) {
                    row_token[R] = t;
                    token_rows[t * K + k] = R++;
                }
            }
    float *x = frand((size_t)T * D, 1), *eo = frand((size_t)R * D, 1), *wt = frand((size_t)T * K, 1);
    float *dxp = frand((size_t)R * D, 1), *dy = frand((size_t)T * D, 1);
    obuf_t xp = obuf("xp", K_F32, (size_t)R * D, NULL);
    obuf_t dx = obuf("dx", K_F32, (size_t)T * D, frand((size_t)T * D, 1));
    obuf_t y = obuf("y", K_F32, (size_t)T * D, NULL);
    obuf_t deo = obuf("deo", K_F32, (size_t)R * D, NULL), dw = obuf("dw", K_F32, (size_t)T * K, NULL);
    for (int c = 0; c < NCFG; c++) {
        prep(&xp, c);
        ops->permute_fwd(xp.f[c], (fb_act *)x, row_token, R, D);
        prep(&dx, c);
        ops->permute_bwd(dx.f[c], (fb_act *)dxp, token_rows, T, K, D);
        prep(&y, c);
        ops->combine_fwd(y.f[c], (fb_act *)eo, token_rows, wt, T, K, D);
        prep(&deo, c);
        prep(&dw, c);
        ops->combine_bwd(deo.f[c], dw.f[c], (fb_act *)dy, (fb_act *)eo, token_rows, wt, T, K, D);
    }
    prep_ref(&xp);
    prep_ref(&dx);
    prep_ref(&y);
    prep_ref(&deo);
    prep_ref(&dw);
    double *eod = to_d(eo, (size_t)R * D), *wd = to_d(wt, (size_t)T * K);
    cpu_permute_fwd_f64(xp.ref, to_d(x, (size_t)T * D), row_token, R, D);
    cpu_permute_bwd_f64(dx.ref, to_d(dxp, (size_t)R * D), token_rows, T, K, D);
    cpu_combine_fwd_f64(y.ref, eod, token_rows, wd, T, K, D);
    cpu_combine_bwd_f64(deo.ref, dw.ref, to_d(dy, (size_t)T * D), eod, token_rows, wd, T, K, D);
    check("permute_fwd", &xp, TOL_EW);
    check("permute_bwd", &dx, TOL_EW);
    check("combine_fwd", &y, TOL_EW);
    check("combine_bwd", &deo, TOL_EW);
    check("combine_bwd", &dw, TOL_EW);
}

/* One grouped-matmul case: off [E+1] row offsets, N x K weights. */
static void test_gmm_case(const ops_t *ops, const int32_t *off, int E, int N, int K)
{
    const int rows = off[E];
    size_t nx = (size_t)rows * K, ny = (size_t)rows * N, nw = (size_t)E * N * K;
    float *X = frand(nx, 1), *W = frand(nw, 1), *dY = frand(ny, 1);
    obuf_t Y = obuf("Y", K_F32, ny, NULL), dX = obuf("dX", K_F32, nx, NULL);
    obuf_t dW = obuf("dW", K_F32, nw, frand(nw, 1));
    for (int c = 0; c < NCFG; c++) {
        prep(&Y, c);
        ops->gmm_fwd(Y.f[c], (fb_act *)X, (fb_act *)W, off, E, N, K);
        prep(&dX, c);
        ops->gmm_bwd_data(dX.f[c], (fb_act *)dY, (fb_act *)W, off, E, N, K);
        prep(&dW, c);
        ops->gmm_bwd_weight(dW.f[c], (fb_act *)dY, (fb_act *)X, off, E, N, K);
    }
    prep_ref(&Y);
    prep_ref(&dX);
    prep_ref(&dW);
    double *Xd = to_d(X, nx), *Wd = to_d(W, nw), *dYd = to_d(dY, ny);
    cpu_gmm_fwd_f64(Y.ref, Xd, Wd, off, E, N, K);
    cpu_gmm_bwd_data_f64(dX.ref, dYd, Wd, off, E, N, K);
    cpu_gmm_bwd_weight_f64(dW.ref, dYd, Xd, off, E, N, K);
    check("gmm_fwd", &Y, TOL_MM);
    check("gmm_bwd_data", &dX, TOL_MM);
    check("gmm_bwd_weight", &dW, TOL_MM);
    int untouched = 1;
    for (int e = 0; e < E; e++)
        if (off[e + 1] == off[e])
            untouched &= !memcmp((float *)dW.f[0] + (size_t)e * N * K, (const float *)dW.init + (size_t)e * N * K,
                                 (size_t)N * K * sizeof(float));
    check_true("gmm_bwd_weight", "empty experts' dW left as they were", untouched);
}

/* Threads 1/2/3 take the three schedules of kernels/cpu/matmul.c: one
 * thread runs the experts in turn; more threads share whole experts out
 * (largest first, single-threaded BLAS each) unless fewer experts than
 * threads hold rows or the biggest holds most of them, when the experts run
 * in turn on threaded BLAS (set_threads gives BLAS the same count). Every
 * schedule must give the same bits. */
static void test_gmm(const ops_t *ops)
{
    static const int32_t four[] = {0, 30, 30, 75, 100}; /* expert 1 empty */
    test_gmm_case(ops, four, 4, 48, 40);
    /* 64 experts of 0-12 rows and one of 300 (big enough for threaded BLAS) */
    enum { MANY = 64 };
    int32_t many[MANY + 1] = {0};
    for (int e = 0; e < MANY; e++)
        many[e + 1] = many[e] + (e == 17 ? 300 : (e * 7) % 13);
    test_gmm_case(ops, many, MANY, 96, 80);
    /* two experts with rows: grouped at 2 threads, in turn at 3 */
    static const int32_t two[] = {0, 0, 500, 520, 520};
    test_gmm_case(ops, two, 4, 128, 96);
}

/* ---------------------------------------------------------------- adamw */

/* The textbook form, in double: independent of the kernel's lerp and
 * scalar rounding. */
static void naive_adamw(double *p, const double *g, double *m, double *v, size_t n, double lr, double b1, double b2,
                        double eps, double wd, int adam_w_mode, long step)
{
    double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step);
    for (size_t i = 0; i < n; i++) {
        double gi = adam_w_mode ? g[i] : g[i] + wd * p[i];
        if (adam_w_mode)
            p[i] *= 1 - lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        double denom = sqrt(v[i]) / sqrt(bc2) + eps;
        p[i] -= lr / bc1 * m[i] / denom;
    }
}

/* torch's fp32 AdamW order, one element at a time (this file is built
 * without the kernels' -fno-math-errno, so nothing here is vectorised
 * through sqrtf): the vectorised kernel must give these very bits. */
static void scalar_adamw_f32(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                             float eps, float wd, int adam_w_mode, long step)
{
    const float step_size = (float)((double)lr / (1.0 - pow((double)b1, (double)step)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)b2, (double)step));
    const float decay = (float)(1.0 - (double)lr * (double)wd);
    const float one_m_b1 = (float)(1.0 - (double)b1), one_m_b2 = (float)(1.0 - (double)b2);
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        if (adam_w_mode)
            p[i] *= decay;
        else
            gi = gi + wd * p[i];
        m[i] = m[i] + one_m_b1 * (gi - m[i]);
        v[i] = v[i] * b2 + one_m_b2 * (gi * gi);
        volatile float root = sqrtf(v[i]);
        p[i] = p[i] + (-step_size) * (m[i] / (root / bc2_sqrt + eps));
    }
}

/* |g| in [0.005, 0.01], random sign: with |wd p| <= 0.002 the L2 gradient
 * g + wd p cannot cancel, which would make the step ill-conditioned in fp32
 * (a 1e-8-sized sum divided by a denominator near eps). In AdamW mode every
 * 97th |g| is ~1e-8 instead, so that where eps sits in the denominator
 * matters. */
static float *adam_grad(size_t n, int adam_w_mode)
{
    float *g = frand(n, 1);
    for (size_t i = 0; i < n; i++) {
        float mag = 0.0075f + 0.0025f * frand1();
        if (adam_w_mode && i % 97 == 0)
            mag *= 1e-6f;
        g[i] = g[i] < 0 ? -mag : mag;
    }
    return g;
}

static void test_adamw(const ops_t *ops)
{
    const size_t n = 100000;
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    for (int mode = 1; mode >= 0; mode--) {
        float *p0 = frand(n, 0.02f); /* weight-sized: fp32 rounding of p stays far below the update */
        float *p[NCFG], *m[NCFG], *v[NCFG];
        for (int c = 0; c < NCFG; c++) {
            p[c] = testlib_scratch(n * sizeof(float));
            memcpy(p[c], p0, n * sizeof(float));
            m[c] = testlib_scratch(n * sizeof(float));
            v[c] = testlib_scratch(n * sizeof(float));
        }
        double *pd = to_d(p0, n), *md = testlib_scratch(n * sizeof(double)), *vd = testlib_scratch(n * sizeof(double));
        float *ps = testlib_scratch(n * sizeof(float)), *ms = testlib_scratch(n * sizeof(float)),
              *vs = testlib_scratch(n * sizeof(float));
        memcpy(ps, p0, n * sizeof(float));
        for (long step = 1; step <= 3; step++) {
            float *g = adam_grad(n, mode);
            for (int c = 0; c < NCFG; c++) {
                set_threads(c);
                ops->adamw(p[c], g, m[c], v[c], n, lr, b1, b2, eps, wd, mode, step);
            }
            naive_adamw(pd, to_d(g, n), md, vd, n, lr, b1, b2, eps, wd, mode, step);
            scalar_adamw_f32(ps, g, ms, vs, n, lr, b1, b2, eps, wd, mode, step);
        }
        const int scalar_same = !memcmp(p[0], ps, n * sizeof(float)) && !memcmp(m[0], ms, n * sizeof(float)) &&
                                !memcmp(v[0], vs, n * sizeof(float));
        int det = 1;
        for (int c = 1; c < NCFG; c++)
            det &= !memcmp(p[0], p[c], n * sizeof(float)) && !memcmp(m[0], m[c], n * sizeof(float)) &&
                   !memcmp(v[0], v[c], n * sizeof(float));
        /* The update, not p itself, is what rounding can hurt: compare p - p0
         * relative to its own size. */
        double ep = 0, dmax = 0, em = 0, mmax = 0, ev = 0, vmax = 0;
        for (size_t i = 0; i < n; i++) {
            ep = fmax(ep, fabs(((double)p[0][i] - p0[i]) - (pd[i] - p0[i])));
            dmax = fmax(dmax, fabs(pd[i] - p0[i]));
            em = fmax(em, fabs(m[0][i] - md[i]));
            mmax = fmax(mmax, fabs(md[i]));
            ev = fmax(ev, fabs(v[0][i] - vd[i]));
            vmax = fmax(vmax, fabs(vd[i]));
        }
        ep /= dmax;
        em /= mmax;
        ev /= vmax;
        int ok = det && ep < TOL_MM && em < TOL_EW && ev < TOL_EW && scalar_same;
        printf("  %-16s 3 steps vs naive double: update err %.2e, m err %.2e, v err %.2e, threads 1/2/3 %s, "
               "vs scalar fp32 %s  %s\n", mode ? "adamw" : "adam (L2)", ep, em, ev, det ? "identical" : "DIFFER",
               scalar_same ? "identical" : "DIFFER", ok ? "ok" : "FAIL");
        failures += !ok;
    }
}

/* ---------------------------------------------------------------- info */

static void test_info(void)
{
    FILE *f = tmpfile();
    if (!f)
        fb_fail_call(FB_EXIT_IO, __FILE__, __LINE__, "tmpfile()", NULL);
    kernels_print_backends(f);
    char line[512] = "";
    rewind(f);
    int ok = fgets(line, sizeof line, f) != NULL && strstr(line, "backend cpu: fp32 reference") != NULL &&
             strstr(line, "OpenMP max threads") != NULL;
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    printf("  info: \"%s\"\n", line);
    check_true("kernels_info", "prints the cpu backend line", ok);
}

int main(void)
{
    const ops_t *ops = ops_cpu();
    int saved = omp_get_max_threads();
    printf("test_ops_cpu: ops_cpu() \"%s\" (fp32) vs the fp64 twin, threads 1/2/3\n", ops->name);
    test_memory(ops);
    test_matmul(ops);
    test_blas1(ops);
    test_embedding(ops);
    test_rmsnorm(ops);
    test_rope(ops);
    test_attention(ops);
    test_swiglu(ops);
    test_dropout(ops);
    test_dropout_rows(ops);
    test_cross_entropy(ops);
    test_router(ops);
    test_router_topk_ties(ops);
    test_permute(ops);
    test_gmm(ops);
    test_adamw(ops);
    omp_set_num_threads(saved);
    test_info();
    testlib_scratch_free_all();
    printf("test_ops_cpu: %s (%d failure%s)\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
