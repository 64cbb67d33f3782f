/* Rotary position embedding, Hugging Face Llama (rotate_half) layout. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

/* Rotates every head of row t by the angles of pos[t]; dir = +1 is the
 * forward rotation, -1 its transpose (the backward of a rotation). The
 * frequencies follow HF: inv_freq_i = 1 / theta^(2i/hd), angle = pos * inv_freq
 * in the kernel's precision. */
static void rope_apply(real *x, const int32_t *pos, int T, int nheads, int hd, real theta, real dir)
{
    int half = hd / 2;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        real *row = x + (size_t)t * nheads * hd;
        for (int i = 0; i < half; i++) {
            real inv_freq = (real)1 / R_POW(theta, (real)(2 * i) / (real)hd);
            real a = (real)pos[t] * inv_freq;
            real c = R_COS(a), s = dir * R_SIN(a);
            for (int h = 0; h < nheads; h++) {
                real *xh = row + (size_t)h * hd;
                real x1 = xh[i], x2 = xh[i + half];
                xh[i] = x1 * c - x2 * s;
                xh[i + half] = x2 * c + x1 * s;
            }
        }
    }
}

void CPU_FN(cpu_rope_fwd)(real *x, const int32_t *pos, int T, int nheads, int hd, real theta)
{
    rope_apply(x, pos, T, nheads, hd, theta, (real)1);
}

void CPU_FN(cpu_rope_bwd)(real *dx, const int32_t *pos, int T, int nheads, int hd, real theta)
{
    rope_apply(dx, pos, T, nheads, hd, theta, (real)-1);
}
