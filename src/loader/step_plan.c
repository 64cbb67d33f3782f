#include "loader/step_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/test_defect.h"

void step_plan_init(step_plan_t *p, const config_t *cfg, const int64_t *lens, int64_t nsamples, int dp_size,
                    int dp_rank)
{
    FB_ASSERT(cfg->loader.attention_cost_auto == LOADER_COST_SET);
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->dp_size = dp_size;
    p->dp_rank = dp_rank;
    p->nmicro = cfg->grad_accum;
    p->nsamples = nsamples;
    p->lens = lens;
    p->capacity = cfg->loader.max_tokens_per_batch;
    p->attention_cost = cfg->loader.attention_cost;
    sampler_init(&p->sampler, nsamples, cfg->run.seed);
    p->use_curriculum = cfg->loader.curriculum;
    if (p->use_curriculum)
        curriculum_init(&p->cur, &cfg->loader, lens, nsamples, cfg->run.seed);
    /* gradient_accumulation_steps x ranks = train_batch_size / micro batch:
     * the same on every layout of one run */
    p->nbins_max = cfg->grad_accum * dp_size;
    const size_t cap = (size_t)cfg->train_batch_size;
    p->bin_cost = fb_malloc((size_t)p->nbins_max * sizeof *p->bin_cost);
    p->offer = fb_malloc(cap * sizeof *p->offer);
    p->offer_lens = fb_malloc(cap * sizeof *p->offer_lens);
    p->deferred = fb_malloc(cap * sizeof *p->deferred);
}

void step_plan_free(step_plan_t *p)
{
    sampler_free(&p->sampler);
    if (p->use_curriculum)
        curriculum_free(&p->cur);
    balance_plan_free(&p->bal);
    pack_plan_free(&p->pack);
    free(p->bin_cost);
    free(p->offer);
    free(p->offer_lens);
    free(p->deferred);
    memset(p, 0, sizeof *p);
}

static void offer_samples(step_plan_t *p, long step)
{
    const int64_t count = p->cfg->train_batch_size;
    if (!p->use_curriculum) {
        balance_step_ids(&p->sampler, p->deferred, p->ndeferred, count, p->offer);
        p->noffer = count;
        return;
    }
    /* deferred samples first, then the curriculum's mix for this phase */
    int64_t n = p->ndeferred < count ? p->ndeferred : count;
    memcpy(p->offer, p->deferred, (size_t)n * sizeof *p->offer);
    if (n < count) {
        int drawn[LOADER_NCLASSES];
        double progress = (double)step / (double)p->cfg->run.steps;
        curriculum_next(&p->cur, progress, (int)(count - n), p->offer + n, drawn);
    }
    p->noffer = count;
}

void step_plan_next(step_plan_t *p, long step)
{
    const config_t *cfg = p->cfg;
    p->max_len = cfg->loader.warmup ? curriculum_max_len(&cfg->loader, cfg->data.seq_len, step) : cfg->data.seq_len;
    offer_samples(p, step);
    for (int64_t i = 0; i < p->noffer; i++)
        p->offer_lens[i] = curriculum_effective_len(p->lens[p->offer[i]], p->max_len);

    /* the micro-batches: from the step's samples and the config alone, never
     * from the layout, so that capacity and the router's losses, which are
     * per-micro-batch statistics, see the same tokens on every layout */
    pack_plan_t *pk = &p->pack;
    pack_plan_make(pk, p->offer, p->offer_lens, p->noffer, p->capacity, p->nbins_max, cfg->loader.packing,
                   p->attention_cost);
    p->ndeferred = pk->ndeferred;
    memcpy(p->deferred, pk->deferred, (size_t)pk->ndeferred * sizeof *p->deferred);
    p->tokens = p->targets = 0.0;
    for (int b = 0; b < pk->nbins; b++) {
        p->bin_cost[b] = 0.0;
        for (int64_t i = pk->start[b]; i < pk->start[b + 1]; i++) {
            p->bin_cost[b] += balance_cost(pk->lens[i], p->attention_cost);
            p->tokens += (double)pk->lens[i];
            p->targets += (double)(pk->lens[i] - 1);
        }
    }
    p->used = (long)pk->n;
    if (p->used == 0)
        fb_fatal(FB_EXIT_DATA, "step %ld: no sample fits a micro-batch of data.max_tokens_per_batch = %lld tokens",
                 step + 1, (long long)p->capacity);

    /* which rank runs which: whole micro-batches, at most nmicro each */
    balance_plan_make(&p->bal, p->bin_cost, pk->bin_tokens, pk->nbins, p->dp_size, p->nmicro, cfg->loader.sampler);
    p->imbalance = p->bal.imbalance_cost;
    p->imbalance_tokens = p->bal.imbalance_tokens;
    p->bins = pk->nbins;
    p->packing = pack_plan_efficiency(pk);
}

