/* RMSNorm over rows of the residual stream, forward and backward. The CPU
 * twin is kernels/cpu/rmsnorm.c.
 *
 * Parallel decomposition, and why every result is the same on every run:
 *
 *  - rmsnorm_fwd: one block per row; the row's sum of squares (in double,
 *    as on the CPU) is a fixed shuffle/shared-memory tree whose shape and
 *    element-to-thread mapping depend on D only, not on pointer alignment.
 *  - rmsnorm_bwd: block b owns the contiguous rows [b*rpb, (b+1)*rpb), with
 *    the block count a function of T only. Per row it reduces the dot product
 *    (fixed tree, double), updates dx, and adds each column's dw term into a
 *    per-block accumulator (shared memory, or the block's slice of scratch
 *    when D is too wide) that only the thread owning that column touches, in
 *    row order. A second kernel sums the blocks' partial rows per column in
 *    block order and adds into dw. Fixed shapes throughout, no atomics.
 */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "cuda_rows.cuh"

#include <math.h>

namespace {

/* ---- RMSNorm ---- */

constexpr int RMS_FWD_THREADS = 256;
constexpr int RMS_BWD_THREADS = 512;
/* Row blocks of the backward; a constant, so the dw summation tree depends
 * on T only, never on the device. */
constexpr int RMS_BWD_BLOCKS = 256;

template <typename S>
__global__ void __launch_bounds__(RMS_FWD_THREADS)
    k_rmsnorm_fwd(S *out, float *rstd, const S *x, const S *w, int D, float eps, int packed, int vec)
{
    __shared__ double sh[32];
    constexpr int W = VEC_OF<S>;
    const int t = blockIdx.x;
    const S *xr = x + (size_t)t * D;
    S *o = out + (size_t)t * D;
    double ss = 0.0;
    if (packed) {
        for (int c = threadIdx.x; c < D / W; c += blockDim.x) {
            const Pack<S, W> a = load_any<S, W>(xr + (size_t)c * W, vec);
#pragma unroll
            for (int k = 0; k < W; k++) {
                const double f = to_f32(a.e[k]);
                ss += f * f;
            }
        }
    } else {
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            const double f = to_f32(xr[j]);
            ss += f * f;
        }
    }
    ss = block_sum_d(ss, sh);
    const float r = (float)(1.0 / sqrt(ss / D + (double)eps));
    if (threadIdx.x == 0)
        rstd[t] = r;
    /* out = (x * rstd) * w, as the CPU twin rounds it */
    if (packed) {
        for (int c = threadIdx.x; c < D / W; c += blockDim.x) {
            const Pack<S, W> a = load_any<S, W>(xr + (size_t)c * W, vec), b = load_any<S, W>(w + (size_t)c * W, vec);
            Pack<S, W> y;
#pragma unroll
            for (int k = 0; k < W; k++)
                y.e[k] = from_f32<S>(__fmul_rn(__fmul_rn(to_f32(a.e[k]), r), to_f32(b.e[k])));
            store_any(o + (size_t)c * W, y, vec);
        }
    } else {
        for (int j = threadIdx.x; j < D; j += blockDim.x)
            o[j] = from_f32<S>(__fmul_rn(__fmul_rn(to_f32(xr[j]), r), to_f32(w[j])));
    }
}

/* One column of the backward given the row's r and c:
 *   dx += r w g - x c     dw term (g x r), rounded to fp32 then widened. */
template <typename S>
__device__ __forceinline__ void rms_bwd_col(S &dx, double &acc, S gs, S xs, S ws, float r, float c)
{
    const float g = to_f32(gs), xv = to_f32(xs), wv = to_f32(ws);
    const float upd = __fsub_rn(__fmul_rn(__fmul_rn(r, wv), g), __fmul_rn(xv, c));
    dx = from_f32<S>(__fadd_rn(to_f32(dx), upd));
    acc += (double)__fmul_rn(__fmul_rn(g, xv), r);
}

