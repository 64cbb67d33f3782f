/* The sampler alone, run for many steps on a list of sample lengths, as if
 * on `nranks` data-parallel ranks: the imbalance each strategy would give and
 * the packing efficiency of the micro-batches (`fabula plan sampler`).
 *
 * Each step offers nranks * per_rank samples: the previous step's deferred
 * ones first, then fresh ids from a sampler seeded with `seed`
 * (balance_step_ids). balance_plan_make spreads them with the budget
 * accum * capacity tokens per rank. uniform and greedy are run for their
 * imbalance only; lpt is run once per packer, each rank's samples packed
 * into at most `accum` micro-batches of `capacity` tokens. Whatever the
 * balancer or the packer defers is offered again first in the next step, so
 * nothing is lost and the offer stays nranks * per_rank samples. */
#ifndef FABULA_DATA_BALANCE_SIM_H
#define FABULA_DATA_BALANCE_SIM_H

#include <stdint.h>

#include "config/config.h"

#define BALANCE_NSTRATEGIES 3 /* indexed by loader_sampler_t */
#define PACK_NSTRATEGIES 2    /* indexed by loader_packing_t */

typedef struct balance_sim_opts {
    int nranks;
    int per_rank;         /* samples per rank per step (global batch = nranks * per_rank) */
    long steps;
    int64_t capacity;     /* tokens per micro-batch (max_tokens_per_batch) */
    int accum;            /* micro-batches per rank per step */
    int64_t max_seq_len;  /* what a padded loader pads each sample to */
    double c;             /* attention cost */
    uint64_t seed;
} balance_sim_opts_t;

typedef struct balance_sim_stats {
    /* per balance strategy, over the steps */
    double imb_cost_mean[BALANCE_NSTRATEGIES], imb_cost_max[BALANCE_NSTRATEGIES];
    double imb_tokens_mean[BALANCE_NSTRATEGIES], imb_tokens_max[BALANCE_NSTRATEGIES];
    int64_t deferred[BALANCE_NSTRATEGIES];      /* samples carried to the next step (budget, and for
                                                   lpt the best_fit packer), summed over steps */
    /* per packing strategy, on lpt's assignment */
    int64_t pack_tokens[PACK_NSTRATEGIES];      /* tokens packed */
    int64_t pack_bins[PACK_NSTRATEGIES];        /* micro-batches used */
    int64_t pack_deferred[PACK_NSTRATEGIES];    /* samples that found no room */
    double pack_efficiency[PACK_NSTRATEGIES];   /* pack_tokens / (pack_bins * capacity) */
    /* the padded baseline: the samples best_fit packed, each padded */
    int64_t samples, tokens;
    double padded_efficiency;                   /* tokens / (samples * max_seq_len) */
} balance_sim_stats_t;

/* lens[0..n): sample lengths, each in [1, min(max_seq_len, capacity)]. */
void balance_sim_run(const int64_t *lens, int64_t n, const balance_sim_opts_t *o, balance_sim_stats_t *st);

#endif
