/* Shared by the row ops (embedding.cu, rmsnorm.cu, cross_entropy.cu): rows
 * moved as 16-byte packs whatever their alignment, and the block size for a
 * row. In an unnamed namespace, as when they lived in one source file; never
 * included together with cuda_map.cuh (each has its own Pack). C++ (nvcc)
 * only. */
#ifndef FABULA_KERNELS_CUDA_ROWS_CUH
#define FABULA_KERNELS_CUDA_ROWS_CUH

#include <stddef.h>
#include <stdint.h>

#include "cuda_common.cuh"

namespace {

/* W consecutive elements of T moved as whole 16-byte transactions. */
template <typename T, int W> struct alignas(16) Pack {
    static_assert(sizeof(T) * W % 16 == 0, "a pack is whole 16-byte words");
    T e[W];
};

template <typename T, int W> __device__ __forceinline__ Pack<T, W> pack_load(const T *p)
{
    Pack<T, W> r;
#pragma unroll
    for (int k = 0; k < (int)(sizeof(T) * W / 16); k++)
        reinterpret_cast<int4 *>(&r)[k] = reinterpret_cast<const int4 *>(p)[k];
    return r;
}

template <typename T, int W> __device__ __forceinline__ void pack_store(T *p, const Pack<T, W> &v)
{
#pragma unroll
    for (int k = 0; k < (int)(sizeof(T) * W / 16); k++)
        reinterpret_cast<int4 *>(p)[k] = reinterpret_cast<const int4 *>(&v)[k];
}

/* A pack at p, moved with 16-byte transactions when vec (p aligned) or
 * element by element: lets a kernel keep its pack-to-thread mapping, and so
 * its summation order, whatever the pointers' alignment. */
template <typename T, int W> __device__ __forceinline__ Pack<T, W> load_any(const T *p, int vec)
{
    if (vec)
        return pack_load<T, W>(p);
    Pack<T, W> r;
#pragma unroll
    for (int k = 0; k < W; k++)
        r.e[k] = p[k];
    return r;
}

template <typename T, int W> __device__ __forceinline__ void store_any(T *p, const Pack<T, W> &v, int vec)
{
    if (vec) {
        pack_store(p, v);
        return;
    }
#pragma unroll
    for (int k = 0; k < W; k++)
        p[k] = v.e[k];
}

/* Elements of S in 16 bytes. */
template <typename S> constexpr int VEC_OF = 16 / (int)sizeof(S);

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Threads for a block that walks `units` items of a row: a multiple of 32
 * (block reductions need whole warps), at most `cap`. */
inline int row_threads(int units, int cap)
{
    int t = (units + 31) / 32 * 32;
    return t < 32 ? 32 : t > cap ? cap : t;
}

} // namespace

#endif
