/* AdamW (adam_w_mode) or Adam with L2 on the fp32 parameters and moments.
 * The CPU twin is kernels/cpu/adamw.c.
 *
 * A map (cuda_map.cuh): element i depends only on element i, so any
 * assignment of elements to threads gives the same bits. Every operation is
 * an __fmul_rn/__fadd_rn/__fdiv_rn/__fsqrt_rn, so nvcc cannot contract them
 * into FMAs and the update rounds exactly like the CPU twin (compiled
 * without contraction), bit for bit. */
#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "cuda_map.cuh"

#include <math.h>

namespace {

/* ---- AdamW: the CPU twin's operations in its order, each rounded alone ---- */

struct AdamW {
    static constexpr int W = 4;
    float *p;
    const float *g;
    float *m, *v;
    float step_size, bc2_sqrt, decay, l2, one_m_b1, one_m_b2, beta2, eps;
    int adam_w_mode;
    __device__ void f(float &pi, float gi, float &mi, float &vi) const
    {
        if (adam_w_mode)
            pi = __fmul_rn(pi, decay);
        else
            gi = __fadd_rn(gi, __fmul_rn(l2, pi));
        mi = __fadd_rn(mi, __fmul_rn(one_m_b1, __fsub_rn(gi, mi)));
        vi = __fadd_rn(__fmul_rn(vi, beta2), __fmul_rn(one_m_b2, __fmul_rn(gi, gi)));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        pi = __fadd_rn(pi, __fmul_rn(-step_size, __fdiv_rn(mi, denom)));
    }
    __device__ void one(size_t i) const { f(p[i], g[i], m[i], v[i]); }
    __device__ void chunk(size_t i) const
    {
        Pack<float, W> pp = pack_load<float, W>(p + i), gg = pack_load<float, W>(g + i);
        Pack<float, W> mm = pack_load<float, W>(m + i), vv = pack_load<float, W>(v + i);
#pragma unroll
        for (int k = 0; k < W; k++)
            f(pp.e[k], gg.e[k], mm.e[k], vv.e[k]);
        pack_store(p + i, pp);
        pack_store(m + i, mm);
        pack_store(v + i, vv);
    }
};

} // namespace

/* The per-step scalars are formed on the host exactly as the CPU twin forms
 * them (double, rounded once), so both backends use the same fp32 values. */
void cu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
              float weight_decay, int adam_w_mode, long step)
{
    const double bc1 = 1.0 - pow((double)beta1, (double)step);
    const double bc2 = 1.0 - pow((double)beta2, (double)step);
    AdamW op;
    op.p = p;
    op.g = g;
    op.m = m;
    op.v = v;
    op.step_size = (float)((double)lr / bc1);
    op.bc2_sqrt = (float)sqrt(bc2);
    op.decay = (float)(1.0 - (double)lr * (double)weight_decay);
    op.l2 = adam_w_mode ? 0.0f : weight_decay;
    op.one_m_b1 = (float)(1.0 - (double)beta1);
    op.one_m_b2 = (float)(1.0 - (double)beta2);
    op.beta2 = beta2;
    op.eps = eps;
    op.adam_w_mode = adam_w_mode;
    launch_map(op, n, aligned(p, 16) && aligned(g, 16) && aligned(m, 16) && aligned(v, 16));
}
