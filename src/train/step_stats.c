#include "train/step_stats.h"

void step_stats_init(step_stats_t *s) { *s = (step_stats_t){0.0, 0.0, 0.0, 0.0, 0.0}; }

void step_stats_add(step_stats_t *s, const model_stats_t *st, double mb_weight, double flops)
{
    s->lm_sum += st->lm_sum;
    s->aux += st->aux * mb_weight;
    s->z += st->z * mb_weight;
    s->dropped += (double)st->dropped;
    s->model_flops += flops;
}

void step_stats_reduce(step_stats_t *s, comm_t *c)
{
    /* one collective for the five sums (an array: the struct's layout is
     * not the wire format) */
    double v[5] = {s->lm_sum, s->aux, s->z, s->dropped, s->model_flops};
    comm_allreduce(c, v, 5, COMM_F64, COMM_SUM);
    *s = (step_stats_t){v[0], v[1], v[2], v[3], v[4]};
}