int step_plan_micro(const step_plan_t *p, int m, const int64_t **ids, const int64_t **lens, int *n)
{
    FB_ASSERT(m >= 0 && m < p->nmicro);
    const int first = p->bal.start[p->dp_rank], count = p->bal.start[p->dp_rank + 1] - first;
    if (m >= count) {
        *ids = NULL;
        *lens = NULL;
        *n = 0;
        return -1;
    }
    const int b = p->bal.bins[first + m];
    *ids = p->pack.ids + p->pack.start[b];
    *lens = p->pack.lens + p->pack.start[b];
    *n = (int)(p->pack.start[b + 1] - p->pack.start[b]);
    return b;
}

void step_plan_state_get(const step_plan_t *p, step_plan_state_t *s)
{
    memset(s, 0, sizeof *s);
    s->nsamples = p->nsamples;
    sampler_state_get(&p->sampler, &s->sampler_epoch, &s->sampler_position);
    s->curriculum = p->use_curriculum;
    if (p->use_curriculum)
        curriculum_state_get(&p->cur, &s->curriculum_epoch, s->curriculum_pos);
    s->ndeferred = p->ndeferred;
    s->deferred = p->deferred;
}

int step_plan_state_check(const step_plan_t *p, const step_plan_state_t *s, char *why, size_t why_len)
{
    if (s->nsamples != p->nsamples) {
        snprintf(why, why_len, "the data position refers to a corpus of %lld samples; this run's data has %lld "
                 "(other data or data.* settings)", (long long)s->nsamples, (long long)p->nsamples);
        return -1;
    }
    if (s->curriculum != p->use_curriculum) {
        snprintf(why, why_len, "made with data.curriculum.enabled = %s; this run has %s",
                 s->curriculum ? "true" : "false", p->use_curriculum ? "true" : "false");
        return -1;
    }
    if (s->ndeferred < 0 || s->ndeferred > p->cfg->train_batch_size) {
        snprintf(why, why_len, "%lld samples deferred to the next step; this run's train_batch_size is %d",
                 (long long)s->ndeferred, p->cfg->train_batch_size);
        return -1;
    }
    for (int64_t i = 0; i < s->ndeferred; i++)
        if (s->deferred[i] < 0 || s->deferred[i] >= p->nsamples) {
            snprintf(why, why_len, "deferred sample id %lld is outside the corpus of %lld samples",
                     (long long)s->deferred[i], (long long)p->nsamples);
            return -1;
        }
    if (s->sampler_epoch < 0 || s->sampler_position < 0 || s->sampler_position > p->nsamples) {
        snprintf(why, why_len, "sampler position (epoch %lld, position %lld) outside a corpus of %lld samples",
                 (long long)s->sampler_epoch, (long long)s->sampler_position, (long long)p->nsamples);
        return -1;
    }
    return 0;
}

void step_plan_state_set(step_plan_t *p, const step_plan_state_t *s)
{
    char why[256];
    if (step_plan_state_check(p, s, why, sizeof why) < 0)
        fb_fatal(FB_EXIT_DATA, "checkpoint: %s", why);
    int64_t position = s->sampler_position;
    /* test-only defect (docs/testing.md "Injected defects") */
    if (p->nsamples > 0 && fb_test_defect("resume_data_position"))
        /* one step's samples back, within the epoch: the resumed run
         * trains on the last step's samples again */
        position = (position + p->nsamples - p->cfg->train_batch_size % p->nsamples) % p->nsamples;
    sampler_state_set(&p->sampler, s->sampler_epoch, position);
    if (p->use_curriculum)
        curriculum_state_set(&p->cur, s->curriculum_epoch, s->curriculum_pos);
    if (s->ndeferred > 0)
        memcpy(p->deferred, s->deferred, (size_t)s->ndeferred * sizeof *p->deferred);
    p->ndeferred = s->ndeferred;
}
