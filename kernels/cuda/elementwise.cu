/* Elementwise ops on the GPU: conversions, axpy, scale, sum of squares,
 * SwiGLU, dropout. The CPU twin is kernels/cpu/elementwise.c (AdamW, also a
 * map, is adamw.cu).
 *
 * Parallel decomposition. Every op except sumsq is a map: element i depends
 * only on element i of its inputs, so any assignment of elements to threads
 * gives the same bits. Each map runs as one grid-stride kernel (k_map in
 * cuda_map.cuh) over chunks of W consecutive elements moved with 16-byte
 * loads/stores when every pointer allows it (8-byte for the dropout mask),
 * followed by a scalar grid-stride loop over the n % W tail; when some
 * pointer is misaligned the whole range takes the scalar loop. fp32 outputs
 * are formed with __fmul_rn/__fadd_rn so nvcc cannot contract them into
 * FMAs: axpy and scale then round exactly like the CPU twin (which is
 * compiled without contraction), bit for bit.
 *
 * sumsq is the one reduction. Its tree has a fixed shape that depends only on
 * n: thread g of a grid of nblocks(n) x SUMSQ_THREADS sums, in double and in
 * order, the 4-element chunks g, g + stride, ... (then at most 3 tail
 * elements), each block reduces its threads with a fixed shuffle/shared-memory
 * tree into part[block], and one block reduces part[] the same way. Whether a
 * chunk is read with one float4 or four scalar loads does not change the
 * arithmetic, so the result is identical on every run, whatever the pointer's
 * alignment or the device. */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "cuda_map.cuh"

#include <math.h>

#include "rng.h"

namespace {

/* ---- conversions ---- */

template <typename S> struct ToAct {
    static constexpr int W = 8;
    S *dst;
    const float *src;
    __device__ void one(size_t i) const { dst[i] = from_f32<S>(src[i]); }
    __device__ void chunk(size_t i) const
    {
        Pack<float, W> a = pack_load<float, W>(src + i);
        Pack<S, W> o;
#pragma unroll
        for (int k = 0; k < W; k++)
            o.e[k] = from_f32<S>(a.e[k]);
        pack_store(dst + i, o);
    }
};

template <typename S> struct ActToF32 {
    static constexpr int W = 8;
    float *dst;
    const S *src;
    __device__ void one(size_t i) const { dst[i] = to_f32(src[i]); }
    __device__ void chunk(size_t i) const
    {
        Pack<S, W> a = pack_load<S, W>(src + i);
        Pack<float, W> o;
#pragma unroll
        for (int k = 0; k < W; k++)
            o.e[k] = to_f32(a.e[k]);
        pack_store(dst + i, o);
    }
};

/* ---- axpy / scale ---- */

template <typename S> struct ActAxpy {
    static constexpr int W = 8;
    S *y;
    const S *x;
    float alpha;
    __device__ S f(S yi, S xi) const { return from_f32<S>(__fadd_rn(to_f32(yi), __fmul_rn(alpha, to_f32(xi)))); }
    __device__ void one(size_t i) const { y[i] = f(y[i], x[i]); }
    __device__ void chunk(size_t i) const
    {
        Pack<S, W> a = pack_load<S, W>(y + i), b = pack_load<S, W>(x + i);
#pragma unroll
        for (int k = 0; k < W; k++)
            a.e[k] = f(a.e[k], b.e[k]);
        pack_store(y + i, a);
    }
};

struct Axpy {
    static constexpr int W = 4;
    float *y;
    const float *x;
    float alpha;
    __device__ void one(size_t i) const { y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i])); }
    __device__ void chunk(size_t i) const
    {
        Pack<float, W> a = pack_load<float, W>(y + i), b = pack_load<float, W>(x + i);
#pragma unroll
        for (int k = 0; k < W; k++)
            a.e[k] = __fadd_rn(a.e[k], __fmul_rn(alpha, b.e[k]));
        pack_store(y + i, a);
    }
};

struct Scale {
    static constexpr int W = 4;
    float *x;
    float s;
    __device__ void one(size_t i) const { x[i] = __fmul_rn(x[i], s); }
    __device__ void chunk(size_t i) const
    {
        Pack<float, W> a = pack_load<float, W>(x + i);
#pragma unroll
        for (int k = 0; k < W; k++)
            a.e[k] = __fmul_rn(a.e[k], s);
        pack_store(x + i, a);
    }
};

