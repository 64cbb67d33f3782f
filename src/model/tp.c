/* Tensor parallelism's two conjugate operators (docs/parallel.md): the
 * row-parallel matmul whose partial products are summed over the tp group
 * in the forward, and the sum of the input gradient of a column-parallel
 * block in the backward. Without tp both are the single-rank code. */
#include <math.h>

#include "model/model_impl.h"
#include "util/error.h"

void model_tp_allreduce(model_t *m, fb_act *x, size_t n)
{
    if (m->tp_size == 1 || n == 0)
        return;
    const ops_t *o = m->ops;
    if (!m->tp_wide) {
        comm_allreduce(m->tp, x, n, model_act_comm_dtype(m), COMM_SUM);
        return;
    }
    /* 16-bit activations in host memory (run.backend cpu16): MPI cannot
     * sum bf16/fp16, so the partial sums are widened (exactly), summed in
     * fp32 and rounded once, as NCCL's fp32-accumulating reduction of two
     * 16-bit inputs does; every rank gets the same fp32 sum, hence the same
     * rounded result. */
    FB_ASSERT(n <= (size_t)m->max_tokens * (size_t)m->mc.hidden_size);
    o->act_to_f32(m->tp_wide, x, n);
    comm_allreduce(m->tp, m->tp_wide, n, COMM_F32, COMM_SUM);
    o->to_act(x, m->tp_wide, n);
}

void model_tp_allreduce_f32(model_t *m, float *x, size_t n)
{
    if (m->tp_size > 1 && n > 0)
        comm_allreduce(m->tp, x, n, COMM_F32, COMM_SUM);
}

void model_tp_row_matmul_add(model_t *m, fb_act *y, const fb_act *a, const fb_act *w, int M, int N, int K)
{
    const ops_t *o = m->ops;
    if (m->tp_size == 1) {
        o->matmul(y, a, w, M, N, K, 0, 1, 1.0f);
        return;
    }
    /* the partial product is summed before the residual is added, so the
     * residual is counted once */
    o->matmul(m->dtmp, a, w, M, N, K, 0, 1, 0.0f);
    model_tp_allreduce(m, m->dtmp, (size_t)M * N);
    o->act_axpy(y, m->dtmp, (size_t)M * N, 1.0f);
}

/* ---- the vocabulary-parallel embedding and cross-entropy ----
 * Rank r holds vocabulary rows [r Vl, (r+1) Vl) of the embedding and the
 * head (Vl = vocab_size / tp, m->mc.vocab_size). */

void model_embedding_fwd(model_t *m, const model_input_t *in)
{
    const ops_t *o = m->ops;
    const int T = m->T, D = m->mc.hidden_size;
    fb_act *x = m->acts[0].x_in;
    if (m->tp_size == 1) {
        o->embedding_fwd(x, m->tokens, m->w.embed, T, D);
        return;
    }
    /* The rows of the tokens this rank holds, looked up into m->dxp (free
     * in the forward) and scattered to their places, the other rows zero;
     * the tp sum then gives every row its embedding once. */
    const int32_t v0 = m->tp_rank * m->mc.vocab_size, v1 = v0 + m->mc.vocab_size;
    int n = 0;
    for (int t = 0; t < T; t++) {
        const int32_t tok = in->tokens[t];
        m->tp_htoken_rows[t] = tok >= v0 && tok < v1 ? n : -1;
        if (tok >= v0 && tok < v1) {
            m->tp_hrow_token[n] = t;
            m->tp_hids[n++] = tok - v0;
        }
    }
    m->tp_nrows = n;
    o->zero(x, ACT_BYTES(m, (size_t)T * D));
    if (n > 0) {
        o->to_backend(m->tp_ids, m->tp_hids, (size_t)n * sizeof(int32_t));
        o->to_backend(m->tp_row_token, m->tp_hrow_token, (size_t)n * sizeof(int32_t));
        o->to_backend(m->tp_token_rows, m->tp_htoken_rows, (size_t)T * sizeof(int32_t));
        o->embedding_fwd(m->dxp, m->tp_ids, m->w.embed, n, D);
        o->permute_bwd(x, m->dxp, m->tp_token_rows, T, 1, D);
    }
    model_tp_allreduce(m, x, (size_t)T * D);
}

