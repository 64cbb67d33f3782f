/* DeepSpeed's batch triple (deepspeed/runtime/config.py,
 * _set_batch_related_parameters and _batch_assertion):
 *
 *   train_batch_size = train_micro_batch_size_per_gpu
 *                      * gradient_accumulation_steps * world_size
 *
 * where world_size is the data-parallel ranks, world / (tp pp): DeepSpeed's
 * when a model-parallel unit gives it the data-parallel group.
 *
 * Given all three they must satisfy it; given two, the third is inferred;
 * train_batch_size alone: gas = 1; micro alone: gas = 1; gas alone: error.
 * DeepSpeed infers with floor division and then asserts the identity; here
 * a division that is not exact is reported as such. null counts as absent.
 * The default config's micro batch and accumulation apply only when the user
 * gives none of the three keys.
 *
 * "auto" is the Hugging Face Trainer's "I fill this in", and fabula is the
 * trainer: train_batch_size and gradient_accumulation_steps "auto" are
 * inferred by the rule (absent); train_micro_batch_size_per_gpu "auto",
 * unless train_batch_size is given to infer it from, is
 * data.max_tokens_per_batch / data.seq_len when the user gives that budget,
 * else the default's micro batch. So accelerate's own files (gas 1, the
 * other two "auto") run as they come.
 */
#include <limits.h>
#include <stdio.h>

#include "config/config_internal.h"
#include "util/error.h"

static const char *const batch_keys[3] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                          "gradient_accumulation_steps"};

/* Reads one key: 1 when given (> 0); 0 when absent (removed from the
 * tree); -1 when given but bad (reported once, then read on as absent). */
static int batch_key(cj_ctx_t *c, const char *key, int *out)
{
    json_t *v = cj_lookup(c, c->root, key);
    if (!v || json_is_null(v) || cj_is_auto(v)) {
        if (!cj_strs_has(&c->known, key))
            cj_strs_push(&c->known, key);
        cj_remove(c->root, key);
        return 0;
    }
    const size_t before = cj_nerrors(c);
    *out = cj_int(c, key, 0);
    if (cj_nerrors(c) > before) /* not an integer, or out of range: said */
        return -1;
    if (*out <= 0) {
        cj_invalid(c, key, "a positive integer");
        return -1;
    }
    return 1;
}

static void store_int(cj_ctx_t *c, const char *key, long long v)
{
    if (v > INT_MAX) {
        cj_error(c, "%s would be %lld, more than %d", key, v, INT_MAX);
        v = 1;
    }
    FB_ASSERT(cj_store(c->root, key, json_integer(v), NULL) == 0);
}

/* The micro batch "auto" stands for (see the top of the file). */
static long long auto_micro(cj_ctx_t *c, const config_t *cfg)
{
    json_t *budget = cj_lookup(NULL, c->user, "data.max_tokens_per_batch");
    if (json_is_integer(budget) && json_integer_value(budget) >= cfg->data.seq_len)
        return json_integer_value(budget) / cfg->data.seq_len;
    return cj_default_integer(c, batch_keys[1]);
}

