/* MoE router (softmax, top-k, backward) and the token permutation and
 * weighted combine around the experts. Reference: kernels/cpu/cpu_router.c
 * and kernels/cpu/cpu_permute.c.
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
 *  - Row ops (permute, combine): one block per destination row (gather, so
 *    no atomics and a deterministic order), 16-byte vector loads and stores
 *    of 8 elements when D % 8 == 0 and every base pointer is 16-byte aligned
 *    (then every row is), scalar otherwise. Sums are fp32 and rounded to S
 *    once per element.
 *  - combine_bwd: one warp per (t, k): it writes deo[r] for its row and
 *    reduces dot(dy[t], eo[r]) with shuffles. Like the CPU twin it writes
 *    only rows that some kept (t, k) names; the op is not told R, and the
 *    plan (moe_plan_build) names every row below R exactly once.
 *  - permute_fwd: a row whose source token is negative is padding and is
 *    written as zeros, as in the CPU twin.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

enum { ROUTER_MAX_E = 256, ROWS_PER_BLOCK = 8 /* warps of 32 */ };

/* ---- vector access: V = 8 (16 bytes of a 2-byte S) or 1 ---- */

template <typename S, int V> __device__ __forceinline__ void load_f32(float (&f)[V], const S *p)
{
    if constexpr (V == 8) {
        static_assert(sizeof(S) == 2, "8-wide vectors are 16 bytes of a 2-byte type");
        const int4 raw = *reinterpret_cast<const int4 *>(p);
        S e[8];
        memcpy(e, &raw, sizeof raw);
#pragma unroll
        for (int i = 0; i < 8; i++)
            f[i] = to_f32(e[i]);
    } else {
#pragma unroll
        for (int i = 0; i < V; i++)
            f[i] = to_f32(p[i]);
    }
}

template <typename S, int V> __device__ __forceinline__ void store_f32(S *p, const float (&f)[V])
{
    if constexpr (V == 8) {
        S e[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            e[i] = from_f32<S>(f[i]);
        int4 raw;
        memcpy(&raw, e, sizeof raw);
        *reinterpret_cast<int4 *>(p) = raw;
    } else {
#pragma unroll
        for (int i = 0; i < V; i++)
            p[i] = from_f32<S>(f[i]);
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Threads for a block that walks nvec vectors of one row. */
static unsigned row_threads(int nvec)
{
    unsigned t = ((unsigned)nvec + 31u) / 32u * 32u;
    return t < 32u ? 32u : (t > 256u ? 256u : t);
}

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
    CUDA_CHECK_LAUNCH();
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
    CUDA_CHECK_LAUNCH();
}

/* ---- permutation ---- */

/* Block r: xp[r] = x[row_token[r]], zeros for padding (negative token). */
template <typename S, int V> __global__ void permute_fwd_kernel(S *xp, const S *x, const int32_t *row_token, int D)
{
    const size_t r = blockIdx.x;
    const int tok = row_token[r];
    const int nvec = D / V;
    S *dst = xp + r * D;
    float f[V];
    for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
        if (tok >= 0) {
            load_f32<S, V>(f, x + (size_t)tok * D + (size_t)j * V);
        } else {
#pragma unroll
            for (int i = 0; i < V; i++)
                f[i] = 0.0f;
        }
        store_f32<S, V>(dst + (size_t)j * V, f);
    }
}

template <typename S> void cu_permute_fwd(S *xp, const S *x, const int32_t *row_token, int R, int D)
{
    if (R <= 0 || D <= 0)
        return;
    cudaStream_t st = cuda_stream();
    if (D % 8 == 0 && aligned16(xp) && aligned16(x))
        permute_fwd_kernel<S, 8><<<(unsigned)R, row_threads(D / 8), 0, st>>>(xp, x, row_token, D);
    else
        permute_fwd_kernel<S, 1><<<(unsigned)R, row_threads(D), 0, st>>>(xp, x, row_token, D);
    CUDA_CHECK_LAUNCH();
}

/* Block t: dx[t] += sum over kept k of dxp[token_rows[t,k]]. */
template <typename S, int V>
__global__ void permute_bwd_kernel(S *dx, const S *dxp, const int32_t *token_rows, int K, int D)
{
    const size_t t = blockIdx.x;
    const int32_t *rows = token_rows + t * K;
    const int nvec = D / V;
    S *d = dx + t * D;
    float acc[V], f[V];
    for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
        load_f32<S, V>(acc, d + (size_t)j * V);
        for (int k = 0; k < K; k++) {
            const int r = rows[k];
            if (r < 0)
                continue;
            load_f32<S, V>(f, dxp + (size_t)r * D + (size_t)j * V);
#pragma unroll
            for (int i = 0; i < V; i++)
                acc[i] += f[i];
        }
        store_f32<S, V>(d + (size_t)j * V, acc);
    }
}

template <typename S> void cu_permute_bwd(S *dx, const S *dxp, const int32_t *token_rows, int T, int K, int D)
{
    if (T <= 0 || D <= 0 || K <= 0)
        return;
    cudaStream_t st = cuda_stream();
    if (D % 8 == 0 && aligned16(dx) && aligned16(dxp))
        permute_bwd_kernel<S, 8><<<(unsigned)T, row_threads(D / 8), 0, st>>>(dx, dxp, token_rows, K, D);
    else
        permute_bwd_kernel<S, 1><<<(unsigned)T, row_threads(D), 0, st>>>(dx, dxp, token_rows, K, D);
    CUDA_CHECK_LAUNCH();
}

