/* The stage's side of the pipeline. Activations cross between stages
 * through host buffers (the CPU backend's are the model's own; a copy
 * either way), one per model in flight and direction, so that a send
 * still in progress is never overwritten: a model's next send waits for
 * its previous one first. Sends never block, receives do; with the 1F1B
 * order that cannot deadlock (every receive's send is issued by a stage
 * that reaches it without waiting on the receiver). The interleaved order
 * is Megatron's, which runs with its sends and receives paired and waited
 * on together; here the sends wait less and each receive comes no earlier,
 * so it cannot deadlock either (tests/e2e/pp_invariance.sh runs pp 2 and
 * 4 under a timeout). */
#include "train/pipeline.h"

#include <stdlib.h>

#include "model/stages.h"
#include "util/timer.h"
#include "util/error.h"
#include "util/test_defect.h"

struct pipeline {
    comm_t *pp;
    int stage, nstages, nslots, nchunks;
    model_t **slot;             /* slot[0] the caller's model */
    char **out_buf, **grad_buf; /* host staging per slot */
    comm_request_t **out_req, **grad_req;
    char *in_buf;               /* host staging of what arrives */
    size_t max_bytes;
    double wait;
};

/* A message's tag: the micro-batch, the receiving chunk and the direction
 * (forward even). */
static int tag(const pipeline_t *p, int mb, int chunk, int backward)
{
    return 2 * (mb * p->nchunks + chunk) + backward;
}

/* The order (model/stages.h): the k-th forward or backward's micro-batch
 * and chunk, and the forwards before the first backward. */
static int order_mb(const pipeline_t *p, int k)
{
    int mb, chunk;
    model_stage_order(p->nstages, p->nchunks, k, 0, &mb, &chunk);
    return mb;
}

static int order_chunk(const pipeline_t *p, int k, int backward)
{
    int mb, chunk;
    model_stage_order(p->nstages, p->nchunks, k, backward, &mb, &chunk);
    return chunk;
}

static int warmup(const pipeline_t *p, int nmicro)
{
    return model_stage_warmup(p->nstages, p->nchunks, p->stage, nmicro);
}

pipeline_t *pipeline_create(model_t *m, comm_t *pp, int max_tokens, int nmicro)
{
    FB_ASSERT(comm_size(pp) >= 2);
    pipeline_t *p = fb_calloc(1, sizeof *p);
    p->pp = pp;
    p->stage = comm_rank(pp);
    p->nstages = comm_size(pp);
    p->nchunks = model_chunks(m);
    FB_ASSERT(p->nchunks == 1 || nmicro % p->nstages == 0);
    p->nslots = model_stage_inflight(p->nstages, p->nchunks, p->stage, nmicro);
    p->slot = fb_calloc((size_t)p->nslots, sizeof *p->slot);
    p->out_buf = fb_calloc((size_t)p->nslots, sizeof *p->out_buf);
    p->grad_buf = fb_calloc((size_t)p->nslots, sizeof *p->grad_buf);
    p->out_req = fb_calloc((size_t)p->nslots, sizeof *p->out_req);
    p->grad_req = fb_calloc((size_t)p->nslots, sizeof *p->grad_req);
    p->max_bytes = model_stage_bytes(m, max_tokens);
    p->slot[0] = m;
    for (int s = 1; s < p->nslots; s++)
        p->slot[s] = model_create_sibling(m);
    for (int s = 0; s < p->nslots; s++) {
        p->out_buf[s] = fb_malloc(p->max_bytes ? p->max_bytes : 1);
        p->grad_buf[s] = fb_malloc(p->max_bytes ? p->max_bytes : 1);
    }
    p->in_buf = fb_malloc(p->max_bytes ? p->max_bytes : 1);
    return p;
}

void pipeline_free(pipeline_t *p)
{
    if (!p)
        return;
    pipeline_end_step(p);
    for (int s = 0; s < p->nslots; s++) {
        if (s > 0)
            model_free(p->slot[s]);
        free(p->out_buf[s]);
        free(p->grad_buf[s]);
    }
    free(p->slot);
    free(p->out_buf);
    free(p->grad_buf);
    free(p->out_req);
    free(p->grad_req);
    free(p->in_buf);
    free(p);
}

int pipeline_stage(const pipeline_t *p) { return p->stage; }
int pipeline_stages(const pipeline_t *p) { return p->nstages; }
int pipeline_chunks(const pipeline_t *p) { return p->nchunks; }
int pipeline_slots(const pipeline_t *p) { return p->nslots; }
int pipeline_has_prev(const pipeline_t *p, int chunk) { return p->stage > 0 || chunk > 0; }
int pipeline_has_next(const pipeline_t *p, int chunk) { return p->stage < p->nstages - 1 || chunk < p->nchunks - 1; }

/* At most nslots consecutive micro-batches are in flight on this stage. */
static int slot_of(const pipeline_t *p, int mb) { return mb % p->nslots; }

model_t *pipeline_model(pipeline_t *p, int mb) { return p->slot[slot_of(p, mb)]; }

model_t *pipeline_chunk_model(pipeline_t *p, int mb, int chunk)
{
    model_t *m = pipeline_model(p, mb);
    model_set_chunk(m, chunk);
    return m;
}

