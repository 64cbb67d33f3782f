/* ZeRO engine: set-up and the model hooks that gather parameters and reduce
 * gradients block by block. */
#include <stdlib.h>
#include <string.h>

#include "model/stages.h"
#include "zero/zero_impl.h"
#include "util/error.h"
#include "util/test_defect.h"

static void *balloc_bytes(zero_t *z, size_t bytes)
{
    z->workspace_bytes += bytes;
    return z->ops->alloc(bytes);
}

static float *balloc(zero_t *z, size_t n) { return balloc_bytes(z, n * sizeof(float)); }

const ops_t *zero_grad_ops(const zero_t *z) { return z->pl.grad_host ? ops_cpu() : z->ops; }

/* Bytes of one gathered parameter (stage 3): 16-bit in mixed precision. */
static size_t param_elem(const zero_t *z) { return z->pl.mixed ? z->ops->act_bytes : sizeof(float); }
static comm_dtype_t param_dtype(const zero_t *z) { return z->pl.mixed ? z->half_dt : COMM_F32; }

size_t zero_split_range(zgroup_t *g, size_t a, size_t b)
{
    for (int r = 0; r < g->size; r++) {
        size_t lo = g->own_lo[r] > a ? g->own_lo[r] : a;
        size_t hi = g->own_lo[r + 1] < b ? g->own_lo[r + 1] : b;
        g->counts[r] = hi > lo ? hi - lo : 0;
        g->displs[r] = hi > lo ? lo - a : 0;
    }
    return g->counts[g->rank];
}

/* ------------------------------------------------------------ reductions */

static void finish(zero_t *z, inflight_t *f)
{
    if (f->bounce) {
        if (f->n) {
            if (f->add && z->pl.grad_host) {
                /* the shard is on the host: the piece comes down, then the
                 * same fp32 add as on the backend */
                float *h = z->g[f->group].host_red;
                z->ops->to_host(h, f->bounce, f->n * sizeof(float));
                ops_cpu()->axpy(f->dest, h, f->n, 1.0f);
            } else if (f->add)
                z->ops->axpy(f->dest, f->bounce, f->n, 1.0f);
            else
                z->ops->copy(f->dest, f->bounce, f->n * sizeof(float));
        }
        z->ops->release(f->bounce);
    }
    if (f->slot >= 0)
        z->g[f->group].gslot_pending[f->slot]--;
}

/* Completes finished reductions, in launch order, keeping the rest. */
static void progress(zero_t *z, int wait_all)
{
    int kept = 0;
    for (int i = 0; i < z->ninflight; i++) {
        inflight_t *f = &z->inflight[i];
        if (wait_all || (kept == 0 && comm_test(f->req))) {
            comm_wait(&f->req);
            finish(z, f);
            continue;
        }
        z->inflight[kept++] = *f;
    }
    z->ninflight = kept;
}

void zero_complete_all(zero_t *z) { progress(z, 1); }

static inflight_t *new_inflight(zero_t *z)
{
    if (z->ninflight == ZERO_MAX_INFLIGHT)
        progress(z, 1);
    inflight_t *f = &z->inflight[z->ninflight++];
    memset(f, 0, sizeof *f);
    f->slot = -1;
    return f;
}

/* Reduces group elements [a, b) whose local values start at `src`:
 * stage 0 allreduces in place; stages 1-3 reduce-scatter, the owner's part
 * copied (stage 1: into the full gradient) or added (stage 2/3: into the
 * shard, accumulating micro-batches). */
