/* Causal attention over packed variable-length samples with GQA, forward
 * and backward. Reference: kernels/cpu/attention.c.
 *
 * Layout: q, out [T, H*hd]; k, v [T, KV*hd]; lse fp32 at t*H + h (natural
 * log of the sum of exp of the scaled scores). Query head h reads kv head
 * h / G, G = H / KV. Row t sees rows s with start(t) <= s <= t.
 * cu_seqlens stays on the device: every block finds the samples it needs by
 * binary search (sample_of), so no launcher waits for the device.
 *
 * Tensor-core path (hd 64 or 128, every tile pointer 16-byte aligned):
 * flash-style, WMMA 16x16x16 on 16-bit tiles with fp32 accumulators, tiles
 * staged in shared memory, no T x T matrix anywhere.
 *  - Forward: a block owns BM = 64 packed query rows of one head (4 warps,
 *    16 rows each) and walks key tiles of BN = 64 rows from start(first
 *    row) to its last row; a block straddling a sample boundary just masks
 *    per row (s < start(t) or s > t). Q stays in registers as fragments,
 *    scores go to a fp32 tile, the warp's rows are softmaxed online (two
 *    lanes per row, exp2 domain) and the 16-bit probabilities are written
 *    over the scores; O accumulates in a fp32 shared tile that the warp
 *    rescales by row before adding P V. Key tiles wholly masked for a
 *    warp's rows are skipped by that warp. Smem: 84.5 KB at hd 128 (two
 *    blocks per SM), 52.5 KB at hd 64.
 *  - Backward: Dsum[t,h] = dot(dout, out) first (fp32, in cuda_scratch).
 *    dK/dV: a block owns BN = 64 key rows of one kv head (8 warps) and
 *    loops over the G query heads of its group and the BM = 64 query-row
 *    tiles from its first key row to the end of the sample of its last key
 *    row; key s sees query t iff s <= t < end(sample(s)). dQ: a block owns
 *    BM = 64 query rows of one head and loops over key tiles like the
 *    forward. Both recompute P = exp(S - lse) and dS = P (dP - Dsum); dK and
 *    dQ carry the 1/sqrt(hd) at the end. Accumulators live in WMMA
 *    fragments (no per-row rescale is needed there). Smem: 103 KB at hd 128.
 *  - The next tile's global loads are issued into registers before the
 *    current tile's math (software pipelining without a second buffer).
 *  - Registers (ptxas, sm_90, no spills): the hd-128 kernels use ~255 per
 *    thread, so an SM holds 8 warps (two forward blocks, one backward
 *    block); capping them at 128 for two backward blocks spills.
 * Generic path (any other hd <= 256, unaligned pointers, or
 * FABULA_ATTN_GENERIC=1): one warp per (row, head) walks its keys with an
 * online softmax, a lane holding dims lane + 32 i; the backward has one warp
 * per (query row, head) for dQ and one per (key row, kv head) for dK/dV.
 *
 * Determinism: every output element (out, lse, dq, dk, dv, Dsum) is written
 * by exactly one thread block, which sums in an order fixed by the shapes
 * and cu_seqlens alone: there are no atomics and nothing depends on
 * scheduling, so repeated runs give bitwise identical results.
 */
#include <limits.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

using namespace nvcuda;

