/* The token embedding: forward copies table rows, backward adds the rows
 * of dout into dtable. The CPU twin is kernels/cpu/embedding.c.
 *
 * Parallel decomposition, and why every result is the same on every run:
 *
 *  - embedding_fwd: one block per row t copies table[tokens[t]]; a copy.
 *  - embedding_bwd: (token, row) pairs are sorted by token with
 *    cub::DeviceRadixSort, which is stable, so each token's rows stay in
 *    ascending row order. A block owns (run of one token, 256 columns), one
 *    thread per column: it reads dtable once, adds the run's rows in row order
 *    and writes it back. Each dtable element is owned by one thread and summed
 *    in the CPU twin's order (dtable + row0 + row1 + ...), so the result is
 *    the CPU's bit for bit, with no atomics.
 */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "cuda_rows.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace {

/* ---- embedding ---- */

template <typename S> __global__ void k_embedding_fwd(S *out, const int32_t *tokens, const S *table, int D, int vec)
{
    const int t = blockIdx.x;
    const S *src = table + (size_t)tokens[t] * D;
    S *dst = out + (size_t)t * D;
    if (vec) {
        constexpr int W = VEC_OF<S>;
        for (int c = threadIdx.x; c < D / W; c += blockDim.x)
            pack_store(dst + (size_t)c * W, pack_load<S, W>(src + (size_t)c * W));
    } else {
        for (int j = threadIdx.x; j < D; j += blockDim.x)
            dst[j] = src[j];
    }
}

__global__ void k_iota(int32_t *a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        a[i] = i;
}

constexpr int EMB_BWD_THREADS = 256;
constexpr int EMB_BWD_TARGET_BLOCKS = 4096;

/* keys: tokens sorted ascending; rows: their rows, ascending within a token.
 * Blocks stride over the sorted index r; the block at a run's first index
 * does that run for its columns, the others skip it. */
template <typename S>
__global__ void __launch_bounds__(EMB_BWD_THREADS)
    k_embedding_bwd(float *dtable, const S *dout, const int32_t *keys, const int32_t *rows, int T, int D)
{
    const int j = blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= D)
        return; /* no barriers below */
    for (int r = blockIdx.x; r < T; r += gridDim.x) {
        const int tok = keys[r];
        if (r > 0 && keys[r - 1] == tok)
            continue;
        /* End of the run: keys are sorted, so keys[mid] == tok means the
         * run reaches past mid. Invariant: keys[lo - 1] == tok, end in [lo, hi]. */
        int lo = r + 1, hi = T;
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            if (keys[mid] == tok)
                lo = mid + 1;
            else
                hi = mid;
        }
        const int end = lo;
        float *dst = dtable + (size_t)tok * D + j;
        float acc = *dst;
        int e = r;
        /* Four loads in flight, added in row order. */
        for (; e + 4 <= end; e += 4) {
            const float v0 = to_f32(dout[(size_t)rows[e] * D + j]);
            const float v1 = to_f32(dout[(size_t)rows[e + 1] * D + j]);
            const float v2 = to_f32(dout[(size_t)rows[e + 2] * D + j]);
            const float v3 = to_f32(dout[(size_t)rows[e + 3] * D + j]);
            acc += v0;
            acc += v1;
            acc += v2;
            acc += v3;
        }
        for (; e < end; e++)
            acc += to_f32(dout[(size_t)rows[e] * D + j]);
        *dst = acc;
    }
}

} // namespace

template <typename S> void cu_embedding_fwd(S *out, const int32_t *tokens, const S *table, int T, int D)
{
    if (T <= 0 || D <= 0)
        return;
    const int W = VEC_OF<S>;
    const bool vec = D % W == 0 && aligned16(out) && aligned16(table);
    const int threads = row_threads(vec ? D / W : D, 256);
    k_embedding_fwd<<<T, threads, 0, cuda_stream()>>>(out, tokens, table, D, vec ? 1 : 0);
    CHECK_CUDA_LAUNCH();
}

/* Scratch (one cuda_scratch call): rows_in[T] (0..T-1), keys_out[T],
 * rows_out[T], then CUB's temporary storage; each piece 256-byte aligned. */
template <typename S> void cu_embedding_bwd(float *dtable, const S *dout, const int32_t *tokens, int T, int D)
{
    if (T <= 0 || D <= 0)
        return;
    cudaStream_t st = cuda_stream();
    size_t temp_bytes = 0;
    CHECK_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, (const int32_t *)nullptr, (int32_t *)nullptr,
                                               (const int32_t *)nullptr, (int32_t *)nullptr, T, 0, 32, st));
    const size_t arr = align_up((size_t)T * sizeof(int32_t), 256);
    char *base = (char *)cuda_scratch(3 * arr + temp_bytes);
    int32_t *rows_in = (int32_t *)base, *keys_out = (int32_t *)(base + arr), *rows_out = (int32_t *)(base + 2 * arr);
    void *temp = base + 3 * arr;

    k_iota<<<cuda_blocks_for((size_t)T, 256), 256, 0, st>>>(rows_in, T);
    CHECK_CUDA_LAUNCH();
    CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, keys_out, rows_in, rows_out, T, 0, 32, st));

    const int gy = (D + EMB_BWD_THREADS - 1) / EMB_BWD_THREADS;
    int gx = (EMB_BWD_TARGET_BLOCKS + gy - 1) / gy;
    gx = gx > T ? T : gx;
    k_embedding_bwd<<<dim3((unsigned)gx, (unsigned)gy), EMB_BWD_THREADS, 0, st>>>(dtable, dout, keys_out, rows_out,
                                                                                     T, D);
    CHECK_CUDA_LAUNCH();
}

/* The two storage types of fb_act on CUDA. */
template void cu_embedding_fwd<__nv_bfloat16>(__nv_bfloat16 *, const int32_t *, const __nv_bfloat16 *, int, int);
template void cu_embedding_fwd<__half>(__half *, const int32_t *, const __half *, int, int);
template void cu_embedding_bwd<__nv_bfloat16>(float *, const __nv_bfloat16 *, const int32_t *, int, int);
template void cu_embedding_bwd<__half>(float *, const __half *, const int32_t *, int, int);
