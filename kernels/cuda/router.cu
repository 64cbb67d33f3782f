/* The MoE router: softmax over the experts, top-k, and the backward. The
 * CPU twin is kernels/cpu/router.c.
 *
 * Design:
 *  - Router: one warp per token row, E <= 256, so a lane holds at most 8
 *    logits in registers (NS = ceil(E/32) slots, a template parameter, so
 *    E = 8 costs one slot). Top-k is K passes of a warp arg-max over the
 *    experts not yet taken, ordered by (prob descending, index ascending),
 *    which is the CPU's "strict > keeps the lower index". The softmax sum,
 *    the renormalising sum and the backward's sum_f p_f dp_f are taken in
 *    double like the CPU's; only the summation order differs. The k-th choice
 *    is kept by lane k % 32 in slot k / 32 (indexed with compile-time slots,
 *    so the arrays stay in registers), and written once at the end.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

enum { ROUTER_MAX_E = 256, ROWS_PER_BLOCK = 8 /* warps of 32 */ };

/* ---- router forward ---- */

/* The largest untaken probability of the row and its expert (*idx), the
 * same in every lane, ordered by (prob descending, index ascending). */
template <int NS>
__device__ __forceinline__ float warp_argmax_untaken(const float (&v)[NS], unsigned taken, int lane, int E, int *idx)
{
    /* this lane's best; its slots ascend in index, so the strict > keeps the
     * lower index on ties */
    float bv = 0.0f;
    int bi = -1;
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int e = lane + 32 * i;
        if (e < E && !((taken >> i) & 1u) && (bi < 0 || v[i] > bv)) {
            bv = v[i];
            bi = e;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
            bv = ov;
            bi = oi;
        }
    }
    /* with NaN probabilities the order is not total and lanes could
     * disagree; lane 0's answer (a valid untaken expert whenever one is
     * left, which K <= E guarantees) is everyone's */
    *idx = __shfl_sync(0xffffffffu, bi, 0);
    return __shfl_sync(0xffffffffu, bv, 0);
}

template <int NS>
__global__ void router_fwd_kernel(float *probs, float *lse, int32_t *topk_idx, float *topk_w,
                                  const float *logits, int T, int E, int K)
{
    const int lane = threadIdx.x & 31;
    const long long t = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (t >= T)
        return; /* t is the same for the whole warp */
    const float *l = logits + (size_t)t * E;
    float *prow = probs + (size_t)t * E;

    float v[NS];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int e = lane + 32 * i;
        v[i] = e < E ? l[e] : -INFINITY;
        m = fmaxf(m, v[i]);
    }
    m = warp_max(m);
    double sum = 0.0;
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int e = lane + 32 * i;
        v[i] = e < E ? expf(v[i] - m) : 0.0f;
        sum += v[i];
    }
    sum = warp_sum_d(sum);
    const float inv = (float)(1.0 / sum);
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int e = lane + 32 * i;
        v[i] *= inv;
        if (e < E)
            prow[e] = v[i];
    }
    if (lane == 0)
        lse[t] = (float)((double)m + log(sum));

    unsigned taken = 0; /* bit i: this lane's slot i is chosen */
    float sel_p[NS];
    int sel_i[NS];
#pragma unroll
    for (int i = 0; i < NS; i++) {
        sel_p[i] = 0.0f;
        sel_i[i] = 0;
    }
    double wsum = 0.0;
    /* choice k = 32 kb + kk; kb is unrolled so sel_* stay in registers */
#pragma unroll
    for (int kb = 0; kb < NS; kb++) {
        for (int kk = 0; kk < 32; kk++) {
            if (kb * 32 + kk >= K)
                break;
            int bi;
            const float bv = warp_argmax_untaken<NS>(v, taken, lane, E, &bi);
            if (lane == (bi & 31))
                taken |= 1u << (bi >> 5);
            wsum += (double)bv;
            if (lane == kk) {
                sel_p[kb] = bv;
                sel_i[kb] = bi;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int k = lane + 32 * i;
        if (k < K) {
            topk_idx[(size_t)t * K + k] = sel_i[i];
            topk_w[(size_t)t * K + k] = (float)((double)sel_p[i] / wsum);
        }
    }
}

static void router_check(int E, int K)
{
    if (E < 1 || E > ROUTER_MAX_E || K < 1 || K > E)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "cuda router",
                     "needs 1 <= K <= E <= 256 (one warp per row, 8 experts a lane)");
}

