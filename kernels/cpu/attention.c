/* Causal attention over packed variable-length samples with GQA.
 *
 * Row t of a sample attends to rows start(t)..t of the same sample. Query
 * head h reads kv head h / (H/KV). Scores are scaled by 1/sqrt(hd).
 *
 * Work is cut into items (sample, kv head) and, inside an item, into blocks
 * of ATT_BLOCK query rows; a block of rows [r0, r1) needs only the keys
 * [0, r1), so the score block is [r1 - r0, r1] and the matmuls (BLAS) skip
 * most of the masked half. Every output element belongs to exactly one item
 * (dk and dv too: an item owns its kv head's rows of its sample), each item
 * runs on one thread with a fixed order of operations, so the results do not
 * depend on the number of threads. With fewer items than threads, items run
 * one after the other and BLAS uses the threads instead.
 */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"
#include "cpu/row_exp.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/blas_threads.h"

#include "util/error.h"

#define ATT_BLOCK 128

typedef struct att_shape {
    int H, KV, hd, G;   /* G = H / KV query heads per kv head */
    int qs, ks;         /* row strides of q/out and k/v */
    real scale;
} att_shape_t;

static att_shape_t shape_of(int H, int KV, int hd)
{
    FB_ASSERT(KV > 0 && H % KV == 0);
    att_shape_t s = {H, KV, hd, H / KV, H * hd, KV * hd, (real)(1.0 / R_SQRT((real)hd))};
    return s;
}

static int longest_sample(const int32_t *cu_seqlens, int nseq)
{
    int n = 1;
    for (int i = 0; i < nseq; i++)
        if (cu_seqlens[i + 1] - cu_seqlens[i] > n)
            n = cu_seqlens[i + 1] - cu_seqlens[i];
    return n;
}

/* Items (sequence x kv head) run in parallel whenever there are threads,
 * BLAS on one thread inside each (blas_threads.h): a GEMM threaded by
 * OpenBLAS would not give the one-thread bits. With fewer items than
 * threads some threads idle. (Telling OpenBLAS one thread and then all of
 * them back, as before, undid the kernels' one-pool rule, and on an OpenMP
 * OpenBLAS set OpenMP's own count to 1 for the region.) */
static int items_in_parallel(int nitems)
{
    (void)nitems;
    return omp_get_max_threads() > 1;
}

/* S[0..B) x [0..r1): scale * Q[r0..r1) K[0..r1)^T, then row-wise causal
 * softmax in place: P[i][c] = exp(S - lse) for c <= r0 + i, 0 after. The
 * forward computes lse (written to lse_out), the backward reads it. */
static void probs_block(real *P, const real *Q, const real *K, const att_shape_t *s, int r0, int r1,
                        real *lse_out, const real *lse_in, int lse_stride)
{
    const int B = r1 - r0;
    R_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, r1, s->hd, s->scale, Q + (size_t)r0 * s->qs, s->qs, K, s->ks,
           0, P, r1);
    for (int i = 0; i < B; i++) {
        real *row = P + (size_t)i * r1;
        const int last = r0 + i;
        if (lse_in) {
            const real lse = lse_in[(size_t)last * lse_stride];
            for (int c = 0; c <= last; c++)
                row[c] = R_EXP(row[c] - lse);
        } else {
            real m = row[0];
            for (int c = 1; c <= last; c++)
                m = row[c] > m ? row[c] : m;
            const double sum = row_exp_store(row, row, last + 1, m);
            lse_out[(size_t)last * lse_stride] = m + (real)log(sum);
            const real inv = (real)(1.0 / sum);
            for (int c = 0; c <= last; c++)
                row[c] *= inv;
        }
        for (int c = last + 1; c < r1; c++)
            row[c] = 0;
    }
}

static void fwd_item(real *out, real *lse, const real *q, const real *k, const real *v, const att_shape_t *s,
                     int start, int L, int g, real *P)
{
    const real *K = k + (size_t)start * s->ks + (size_t)g * s->hd;
    const real *V = v + (size_t)start * s->ks + (size_t)g * s->hd;
    for (int j = 0; j < s->G; j++) {
        const int h = g * s->G + j;
        const real *Q = q + (size_t)start * s->qs + (size_t)h * s->hd;
        real *O = out + (size_t)start * s->qs + (size_t)h * s->hd;
        for (int r0 = 0; r0 < L; r0 += ATT_BLOCK) {
            const int r1 = r0 + ATT_BLOCK < L ? r0 + ATT_BLOCK : L;
            probs_block(P, Q, K, s, r0, r1, lse + (size_t)start * s->H + h, NULL, s->H);
            R_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, s->hd, r1, 1, P, r1, V, s->ks, 0,
                   O + (size_t)r0 * s->qs, s->qs);
        }
    }
}