/* ---- SwiGLU: h = silu(g) u; d silu(g)/dg = s + g s (1 - s) ---- */

/* Accurate expf (not __expf): the CPU twin uses libm's. */
__device__ __forceinline__ float sigmoidf(float g) { return 1.0f / (1.0f + expf(-g)); }

template <typename S> struct SwigluFwd {
    static constexpr int W = 8;
    S *h;
    const S *g, *u;
    __device__ S f(S gs, S us) const
    {
        float gi = to_f32(gs);
        return from_f32<S>(__fmul_rn(__fmul_rn(gi, sigmoidf(gi)), to_f32(us)));
    }
    __device__ void one(size_t i) const { h[i] = f(g[i], u[i]); }
    __device__ void chunk(size_t i) const
    {
        Pack<S, W> a = pack_load<S, W>(g + i), b = pack_load<S, W>(u + i), o;
#pragma unroll
        for (int k = 0; k < W; k++)
            o.e[k] = f(a.e[k], b.e[k]);
        pack_store(h + i, o);
    }
};

template <typename S> struct SwigluBwd {
    static constexpr int W = 8;
    S *dg, *du;
    const S *dh, *g, *u;
    __device__ void f(S &dgo, S &duo, S dhs, S gs, S us) const
    {
        float gi = to_f32(gs), ui = to_f32(us), d = to_f32(dhs);
        float s = sigmoidf(gi);
        float silu = __fmul_rn(gi, s);
        float dsilu = __fadd_rn(s, __fmul_rn(silu, __fsub_rn(1.0f, s)));
        dgo = from_f32<S>(__fmul_rn(__fmul_rn(d, ui), dsilu));
        duo = from_f32<S>(__fmul_rn(d, silu));
    }
    __device__ void one(size_t i) const { f(dg[i], du[i], dh[i], g[i], u[i]); }
    __device__ void chunk(size_t i) const
    {
        Pack<S, W> a = pack_load<S, W>(dh + i), b = pack_load<S, W>(g + i), c = pack_load<S, W>(u + i), og, ou;
#pragma unroll
        for (int k = 0; k < W; k++)
            f(og.e[k], ou.e[k], a.e[k], b.e[k], c.e[k]);
        pack_store(dg + i, og);
        pack_store(du + i, ou);
    }
};

/* ---- dropout: keep[i] = u(seed, offset + i) >= p, as on every backend ---- */

template <typename S> struct DropoutFwd {
    static constexpr int W = 8;
    S *x;
    uint8_t *mask;
    float p, keep_scale;
    uint64_t seed, offset;
    __device__ void f(S &xi, uint8_t &mi, size_t i) const
    {
        const bool keep = fb_uniform_hash(seed, offset + i) >= p;
        mi = (uint8_t)keep;
        xi = keep ? from_f32<S>(__fmul_rn(to_f32(xi), keep_scale)) : from_f32<S>(0.0f);
    }
    __device__ void one(size_t i) const { f(x[i], mask[i], i); }
    __device__ void chunk(size_t i) const
    {
        Pack<S, W> a = pack_load<S, W>(x + i);
        Pack<uint8_t, W> m;
#pragma unroll
        for (int k = 0; k < W; k++)
            f(a.e[k], m.e[k], i + (size_t)k);
        pack_store(x + i, a);
        pack_store(mask + i, m);
    }
};

/* Each row at its own offset: keep[r][c] = u(seed, row_offset[r] + c). */
template <typename S> struct DropoutRowsFwd {
    static constexpr int W = 8;
    S *x;
    uint8_t *mask;
    float p, keep_scale;
    uint64_t seed;
    const uint64_t *row_offset;
    size_t width;
    __device__ void f(S &xi, uint8_t &mi, size_t i) const
    {
        const bool keep = fb_uniform_hash(seed, row_offset[i / width] + i % width) >= p;
        mi = (uint8_t)keep;
        xi = keep ? from_f32<S>(__fmul_rn(to_f32(xi), keep_scale)) : from_f32<S>(0.0f);
    }
    __device__ void one(size_t i) const { f(x[i], mask[i], i); }
    __device__ void chunk(size_t i) const
    {
        Pack<S, W> a = pack_load<S, W>(x + i);
        Pack<uint8_t, W> m;
#pragma unroll
        for (int k = 0; k < W; k++)
            f(a.e[k], m.e[k], i + (size_t)k);
        pack_store(x + i, a);
        pack_store(mask + i, m);
    }
};

