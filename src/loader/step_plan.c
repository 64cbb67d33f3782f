#include "loader/step_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

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
    const size_t cap = (size_t)cfg->train_batch_size;
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
    pack_plan_free(&p->mine);
    pack_plan_free(&p->scratch);
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

    balance_plan_make(&p->bal, p->offer, p->offer_lens, p->noffer, p->dp_size, cfg->loader.sampler,
                      p->attention_cost, p->capacity * p->nmicro);
    p->ndeferred = 0;
    for (int64_t i = 0; i < p->bal.ndeferred; i++)
        p->deferred[p->ndeferred++] = p->bal.deferred[i];

    /* every rank packs every rank's share: the packer's deferrals and the
     * step's token counts are then known everywhere */
    p->tokens = p->targets = 0.0;
    p->used = 0;
    int64_t bins = 0;
    for (int r = 0; r < p->dp_size; r++) {
        pack_plan_t *pk = r == p->dp_rank ? &p->mine : &p->scratch;
        const int64_t a = p->bal.start[r], b = p->bal.start[r + 1];
        pack_plan_make(pk, p->bal.ids + a, p->bal.lens + a, b - a, p->capacity, p->nmicro, cfg->loader.packing);
        for (int64_t i = 0; i < pk->n; i++) {
            p->tokens += (double)pk->lens[i];
            p->targets += (double)(pk->lens[i] - 1);
        }
        p->used += pk->n;
        bins += pk->nbins;
        for (int64_t i = 0; i < pk->ndeferred; i++)
            p->deferred[p->ndeferred++] = pk->deferred[i];
    }
    p->imbalance = p->bal.imbalance_cost;
    p->imbalance_tokens = p->bal.imbalance_tokens;
    p->bins = bins;
    p->packing = bins ? p->tokens / ((double)bins * (double)p->capacity) : 0.0;
    if (p->used == 0)
        fb_fatal(FB_EXIT_DATA, "step %ld: no sample fits a micro-batch of data.max_tokens_per_batch = %lld tokens",
                 step + 1, (long long)p->capacity);
}

void step_plan_micro(const step_plan_t *p, int m, const int64_t **ids, const int64_t **lens, int *n)
{
    FB_ASSERT(m >= 0 && m < p->nmicro);
    if (m >= p->mine.nbins) {
        *ids = NULL;
        *lens = NULL;
        *n = 0;
        return;
    }
    *ids = p->mine.ids + p->mine.start[m];
    *lens = p->mine.lens + p->mine.start[m];
    *n = (int)(p->mine.start[m + 1] - p->mine.start[m]);
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
    sampler_state_set(&p->sampler, s->sampler_epoch, s->sampler_position);
    if (p->use_curriculum)
        curriculum_state_set(&p->cur, s->curriculum_epoch, s->curriculum_pos);
    if (s->ndeferred > 0)
        memcpy(p->deferred, s->deferred, (size_t)s->ndeferred * sizeof *p->deferred);
    p->ndeferred = s->ndeferred;
}