static void launch_reduce(zero_t *z, int gi, float *src, size_t a, size_t b, int slot)
{
    zgroup_t *g = &z->g[gi];
    inflight_t *f = new_inflight(z);
    f->group = gi;
    f->slot = slot;
    if (slot >= 0)
        g->gslot_pending[slot]++;
    if (z->stage == 0) {
        f->req = comm_iallreduce(g->comm, src, b - a, COMM_F32, COMM_SUM);
    } else {
        size_t mine = zero_split_range(g, a, b);
        f->n = mine;
        f->bounce = z->ops->alloc((mine ? mine : 1) * sizeof(float));
        f->add = z->stage >= 2;
        size_t own_start = a + g->displs[g->rank];
        f->dest = z->stage >= 2 ? g->grad_shard + (own_start - g->lo)
                                : model_grads(z->model, gi) + own_start;
        /* test-only defect (docs/testing.md "Injected defects") */
        if (g->size > 1 && mine > 1 && fb_test_defect("zero_shard_offset")) {
            /* the owner's reduced piece lands one element late: its first
             * element is not written, its last is lost */
            f->dest++;
            f->n--;
        }
        f->req = comm_ireduce_scatter(g->comm, src, f->bounce, g->counts, COMM_F32, COMM_SUM);
    }
    if (!z->overlap)
        progress(z, 1);
}

/* Launches [a, b) of the full gradient buffer in bucket-sized pieces. */
static void launch_range(zero_t *z, int gi, size_t a, size_t b)
{
    float *grads = model_grads(z->model, gi);
    while (a < b) {
        size_t end = b - a > z->reduce_bucket ? a + z->reduce_bucket : b;
        launch_reduce(z, gi, grads + a, a, end, -1);
        a = end;
    }
}

static void flush_pending(zero_t *z, int gi)
{
    zgroup_t *g = &z->g[gi];
    if (g->pend_hi > g->pend_lo)
        launch_range(z, gi, g->pend_lo, g->pend_hi);
    g->pend_lo = g->pend_hi = 0;
}

/* ---------------------------------------------------------- model hooks */

static void block_range(const zero_t *z, int block, int gi, size_t *lo, size_t *hi)
{
    param_table_block_range(z->t, block, gi, lo, hi);
}

static int find_pslot(zgroup_t *g, int block)
{
    for (int s = 0; s < ZERO_PARAM_SLOTS; s++)
        if (g->pslot_block[s] == block)
            return s;
    return -1;
}

/* Starts gathering `block` into a free parameter slot; -1 if none is free. */
static int gather_block(zero_t *z, int gi, int block, int blocking)
{
    zgroup_t *g = &z->g[gi];
    size_t lo, hi;
    block_range(z, block, gi, &lo, &hi);
    int s = -1;
    for (int i = 0; i < ZERO_PARAM_SLOTS && s < 0; i++)
        if (g->pslot_block[i] < 0)
            s = i;
    if (s < 0)
        return -1;
    g->pslot_block[s] = block;
    g->pslot_users[s] = 0;
    size_t mine = zero_split_range(g, lo, hi);
    const size_t e = param_elem(z);
    if (mine) {
        /* what the block computes with: the 16-bit shard in mixed precision */
        char *dst = (char *)g->pslot[s] + g->displs[g->rank] * e;
        const char *src = (const char *)(z->pl.mixed ? g->half_shard : (void *)g->param_shard) +
                          (lo + g->displs[g->rank] - g->lo) * e;
        if (z->pl.mixed ? z->pl.half_host : z->pl.master_host)
            z->ops->to_backend(dst, src, mine * e);
        else
            z->ops->copy(dst, src, mine * e);
    }
    g->pslot_req[s] = comm_iallgatherv_inplace(g->comm, g->pslot[s], g->counts, g->displs, param_dtype(z));
    if (blocking)
        comm_wait(&g->pslot_req[s]);
    return s;
}

/* Block's range [*lo, *hi) of group gi. Where it needs no workspace (a stage
 * below `sharded_from` keeps the whole buffer `whole`; an empty range has
 * nothing) sets *base and returns 1; returns 0 where the caller supplies it. */
static int hook_base_without_slot(zero_t *z, int block, int gi, int sharded_from, float *whole, float **base,
                                  size_t *lo, size_t *hi)
{
    block_range(z, block, gi, lo, hi);
    if (z->stage < sharded_from) {
        *base = whole;
        return 1;
    }
    if (*hi == *lo) {
        *base = NULL;
        return 1;
    }
    return 0;
}

