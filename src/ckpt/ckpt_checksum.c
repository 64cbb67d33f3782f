/* The tensor checksum (docs/checkpoint.md, "Checksum"): a plain C loop, and
 * on x86-64 the same sums with AVX2 or AVX-512 chosen at run time. A load
 * reads and checksums every byte of the file, and the plain loop (one
 * 64-bit multiply per element, about 1 ns) cost as much as the read itself
 * from the page cache; the vector loops cost a third to a quarter of that.
 * Every path computes the same sum modulo 2^64 (tests/unit/test_ckpt.c
 * checks each one that the CPU runs against the formula). */
#include <stdint.h>
#include <string.h>

#include "ckpt/ckpt_impl.h"
#include "util/error.h"

#define K_POS 0x9e3779b97f4a7c15ULL
#define K_MIX 0xbf58476d1ce4e5b9ULL

static uint64_t sum_plain(const float *x, size_t n, uint64_t pos0)
{
    uint64_t sum = 0, p = pos0 * K_POS;
    for (size_t i = 0; i < n; i++, p += K_POS) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        uint64_t y = (p ^ (uint64_t)bits) * K_MIX;
        sum += y ^ (y >> 31);
    }
    return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CKPT_HAVE_X86 1

/* (pos0 + i) * K_POS for the lanes is kept as a running product (adding
 * lanes * K_POS), so the one multiply per element is the mix. */
__attribute__((target("avx512f,avx512dq"))) static uint64_t sum_avx512(const float *x, size_t n, uint64_t pos0)
{
    const uint32_t *bits = (const uint32_t *)(const void *)x;
    __m512i p = _mm512_set_epi64((long long)((pos0 + 7) * K_POS), (long long)((pos0 + 6) * K_POS),
                                 (long long)((pos0 + 5) * K_POS), (long long)((pos0 + 4) * K_POS),
                                 (long long)((pos0 + 3) * K_POS), (long long)((pos0 + 2) * K_POS),
                                 (long long)((pos0 + 1) * K_POS), (long long)(pos0 * K_POS));
    const __m512i step = _mm512_set1_epi64((long long)(8 * K_POS)), mix = _mm512_set1_epi64((long long)K_MIX);
    __m512i acc = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i b = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(const void *)(bits + i)));
        __m512i y = _mm512_mullo_epi64(_mm512_xor_si512(p, b), mix);
        acc = _mm512_add_epi64(acc, _mm512_xor_si512(y, _mm512_srli_epi64(y, 31)));
        p = _mm512_add_epi64(p, step);
    }
    return (uint64_t)_mm512_reduce_add_epi64(acc) + sum_plain(x + i, n - i, pos0 + i);
}

/* AVX2 has no 64-bit multiply: z * K_MIX modulo 2^64 is
 * lo(z) lo(K) + ((hi(z) lo(K) + lo(z) hi(K)) << 32). */
__attribute__((target("avx2"))) static uint64_t sum_avx2(const float *x, size_t n, uint64_t pos0)
{
    const uint32_t *bits = (const uint32_t *)(const void *)x;
    __m256i p = _mm256_set_epi64x((long long)((pos0 + 3) * K_POS), (long long)((pos0 + 2) * K_POS),
                                  (long long)((pos0 + 1) * K_POS), (long long)(pos0 * K_POS));
    const __m256i step = _mm256_set1_epi64x((long long)(4 * K_POS));
    const __m256i klo = _mm256_set1_epi64x((long long)(K_MIX & 0xffffffffu));
    const __m256i khi = _mm256_set1_epi64x((long long)(K_MIX >> 32));
    __m256i acc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i z = _mm256_xor_si256(p, _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)(bits + i))));
        __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(z, 32), klo), _mm256_mul_epu32(z, khi));
        __m256i y = _mm256_add_epi64(_mm256_mul_epu32(z, klo), _mm256_slli_epi64(cross, 32));
        acc = _mm256_add_epi64(acc, _mm256_xor_si256(y, _mm256_srli_epi64(y, 31)));
        p = _mm256_add_epi64(p, step);
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)(void *)lanes, acc);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_plain(x + i, n - i, pos0 + i);
}
#endif

int ckpt_checksum_isa_supported(int isa)
{
    switch (isa) {
    case CKPT_SUM_PLAIN:
        return 1;
#ifdef CKPT_HAVE_X86
    case CKPT_SUM_AVX2:
        return __builtin_cpu_supports("avx2");
    case CKPT_SUM_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#endif
    default:
        return 0;
    }
}

uint64_t ckpt_checksum_isa(int isa, const float *x, size_t n, uint64_t pos0)
{
    FB_ASSERT(ckpt_checksum_isa_supported(isa));
#ifdef CKPT_HAVE_X86
    if (isa == CKPT_SUM_AVX512)
        return sum_avx512(x, n, pos0);
    if (isa == CKPT_SUM_AVX2)
        return sum_avx2(x, n, pos0);
#endif
    return sum_plain(x, n, pos0);
}

/* The best path this CPU has, found once (a race between threads finding
 * it writes the same value). */
static int best_isa(void)
{
    static int best = -1;
    if (best < 0)
        best = ckpt_checksum_isa_supported(CKPT_SUM_AVX512) ? CKPT_SUM_AVX512
               : ckpt_checksum_isa_supported(CKPT_SUM_AVX2) ? CKPT_SUM_AVX2
                                                              : CKPT_SUM_PLAIN;
    return best;
}

uint64_t ckpt_checksum_serial(const float *x, size_t n, uint64_t pos0)
{
    return ckpt_checksum_isa(best_isa(), x, n, pos0);
}

/* Blocks of 256 Ki elements (1 MiB) over the threads: small enough that a
 * thread the machine has taken away leaves little of the sum waiting. */
#define SUM_BLOCK ((size_t)1 << 18)

uint64_t ckpt_checksum(const float *x, size_t n, uint64_t pos0)
{
    const int isa = best_isa();
    const size_t blocks = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(dynamic, 1) if (blocks > 1)
    for (size_t k = 0; k < blocks; k++) {
        size_t a = k * SUM_BLOCK, len = n - a < SUM_BLOCK ? n - a : SUM_BLOCK;
        sum += ckpt_checksum_isa(isa, x + a, len, pos0 + a);
    }
    return sum;
}