/* Block b: rows [b*rpb, min(T, (b+1)*rpb)). Column j (or pack q) belongs to
 * one thread for all rows, so acc needs no barriers. acc is dynamic shared
 * memory when acc_smem, else the block's row of `partial`. With packs, the
 * term of column q*W + k lives at acc[k*(D/W) + q]: a warp's threads then
 * touch consecutive doubles (no shared-memory bank conflicts, coalesced in
 * the global fallback); k_rmsnorm_bwd_dw undoes the permutation. */
template <typename S>
__global__ void __launch_bounds__(RMS_BWD_THREADS)
    k_rmsnorm_bwd_rows(S *dx, double *partial, const S *dout, const S *x, const S *w, const float *rstd, int T, int D,
                       int rpb, int packed, int vec, int acc_smem)
{
    extern __shared__ double smem_acc[];
    __shared__ double sh[32];
    constexpr int W = VEC_OF<S>;
    double *acc = acc_smem ? smem_acc : partial + (size_t)blockIdx.x * D;
    for (int j = threadIdx.x; j < D; j += blockDim.x)
        acc[j] = 0.0;
    /* The zeroing above used a linear mapping, the packed path owns entries
     * by pack: make the zeros visible to their owners. */
    __syncthreads();
    const int t0 = blockIdx.x * rpb;
    const int t1 = t0 + rpb < T ? t0 + rpb : T;
    for (int t = t0; t < t1; t++) {
        const S *xr = x + (size_t)t * D, *g = dout + (size_t)t * D;
        S *d = dx + (size_t)t * D;
        double dot = 0.0;
        if (packed) {
            for (int c = threadIdx.x; c < D / W; c += blockDim.x) {
                const size_t o = (size_t)c * W;
                const Pack<S, W> a = load_any<S, W>(g + o, vec), b = load_any<S, W>(w + o, vec),
                                 e = load_any<S, W>(xr + o, vec);
#pragma unroll
                for (int k = 0; k < W; k++)
                    dot += (double)to_f32(a.e[k]) * (double)to_f32(b.e[k]) * (double)to_f32(e.e[k]);
            }
        } else {
            for (int j = threadIdx.x; j < D; j += blockDim.x)
                dot += (double)to_f32(g[j]) * (double)to_f32(w[j]) * (double)to_f32(xr[j]);
        }
        dot = block_sum_d(dot, sh);
        const float r = rstd[t];
        const float c = (float)(dot * (double)r * (double)r * (double)r / D);
        if (packed) {
            for (int q = threadIdx.x; q < D / W; q += blockDim.x) {
                const size_t o = (size_t)q * W;
                const Pack<S, W> a = load_any<S, W>(g + o, vec), b = load_any<S, W>(w + o, vec),
                                 e = load_any<S, W>(xr + o, vec);
                Pack<S, W> dd = load_any<S, W>(d + o, vec);
#pragma unroll
                for (int k = 0; k < W; k++)
                    rms_bwd_col(dd.e[k], acc[k * (D / W) + q], a.e[k], e.e[k], b.e[k], r, c);
                store_any(d + o, dd, vec);
            }
        } else {
            for (int j = threadIdx.x; j < D; j += blockDim.x)
                rms_bwd_col(d[j], acc[j], g[j], xr[j], w[j], r, c);
        }
    }
    if (acc_smem) {
        /* Back to the linear mapping for the copy out (same layout). */
        __syncthreads();
        double *dst = partial + (size_t)blockIdx.x * D;
        for (int j = threadIdx.x; j < D; j += blockDim.x)
            dst[j] = acc[j];
    }
}

/* dw[j] += sum over blocks b, in order, of block b's entry for column j;
 * packw = the pack width W of the packed layout, or 1 for the plain one. */