static void hook_params_acquire(void *ctx, int block, int backward, float *base[PARAM_NGROUPS])
{
    zero_t *z = ctx;
    progress(z, 0);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        size_t lo, hi;
        /* below stage 3 the whole weights: the model's fp32 parameters, or
         * in mixed precision its 16-bit copy, which the owners update */
        float *whole = z->pl.mixed ? (float *)model_compute_weights(z->model, gi) : model_params(z->model, gi);
        if (hook_base_without_slot(z, block, gi, 3, whole, &base[gi], &lo, &hi))
            continue;
        int s = find_pslot(g, block);
        if (s < 0)
            s = gather_block(z, gi, block, 1);
        FB_ASSERT(s >= 0);
        if (g->pslot_req[s])
            comm_wait(&g->pslot_req[s]);
        g->pslot_users[s]++;
        base[gi] = (float *)((char *)g->pslot[s] - lo * param_elem(z));
        /* prefetch the block that runs next */
        int next = backward ? block - 1 : block + 1;
        if (next >= 1 && next <= z->nblocks - 1 && !(backward && next == 0)) {
            size_t nlo, nhi;
            block_range(z, next, gi, &nlo, &nhi);
            if (nhi > nlo && find_pslot(g, next) < 0)
                gather_block(z, gi, next, !z->overlap);
        }
    }
}

static void hook_params_release(void *ctx, int block, int backward)
{
    (void)backward;
    zero_t *z = ctx;
    if (z->stage < 3)
        return;
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        int s = find_pslot(g, block);
        if (s < 0)
            continue;
        if (--g->pslot_users[s] <= 0) {
            if (g->pslot_req[s])
                comm_wait(&g->pslot_req[s]);
            g->pslot_block[s] = -1;
            g->pslot_users[s] = 0;
        }
    }
}

/* A free gradient workspace of group g (waiting for reductions if needed). */
static int take_gslot(zero_t *z, zgroup_t *g, int block)
{
    for (;;) {
        for (int s = 0; s < ZERO_GRAD_SLOTS; s++)
            if (g->gslot_block[s] < 0 && g->gslot_pending[s] == 0) {
                g->gslot_block[s] = block;
                return s;
            }
        FB_ASSERT(z->ninflight > 0);
        progress(z, 1);
    }
}

static void hook_grads_acquire(void *ctx, int block, float *base[PARAM_NGROUPS])
{
    zero_t *z = ctx;
    progress(z, 0);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        size_t lo, hi;
        if (hook_base_without_slot(z, block, gi, 2, model_grads(z->model, gi), &base[gi], &lo, &hi))
            continue;
        float *ws;
        if (block == 0 && z->tied) {
            ws = g->gslot_tied;
        } else {
            int s = take_gslot(z, g, block);
            ws = g->gslot[s];
        }
        z->ops->zero(ws, (hi - lo) * sizeof(float));
        base[gi] = ws - lo;
    }
}

static void hook_grads_release(void *ctx, int block)
{
    zero_t *z = ctx;
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        size_t lo, hi;
        block_range(z, block, gi, &lo, &hi);
        if (hi == lo)
            continue;
        if (z->stage < 2) {
            if (!z->reduce_now)
                continue;
            /* blocks finish in descending order: grow the pending range down */
            if (g->pend_hi > g->pend_lo && hi != g->pend_lo)
                flush_pending(z, gi);
            if (g->pend_hi == g->pend_lo)
                g->pend_hi = hi;
            g->pend_lo = lo;
            if (z->overlap && g->pend_hi - g->pend_lo >= z->reduce_bucket)
                flush_pending(z, gi);
            continue;
        }
        int s = -1;
        float *ws = g->gslot_tied;
        if (!(block == 0 && z->tied)) {
            for (int i = 0; i < ZERO_GRAD_SLOTS; i++)
                if (g->gslot_block[i] == block)
                    s = i;
            FB_ASSERT(s >= 0);
            ws = g->gslot[s];
        }
        for (size_t a = lo; a < hi;) {
            size_t end = hi - a > z->reduce_bucket ? a + z->reduce_bucket : hi;
            launch_reduce(z, gi, ws + (a - lo), a, end, s);
            a = end;
        }
        if (s >= 0)
            g->gslot_block[s] = -1;
        else
            progress(z, 1); /* the tied slot is reused by the next micro-batch */
    }
    progress(z, 0);
}

