/* The ZeRO engine (src/zero) under mpiexec -n 1, 2 and 4
 * (tests/e2e/zero_engine.sh), on a tiny MoE whose parameters and gradients
 * the test sets itself to small integers, so that every expected value is
 * exact and computed here from its formula, not by the engine:
 *
 *   partition       each group's owned range [write_lo, write_hi) is
 *                   [r s, (r + 1) s) clipped to the group's numel N, with
 *                   s = ceil(N / size); the optimizer's range [lo, hi) is
 *                   that range at stages 1-3 and [0, N) at stage 0; the
 *                   owned ranges of the group's ranks tile [0, N)
 *   gather          a known full vector written only into each rank's owned
 *                   part comes back whole: stages 1 and 2 through
 *                   zero_sync_params (the post-step all-gather), stage 3
 *                   through zero_get_param and through the forward's
 *                   parameter hooks, block by block (prefetch included)
 *   reduce-scatter  every rank adds its own known contribution to each
 *                   block's gradient through the backward's gradient hooks,
 *                   over two micro-batches, in bucket-sized pieces; after
 *                   zero_end_backward the rank's reduced range holds, for
 *                   every element, the sum over the group's ranks and the
 *                   micro-batches of those contributions
 *   norm            zero_step's gradient norm is the norm of those sums
 *   offload         with the optimizer (and at stage 3 the parameters) on
 *                   the host, a step at lr 0 leaves the parameters exactly
 *                   as written (the round trip down and back is exact), and
 *                   a step at lr 1e-2 gives the parameters and moments of
 *                   the same stage without offload, bit for bit
 *
 * The reduced gradients are exact sums of integers, so every stage takes
 * the same AdamW step: all engines end with stage 0's parameters, bit for
 * bit. Each engine is also built with expert parallelism 2 where the world
 * size allows it (the expert group is then half the world).
 *
 * The test plays the model's side of the hook contract (model.h,
 * model_hooks_t: acquire a block's range, fill it, release it, blocks of the
 * backward in descending order), so it reads the hooks ZeRO installed from
 * the model's struct (model/model_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "ops.h"
#include "parallel/comm.h"
#include "parallel/groups.h"
#include "parallel/world.h"
#include "testlib.h"
#include "util/error.h"
#include "zero/zero.h"

#define NMICRO 2
#define LR 1e-2

static int wrank;
static char label[160];

#define CHECK(cond, ...) EXPECT_RANK(wrank, label, cond, __VA_ARGS__)

typedef struct engine_case {
    const char *name;
    int stage, overlap, offload_opt, offload_param;
} engine_case_t;

/* The parameter value the test writes at element i of group gi: small
 * integers, exact in fp32. */
static float param_value(int gi, size_t i)
{
    return (float)((long)((i * 7 + (size_t)gi * 3) % 1021) - 510);
}

/* What group rank r adds to element i of group gi in micro-batch m. */
static float grad_part(int r, int m, int gi, size_t i)
{
    return (float)((long)((i + 13 * (size_t)gi) % 97) - 48 + 100 * r + 10 * m);
}

/* The reduced gradient of element i: the sum over the group's `size` ranks
 * and the step's micro-batches (small integers: exact in any order). */
static float grad_expected(int size, int gi, size_t i)
{
    double s = 0.0;
    for (int r = 0; r < size; r++)
        for (int m = 0; m < NMICRO; m++)
            s += grad_part(r, m, gi, i);
    return (float)s;
}

static void make_config(config_t *cfg, const engine_case_t *c, int ep)
{
    config_load(cfg, NULL, 0, NULL, 0, 1, 0);
    model_config_t *mc = &cfg->model;
    mc->vocab_size = 61;
    mc->hidden_size = 32;
    mc->intermediate_size = 16;
    mc->num_hidden_layers = 2;
    mc->num_attention_heads = 4;
    mc->num_key_value_heads = 2;
    mc->num_local_experts = 4;
    mc->num_experts_per_tok = 2;
    mc->moe_layer_freq = 1;
    mc->tie_word_embeddings = 0;
    cfg->zero.stage = c->stage;
    cfg->zero.overlap_comm = c->overlap;
    cfg->zero.offload_optimizer = c->offload_opt;
    cfg->zero.offload_param = c->offload_param;
    /* small buckets: every reduction and gather goes in several pieces */
    cfg->zero.reduce_bucket_size = 700;
    cfg->zero.allgather_bucket_size = 900;
    cfg->gradient_clipping = 0.0;
    cfg->fp16.enabled = 0;
    cfg->bf16_enabled = 0;
    cfg->optim.weight_decay = 0.01;
    cfg->parallel.expert_parallel_size = ep;
    cfg->parallel.moe_a2a_chunks = 1;
}

