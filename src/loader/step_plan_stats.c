#include "loader/step_plan_stats.h"

#include <string.h>

#include "loader/step_plan.h"
#include "util/error.h"

void step_plan_stats_run(const config_t *cfg, const int64_t *lens, int64_t nsamples, int nranks, long steps,
                         step_plan_stats_t *st)
{
    FB_ASSERT(nranks >= 1 && steps >= 1);
    memset(st, 0, sizeof *st);
    st->steps = steps;
    step_plan_t p;
    step_plan_init(&p, cfg, lens, nsamples, nranks, 0);
    for (long step = 0; step < steps; step++) {
        step_plan_next(&p, step);
        st->imb_cost_mean += p.imbalance / (double)steps;
        st->imb_tokens_mean += p.imbalance_tokens / (double)steps;
        if (p.imbalance > st->imb_cost_max)
            st->imb_cost_max = p.imbalance;
        if (p.imbalance_tokens > st->imb_tokens_max)
            st->imb_tokens_max = p.imbalance_tokens;
        st->deferred += p.ndeferred;
        st->bins += p.bins;
        if (p.bins > st->bins_max)
            st->bins_max = p.bins;
        st->samples += p.used;
        st->tokens += (int64_t)p.tokens;
    }
    st->packing = st->bins > 0 ? (double)st->tokens / ((double)st->bins * (double)p.capacity) : 0.0;
    step_plan_free(&p);
}