void CPU_FN(cpu_attention_fwd)(real *out, real *lse, const real *q, const real *k, const real *v,
                               const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd)
{
    (void)T;
    const att_shape_t s = shape_of(H, KV, hd);
    const int Lmax = longest_sample(cu_seqlens, nseq);
    const size_t scratch = (size_t)(Lmax < ATT_BLOCK ? Lmax : ATT_BLOCK) * (size_t)Lmax;
    const int nitems = nseq * KV;
    if (items_in_parallel(nitems)) {
        cpu_blas_pin_serial();
#pragma omp parallel
        {
            real *P = fb_malloc(scratch * sizeof *P);
#pragma omp for schedule(dynamic, 1)
            for (int it = 0; it < nitems; it++) {
                const int i = it / KV, g = it % KV;
                fwd_item(out, lse, q, k, v, &s, cu_seqlens[i], cu_seqlens[i + 1] - cu_seqlens[i], g, P);
            }
            free(P);
        }
        return;
    }
    real *P = fb_malloc(scratch * sizeof *P);
    for (int it = 0; it < nitems; it++) {
        const int i = it / KV, g = it % KV;
        fwd_item(out, lse, q, k, v, &s, cu_seqlens[i], cu_seqlens[i + 1] - cu_seqlens[i], g, P);
    }
    free(P);
}

/* One item of the backward. D[r] = dot(dout_r, out_r) per query head is
 * computed on the fly; dS = P * (dP - D) overwrites dP. */
static void bwd_item(real *dq, real *dk, real *dv, const real *dout, const real *q, const real *k, const real *v,
                     const real *out, const real *lse, const att_shape_t *s, int start, int L, int g, real *P,
                     real *dP, real *D)
{
    const size_t koff = (size_t)start * s->ks + (size_t)g * s->hd;
    const real *K = k + koff, *V = v + koff;
    real *dK = dk + koff, *dV = dv + koff;
    for (int r = 0; r < L; r++) {
        memset(dK + (size_t)r * s->ks, 0, (size_t)s->hd * sizeof *dK);
        memset(dV + (size_t)r * s->ks, 0, (size_t)s->hd * sizeof *dV);
    }
    for (int j = 0; j < s->G; j++) {
        const int h = g * s->G + j;
        const size_t qoff = (size_t)start * s->qs + (size_t)h * s->hd;
        const real *Q = q + qoff, *O = out + qoff, *dO = dout + qoff;
        real *dQ = dq + qoff;
        for (int r = 0; r < L; r++) {
            double acc = 0.0;
            for (int d = 0; d < s->hd; d++)
                acc += (double)dO[(size_t)r * s->qs + d] * O[(size_t)r * s->qs + d];
            D[r] = (real)acc;
        }
        for (int r0 = 0; r0 < L; r0 += ATT_BLOCK) {
            const int r1 = r0 + ATT_BLOCK < L ? r0 + ATT_BLOCK : L, B = r1 - r0;
            probs_block(P, Q, K, s, r0, r1, NULL, lse + (size_t)start * s->H + h, s->H);
            const real *dOb = dO + (size_t)r0 * s->qs;
            /* dV[0..r1) += P^T dO[r0..r1) */
            R_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r1, s->hd, B, 1, P, r1, dOb, s->qs, 1, dV, s->ks);
            /* dP = dO[r0..r1) V[0..r1)^T, then dS = P (dP - D) */
            R_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, r1, s->hd, 1, dOb, s->qs, V, s->ks, 0, dP, r1);
            for (int i = 0; i < B; i++) {
                real *row = dP + (size_t)i * r1;
                const real *prow = P + (size_t)i * r1;
                const real Di = D[r0 + i];
                for (int c = 0; c < r1; c++)
                    row[c] = prow[c] * (row[c] - Di);
            }
            /* dQ[r0..r1) = scale dS K[0..r1);  dK[0..r1) += scale dS^T Q[r0..r1) */
            R_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, s->hd, r1, s->scale, dP, r1, K, s->ks, 0,
                   dQ + (size_t)r0 * s->qs, s->qs);
            R_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r1, s->hd, B, s->scale, dP, r1, Q + (size_t)r0 * s->qs,
                   s->qs, 1, dK, s->ks);
        }
    }
}

void CPU_FN(cpu_attention_bwd)(real *dq, real *dk, real *dv, const real *dout, const real *q, const real *k,
                               const real *v, const real *out, const real *lse, const int32_t *cu_seqlens,
                               int nseq, int T, int H, int KV, int hd)
{
    (void)T;
    const att_shape_t s = shape_of(H, KV, hd);
    const int Lmax = longest_sample(cu_seqlens, nseq);
    const size_t scratch = (size_t)(Lmax < ATT_BLOCK ? Lmax : ATT_BLOCK) * (size_t)Lmax;
    const int nitems = nseq * KV;
    const int parallel = items_in_parallel(nitems);
    cpu_blas_pin_serial();
#pragma omp parallel if (parallel)
    {
        real *P = fb_malloc(scratch * sizeof *P);
        real *dP = fb_malloc(scratch * sizeof *dP);
        real *D = fb_malloc((size_t)Lmax * sizeof *D);
#pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < nitems; it++) {
            const int i = it / KV, g = it % KV;
            bwd_item(dq, dk, dv, dout, q, k, v, out, lse, &s, cu_seqlens[i], cu_seqlens[i + 1] - cu_seqlens[i], g,
                     P, dP, D);
        }
        free(P);
        free(dP);
        free(D);
    }
}
