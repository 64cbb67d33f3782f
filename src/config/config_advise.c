/* config_advise (config_internal.h): what a valid config leaves to
 * something it does not say, said once at start (and by
 * `fabula train --dry-run`), with the key that fixes it. */
#include <stdio.h>

#include "config/config_internal.h"

/* DeepSpeed infers the micro-batch from train_batch_size and the rank
 * count when the config does not give it: the step's micro-batches are then
 * cut differently on another rank count, and an MoE's capacity and
 * micro-batch load-balancing loss, statistics of one micro-batch, with them
 * (docs/loader.md). */
static void micro_batch_from_world(cj_ctx_t *c, const config_t *cfg, int dp)
{
    const model_config_t *m = &cfg->model;
    if (dp < 1 || !config_model_is_moe(m) || cj_given(c, c->user, "train_micro_batch_size_per_gpu") ||
        !cj_given(c, c->user, "train_batch_size"))
        return;
    const int capacity = m->capacity_factor > 0;
    const int aux = m->router_aux_loss_coef > 0 && m->router_aux_loss_scope == MODEL_AUX_SCOPE_MICRO_BATCH;
    if (!capacity && !aux)
        return;
    const char *what = capacity && aux ? "expert capacity and load-balancing loss act"
                       : capacity ? "expert capacity acts" : "load-balancing loss (router_aux_loss_scope \"micro_batch\") acts";
    cj_warn(c, "train_batch_size %d%s leaves the micro-batch to the rank count "
               "(train_micro_batch_size_per_gpu = %d / (%d data-parallel rank(s) x %d accumulation step(s)) = %d here): this MoE's "
               "%s per micro-batch, so its losses change with the number of ranks; give "
               "train_micro_batch_size_per_gpu to train the same run on any rank count (docs/loader.md)",
            cfg->train_batch_size,
            cj_given(c, c->user, "gradient_accumulation_steps") ? " with gradient_accumulation_steps" : "",
            cfg->train_batch_size, dp, cfg->grad_accum, cfg->micro_batch, what);
}

void config_advise(cj_ctx_t *c, const config_t *cfg, int dp)
{
    micro_batch_from_world(c, cfg, dp);
}