void cu_router_fwd(float *probs, float *lse, int32_t *topk_idx, float *topk_w, const float *logits, int T, int E,
                   int K)
{
    if (T <= 0)
        return;
    router_check(E, K);
    const unsigned blocks = (unsigned)(((long long)T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    const unsigned threads = 32 * ROWS_PER_BLOCK;
    cudaStream_t st = cuda_stream();
    if (E <= 32)
        router_fwd_kernel<1><<<blocks, threads, 0, st>>>(probs, lse, topk_idx, topk_w, logits, T, E, K);
    else if (E <= 64)
        router_fwd_kernel<2><<<blocks, threads, 0, st>>>(probs, lse, topk_idx, topk_w, logits, T, E, K);
    else if (E <= 128)
        router_fwd_kernel<4><<<blocks, threads, 0, st>>>(probs, lse, topk_idx, topk_w, logits, T, E, K);
    else
        router_fwd_kernel<8><<<blocks, threads, 0, st>>>(probs, lse, topk_idx, topk_w, logits, T, E, K);
    CHECK_CUDA_LAUNCH();
}

/* ---- router backward ----
 * Per row, with Ssum the sum of the chosen probs and w_k = p_{i_k} / Ssum:
 *   dp_e = aux_dprob[e] + sum over k with i_k = e of (dw_k - sum_j dw_j w_j) / Ssum
 *   dlogits_e = p_e (dp_e - sum_f p_f dp_f) + z_scale lse p_e */

template <typename S, int NS>
__global__ void router_bwd_kernel(S *dlogits, const float *probs, const float *lse, const int32_t *topk_idx,
                                  const float *topk_w, const float *dtopk_w, const float *aux_dprob, float z_scale,
                                  int T, int E, int K)
{
    const int lane = threadIdx.x & 31;
    const long long t = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (t >= T)
        return;
    const float *p = probs + (size_t)t * E;
    const int32_t *idx = topk_idx + (size_t)t * K;
    const float *w = topk_w + (size_t)t * K;
    const float *dw = dtopk_w + (size_t)t * K;

    float ssum = 0.0f, wdw = 0.0f;
    for (int k = lane; k < K; k += 32) {
        ssum += p[idx[k]];
        wdw += dw[k] * w[k];
    }
    ssum = warp_sum(ssum);
    wdw = warp_sum(wdw);

    float pv[NS], dp[NS];
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int e = lane + 32 * i;
        pv[i] = e < E ? p[e] : 0.0f;
        dp[i] = e < E ? aux_dprob[e] : 0.0f;
    }
    /* each chosen expert gets its term from the lane that owns it */
    for (int k = 0; k < K; k++) {
        const int e = idx[k];
        if (lane == (e & 31)) {
            const float add = (dw[k] - wdw) / ssum;
#pragma unroll
            for (int i = 0; i < NS; i++)
                if (i == (e >> 5))
                    dp[i] += add;
        }
    }
    double pdp = 0.0;
#pragma unroll
    for (int i = 0; i < NS; i++)
        pdp += (double)pv[i] * (double)dp[i];
    pdp = warp_sum_d(pdp);
    const float zl = z_scale * lse[t];
    S *dl = dlogits + (size_t)t * E;
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int e = lane + 32 * i;
        if (e < E)
            dl[e] = from_f32<S>(pv[i] * (dp[i] - (float)pdp) + zl * pv[i]);
    }
}

template <typename S>
void cu_router_bwd(S *dlogits, const float *probs, const float *lse, const int32_t *topk_idx, const float *topk_w,
                   const float *dtopk_w, const float *aux_dprob, float z_scale, int T, int E, int K)
{
    if (T <= 0)
        return;
    router_check(E, K);
    const unsigned blocks = (unsigned)(((long long)T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    const unsigned threads = 32 * ROWS_PER_BLOCK;
    cudaStream_t st = cuda_stream();
    if (E <= 32)
        router_bwd_kernel<S, 1><<<blocks, threads, 0, st>>>(dlogits, probs, lse, topk_idx, topk_w, dtopk_w,
                                                            aux_dprob, z_scale, T, E, K);
    else if (E <= 64)
        router_bwd_kernel<S, 2><<<blocks, threads, 0, st>>>(dlogits, probs, lse, topk_idx, topk_w, dtopk_w,
                                                            aux_dprob, z_scale, T, E, K);
    else if (E <= 128)
        router_bwd_kernel<S, 4><<<blocks, threads, 0, st>>>(dlogits, probs, lse, topk_idx, topk_w, dtopk_w,
                                                            aux_dprob, z_scale, T, E, K);
    else
        router_bwd_kernel<S, 8><<<blocks, threads, 0, st>>>(dlogits, probs, lse, topk_idx, topk_w, dtopk_w,
                                                            aux_dprob, z_scale, T, E, K);
    CHECK_CUDA_LAUNCH();
}

/* The two storage types of fb_act on CUDA (the forward reads fp32 logits). */
template void cu_router_bwd<__nv_bfloat16>(__nv_bfloat16 *, const float *, const float *, const int32_t *,
                                           const float *, const float *, const float *, float, int, int, int);
template void cu_router_bwd<__half>(__half *, const float *, const float *, const int32_t *, const float *,
                                    const float *, const float *, float, int, int, int);
