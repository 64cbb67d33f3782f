/* A step's MoE statistics beyond the loss: per expert the tokens it kept,
 * per MoE layer the dropped assignments and the aux and z losses, per
 * sample tag (genre) the experts its tokens choose, and the expert-parallel
 * all-to-all traffic. Summed over the step's micro-batches, then over all
 * ranks; train_log writes them to metrics.jsonl (docs/run-dir.md). */
#ifndef FABULA_TRAIN_MOE_METRICS_H
#define FABULA_TRAIN_MOE_METRICS_H

#include "config/config.h"
#include "model/model.h"
#include "parallel/comm.h"

typedef struct moe_metrics {
    int L, E, ntags;        /* E 0: dense model, nothing recorded */
    long *expert_tokens;    /* [L * E] tokens kept per expert (after dropping) */
    long *dropped;          /* [L] assignments dropped by capacity */
    double *aux, *z;        /* [L] token-weighted over the step's micro-batches */
    long *tag_tokens;       /* [ntags * L * E] top-k choices (before dropping) per tag */
    /* [3 * L]: per layer, over the step's micro-batches on every rank, the
     * count, the sum and the sum of squares of the share of the
     * micro-batch's assignments capacity kept: how far one rank's expert
     * work at a layer differs from another's (docs/plan.md, "Routing
     * spread") */
    double *kept_share;
    /* this rank's all-to-all on the ep group this step (token counts and rows) */
    long a2a_calls;
    double a2a_bytes, a2a_seconds;
    int ep_size;
} moe_metrics_t;

void moe_metrics_init(moe_metrics_t *mm, const model_config_t *mc, int ntags, int ep_size);
void moe_metrics_free(moe_metrics_t *mm);
/* Zeroes the sums and the ep group's comm statistics. */
void moe_metrics_begin_step(moe_metrics_t *mm, comm_t *ep);
/* Adds one micro-batch's statistics; mb_weight as in model_scales_t. */
void moe_metrics_add(moe_metrics_t *mm, const model_stats_t *st, double mb_weight);
/* Sums over the data-parallel group `dp` (collective; the world without
 * tensor parallelism, whose tp ranks hold the same figures) and reads this
 * rank's all-to-all statistics of the step from `ep` (NULL: none). Under
 * pipeline parallelism, called once more with the pp group as `dp`: each
 * stage counted its own layers. */
void moe_metrics_end_step(moe_metrics_t *mm, comm_t *ep, comm_t *dp);

#endif