namespace {

constexpr int BM = 64;           /* query rows per tile */
constexpr int BN = 64;           /* key rows per tile (BM == BN: see staging below) */
constexpr int FWD_THREADS = 128; /* 4 warps x 16 query rows */
constexpr int BWD_THREADS = 256; /* 8 warps */
constexpr int GEN_WARPS = 4;     /* generic path: warps per block */
constexpr int GEN_SLOTS = 8;     /* generic path: hd <= 32 * GEN_SLOTS */
constexpr int LDF = BN + 4;      /* fp32 score tiles, floats per row */
constexpr int LDP = 2 * LDF;     /* 16-bit tiles written over them, elements per row */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
static_assert(BM == BN, "the output staging reuses two BN-row tiles as one BM-row fp32 tile");

/* Shared-memory layouts, in bytes; every region starts 128-byte aligned
 * because every region size is a multiple of 128. */
template <typename S, int HD> struct tc_layout {
    static constexpr int LDH = HD + 8; /* 16-bit Q/K/V/dO tiles */
    static constexpr int LDO = HD + 4; /* fp32 output tiles */
    static constexpr size_t TILE16 = (size_t)BN * LDH * sizeof(S);
    static constexpr size_t TILEF = (size_t)BM * LDF * sizeof(float);
    static constexpr size_t TILEO = (size_t)BM * LDO * sizeof(float);
    /* forward: Ks, Vs, Sf (P over it), Os, row starts, 1/l */
    static constexpr size_t FWD = 2 * TILE16 + TILEF + TILEO + 2 * BM * sizeof(float);
    /* backward: Ks, Vs, Qs, dOs, Sf (P), dPf (dS), three per-row arrays */
    static constexpr size_t BWD = 4 * TILE16 + 2 * TILEF + 3 * BM * sizeof(float);
    static_assert(TILE16 % 128 == 0 && TILEF % 128 == 0 && TILEO % 128 == 0, "region alignment");
    static_assert(2 * TILE16 >= TILEO, "two 16-bit tiles hold one fp32 output tile");
};

template <typename S> using frag_a_row = wmma::fragment<wmma::matrix_a, 16, 16, 16, S, wmma::row_major>;
template <typename S> using frag_a_col = wmma::fragment<wmma::matrix_a, 16, 16, 16, S, wmma::col_major>;
template <typename S> using frag_b_row = wmma::fragment<wmma::matrix_b, 16, 16, 16, S, wmma::row_major>;
template <typename S> using frag_b_col = wmma::fragment<wmma::matrix_b, 16, 16, 16, S, wmma::col_major>;
using frag_acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/* The sample i holding row t: cu[i] <= t < cu[i+1], empty samples skipped.
 * Needs cu[0] <= t < cu[nseq] (the invariant of the loop). */
__device__ __forceinline__ int sample_of(const int32_t *cu, int nseq, int t)
{
    int lo = 0, hi = nseq;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (__ldg(cu + mid) <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* A ROWS x HD tile (rows row0.. of a row-major array with `stride`
 * elements per row, from column pointer `base`) held in registers as
 * 16-byte chunks; rows at or past T read as zeros, so masked lanes never
 * multiply garbage (0 * NaN). Chunk id = threadIdx.x + j * THREADS. */
template <typename S, int HD, int ROWS, int THREADS> struct tile_regs {
    static constexpr int CPR = HD / 8; /* chunks per row */
    static constexpr int N = ROWS * CPR / THREADS;
    static_assert(ROWS * CPR % THREADS == 0, "chunks must split evenly over the threads");
    uint4 r[N];

    __device__ __forceinline__ void load(const S *base, size_t stride, int row0, int T)
    {
#pragma unroll
        for (int j = 0; j < N; j++) {
            const int id = threadIdx.x + j * THREADS, row = id / CPR, c = id % CPR, t = row0 + row;
            r[j] = t < T ? __ldg(reinterpret_cast<const uint4 *>(base + (size_t)t * stride) + c)
                         : make_uint4(0u, 0u, 0u, 0u);
        }
    }

    /* into a shared tile with HD + 8 elements per row */
    __device__ __forceinline__ void store(S *tile) const
    {
#pragma unroll
        for (int j = 0; j < N; j++) {
            const int id = threadIdx.x + j * THREADS, row = id / CPR, c = id % CPR;
            *reinterpret_cast<uint4 *>(tile + row * (HD + 8) + c * 8) = r[j];
        }
    }
};

template <typename S> __device__ __forceinline__ void store8(S *dst, const float (&f)[8])
{
    S e[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        e[i] = from_f32<S>(f[i]);
    uint4 raw;
    memcpy(&raw, e, sizeof raw);
    *reinterpret_cast<uint4 *>(dst) = raw;
}

/* Rows row0..row0+63 (those below T) of a fp32 staging tile [64][HD+4],
 * times mul, to global rows of `stride` elements from column pointer base. */
template <typename S, int HD, int THREADS>
__device__ __forceinline__ void write_rows(S *base, size_t stride, int row0, int T, const float *stage, float mul)
{
    constexpr int CPR = HD / 8, LDO = HD + 4;
    for (int id = threadIdx.x; id < BM * CPR; id += THREADS) {
        const int row = id / CPR, c = id % CPR, t = row0 + row;
        if (t < T) {
            float f[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                f[e] = stage[row * LDO + c * 8 + e] * mul;
            store8(base + (size_t)t * stride + c * 8, f);
        }
    }
}

/* ================= tensor-core forward ================= */

template <typename S, int HD>
__global__ void __launch_bounds__(FWD_THREADS)
    attn_fwd_tc(S *out, float *lse, const S *q, const S *k, const S *v, const int32_t *cu, int nseq, int T, int H,
                int G, float scale_log2)
{
    using L = tc_layout<S, HD>;
    constexpr int LDH = L::LDH, LDO = L::LDO, KD = HD / 16;
    extern __shared__ __align__(128) unsigned char smem[];
    S *Ks = reinterpret_cast<S *>(smem);
    S *Vs = reinterpret_cast<S *>(smem + L::TILE16);
    float *Sf = reinterpret_cast<float *>(smem + 2 * L::TILE16);
    S *Ps = reinterpret_cast<S *>(Sf); /* row r of P lies in row r of Sf */
    float *Os = reinterpret_cast<float *>(smem + 2 * L::TILE16 + L::TILEF);
    int *rstart = reinterpret_cast<int *>(smem + 2 * L::TILE16 + L::TILEF + L::TILEO);
    float *rinv = reinterpret_cast<float *>(rstart + BM);

    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * BM; /* the later (longer) rows first */
    const int h = blockIdx.y;
    const size_t qstride = (size_t)H * HD, kstride = (size_t)(H / G) * HD;
    const S *kbase = k + (size_t)(h / G) * HD, *vbase = v + (size_t)(h / G) * HD;

    /* rows past T get start INT_MAX: every key is masked for them */
    if (tid < BM) {
        const int t = q0 + tid;
        rstart[tid] = t < T ? __ldg(cu + sample_of(cu, nseq, t)) : INT_MAX;
    }
    for (int i = tid; i < BM * LDO; i += FWD_THREADS)
        Os[i] = 0.0f;
    {
        tile_regs<S, HD, BM, FWD_THREADS> qt; /* staged through Ks */
        qt.load(q + (size_t)h * HD, qstride, q0, T);
        qt.store(Ks);
    }
    __syncthreads();
    frag_a_row<S> qa[KD];
#pragma unroll
    for (int kk = 0; kk < KD; kk++)
        wmma::load_matrix_sync(qa[kk], Ks + (16 * w) * LDH + 16 * kk, LDH);

    /* keys [kbeg, klast]: from the start of the first row's sample (the
     * smallest start) to the last row */
    const int kbeg = rstart[0], klast = min(q0 + BM, T) - 1;
    tile_regs<S, HD, BN, FWD_THREADS> kt, vt;
    kt.load(kbase, kstride, kbeg, T);
    vt.load(vbase, kstride, kbeg, T);

    /* row r of the block is held by lanes 2(r - 16w) and 2(r - 16w) + 1;
     * `half` picks the even or odd columns */
    const int r = 16 * w + (lane >> 1), half = lane & 1, t = q0 + r, rs = rstart[r];
    const int wlast = min(q0 + 16 * w + 15, T - 1), wstart = rstart[16 * w];
    float m_run = -INFINITY, l_run = 0.0f; /* running max (log2 units) and sum */

    for (int k0 = kbeg; k0 <= klast; k0 += BN) {
        __syncthreads(); /* every warp is done with the previous Ks, Vs (and the Q staging) */
        kt.store(Ks);
        vt.store(Vs);
        __syncthreads();
        if (k0 + BN <= klast) {
            kt.load(kbase, kstride, k0 + BN, T);
            vt.load(vbase, kstride, k0 + BN, T);
        }
        /* keys k0..k0+BN-1 all after this warp's last row or all before its
         * first row's start (rows past T: wstart = INT_MAX) */
        if (k0 > wlast || k0 + BN - 1 < wstart)
            continue;

        /* S = Q K^T for the warp's 16 rows */
#pragma unroll
        for (int nj = 0; nj < BN / 16; nj++) {
            frag_acc acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kk = 0; kk < KD; kk++) {
                frag_b_col<S> b;
                wmma::load_matrix_sync(b, Ks + (16 * nj) * LDH + 16 * kk, LDH);
                wmma::mma_sync(acc, qa[kk], b, acc);
            }
            wmma::store_matrix_sync(Sf + (16 * w) * LDF + 16 * nj, acc, LDF, wmma::mem_row_major);
        }
        __syncwarp();

        /* online softmax of row r over columns 2i + half */
        float x[BN / 2];
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            const int c = 2 * i + half, s = k0 + c;
            x[i] = (s >= rs && s <= t) ? Sf[r * LDF + c] * scale_log2 : -INFINITY;
            mx = fmaxf(mx, x[i]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m_run, mx);
        float alpha = 1.0f, sum = 0.0f;
        if (m_new != -INFINITY) { /* else no key of this row seen yet: P = 0 */
            alpha = exp2f(m_run - m_new); /* 0 on the row's first visible tile */
#pragma unroll
            for (int i = 0; i < BN / 2; i++) {
                x[i] = exp2f(x[i] - m_new);
                sum += x[i];
            }
        } else {
#pragma unroll
            for (int i = 0; i < BN / 2; i++)
                x[i] = 0.0f;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l_run = l_run * alpha + sum;
        m_run = m_new;
        __syncwarp(); /* both lanes of the row have read Sf before P overwrites it */
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            Ps[r * LDP + 2 * i + half] = from_f32<S>(x[i]);
        if (alpha != 1.0f) {
            for (int i = 0; i < HD / 2; i++)
                Os[r * LDO + 2 * i + half] *= alpha;
        }
        __syncwarp();

        /* O += P V */
        frag_a_row<S> pa[BN / 16];
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wmma::load_matrix_sync(pa[kk], Ps + (16 * w) * LDP + 16 * kk, LDP);
#pragma unroll
        for (int dj = 0; dj < HD / 16; dj++) {
            frag_acc acc;
            wmma::load_matrix_sync(acc, Os + (16 * w) * LDO + 16 * dj, LDO, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                frag_b_row<S> b;
                wmma::load_matrix_sync(b, Vs + (16 * kk) * LDH + 16 * dj, LDH);
                wmma::mma_sync(acc, pa[kk], b, acc);
            }
            wmma::store_matrix_sync(Os + (16 * w) * LDO + 16 * dj, acc, LDO, wmma::mem_row_major);
        }
    }

    __syncwarp(); /* the warp's last O stores are visible to all its lanes */
    if (half == 0) {
        rinv[r] = l_run > 0.0f ? 1.0f / l_run : 0.0f;
        if (t < T)
            lse[(size_t)t * H + h] = (m_run + log2f(l_run)) * LN2;
    }
    __syncwarp();
    constexpr int CPR = HD / 8;
    for (int id = lane; id < 16 * CPR; id += 32) {
        const int row = 16 * w + id / CPR, c = id % CPR, tt = q0 + row;
        if (tt < T) {
            float f[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                f[e] = Os[row * LDO + c * 8 + e] * rinv[row];
            store8(out + (size_t)tt * qstride + (size_t)h * HD + c * 8, f);
        }
    }
}

/* ================= tensor-core backward ================= */

/* Scores S = Q K^T and dP = dO V^T of a 64 x 64 tile pair into the fp32
 * tiles Sf, dPf: warp w computes rows 16 (w & 3) and columns 32 (w >> 2)
 * .. + 31 of both. */
template <typename S, int HD>
__device__ __forceinline__ void scores_and_dp(float *Sf, float *dPf, const S *Qs, const S *dOs, const S *Ks,
                                              const S *Vs, int w)
{
    constexpr int LDH = HD + 8;
    const int mi = w & 3, nj = (w >> 2) * 2;
    frag_acc s0, s1, p0, p1;
    wmma::fill_fragment(s0, 0.0f);
    wmma::fill_fragment(s1, 0.0f);
    wmma::fill_fragment(p0, 0.0f);
    wmma::fill_fragment(p1, 0.0f);
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        frag_a_row<S> a;
        frag_b_col<S> b0, b1;
        wmma::load_matrix_sync(a, Qs + (16 * mi) * LDH + 16 * kk, LDH);
        wmma::load_matrix_sync(b0, Ks + (16 * nj) * LDH + 16 * kk, LDH);
        wmma::load_matrix_sync(b1, Ks + (16 * nj + 16) * LDH + 16 * kk, LDH);
        wmma::mma_sync(s0, a, b0, s0);
        wmma::mma_sync(s1, a, b1, s1);
        wmma::load_matrix_sync(a, dOs + (16 * mi) * LDH + 16 * kk, LDH);
        wmma::load_matrix_sync(b0, Vs + (16 * nj) * LDH + 16 * kk, LDH);
        wmma::load_matrix_sync(b1, Vs + (16 * nj + 16) * LDH + 16 * kk, LDH);
        wmma::mma_sync(p0, a, b0, p0);
        wmma::mma_sync(p1, a, b1, p1);
    }
    wmma::store_matrix_sync(Sf + (16 * mi) * LDF + 16 * nj, s0, LDF, wmma::mem_row_major);
    wmma::store_matrix_sync(Sf + (16 * mi) * LDF + 16 * nj + 16, s1, LDF, wmma::mem_row_major);
    wmma::store_matrix_sync(dPf + (16 * mi) * LDF + 16 * nj, p0, LDF, wmma::mem_row_major);
    wmma::store_matrix_sync(dPf + (16 * mi) * LDF + 16 * nj + 16, p1, LDF, wmma::mem_row_major);
}

/* dK, dV for BN key rows of kv head blockIdx.y. */
template <typename S, int HD>
__global__ void __launch_bounds__(BWD_THREADS)
    attn_bwd_dkdv_tc(S *dk, S *dv, const S *q, const S *k, const S *v, const S *dout, const float *lse,
                     const float *dsum, const int32_t *cu, int nseq, int T, int H, int G, float scale,
                     float scale_log2)
{
    using L = tc_layout<S, HD>;
    constexpr int LDH = L::LDH, LDO = L::LDO, ND = HD / 32;
    extern __shared__ __align__(128) unsigned char smem[];
    S *Ks = reinterpret_cast<S *>(smem);
    S *Vs = reinterpret_cast<S *>(smem + L::TILE16);
    S *Qs = reinterpret_cast<S *>(smem + 2 * L::TILE16);
    S *dOs = reinterpret_cast<S *>(smem + 3 * L::TILE16);
    float *Sf = reinterpret_cast<float *>(smem + 4 * L::TILE16);
    float *dPf = reinterpret_cast<float *>(smem + 4 * L::TILE16 + L::TILEF);
    S *Ps = reinterpret_cast<S *>(Sf);
    S *dSs = reinterpret_cast<S *>(dPf);
    int *kend = reinterpret_cast<int *>(smem + 4 * L::TILE16 + 2 * L::TILEF);
    float *lse2 = reinterpret_cast<float *>(kend + BN);
    float *dD = lse2 + BM;

    const int tid = threadIdx.x, w = tid >> 5;
    const int n0 = blockIdx.x * BN, g = blockIdx.y;
    const size_t qstride = (size_t)H * HD, kstride = (size_t)(H / G) * HD;

    /* key s sees query t iff s <= t < kend[s - n0]; keys past T see none */
    if (tid < BN) {
        const int s = n0 + tid;
        kend[tid] = s < T ? __ldg(cu + sample_of(cu, nseq, s) + 1) : 0;
    }
    {
        tile_regs<S, HD, BN, BWD_THREADS> t;
        t.load(k + (size_t)g * HD, kstride, n0, T);
        t.store(Ks);
        t.load(v + (size_t)g * HD, kstride, n0, T);
        t.store(Vs);
    }
    __syncthreads();

    /* queries [n0, qend): none before the first key row, none past the end
     * of the last key row's sample */
    const int qend = kend[min(n0 + BN, T) - 1 - n0];
    const int nqb = (qend - n0 + BM - 1) / BM, nsteps = G * nqb;

    tile_regs<S, HD, BM, BWD_THREADS> qt, ot;
    float pl = 0.0f, pd = 0.0f;
    auto prefetch = [&](int step) {
        const int h = g * G + step / nqb, m0 = n0 + (step % nqb) * BM;
        qt.load(q + (size_t)h * HD, qstride, m0, T);
        ot.load(dout + (size_t)h * HD, qstride, m0, T);
        if (tid < BM) {
            const int t = m0 + tid;
            pl = t < T ? __ldg(lse + (size_t)t * H + h) * LOG2E : 0.0f;
            pd = t < T ? __ldg(dsum + (size_t)t * H + h) : 0.0f;
        }
    };
    prefetch(0);

    frag_acc dKa[ND], dVa[ND];
#pragma unroll
    for (int dj = 0; dj < ND; dj++) {
        wmma::fill_fragment(dKa[dj], 0.0f);
        wmma::fill_fragment(dVa[dj], 0.0f);
    }
    const int kr = (w & 3) * 16, ch = (w >> 2) * (HD / 2); /* this warp's dK/dV block */
    const int em = tid >> 2, ec = tid & 3;                  /* elementwise: row, column phase */

    for (int step = 0; step < nsteps; step++) {
        const int m0 = n0 + (step % nqb) * BM;
        __syncthreads(); /* the previous step is done with Qs, dOs, Ps, dSs, lse2, dD */
        qt.store(Qs);
        ot.store(dOs);
        if (tid < BM) {
            lse2[tid] = pl;
            dD[tid] = pd;
        }
        __syncthreads();
        if (step + 1 < nsteps)
            prefetch(step + 1);

        scores_and_dp<S, HD>(Sf, dPf, Qs, dOs, Ks, Vs, w);
        __syncthreads();

        /* P = exp(S - lse), dS = P (dP - Dsum); columns ec + 4 i */
        float pr[BN / 4], dr[BN / 4];
        {
            const int t = m0 + em;
            const float l2 = lse2[em], dd = dD[em];
#pragma unroll
            for (int i = 0; i < BN / 4; i++) {
                const int n = ec + 4 * i, s = n0 + n;
                const bool ok = s <= t && t < kend[n];
                const float p = ok ? exp2f(Sf[em * LDF + n] * scale_log2 - l2) : 0.0f;
                pr[i] = p;
                dr[i] = ok ? p * (dPf[em * LDF + n] - dd) : 0.0f;
            }
        }
        __syncthreads(); /* all of Sf, dPf read before the 16-bit tiles overwrite them */
#pragma unroll
        for (int i = 0; i < BN / 4; i++) {
            Ps[em * LDP + ec + 4 * i] = from_f32<S>(pr[i]);
            dSs[em * LDP + ec + 4 * i] = from_f32<S>(dr[i]);
        }
        __syncthreads();

        /* dV += P^T dO, dK += dS^T Q (P^T, dS^T: column-major views of P, dS) */
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
            frag_a_col<S> ap, ads;
            wmma::load_matrix_sync(ap, Ps + (16 * kk) * LDP + kr, LDP);
            wmma::load_matrix_sync(ads, dSs + (16 * kk) * LDP + kr, LDP);
#pragma unroll
            for (int dj = 0; dj < ND; dj++) {
                frag_b_row<S> b;
                wmma::load_matrix_sync(b, dOs + (16 * kk) * LDH + ch + 16 * dj, LDH);
                wmma::mma_sync(dVa[dj], ap, b, dVa[dj]);
                wmma::load_matrix_sync(b, Qs + (16 * kk) * LDH + ch + 16 * dj, LDH);
                wmma::mma_sync(dKa[dj], ads, b, dKa[dj]);
            }
        }
    }

    /* stage through Qs + dOs (two adjacent 16-bit tiles) */
    float *stage = reinterpret_cast<float *>(Qs);
    __syncthreads();
#pragma unroll
    for (int dj = 0; dj < ND; dj++)
        wmma::store_matrix_sync(stage + kr * LDO + ch + 16 * dj, dVa[dj], LDO, wmma::mem_row_major);
    __syncthreads();
    write_rows<S, HD, BWD_THREADS>(dv + (size_t)g * HD, kstride, n0, T, stage, 1.0f);
    __syncthreads();
#pragma unroll
    for (int dj = 0; dj < ND; dj++)
        wmma::store_matrix_sync(stage + kr * LDO + ch + 16 * dj, dKa[dj], LDO, wmma::mem_row_major);
    __syncthreads();
    write_rows<S, HD, BWD_THREADS>(dk + (size_t)g * HD, kstride, n0, T, stage, scale);
}

/* dQ for BM query rows of head blockIdx.y. */
template <typename S, int HD>
__global__ void __launch_bounds__(BWD_THREADS)
    attn_bwd_dq_tc(S *dq, const S *q, const S *k, const S *v, const S *dout, const float *lse, const float *dsum,
                   const int32_t *cu, int nseq, int T, int H, int G, float scale, float scale_log2)
{
    using L = tc_layout<S, HD>;
    constexpr int LDH = L::LDH, LDO = L::LDO, ND = HD / 32;
    extern __shared__ __align__(128) unsigned char smem[];
    S *Ks = reinterpret_cast<S *>(smem);
    S *Vs = reinterpret_cast<S *>(smem + L::TILE16);
    S *Qs = reinterpret_cast<S *>(smem + 2 * L::TILE16);
    S *dOs = reinterpret_cast<S *>(smem + 3 * L::TILE16);
    float *Sf = reinterpret_cast<float *>(smem + 4 * L::TILE16);
    float *dPf = reinterpret_cast<float *>(smem + 4 * L::TILE16 + L::TILEF);
    S *dSs = reinterpret_cast<S *>(dPf);
    int *rstart = reinterpret_cast<int *>(smem + 4 * L::TILE16 + 2 * L::TILEF);
    float *lse2 = reinterpret_cast<float *>(rstart + BM);
    float *dD = lse2 + BM;

    const int tid = threadIdx.x, w = tid >> 5;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * BM, h = blockIdx.y, g = h / G;
    const size_t qstride = (size_t)H * HD, kstride = (size_t)(H / G) * HD;
    const S *kbase = k + (size_t)g * HD, *vbase = v + (size_t)g * HD;

    if (tid < BM) {
        const int t = q0 + tid;
        const bool in = t < T;
        rstart[tid] = in ? __ldg(cu + sample_of(cu, nseq, t)) : INT_MAX;
        lse2[tid] = in ? __ldg(lse + (size_t)t * H + h) * LOG2E : 0.0f;
        dD[tid] = in ? __ldg(dsum + (size_t)t * H + h) : 0.0f;
    }
    {
        tile_regs<S, HD, BM, BWD_THREADS> t;
        t.load(q + (size_t)h * HD, qstride, q0, T);
        t.store(Qs);
        t.load(dout + (size_t)h * HD, qstride, q0, T);
        t.store(dOs);
    }
    __syncthreads();

    const int kbeg = rstart[0], klast = min(q0 + BM, T) - 1;
    tile_regs<S, HD, BN, BWD_THREADS> kt, vt;
    kt.load(kbase, kstride, kbeg, T);
    vt.load(vbase, kstride, kbeg, T);

    frag_acc dQa[ND];
#pragma unroll
    for (int dj = 0; dj < ND; dj++)
        wmma::fill_fragment(dQa[dj], 0.0f);
    const int mr = (w & 3) * 16, ch = (w >> 2) * (HD / 2); /* this warp's dQ block */
    const int em = tid >> 2, ec = tid & 3;
    const int t = q0 + em, rs = rstart[em];
    const float l2 = lse2[em], dd = dD[em];

    for (int k0 = kbeg; k0 <= klast; k0 += BN) {
        __syncthreads(); /* the previous step is done with Ks, Vs, dSs */
        kt.store(Ks);
        vt.store(Vs);
        __syncthreads();
        if (k0 + BN <= klast) {
            kt.load(kbase, kstride, k0 + BN, T);
            vt.load(vbase, kstride, k0 + BN, T);
        }

        scores_and_dp<S, HD>(Sf, dPf, Qs, dOs, Ks, Vs, w);
        __syncthreads();

        float dr[BN / 4];
#pragma unroll
        for (int i = 0; i < BN / 4; i++) {
            const int n = ec + 4 * i, s = k0 + n;
            const bool ok = s >= rs && s <= t;
            dr[i] = ok ? exp2f(Sf[em * LDF + n] * scale_log2 - l2) * (dPf[em * LDF + n] - dd) : 0.0f;
        }
        __syncthreads(); /* all of dPf read before dS overwrites it */
#pragma unroll
        for (int i = 0; i < BN / 4; i++)
            dSs[em * LDP + ec + 4 * i] = from_f32<S>(dr[i]);
        __syncthreads();

        /* dQ += dS K */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            frag_a_row<S> a;
            wmma::load_matrix_sync(a, dSs + mr * LDP + 16 * kk, LDP);
#pragma unroll
            for (int dj = 0; dj < ND; dj++) {
                frag_b_row<S> b;
                wmma::load_matrix_sync(b, Ks + (16 * kk) * LDH + ch + 16 * dj, LDH);
                wmma::mma_sync(dQa[dj], a, b, dQa[dj]);
            }
        }
    }

    /* stage through Ks + Vs */
    float *stage = reinterpret_cast<float *>(Ks);
    __syncthreads();
#pragma unroll
    for (int dj = 0; dj < ND; dj++)
        wmma::store_matrix_sync(stage + mr * LDO + ch + 16 * dj, dQa[dj], LDO, wmma::mem_row_major);
    __syncthreads();
    write_rows<S, HD, BWD_THREADS>(dq + (size_t)h * HD, qstride, q0, T, stage, scale);
}

/* ================= backward preprocess ================= */

/* dsum[t*H + h] = dot(dout[t, h], out[t, h]); row (t, h) starts at
 * (t*H + h) * hd, so one warp per index w of dsum. */
template <typename S>
__global__ void __launch_bounds__(GEN_WARPS * 32)
    attn_bwd_dsum(float *dsum, const S *dout, const S *out, long long rows, int hd)
{
    const long long wi = (long long)blockIdx.x * GEN_WARPS + (threadIdx.x >> 5);
    if (wi >= rows)
        return; /* the same for the whole warp */
    const int lane = threadIdx.x & 31;
    const S *a = dout + (size_t)wi * hd, *b = out + (size_t)wi * hd;
    float acc = 0.0f;
    for (int d = lane; d < hd; d += 32)
        acc += to_f32(a[d]) * to_f32(b[d]);
    acc = warp_sum(acc);
    if (lane == 0)
        dsum[wi] = acc;
}

/* ================= generic path ================= */

/* One warp per (t, h), index t*H + h; lane holds dims lane + 32 i. Keys
 * are taken four at a time so the four dot-product reductions overlap. */
template <typename S>
__global__ void __launch_bounds__(GEN_WARPS * 32)
    attn_fwd_generic(S *out, float *lse, const S *q, const S *k, const S *v, const int32_t *cu, int nseq, int T,
                     int H, int G, int hd, float scale_log2)
{
    const long long wi = (long long)blockIdx.x * GEN_WARPS + (threadIdx.x >> 5);
    if (wi >= (long long)T * H)
        return; /* the same for the whole warp */
    const int lane = threadIdx.x & 31, t = (int)(wi / H), h = (int)(wi % H);
    const size_t kstride = (size_t)(H / G) * hd;
    const S *kb = k + (size_t)(h / G) * hd, *vb = v + (size_t)(h / G) * hd;

    float qf[GEN_SLOTS], o[GEN_SLOTS];
#pragma unroll
    for (int i = 0; i < GEN_SLOTS; i++) {
        const int d = lane + 32 * i;
        qf[i] = d < hd ? to_f32(q[(size_t)wi * hd + d]) : 0.0f;
        o[i] = 0.0f;
    }
    const int start = __ldg(cu + sample_of(cu, nseq, t));
    float m = -INFINITY, l = 0.0f;
    for (int s0 = start; s0 <= t; s0 += 4) {
        float x[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            x[u] = 0.0f;
            if (s0 + u <= t) {
                const S *kr = kb + (size_t)(s0 + u) * kstride;
#pragma unroll
                for (int i = 0; i < GEN_SLOTS; i++) {
                    const int d = lane + 32 * i;
                    if (d < hd)
                        x[u] += qf[i] * to_f32(kr[d]);
                }
            }
        }
        float mx = m;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            x[u] = warp_sum(x[u]);
            x[u] = s0 + u <= t ? x[u] * scale_log2 : -INFINITY;
            mx = fmaxf(mx, x[u]); /* finite: key s0 <= t is always there */
        }
        const float alpha = exp2f(m - mx);
        float p[4];
        l *= alpha;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            p[u] = exp2f(x[u] - mx);
            l += p[u];
        }
#pragma unroll
        for (int i = 0; i < GEN_SLOTS; i++) {
            const int d = lane + 32 * i;
            if (d < hd) {
                float acc = o[i] * alpha;
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (s0 + u <= t)
                        acc += p[u] * to_f32(vb[(size_t)(s0 + u) * kstride + d]);
                o[i] = acc;
            }
        }
        m = mx;
    }
    const float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < GEN_SLOTS; i++) {
        const int d = lane + 32 * i;
        if (d < hd)
            out[(size_t)wi * hd + d] = from_f32<S>(o[i] * inv);
    }
    if (lane == 0)
        lse[wi] = (m + log2f(l)) * LN2;
}

