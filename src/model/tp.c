/* Tensor parallelism's two conjugate operators (docs/parallel.md): the
 * row-parallel matmul whose partial products are summed over the tp group
 * in the forward, and the sum of the input gradient of a column-parallel
 * block in the backward. Without tp both are the single-rank code. */
#include "model/model_impl.h"

void model_tp_allreduce(model_t *m, fb_act *x, size_t n)
{
    if (m->tp_size > 1 && n > 0)
        comm_allreduce(m->tp, x, n, model_act_comm_dtype(m), COMM_SUM);
}

void model_tp_allreduce_f32(model_t *m, float *x, size_t n)
{
    if (m->tp_size > 1 && n > 0)
        comm_allreduce(m->tp, x, n, COMM_F32, COMM_SUM);
}

void model_tp_row_matmul_add(model_t *m, fb_act *y, const fb_act *a, const fb_act *w, int M, int N, int K)
{
    const ops_t *o = m->ops;
    if (m->tp_size == 1) {
        o->matmul(y, a, w, M, N, K, 0, 1, 1.0f);
        return;
    }
    /* the partial product is summed before the residual is added, so the
     * residual is counted once */
    o->matmul(m->dtmp, a, w, M, N, K, 0, 1, 0.0f);
    model_tp_allreduce(m, m->dtmp, (size_t)M * N);
    o->act_axpy(y, m->dtmp, (size_t)M * N, 1.0f);
}
