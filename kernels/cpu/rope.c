/* Rotary position embedding, Hugging Face Llama (rotate_half) layout. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

#include <stdlib.h>

#include "util/error.h"

/* Rotates every head of row t by the angles of pos[t]; dir = +1 is the
 * forward rotation, -1 its transpose (the backward of a rotation). The
 * frequencies follow HF: inv_freq_i = 1 / theta^(2i/hd), angle = pos * inv_freq
 * in the kernel's precision.
 *
 * The frequencies are formed once per call and each row's cos/sin once per
 * row (the same libm calls on the same arguments as one per element, so
 * the same bits); what is left per head is a loop over i with the two
 * halves contiguous, which the compiler vectorises. */
static void rope_apply(real *x, const int32_t *pos, int T, int nheads, int hd, real theta, real dir)
{
    const int half = hd / 2;
    if (T <= 0 || half <= 0)
        return;
    real *inv_freq = fb_malloc((size_t)half * sizeof *inv_freq);
    for (int i = 0; i < half; i++)
        inv_freq[i] = (real)1 / R_POW(theta, (real)(2 * i) / (real)hd);
#pragma omp parallel if (T > 1)
    {
        real *cs = fb_malloc(2 * (size_t)half * sizeof *cs);
        real *restrict c = cs, *restrict s = cs + half;
#pragma omp for schedule(static)
        for (int t = 0; t < T; t++) {
            real *row = x + (size_t)t * nheads * hd;
            for (int i = 0; i < half; i++) {
                real a = (real)pos[t] * inv_freq[i];
                c[i] = R_COS(a);
                s[i] = dir * R_SIN(a);
            }
            for (int h = 0; h < nheads; h++) {
                real *restrict x1 = row + (size_t)h * hd;
                real *restrict x2 = x1 + half;
#pragma omp simd
                for (int i = 0; i < half; i++) {
                    real a1 = x1[i], a2 = x2[i];
                    x1[i] = a1 * c[i] - a2 * s[i];
                    x2[i] = a2 * c[i] + a1 * s[i];
                }
            }
        }
        free(cs);
    }
    free(inv_freq);
}

void CPU_FN(cpu_rope_fwd)(real *x, const int32_t *pos, int T, int nheads, int hd, real theta)
{
    rope_apply(x, pos, T, nheads, hd, theta, (real)1);
}

void CPU_FN(cpu_rope_bwd)(real *dx, const int32_t *pos, int T, int nheads, int hd, real theta)
{
    rope_apply(dx, pos, T, nheads, hd, theta, (real)-1);
}