/* dQ: one warp per (t, h), index t*H + h. */
template <typename S>
__global__ void __launch_bounds__(GEN_WARPS * 32)
    attn_bwd_dq_generic(S *dq, const S *q, const S *k, const S *v, const S *dout, const float *lse,
                        const float *dsum, const int32_t *cu, int nseq, int T, int H, int G, int hd, float scale,
                        float scale_log2)
{
    const long long wi = (long long)blockIdx.x * GEN_WARPS + (threadIdx.x >> 5);
    if (wi >= (long long)T * H)
        return;
    const int lane = threadIdx.x & 31, t = (int)(wi / H), h = (int)(wi % H);
    const size_t kstride = (size_t)(H / G) * hd;
    const S *kb = k + (size_t)(h / G) * hd, *vb = v + (size_t)(h / G) * hd;

    float qf[GEN_SLOTS], of[GEN_SLOTS], acc[GEN_SLOTS];
#pragma unroll
    for (int i = 0; i < GEN_SLOTS; i++) {
        const int d = lane + 32 * i;
        qf[i] = d < hd ? to_f32(q[(size_t)wi * hd + d]) : 0.0f;
        of[i] = d < hd ? to_f32(dout[(size_t)wi * hd + d]) : 0.0f;
        acc[i] = 0.0f;
    }
    const float l2 = lse[wi] * LOG2E, dd = dsum[wi];
    const int start = __ldg(cu + sample_of(cu, nseq, t));
    for (int s = start; s <= t; s++) {
        const S *kr = kb + (size_t)s * kstride, *vr = vb + (size_t)s * kstride;
        float kf[GEN_SLOTS], a = 0.0f, b = 0.0f;
#pragma unroll
        for (int i = 0; i < GEN_SLOTS; i++) {
            const int d = lane + 32 * i;
            kf[i] = d < hd ? to_f32(kr[d]) : 0.0f;
            a += qf[i] * kf[i];
            b += d < hd ? of[i] * to_f32(vr[d]) : 0.0f;
        }
        a = warp_sum(a);
        b = warp_sum(b);
        const float ds = exp2f(a * scale_log2 - l2) * (b - dd);
#pragma unroll
        for (int i = 0; i < GEN_SLOTS; i++)
            acc[i] += ds * kf[i];
    }
#pragma unroll
    for (int i = 0; i < GEN_SLOTS; i++) {
        const int d = lane + 32 * i;
        if (d < hd)
            dq[(size_t)wi * hd + d] = from_f32<S>(acc[i] * scale);
    }
}

