/* Cross-entropy of the logits rows against the targets, with its gradient.
 * The CPU twin is kernels/cpu/cross_entropy.c.
 *
 * Parallel decomposition, and why every result is the same on every run:
 *
 *  - cross_entropy: one block per row: one pass of per-thread online max and
 *    sum of exponentials, combined by fixed-tree block reductions, then one
 *    pass writing the gradient. Rows are independent. The split of a row
 *    among threads depends on V and on the row's address mod 16, so the
 *    loss bits are reproducible for the same buffers (as every run has).
 */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "cuda_rows.cuh"

#include <assert.h>
#include <math.h>

namespace {

/* ---- cross-entropy ---- */

constexpr int CE_THREADS = 512;

/* Online softmax statistics: m the running max, s = sum exp(x - m). A
 * -inf logit adds nothing (exp(-inf - m) with m = -inf would be NaN); NaN
 * is never > m and so reaches s, making the loss NaN as on the CPU. */
__device__ __forceinline__ void online_add(float &m, float &s, float x)
{
    if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
    } else if (x != -INFINITY) {
        s += expf(x - m);
    }
}

__device__ __forceinline__ float ce_grad(float x, float rl, bool is_target, float grad_scale)
{
    const float p = expf(x - rl);
    return grad_scale * (is_target ? p - 1.0f : p);
}

/* No __restrict__ and no read-only-cache loads: dl may alias lg. Every
 * read of the row (including lg[y]) happens before the block reductions'
 * barriers, and after them each thread reads an element just before writing
 * the same element. */
template <typename S>
__global__ void __launch_bounds__(CE_THREADS)
    k_cross_entropy(float *loss, S *dl, const S *lg, const int32_t *targets, int V, float grad_scale)
{
    __shared__ float sh[32];
    constexpr int W = VEC_OF<S>;
    const int t = blockIdx.x;
    const S *l = lg + (size_t)t * V;
    S *d = dl + (size_t)t * V;
    const int y = targets[t];
    if (y < 0) { /* uniform over the block: no barrier is skipped by some threads only */
        for (int j = threadIdx.x; j < V; j += blockDim.x)
            d[j] = from_f32<S>(0.0f);
        if (threadIdx.x == 0)
            loss[t] = 0.0f;
        return;
    }
    if (y >= V) { /* a caller bug (the CPU twin asserts it): fail the stream loudly */
        assert(y < V);
        __trap();
    }
    const float ly = to_f32(l[y]);

    /* Scalar head up to the first 16-byte boundary of the row, packs, tail. */
    int head = (int)(((16u - ((unsigned)(uintptr_t)l & 15u)) & 15u) / sizeof(S));
    head = head < V ? head : V;
    const int npacks = (V - head) / W;
    const int tail0 = head + npacks * W;

    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < head; j += blockDim.x)
        online_add(m, s, to_f32(l[j]));
    for (int c = threadIdx.x; c < npacks; c += blockDim.x) {
        const Pack<S, W> a = pack_load<S, W>(l + head + (size_t)c * W);
#pragma unroll
        for (int k = 0; k < W; k++)
            online_add(m, s, to_f32(a.e[k]));
    }
    for (int j = tail0 + threadIdx.x; j < V; j += blockDim.x)
        online_add(m, s, to_f32(l[j]));

    const float M = block_max(m, sh);
    const float part = m == -INFINITY ? 0.0f : s * expf(m - M);
    const float sum = block_sum(part, sh);
    const double lse = (double)M + log((double)sum);
    if (threadIdx.x == 0)
        loss[t] = (float)(lse - (double)ly);
    const float rl = (float)lse;

    /* Packs only when dl's row shares lg's alignment (always when aliased). */
    if ((((uintptr_t)d - (uintptr_t)l) & 15u) == 0) {
        for (int j = threadIdx.x; j < head; j += blockDim.x)
            d[j] = from_f32<S>(ce_grad(to_f32(l[j]), rl, j == y, grad_scale));
        for (int c = threadIdx.x; c < npacks; c += blockDim.x) {
            const int j0 = head + c * W;
            Pack<S, W> a = pack_load<S, W>(l + j0);
#pragma unroll
            for (int k = 0; k < W; k++)
                a.e[k] = from_f32<S>(ce_grad(to_f32(a.e[k]), rl, j0 + k == y, grad_scale));
            pack_store(d + j0, a);
        }
        for (int j = tail0 + threadIdx.x; j < V; j += blockDim.x)
            d[j] = from_f32<S>(ce_grad(to_f32(l[j]), rl, j == y, grad_scale));
    } else {
        for (int j = threadIdx.x; j < V; j += blockDim.x)
            d[j] = from_f32<S>(ce_grad(to_f32(l[j]), rl, j == y, grad_scale));
    }
}

} // namespace

template <typename S>
void cu_cross_entropy(float *loss, S *dlogits, const S *logits, const int32_t *targets, int T, int V,
                      float grad_scale)
{
    if (T <= 0 || V <= 0)
        return;
    k_cross_entropy<<<T, CE_THREADS, 0, cuda_stream()>>>(loss, dlogits, logits, targets, V, grad_scale);
    CHECK_CUDA_LAUNCH();
}

/* The two storage types of fb_act on CUDA. */
template void cu_cross_entropy<__nv_bfloat16>(float *, __nv_bfloat16 *, const __nv_bfloat16 *, const int32_t *, int,
                                              int, float);
template void cu_cross_entropy<__half>(float *, __half *, const __half *, const int32_t *, int, int, float);
