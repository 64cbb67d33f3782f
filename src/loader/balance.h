/* Spreading one global step's micro-batches over the data-parallel ranks
 * so that every rank finishes its forward/backward at about the same time.
 *
 * The micro-batches themselves are cut from the step's samples without
 * knowing the number of ranks (step_plan.h, pack.h), so capacity and the
 * router's losses, which are per-micro-batch statistics, see the same tokens
 * on every layout; only which rank runs which micro-batch is decided here.
 * A pure function of (costs, tokens, nranks, per_rank, strategy): every rank
 * runs it on the same input and gets the same assignment, so no
 * communication is needed. Strategies (docs/loader.md):
 *   uniform  micro-batch k goes to rank k mod nranks (the baseline);
 *   greedy   micro-batches by descending tokens, each to the rank holding
 *            the fewest tokens;
 *   lpt      longest processing time: micro-batches by descending cost, each
 *            to the rank with the least cost, where a micro-batch costs the
 *            sum over its samples of
 *                cost(len) = len + c * len^2
 *            counting the linear layers (per token) and causal attention (per
 *            token pair); c = data.attention_cost (by default the model's
 *            L d / N_active, model_attention_cost).
 * greedy and lpt only consider ranks that hold fewer than per_rank
 * micro-batches (gradient_accumulation_steps: every rank runs that many,
 * the ones it is not given empty). Ties: equal keys by micro-batch index;
 * equal loads go to the lower rank index. */
#ifndef FABULA_DATA_BALANCE_H
#define FABULA_DATA_BALANCE_H

#include <stdint.h>

#include "config/config.h"
#include "loader/sampler.h"

typedef struct balance_plan {
    int nranks, per_rank;
    int nbins;            /* micro-batches assigned */
    int *rank_of;         /* rank of micro-batch k */
    int *bins;            /* rank r runs bins[start[r] .. start[r+1]), ascending */
    int *start;           /* nranks + 1 entries */
    double *cost;         /* per rank: sum of its micro-batches' cost */
    int64_t *tokens;      /* per rank: sum of its micro-batches' tokens */
    double imbalance_cost;   /* max/mean - 1 over ranks of cost (0 when nothing is assigned) */
    double imbalance_tokens; /* the same of tokens */
    /* scratch, kept between calls */
    int cap_bins, cap_ranks;
    int *order, *heap, *heap_pos, *cursor;
} balance_plan_t;

static inline double balance_cost(int64_t len, double c) { return (double)len + c * (double)len * (double)len; }

/* Assigns micro-batches 0..nbins) (bin_cost[k], bin_tokens[k] >= 0) to
 * `nranks` ranks, at most per_rank each (nbins <= nranks x per_rank). `p`
 * starts zeroed and may be reused. */
void balance_plan_make(balance_plan_t *p, const double *bin_cost, const int64_t *bin_tokens, int nbins, int nranks,
                       int per_rank, loader_sampler_t strategy);

void balance_plan_free(balance_plan_t *p);

/* order[0..n) = the input positions 0..n-1 by descending length; equal
 * lengths by ascending id, then position (a total order, the same on every
 * rank). The order of pack's best fit. */
void balance_order_by_length(int64_t *order, const int64_t *ids, const int64_t *lens, int64_t n);

/* A step's input: the `ndeferred` samples deferred by the previous step
 * first, then fresh ids from the sampler up to `count` in all. Writes
 * ids[0..count) and returns how many came from the sampler. */
int64_t balance_step_ids(sampler_t *s, const int64_t *deferred, int64_t ndeferred, int64_t count, int64_t *ids);

#endif
