/* The backend-neutral op table.
 *
 * Every numerical operation the model performs is declared here once, and a
 * backend (kernels/cpu: the fp32 reference; kernels/cuda: the GPU path) fills
 * an ops_t with its implementations. The model calls ops only through the
 * table, so no backend type or header leaks into src/.
 *
 * Two kinds of storage (docs/cuda.md, "Precision and memory"):
 *  - fb_act: activations, their gradients and the compute copy of the
 *    weights. Its element type is the backend's compute dtype (act_dtype,
 *    act_bytes bytes an element): fp32 on the CPU, bf16 (or fp16) on CUDA.
 *    The model never dereferences an fb_act; it addresses element i of a
 *    buffer with fb_act_at() and sizes buffers with act_bytes.
 *  - float: fp32 always. Master parameters, gradients, optimizer moments,
 *    and small per-row statistics (rstd, lse, router probabilities, losses).
 *    Every op accumulates in fp32 whatever it stores.
 *
 * Conventions (all backends):
 *  - Matrices are row-major. A linear layer's weight is [out, in] (as in
 *    PyTorch/Hugging Face), so y = x W^T.
 *  - Activations of a packed micro-batch have T rows (tokens); q is
 *    [T, H*hd], k and v are [T, KV*hd], head h's columns are h*hd..h*hd+hd-1.
 *  - cu_seqlens[0..nseq] are the sample boundaries in the packed batch
 *    (cu_seqlens[0] = 0, cu_seqlens[nseq] = T); attention never crosses them.
 *  - "accumulates" means the op adds into its output (+=); every other output
 *    is overwritten entirely.
 *  - Pointers are in the backend's memory (host for CPU, device for CUDA),
 *    except where a parameter says host.
 *  - Ops are ordered as issued (one stream); results are visible to the host
 *    after to_host or synchronize.
 */
#ifndef FABULA_KERNELS_OPS_H
#define FABULA_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { FB_DTYPE_F32 = 0, FB_DTYPE_BF16 = 1, FB_DTYPE_F16 = 2 } fb_dtype_t;

/* Compute-dtype storage; never dereferenced outside a backend. */
typedef struct fb_act fb_act;