model_t *pipeline_backward_model(pipeline_t *p, int mb, int chunk)
{
    /* test-only defect (docs/testing.md "Injected defects") */
    if (mb == 0 && p->nslots >= 2 && p->nchunks == 1 && fb_test_defect("pp_microbatch_order"))
        /* with two slots in flight (1F1B, one chunk) micro-batch 1's
         * forward ran before 0's backward and its activations are still
         * stored: 0's backward takes them (and 1's uses them again) */
        mb = 1;
    return pipeline_chunk_model(p, mb, chunk);
}

void pipeline_run(pipeline_t *p, int nmicro, void (*fwd)(void *ctx, int mb, int chunk),
                  void (*bwd)(void *ctx, int mb, int chunk), void *ctx)
{
    /* 1F1B over the nmicro v (micro-batch, chunk) passes: the warm-up
     * forwards, then a forward and a backward in turn, then the rest */
    FB_ASSERT(p->nchunks == 1 || nmicro % p->nstages == 0);
    const int total = nmicro * p->nchunks, warm = warmup(p, nmicro);
    for (int k = 0; k < warm; k++)
        fwd(ctx, order_mb(p, k), order_chunk(p, k, 0));
    for (int k = 0; k + warm < total; k++) {
        fwd(ctx, order_mb(p, k + warm), order_chunk(p, k + warm, 0));
        bwd(ctx, order_mb(p, k), order_chunk(p, k, 1));
    }
    for (int k = total - warm > 0 ? total - warm : 0; k < total; k++)
        bwd(ctx, order_mb(p, k), order_chunk(p, k, 1));
}

static void recv_into(pipeline_t *p, fb_act *dst, const ops_t *o, int src, int mb, int chunk, int backward,
                      size_t bytes)
{
    FB_ASSERT(bytes <= p->max_bytes);
    const double t0 = timer_now();
    comm_recv(p->pp, p->in_buf, bytes, COMM_BYTE, src, tag(p, mb, chunk, backward));
    p->wait += timer_now() - t0;
    if (bytes)
        o->to_backend(dst, p->in_buf, bytes);
}

static void send_from(pipeline_t *p, char *buf, comm_request_t **req, const fb_act *src, const ops_t *o, int dest,
                      int mb, int chunk, int backward, size_t bytes)
{
    FB_ASSERT(bytes <= p->max_bytes);
    comm_wait(req); /* this slot's previous message has left its buffer */
    if (bytes)
        o->to_host(buf, src, bytes);
    *req = comm_isend(p->pp, buf, bytes, COMM_BYTE, dest, tag(p, mb, chunk, backward));
}

/* Chunk c of stage s follows chunk c of stage s - 1, and chunk c of stage 0
 * chunk c - 1 of the last stage; tags name the receiving chunk. */
void pipeline_recv_input(pipeline_t *p, int mb, int chunk, int T)
{
    model_t *m = pipeline_chunk_model(p, mb, chunk);
    FB_ASSERT(pipeline_has_prev(p, chunk));
    const int src = p->stage > 0 ? p->stage - 1 : p->nstages - 1;
    recv_into(p, model_stage_input(m), model_ops(m), src, mb, chunk, 0, model_stage_bytes(m, T));
}

void pipeline_send_output(pipeline_t *p, int mb, int chunk, int T)
{
    model_t *m = pipeline_chunk_model(p, mb, chunk);
    const int s = slot_of(p, mb), last = p->stage == p->nstages - 1;
    FB_ASSERT(pipeline_has_next(p, chunk));
    send_from(p, p->out_buf[s], &p->out_req[s], model_stage_output(m), model_ops(m), last ? 0 : p->stage + 1, mb,
              last ? chunk + 1 : chunk, 0, model_stage_bytes(m, T));
}

void pipeline_recv_grad(pipeline_t *p, int mb, int chunk, int T)
{
    model_t *m = pipeline_backward_model(p, mb, chunk);
    FB_ASSERT(pipeline_has_next(p, chunk));
    const int src = p->stage < p->nstages - 1 ? p->stage + 1 : 0;
    recv_into(p, model_stage_grad(m), model_ops(m), src, mb, chunk, 1, model_stage_bytes(m, T));
}

void pipeline_send_grad(pipeline_t *p, int mb, int chunk, int T)
{
    model_t *m = pipeline_backward_model(p, mb, chunk);
    const int s = slot_of(p, mb);
    FB_ASSERT(pipeline_has_prev(p, chunk));
    send_from(p, p->grad_buf[s], &p->grad_req[s], model_stage_grad(m), model_ops(m),
              p->stage > 0 ? p->stage - 1 : p->nstages - 1, mb, p->stage > 0 ? chunk : chunk - 1, 1,
              model_stage_bytes(m, T));
}

void pipeline_end_step(pipeline_t *p)
{
    const double t0 = timer_now();
    comm_waitall(p->out_req, p->nslots);
    comm_waitall(p->grad_req, p->nslots);
    p->wait += timer_now() - t0;
}

double pipeline_take_wait(pipeline_t *p)
{
    const double w = p->wait;
    p->wait = 0.0;
    return w;
}
