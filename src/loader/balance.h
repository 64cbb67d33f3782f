/* Spreading one global step's samples over the data-parallel ranks so that
 * every rank finishes its forward/backward at about the same time.
 *
 * A pure function of (ids, lengths, nranks, strategy, c, budget): every rank
 * runs it on the same input and gets the same assignment, so no
 * communication is needed. Strategies (docs/loader.md):
 *   uniform  sample i of the step goes to rank i mod nranks (torch's
 *            DistributedSampler: the baseline);
 *   greedy   samples by descending length, each to the rank holding the
 *            fewest tokens;
 *   lpt      longest processing time: samples by descending cost, each to
 *            the rank with the least cost, where
 *                cost(len) = len + c * len^2
 *            counts the linear layers (per token) and causal attention (per
 *            token pair); c = data.attention_cost (by default the model's
 *            L d / N_active, model_attention_cost).
 * Ties: equal keys sort by sample id, then by position in the input; equal
 * loads go to the lower rank index.
 *
 * Budget: no rank may hold more than `budget` tokens (max_tokens_per_batch x
 * gradient_accumulation_steps). A sample that would overflow its chosen rank
 * goes to the least-loaded rank that can still take it; if none can, it is
 * deferred: returned in `deferred` (input order) for the caller to put first
 * in the next step. */
#ifndef FABULA_DATA_BALANCE_H
#define FABULA_DATA_BALANCE_H

#include <stdint.h>

#include "config/config.h"
#include "loader/sampler.h"

typedef struct balance_plan {
    int nranks;
    int64_t n;            /* samples assigned (n_input - ndeferred) */
    int64_t *ids;         /* rank r holds ids[start[r] .. start[r+1]), in input order */
    int64_t *lens;        /* the lengths of ids[], same layout */
    int64_t *start;       /* nranks + 1 entries */
    double *cost;         /* per rank: sum of cost(len) */
    int64_t *tokens;      /* per rank: sum of len */
    int64_t ndeferred;
    int64_t *deferred;    /* ids that fit no rank's budget, in input order */
    int64_t *deferred_lens;
    double imbalance_cost;   /* max/mean - 1 over ranks of cost (0 when nothing is assigned) */
    double imbalance_tokens; /* the same of tokens */
    /* scratch, kept between calls */
    int64_t cap_n;
    int cap_ranks;
    int64_t *order;
    int *rank_of;
    int *heap, *heap_pos;
    int64_t *cursor;
} balance_plan_t;

static inline double balance_cost(int64_t len, double c) { return (double)len + c * (double)len * (double)len; }

/* Assigns ids[0..n) (lens[i] the length of ids[i], >= 1) to `nranks` ranks.
 * budget <= 0: no budget. A length above a positive budget is an internal
 * error (the config refuses data.seq_len > max_tokens_per_batch). `p` starts
 * zeroed and may be reused. */
void balance_plan_make(balance_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, int nranks,
                       loader_sampler_t strategy, double c, int64_t budget);

void balance_plan_free(balance_plan_t *p);

/* order[0..n) = the input positions 0..n-1 by descending length; equal
 * lengths by ascending id, then position (a total order, the same on every
 * rank). The order of greedy and lpt, and of pack's best fit. */
void balance_order_by_length(int64_t *order, const int64_t *ids, const int64_t *lens, int64_t n);

/* A step's input: the `ndeferred` samples deferred by the previous step
 * first, then fresh ids from the sampler up to `count` in all. Writes
 * ids[0..count) and returns how many came from the sampler. */
int64_t balance_step_ids(sampler_t *s, const int64_t *deferred, int64_t ndeferred, int64_t count, int64_t *ids);

#endif
