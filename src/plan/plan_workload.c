/* What a step's data costs the time model: the training step plan itself
 * (src/loader/step_plan.c: sampler or curriculum, warm-up cap, packer,
 * balancer) run on the corpus's sample lengths, so the plan sees the
 * micro-batches, the packed Σ len² and the rank imbalance train would. */
#include <string.h>

#include "loader/step_plan.h"
#include "plan/plan.h"
#include "util/error.h"

void plan_workload_from_lengths(const config_t *cfg, const int64_t *lens, int64_t n, int dp, long steps,
                                plan_workload_t *w)
{
    FB_ASSERT(dp >= 1 && steps >= 1 && n >= 1);
    memset(w, 0, sizeof *w);
    step_plan_t p;
    step_plan_init(&p, cfg, lens, n, dp, 0);
    double tokens = 0, sq = 0, imb = 0;
    for (long s = 0; s < steps; s++) {
        step_plan_next(&p, s);
        for (int64_t i = 0; i < p.pack.n; i++) {
            const double l = (double)p.pack.lens[i];
            tokens += l;
            sq += l * l;
        }
        imb += p.imbalance;
    }
    /* per micro-batch slot: every rank runs nmicro of them (an empty one
     * still joins the collectives), so slots x this mean is a rank's mean
     * work */
    const double slots = (double)steps * (double)dp * (double)p.nmicro;
    w->tokens_per_microbatch = tokens / slots;
    w->sum_len_sq_per_microbatch = sq / slots;
    w->imbalance = dp > 1 ? imb / (double)steps : 0.0;
    w->microbatches_per_rank = p.nmicro;
    step_plan_free(&p);
}

void plan_workload_uniform(double len, double samples, int dp, int microbatches, plan_workload_t *w)
{
    FB_ASSERT(len >= 1 && samples >= 1 && dp >= 1 && microbatches >= 1);
    memset(w, 0, sizeof *w);
    const double slots = (double)dp * (double)microbatches;
    w->tokens_per_microbatch = samples * len / slots;
    w->sum_len_sq_per_microbatch = samples * len * len / slots;
    w->microbatches_per_rank = microbatches;
}