/* ---------------------------------------------------------------- set-up */

static void group_init(zero_t *z, int gi, comm_t *comm, comm_t *hcomm)
{
    zgroup_t *g = &z->g[gi];
    g->comm = comm;
    g->hcomm = hcomm;
    g->rank = comm_rank(comm);
    g->size = comm_size(comm);
    g->numel = z->t->numel[gi];
    g->shard = (g->numel + (size_t)g->size - 1) / (size_t)g->size;
    g->own_lo = fb_calloc((size_t)g->size + 1, sizeof *g->own_lo);
    g->counts = fb_calloc((size_t)g->size, sizeof *g->counts);
    g->displs = fb_calloc((size_t)g->size, sizeof *g->displs);
    for (int r = 0; r <= g->size; r++) {
        size_t x = (size_t)r * g->shard;
        g->own_lo[r] = x < g->numel ? x : g->numel;
    }
    if (z->stage == 0) {
        g->lo = 0;
        g->hi = g->numel;
    } else {
        g->lo = g->own_lo[g->rank];
        g->hi = g->own_lo[g->rank + 1];
    }
    for (int b = 0; b < z->nblocks; b++) {
        size_t lo, hi;
        block_range(z, b, gi, &lo, &hi);
        if (hi - lo > g->max_block)
            g->max_block = hi - lo;
    }
    for (int s = 0; s < ZERO_GRAD_SLOTS; s++)
        g->gslot_block[s] = -1;
    for (int s = 0; s < ZERO_PARAM_SLOTS; s++)
        g->pslot_block[s] = -1;
}

static void group_alloc(zero_t *z, int gi)
{
    zgroup_t *g = &z->g[gi];
    const zero_placement_t *pl = &z->pl;
    const size_t own = g->hi - g->lo, cap = own ? own : 1, f = sizeof(float);
    if (z->stage >= 2)
        g->grad_shard = pl->grad_host ? z->ops->host_alloc(cap * f) : z->ops->alloc(cap * f);
    if (z->stage == 3 || pl->mixed)
        g->param_shard = pl->master_host ? z->ops->host_alloc(cap * f) : z->ops->alloc(cap * f);
    if (pl->mixed && z->stage == 3) {
        const size_t ab = z->ops->act_bytes;
        g->half_shard = pl->half_host ? z->ops->host_alloc(cap * ab) : z->ops->alloc(cap * ab);
    }
    if (z->offload_opt) {
        /* page-locked on CUDA: the step's copies overlap the host update */
        g->m = z->ops->host_alloc(cap * f);
        g->v = z->ops->host_alloc(cap * f);
        if (!pl->master_host)
            g->host_p = z->ops->host_alloc(cap * f);
        if (!pl->grad_host)
            g->host_g = z->ops->host_alloc(cap * f);
        if (pl->grad_host && own) {
            size_t nb = g->max_block < z->reduce_bucket ? g->max_block : z->reduce_bucket;
            g->host_red = z->ops->host_alloc((nb < own ? nb : own) * f);
        }
    } else {
        g->m = z->ops->alloc(cap * sizeof(float));
        g->v = z->ops->alloc(cap * sizeof(float));
    }
    if (z->stage >= 2 && g->max_block) {
        for (int s = 0; s < ZERO_GRAD_SLOTS; s++)
            g->gslot[s] = balloc(z, g->max_block);
        size_t lo, hi;
        block_range(z, 0, gi, &lo, &hi);
        if (z->tied && hi > lo)
            g->gslot_tied = balloc(z, hi - lo);
    }
    if (z->stage == 3 && g->max_block)
        for (int s = 0; s < ZERO_PARAM_SLOTS; s++)
            g->pslot[s] = balloc_bytes(z, g->max_block * param_elem(z));
}

