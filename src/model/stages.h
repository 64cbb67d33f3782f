/* Which layers each pipeline stage holds (docs/parallel.md, "Pipeline
 * parallelism"). */
#ifndef FABULA_MODEL_STAGES_H
#define FABULA_MODEL_STAGES_H

#include "config/config.h"

/* The cost the balanced split evens out: a layer's matmul weights that a
 * token passes through (attention, and the dense FFN or the router and
 * top-k experts, as model_active_params counts them); the first stage adds
 * the embedding's V D, the last the head's V D (and its loss). */
double model_stage_layer_cost(const model_config_t *mc, int l);

/* Stage s of pp holds layers [first[s], first[s + 1]) (first[0] = 0,
 * first[pp] = num_hidden_layers, each at least one layer): `layers` [pp]
 * given (parallel.pipeline_layers, summing to the layers), else the
 * contiguous split that minimises the largest stage cost above (ties: the
 * one found first, moving layers to earlier stages). 1 <= pp <= layers. */
void model_stage_split(const model_config_t *mc, int pp, const int *layers, int *first);

/* Interleaved 1F1B (parallel.virtual_pipeline_stages = v > 1): the layers
 * are cut into pp v chunks (model_stage_split over pp v "stages", balanced
 * by cost) and stage s holds chunks s, s + pp, s + 2 pp, ...: its chunk c
 * is layers [lo[c], hi[c]) of split chunk c pp + s. v = 1: the one run of
 * model_stage_split over pp (pc->pipeline_layers when given). Returns the
 * number of chunks (v). */
int model_stage_chunks(const model_config_t *mc, const parallel_config_t *pc, int stage, int *lo, int *hi);

/* The pipeline's order on a stage of pp with v chunks (train/pipeline.h):
 * the k-th forward (backward) pass is of *mb = (k / (pp v)) pp + k % pp and
 * *chunk = (k % (pp v)) / pp (backward: v - 1 minus that; v = 1: mb k,
 * chunk 0). */
void model_stage_order(int pp, int v, int k, int backward, int *mb, int *chunk);
/* The forwards stage s runs before its first backward: 1F1B's pp - s - 1,
 * interleaved 2 (pp - s - 1) + (v - 1) pp (Megatron), at most nmicro v. */
int model_stage_warmup(int pp, int v, int stage, int nmicro);
/* The micro-batches stage s holds between their first forward and their
 * last backward at once, each on a model of its own: 1F1B min(pp - s,
 * nmicro); interleaved, the most the order above keeps (its micro-batches
 * start and finish in order, so the live ones are consecutive). */
int model_stage_inflight(int pp, int v, int stage, int nmicro);

#endif
