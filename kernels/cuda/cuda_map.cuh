/* The map driver of the elementwise ops (elementwise.cu, adamw.cu): one
 * grid-stride kernel over packs of W elements, then the scalar tail. In an
 * unnamed namespace, as when it lived in one source file: each includer
 * instantiates its own kernels. Its Pack also moves 8-byte packs (the dropout
 * mask), unlike cuda_rows.cuh's; the two are never included together.
 * C++ (nvcc) only. */
#ifndef FABULA_KERNELS_CUDA_MAP_CUH
#define FABULA_KERNELS_CUDA_MAP_CUH

#include <stddef.h>
#include <stdint.h>

#include "cuda_common.cuh"

namespace {

constexpr int EW_THREADS = 256;

/* W consecutive elements of T, moved as whole 16-byte (or one 8-byte)
 * transactions. The alignment lets the payload be punned to int4/uint2. */
template <typename T, int W> struct alignas(sizeof(T) * W >= 16 ? 16 : sizeof(T) * W) Pack {
    T e[W];
};

template <typename T, int W> __device__ __forceinline__ Pack<T, W> pack_load(const T *p)
{
    constexpr int B = (int)sizeof(T) * W;
    static_assert(B % 16 == 0 || B == 8, "a pack is whole 16-byte words or one 8-byte word");
    Pack<T, W> r;
    if constexpr (B % 16 == 0) {
#pragma unroll
        for (int k = 0; k < B / 16; k++)
            reinterpret_cast<int4 *>(&r)[k] = reinterpret_cast<const int4 *>(p)[k];
    } else {
        *reinterpret_cast<uint2 *>(&r) = *reinterpret_cast<const uint2 *>(p);
    }
    return r;
}

template <typename T, int W> __device__ __forceinline__ void pack_store(T *p, const Pack<T, W> &v)
{
    constexpr int B = (int)sizeof(T) * W;
    static_assert(B % 16 == 0 || B == 8, "a pack is whole 16-byte words or one 8-byte word");
    if constexpr (B % 16 == 0) {
#pragma unroll
        for (int k = 0; k < B / 16; k++)
            reinterpret_cast<int4 *>(p)[k] = reinterpret_cast<const int4 *>(&v)[k];
    } else {
        *reinterpret_cast<uint2 *>(p) = *reinterpret_cast<const uint2 *>(&v);
    }
}

inline bool aligned(const void *p, uintptr_t bytes) { return ((uintptr_t)p & (bytes - 1)) == 0; }

/* The map driver: Op provides W, chunk(i0) for elements i0..i0+W-1 (packed
 * access, i0 a multiple of W) and one(i) for a single element. */
template <typename Op> __global__ void k_map(Op op, size_t n, int vec)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t nchunks = vec ? n / Op::W : 0;
    for (size_t c = tid; c < nchunks; c += stride)
        op.chunk(c * Op::W);
    for (size_t i = nchunks * Op::W + tid; i < n; i += stride)
        op.one(i);
}

template <typename Op> void launch_map(const Op &op, size_t n, bool vec)
{
    if (n == 0)
        return;
    const size_t work = vec ? n / Op::W : n; /* 0 when only a tail: one block does it */
    k_map<<<cuda_blocks_for(work, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(op, n, vec ? 1 : 0);
    CHECK_CUDA_LAUNCH();
}

} // namespace

#endif