static void init_params(zero_t *z, uint64_t seed, const zero_init_source_t *src)
{
    const int whole = z->stage < 3 && !z->pl.mixed; /* the model holds the whole fp32 parameters */
    if (whole && !src) {
        model_init_weights(z->model, seed);
        return;
    }
    if (whole) {
        /* one staging buffer of the largest view for all of them */
        size_t most = 1;
        for (int i = 0; i < z->t->n; i++)
            if (z->t->views[i].numel > most)
                most = z->t->views[i].numel;
        float *host = fb_malloc(most * sizeof *host);
        for (int i = 0; i < z->t->n; i++) {
            const param_view_t *v = &z->t->views[i];
            src->read(src->ctx, v, 0, v->numel, host);
            model_set_param(z->model, v, host);
        }
        free(host);
        return;
    }
    for (int i = 0; i < z->t->n; i++) {
        const param_view_t *v = &z->t->views[i];
        zgroup_t *g = &z->g[v->group];
        size_t lo = v->offset > g->lo ? v->offset : g->lo;
        size_t hi = v->offset + v->numel < g->hi ? v->offset + v->numel : g->hi;
        if (hi <= lo)
            continue;
        float *host = fb_malloc((src ? hi - lo : v->numel) * sizeof *host);
        if (src)
            src->read(src->ctx, v, lo - v->offset, hi - v->offset, host);
        else
            model_init_view(z->model, v, seed, host);
        float *dst = g->param_shard + (lo - g->lo);
        const float *from = src ? host : host + (lo - v->offset);
        if (z->pl.master_host)
            memcpy(dst, from, (hi - lo) * sizeof(float));
        else
            z->ops->to_backend(dst, from, (hi - lo) * sizeof(float));
        free(host);
    }
    if (z->pl.mixed)
        zero_publish_params(z);
}

zero_t *zero_create(const config_t *cfg, const groups_t *groups, const ops_t *ops, int max_tokens, uint64_t seed)
{
    return zero_create_from(cfg, groups, ops, max_tokens, seed, NULL);
}

