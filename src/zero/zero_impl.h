/* Private to the ZeRO engine (zero.c: setup and the model hooks;
 * zero_optim.c: the optimizer step, gathers, memory). */
#ifndef FABULA_TRAIN_ZERO_IMPL_H
#define FABULA_TRAIN_ZERO_IMPL_H

#include "zero/zero.h"

#define ZERO_MAX_INFLIGHT 64

/* One reduction group (dense over dp, experts over edp). Rank r owns the
 * elements [own_lo[r], own_lo[r+1]) of the group's flat buffer. */
typedef struct zgroup {
    comm_t *comm;               /* for backend buffers (a device comm on GPU backends) */
    comm_t *hcomm;              /* for host buffers */
    int rank, size;
    size_t numel, shard, lo, hi;
    size_t *own_lo;             /* size+1 entries */
    size_t *counts, *displs;    /* scratch for one collective, size entries */
    float *param_shard;         /* stage 3, and 1/2 in mixed precision: the owned fp32 parameters, the
                                 * master (host where placement.master_host) */
    void *half_shard;           /* mixed stage 3: the owned 16-bit weights (host with offload_param) */
    float *grad_shard;          /* stage 2/3: owned reduced gradients (host where placement.grad_host) */
    float *m, *v;               /* Adam moments of the owned range (host with offload) */
    float *host_p, *host_g;     /* offload staging of the owned range, where it is not host-resident */
    float *host_red;            /* grad_host: a reduced piece on its way into grad_shard */
    size_t pend_lo, pend_hi;    /* stage 0/1: finished but not yet launched range */
    size_t max_block;           /* largest block range in this group */
    /* stage 2/3 gradient workspaces */
    float *gslot[ZERO_GRAD_SLOTS];
    int gslot_block[ZERO_GRAD_SLOTS];   /* block written into it, -1 free */
    int gslot_pending[ZERO_GRAD_SLOTS]; /* reductions still reading it */
    float *gslot_tied;                  /* block 0 when embeddings are tied */
    /* stage 3 parameter workspaces (16-bit in mixed precision) */
    void *pslot[ZERO_PARAM_SLOTS];
    int pslot_block[ZERO_PARAM_SLOTS];  /* -1 free */
    int pslot_users[ZERO_PARAM_SLOTS];
    comm_request_t *pslot_req[ZERO_PARAM_SLOTS];
} zgroup_t;

/* A launched reduction whose result lands in a bounce buffer. */
typedef struct inflight {
    comm_request_t *req;
    float *bounce;
    size_t n;
    float *dest;        /* NULL: in place (allreduce) */
    int add;            /* add into dest (stage 2/3) or copy (stage 1) */
    int group, slot;    /* gradient workspace to release, or -1 */
} inflight_t;

struct zero {
    const config_t *cfg;
    const ops_t *ops;
    model_t *model;
    const param_table_t *t;
    int stage, overlap, offload_opt, offload_param, tied, nblocks;
    zero_placement_t pl;        /* where the states live (zero_memory.h) */
    comm_dtype_t half_dt;       /* the comm dtype of 16-bit weights */
    /* mixed precision, a host-resident master or 16-bit shard: backend
     * staging of one ZERO_OFFLOAD_CHUNK piece for rounding */
    float *stage32;
    void *stage16;
    size_t stage_len;
    size_t reduce_bucket, allgather_bucket;
    comm_t *ep;
    comm_t *tp;         /* host comm of the tensor-parallel group; NULL without tp */
    comm_t *pp;         /* the pipeline group (each stage holds other parameters); NULL without pp */
    /* Tied embeddings under pp, on the first and the last stage: the group
     * of the two, this stage's embedding view (the last stage's: its copy,
     * left out of the norm) and a workspace of its size; else NULL. */
    comm_t *emb;
    const param_view_t *tied_view;
    float *tied_ws;
    int tied_copy;      /* tied_view is the last stage's copy */
    zgroup_t g[PARAM_NGROUPS];
    int reduce_now;     /* this micro-batch's gradients are reduced */
    inflight_t inflight[ZERO_MAX_INFLIGHT];
    int ninflight;
    long step;
    loss_scale_t scaler;
    size_t workspace_bytes;
};

/* Elements of [a, b) owned by each rank, into g->counts/g->displs (displs
 * relative to a). Returns this rank's count. */
size_t zero_split_range(zgroup_t *g, size_t a, size_t b);
void zero_complete_all(zero_t *z);
/* The ops of the memory the gradient shard lives in (the CPU's on the host). */
const ops_t *zero_grad_ops(const zero_t *z);
/* After the owners' fp32 parameters changed (an update, an initialisation,
 * a checkpoint load): mixed precision rounds each owner's range into the
 * 16-bit weights; stages 1/2 then all-gather the whole buffer. */
void zero_publish_params(zero_t *z);

#endif
