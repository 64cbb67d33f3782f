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
 * which stays the caller's): stage s keeps min(pp - s, nmicro) micro-batches
 * in flight, so it makes one sibling of m fewer (model_create_sibling); with v > 1
 * chunks (interleaved; nmicro, the micro-batches of every step, a multiple
 * of pp) as many as its order keeps in flight (pipeline_slots). */
pipeline_t *pipeline_create(model_t *m, comm_t *pp, int max_tokens, int nmicro);
void pipeline_free(pipeline_t *p);
int pipeline_stage(const pipeline_t *p);
int pipeline_stages(const pipeline_t *p);

/* The model micro-batch mb runs on (the same one for its forward and its
 * backward, all chunks'). */
model_t *pipeline_model(pipeline_t *p, int mb);
/* The same, set to run chunk `chunk` (model_set_chunk). */
model_t *pipeline_chunk_model(pipeline_t *p, int mb, int chunk);
/* The model the backward of micro-batch mb runs on: pipeline_chunk_model's,
 * the one its forward ran on (but under the test-only defect
 * pp_microbatch_order, docs/testing.md). */
model_t *pipeline_backward_model(pipeline_t *p, int mb, int chunk);
/* Interleaved stages (m a model_create_chunks model of v chunks): v, the
 * models kept (one per micro-batch in flight), and whether chunk c's pass
 * receives its input from another stage (every one but the first stage's
 * chunk 0) and sends its output on (every one but the last stage's last). */
int pipeline_chunks(const pipeline_t *p);
int pipeline_slots(const pipeline_t *p);
int pipeline_has_prev(const pipeline_t *p, int chunk);
int pipeline_has_next(const pipeline_t *p, int chunk);

/* The 1F1B order on this stage: stage s runs the forwards of micro-batches
 * 0 .. w-1 (w = min(pp - s - 1, nmicro)), then alternates the forward of
 * mb + w and the backward of mb, then the remaining backwards; fwd(ctx, mb,
 * chunk) and bwd(ctx, mb, chunk) do the work between the transfers below.
 * Interleaved (v chunks): the same over the nmicro v passes in Megatron's
 * order (the k-th forward is of micro-batch (k / (pp v)) pp + k % pp and
 * chunk (k % (pp v)) / pp, the k-th backward of chunk v - 1 minus that),
 * w = min(2 (pp - s - 1) + (v - 1) pp, nmicro v); chunk is 0 otherwise. */
void pipeline_run(pipeline_t *p, int nmicro, void (*fwd)(void *ctx, int mb, int chunk),
                  void (*bwd)(void *ctx, int mb, int chunk), void *ctx);

/* Chunk `chunk` of micro-batch mb of T tokens (every stage knows T from the
 * step plan): before its forward a pass with pipeline_has_prev receives its
 * input (from the previous stage's same chunk; the first stage's from the
 * last stage's previous chunk), after it one with pipeline_has_next sends
 * its output on; before its backward one with pipeline_has_next receives
 * d(output), after it one with pipeline_has_prev sends d(input) back. Each
 * sets pipeline_model(p, mb) to the chunk. Sends do not block;
 * pipeline_end_step waits for them. */
void pipeline_recv_input(pipeline_t *p, int mb, int chunk, int T);
void pipeline_send_output(pipeline_t *p, int mb, int chunk, int T);
void pipeline_recv_grad(pipeline_t *p, int mb, int chunk, int T);
void pipeline_send_grad(pipeline_t *p, int mb, int chunk, int T);
void pipeline_end_step(pipeline_t *p);

/* Seconds this stage waited on the pipeline since the last call (receives
 * and the step's last sends: the bubble, plus the transfers), and resets. */
double pipeline_take_wait(pipeline_t *p);

#endif
