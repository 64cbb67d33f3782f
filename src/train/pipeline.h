/* Pipeline parallelism's step (docs/parallel.md, "Pipeline parallelism"):
 * the 1F1B order of a step's micro-batches on one stage, the activations
 * and their gradients between consecutive stages, and one model (its own
 * activations, the stage's shared parameters) per micro-batch in flight. */
#ifndef FABULA_TRAIN_PIPELINE_H
#define FABULA_TRAIN_PIPELINE_H

#include "model/model.h"
#include "parallel/comm.h"

typedef struct pipeline pipeline_t;

/* Stage comm_rank(pp) of comm_size(pp) >= 2 around `m` (the stage's model,
 * which stays the caller's): stage s keeps pp - s micro-batches in flight,
 * so it makes pp - s - 1 siblings of m (model_create_sibling). */
pipeline_t *pipeline_create(model_t *m, comm_t *pp, int max_tokens);
void pipeline_free(pipeline_t *p);
int pipeline_stage(const pipeline_t *p);
int pipeline_stages(const pipeline_t *p);

/* The model micro-batch mb runs on (the same one for its forward and its
 * backward). */
model_t *pipeline_model(pipeline_t *p, int mb);

/* The 1F1B order on this stage: stage s runs the forwards of micro-batches
 * 0 .. w-1 (w = min(pp - s - 1, nmicro)), then alternates the forward of
 * mb + w and the backward of mb, then the remaining backwards; fwd(ctx, mb)
 * and bwd(ctx, mb) do the work between the transfers below. */
void pipeline_run(pipeline_t *p, int nmicro, void (*fwd)(void *ctx, int mb), void (*bwd)(void *ctx, int mb),
                  void *ctx);

/* Micro-batch mb of T tokens (every stage knows T from the step plan):
 * before its forward a stage after the first receives its input, after it
 * a stage before the last sends its output; before its backward a stage
 * before the last receives d(output), after it a stage after the first
 * sends d(input). Sends do not block; pipeline_end_step waits for them. */
void pipeline_recv_input(pipeline_t *p, int mb, int T);
void pipeline_send_output(pipeline_t *p, int mb, int T);
void pipeline_recv_grad(pipeline_t *p, int mb, int T);
void pipeline_send_grad(pipeline_t *p, int mb, int T);
void pipeline_end_step(pipeline_t *p);

/* Seconds this stage waited on the pipeline since the last call (receives
 * and the step's last sends: the bubble, plus the transfers), and resets. */
double pipeline_take_wait(pipeline_t *p);

#endif
