#include "loader/data_check.h"

#include <stdio.h>
#include <string.h>

#include "loader/curriculum.h"
#include "loader/step_plan_stats.h"

/* A class holding at least this share of the samples leaves the curriculum
 * next to nothing to choose. */
#define DATA_CHECK_ONE_CLASS 0.9

/* data_check_packing: the planned imbalance that is worth a warning, and
 * how many steps are planned to find it (the steps' mean; a 1-step run is
 * told about its config all the same). */
#define DATA_CHECK_IMBALANCE 0.05
#define DATA_CHECK_STEPS 20

static const char *const CLASS_NAME[LOADER_NCLASSES] = {"short", "medium", "long"};

int data_check_batch(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len)
{
    if ((int64_t)cfg->train_batch_size <= c->n)
        return 0;
    snprintf(msg, len,
             "train_batch_size = %d is larger than the %lld training samples of %s: every step trains on each "
             "sample about %.2f times (%d / %lld), the same tokens in one gradient; give train_batch_size <= %lld "
             "(e.g. --set train_batch_size=%lld, or fewer gradient_accumulation_steps), or a larger corpus",
             cfg->train_batch_size, (long long)c->n, c->what, (double)cfg->train_batch_size / (double)c->n,
             cfg->train_batch_size, (long long)c->n, (long long)c->n, (long long)c->n);
    return 1;
}

int data_check_seq_len(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len)
{
    if (!c->prepared || cfg->data.seq_len <= c->max_seq_len)
        return 0;
    snprintf(msg, len,
             "data.seq_len = %d is above the longest sample %s can hold (prep --max-seq-len %d): no sample is "
             "longer than %d tokens, so positions %d..%d are never trained on and a micro-batch of "
             "data.max_tokens_per_batch = %d tokens holds more, shorter samples instead; prepare the corpus "
             "again with `fabula prep --max-seq-len %d`, or set data.seq_len = %d",
             cfg->data.seq_len, c->what, c->max_seq_len, c->max_seq_len, c->max_seq_len, cfg->data.seq_len - 1,
             cfg->loader.max_tokens_per_batch, cfg->data.seq_len, c->max_seq_len);
    return 1;
}

void data_check_classes(const loader_config_t *l, const int64_t *lens, int64_t n, int64_t counts[LOADER_NCLASSES])
{
    for (int k = 0; k < LOADER_NCLASSES; k++)
        counts[k] = 0;
    for (int64_t i = 0; i < n; i++)
        counts[curriculum_class(l, lens[i])]++;
}

