/* Rotary position embedding of q and k, forward and backward (the
 * transpose). The CPU twin is kernels/cpu/rope.c.
 *
 * Parallel decomposition, and why every result is the same on every run:
 *
 *  - rope: one thread per (row, frequency), looping over heads; a map.
 */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

#include <math.h>

namespace {

/* ---- RoPE ---- */

/* Inverse frequencies travel in the kernel's parameters, computed on the
 * host with the very expression (and libm powf) of the CPU twin. */
constexpr int ROPE_MAX_HALF = 512;
struct RopeFreq {
    float f[ROPE_MAX_HALF];
};

/* One thread per (row t, frequency i), over all heads of the row. sincosf
 * is the accurate one: angles reach pos * 1 = 32k+ rad, where the fast
 * intrinsics' range reduction is far off. dir = -1 applies the transpose. */
template <typename S>
__global__ void k_rope(S *x, const int32_t *pos, int T, int nheads, int hd, float theta, float dir,
                       const RopeFreq freq)
{
    const int half = hd / 2;
    const size_t n = (size_t)T * half;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
        const int t = (int)(idx / half), i = (int)(idx % half);
        /* Beyond the table (head_dim > 2*ROPE_MAX_HALF): pow in double,
         * rounded once, is powf's correctly rounded value but for rare ties. */
        const float f = half <= ROPE_MAX_HALF
                            ? freq.f[i]
                            : 1.0f / (float)pow((double)theta, (double)((float)(2 * i) / (float)hd));
        const float a = (float)pos[t] * f;
        float sn, cs;
        sincosf(a, &sn, &cs);
        sn *= dir;
        S *row = x + (size_t)t * nheads * hd + i;
        for (int h = 0; h < nheads; h++) {
            S *xh = row + (size_t)h * hd;
            const float x1 = to_f32(xh[0]), x2 = to_f32(xh[half]);
            xh[0] = from_f32<S>(__fsub_rn(__fmul_rn(x1, cs), __fmul_rn(x2, sn)));
            xh[half] = from_f32<S>(__fadd_rn(__fmul_rn(x2, cs), __fmul_rn(x1, sn)));
        }
    }
}

template <typename S> void rope_launch(S *x, const int32_t *pos, int T, int nheads, int hd, float theta, float dir)
{
    const int half = hd / 2;
    if (T <= 0 || nheads <= 0 || half <= 0)
        return;
    RopeFreq freq;
    for (int i = 0; i < half && i < ROPE_MAX_HALF; i++)
        freq.f[i] = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
    for (int i = half; i < ROPE_MAX_HALF; i++)
        freq.f[i] = 0.0f; /* unused; defined bytes for the parameter copy */
    const unsigned threads = 256;
    k_rope<<<cuda_blocks_for((size_t)T * half, threads), threads, 0, cuda_stream()>>>(x, pos, T, nheads, hd, theta,
                                                                                       dir, freq);
    CHECK_CUDA_LAUNCH();
}

} // namespace

template <typename S> void cu_rope_fwd(S *x, const int32_t *pos, int T, int nheads, int hd, float theta)
{
    rope_launch(x, pos, T, nheads, hd, theta, 1.0f);
}

template <typename S> void cu_rope_bwd(S *dx, const int32_t *pos, int T, int nheads, int hd, float theta)
{
    rope_launch(dx, pos, T, nheads, hd, theta, -1.0f);
}

/* The two storage types of fb_act on CUDA. */
template void cu_rope_fwd<__nv_bfloat16>(__nv_bfloat16 *, const int32_t *, int, int, int, float);
template void cu_rope_fwd<__half>(__half *, const int32_t *, int, int, int, float);
template void cu_rope_bwd<__nv_bfloat16>(__nv_bfloat16 *, const int32_t *, int, int, int, float);
template void cu_rope_bwd<__half>(__half *, const int32_t *, int, int, int, float);