__global__ void k_rmsnorm_bwd_dw(float *dw, const double *partial, int nblocks, int D, int packw)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= D)
        return;
    const int idx = (j % packw) * (D / packw) + j / packw;
    double s = 0.0;
    for (int b = 0; b < nblocks; b++)
        s += partial[(size_t)b * D + idx];
    dw[j] = __fadd_rn(dw[j], (float)s);
}

/* The largest dynamic shared memory a block may opt into on this device. */
size_t smem_optin_max(void)
{
    static int max_optin = -1;
    if (max_optin < 0) {
        int dev = 0;
        CHECK_CUDA(cudaGetDevice(&dev));
        CHECK_CUDA(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    }
    return (size_t)max_optin;
}

} // namespace

template <typename S> void cu_rmsnorm_fwd(S *out, float *rstd, const S *x, const S *w, int T, int D, float eps)
{
    if (T <= 0 || D <= 0)
        return;
    /* The mapping (packed or not, threads) depends on D only; vec only
     * chooses how a pack is loaded. */
    const int W = VEC_OF<S>;
    const bool packed = D % W == 0;
    const bool vec = packed && aligned16(out) && aligned16(x) && aligned16(w);
    const int threads = row_threads(packed ? D / W : D, RMS_FWD_THREADS);
    k_rmsnorm_fwd<<<T, threads, 0, cuda_stream()>>>(out, rstd, x, w, D, eps, packed ? 1 : 0, vec ? 1 : 0);
    CHECK_CUDA_LAUNCH();
}

/* Scratch: partial[nblocks][D] doubles. */
template <typename S>
void cu_rmsnorm_bwd(S *dx, float *dw, const S *dout, const S *x, const S *w, const float *rstd, int T, int D)
{
    if (T <= 0 || D <= 0)
        return;
    cudaStream_t st = cuda_stream();
    const int rpb = (T + RMS_BWD_BLOCKS - 1) / RMS_BWD_BLOCKS;
    const int nblocks = (T + rpb - 1) / rpb;
    double *partial = (double *)cuda_scratch((size_t)nblocks * D * sizeof(double));

    const int W = VEC_OF<S>;
    const bool packed = D % W == 0;
    const bool vec = packed && aligned16(dx) && aligned16(dout) && aligned16(x) && aligned16(w);
    const int threads = row_threads(packed ? D / W : D, RMS_BWD_THREADS);
    const size_t acc_bytes = (size_t)D * sizeof(double);
    /* The static 32-double reduction buffer shares the opt-in limit. */
    const bool acc_smem = acc_bytes + 32 * sizeof(double) <= smem_optin_max();
    const size_t dyn = acc_smem ? acc_bytes : 0;
    /* without the opt-in, static + dynamic must fit the default 48 KiB */
    if (dyn + 32 * sizeof(double) > 48 * 1024)
        CHECK_CUDA(
            cudaFuncSetAttribute(k_rmsnorm_bwd_rows<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
    k_rmsnorm_bwd_rows<S>
        <<<nblocks, threads, dyn, st>>>(dx, partial, dout, x, w, rstd, T, D, rpb, packed, vec, acc_smem);
    CHECK_CUDA_LAUNCH();
    k_rmsnorm_bwd_dw<<<(D + 255) / 256, 256, 0, st>>>(dw, partial, nblocks, D, packed ? W : 1);
    CHECK_CUDA_LAUNCH();
}

/* The two storage types of fb_act on CUDA. */
template void cu_rmsnorm_fwd<__nv_bfloat16>(__nv_bfloat16 *, float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                                            int, int, float);
template void cu_rmsnorm_fwd<__half>(__half *, float *, const __half *, const __half *, int, int, float);
template void cu_rmsnorm_bwd<__nv_bfloat16>(__nv_bfloat16 *, float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                                            const __nv_bfloat16 *, const float *, int, int);
template void cu_rmsnorm_bwd<__half>(__half *, float *, const __half *, const __half *, const __half *, const float *,
                                     int, int);
