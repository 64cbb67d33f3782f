/* The training step plan run for a number of steps as if on `nranks`
 * data-parallel ranks, summed up (`fabula plan sampler`). Every rank of a
 * job computes the whole global plan, so one plan at rank 0 of nranks sees
 * what train would see on any rank: the same sampler or curriculum, the
 * same packer, balancer, warm-up cap and deferrals, step after step. */
#ifndef FABULA_LOADER_STEP_PLAN_STATS_H
#define FABULA_LOADER_STEP_PLAN_STATS_H

#include <stdint.h>

#include "config/config.h"

typedef struct step_plan_stats {
    long steps;
    double imb_cost_mean, imb_cost_max;     /* the balancer's max/mean - 1 of cost, over the steps */
    double imb_tokens_mean, imb_tokens_max; /* the same of tokens */
    int64_t deferred;                       /* samples carried to the next step, summed over steps */
    int64_t bins;                           /* micro-batches used, summed over steps */
    int64_t bins_max;                       /* the most in one step */
    int64_t samples, tokens;                /* trained on (tokens after the warm-up cap) */
    double packing;                         /* tokens / (bins x data.max_tokens_per_batch) */
} step_plan_stats_t;

/* Plans steps 0 .. steps-1 of the run `cfg` describes (read as
 * step_plan_init reads it) on nranks ranks, over a corpus whose sample i is
 * lens[i] tokens long. */
void step_plan_stats_run(const config_t *cfg, const int64_t *lens, int64_t nsamples, int nranks, long steps,
                         step_plan_stats_t *st);

#endif