void model_embedding_bwd(model_t *m)
{
    const ops_t *o = m->ops;
    const int T = m->T, D = m->mc.hidden_size;
    if (m->tp_size == 1) {
        o->embedding_bwd(m->dw.embed, m->dx, m->tokens, T, D);
        return;
    }
    /* the gradient rows of this rank's tokens, in token order */
    if (m->tp_nrows > 0) {
        o->permute_fwd(m->dxp, m->dx, m->tp_row_token, m->tp_nrows, D);
        o->embedding_bwd(m->dw.embed, m->dxp, m->tp_ids, m->tp_nrows, D);
    }
}

/* The [T, Vl] logits as fp32 on the host, and their gradient back: a copy
 * for fp32 activations, a widening (and rounding back) for 16-bit ones in
 * host memory (cpu16). 16-bit device logits are refused by the config (tp
 * with bf16/fp16 on cuda). */
static void logits_to_host(const model_t *m, float *host, size_t n)
{
    const ops_t *o = m->ops;
    if (o->act_dtype == FB_DTYPE_F32) {
        o->to_host(host, m->logits, n * sizeof(float));
        return;
    }
    FB_ASSERT(!o->device_memory);
    o->act_to_f32(host, m->logits, n);
}

static void dlogits_from_host(model_t *m, const float *host, size_t n)
{
    const ops_t *o = m->ops;
    if (o->act_dtype == FB_DTYPE_F32) {
        o->to_backend(m->dlogits, host, n * sizeof(float));
        return;
    }
    FB_ASSERT(!o->device_memory);
    o->to_act(m->dlogits, host, n);
}

/* Under tp, on the host: each rank's [T, Vl] logits, whose row maxima are
 * reduced (max) and exp sums and target logits (sum) over the tp group, so
 * the full logits are never gathered. The statistics are double whatever
 * the compute dtype; 16-bit logits are widened first and the gradient
 * rounded back, as the single-rank kernel of cpu16 does. */
static void cross_entropy_tp(model_t *m, const int32_t *targets, float grad_scale)
{
    const int T = m->T, V = m->mc.vocab_size;
    const int32_t v0 = m->tp_rank * V;
    float *l = m->tp_hlogits;
    double *red = m->tp_hred; /* [T] max, then [2T] exp sums and target logits */
    logits_to_host(m, l, (size_t)T * V);
    for (int t = 0; t < T; t++) {
        double mx = l[(size_t)t * V];
        for (int j = 1; j < V; j++)
            mx = l[(size_t)t * V + j] > mx ? l[(size_t)t * V + j] : mx;
        red[t] = mx;
    }
    comm_allreduce(m->tp_host, red, (size_t)T, COMM_F64, COMM_MAX);
    double *sums = red + T;
    for (int t = 0; t < T; t++) {
        double s = 0.0;
        for (int j = 0; j < V; j++)
            s += exp((double)l[(size_t)t * V + j] - red[t]);
        sums[t] = s;
        const int32_t y = targets[t] - v0;
        sums[T + t] = targets[t] >= 0 && y >= 0 && y < V ? l[(size_t)t * V + y] : 0.0;
    }
    comm_allreduce(m->tp_host, sums, 2 * (size_t)T, COMM_F64, COMM_SUM);
    for (int t = 0; t < T; t++) {
        float *row = l + (size_t)t * V;
        if (targets[t] < 0) {
            m->host_loss[t] = 0.0f;
            for (int j = 0; j < V; j++)
                row[j] = 0.0f;
            continue;
        }
        const double lse = red[t] + log(sums[t]);
        m->host_loss[t] = (float)(lse - sums[T + t]);
        for (int j = 0; j < V; j++)
            row[j] = (float)(grad_scale * exp((double)row[j] - lse));
        const int32_t y = targets[t] - v0;
        if (y >= 0 && y < V)
            row[y] -= grad_scale;
    }
    dlogits_from_host(m, l, (size_t)T * V);
}

void model_cross_entropy(model_t *m, const int32_t *targets, float grad_scale)
{
    if (m->tp_size > 1) {
        cross_entropy_tp(m, targets, grad_scale);
        return;
    }
    const ops_t *o = m->ops;
    o->cross_entropy(m->token_loss, m->dlogits, m->logits, m->targets, m->T, m->mc.vocab_size, grad_scale);
    o->to_host(m->host_loss, m->token_loss, (size_t)m->T * sizeof(float));
}