/* ---- combine ---- */

/* Block t: y[t] = sum over kept k of w[t,k] * eo[token_rows[t,k]]. */
template <typename S, int V>
__global__ void combine_fwd_kernel(S *y, const S *eo, const int32_t *token_rows, const float *w, int K, int D)
{
    const size_t t = blockIdx.x;
    const int32_t *rows = token_rows + t * K;
    const float *wt = w + t * K;
    const int nvec = D / V;
    float acc[V], f[V];
    for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
#pragma unroll
        for (int i = 0; i < V; i++)
            acc[i] = 0.0f;
        for (int k = 0; k < K; k++) {
            const int r = rows[k];
            if (r < 0)
                continue;
            const float wk = wt[k];
            load_f32<S, V>(f, eo + (size_t)r * D + (size_t)j * V);
#pragma unroll
            for (int i = 0; i < V; i++)
                acc[i] += wk * f[i];
        }
        store_f32<S, V>(y + t * D + (size_t)j * V, acc);
    }
}

template <typename S>
void cu_combine_fwd(S *y, const S *eo, const int32_t *token_rows, const float *w, int T, int K, int D)
{
    if (T <= 0 || D <= 0)
        return;
    cudaStream_t st = cuda_stream();
    if (D % 8 == 0 && aligned16(y) && aligned16(eo))
        combine_fwd_kernel<S, 8><<<(unsigned)T, row_threads(D / 8), 0, st>>>(y, eo, token_rows, w, K, D);
    else
        combine_fwd_kernel<S, 1><<<(unsigned)T, row_threads(D), 0, st>>>(y, eo, token_rows, w, K, D);
    CUDA_CHECK_LAUNCH();
}

/* Warp per (t, k): deo[r] = w[t,k] * dy[t], dw[t,k] = dot(dy[t], eo[r]);
 * dw[t,k] = 0 for a dropped assignment. */
template <typename S, int V>
__global__ void combine_bwd_kernel(S *deo, float *dw, const S *dy, const S *eo, const int32_t *token_rows,
                                   const float *w, size_t TK, int K, int D)
{
    const int lane = threadIdx.x & 31;
    const size_t tk = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (tk >= TK)
        return; /* tk is the same for the whole warp */
    const int r = token_rows[tk];
    if (r < 0) {
        if (lane == 0)
            dw[tk] = 0.0f;
        return;
    }
    const size_t t = tk / (size_t)K;
    const float wk = w[tk];
    const S *g = dy + t * D;
    const S *e = eo + (size_t)r * D;
    S *de = deo + (size_t)r * D;
    const int nvec = D / V;
    float s = 0.0f, gf[V], ef[V], of[V];
    for (int j = lane; j < nvec; j += 32) {
        load_f32<S, V>(gf, g + (size_t)j * V);
        load_f32<S, V>(ef, e + (size_t)j * V);
#pragma unroll
        for (int i = 0; i < V; i++) {
            of[i] = wk * gf[i];
            s += gf[i] * ef[i];
        }
        store_f32<S, V>(de + (size_t)j * V, of);
    }
    s = warp_sum(s);
    if (lane == 0)
        dw[tk] = s;
}

template <typename S>
void cu_combine_bwd(S *deo, float *dw, const S *dy, const S *eo, const int32_t *token_rows, const float *w, int T,
                    int K, int D)
{
    if (T <= 0 || K <= 0)
        return;
    /* D == 0 still runs: dw must be written (an empty dot is 0) */
    const size_t TK = (size_t)T * (size_t)K;
    const unsigned threads = 32 * ROWS_PER_BLOCK;
    const unsigned blocks = (unsigned)((TK + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    cudaStream_t st = cuda_stream();
    if (D % 8 == 0 && aligned16(deo) && aligned16(dy) && aligned16(eo))
        combine_bwd_kernel<S, 8><<<blocks, threads, 0, st>>>(deo, dw, dy, eo, token_rows, w, TK, K, D);
    else
        combine_bwd_kernel<S, 1><<<blocks, threads, 0, st>>>(deo, dw, dy, eo, token_rows, w, TK, K, D);
    CUDA_CHECK_LAUNCH();
}

/* ---- instantiations ---- */

#define FB_INSTANTIATE(S)                                                                                      \
    template void cu_router_bwd<S>(S *, const float *, const float *, const int32_t *, const float *,         \
                                   const float *, const float *, float, int, int, int);                       \
    template void cu_permute_fwd<S>(S *, const S *, const int32_t *, int, int);                                \
    template void cu_permute_bwd<S>(S *, const S *, const int32_t *, int, int, int);                           \
    template void cu_combine_fwd<S>(S *, const S *, const int32_t *, const float *, int, int, int);           \
    template void cu_combine_bwd<S>(S *, float *, const S *, const S *, const int32_t *, const float *, int,  \
                                    int, int);
FB_INSTANTIATE(__nv_bfloat16)
FB_INSTANTIATE(__half)
#undef FB_INSTANTIATE
