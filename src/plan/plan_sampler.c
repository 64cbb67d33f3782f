/* plan/plan_sampler.h. */
#include "plan/plan_sampler.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "corpus/corpus.h"
#include "loader/data_check.h"
#include "loader/pack.h"
#include "loader/step_plan_stats.h"
#include "model/config_resolve.h"
#include "plan/plan_lengths.h"
#include "util/error.h"

/* The run `cfg` describes, with the simulation's batch, micro-batches,
 * sequence length, cost and seed in place of the config's: the step plan
 * reads train_batch_size and gradient_accumulation_steps, not the micro
 * batch, so B need not be a multiple of G. */
static config_t simulated_config(const config_t *cfg, const plan_sampler_opts_t *a, int nranks, long long C, int G)
{
    config_t sim = *cfg;
    sim.train_batch_size = a->batch * nranks;
    sim.grad_accum = G;
    sim.data.seq_len = a->max_seq_len;
    sim.loader.max_tokens_per_batch = (int)C;
    sim.loader.attention_cost = a->c;
    sim.loader.attention_cost_auto = LOADER_COST_SET;
    sim.run.seed = a->seed;
    sim.effective_json = NULL;
    return sim;
}

#define NSAMPLERS 3 /* indexed by loader_sampler_t */
#define NPACKINGS 3 /* indexed by loader_packing_t */

static void print_report(const plan_sampler_opts_t *a, const config_t *cfg, const int64_t *lens, int64_t n, int64_t cut)
{
    int64_t tok = 0, lmin = lens[0], lmax = lens[0];
    for (int64_t i = 0; i < n; i++) {
        tok += lens[i];
        lmin = lens[i] < lmin ? lens[i] : lmin;
        lmax = lens[i] > lmax ? lens[i] : lmax;
    }
    long long C = a->max_tokens > 0 ? a->max_tokens : a->max_seq_len;
    int G = a->accum > 0 ? a->accum : (int)(((long long)a->batch * a->max_seq_len + C - 1) / C);
    const loader_sampler_t sampler = cfg->loader.sampler;
    const loader_packing_t packing = cfg->loader.packing;
    char source[4200];
    if (a->corpus)
        snprintf(source, sizeof source, "%.4000s, training split, sample unit %s", a->corpus, a->unit);
    else
        snprintf(source, sizeof source, "%.4000s", a->lengths_file ? a->lengths_file : a->split);
    printf("corpus: %lld samples (%s), lengths %lld..%lld, mean %.1f, %lld cut to max_seq_len %d\n", (long long)n,
           source, (long long)lmin, (long long)lmax, (double)tok / (double)n, (long long)cut, a->max_seq_len);
    int64_t classes[LOADER_NCLASSES], full = 0;
    data_check_classes(&cfg->loader, lens, n, classes);
    for (int64_t i = 0; i < n; i++)
        full += lens[i] == a->max_seq_len;
    printf("lengths: %.1f%% at max_seq_len; %.1f%% short (< %d), %.1f%% medium, %.1f%% long (>= %d) at "
           "data.curriculum's thresholds\n",
           100.0 * (double)full / (double)n, 100.0 * (double)classes[LOADER_SHORT] / (double)n,
           cfg->loader.short_threshold, 100.0 * (double)classes[LOADER_MEDIUM] / (double)n,
           100.0 * (double)classes[LOADER_LONG] / (double)n, cfg->loader.long_threshold);
    printf("plan: %ld steps, %d samples per rank per step, micro-batch capacity %lld tokens, at most %d "
           "micro-batches per rank (ranks x %d in all), attention cost c = %.6g, seed %llu\n",
           a->steps, a->batch, C, G, G, a->c, a->seed);
    printf("step plan: the strategies over micro-batches packed by %s, the packers with %s%s%s\n",
           config_packing_name(packing),
           config_sampler_name(sampler), cfg->loader.curriculum ? "; length curriculum" : "",
           cfg->loader.warmup ? "; sequence-length warm-up" : "");
    printf("%8s %8s | %-28s | %-28s | %8s | %s\n", "ranks", "strategy", "cost imbalance mean / max",
           "token imbalance mean / max", "deferred", "micro-batches per rank");
    for (int i = 0; i < a->nranks_list; i++) {
        config_t sim = simulated_config(cfg, a, a->ranks[i], C, G);
        step_plan_stats_t st[NSAMPLERS][NPACKINGS];
        int done[NSAMPLERS][NPACKINGS] = {{0}};
        for (int s = 0; s < NSAMPLERS; s++)
            for (int k = 0; k < NPACKINGS; k++) {
                if (s != (int)sampler && k != (int)packing)
                    continue;
                sim.loader.sampler = (loader_sampler_t)s;
                sim.loader.packing = (loader_packing_t)k;
                step_plan_stats_run(&sim, lens, n, a->ranks[i], a->steps, &st[s][k]);
                done[s][k] = 1;
            }
        for (int s = 0; s < NSAMPLERS; s++) {
            const step_plan_stats_t *t = &st[s][packing];
            FB_ASSERT(done[s][packing]);
            printf("%8d %8s | %12.3f%% / %10.3f%% | %12.3f%% / %10.3f%% | %8lld | %.2f\n", a->ranks[i],
                   config_sampler_name((loader_sampler_t)s), 100 * t->imb_cost_mean, 100 * t->imb_cost_max,
                   100 * t->imb_tokens_mean, 100 * t->imb_tokens_max, (long long)t->deferred,
                   (double)t->bins / ((double)t->steps * a->ranks[i]));
        }
        const step_plan_stats_t *seq = &st[sampler][LOADER_PACK_SEQUENTIAL], *bf = &st[sampler][LOADER_PACK_BEST_FIT],
                                *bal = &st[sampler][LOADER_PACK_BALANCED];
        printf("%8d packing  | sequential %.2f%% (%lld micro-batches, %lld deferred), best_fit %.2f%% (%lld, %lld), "
               "balanced %.2f%% (%lld, %lld; cost imbalance %.3f%% / %.3f%%), padded to %d: %.2f%%\n",
               a->ranks[i], 100 * seq->packing, (long long)seq->bins, (long long)seq->deferred,
               100 * bf->packing, (long long)bf->bins, (long long)bf->deferred, 100 * bal->packing,
               (long long)bal->bins, (long long)bal->deferred, 100 * bal->imb_cost_mean, 100 * bal->imb_cost_max,
               a->max_seq_len, 100 * pack_padded_efficiency(bf->tokens, bf->samples, a->max_seq_len));
    }
}

