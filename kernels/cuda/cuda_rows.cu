/* Ops over rows of the residual stream and of the logits: embedding,
 * RMSNorm, RoPE, cross-entropy. The CPU twins are kernels/cpu/
 * cpu_embedding.c, cpu_rmsnorm.c, cpu_rope.c and cpu_cross_entropy.c.
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
 *  - rope: one thread per (row, frequency), looping over heads; a map.
 *  - cross_entropy: one block per row: one pass of per-thread online max and
 *    sum of exponentials, combined by fixed-tree block reductions, then one
 *    pass writing the gradient. Rows are independent. The split of a row
 *    among threads depends on V and on the row's address mod 16, so the
 *    loss bits are reproducible for the same buffers (as every run has). */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

#include <assert.h>
#include <math.h>

#include <cub/device/device_radix_sort.cuh>

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
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    }
    return (size_t)max_optin;
}

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
    CUDA_CHECK_LAUNCH();
}

/* ---- cross-entropy ---- */

constexpr int CE_THREADS = 512;

/* Online softmax statistics: m the running max, s = sum exp(x - m). A
 * -inf logit adds nothing (exp(-inf - m) with m = -inf would be NaN); NaN
 * is never > m and so reaches s, making the loss NaN as on the CPU. */
__device__ __forceinline__ void online_add(float &m, float &s, float x)
{
    if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
    } else if (x != -INFINITY) {
        s += expf(x - m);
    }
}

__device__ __forceinline__ float ce_grad(float x, float rl, bool is_target, float grad_scale)
{
    const float p = expf(x - rl);
    return grad_scale * (is_target ? p - 1.0f : p);
}

/* No __restrict__ and no read-only-cache loads: dl may alias lg. Every
 * read of the row (including lg[y]) happens before the block reductions'
 * barriers, and after them each thread reads an element just before writing
 * the same element. */
template <typename S>
__global__ void __launch_bounds__(CE_THREADS)
    k_cross_entropy(float *loss, S *dl, const S *lg, const int32_t *targets, int V, float grad_scale)
{
    __shared__ float sh[32];
    constexpr int W = VEC_OF<S>;
    const int t = blockIdx.x;
    const S *l = lg + (size_t)t * V;
    S *d = dl + (size_t)t * V;
    const int y = targets[t];
    if (y < 0) { /* uniform over the block: no barrier is skipped by some threads only */
        for (int j = threadIdx.x; j < V; j += blockDim.x)
            d[j] = from_f32<S>(0.0f);
        if (threadIdx.x == 0)
            loss[t] = 0.0f;
        return;
    }
    if (y >= V) { /* a caller bug (the CPU twin asserts it): fail the stream loudly */
        assert(y < V);
        __trap();
    }
    const float ly = to_f32(l[y]);

    /* Scalar head up to the first 16-byte boundary of the row, packs, tail. */
    int head = (int)(((16u - ((unsigned)(uintptr_t)l & 15u)) & 15u) / sizeof(S));
    head = head < V ? head : V;
    const int npacks = (V - head) / W;
    const int tail0 = head + npacks * W;

    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < head; j += blockDim.x)
        online_add(m, s, to_f32(l[j]));
    for (int c = threadIdx.x; c < npacks; c += blockDim.x) {
        const Pack<S, W> a = pack_load<S, W>(l + head + (size_t)c * W);
#pragma unroll
        for (int k = 0; k < W; k++)
            online_add(m, s, to_f32(a.e[k]));
    }
    for (int j = tail0 + threadIdx.x; j < V; j += blockDim.x)
        online_add(m, s, to_f32(l[j]));

    const float M = block_max(m, sh);
    const float part = m == -INFINITY ? 0.0f : s * expf(m - M);
    const float sum = block_sum(part, sh);
    const double lse = (double)M + log((double)sum);
    if (threadIdx.x == 0)
        loss[t] = (float)(lse - (double)ly);
    const float rl = (float)lse;

    /* Packs only when dl's row shares lg's alignment (always when aliased). */
    if ((((uintptr_t)d - (uintptr_t)l) & 15u) == 0) {
        for (int j = threadIdx.x; j < head; j += blockDim.x)
            d[j] = from_f32<S>(ce_grad(to_f32(l[j]), rl, j == y, grad_scale));
        for (int c = threadIdx.x; c < npacks; c += blockDim.x) {
            const int j0 = head + c * W;
            Pack<S, W> a = pack_load<S, W>(l + j0);
#pragma unroll
            for (int k = 0; k < W; k++)
                a.e[k] = from_f32<S>(ce_grad(to_f32(a.e[k]), rl, j0 + k == y, grad_scale));
            pack_store(d + j0, a);
        }
        for (int j = tail0 + threadIdx.x; j < V; j += blockDim.x)
            d[j] = from_f32<S>(ce_grad(to_f32(l[j]), rl, j == y, grad_scale));
    } else {
        for (int j = threadIdx.x; j < V; j += blockDim.x)
            d[j] = from_f32<S>(ce_grad(to_f32(l[j]), rl, j == y, grad_scale));
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
    CUDA_CHECK_LAUNCH();
}