int data_check_curriculum(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len)
{
    const loader_config_t *l = &cfg->loader;
    if (!l->curriculum || c->n == 0)
        return 0;
    int64_t counts[LOADER_NCLASSES];
    data_check_classes(l, c->lens, c->n, counts);
    int asked_empty = -1, dominant = -1;
    for (int k = 0; k < LOADER_NCLASSES; k++) {
        for (int p = 0; p < l->nphases; p++)
            if (l->phases[p].mix[k] > 0 && counts[k] == 0 && asked_empty < 0)
                asked_empty = k;
        if ((double)counts[k] >= DATA_CHECK_ONE_CLASS * (double)c->n)
            dominant = k;
    }
    if (asked_empty < 0 && dominant < 0)
        return 0;
    int at = snprintf(msg, len,
                      "data.curriculum: of the %lld training samples, %lld are short (< %d tokens), %lld medium and "
                      "%lld long (>= %d): ",
                      (long long)c->n, (long long)counts[LOADER_SHORT], l->short_threshold,
                      (long long)counts[LOADER_MEDIUM], (long long)counts[LOADER_LONG], l->long_threshold);
    if (asked_empty >= 0)
        at += snprintf(msg + at, len > (size_t)at ? len - (size_t)at : 0,
                       "the phases ask for %s samples and there are none, ", CLASS_NAME[asked_empty]);
    else
        at += snprintf(msg + at, len > (size_t)at ? len - (size_t)at : 0, "%.1f%% are %s, ",
                       100.0 * (double)counts[dominant] / (double)c->n, CLASS_NAME[dominant]);
    at += snprintf(msg + at, len > (size_t)at ? len - (size_t)at : 0,
                   "so the phases' mixes cannot be drawn (a class with nothing left hands its share to the others) "
                   "and the curriculum changes little. ");
    int64_t lo = c->lens[0], hi = c->lens[0];
    for (int64_t i = 1; i < c->n; i++) {
        lo = c->lens[i] < lo ? c->lens[i] : lo;
        hi = c->lens[i] > hi ? c->lens[i] : hi;
    }
    char *tail = msg + at;
    size_t room = len > (size_t)at ? len - (size_t)at : 0;
    const int windows = !c->prepared || !strcmp(c->unit, "windows");
    if (counts[LOADER_LONG] == 0 && cfg->data.seq_len < l->long_threshold)
        snprintf(tail, room,
                 "No sample can be long with data.seq_len = %d below data.curriculum.long_threshold: set "
                 "data.curriculum.short_threshold and long_threshold within the lengths (%lld..%lld tokens)",
                 cfg->data.seq_len, (long long)lo, (long long)hi);
    else if (dominant == LOADER_LONG && windows)
        snprintf(tail, room,
                 "%s cuts whole novels into windows, nearly all of the full length: prepare a corpus with "
                 "`fabula prep --split chapters` (a sample per chapter, windowed only when longer than "
                 "--max-seq-len) and give it as data.corpus",
                 c->what);
    else if (dominant == LOADER_LONG)
        snprintf(tail, room,
                 "Most %s of %s are longer than --max-seq-len %d and are windowed to it: prepare it with a larger "
                 "--max-seq-len, or set data.curriculum.short_threshold and long_threshold within the lengths "
                 "(%lld..%lld tokens)",
                 c->unit, c->what, c->max_seq_len, (long long)lo, (long long)hi);
    else
        snprintf(tail, room,
                 "Set data.curriculum.short_threshold and long_threshold within the lengths (%lld..%lld tokens)",
                 (long long)lo, (long long)hi);
    return 1;
}

int data_check_packing(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len)
{
    const loader_config_t *l = &cfg->loader;
    if (l->packing == LOADER_PACK_BALANCED || l->attention_cost_auto != LOADER_COST_SET || c->n == 0)
        return 0;
    const int dp = cfg->train_batch_size / (cfg->micro_batch * cfg->grad_accum);
    if (dp < 2)
        return 0; /* one data-parallel rank: nothing to balance */
    const long steps = DATA_CHECK_STEPS;
    step_plan_stats_t now, bal;
    step_plan_stats_run(cfg, c->lens, c->n, dp, steps, &now);
    config_t alt = *cfg;
    alt.loader.packing = LOADER_PACK_BALANCED;
    step_plan_stats_run(&alt, c->lens, c->n, dp, steps, &bal);
    if (now.imb_cost_mean < DATA_CHECK_IMBALANCE || bal.imb_cost_mean * 2 > now.imb_cost_mean)
        return 0;
    snprintf(msg, len,
             "data.packing = \"%s\" with %d micro-batch%s per rank: on the sample lengths of %s (sample unit %s) "
             "the step plan gives the busiest of the %d data-parallel ranks %.1f%% more work than the mean (the "
             "mean of %ld steps as `fabula plan sampler` plans them); data.packing = \"balanced\" brings that to "
             "%.1f%%: set it (--set data.packing=balanced), or give each rank 4 or more micro-batches "
             "(gradient_accumulation_steps)",
             config_packing_name(l->packing), cfg->grad_accum, cfg->grad_accum == 1 ? "" : "es", c->what, c->unit,
             dp, 100 * now.imb_cost_mean, steps, 100 * bal.imb_cost_mean);
    return 1;
}