/* dK, dV: one warp per (s, g), index s*KV + g; loops over the group's query
 * heads and the queries s..end(sample(s))-1. */
template <typename S>
__global__ void __launch_bounds__(GEN_WARPS * 32)
    attn_bwd_dkdv_generic(S *dk, S *dv, const S *q, const S *k, const S *v, const S *dout, const float *lse,
                          const float *dsum, const int32_t *cu, int nseq, int T, int H, int G, int hd, float scale,
                          float scale_log2)
{
    const int KV = H / G;
    const long long wi = (long long)blockIdx.x * GEN_WARPS + (threadIdx.x >> 5);
    if (wi >= (long long)T * KV)
        return;
    const int lane = threadIdx.x & 31, s = (int)(wi / KV), g = (int)(wi % KV);

    float kf[GEN_SLOTS], vf[GEN_SLOTS], dka[GEN_SLOTS], dva[GEN_SLOTS];
#pragma unroll
    for (int i = 0; i < GEN_SLOTS; i++) {
        const int d = lane + 32 * i;
        kf[i] = d < hd ? to_f32(k[(size_t)wi * hd + d]) : 0.0f;
        vf[i] = d < hd ? to_f32(v[(size_t)wi * hd + d]) : 0.0f;
        dka[i] = 0.0f;
        dva[i] = 0.0f;
    }
    const int end = __ldg(cu + sample_of(cu, nseq, s) + 1);
    for (int j = 0; j < G; j++) {
        const int h = g * G + j;
        for (int t = s; t < end; t++) {
            const size_t row = (size_t)t * H + h;
            const S *qr = q + row * hd, *dor = dout + row * hd;
            float qv[GEN_SLOTS], ov[GEN_SLOTS], a = 0.0f, b = 0.0f;
#pragma unroll
            for (int i = 0; i < GEN_SLOTS; i++) {
                const int d = lane + 32 * i;
                qv[i] = d < hd ? to_f32(qr[d]) : 0.0f;
                ov[i] = d < hd ? to_f32(dor[d]) : 0.0f;
                a += qv[i] * kf[i];
                b += ov[i] * vf[i];
            }
            a = warp_sum(a);
            b = warp_sum(b);
            const float p = exp2f(a * scale_log2 - __ldg(lse + row) * LOG2E);
            const float ds = p * (b - __ldg(dsum + row));
#pragma unroll
            for (int i = 0; i < GEN_SLOTS; i++) {
                dva[i] += p * ov[i];
                dka[i] += ds * qv[i];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < GEN_SLOTS; i++) {
        const int d = lane + 32 * i;
        if (d < hd) {
            dk[(size_t)wi * hd + d] = from_f32<S>(dka[i] * scale);
            dv[(size_t)wi * hd + d] = from_f32<S>(dva[i]);
        }
    }
}

/* ================= launchers ================= */

bool generic_forced(void)
{
    /* read once: the choice must not change within a run */
    static const bool forced = [] {
        const char *e = getenv("FABULA_ATTN_GENERIC");
        return e != NULL && atoi(e) != 0;
    }();
    return forced;
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The tensor-core path: hd 64 or 128 and 16-byte aligned bases (then every
 * row and head offset is aligned too, as hd is a multiple of 8). */
bool use_tc(int hd, const void *const *ptrs, int n)
{
    if ((hd != 64 && hd != 128) || generic_forced())
        return false;
    for (int i = 0; i < n; i++)
        if (!aligned16(ptrs[i]))
            return false;
    return true;
}

void check_shape(int nseq, int T, int H, int KV, int hd)
{
    FB_ASSERT(T >= 0 && nseq >= 0 && (T == 0 || nseq >= 1));
    FB_ASSERT(H > 0 && KV > 0 && H % KV == 0 && H <= 65535);
    FB_ASSERT(hd > 0 && hd <= 32 * GEN_SLOTS);
}

template <typename K> void allow_smem(K kernel, size_t bytes)
{
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

unsigned gen_blocks(long long warps) { return (unsigned)((warps + GEN_WARPS - 1) / GEN_WARPS); }

template <typename S, int HD>
void fwd_tc(S *out, float *lse, const S *q, const S *k, const S *v, const int32_t *cu, int nseq, int T, int H,
            int G, float scale_log2)
{
    const size_t smem = tc_layout<S, HD>::FWD;
    allow_smem(attn_fwd_tc<S, HD>, smem);
    const dim3 grid((unsigned)((T + BM - 1) / BM), (unsigned)H);
    attn_fwd_tc<S, HD><<<grid, FWD_THREADS, smem, cuda_stream()>>>(out, lse, q, k, v, cu, nseq, T, H, G, scale_log2);
    CHECK_CUDA_LAUNCH();
}

template <typename S, int HD>
void bwd_tc(S *dq, S *dk, S *dv, const S *dout, const S *q, const S *k, const S *v, const float *lse,
            const float *dsum, const int32_t *cu, int nseq, int T, int H, int KV, float scale, float scale_log2)
{
    const int G = H / KV;
    const size_t smem = tc_layout<S, HD>::BWD;
    allow_smem(attn_bwd_dkdv_tc<S, HD>, smem);
    allow_smem(attn_bwd_dq_tc<S, HD>, smem);
    const dim3 gkv((unsigned)((T + BN - 1) / BN), (unsigned)KV);
    attn_bwd_dkdv_tc<S, HD><<<gkv, BWD_THREADS, smem, cuda_stream()>>>(dk, dv, q, k, v, dout, lse, dsum, cu, nseq, T,
                                                                       H, G, scale, scale_log2);
    CHECK_CUDA_LAUNCH();
    const dim3 gq((unsigned)((T + BM - 1) / BM), (unsigned)H);
    attn_bwd_dq_tc<S, HD><<<gq, BWD_THREADS, smem, cuda_stream()>>>(dq, q, k, v, dout, lse, dsum, cu, nseq, T, H, G,
                                                                    scale, scale_log2);
    CHECK_CUDA_LAUNCH();
}

} // namespace

template <typename S>
void cu_attention_fwd(S *out, float *lse, const S *q, const S *k, const S *v, const int32_t *cu_seqlens, int nseq,
                      int T, int H, int KV, int hd)
{
    check_shape(nseq, T, H, KV, hd);
    if (T == 0)
        return;
    const int G = H / KV;
    const float scale_log2 = (float)(1.0 / sqrt((double)hd)) * LOG2E;
    const void *ptrs[] = {out, q, k, v};
    if (use_tc(hd, ptrs, 4)) {
        if (hd == 64)
            fwd_tc<S, 64>(out, lse, q, k, v, cu_seqlens, nseq, T, H, G, scale_log2);
        else
            fwd_tc<S, 128>(out, lse, q, k, v, cu_seqlens, nseq, T, H, G, scale_log2);
        return;
    }
    attn_fwd_generic<S><<<gen_blocks((long long)T * H), GEN_WARPS * 32, 0, cuda_stream()>>>(
        out, lse, q, k, v, cu_seqlens, nseq, T, H, G, hd, scale_log2);
    CHECK_CUDA_LAUNCH();
}

template <typename S>
void cu_attention_bwd(S *dq, S *dk, S *dv, const S *dout, const S *q, const S *k, const S *v, const S *out,
                      const float *lse, const int32_t *cu_seqlens, int nseq, int T, int H, int KV, int hd)
{
    check_shape(nseq, T, H, KV, hd);
    if (T == 0)
        return;
    const int G = H / KV;
    const float scale = (float)(1.0 / sqrt((double)hd));
    const float scale_log2 = scale * LOG2E;

    const long long rows = (long long)T * H;
    float *dsum = static_cast<float *>(cuda_scratch((size_t)rows * sizeof(float)));
    attn_bwd_dsum<S><<<gen_blocks(rows), GEN_WARPS * 32, 0, cuda_stream()>>>(dsum, dout, out, rows, hd);
    CHECK_CUDA_LAUNCH();

    const void *ptrs[] = {dq, dk, dv, dout, q, k, v};
    if (use_tc(hd, ptrs, 7)) {
        if (hd == 64)
            bwd_tc<S, 64>(dq, dk, dv, dout, q, k, v, lse, dsum, cu_seqlens, nseq, T, H, KV, scale, scale_log2);
        else
            bwd_tc<S, 128>(dq, dk, dv, dout, q, k, v, lse, dsum, cu_seqlens, nseq, T, H, KV, scale, scale_log2);
        return;
    }
    attn_bwd_dkdv_generic<S><<<gen_blocks((long long)T * KV), GEN_WARPS * 32, 0, cuda_stream()>>>(
        dk, dv, q, k, v, dout, lse, dsum, cu_seqlens, nseq, T, H, G, hd, scale, scale_log2);
    CHECK_CUDA_LAUNCH();
    attn_bwd_dq_generic<S><<<gen_blocks(rows), GEN_WARPS * 32, 0, cuda_stream()>>>(
        dq, q, k, v, dout, lse, dsum, cu_seqlens, nseq, T, H, G, hd, scale, scale_log2);
    CHECK_CUDA_LAUNCH();
}

template void cu_attention_fwd<__nv_bfloat16>(__nv_bfloat16 *, float *, const __nv_bfloat16 *,
                                              const __nv_bfloat16 *, const __nv_bfloat16 *, const int32_t *, int,
                                              int, int, int, int);
template void cu_attention_fwd<__half>(__half *, float *, const __half *, const __half *, const __half *,
                                       const int32_t *, int, int, int, int, int);
template void cu_attention_bwd<__nv_bfloat16>(__nv_bfloat16 *, __nv_bfloat16 *, __nv_bfloat16 *,
                                              const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                                              const __nv_bfloat16 *, const __nv_bfloat16 *, const float *,
                                              const int32_t *, int, int, int, int, int);
template void cu_attention_bwd<__half>(__half *, __half *, __half *, const __half *, const __half *, const __half *,
                                       const __half *, const __half *, const float *, const int32_t *, int, int, int,
                                       int, int);
