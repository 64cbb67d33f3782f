/* The CUDA launchers behind ops_cuda(): one per op, templated on the
 * storage type S of fb_act buffers (__nv_bfloat16 or __half; each source
 * file instantiates both). Semantics, argument order and shapes are exactly
 * those of the ops_t entry of the same name in kernels/ops.h, with fb_act
 * replaced by S. Every launcher enqueues on cuda_stream() and returns
 * without synchronizing; `offsets` of the grouped matmuls are host memory,
 * every other pointer is device memory. C++ (nvcc) only. */
#ifndef FABULA_KERNELS_CUDA_KERNELS_CUH
#define FABULA_KERNELS_CUDA_KERNELS_CUH

#include <stddef.h>
#include <stdint.h>

/* ---- elementwise.cu ---- */
template <typename S> void cu_to_act(S *dst, const float *src, size_t n);
template <typename S> void cu_act_to_f32(float *dst, const S *src, size_t n);
template <typename S> void cu_act_axpy(S *y, const S *x, size_t n, float alpha);
void cu_axpy(float *y, const float *x, size_t n, float alpha);
void cu_scale(float *x, size_t n, float s);
/* Synchronizes (the result goes to the host). */
double cu_sumsq(const float *x, size_t n);
template <typename S> void cu_swiglu_fwd(S *h, const S *g, const S *u, size_t n);
template <typename S> void cu_swiglu_bwd(S *dg, S *du, const S *dh, const S *g, const S *u, size_t n);
template <typename S> void cu_dropout_fwd(S *x, uint8_t *mask, size_t n, float p, uint64_t seed, uint64_t offset);
template <typename S> void cu_dropout_bwd(S *dx, const uint8_t *mask, size_t n, float p);
template <typename S>
void cu_dropout_rows_fwd(S *x, uint8_t *mask, size_t rows, size_t width, float p, uint64_t seed,
                         const uint64_t *row_offset);

/* ---- adamw.cu ---- */
void cu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
              float weight_decay, int adam_w_mode, long step);

/* ---- embedding.cu ---- */
template <typename S> void cu_embedding_fwd(S *out, const int32_t *tokens, const S *table, int T, int D);
template <typename S> void cu_embedding_bwd(float *dtable, const S *dout, const int32_t *tokens, int T, int D);

/* ---- rmsnorm.cu ---- */
template <typename S> void cu_rmsnorm_fwd(S *out, float *rstd, const S *x, const S *w, int T, int D, float eps);
template <typename S>
void cu_rmsnorm_bwd(S *dx, float *dw, const S *dout, const S *x, const S *w, const float *rstd, int T, int D);

/* ---- rope.cu ---- */
template <typename S> void cu_rope_fwd(S *x, const int32_t *pos, int T, int nheads, int hd, float theta);
template <typename S> void cu_rope_bwd(S *dx, const int32_t *pos, int T, int nheads, int hd, float theta);

/* ---- cross_entropy.cu ---- */
template <typename S>
void cu_cross_entropy(float *loss, S *dlogits, const S *logits, const int32_t *targets, int T, int V,
                      float grad_scale);

/* ---- attention.cu ---- */
template <typename S>
void cu_attention_fwd(S *out, float *lse, const S *q, const S *k, const S *v, const int32_t *cu_seqlens, int nseq,
                      int T, int H, int KV, int hd);
template <typename S>
void cu_attention_bwd(S *dq, S *dk, S *dv, const S *dout, const S *q, const S *k, const S *v, const S *out,
                      const float *lse, const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd);

/* ---- decode_attention.cu ---- */
template <typename S>
void cu_decode_attention(S *out, const S *q, const S *kc, const S *vc, int n, int past, int H, int KV, int hd);

/* ---- matmul.cu (cuBLASLt), dense and grouped ---- */
void cu_blas_init(void);
void cu_blas_shutdown(void);
template <typename S>
void cu_matmul(S *C, const S *A, const S *B, int M, int N, int K, int transA, int transB, float beta);
template <typename S>
void cu_matmul_f32(float *C, const S *A, const S *B, int M, int N, int K, int transA, int transB, float beta);
template <typename S>
void cu_gmm_fwd(S *Y, const S *X, const S *W, const int32_t *offsets, int E, int N, int K);
template <typename S>
void cu_gmm_bwd_data(S *dX, const S *dY, const S *W, const int32_t *offsets, int E, int N, int K);
template <typename S>
void cu_gmm_bwd_weight(float *dW, const S *dY, const S *X, const int32_t *offsets, int E, int N, int K);

/* ---- router.cu ---- */
void cu_router_fwd(float *probs, float *lse, int32_t *topk_idx, float *topk_w, const float *logits, int T, int E,
                   int K);
template <typename S>
void cu_router_bwd(S *dlogits, const float *probs, const float *lse, const int32_t *topk_idx, const float *topk_w,
                   const float *dtopk_w, const float *aux_dprob, float z_scale, int T, int E, int K);

/* ---- permute.cu: the permutation and the combine ---- */
template <typename S> void cu_permute_fwd(S *xp, const S *x, const int32_t *row_token, int R, int D);
template <typename S> void cu_permute_bwd(S *dx, const S *dxp, const int32_t *token_rows, int T, int K, int D);
template <typename S>
void cu_combine_fwd(S *y, const S *eo, const int32_t *token_rows, const float *w, int T, int K, int D);
template <typename S>
void cu_combine_bwd(S *deo, float *dw, const S *dy, const S *eo, const int32_t *token_rows, const float *w, int T,
                    int K, int D);

#endif
