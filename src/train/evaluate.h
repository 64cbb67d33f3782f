/* The validation loss: the LM loss of a model on N samples of a split
 * (stratified over its novels and genres), overall and per genre, on all
 * ranks together. The same function
 * runs inside training (run.eval_interval) and in `fabula eval`, so the
 * two give the same digits on the same checkpoint. */
#ifndef FABULA_TRAIN_EVALUATE_H
#define FABULA_TRAIN_EVALUATE_H

#include <jansson.h>
#include <stdint.h>

#include "loader/batch.h"
#include "loader/data_source.h"
#include "model/model.h"
#include "train/pipeline.h"
#include "tokenizer/bytetok.h"

typedef struct eval_result {
    double lm_loss;                    /* mean token cross-entropy (nats); NaN: no target */
    double ppl;                        /* exp(lm_loss) */
    long samples;
    double targets;                    /* target tokens scored */
    long genre_samples[BYTETOK_NGENRES];
    double genre_targets[BYTETOK_NGENRES];
    double genre_lm_loss[BYTETOK_NGENRES]; /* NaN for a genre without targets */
} eval_result_t;

/* Collective over the world. The first n samples (n at most src->n) of
 * `src`'s evaluation order (data_source_eval_order: spread over every novel
 * and genre, the same set every time): one sample per forward, the i-th on
 * rank i mod world of the data-parallel
 * group `dp` (the world without tensor parallelism; the tp ranks of one dp
 * rank run its forwards together and count once), so every sample's
 * loss is the same on any layout (capacity is per micro-batch) and only the
 * order of the final sum differs. All ranks run the same number of forwards
 * (empty ones at the end): the ep exchanges and ZeRO-3 gathers need every
 * rank. No gradient, no dropout. `batch` is a reusable buffer. */
void evaluate_split(model_t *model, data_source_t *src, batch_t *batch, int64_t n, comm_t *dp, eval_result_t *out);
/* The same under pipeline parallelism, collective over the world too: each
 * sample's forward passes through the stages of `pp` in order (the step's
 * transfers, pipeline.h; one sample in flight, no overlap: validation is a
 * small share of the run), the loss taken on the last stage and summed over
 * `pp`, so that every rank holds it. `dp`: this stage's data-parallel group. */
void evaluate_split_pipeline(pipeline_t *pipe, comm_t *pp, data_source_t *src, batch_t *batch, int64_t n,
                             comm_t *dp, eval_result_t *out);

/* "valid_ppl" and "valid_genre_lm_loss" ({genre: loss}, the genres with
 * targets) into a metrics record; "valid_lm_loss" is the caller's. */
void evaluate_json(json_t *record, const eval_result_t *r);

/* "step S | validation lm loss L | ppl P | fantasy L1, romance L2, ...". */
void evaluate_print(long step, const eval_result_t *r);

#endif