/* The group comm of group gi. */
static comm_t *group_comm(const groups_t *g, int gi)
{
    return gi == PARAM_GROUP_DENSE ? g->dp : g->edp;
}

static void check_partition(zero_t *z, const groups_t *groups, int stage)
{
    const param_table_t *t = model_params_table(zero_model(z));
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        comm_t *c = group_comm(groups, gi);
        const int size = comm_size(c), r = comm_rank(c);
        const size_t n = t->numel[gi], s = (n + (size_t)size - 1) / (size_t)size;
        const size_t wlo = (size_t)r * s < n ? (size_t)r * s : n;
        const size_t whi = (size_t)(r + 1) * s < n ? (size_t)(r + 1) * s : n;
        const zero_shard_t sh = zero_shard(z, gi);
        CHECK(sh.numel == n, "group %d: numel %zu, the table's %zu", gi, sh.numel, n);
        CHECK(sh.write_lo == wlo && sh.write_hi == whi, "group %d rank %d of %d: owned [%zu, %zu), expected [%zu, %zu)",
              gi, r, size, sh.write_lo, sh.write_hi, wlo, whi);
        const size_t lo = stage == 0 ? 0 : wlo, hi = stage == 0 ? n : whi;
        CHECK(sh.lo == lo && sh.hi == hi, "group %d: optimizer range [%zu, %zu), expected [%zu, %zu)", gi, sh.lo,
              sh.hi, lo, hi);
        /* the owned ranges tile [0, N): every rank's bounds side by side */
        int64_t *b = fb_calloc(2 * (size_t)size, sizeof *b);
        b[2 * r] = (int64_t)sh.write_lo;
        b[2 * r + 1] = (int64_t)sh.write_hi;
        comm_allreduce(c, b, 2 * (size_t)size, COMM_I64, COMM_SUM);
        int tiled = b[0] == 0 && b[2 * size - 1] == (int64_t)n;
        for (int q = 0; q + 1 < size; q++)
            tiled = tiled && b[2 * q + 1] == b[2 * q + 2] && b[2 * q] <= b[2 * q + 1];
        CHECK(tiled, "group %d: the owned ranges of the %d ranks do not tile [0, %zu)", gi, size, n);
        free(b);
    }
}

/* Writes param_value into this rank's owned part of every group, and
 * something else elsewhere where a full buffer exists, so that only the
 * engine's gather can make the whole vector right. */
static void write_owned_params(zero_t *z, const ops_t *ops, int stage)
{
    model_t *m = zero_model(z);
    const param_table_t *t = model_params_table(m);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        const zero_shard_t sh = zero_shard(z, gi);
        const size_t n = t->numel[gi];
        if (stage < 3) {
            float *full = fb_malloc((n ? n : 1) * sizeof *full);
            for (size_t i = 0; i < n; i++)
                full[i] = i >= sh.write_lo && i < sh.write_hi ? param_value(gi, i) : -7777.0f;
            /* stage 0 has nothing to gather: every rank holds the whole */
            if (stage == 0)
                for (size_t i = 0; i < n; i++)
                    full[i] = param_value(gi, i);
            if (n)
                ops->to_backend(model_params(m, gi), full, n * sizeof *full);
            free(full);
            continue;
        }
        const size_t own = sh.hi - sh.lo;
        float *part = fb_malloc((own ? own : 1) * sizeof *part);
        for (size_t k = 0; k < own; k++)
            part[k] = param_value(gi, sh.lo + k);
        if (own) {
            if (sh.params_host)
                memcpy(sh.params, part, own * sizeof *part);
            else
                ops->to_backend(sh.params, part, own * sizeof *part);
        }
        free(part);
    }
}

/* Every parameter, whole, as zero_get_param gives it (collective). */
static float **read_params(zero_t *z)
{
    const param_table_t *t = model_params_table(zero_model(z));
    float **p = fb_calloc(PARAM_NGROUPS, sizeof *p);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++)
        p[gi] = fb_calloc(t->numel[gi] ? t->numel[gi] : 1, sizeof **p);
    for (int i = 0; i < t->n; i++) {
        const param_view_t *v = &t->views[i];
        zero_get_param(z, v, p[v->group] + v->offset);
    }
    return p;
}

static void free_params(float **p)
{
    for (int gi = 0; gi < PARAM_NGROUPS; gi++)
        free(p[gi]);
    free(p);
}

/* The number of elements of group gi where p differs from param_value. */
static size_t params_wrong(float *const *p, const param_table_t *t, int gi, size_t *first)
{
    size_t bad = 0;
    for (size_t i = 0; i < t->numel[gi]; i++)
        if (p[gi][i] != param_value(gi, i) && bad++ == 0)
            *first = i;
    return bad;
}

