/* The CPU kernels in both precisions: cpu_<op>_f32 (behind ops_cpu()) and
 * cpu_<op>_f64 (the test-only double twin, in libkernels_f64.a).
 *
 * The semantics of every function are those of the ops_t entry of the same
 * name in kernels/ops.h, with `float` replaced by the instantiation's scalar
 * type (all scalar parameters too). Both sets are declared from one list so
 * that the two precisions cannot drift apart.
 */
#ifndef FABULA_KERNELS_CPU_CPU_KERNELS_H
#define FABULA_KERNELS_CPU_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define CPU_KERNELS_DECLARE(R, S)                                                                  \
    void cpu_matmul##S(R *C, const R *A, const R *B, int M, int N, int K, int transA, int transB,   \
                       R beta);                                                                    \
    void cpu_axpy##S(R *y, const R *x, size_t n, R alpha);                                        \
    void cpu_scale##S(R *x, size_t n, R s);                                                       \
    double cpu_sumsq##S(const R *x, size_t n);                                                    \
    void cpu_embedding_fwd##S(R *out, const int32_t *tokens, const R *table, int T, int D);       \
    void cpu_embedding_bwd##S(R *dtable, const R *dout, const int32_t *tokens, int T, int D);     \
    void cpu_rmsnorm_fwd##S(R *out, R *rstd, const R *x, const R *w, int T, int D, R eps);        \
    void cpu_rmsnorm_bwd##S(R *dx, R *dw, const R *dout, const R *x, const R *w, const R *rstd,   \
                            int T, int D);                                                         \
    void cpu_rope_fwd##S(R *x, const int32_t *pos, int T, int nheads, int hd, R theta);           \
    void cpu_rope_bwd##S(R *dx, const int32_t *pos, int T, int nheads, int hd, R theta);          \
    void cpu_attention_fwd##S(R *out, R *lse, const R *q, const R *k, const R *v,                 \
                              const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd);  \
    void cpu_attention_bwd##S(R *dq, R *dk, R *dv, const R *dout, const R *q, const R *k,         \
                              const R *v, const R *out, const R *lse, const int32_t *cu_seqlens,   \
                              int nseq, int T, int H, int KV, int hd);                             \
    void cpu_swiglu_fwd##S(R *h, const R *g, const R *u, size_t n);                               \
    void cpu_swiglu_bwd##S(R *dg, R *du, const R *dh, const R *g, const R *u, size_t n);          \
    void cpu_cross_entropy##S(R *loss, R *dlogits, const R *logits, const int32_t *targets,       \
                              int T, int V, R grad_scale);                                         \
    void cpu_router_fwd##S(R *probs, R *lse, int32_t *topk_idx, R *topk_w, const R *logits,       \
                           int T, int E, int K);                                                   \
    void cpu_router_bwd##S(R *dlogits, const R *probs, const R *lse, const int32_t *topk_idx,     \
                           const R *topk_w, const R *dtopk_w, const R *aux_dprob, R z_scale,       \
                           int T, int E, int K);                                                   \
    void cpu_permute_fwd##S(R *xp, const R *x, const int32_t *row_token, int nrows, int D);       \
    void cpu_permute_bwd##S(R *dx, const R *dxp, const int32_t *token_rows, int T, int K, int D); \
    void cpu_combine_fwd##S(R *y, const R *eo, const int32_t *token_rows, const R *w, int T,       \
                            int K, int D);                                                         \
    void cpu_combine_bwd##S(R *deo, R *dw, const R *dy, const R *eo, const int32_t *token_rows,   \
                            const R *w, int T, int K, int D);                                      \
    void cpu_gmm_fwd##S(R *Y, const R *X, const R *W, const int32_t *offsets, int E, int N,       \
                        int K);                                                                    \
    void cpu_gmm_bwd_data##S(R *dX, const R *dY, const R *W, const int32_t *offsets, int E,       \
                             int N, int K);                                                        \
    void cpu_gmm_bwd_weight##S(R *dW, const R *dY, const R *X, const int32_t *offsets, int E,     \
                               int N, int K);                                                      \
    void cpu_dropout_fwd##S(R *x, uint8_t *mask, size_t n, R p, uint64_t seed, uint64_t offset);  \
    void cpu_dropout_bwd##S(R *dx, const uint8_t *mask, size_t n, R p);                           \
    void cpu_dropout_rows_fwd##S(R *x, uint8_t *mask, size_t rows, size_t width, R p, uint64_t seed,    \
                                 const uint64_t *row_offset);                                      \
    void cpu_adamw##S(R *p, const R *g, R *m, R *v, size_t n, R lr, R beta1, R beta2, R eps,       \
                      R weight_decay, int adam_w_mode, long step);

CPU_KERNELS_DECLARE(float, _f32)
CPU_KERNELS_DECLARE(double, _f64)

#undef CPU_KERNELS_DECLARE

/* Elementwise loops shorter than this run on one thread: below it the
 * fork/join costs more than the loop. (Thread count never changes results.) */
#define CPU_PAR_MIN_ELEMS 32768
/* Row loops (rmsnorm, rope, router, embedding, permute, combine) open no
 * parallel region for a single row, as every op of a decode step has: waking
 * a sleeping team costs more than the row (docs/generate.md "Speed"). */

/* fp32 only (kernels/cpu/decode_attention.c): generation, never the training. */
void cpu_decode_attention_f32(float *out, const float *q, const float *kc, const float *vc, int n, int past, int H,
                              int KV, int hd);

#endif