zero_t *zero_create_from(const config_t *cfg, const groups_t *groups, const ops_t *ops, int max_tokens,
                         uint64_t seed, const zero_init_source_t *src)
{
    zero_t *z = fb_calloc(1, sizeof *z);
    z->cfg = cfg;
    z->ops = ops;
    z->stage = cfg->zero.stage;
    z->overlap = cfg->zero.overlap_comm;
    z->offload_opt = cfg->zero.offload_optimizer;
    z->offload_param = cfg->zero.offload_param && z->stage == 3;
    z->tied = cfg->model.tie_word_embeddings;
    z->reduce_bucket = (size_t)cfg->zero.reduce_bucket_size;
    z->allgather_bucket = (size_t)cfg->zero.allgather_bucket_size;
    z->ep = groups->ep;
    z->pl = zero_placement_of(cfg, ops->act_bytes);
    z->half_dt = ops->act_dtype == FB_DTYPE_F16 ? COMM_F16 : COMM_BF16;
    unsigned flags = 0;
    if (z->stage >= 2)
        flags |= MODEL_NO_GRAD_BUFFER;
    /* mixed precision keeps the fp32 master only for the owned shard; the
     * model computes with the 16-bit weights, whole below stage 3, gathered
     * into the engine's workspaces at stage 3 */
    if (z->stage == 3 || z->pl.mixed)
        flags |= MODEL_NO_PARAM_BUFFER;
    if (z->stage == 3 && z->pl.mixed)
        flags |= MODEL_NO_COMPUTE_BUFFER;
    const int dev = ops->device_memory;
    FB_ASSERT(!dev || (groups->dp_dev && groups->ep_dev && groups->edp_dev));
    FB_ASSERT(!dev || groups->tp_size == 1 || groups->tp_dev);
    z->tp = groups->tp_size > 1 ? groups->tp : NULL;
    comm_t *tp = groups->tp_size > 1 ? (dev ? groups->tp_dev : groups->tp) : NULL;
    /* a pipeline stage holds its layers only (model/stages.h) */
    const int pp = groups->pp_size > 1 ? groups->pp_size : 1;
    const int stage = pp > 1 ? groups->pp_rank : 0;
    parallel_config_t pc = cfg->parallel;
    pc.pipeline_parallel_size = pp;
    if (pp == 1)
        pc.virtual_pipeline_stages = 1;
    int lo[PARALLEL_MAX_STAGES], hi[PARALLEL_MAX_STAGES];
    const int nchunks = model_stage_chunks(&cfg->model, &pc, stage, lo, hi);
    z->pp = pp > 1 ? groups->pp : NULL;
    const int ends = stage == 0 || stage == pp - 1;
    z->model = model_create_chunks(&cfg->model, ops, max_tokens, flags, dev ? groups->ep_dev : groups->ep, tp,
                                   nchunks, lo, hi);
    model_set_a2a_chunks(z->model, cfg->parallel.moe_a2a_chunks);
    model_set_ep_host_comm(z->model, groups->ep);
    model_set_tp_host_comm(z->model, groups->tp_size > 1 ? groups->tp : NULL);
    z->t = model_params_table(z->model);
    z->nblocks = z->t->nblocks;
    if (pp > 1 && z->tied && ends) {
        z->emb = groups->emb;
        z->tied_copy = z->t->tied_copy >= 0;
        z->tied_view = z->tied_copy ? &z->t->views[z->t->tied_copy]
                                    : param_table_find(z->t, "model.embed_tokens.weight");
        FB_ASSERT(z->tied_view && z->tied_view->group == PARAM_GROUP_DENSE);
        z->tied_ws = balloc(z, z->tied_view->numel);
    }
    group_init(z, PARAM_GROUP_DENSE, dev ? groups->dp_dev : groups->dp, groups->dp);
    group_init(z, PARAM_GROUP_EXPERT, dev ? groups->edp_dev : groups->edp, groups->edp);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++)
        group_alloc(z, gi);
    if (z->pl.mixed && (z->pl.master_host || z->pl.half_host)) {
        size_t most = 0;
        for (int gi = 0; gi < PARAM_NGROUPS; gi++)
            if (z->g[gi].hi - z->g[gi].lo > most)
                most = z->g[gi].hi - z->g[gi].lo;
        z->stage_len = most < ZERO_OFFLOAD_CHUNK ? most : ZERO_OFFLOAD_CHUNK;
        if (z->pl.master_host)
            z->stage32 = balloc(z, z->stage_len);
        if (z->pl.half_host)
            z->stage16 = balloc_bytes(z, z->stage_len * ops->act_bytes);
    }
    model_hooks_t h = {z, hook_params_acquire, flags ? hook_params_release : NULL, hook_grads_acquire,
                       hook_grads_release, z->pl.mixed};
    model_set_hooks(z->model, &h);
    loss_scale_init(&z->scaler, &cfg->fp16);
    init_params(z, seed, src);
    return z;
}

