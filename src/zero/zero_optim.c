/* ZeRO engine: the optimizer step (gradient norm, the fp16 overflow skip,
 * unscaling and clipping, the sharded AdamW update on the backend or on the
 * host with offload_optimizer, and the parameter all-gather that follows it
 * in stages 1 and 2), memory accounting and shard access. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zero/zero_impl.h"
#include "util/error.h"

/* This rank's slice of the reduced gradient of group g. */
static float *owned_grads(zero_t *z, int gi)
{
    zgroup_t *g = &z->g[gi];
    return z->stage >= 2 ? g->grad_shard : model_grads(z->model, gi) + g->lo;
}

static float *owned_params(zero_t *z, int gi)
{
    zgroup_t *g = &z->g[gi];
    return z->stage == 3 || z->pl.mixed ? g->param_shard : model_params(z->model, gi) + g->lo;
}

/* The sum of squares of group gi's owned gradient [g->lo, g->hi). Under
 * tensor parallelism a replicated tensor (tp_dim -1) holds the same gradient
 * on every tp rank (its inputs and output gradients are the summed ones,
 * docs/parallel.md), so it enters as 1/tp of its square on each: the sum
 * over the tp group then counts every parameter once. A kv head replicated
 * over tp_copies ranks (fewer kv heads than ranks) holds the same gradient
 * on each of them: 1/tp_copies of its square on each. */
static double owned_sumsq(zero_t *z, int gi)
{
    zgroup_t *g = &z->g[gi];
    const float *grads = owned_grads(z, gi);
    if (!z->tp)
        return zero_grad_ops(z)->sumsq(grads, g->hi - g->lo);
    double split = 0.0, repl = 0.0, kvrep = 0.0;
    for (int i = 0; i < z->t->n; i++) {
        const param_view_t *v = &z->t->views[i];
        const size_t lo = v->offset > g->lo ? v->offset : g->lo;
        const size_t hi = v->offset + v->numel < g->hi ? v->offset + v->numel : g->hi;
        if (v->group != gi || hi <= lo)
            continue;
        const double ss = zero_grad_ops(z)->sumsq(grads + (lo - g->lo), hi - lo);
        if (v->tp_dim < 0)
            repl += ss;
        else if (v->tp_copies > 1)
            kvrep += ss / v->tp_copies;
        else
            split += ss;
    }
    return split + kvrep + repl / comm_size(z->tp);
}

/* The sum of squares of this rank's owned part of view v's gradient. */
static double view_owned_sumsq(zero_t *z, const param_view_t *v)
{
    zgroup_t *g = &z->g[v->group];
    const size_t lo = v->offset > g->lo ? v->offset : g->lo;
    const size_t hi = v->offset + v->numel < g->hi ? v->offset + v->numel : g->hi;
    return hi > lo ? zero_grad_ops(z)->sumsq(owned_grads(z, v->group) + (lo - g->lo), hi - lo) : 0.0;
}

/* Global L2 norm of the reduced gradient (collective). */
static double grad_norm(zero_t *z)
{
    double ss[PARAM_NGROUPS] = {0.0, 0.0};
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        if (g->hi > g->lo)
            ss[gi] = owned_sumsq(z, gi);
    }
    /* the last stage's copy of a tied embedding is the first stage's tensor
     * (the same summed gradient): counted once, there (a split view: whole
     * on each tp rank, as owned_sumsq counts it) */
    if (z->tied_copy)
        ss[PARAM_GROUP_DENSE] -= view_owned_sumsq(z, z->tied_view);
    double total;
    if (z->stage == 0) {
        /* replicated: dense is whole everywhere; experts differ across ep */
        comm_allreduce(z->ep, &ss[PARAM_GROUP_EXPERT], 1, COMM_F64, COMM_SUM);
        total = ss[PARAM_GROUP_DENSE] + ss[PARAM_GROUP_EXPERT];
    } else {
        /* every element is owned by exactly one rank of the world */
        total = ss[PARAM_GROUP_DENSE] + ss[PARAM_GROUP_EXPERT];
        comm_allreduce(z->g[PARAM_GROUP_DENSE].hcomm, &total, 1, COMM_F64, COMM_SUM);
    }
    if (z->tp)
        comm_allreduce(z->tp, &total, 1, COMM_F64, COMM_SUM);
    /* the stages hold disjoint parameters (a tied embedding's copy left out above) */
    if (z->pp)
        comm_allreduce(z->pp, &total, 1, COMM_F64, COMM_SUM);
    return sqrt(total);
}

static void scale_grads(zero_t *z, double coef)
{
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        if (g->hi > g->lo)
            zero_grad_ops(z)->scale(owned_grads(z, gi), g->hi - g->lo, (float)coef);
    }
}

