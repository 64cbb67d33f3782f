/* A step's loss figures, summed over its micro-batches and then over the
 * ranks that hold parts of them: the one accumulator both schedules of the
 * step (one stage, or the pipeline's 1F1B) feed, so the loss of a step is
 * computed the same way on every layout (docs/model.md, "Losses"). */
#ifndef FABULA_TRAIN_STEP_STATS_H
#define FABULA_TRAIN_STEP_STATS_H

#include "model/model.h"
#include "parallel/comm.h"

typedef struct step_stats {
    double lm_sum;      /* token losses (nats), not yet over the step's targets */
    double aux, z;      /* each micro-batch's mean over MoE layers, weighted by its share of the tokens */
    double dropped;     /* assignments dropped by capacity (a double: summed with the rest) */
    double model_flops; /* of the micro-batches (docs/monitoring.md, "MFU") */
} step_stats_t;

void step_stats_init(step_stats_t *s);
/* One micro-batch pass's figures: st from model_forward, mb_weight as in
 * model_scales_t, flops the pass's model FLOPs (0 where another pass of
 * the same micro-batch counts them). */
void step_stats_add(step_stats_t *s, const model_stats_t *st, double mb_weight, double flops);
/* Sums over `c` (collective): the ranks that hold the other parts of the
 * step (data-parallel shares, pipeline stages). */
void step_stats_reduce(step_stats_t *s, comm_t *c);

#endif
