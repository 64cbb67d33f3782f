/* Attention of a few new rows against a KV cache (ops_t.decode_attention),
 * the generation step. The CPU twin is kernels/cpu/decode_attention.c.
 *
 * One warp per (new row i, query head h) walks the cached keys 0..past+i
 * with an online softmax; lane j holds dims j, j+32, ... of q and of the
 * accumulator (hd <= 256). The dot product is a warp reduction; every output
 * element is written by one warp in an order fixed by the shapes, so the
 * results are the same on every run. Decode steps are one row, where this
 * is bandwidth-bound on the cache read, which the warp does coalesced.
 */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

#include <math.h>

namespace {

constexpr int DEC_MAX_CHUNKS = 8; /* hd <= 32 * 8 */

template <typename S>
__global__ void k_decode_attention(S *out, const S *q, const S *kc, const S *vc, int n, int past, int H, int KV,
                                   int hd, float scale)
{
    const int warp = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x & 31;
    if (warp >= n * H)
        return;
    const int i = warp / H, h = warp % H, kvh = h / (H / KV), len = past + i + 1;
    const size_t qs = (size_t)H * hd, ks = (size_t)KV * hd;
    const S *qr = q + i * qs + (size_t)h * hd;
    float qv[DEC_MAX_CHUNKS], acc[DEC_MAX_CHUNKS];
    for (int c = 0; c < DEC_MAX_CHUNKS; c++) {
        const int d = lane + 32 * c;
        qv[c] = d < hd ? to_f32(qr[d]) : 0.0f;
        acc[c] = 0.0f;
    }
    float mx = -INFINITY, sum = 0.0f;
    for (int s = 0; s < len; s++) {
        const S *kr = kc + s * ks + (size_t)kvh * hd, *vr = vc + s * ks + (size_t)kvh * hd;
        float part = 0.0f;
        for (int c = 0; c < DEC_MAX_CHUNKS; c++) {
            const int d = lane + 32 * c;
            if (d < hd)
                part += qv[c] * to_f32(kr[d]);
        }
        const float score = warp_sum(part) * scale;
        const float nmx = fmaxf(mx, score);
        const float keep = expf(mx - nmx), p = expf(score - nmx);
        sum = sum * keep + p;
        for (int c = 0; c < DEC_MAX_CHUNKS; c++) {
            const int d = lane + 32 * c;
            if (d < hd)
                acc[c] = acc[c] * keep + p * to_f32(vr[d]);
        }
        mx = nmx;
    }
    S *o = out + i * qs + (size_t)h * hd;
    for (int c = 0; c < DEC_MAX_CHUNKS; c++) {
        const int d = lane + 32 * c;
        if (d < hd)
            o[d] = from_f32<S>(acc[c] / sum);
    }
}

} // namespace

template <typename S>
void cu_decode_attention(S *out, const S *q, const S *kc, const S *vc, int n, int past, int H, int KV, int hd)
{
    if (n <= 0)
        return;
    if (KV <= 0 || H % KV != 0 || hd > 32 * DEC_MAX_CHUNKS)
        fb_fatal(FB_EXIT_INTERNAL, "decode_attention: H %d, KV %d, head_dim %d (at most %d) not supported", H, KV,
                 hd, 32 * DEC_MAX_CHUNKS);
    const unsigned threads = 128;
    const size_t warps = (size_t)n * H;
    const unsigned blocks = (unsigned)((warps * 32 + threads - 1) / threads);
    k_decode_attention<S><<<blocks, threads, 0, cuda_stream()>>>(out, q, kc, vc, n, past, H, KV, hd,
                                                                 1.0f / sqrtf((float)hd));
    CHECK_CUDA_LAUNCH();
}

template void cu_decode_attention<__nv_bfloat16>(__nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                                                 const __nv_bfloat16 *, int, int, int, int, int);
template void cu_decode_attention<__half>(__half *, const __half *, const __half *, const __half *, int, int, int,
                                          int, int);
