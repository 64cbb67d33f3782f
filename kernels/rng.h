/* Counter-based random numbers shared by every backend: the value for
 * (seed, counter) does not depend on thread count, rank count or device, so
 * initialisation and dropout masks are reproducible across layouts. */
#ifndef FABULA_KERNELS_RNG_H
#define FABULA_KERNELS_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define FB_RNG_FN static __host__ __device__ inline
#else
#define FB_RNG_FN static inline
#endif

/* splitmix64 finaliser: a bijective mix with good avalanche. */
FB_RNG_FN uint64_t fb_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

FB_RNG_FN uint64_t fb_hash2(uint64_t seed, uint64_t counter)
{
    return fb_mix64(fb_mix64(seed) ^ counter);
}

/* Uniform in [0, 1) with 24 random bits (exact in float). */
FB_RNG_FN float fb_uniform_hash(uint64_t seed, uint64_t counter)
{
    return (float)(fb_hash2(seed, counter) >> 40) * (1.0f / 16777216.0f);
}

#endif