void zero_free(zero_t *z)
{
    if (!z)
        return;
    zero_complete_all(z);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        if (g->grad_shard)
            (z->pl.grad_host ? z->ops->host_release : z->ops->release)(g->grad_shard);
        if (g->param_shard)
            (z->pl.master_host ? z->ops->host_release : z->ops->release)(g->param_shard);
        if (g->half_shard)
            (z->pl.half_host ? z->ops->host_release : z->ops->release)(g->half_shard);
        if (z->offload_opt) {
            z->ops->host_release(g->m);
            z->ops->host_release(g->v);
            if (g->host_p)
                z->ops->host_release(g->host_p);
            if (g->host_g)
                z->ops->host_release(g->host_g);
            if (g->host_red)
                z->ops->host_release(g->host_red);
        } else {
            z->ops->release(g->m);
            z->ops->release(g->v);
        }
        for (int s = 0; s < ZERO_GRAD_SLOTS; s++)
            if (g->gslot[s])
                z->ops->release(g->gslot[s]);
        if (g->gslot_tied)
            z->ops->release(g->gslot_tied);
        for (int s = 0; s < ZERO_PARAM_SLOTS; s++)
            if (g->pslot[s])
                z->ops->release(g->pslot[s]);
        free(g->own_lo);
        free(g->counts);
        free(g->displs);
    }
    if (z->tied_ws)
        z->ops->release(z->tied_ws);
    if (z->stage32)
        z->ops->release(z->stage32);
    if (z->stage16)
        z->ops->release(z->stage16);
    model_free(z->model);
    free(z);
}

model_t *zero_model(zero_t *z) { return z->model; }

loss_scale_t *zero_loss_scaler(zero_t *z) { return &z->scaler; }

void zero_begin_step(zero_t *z)
{
    if (z->stage < 2) {
        model_zero_grads(z->model);
        return;
    }
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        if (g->hi > g->lo)
            zero_grad_ops(z)->zero(g->grad_shard, (g->hi - g->lo) * sizeof(float));
    }
}

void zero_begin_micro(zero_t *z, int micro, int nmicro)
{
    /* Stages 0/1 accumulate micro-batches locally and reduce once; stages
     * 2/3 keep no full gradient, so every micro-batch is reduced. */
    z->reduce_now = z->stage >= 2 || micro == nmicro - 1;
}

/* Tied embeddings under pp: the first stage's embedding and the last
 * stage's copy each hold their stage's data-parallel sum of the gradient
 * (whole at stage 0, this rank's owned part above); the whole view is
 * gathered over the data-parallel group where it is sharded, summed over
 * the two stages, and its owned part put back, so both copies take the
 * same update and stay equal. The two stages' shards do not line up (their
 * groups' other tensors differ), hence the gather. */
static void tied_sum(zero_t *z)
{
    const param_view_t *v = z->tied_view;
    zgroup_t *g = &z->g[PARAM_GROUP_DENSE];
    const size_t a = v->offset, b = v->offset + v->numel;
    const size_t lo = a > g->lo ? a : g->lo, hi = b < g->hi ? b : g->hi;
    float *own = z->stage >= 2 ? g->grad_shard - g->lo : model_grads(z->model, PARAM_GROUP_DENSE);
    const size_t bytes = (hi - lo) * sizeof(float);
    if (hi > lo && z->pl.grad_host)
        z->ops->to_backend(z->tied_ws + (lo - a), own + lo, bytes);
    else if (hi > lo)
        z->ops->copy(z->tied_ws + (lo - a), own + lo, bytes);
    if (z->stage > 0) {
        zero_split_range(g, a, b);
        comm_request_t *r = comm_iallgatherv_inplace(g->comm, z->tied_ws, g->counts, g->displs, COMM_F32);
        comm_wait(&r);
    }
    comm_allreduce(z->emb, z->tied_ws, v->numel, COMM_F32, COMM_SUM);
    if (hi > lo && z->pl.grad_host)
        z->ops->to_host(own + lo, z->tied_ws + (lo - a), bytes);
    else if (hi > lo)
        z->ops->copy(own + lo, z->tied_ws + (lo - a), bytes);
}

void zero_end_backward(zero_t *z)
{
    if (z->stage < 2)
        for (int gi = 0; gi < PARAM_NGROUPS; gi++)
            flush_pending(z, gi);
    zero_complete_all(z);
    if (z->emb)
        tied_sum(z);
}