template <typename S> struct DropoutBwd {
    static constexpr int W = 8;
    S *dx;
    const uint8_t *mask;
    float keep_scale;
    __device__ S f(S d, uint8_t m) const
    {
        return m ? from_f32<S>(__fmul_rn(to_f32(d), keep_scale)) : from_f32<S>(0.0f);
    }
    __device__ void one(size_t i) const { dx[i] = f(dx[i], mask[i]); }
    __device__ void chunk(size_t i) const
    {
        Pack<S, W> a = pack_load<S, W>(dx + i);
        Pack<uint8_t, W> m = pack_load<uint8_t, W>(mask + i);
#pragma unroll
        for (int k = 0; k < W; k++)
            a.e[k] = f(a.e[k], m.e[k]);
        pack_store(dx + i, a);
    }
};

/* ---- sum of squares ---- */

constexpr int SUMSQ_THREADS = 256;
constexpr unsigned SUMSQ_MAX_BLOCKS = 1024;
constexpr int SUMSQ_FINAL_THREADS = 1024;

__device__ __forceinline__ double sq(float a) { return (double)a * (double)a; }

/* Element-to-thread mapping depends only on n (see the head of the file). */
__global__ void k_sumsq_part(double *part, const float *x, size_t n, int vec)
{
    __shared__ double sh[32];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t nchunks = n / 4;
    double s = 0.0;
    for (size_t c = tid; c < nchunks; c += stride) {
        const float *q = x + c * 4;
        float a0, a1, a2, a3;
        if (vec) {
            const float4 f = *reinterpret_cast<const float4 *>(q);
            a0 = f.x, a1 = f.y, a2 = f.z, a3 = f.w;
        } else {
            a0 = q[0], a1 = q[1], a2 = q[2], a3 = q[3];
        }
        s += sq(a0);
        s += sq(a1);
        s += sq(a2);
        s += sq(a3);
    }
    for (size_t i = nchunks * 4 + tid; i < n; i += stride)
        s += sq(x[i]);
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

__global__ void k_sumsq_final(double *out, const double *part, int nparts)
{
    __shared__ double sh[32];
    double s = 0.0;
    for (int b = threadIdx.x; b < nparts; b += blockDim.x)
        s += part[b];
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0)
        *out = s;
}

} // namespace

template <typename S> void cu_to_act(S *dst, const float *src, size_t n)
{
    launch_map(ToAct<S>{dst, src}, n, aligned(dst, 16) && aligned(src, 16));
}

template <typename S> void cu_act_to_f32(float *dst, const S *src, size_t n)
{
    launch_map(ActToF32<S>{dst, src}, n, aligned(dst, 16) && aligned(src, 16));
}

template <typename S> void cu_act_axpy(S *y, const S *x, size_t n, float alpha)
{
    launch_map(ActAxpy<S>{y, x, alpha}, n, aligned(y, 16) && aligned(x, 16));
}

void cu_axpy(float *y, const float *x, size_t n, float alpha)
{
    launch_map(Axpy{y, x, alpha}, n, aligned(y, 16) && aligned(x, 16));
}

void cu_scale(float *x, size_t n, float s) { launch_map(Scale{x, s}, n, aligned(x, 16)); }

double cu_sumsq(const float *x, size_t n)
{
    if (n == 0)
        return 0.0;
    cudaStream_t st = cuda_stream();
    const size_t chunks = n / 4;
    size_t nb = (chunks + SUMSQ_THREADS - 1) / SUMSQ_THREADS;
    nb = nb < 1 ? 1 : nb > SUMSQ_MAX_BLOCKS ? SUMSQ_MAX_BLOCKS : nb;
    double *part = (double *)cuda_scratch((nb + 1) * sizeof(double));
    double *out = part + nb;
    k_sumsq_part<<<(unsigned)nb, SUMSQ_THREADS, 0, st>>>(part, x, n, aligned(x, 16) ? 1 : 0);
    CHECK_CUDA_LAUNCH();
    k_sumsq_final<<<1, SUMSQ_FINAL_THREADS, 0, st>>>(out, part, (int)nb);
    CHECK_CUDA_LAUNCH();
    double h = 0.0;
    CHECK_CUDA(cudaMemcpyAsync(&h, out, sizeof h, cudaMemcpyDeviceToHost, st));
    CHECK_CUDA(cudaStreamSynchronize(st));
    return h;
}

