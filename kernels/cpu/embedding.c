/* Token embedding lookup and its scatter-add backward. */
#include "cpu/real.h"
#include "cpu/cpu_kernels.h"

#include <string.h>

void CPU_FN(cpu_embedding_fwd)(real *out, const int32_t *tokens, const real *table, int T, int D)
{
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; t++)
        memcpy(out + (size_t)t * D, table + (size_t)tokens[t] * D, (size_t)D * sizeof(real));
}

/* Several rows may carry the same token, so rows cannot be split across
 * threads without races. Columns can: each thread owns a block of columns
 * and walks all rows in order, so every element is summed in row order
 * whatever the thread count. */
#define EMB_COL_BLOCK 64

void CPU_FN(cpu_embedding_bwd)(real *dtable, const real *dout, const int32_t *tokens, int T, int D)
{
    int nblocks = (D + EMB_COL_BLOCK - 1) / EMB_COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nblocks; b++) {
        int j0 = b * EMB_COL_BLOCK;
        int j1 = j0 + EMB_COL_BLOCK < D ? j0 + EMB_COL_BLOCK : D;
        for (int t = 0; t < T; t++) {
            real *dst = dtable + (size_t)tokens[t] * D;
            const real *src = dout + (size_t)t * D;
            for (int j = j0; j < j1; j++)
                dst[j] += src[j];
        }
    }
}
