/* The token permutation into expert order and the weighted combine back,
 * forward and backward. The CPU twin is kernels/cpu/permute.c.
 *
 * Design:
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
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

enum { ROWS_PER_BLOCK = 8 /* warps of 32 */ };

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
    CHECK_CUDA_LAUNCH();
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
    CHECK_CUDA_LAUNCH();
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
    CHECK_CUDA_LAUNCH();
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
    CHECK_CUDA_LAUNCH();
}

/* ---- instantiations ---- */

#define FB_INSTANTIATE(S)                                                                                      \
    template void cu_permute_fwd<S>(S *, const S *, const int32_t *, int, int);                                \
    template void cu_permute_bwd<S>(S *, const S *, const int32_t *, int, int, int);                           \
    template void cu_combine_fwd<S>(S *, const S *, const int32_t *, const float *, int, int, int);           \
    template void cu_combine_bwd<S>(S *, float *, const S *, const S *, const int32_t *, const float *, int,  \
                                    int, int);
FB_INSTANTIATE(__nv_bfloat16)
FB_INSTANTIATE(__half)
#undef FB_INSTANTIATE
