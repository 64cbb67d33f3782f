/* A step's samples -> micro-batches of at most `capacity` tokens
 * (data.max_tokens_per_batch), without padding. The step plan packs the
 * whole global batch at once, into at most gradient_accumulation_steps x
 * data-parallel ranks micro-batches (a number that does not depend on the
 * layout), before the balancer hands them to ranks.
 *
 * Strategies (docs/loader.md):
 *   sequential  samples in the given order; a new micro-batch starts when the
 *               next sample does not fit the current one;
 *   best_fit    best-fit decreasing: samples by descending length (ties by
 *               id, then input position), each into the open micro-batch
 *               with the least room left that still fits it (the lower
 *               index among equals), else into a new one;
 *   balanced    for few micro-batches per rank: min(max_bins, n)
 *               micro-batches, all used; samples in best_fit's order, each
 *               into the micro-batch of least cost len + c·len² that still
 *               has room (the lower index among equals), so that whole
 *               micro-batches cost about the same and the balancer can even
 *               out ranks that run one or two each. Needs max_bins > 0.
 * At most `max_bins` micro-batches are opened (<= 0: no limit). A sample that
 * finds no room once max_bins are open is deferred: returned in `deferred`
 * (input order) for the caller to put first in the next step.
 *
 * Output: micro-batch k holds ids[start[k] .. start[k+1]) in input order,
 * ready for batch_pack (which lays out cu_seqlens, positions and targets). */
#ifndef FABULA_DATA_PACK_H
#define FABULA_DATA_PACK_H

#include <stdint.h>

#include "config/config.h"
#include "loader/fit_tree.h"

typedef struct pack_plan {
    int nbins;            /* micro-batches used (none empty) */
    int64_t capacity;
    int64_t n;            /* samples packed */
    int64_t *ids;         /* micro-batch after micro-batch */
    int64_t *lens;        /* lengths of ids[] */
    int64_t *start;       /* nbins + 1 entries */
    int64_t *bin_tokens;  /* tokens in each micro-batch (<= capacity) */
    int64_t tokens;       /* sum of bin_tokens */
    int64_t ndeferred;
    int64_t *deferred;    /* input order */
    int64_t *deferred_lens;
    /* scratch, kept between calls */
    int64_t cap_n, cap_bins;
    int64_t *order;
    int *bin_of;
    int64_t *cursor;
    fit_tree_t open;      /* best_fit: the open micro-batches by room */
    double *bin_cost;     /* balanced: cost so far of each micro-batch */
} pack_plan_t;

/* Packs ids[0..n) (lens[i] the length of ids[i], in [1, capacity]). `p`
 * starts zeroed and may be reused. */
void pack_plan_make(pack_plan_t *p, const int64_t *ids, const int64_t *lens, int64_t n, int64_t capacity, int max_bins,
                    loader_packing_t strategy, double attention_cost);

/* Real tokens / token slots of the micro-batches used:
 * tokens / (nbins * capacity); 0 when nothing was packed. */
double pack_plan_efficiency(const pack_plan_t *p);

/* What a padded loader gets from the same samples, each padded to
 * max_seq_len: tokens / (nsamples * max_seq_len). */
double pack_padded_efficiency(int64_t tokens, int64_t nsamples, int64_t max_seq_len);

void pack_plan_free(pack_plan_t *p);

#endif