typedef struct ops {
    const char *name;
    fb_dtype_t act_dtype;           /* element type of fb_act buffers */
    size_t act_bytes;               /* bytes of one fb_act element */
    int device_memory;              /* 1: buffers are device memory (comm must use device comms) */

    /* ---- memory ---- */
    void *(*alloc)(size_t bytes);              /* zero-filled; never NULL */
    void (*release)(void *p);
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);          /* backend -> backend */
    void (*to_backend)(void *dst, const void *host_src, size_t bytes);
    void (*to_host)(void *host_dst, const void *src, size_t bytes);
    /* Enqueued copy to host memory: host_dst may be read only after
     * synchronize (the CPU copies at once). */
    void (*to_host_async)(void *host_dst, const void *src, size_t bytes);
    void (*synchronize)(void);
    /* Host memory the backend copies from and to fastest (page-locked on
     * CUDA): zero-filled, never NULL. to_backend from it returns before the
     * copy is done, so the source must stay untouched until synchronize. */
    void *(*host_alloc)(size_t bytes);
    void (*host_release)(void *p);

    /* ---- conversions ---- */
    /* dst[i] = src[i] rounded to the compute dtype (round to nearest even).
     * dst may equal src only when act_dtype is FB_DTYPE_F32 (then a no-op). */
    void (*to_act)(fb_act *dst, const float *src, size_t n);
    /* dst[i] = src[i] widened to fp32 (exact). */
    void (*act_to_f32)(float *dst, const fb_act *src, size_t n);

    /* ---- dense linear algebra, fp32 accumulation ---- */
    /* C[M,N] = op(A) op(B) + beta*C; op(A) is [M,K], op(B) is [K,N];
     * transA/transB != 0 means the stored matrix is the transpose
     * (A stored [K,M], B stored [N,K]). */
    void (*matmul)(fb_act *C, const fb_act *A, const fb_act *B, int M, int N, int K,
                   int transA, int transB, float beta);
    /* The same with an fp32 output: weight gradients (beta 1) and router
     * logits (beta 0). */
    void (*matmul_f32)(float *C, const fb_act *A, const fb_act *B, int M, int N, int K,
                       int transA, int transB, float beta);

    /* y[i] += alpha * x[i] on fp32 buffers (gradients) */
    void (*axpy)(float *y, const float *x, size_t n, float alpha);
    /* y[i] += alpha * x[i] on activations */
    void (*act_axpy)(fb_act *y, const fb_act *x, size_t n, float alpha);
    /* x[i] *= s */
    void (*scale)(float *x, size_t n, float s);
    /* sum of squares, accumulated in double (for the global gradient norm);
     * inf or NaN when any element is. */
    double (*sumsq)(const float *x, size_t n);

    /* ---- embedding ---- */
    /* out[t,:] = table[tokens[t],:] */
    void (*embedding_fwd)(fb_act *out, const int32_t *tokens, const fb_act *table, int T, int D);
    /* dtable[tokens[t],:] += dout[t,:] (accumulates; deterministic order) */
    void (*embedding_bwd)(float *dtable, const fb_act *dout, const int32_t *tokens, int T, int D);

    /* ---- RMSNorm: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) ---- */
    void (*rmsnorm_fwd)(fb_act *out, float *rstd, const fb_act *x, const fb_act *w, int T, int D, float eps);
    /* dx accumulates (it is the residual stream's gradient); dw accumulates. */
    void (*rmsnorm_bwd)(fb_act *dx, float *dw, const fb_act *dout, const fb_act *x, const fb_act *w,
                        const float *rstd, int T, int D);

    /* ---- rotary position embedding (Hugging Face Llama convention) ----
     * In place on x[T, nheads*hd]: for i < hd/2, f_i = theta^(-2i/hd),
     * a = pos[t]*f_i, (x_i, x_{i+hd/2}) -> (x_i cos a - x_{i+hd/2} sin a,
     *                                       x_{i+hd/2} cos a + x_i sin a). */
    void (*rope_fwd)(fb_act *x, const int32_t *pos, int T, int nheads, int hd, float theta);
    /* In place: applies the transpose (inverse) rotation to the gradient. */
    void (*rope_bwd)(fb_act *dx, const int32_t *pos, int T, int nheads, int hd, float theta);

    /* ---- causal attention over packed variable-length samples, GQA ----
     * out[T, H*hd]; lse[T*H] (log-sum-exp of the scaled scores of row t,
     * head h at t*H+h) is saved for the backward. Query head h reads kv head
     * h / (H/KV). Scale 1/sqrt(hd). Row t attends to rows s with
     * start(t) <= s <= t, start(t) the first row of t's sample.
     * cu_seqlens is in backend memory. */
    void (*attention_fwd)(fb_act *out, float *lse, const fb_act *q, const fb_act *k, const fb_act *v,
                          const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd);
    /* dq, dk, dv overwritten. */
    void (*attention_bwd)(fb_act *dq, fb_act *dk, fb_act *dv, const fb_act *dout, const fb_act *q,
                          const fb_act *k, const fb_act *v, const fb_act *out, const float *lse,
                          const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd);

    /* ---- attention of a few new rows against a KV cache (generation) ----
     * q, out [n, H*hd] are the rows at positions past..past+n-1 of one
     * sequence; kc, vc [past+n, KV*hd] hold the keys and values of positions
     * 0..past+n-1 (the new rows' included). Row i attends to cache rows
     * 0..past+i: the rows attention_fwd gives those positions when run over
     * the whole sequence. Query head h reads kv head h / (H/KV); scale
     * 1/sqrt(hd); fp32 accumulation, no lse. */
    void (*decode_attention)(fb_act *out, const fb_act *q, const fb_act *kc, const fb_act *vc, int n, int past,
                             int H, int KV, int hd);

    /* ---- SwiGLU: h = silu(g) * u, elementwise over n ---- */
    void (*swiglu_fwd)(fb_act *h, const fb_act *g, const fb_act *u, size_t n);
    void (*swiglu_bwd)(fb_act *dg, fb_act *du, const fb_act *dh, const fb_act *g, const fb_act *u, size_t n);

    /* ---- softmax cross-entropy with the gradient in one pass ----
     * For each row t with targets[t] >= 0: loss[t] = logsumexp(logits[t]) -
     * logits[t, targets[t]] and dlogits[t] = grad_scale * (softmax(logits[t])
     * - onehot(targets[t])). Rows with targets[t] < 0: loss 0, gradient 0.
     * dlogits may alias logits (in place). */
    void (*cross_entropy)(float *loss, fb_act *dlogits, const fb_act *logits, const int32_t *targets,
                          int T, int V, float grad_scale);

    /* ---- MoE router (fp32: routing decisions must not hinge on rounding) ----
     * probs = softmax(logits[T,E]); lse[t] = logsumexp(logits[t]);
     * topk_idx[t,0..K-1] = the K largest probs, descending (ties: lower
     * expert index first); topk_w = those probs divided by their sum. */
    void (*router_fwd)(float *probs, float *lse, int32_t *topk_idx, float *topk_w,
                       const float *logits, int T, int E, int K);
    /* dlogits[T,E] (overwritten) from:
     *   dtopk_w[T,K]  gradient of the renormalised weights,
     *   aux_dprob[E]  gradient added to every row's probs (load-balancing loss),
     *   z_scale       gradient of z-loss is z_scale * lse[t] per row (through lse). */
    void (*router_bwd)(fb_act *dlogits, const float *probs, const float *lse, const int32_t *topk_idx,
                       const float *topk_w, const float *dtopk_w, const float *aux_dprob,
                       float z_scale, int T, int E, int K);

    /* ---- token permutation for experts ----
     * Rows r = 0..R-1 of the permuted buffer, grouped by expert; row_token[r]
     * is the source token. token_rows[t*K+k] is the row holding token t's
     * k-th choice, or -1 if that assignment was dropped (capacity). */
    void (*permute_fwd)(fb_act *xp, const fb_act *x, const int32_t *row_token, int R, int D);
    /* dx[t] += sum_k dxp[token_rows[t,k]] (accumulates) */
    void (*permute_bwd)(fb_act *dx, const fb_act *dxp, const int32_t *token_rows, int T, int K, int D);
    /* y[t] = sum_k w[t,k] * eo[token_rows[t,k]] over kept k (overwritten; 0 if all dropped) */
    void (*combine_fwd)(fb_act *y, const fb_act *eo, const int32_t *token_rows, const float *w,
                        int T, int K, int D);
    /* deo[r] = w * dy[t] (overwritten), dw[t,k] = dot(dy[t], eo[r]) (0 if dropped) */
    void (*combine_bwd)(fb_act *deo, float *dw, const fb_act *dy, const fb_act *eo,
                        const int32_t *token_rows, const float *w, int T, int K, int D);

    /* ---- grouped matmul over experts ----
     * offsets[0..E] (host) delimit each expert's rows of X/Y; W holds E
     * matrices [N,K] back to back. */
    /* Y_e[rows,N] = X_e[rows,K] W_e^T */
    void (*gmm_fwd)(fb_act *Y, const fb_act *X, const fb_act *W, const int32_t *offsets, int E, int N, int K);
    /* dX_e[rows,K] = dY_e W_e (overwritten) */
    void (*gmm_bwd_data)(fb_act *dX, const fb_act *dY, const fb_act *W, const int32_t *offsets, int E, int N,
                         int K);
    /* dW_e[N,K] += dY_e^T X_e (accumulates, fp32) */
    void (*gmm_bwd_weight)(float *dW, const fb_act *dY, const fb_act *X, const int32_t *offsets, int E, int N,
                           int K);

    /* ---- dropout with a counter-based mask ----
     * keep[i] = u(seed, offset + i) >= p, with u from fb_uniform_hash()
     * (kernels/rng.h), identical on every backend; kept values scaled by
     * 1/(1-p). mask[i] = 1 kept, 0 dropped. */
    void (*dropout_fwd)(fb_act *x, uint8_t *mask, size_t n, float p, uint64_t seed, uint64_t offset);
    void (*dropout_bwd)(fb_act *dx, const uint8_t *mask, size_t n, float p);
    /* dropout_fwd of each row r of x [rows, width] at its own offset:
     * keep[r][c] = u(seed, row_offset[r] + c) >= p. row_offset (a backend
     * array of rows values) keys each row by something other than its place
     * (an expert row by the token and choice it came from). */
    void (*dropout_rows_fwd)(fb_act *x, uint8_t *mask, size_t rows, size_t width, float p, uint64_t seed,
                             const uint64_t *row_offset);

    /* ---- optimizer ----
     * One AdamW (adam_w_mode != 0: decoupled weight decay) or Adam with L2
     * (adam_w_mode == 0: g += wd*p) step with bias correction for step
     * number `step` (1-based), fp32 throughout. */
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int adam_w_mode, long step);
} ops_t;

/* Element i of an fb_act buffer. */
static inline fb_act *fb_act_at(const ops_t *o, const fb_act *p, size_t i)
{
    return (fb_act *)((char *)(uintptr_t)p + i * o->act_bytes);
}

/* The CPU reference backend (always built). */
const ops_t *ops_cpu(void);

/* The CPU kernels with 16-bit fb_act storage: every op widens its 16-bit
 * inputs to fp32, runs the fp32 CPU kernel, and rounds its 16-bit outputs
 * to nearest even; for testing the model's 16-bit paths without a GPU.
 * dt is FB_DTYPE_BF16 or FB_DTYPE_F16. */
const ops_t *ops_cpu16(fb_dtype_t dt);

/* The CUDA backend (kernels/cuda; only when built with CUDA). act_dtype is
 * FB_DTYPE_BF16 or FB_DTYPE_F16. Call cuda_backend_init() first. */
const ops_t *ops_cuda(fb_dtype_t act_dtype);

#endif
