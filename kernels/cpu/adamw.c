/* One AdamW / Adam step, with PyTorch's order of operations so that the
 * fp32 result matches torch.optim.AdamW (and Adam with weight_decay):
 *   AdamW: p *= 1 - lr wd                 Adam: g += wd p
 *   m = lerp(m, g, 1 - b1)   (torch uses lerp_: m + (1-b1)(g - m))
 *   v = v b2 + (1 - b2) g g
 *   p += -(lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps))
 * with bc1 = 1 - b1^step, bc2 = 1 - b2^step. The per-step scalars are
 * formed in double (torch forms them from Python floats) and rounded once. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

void CPU_FN(cpu_adamw)(real *p, const real *g, real *m, real *v, size_t n, real lr, real beta1, real beta2,
                       real eps, real weight_decay, int adam_w_mode, long step)
{
    double bc1 = 1.0 - pow((double)beta1, (double)step);
    double bc2 = 1.0 - pow((double)beta2, (double)step);
    real step_size = (real)((double)lr / bc1);
    real bc2_sqrt = (real)sqrt(bc2);
    real decay = (real)(1.0 - (double)lr * (double)weight_decay);
    real l2 = adam_w_mode ? (real)0 : weight_decay;
    real one_m_b1 = (real)(1.0 - (double)beta1);
    real one_m_b2 = (real)(1.0 - (double)beta2);

    /* Two loops without a branch and restrict pointers, so that the
     * compiler vectorises each (with the kernels' -fno-math-errno); the
     * operations and their order are the same in both, element by element,
     * so the result does not depend on the vector width or thread count. */
    real *restrict pp = p, *restrict mm = m, *restrict vv = v;
    const real *restrict gg = g;
    if (adam_w_mode) {
#pragma omp parallel for simd schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
        for (size_t i = 0; i < n; i++) {
            const real gi = gg[i];
            const real pi = pp[i] * decay;
            const real mi = mm[i] + one_m_b1 * (gi - mm[i]);
            const real vi = vv[i] * beta2 + one_m_b2 * (gi * gi);
            mm[i] = mi;
            vv[i] = vi;
            pp[i] = pi + (-step_size) * (mi / (R_SQRT(vi) / bc2_sqrt + eps));
        }
    } else {
#pragma omp parallel for simd schedule(static) if (n >= CPU_PAR_MIN_ELEMS)
        for (size_t i = 0; i < n; i++) {
            const real gi = gg[i] + l2 * pp[i];
            const real mi = mm[i] + one_m_b1 * (gi - mm[i]);
            const real vi = vv[i] * beta2 + one_m_b2 * (gi * gi);
            mm[i] = mi;
            vv[i] = vi;
            pp[i] = pp[i] + (-step_size) * (mi / (R_SQRT(vi) / bc2_sqrt + eps));
        }
    }
}