/* Stage 1/2: every rank gets the updated parameters of every owner: the
 * fp32 ones, or in mixed precision their 16-bit rounding. */
static void gather_params(zero_t *z, int gi)
{
    zgroup_t *g = &z->g[gi];
    const size_t e = z->pl.mixed ? z->ops->act_bytes : sizeof(float);
    const comm_dtype_t dt = z->pl.mixed ? z->half_dt : COMM_F32;
    char *full = z->pl.mixed ? (char *)model_compute_weights(z->model, gi) : (char *)model_params(z->model, gi);
    comm_request_t *reqs[ZERO_MAX_INFLIGHT];
    int n = 0;
    size_t bucket = z->allgather_bucket ? z->allgather_bucket : g->numel;
    for (size_t a = 0; a < g->numel;) {
        size_t end = g->numel - a > bucket ? a + bucket : g->numel;
        zero_split_range(g, a, end);
        if (n == ZERO_MAX_INFLIGHT) {
            comm_waitall(reqs, n);
            n = 0;
        }
        reqs[n++] = comm_iallgatherv_inplace(g->comm, full + a * e, g->counts, g->displs, dt);
        if (!z->overlap) {
            comm_waitall(reqs, n);
            n = 0;
        }
        a = end;
    }
    comm_waitall(reqs, n);
}

#define OFFLOAD_CHUNK ZERO_OFFLOAD_CHUNK

/* Offload: the moments and the update stay on the host; what is not
 * host-resident already (the parameters below a host master, the gradients
 * below a host gradient shard) comes down in pieces, so piece k+1's copy
 * down runs while the host updates piece k (whose copy up follows). */
static void offload_update(zero_t *z, zgroup_t *g, float *p, const float *grad, size_t n, double lr)
{
    const optim_config_t *c = &z->cfg->optim;
    const ops_t *o = z->ops, *host_ops = ops_cpu();
    const int p_host = z->pl.master_host, g_host = z->pl.grad_host;
    float *hp = p_host ? p : g->host_p;
    const float *hg = g_host ? grad : g->host_g;
    const size_t nch = (n + OFFLOAD_CHUNK - 1) / OFFLOAD_CHUNK;
    for (size_t k = 0; k <= nch; k++) {
        if (k < nch) {
            /* piece k down (piece 0 before the loop's first update) */
            const size_t lo = k * OFFLOAD_CHUNK, len = k + 1 < nch ? OFFLOAD_CHUNK : n - lo;
            if (!g_host)
                o->to_host_async(g->host_g + lo, grad + lo, len * sizeof(float));
            if (!p_host)
                o->to_host_async(g->host_p + lo, p + lo, len * sizeof(float));
        }
        if (k == 0) {
            o->synchronize();
            continue;
        }
        const size_t lo = (k - 1) * OFFLOAD_CHUNK, len = k < nch ? OFFLOAD_CHUNK : n - lo;
        host_ops->adamw(hp + lo, hg + lo, g->m + lo, g->v + lo, len, (float)lr, (float)c->beta1, (float)c->beta2,
                        (float)c->eps, (float)c->weight_decay, c->adam_w_mode, z->step);
        if (!p_host)
            o->to_backend(p + lo, g->host_p + lo, len * sizeof(float));
        o->synchronize();
    }
}

/* Mixed precision: the 16-bit rounding of this rank's fp32 master [lo, hi),
 * into the model's whole copy (stages 1/2, all-gathered after) or the 16-bit
 * shard (stage 3). The backend rounds (the kernel the model's own rounding
 * uses); a host-resident master or shard goes through its staging a piece
 * at a time. */
static void publish(zero_t *z, int gi)
{
    zgroup_t *g = &z->g[gi];
    const size_t n = g->hi - g->lo, ab = z->ops->act_bytes;
    if (n == 0)
        return;
    char *dst = z->stage == 3 ? (char *)g->half_shard : (char *)model_compute_weights(z->model, gi) + g->lo * ab;
    const int dst_host = z->stage == 3 && z->pl.half_host;
    if (!z->pl.master_host && !dst_host) {
        z->ops->to_act((fb_act *)dst, g->param_shard, n);
        return;
    }
    for (size_t a = 0; a < n; a += z->stage_len) {
        const size_t len = n - a < z->stage_len ? n - a : z->stage_len;
        const float *src = g->param_shard + a;
        if (z->pl.master_host) {
            z->ops->to_backend(z->stage32, src, len * sizeof(float));
            src = z->stage32;
        }
        if (dst_host) {
            z->ops->to_act(z->stage16, src, len);
            z->ops->to_host(dst + a * ab, z->stage16, len * ab);
        } else {
            z->ops->to_act((fb_act *)(dst + a * ab), src, len);
        }
        z->ops->synchronize(); /* the staging is reused by the next piece */
    }
}