static void check_gather(zero_t *z, const ops_t *ops, int stage)
{
    model_t *m = zero_model(z);
    const param_table_t *t = model_params_table(m);
    write_owned_params(z, ops, stage);
    zero_sync_params(z);
    float **p = read_params(z);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        size_t first = 0;
        const size_t bad = params_wrong(p, t, gi, &first);
        CHECK(bad == 0, "group %d: %zu of %zu gathered parameters wrong, first at %zu: %g, expected %g", gi, bad,
              t->numel[gi], first, bad ? p[gi][first] : 0.0, bad ? param_value(gi, first) : 0.0);
    }
    free_params(p);
    /* the forward's view: each block's parameters through the hooks */
    for (int b = 0; b < t->nblocks; b++) {
        float *base[PARAM_NGROUPS] = {0};
        m->hooks.params_acquire(m->hooks.ctx, b, 0, base);
        for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
            size_t lo, hi, bad = 0, first = 0;
            param_table_block_range(t, b, gi, &lo, &hi);
            if (hi == lo)
                continue;
            float *host = fb_malloc((hi - lo) * sizeof *host);
            ops->to_host(host, base[gi] + lo, (hi - lo) * sizeof *host);
            for (size_t i = lo; i < hi; i++)
                if (host[i - lo] != param_value(gi, i) && bad++ == 0)
                    first = i;
            CHECK(bad == 0, "block %d group %d: %zu of %zu parameters wrong through the hooks, first at %zu", b, gi,
                  bad, hi - lo, first);
            free(host);
        }
        if (m->hooks.params_release)
            m->hooks.params_release(m->hooks.ctx, b, 0);
    }
}

/* A backward of NMICRO micro-batches as the model runs it, block by block
 * from the last, each block's gradient the rank's grad_part. */
static void run_backward(zero_t *z, const groups_t *groups, const ops_t *ops, int salt)
{
    model_t *m = zero_model(z);
    const param_table_t *t = model_params_table(m);
    zero_begin_step(z);
    for (int mb = 0; mb < NMICRO; mb++) {
        zero_begin_micro(z, mb, NMICRO);
        for (int b = t->nblocks - 1; b >= 0; b--) {
            float *base[PARAM_NGROUPS] = {0};
            m->hooks.grads_acquire(m->hooks.ctx, b, base);
            for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
                size_t lo, hi;
                param_table_block_range(t, b, gi, &lo, &hi);
                if (hi == lo)
                    continue;
                const int r = comm_rank(group_comm(groups, gi));
                float *host = fb_malloc((hi - lo) * sizeof *host);
                /* the range holds this micro-batch's sum so far: add to it */
                ops->to_host(host, base[gi] + lo, (hi - lo) * sizeof *host);
                for (size_t i = lo; i < hi; i++)
                    host[i - lo] += grad_part(r, mb, gi, i + (size_t)salt);
                ops->to_backend(base[gi] + lo, host, (hi - lo) * sizeof *host);
                free(host);
            }
            m->hooks.grads_release(m->hooks.ctx, b);
        }
    }
    zero_end_backward(z);
}

/* After run_backward: the rank's reduced range and the norm of the whole. */
static void check_reduced(zero_t *z, const groups_t *groups, const ops_t *ops, int salt, double norm)
{
    double sumsq = 0.0;
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        const zero_shard_t sh = zero_shard(z, gi);
        const int size = comm_size(group_comm(groups, gi));
        const size_t n = sh.hi - sh.lo;
        float *host = fb_malloc((n ? n : 1) * sizeof *host);
        if (n)
            ops->to_host(host, sh.grads, n * sizeof *host);
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < n; k++)
            if (host[k] != grad_expected(size, gi, sh.lo + k + (size_t)salt) && bad++ == 0)
                first = k;
        CHECK(bad == 0, "group %d: %zu of %zu reduced gradients wrong, first at %zu: %g, expected %g", gi, bad, n,
              sh.lo + first, bad ? host[first] : 0.0,
              bad ? grad_expected(size, gi, sh.lo + first + (size_t)salt) : 0.0);
        free(host);
        /* the norm: every element of the group once; the expert groups of
         * the ep ranks hold other experts with the same values */
        double ss = 0.0;
        for (size_t i = 0; i < sh.numel; i++) {
            const double g = grad_expected(size, gi, i + (size_t)salt);
            ss += g * g;
        }
        sumsq += gi == PARAM_GROUP_EXPERT ? ss * groups->ep_size : ss;
    }
    const double want = sqrt(sumsq);
    CHECK(fabs(norm - want) <= 1e-12 * want, "gradient norm %.17g, expected %.17g", norm, want);
}