template <typename S> void cu_swiglu_fwd(S *h, const S *g, const S *u, size_t n)
{
    launch_map(SwigluFwd<S>{h, g, u}, n, aligned(h, 16) && aligned(g, 16) && aligned(u, 16));
}

template <typename S> void cu_swiglu_bwd(S *dg, S *du, const S *dh, const S *g, const S *u, size_t n)
{
    const bool vec = aligned(dg, 16) && aligned(du, 16) && aligned(dh, 16) && aligned(g, 16) && aligned(u, 16);
    launch_map(SwigluBwd<S>{dg, du, dh, g, u}, n, vec);
}

/* keep_scale as the CPU forms it: 1/(1-p) in fp32. */
template <typename S> void cu_dropout_fwd(S *x, uint8_t *mask, size_t n, float p, uint64_t seed, uint64_t offset)
{
    const float keep_scale = 1.0f / (1.0f - p);
    launch_map(DropoutFwd<S>{x, mask, p, keep_scale, seed, offset}, n, aligned(x, 16) && aligned(mask, 8));
}

template <typename S>
void cu_dropout_rows_fwd(S *x, uint8_t *mask, size_t rows, size_t width, float p, uint64_t seed,
                         const uint64_t *row_offset)
{
    const float keep_scale = 1.0f / (1.0f - p);
    launch_map(DropoutRowsFwd<S>{x, mask, p, keep_scale, seed, row_offset, width}, rows * width,
               aligned(x, 16) && aligned(mask, 8));
}

template <typename S> void cu_dropout_bwd(S *dx, const uint8_t *mask, size_t n, float p)
{
    const float keep_scale = 1.0f / (1.0f - p);
    launch_map(DropoutBwd<S>{dx, mask, keep_scale}, n, aligned(dx, 16) && aligned(mask, 8));
}

/* The two storage types of fb_act on CUDA. */
template void cu_to_act<__nv_bfloat16>(__nv_bfloat16 *, const float *, size_t);
template void cu_act_to_f32<__nv_bfloat16>(float *, const __nv_bfloat16 *, size_t);
template void cu_act_axpy<__nv_bfloat16>(__nv_bfloat16 *, const __nv_bfloat16 *, size_t, float);
template void cu_swiglu_fwd<__nv_bfloat16>(__nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, size_t);
template void cu_swiglu_bwd<__nv_bfloat16>(__nv_bfloat16 *, __nv_bfloat16 *, const __nv_bfloat16 *,
                                           const __nv_bfloat16 *, const __nv_bfloat16 *, size_t);
template void cu_dropout_fwd<__nv_bfloat16>(__nv_bfloat16 *, uint8_t *, size_t, float, uint64_t, uint64_t);
template void cu_dropout_bwd<__nv_bfloat16>(__nv_bfloat16 *, const uint8_t *, size_t, float);
template void cu_dropout_rows_fwd<__nv_bfloat16>(__nv_bfloat16 *, uint8_t *, size_t, size_t, float, uint64_t,
                                                 const uint64_t *);
template void cu_to_act<__half>(__half *, const float *, size_t);
template void cu_act_to_f32<__half>(float *, const __half *, size_t);
template void cu_act_axpy<__half>(__half *, const __half *, size_t, float);
template void cu_swiglu_fwd<__half>(__half *, const __half *, const __half *, size_t);
template void cu_swiglu_bwd<__half>(__half *, __half *, const __half *, const __half *, const __half *, size_t);
template void cu_dropout_fwd<__half>(__half *, uint8_t *, size_t, float, uint64_t, uint64_t);
template void cu_dropout_bwd<__half>(__half *, const uint8_t *, size_t, float);
template void cu_dropout_rows_fwd<__half>(__half *, uint8_t *, size_t, size_t, float, uint64_t, const uint64_t *);
