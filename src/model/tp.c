/* Tensor parallelism's two conjugate operators (docs/parallel.md): the
 * row-parallel matmul whose partial products are summed over the tp group
 * in the forward, and the sum of the input gradient of a column-parallel
 * block in the backward. Without tp both are the single-rank code. Also
 * the sum of d(k), d(v) over the ranks sharing a replicated kv head. */
#include <math.h>

#include "model/model_impl.h"
#include "util/error.h"

/* Sums x [n] over `c` (the tp group or a kv group) in place. */
static void act_allreduce(model_t *m, comm_t *c, fb_act *x, size_t n)
{
    const ops_t *o = m->ops;
    if (!m->tp_wide) {
        comm_allreduce(c, x, n, model_act_comm_dtype(m), COMM_SUM);
        return;
    }
    /* 16-bit activations in host memory (run.backend cpu16): MPI cannot
     * sum bf16/fp16, so the partial sums are widened (exactly), summed in
     * fp32 and rounded once, as NCCL's fp32-accumulating reduction of two
     * 16-bit inputs does; every rank gets the same fp32 sum, hence the same
     * rounded result. */
    FB_ASSERT(n <= (size_t)m->max_tokens * (size_t)m->mc.hidden_size);
    o->act_to_f32(m->tp_wide, x, n);
    comm_allreduce(c, m->tp_wide, n, COMM_F32, COMM_SUM);
    o->to_act(x, m->tp_wide, n);
}

void model_tp_allreduce(model_t *m, fb_act *x, size_t n)
{
    if (m->tp_size == 1 || n == 0)
        return;
    act_allreduce(m, m->tp, x, n);
}

/* Each sharer's d(k), d(v) come from its own query heads only; their sum
 * over the sharers is the whole head's, so that the weight gradients
 * d(k)^T h are equal on every replica (docs/parallel.md). */
void model_kv_allreduce(model_t *m, fb_act *x, size_t n)
{
    if (m->kv && n > 0)
        act_allreduce(m, m->kv, x, n);
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
    FB_ASSERT(M == m->T && N == m->mc.hidden_size);
    o->matmul(m->dtmp, a, w, M, N, K, 0, 1, 0.0f);
    model_tp_reduce_add(m, y, m->dtmp);
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
    /* under sequence parallelism the sum is a reduce-scatter into this
     * rank's token shard of the layer input */
    fb_act *full = m->sp ? m->spg : x;
    o->zero(full, ACT_BYTES(m, (size_t)T * D));
    if (n > 0) {
        o->to_backend(m->tp_ids, m->tp_hids, (size_t)n * sizeof(int32_t));
        o->to_backend(m->tp_row_token, m->tp_hrow_token, (size_t)n * sizeof(int32_t));
        o->to_backend(m->tp_token_rows, m->tp_htoken_rows, (size_t)T * sizeof(int32_t));
        o->embedding_fwd(m->dxp, m->tp_ids, m->w.embed, n, D);
        o->permute_bwd(full, m->dxp, m->tp_token_rows, T, 1, D);
    }
    if (m->sp)
        model_sp_reduce_scatter(m, full, x);
    else
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
    /* the gradient rows of this rank's tokens, in token order (from every
     * rank's shard under sequence parallelism) */
    const fb_act *dx = model_sp_gather(m, m->dx);
    if (m->tp_nrows > 0) {
        o->permute_fwd(m->dxp, dx, m->tp_row_token, m->tp_nrows, D);
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

/* ---- sequence parallelism (docs/parallel.md, "Sequence parallelism") ----
 * Between the tensor-parallel regions rank r of the tp group holds rows
 * [off_r, off_r + n_r) of the micro-batch's T tokens, n_r = T / tp, one
 * more on the first T % tp ranks: every rank knows T, so every rank knows
 * every shard's size and no size exchange is needed. */

static int shard_off(int T, int tp, int r) { return r * (T / tp) + (r < T % tp ? r : T % tp); }
static int shard_rows(int T, int tp, int r) { return T / tp + (r < T % tp); }

int model_sp_rows_of(const model_t *m, int T) { return m->sp ? shard_rows(T, m->tp_size, m->tp_rank) : T; }
int model_sp_rows(const model_t *m) { return model_sp_rows_of(m, m->T); }
int model_sp_off(const model_t *m) { return m->sp ? shard_off(m->T, m->tp_size, m->tp_rank) : 0; }

/* Every rank's piece of T rows of `cols` elements, for the v-collectives. */
static void sp_pieces(model_t *m, size_t cols)
{
    for (int r = 0; r < m->tp_size; r++) {
        m->sp_counts[r] = (size_t)shard_rows(m->T, m->tp_size, r) * cols;
        m->sp_displs[r] = (size_t)shard_off(m->T, m->tp_size, r) * cols;
    }
}

void model_sp_gather_to(model_t *m, const fb_act *shard, fb_act *full)
{
    FB_ASSERT(m->sp);
    sp_pieces(m, (size_t)m->mc.hidden_size);
    comm_allgatherv(m->tp, shard, m->sp_counts[m->tp_rank], full, m->sp_counts, m->sp_displs,
                    model_act_comm_dtype(m));
}

fb_act *model_sp_gather(model_t *m, const fb_act *shard)
{
    if (!m->sp)
        return (fb_act *)shard;
    model_sp_gather_to(m, shard, m->spg);
    return m->spg;
}

void model_sp_reduce_scatter(model_t *m, const fb_act *partial, fb_act *shard)
{
    FB_ASSERT(m->sp);
    sp_pieces(m, (size_t)m->mc.hidden_size);
    comm_reduce_scatter(m->tp, partial, shard, m->sp_counts, model_act_comm_dtype(m), COMM_SUM);
}

void model_tp_reduce_add(model_t *m, fb_act *y, fb_act *partial)
{
    const size_t D = (size_t)m->mc.hidden_size;
    if (m->sp) {
        model_sp_reduce_scatter(m, partial, m->sps);
        m->ops->act_axpy(y, m->sps, (size_t)model_sp_rows(m) * D, 1.0f);
        return;
    }
    model_tp_allreduce(m, partial, (size_t)m->T * D);
    m->ops->act_axpy(y, partial, (size_t)m->T * D, 1.0f);
}

fb_act *model_tp_reduce_input_grad(model_t *m, fb_act *partial)
{
    if (!m->sp) {
        model_tp_allreduce(m, partial, (size_t)m->T * m->mc.hidden_size);
        return partial;
    }
    model_sp_reduce_scatter(m, partial, m->sps);
    return m->sps;
}

void model_rmsnorm_bwd(model_t *m, float *dw, const fb_act *dout, const fb_act *x, const fb_act *w,
                       const float *rstd)
{
    const ops_t *o = m->ops;
    const int D = m->mc.hidden_size;
    if (!m->sp) {
        o->rmsnorm_bwd(m->dx, dw, dout, x, w, rstd, m->T, D);
        return;
    }
    /* each rank's shard gives part of the weight's gradient: their tp sum,
     * added to the micro-batches' sum so far, keeps the replicated weight's
     * gradient the same on every rank */
    o->zero(m->sp_dnorm, (size_t)D * sizeof(float));
    o->rmsnorm_bwd(m->dx, m->sp_dnorm, dout, x, w, rstd, model_sp_rows(m), D);
    model_tp_allreduce_f32(m, m->sp_dnorm, (size_t)D);
    o->axpy(dw, m->sp_dnorm, (size_t)D, 1.0f);
}
