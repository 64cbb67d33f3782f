/* Attention of a few new rows against a KV cache (ops_t.decode_attention):
 * the generation step of src/infer, fp32 only (the training never calls it,
 * so it has no fp64 twin).
 *
 * One (row, head) pair is one work item with a fixed order of operations:
 * scores over the cached keys, a max-shifted softmax, then the weighted sum
 * of the values. Items split over the threads and every output element
 * belongs to one item, so the result does not depend on the thread count.
 * A decode step has n = 1 and a short row per head: plain loops beat a BLAS
 * call there, and the prefill (past 0) goes through attention_fwd anyway;
 * threads join only once the cache is long enough to pay for them.
 */
#include "cpu/cpu_kernels.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "util/error.h"

void cpu_decode_attention_f32(float *out, const float *q, const float *kc, const float *vc, int n, int past, int H,
                              int KV, int hd)
{
    FB_ASSERT(KV > 0 && H % KV == 0 && n >= 0 && past >= 0);
    const int G = H / KV, qs = H * hd, ks = KV * hd, total = past + n;
    const float scale = 1.0f / sqrtf((float)hd);
    const int items = n * H;
    /* A short cache is less work than waking the threads (and, on a loaded
     * machine, than waiting for a descheduled one at the barrier). */
    const double work = (double)items * total * hd;
#pragma omp parallel if (items > 1 && work >= (double)(1 << 18))
    {
        float *p = fb_malloc((size_t)(total > 0 ? total : 1) * sizeof *p);
#pragma omp for schedule(static)
        for (int it = 0; it < items; it++) {
            const int i = it / H, h = it % H, len = past + i + 1;
            const float *qr = q + (size_t)i * qs + (size_t)h * hd;
            const float *kb = kc + (size_t)(h / G) * hd, *vb = vc + (size_t)(h / G) * hd;
            float mx = -INFINITY;
            for (int s = 0; s < len; s++) {
                const float *kr = kb + (size_t)s * ks;
                float dot = 0.0f;
                for (int d = 0; d < hd; d++)
                    dot += qr[d] * kr[d];
                p[s] = dot * scale;
                if (p[s] > mx)
                    mx = p[s];
            }
            float sum = 0.0f;
            for (int s = 0; s < len; s++) {
                p[s] = expf(p[s] - mx);
                sum += p[s];
            }
            float *o = out + (size_t)i * qs + (size_t)h * hd;
            for (int d = 0; d < hd; d++)
                o[d] = 0.0f;
            const float inv = 1.0f / sum;
            for (int s = 0; s < len; s++) {
                const float w = p[s] * inv;
                const float *vr = vb + (size_t)s * ks;
                for (int d = 0; d < hd; d++)
                    o[d] += w * vr[d];
            }
        }
        free(p);
    }
}