void config_read_batch(cj_ctx_t *c, config_t *cfg, int dp, int any_dp)
{
    FB_ASSERT(dp >= 1);
    int was_auto[3], user_gave = 0;
    for (int i = 0; i < 3; i++)
        was_auto[i] = cj_is_auto(cj_lookup(c, c->user, batch_keys[i]));
    if (was_auto[1] && !cj_given(c, c->user, batch_keys[0])) {
        json_t *m = json_integer(auto_micro(c, cfg));
        FB_ASSERT(m && cj_store(c->user, batch_keys[1], json_incref(m), NULL) == 0);
        FB_ASSERT(cj_store(c->root, batch_keys[1], m, NULL) == 0);
    }
    for (int i = 0; i < 3; i++)
        user_gave |= cj_given(c, c->user, batch_keys[i]);
    for (int i = 0; i < 3; i++) {
        json_t *d = cj_lookup(NULL, c->defaults, batch_keys[i]);
        if (!user_gave && d)
            FB_ASSERT(cj_store(c->root, batch_keys[i], json_deep_copy(d), NULL) == 0);
        else if (user_gave && !cj_given(c, c->user, batch_keys[i]))
            cj_remove(c->root, batch_keys[i]);
    }

    int tb = 0, mb = 0, ga = 0;
    const int read[3] = {batch_key(c, batch_keys[0], &tb), batch_key(c, batch_keys[1], &mb),
                         batch_key(c, batch_keys[2], &ga)};
    const int has_t = read[0] > 0, has_m = read[1] > 0, has_g = read[2] > 0;
    long long w = dp;
    if (read[0] < 0 || read[1] < 0 || read[2] < 0) {
        /* a bad batch key is its own error: the rule over the others
         * would only repeat it in other words */
    } else if (any_dp && has_t) {
        /* the layout search: each layout's dp, micro-batch and
         * accumulation make up this batch (the search checks they do) */
        mb = has_m ? mb : 1;
        ga = has_g ? ga : 1;
    } else if (has_t && has_m && has_g) {
        if ((long long)mb * ga * w != tb)
            cj_error(c,
                     "inconsistent batch sizes: train_batch_size (%d) must equal train_micro_batch_size_per_gpu "
                     "(%d) * gradient_accumulation_steps (%d) * data-parallel ranks (%d) = %lld",
                     tb, mb, ga, dp, (long long)mb * ga * w);
    } else if (has_t && has_m) {
        if (tb % ((long long)mb * w) != 0)
            cj_error(c,
                     "inconsistent batch sizes: train_batch_size (%d) must be a multiple of "
                     "train_micro_batch_size_per_gpu (%d) * data-parallel ranks (%d) to infer "
                     "gradient_accumulation_steps",
                     tb, mb, dp);
        ga = (int)(tb / ((long long)mb * w));
    } else if (has_t && has_g) {
        if (tb % ((long long)ga * w) != 0)
            cj_error(c,
                     "inconsistent batch sizes: train_batch_size (%d) must be a multiple of "
                     "gradient_accumulation_steps (%d) * data-parallel ranks (%d) to infer "
                     "train_micro_batch_size_per_gpu",
                     tb, ga, dp);
        mb = (int)(tb / ((long long)ga * w));
    } else if (has_m && has_g) {
        store_int(c, batch_keys[0], (long long)mb * ga * w);
        tb = (int)((long long)mb * ga * w);
    } else if (has_t) {
        if (tb % w != 0)
            cj_error(c,
                     "inconsistent batch sizes: train_batch_size (%d) must be a multiple of the data-parallel ranks "
                     "(%d) (gradient_accumulation_steps = 1, train_micro_batch_size_per_gpu = train_batch_size / "
                     "data-parallel ranks)",
                     tb, dp);
        ga = 1;
        mb = (int)(tb / w);
    } else if (has_m) {
        ga = 1;
        store_int(c, batch_keys[0], (long long)mb * w);
        tb = (int)((long long)mb * w);
    } else if (has_g) {
        cj_error(c, "gradient_accumulation_steps (%d) alone does not fix the batch: give train_batch_size or "
                 "train_micro_batch_size_per_gpu too, e.g. --set train_micro_batch_size_per_gpu=8 (as in "
                 "DeepSpeed)",
                 ga);
    }
    if (cj_nerrors(c) > 0) {
        /* reported at the end; the readers after this one need sizes > 0 */
        mb = mb > 0 ? mb : 1;
        ga = ga > 0 ? ga : 1;
        tb = tb > 0 ? tb : dp;
    }
    store_int(c, batch_keys[0], tb);
    store_int(c, batch_keys[1], mb);
    store_int(c, batch_keys[2], ga);
    cfg->train_batch_size = tb;
    cfg->micro_batch = mb;
    cfg->grad_accum = ga;
    cfg->batch_per_rank = !has_t;
    const int final[3] = {tb, mb, ga};
    for (int i = 0; i < 3; i++) {
        if (was_auto[i]) {
            char s[96];
            snprintf(s, sizeof s, "%s=%d", batch_keys[i], final[i]);
            cj_strs_push(&c->autos, s);
        }
    }
}