int plan_sampler_run(config_t *cfg, plan_sampler_opts_t *a)
{
    model_config_resolve(cfg, 1);
    corpus_t *corpus = NULL;
    if (a->corpus) {
        corpus = corpus_open(a->corpus, CORPUS_TRAIN);
        a->unit = corpus_sample_unit(corpus);
        if (!a->max_seq_len)
            a->max_seq_len = corpus_max_seq_len(corpus);
    }
    if (!a->max_seq_len)
        a->max_seq_len = cfg->data.seq_len;
    if (!a->have_c)
        a->c = cfg->loader.attention_cost;
    if (!a->have_seed)
        a->seed = cfg->run.seed;
    if (a->max_tokens > 0 && a->max_tokens < a->max_seq_len)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --max-tokens (%lld) must be at least --max-seq-len (%d)",
                 a->max_tokens, a->max_seq_len);
    /* data.max_tokens_per_batch, which the step plan reads, is an int */
    if (a->max_tokens > INT_MAX)
        fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --max-tokens (%lld) must be at most %d", a->max_tokens,
                 INT_MAX);
    for (int i = 0; i < a->nranks_list; i++)
        if ((long long)a->batch * a->ranks[i] > INT_MAX)
            fb_fatal(FB_EXIT_USAGE, "fabula plan sampler: --batch x %d ranks is too large", a->ranks[i]);

    int64_t *lens, cut;
    int64_t n = corpus ? plan_lengths_of_corpus(corpus, a->max_seq_len, &lens, &cut)
                       : plan_lengths_read(a->jsonl, a->lengths_file, a->split, a->max_seq_len, &lens, &cut);
    print_report(a, cfg, lens, n, cut);
    free(lens);
    if (corpus)
        corpus_close(corpus);
    return FB_EXIT_OK;
}
