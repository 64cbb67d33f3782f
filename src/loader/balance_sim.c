#include "loader/balance_sim.h"

#include <stdlib.h>
#include <string.h>

#include "loader/balance.h"
#include "loader/pack.h"
#include "loader/sampler.h"
#include "util/error.h"

typedef struct sim_buf {
    int64_t *ids, *lens, *carry, ncarry;
    balance_plan_t bp;
    pack_plan_t pp;
} sim_buf_t;

/* Packs every rank's list of bp; adds the packer's deferrals to the carry. */
static void pack_ranks(sim_buf_t *b, const balance_sim_opts_t *o, loader_packing_t packing, balance_sim_stats_t *st)
{
    const balance_plan_t *bp = &b->bp;
    for (int r = 0; r < bp->nranks; r++) {
        int64_t a = bp->start[r], e = bp->start[r + 1];
        pack_plan_make(&b->pp, bp->ids + a, bp->lens + a, e - a, o->capacity, o->accum, packing);
        st->pack_tokens[packing] += b->pp.tokens;
        st->pack_bins[packing] += b->pp.nbins;
        st->pack_deferred[packing] += b->pp.ndeferred;
        memcpy(b->carry + b->ncarry, b->pp.deferred, (size_t)b->pp.ndeferred * sizeof *b->carry);
        b->ncarry += b->pp.ndeferred;
        if (packing == LOADER_PACK_BEST_FIT) {
            st->samples += b->pp.n;
            st->tokens += b->pp.tokens;
        }
    }
}

/* One strategy over all steps; packing < 0: balance only. */
static void run_one(sim_buf_t *b, const int64_t *lens, int64_t n, const balance_sim_opts_t *o, loader_sampler_t s,
                    int packing, int record, balance_sim_stats_t *st)
{
    const int64_t count = (int64_t)o->nranks * o->per_rank;
    sampler_t smp;
    sampler_init(&smp, n, o->seed);
    b->ncarry = 0;
    for (long step = 0; step < o->steps; step++) {
        balance_step_ids(&smp, b->carry, b->ncarry, count, b->ids);
        for (int64_t i = 0; i < count; i++)
            b->lens[i] = lens[b->ids[i]];
        balance_plan_make(&b->bp, b->ids, b->lens, count, o->nranks, s, o->c, o->capacity * o->accum);
        b->ncarry = b->bp.ndeferred;
        memcpy(b->carry, b->bp.deferred, (size_t)b->ncarry * sizeof *b->carry);
        if (packing >= 0)
            pack_ranks(b, o, (loader_packing_t)packing, st);
        if (!record)
            continue;
        st->imb_cost_mean[s] += b->bp.imbalance_cost / (double)o->steps;
        st->imb_tokens_mean[s] += b->bp.imbalance_tokens / (double)o->steps;
        if (b->bp.imbalance_cost > st->imb_cost_max[s])
            st->imb_cost_max[s] = b->bp.imbalance_cost;
        if (b->bp.imbalance_tokens > st->imb_tokens_max[s])
            st->imb_tokens_max[s] = b->bp.imbalance_tokens;
        st->deferred[s] += b->ncarry;
    }
    sampler_free(&smp);
}

void balance_sim_run(const int64_t *lens, int64_t n, const balance_sim_opts_t *o, balance_sim_stats_t *st)
{
    FB_ASSERT(n >= 1 && o->nranks >= 1 && o->per_rank >= 1 && o->steps >= 1 && o->accum >= 1);
    memset(st, 0, sizeof *st);
    const size_t count = (size_t)o->nranks * (size_t)o->per_rank;
    sim_buf_t b = {0};
    b.ids = fb_malloc(count * sizeof *b.ids);
    b.lens = fb_malloc(count * sizeof *b.lens);
    b.carry = fb_malloc(count * sizeof *b.carry);

    run_one(&b, lens, n, o, LOADER_SAMPLER_UNIFORM, -1, 1, st);
    run_one(&b, lens, n, o, LOADER_SAMPLER_GREEDY, -1, 1, st);
    /* lpt twice, once per packer, each carrying its own deferrals; the
     * imbalance is recorded with best_fit, the default packer. */
    run_one(&b, lens, n, o, LOADER_SAMPLER_LPT, LOADER_PACK_SEQUENTIAL, 0, st);
    run_one(&b, lens, n, o, LOADER_SAMPLER_LPT, LOADER_PACK_BEST_FIT, 1, st);

    for (int s = 0; s < PACK_NSTRATEGIES; s++)
        st->pack_efficiency[s] =
            st->pack_bins[s] > 0 ? (double)st->pack_tokens[s] / ((double)st->pack_bins[s] * (double)o->capacity) : 0.0;
    st->padded_efficiency = pack_padded_efficiency(st->tokens, st->samples, o->max_seq_len);
    balance_plan_free(&b.bp);
    pack_plan_free(&b.pp);
    free(b.ids);
    free(b.lens);
    free(b.carry);
}