/* Scratch (one cuda_scratch call): rows_in[T] (0..T-1), keys_out[T],
 * rows_out[T], then CUB's temporary storage; each piece 256-byte aligned. */
template <typename S> void cu_embedding_bwd(float *dtable, const S *dout, const int32_t *tokens, int T, int D)
{
    if (T <= 0 || D <= 0)
        return;
    cudaStream_t st = cuda_stream();
    size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, (const int32_t *)nullptr, (int32_t *)nullptr,
                                               (const int32_t *)nullptr, (int32_t *)nullptr, T, 0, 32, st));
    const size_t arr = align_up((size_t)T * sizeof(int32_t), 256);
    char *base = (char *)cuda_scratch(3 * arr + temp_bytes);
    int32_t *rows_in = (int32_t *)base, *keys_out = (int32_t *)(base + arr), *rows_out = (int32_t *)(base + 2 * arr);
    void *temp = base + 3 * arr;

    k_iota<<<cuda_blocks_for((size_t)T, 256), 256, 0, st>>>(rows_in, T);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, keys_out, rows_in, rows_out, T, 0, 32, st));

    const int gy = (D + EMB_BWD_THREADS - 1) / EMB_BWD_THREADS;
    int gx = (EMB_BWD_TARGET_BLOCKS + gy - 1) / gy;
    gx = gx > T ? T : gx;
    k_embedding_bwd<<<dim3((unsigned)gx, (unsigned)gy), EMB_BWD_THREADS, 0, st>>>(dtable, dout, keys_out, rows_out,
                                                                                     T, D);
    CUDA_CHECK_LAUNCH();
}

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
    CUDA_CHECK_LAUNCH();
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
        CUDA_CHECK(
            cudaFuncSetAttribute(k_rmsnorm_bwd_rows<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
    k_rmsnorm_bwd_rows<S>
        <<<nblocks, threads, dyn, st>>>(dx, partial, dout, x, w, rstd, T, D, rpb, packed, vec, acc_smem);
    CUDA_CHECK_LAUNCH();
    k_rmsnorm_bwd_dw<<<(D + 255) / 256, 256, 0, st>>>(dw, partial, nblocks, D, packed ? W : 1);
    CUDA_CHECK_LAUNCH();
}

template <typename S> void cu_rope_fwd(S *x, const int32_t *pos, int T, int nheads, int hd, float theta)
{
    rope_launch(x, pos, T, nheads, hd, theta, 1.0f);
}

template <typename S> void cu_rope_bwd(S *dx, const int32_t *pos, int T, int nheads, int hd, float theta)
{
    rope_launch(dx, pos, T, nheads, hd, theta, -1.0f);
}

template <typename S>
void cu_cross_entropy(float *loss, S *dlogits, const S *logits, const int32_t *targets, int T, int V,
                      float grad_scale)
{
    if (T <= 0 || V <= 0)
        return;
    k_cross_entropy<<<T, CE_THREADS, 0, cuda_stream()>>>(loss, dlogits, logits, targets, V, grad_scale);
    CUDA_CHECK_LAUNCH();
}

/* The two storage types of fb_act on CUDA. */
template void cu_embedding_fwd<__nv_bfloat16>(__nv_bfloat16 *, const int32_t *, const __nv_bfloat16 *, int, int);
template void cu_embedding_fwd<__half>(__half *, const int32_t *, const __half *, int, int);
template void cu_embedding_bwd<__nv_bfloat16>(float *, const __nv_bfloat16 *, const int32_t *, int, int);
template void cu_embedding_bwd<__half>(float *, const __half *, const int32_t *, int, int);
template void cu_rmsnorm_fwd<__nv_bfloat16>(__nv_bfloat16 *, float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                                            int, int, float);
template void cu_rmsnorm_fwd<__half>(__half *, float *, const __half *, const __half *, int, int, float);
template void cu_rmsnorm_bwd<__nv_bfloat16>(__nv_bfloat16 *, float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                                            const __nv_bfloat16 *, const float *, int, int);
template void cu_rmsnorm_bwd<__half>(__half *, float *, const __half *, const __half *, const __half *, const float *,
                                     int, int);
template void cu_rope_fwd<__nv_bfloat16>(__nv_bfloat16 *, const int32_t *, int, int, int, float);
template void cu_rope_fwd<__half>(__half *, const int32_t *, int, int, int, float);
template void cu_rope_bwd<__nv_bfloat16>(__nv_bfloat16 *, const int32_t *, int, int, int, float);
template void cu_rope_bwd<__half>(__half *, const int32_t *, int, int, int, float);
template void cu_cross_entropy<__nv_bfloat16>(float *, __nv_bfloat16 *, const __nv_bfloat16 *, const int32_t *, int,
                                              int, float);
template void cu_cross_entropy<__half>(float *, __half *, const __half *, const int32_t *, int, int, float);
