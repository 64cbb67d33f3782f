/* train/eval_run.h: `fabula eval`'s jobs after its options. */
#include "train/eval_run.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckpt/ckpt_job_config.h"
#include "io/npy_write.h"
#include "model/config_resolve.h"
#include "parallel/world.h"
#include "train/eval_checkpoint.h"
#include "train/eval_logits.h"
#include "util/error.h"

int eval_run_logits(const char *ckpt, const char *model, const int32_t *ids, int T, const char *out)
{
    if (parallel_size() != 1)
        fb_fatal_all(FB_EXIT_USAGE, "fabula eval --logits-out runs on one rank (here %d)", parallel_size());
    int V;
    double capacity = 0.0;
    float *logits;
    if (model) {
        logits = eval_logits_model(model, ids, T, &V);
    } else {
        /* the logits of the model as inference computes it, dropless:
         * `fabula generate` and the export (transformers' Mixtral) route
         * every token to its k experts; capacity is a training device
         * whose drops depend on the micro-batch (docs/init-from.md) */
        static const char *const dropless[] = {"model.capacity_factor=0"};
        long step = 0;
        config_t cfg;
        ckpt_job_config_read(&cfg, ckpt, NULL, 0, &step);
        capacity = config_model_is_moe(&cfg.model) ? cfg.model.capacity_factor : 0.0;
        config_free(&cfg);
        ckpt_job_config_read(&cfg, ckpt, dropless, 1, &step);
        model_config_resolve(&cfg, 0);
        logits = eval_logits_checkpoint(&cfg, ckpt, ids, T, &V);
        config_free(&cfg);
    }
    const int64_t shape[2] = {T, V};
    npy_write_f32(out, logits, 2, shape);
    printf("fabula eval: logits [%d, %d] of %s written to %s\n", T, V, model ? model : ckpt, out);
    if (capacity > 0)
        printf("fabula eval: dropless, as `fabula generate` and the export compute them (the checkpoint's "
               "model.capacity_factor %g drops assignments in training only)\n", capacity);
    free(logits);
    return FB_EXIT_OK;
}

/* --model DIR --corpus C --tokenizer T: the loss of the imported weights,
 * through the config {"model": {"init_from": DIR}, "data": ...}. */
int eval_run_model(const char *dir, const char *corpus, const char *tokenizer, int valid, long long samples)
{
    json_t *root = json_pack("{s:{s:s}, s:{s:s, s:s}, s:i}", "model", "init_from", dir, "data", "corpus", corpus,
                             "tokenizer", tokenizer, "train_micro_batch_size_per_gpu", 8);
    if (!root)
        fb_fatal_all(FB_EXIT_USAGE, "--model, --corpus, --tokenizer: not valid UTF-8 paths");
    if (samples > 0)
        json_object_set_new(root, "run", json_pack("{s:I}", "eval_samples", (json_int_t)samples));
    config_t cfg;
    ckpt_job_config(&cfg, root, dir, 0, NULL, 0);
    model_config_resolve(&cfg, 0);
    int code = eval_checkpoint(&cfg, NULL, 0, valid, cfg.run.eval_samples);
    config_free(&cfg);
    return code;
}

int eval_run_checkpoint(const char *ckpt, const char *corpus, long long samples, int valid)
{
    char set_corpus[4096], set_samples[64];
    const char *sets[2];
    int nsets = 0;
    if (corpus) {
        snprintf(set_corpus, sizeof set_corpus, "data.corpus=%s", corpus);
        sets[nsets++] = set_corpus;
    }
    if (samples > 0) {
        snprintf(set_samples, sizeof set_samples, "run.eval_samples=%lld", samples);
        sets[nsets++] = set_samples;
    }
    config_t cfg;
    long step = 0;
    ckpt_job_config_read(&cfg, ckpt, sets, nsets, &step);
    model_config_resolve(&cfg, 0);
    int code = eval_checkpoint(&cfg, ckpt, step, valid, cfg.run.eval_samples);
    config_free(&cfg);
    return code;
}
