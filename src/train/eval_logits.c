/* train/eval_logits.h. */
#include "train/eval_logits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_weights.h"
#include "infer/infer_model.h"
#include "infer/plain_model.h"
#include "model/model.h"
#include "util/timer.h"
#include "ops.h"
#include "train/backend.h"
#include "util/error.h"

static void check_ids(const int32_t *ids, int T, int V)
{
    for (int t = 0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= V)
            fb_fatal(FB_EXIT_USAGE, "--tokens: id %d (position %d) is outside the model's vocabulary [0, %d)",
                     (int)ids[t], t, V);
}

/* One forward of ids as a single sample; the logits widened to fp32. */
static float *forward_logits(model_t *m, const int32_t *ids, int T)
{
    const int V = model_config(m)->vocab_size;
    int32_t *pos = fb_malloc((size_t)T * sizeof *pos), *tgt = fb_malloc((size_t)T * sizeof *tgt);
    for (int t = 0; t < T; t++) {
        pos[t] = t;
        tgt[t] = t + 1 < T ? ids[t + 1] : -1;
    }
    const int32_t cu[2] = {0, T};
    model_input_t in = {ids, pos, tgt, cu, T, 1, NULL, 0};
    model_scales_t sc = {.lm_denominator = T > 1 ? T - 1 : 1, .mb_weight = 1.0, .training = 0};
    model_set_keep_logits(m, 1);
    model_stats_t st;
    model_forward(m, &in, &sc, &st);
    float *out = fb_malloc((size_t)T * (size_t)V * sizeof *out);
    model_get_logits(m, out);
    free(pos);
    free(tgt);
    return out;
}

float *eval_logits_model(const char *dir, const int32_t *ids, int T, int *vocab)
{
    const double t0 = timer_now();
    infer_model_t im;
    infer_model_open(&im, NULL, dir, INFER_NO_TOKENIZER, T);
    const double dt = timer_now() - t0;
    const int V = model_config(im.model)->vocab_size;
    check_ids(ids, T, V);
    const param_table_t *pt = model_params_table(im.model);
    fprintf(stderr, "fabula eval: imported %s: %zu parameters in %.3f s\n", dir, param_table_total(pt), dt);
    float *out = forward_logits(im.model, ids, T);
    *vocab = V;
    infer_model_close(&im);
    return out;
}

float *eval_logits_checkpoint(const config_t *cfg, const char *ckpt_path, const int32_t *ids, int T, int *vocab)
{
    check_ids(ids, T, cfg->model.vocab_size);
    backend_t be;
    backend_open(&be, cfg);
    model_t *model = plain_model_create(&cfg->model, be.ops, T, NULL);
    ckpt_read_weights(ckpt_path, model);
    float *out = forward_logits(model, ids, T);
    *vocab = cfg->model.vocab_size;
    model_free(model);
    backend_close(&be);
    return out;
}