/* One engine through the checks and two optimizer steps; returns its
 * parameters after them and each group's numel (collective). */
static float **run_engine(const engine_case_t *c, int ep, size_t numel[PARAM_NGROUPS])
{
    snprintf(label, sizeof label, "%s, ep %d", c->name, ep);
    config_t cfg;
    make_config(&cfg, c, ep);
    groups_t groups;
    groups_create(&groups, ep, cfg.model.num_local_experts);
    const ops_t *ops = ops_cpu();
    zero_t *z = zero_create(&cfg, &groups, ops, 16, 1);
    const param_table_t *t = model_params_table(zero_model(z));
    for (int gi = 0; gi < PARAM_NGROUPS; gi++)
        numel[gi] = t->numel[gi];
    check_partition(z, &groups, c->stage);
    check_gather(z, ops, c->stage);

    /* step 1 at lr 0: the reduced gradients, and the parameters unchanged
     * (with offload: after their trip to the host and back) */
    run_backward(z, &groups, ops, 0);
    zero_step_report_t r = zero_step(z, 0.0, 1.0);
    CHECK(r.status == ZERO_STEP_APPLIED, "step 1 status %d", (int)r.status);
    check_reduced(z, &groups, ops, 0, r.grad_norm);
    float **p = read_params(z);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        size_t first = 0;
        const size_t bad = params_wrong(p, t, gi, &first);
        CHECK(bad == 0, "group %d: %zu parameters changed by a step at lr 0, first at %zu", gi, bad, first);
    }
    free_params(p);
    /* step 2 at LR: other gradients (the contributions shifted by 5) */
    run_backward(z, &groups, ops, 5);
    r = zero_step(z, LR, 1.0);
    CHECK(r.status == ZERO_STEP_APPLIED, "step 2 status %d", (int)r.status);
    check_reduced(z, &groups, ops, 5, r.grad_norm);
    p = read_params(z);
    size_t moved = 0, first = 0;
    for (int gi = 0; gi < PARAM_NGROUPS; gi++)
        moved += params_wrong(p, t, gi, &first);
    CHECK(moved > 0, "step 2 at lr %g changed no parameter", LR);
    zero_free(z);
    groups_free(&groups);
    config_free(&cfg);
    return p;
}

/* p against the first engine's (stage 0's) parameters, bit for bit. */
static void check_same(float *const *p, float *const *ref, const size_t numel[PARAM_NGROUPS])
{
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < numel[gi]; i++)
            if (memcmp(&p[gi][i], &ref[gi][i], sizeof(float)) != 0 && bad++ == 0)
                first = i;
        CHECK(bad == 0, "group %d: %zu of %zu parameters after two steps differ from stage 0's, first at %zu: %.9g "
              "against %.9g", gi, bad, numel[gi], first, bad ? p[gi][first] : 0.0, bad ? ref[gi][first] : 0.0);
    }
}

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    wrank = parallel_rank();
    const int world = parallel_size();
    const engine_case_t cases[] = {
        {"stage 0", 0, 0, 0, 0},
        {"stage 1", 1, 0, 0, 0},
        {"stage 1, optimizer offload", 1, 0, 1, 0},
        {"stage 2", 2, 0, 0, 0},
        {"stage 2, overlap_comm", 2, 1, 0, 0},
        {"stage 2, optimizer offload", 2, 0, 1, 0},
        {"stage 3", 3, 0, 0, 0},
        {"stage 3, overlap_comm", 3, 1, 0, 0},
        {"stage 3, optimizer and parameter offload", 3, 1, 1, 1},
    };
    const int ncases = (int)(sizeof cases / sizeof *cases);
    for (int ep = 1; ep <= 2; ep++) {
        if (world % ep != 0)
            continue;
        float **ref = NULL;
        size_t numel[PARAM_NGROUPS];
        for (int i = 0; i < ncases; i++) {
            float **p = run_engine(&cases[i], ep, numel);
            if (!ref) {
                ref = p;
                continue;
            }
            check_same(p, ref, numel);
            free_params(p);
        }
        free_params(ref);
    }
    double f = (double)failures;
    comm_allreduce(comm_world(), &f, 1, COMM_F64, COMM_SUM);
    const long total = (long)f;
    if (wrank == 0)
        printf("checked the ZeRO engine on %d rank(s): %d engines x ep 1%s, %d checks on rank 0\n", world, ncases,
               world % 2 == 0 ? " and 2" : "", checks);
    if (wrank == 0)
        printf("%s: %ld failures over %d ranks\n", total ? "FAIL" : "PASS", total, world);
    parallel_finalize();
    return total ? 1 : 0;
}
