/* The ZeRO engine's memory as arithmetic (zero_memory.h): what group_init
 * and group_alloc in zero.c allocate, which zero_memory checks against the
 * engine it reports on. */
#include <string.h>

#include "zero/zero_memory.h"

void zero_group_shape_of(const param_table_t *t, int group, zero_group_shape_t *shape)
{
    memset(shape, 0, sizeof *shape);
    shape->numel = t->numel[group];
    for (int b = 0; b < t->nblocks; b++) {
        size_t lo, hi;
        param_table_block_range(t, b, group, &lo, &hi);
        if (hi - lo > shape->max_block)
            shape->max_block = hi - lo;
        if (b == 0)
            shape->block0 = hi - lo;
    }
}

size_t zero_owned(size_t numel, int size, int rank)
{
    const size_t shard = (numel + (size_t)size - 1) / (size_t)size;
    size_t lo = (size_t)rank * shard, hi = lo + shard;
    if (lo > numel)
        lo = numel;
    if (hi > numel)
        hi = numel;
    return hi - lo;
}

zero_placement_t zero_placement_of(const config_t *cfg, size_t act_bytes)
{
    zero_placement_t p;
    memset(&p, 0, sizeof p);
    p.stage = cfg->zero.stage;
    p.act_bytes = act_bytes;
    p.mixed = p.stage >= 1 && act_bytes != sizeof(float);
    const int offload_opt = cfg->zero.offload_optimizer;
    const int offload_param = cfg->zero.offload_param && p.stage == 3;
    /* fp32: the master is the compute copy, on the host only with
     * offload_param; mixed: the master is the optimizer's, with it */
    p.master_host = p.mixed ? offload_opt : offload_param;
    p.half_host = p.mixed && offload_param;
    p.grad_host = p.mixed && offload_opt && p.stage >= 2;
    return p;
}

zero_memory_t zero_memory_of(const config_t *cfg, const zero_group_shape_t shape[PARAM_NGROUPS],
                             const int size[PARAM_NGROUPS], const int rank[PARAM_NGROUPS], size_t act_bytes)
{
    const zero_placement_t pl = zero_placement_of(cfg, act_bytes);
    const int stage = pl.stage;
    const int offload_opt = cfg->zero.offload_optimizer;
    const int tied = cfg->model.tie_word_embeddings;
    const size_t f = sizeof(float), ab = act_bytes;
    /* stage 3 gathers what it computes with: 16-bit weights in mixed precision */
    const size_t pe = pl.mixed ? ab : f;
    const size_t bucket = (size_t)cfg->zero.reduce_bucket_size;
    zero_memory_t m;
    memset(&m, 0, sizeof m);
    size_t most_own = 0;
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        const zero_group_shape_t *s = &shape[gi];
        /* stage 0 updates the whole buffer; 1-3 the shard */
        const size_t own = stage == 0 ? s->numel : zero_owned(s->numel, size[gi], rank[gi]);
        if (own > most_own)
            most_own = own;
        const size_t master = stage == 3 || pl.mixed ? own : s->numel;
        m.params += master * f;
        if (pl.master_host)
            m.host_params += master * f;
        if (ab != f) {
            const size_t w16 = (stage == 3 ? own : s->numel) * ab;
            m.weights16 += w16;
            if (pl.half_host)
                m.host_weights16 += w16;
        }
        m.grads += (stage >= 2 ? own : s->numel) * f;
        if (pl.grad_host)
            m.host_grads += own * f;
        m.optimizer += 2 * own * f;
        const size_t nb = s->max_block < bucket ? s->max_block : bucket;
        if (offload_opt) {
            m.host_optimizer += 2 * own * f;
            m.host_staging += ((pl.master_host ? 0 : own) + (pl.grad_host ? 0 : own)) * f;
            /* a reduced piece lands there before it is added into the host shard */
            if (pl.grad_host && own)
                m.host_staging += (nb < own ? nb : own) * f;
        }
        /* group_alloc: gradient slots (stage 2/3), the tied block's own slot,
         * gathered-parameter slots (stage 3) */
        if (stage >= 2 && s->max_block) {
            m.workspace += ZERO_GRAD_SLOTS * s->max_block * f;
            if (tied && s->block0)
                m.workspace += s->block0 * f;
        }
        if (stage == 3 && s->max_block)
            m.workspace += ZERO_PARAM_SLOTS * s->max_block * pe;
        m.workspace += s->tied_pp * f;
        /* Reductions in flight (launch_reduce), transient but part of the
         * peak: stage 0 allreduces in place; stages 1-3 reduce-scatter into
         * a bounce buffer of this rank's part of the bucket: one bucket at a
         * time without overlap_comm, every launched one (at worst the shard)
         * with it at stage 1, one a gradient workspace at stages 2/3 (this
         * rank's part of a block), never more than the shard. Over several
         * ranks the MPI library adds scratch per reduction: MPICH's
         * allreduce (recursive halving) half the bucket, its reduce-scatter
         * one rank's part (measured, docs/plan.md "Memory"). */
        const size_t n = s->numel < bucket ? s->numel : bucket;
        size_t part = (n + (size_t)size[gi] - 1) / (size_t)size[gi];
        size_t inflight = 0;
        if (stage == 0) {
            if (size[gi] > 1)
                m.buckets += (n + 1) / 2 * f;
        } else {
            if (stage == 1) {
                inflight = cfg->zero.overlap_comm ? (own + part - 1) / (part ? part : 1) : 1;
            } else {
                const size_t slot_buckets = nb ? (s->max_block + nb - 1) / nb : 0;
                inflight = (ZERO_GRAD_SLOTS + (tied && s->block0 ? 1 : 0)) * slot_buckets;
                part = (nb + (size_t)size[gi] - 1) / (size_t)size[gi];
            }
            size_t bounce = inflight * part;
            if (bounce > own)
                bounce = own;
            m.buckets += bounce * f;
            if (size[gi] > 1)
                m.buckets += bounce * f;
        }
    }
    /* mixed precision with a host-resident master or 16-bit shard: the
     * backend staging that rounds the master piece by piece (zero_optim.c) */
    const size_t chunk = most_own < ZERO_OFFLOAD_CHUNK ? most_own : ZERO_OFFLOAD_CHUNK;
    if (pl.mixed && pl.master_host)
        m.workspace += chunk * f;
    if (pl.mixed && pl.half_host)
        m.workspace += chunk * ab;
    return m;
}
