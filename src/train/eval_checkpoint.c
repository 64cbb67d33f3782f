/* `fabula eval` (train/eval_checkpoint.h). */
#include "train/eval_checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_weights.h"
#include "hf/hf_import.h"
#include "infer/plain_model.h"
#include "loader/batch.h"
#include "loader/data_source.h"
#include "model/model.h"
#include "parallel/groups.h"
#include "parallel/world.h"
#include "train/backend.h"
#include "train/evaluate.h"
#include "train/train_threads.h"
#include "util/error.h"

typedef struct open_args {
    data_source_t *src;
    const config_t *cfg;
    int valid, verbose;
} open_args_t;

static void open_step(void *arg)
{
    open_args_t *a = arg;
    if (!a->valid) {
        data_source_open(a->src, a->cfg, a->verbose);
        return;
    }
    if (!a->cfg->data.corpus_path || !a->cfg->data.corpus_path[0])
        fb_fatal(FB_EXIT_USAGE, "fabula eval --split val needs a corpus with a validation split: the checkpoint "
                 "was trained on text (data.train); give --corpus C.h5 made by `fabula prep --valid-fraction F` "
                 "with the same tokenizer, or --split train");
    data_source_open_valid(a->src, a->cfg, a->verbose, "fabula eval --split val");
}

typedef struct weights_args {
    const char *ckpt_path;  /* NULL: from hfw */
    hf_weights_t *hfw;
    model_t *model;
} weights_args_t;

static void read_weights(void *arg)
{
    weights_args_t *a = arg;
    if (a->ckpt_path)
        ckpt_read_weights(a->ckpt_path, a->model);
    else
        hf_weights_load(a->hfw, a->model);
}

static void print_row(const char *name, long samples, double targets, double loss)
{
    if (targets > 0)
        printf("| %s | %ld | %.0f | %.9g | %.9g |\n", name, samples, targets, loss, exp(loss));
    else
        printf("| %s | %ld | 0 | - | - |\n", name, samples);
}

int eval_checkpoint(const config_t *cfg, const char *ckpt_path, long ckpt_step, int valid, long samples)
{
    const int rank = parallel_rank(), world = parallel_size();
    train_choose_threads();
    data_source_t src;
    memset(&src, 0, sizeof src);
    open_args_t oa = {&src, cfg, valid, 0};
    static char msg[1 << 14];
    parallel_agree_outcome(fb_catch(open_step, &oa, msg, sizeof msg), msg);
    /* --model DIR: the rows of the tokenizer's appended specials, as the
     * training adds them (docs/init-from.md) */
    config_t grown;
    if (src.vocab_grow > cfg->model.vocab_size) {
        grown = *cfg;
        grown.model.vocab_size = src.vocab_grow;
        cfg = &grown;
    }

    groups_t groups;
    groups_create(&groups, cfg->parallel.expert_parallel_size, cfg->model.num_local_experts);
    backend_t be;
    backend_open(&be, cfg);
    if (be.ops->device_memory)
        groups_attach_device(&groups);
    hf_weights_t *hfw = NULL;
    char why[1024];
    if (!ckpt_path) {
        int code = hf_weights_open(&hfw, cfg->init_from, &cfg->model, why, sizeof why);
        if (code)
            fb_fatal_all(code, "--model: %s", why);
    }
    /* the weights alone: every rank reads them into its own forward-only
     * model, the experts of its ep rank (docs/monitoring.md, "fabula eval") */
    model_t *model = plain_model_create(&cfg->model, be.ops, cfg->loader.max_tokens_per_batch,
                                        be.ops->device_memory ? groups.ep_dev : groups.ep);
    model_set_a2a_chunks(model, cfg->parallel.moe_a2a_chunks);
    model_set_ep_host_comm(model, groups.ep);
    weights_args_t wa = {ckpt_path, hfw, model};
    parallel_agree_outcome(fb_catch(read_weights, &wa, msg, sizeof msg), msg);
    hf_weights_close(hfw);

    batch_t batch = {0};
    eval_result_t r;
    evaluate_split(model, &src, &batch, samples, groups.dp, &r);
    if (rank == 0) {
        int64_t novels;
        int genres;
        data_source_eval_coverage(&src, r.samples, &novels, &genres);
        printf("fabula eval: %s (step %ld), %s split of %s: %ld of %lld samples (spread over %lld novels, %d "
               "genres), %d rank(s)\n",
               ckpt_path ? ckpt_path : cfg->init_from, ckpt_step, valid ? "validation" : "training",
               src.corpus ? cfg->data.corpus_path : src.what, r.samples, (long long)src.n, (long long)novels, genres,
               world);
        printf("| genre | samples | tokens | loss | ppl |\n|---|---:|---:|---:|---:|\n");
        for (int g = 0; g < BYTETOK_NGENRES; g++)
            if (r.genre_samples[g] > 0)
                print_row(bytetok_genre_name(g), r.genre_samples[g], r.genre_targets[g], r.genre_lm_loss[g]);
        print_row("all", r.samples, r.targets, r.lm_loss);
        fflush(stdout);
    }
    batch_free(&batch);
    model_free(model);
    groups_free(&groups);
    backend_close(&be);
    data_source_close(&src);
    return FB_EXIT_OK;
}