void zero_publish_params(zero_t *z)
{
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        if (z->pl.mixed)
            publish(z, gi);
        if ((z->stage == 1 || z->stage == 2) && z->g[gi].size > 1)
            gather_params(z, gi);
    }
}

/* AdamW on this rank's shard, then whatever gathering the stage needs. */
static void update(zero_t *z, double lr)
{
    const optim_config_t *c = &z->cfg->optim;
    z->step++;
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zgroup_t *g = &z->g[gi];
        const size_t n = g->hi - g->lo;
        if (n == 0)
            continue;
        float *p = owned_params(z, gi), *grad = owned_grads(z, gi);
        if (!z->offload_opt) {
            z->ops->adamw(p, grad, g->m, g->v, n, (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
                          (float)c->weight_decay, c->adam_w_mode, z->step);
            continue;
        }
        offload_update(z, g, p, grad, n, lr);
    }
    /* host-resident parameters updated by a backend kernel: readable by the
     * host (checkpoints, zero_get_param) only once it has finished */
    if (z->pl.master_host && !z->offload_opt)
        z->ops->synchronize();
    zero_publish_params(z);
}

zero_step_report_t zero_step(zero_t *z, double lr, double loss)
{
    zero_step_report_t r = {ZERO_STEP_APPLIED, 0.0, loss_scale_value(&z->scaler)};
    const double scaled_norm = grad_norm(z);
    r.grad_norm = scaled_norm / r.loss_scale;
    if (z->scaler.enabled && loss_scale_update(&z->scaler, !isfinite(scaled_norm))) {
        r.status = ZERO_STEP_SKIPPED;
        return r;
    }
    if (!isfinite(loss) || !isfinite(r.grad_norm)) {
        r.status = ZERO_STEP_DIVERGED;
        return r;
    }
    double coef = 1.0 / r.loss_scale;
    const double max_norm = z->cfg->gradient_clipping;
    if (max_norm > 0.0) {
        double clip = max_norm / (r.grad_norm + 1e-6);
        if (clip < 1.0)
            coef *= clip;
    }
    if (coef != 1.0)
        scale_grads(z, coef);
    update(z, lr);
    return r;
}

zero_memory_t zero_memory(const zero_t *z)
{
    zero_group_shape_t shape[PARAM_NGROUPS];
    int size[PARAM_NGROUPS], rank[PARAM_NGROUPS];
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        zero_group_shape_of(z->t, gi, &shape[gi]);
        size[gi] = z->g[gi].size;
        rank[gi] = z->g[gi].rank;
    }
    if (z->tied_view)
        shape[PARAM_GROUP_DENSE].tied_pp = z->tied_view->numel;
    zero_memory_t m = zero_memory_of(z->cfg, shape, size, rank, z->ops->act_bytes);
    /* the arithmetic `fabula plan memory` uses must be what was allocated */
    size_t own = 0, master = 0;
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        own += z->g[gi].hi - z->g[gi].lo;
        master += z->g[gi].param_shard ? z->g[gi].hi - z->g[gi].lo : z->g[gi].numel;
    }
    FB_ASSERT(m.workspace == z->workspace_bytes && m.optimizer == 2 * own * sizeof(float) &&
              m.params == master * sizeof(float));
    return m;
}

void zero_get_param(zero_t *z, const param_view_t *v, float *host)
{
    if (z->stage < 3 && !z->pl.mixed) {
        model_get_param(z->model, v, host);
        return;
    }
    /* the owners' fp32 masters */
    zgroup_t *g = &z->g[v->group];
    size_t mine = zero_split_range(g, v->offset, v->offset + v->numel);
    if (mine) {
        const float *src = g->param_shard + (v->offset + g->displs[g->rank] - g->lo);
        if (z->pl.master_host)
            memcpy(host + g->displs[g->rank], src, mine * sizeof(float));
        else
            z->ops->to_host(host + g->displs[g->rank], src, mine * sizeof(float));
    }
    comm_allgatherv_inplace(g->hcomm, host, g->counts, g->displs, COMM_F32);
}

zero_shard_t zero_shard(zero_t *z, int group)
{
    zgroup_t *g = &z->g[group];
    zero_shard_t sh = {
        .numel = g->numel,
        .lo = g->lo,
        .hi = g->hi,
        .write_lo = g->own_lo[g->rank],
        .write_hi = g->own_lo[g->rank + 1],
        .params = owned_params(z, group),
        .m = g->m,
        .v = g->v,
        .grads = owned_grads(z, group),
        .params_host = z->pl.master_host,
        .moments_host = z->offload_opt,
        .grads_host = z->pl.grad_host,
    };
    return sh;
}

long zero_step_count(const zero_t *z) { return z->step; }
void zero_set_step_count(zero_t *z, long step) { z->step = step; }

void zero_sync_params(zero_t *z) { zero_publish_params(z); }
