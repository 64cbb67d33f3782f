/* Shared by the CUDA sources: error checks, the storage types and their
 * fp32 conversions, warp/block reductions, launch helpers. C++ (nvcc) only. */
#ifndef FABULA_KERNELS_CUDA_COMMON_CUH
#define FABULA_KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_check.h"

/* The stream every op is issued on (cuda_backend.cu). */
cudaStream_t cuda_stream(void);
/* Scratch device memory that lives until the next call of cuda_scratch on
 * the same stream ordering; grows as needed. For temporaries of one op. */
void *cuda_scratch(size_t bytes);

/* Storage <-> fp32. Storage types: float, __nv_bfloat16, __half. */
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. `sh` holds 32 floats. */
__device__ __forceinline__ float block_sum(float v, float *sh)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    v = lane < nwarps ? sh[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *sh)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    v = lane < nwarps ? sh[lane] : -INFINITY;
    return warp_max(v);
}

/* The same in double (the fixed-order reductions of sumsq and the row ops,
 * which sum in double as their CPU twins do). `sh` holds 32 doubles. */
__device__ __forceinline__ double warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double block_sum_d(double v, double *sh)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    v = lane < nwarps ? sh[lane] : 0.0;
    return warp_sum_d(v);
}

static inline unsigned cuda_blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    /* grid-stride loops cover the rest */
    return (unsigned)(b > 65535u * 16u ? 65535u * 16u : (b ? b : 1));
}

#endif
