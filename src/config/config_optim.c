/* "optimizer" and "scheduler" with DeepSpeed's names and defaults
 * (deepspeed/runtime/engine.py for Adam/AdamW, lr_schedules.py for the
 * schedules). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config/config_internal.h"
#include "util/error.h"

static const cj_inert_t optim_inert[] = {
    {"torch_adam", CJ_BOOL}, /* which Adam implementation: fabula has one */
};

void config_read_optimizer(cj_ctx_t *c, config_t *cfg)
{
    optim_config_t *o = &cfg->optim;
    cj_section(c, "optimizer");
    cj_section(c, "optimizer.params");
    const char *type = cj_string(c, "optimizer.type", "AdamW");
    /* DeepSpeed lower-cases the optimizer name before matching it. */
    if (strcasecmp(type, "AdamW") == 0) {
        o->adam_w_mode = 1;
        /* DeepSpeed: AdamW is decoupled whatever adam_w_mode says. */
        if (!cj_bool(c, "optimizer.params.adam_w_mode", 1))
            cj_warn(c, "optimizer.params.adam_w_mode = false has no effect with optimizer.type \"%s\" "
                       "(decoupled weight decay, as in DeepSpeed); use \"Adam\" for Adam + L2",
                    type);
    } else if (strcasecmp(type, "Adam") == 0) {
        o->adam_w_mode = cj_bool(c, "optimizer.params.adam_w_mode", 1);
    } else {
        cj_invalid(c, "optimizer.type", "\"Adam\" or \"AdamW\" (the optimizers fabula implements)");
    }
    o->lr = cj_real(c, "optimizer.params.lr", 1e-3);
    if (!(o->lr > 0)) {
        cj_invalid(c, "optimizer.params.lr", "a learning rate > 0");
        o->lr = 1e-3; /* DeepSpeed's default in its place: the schedule's checks do not repeat the error */
    }
    double betas[2];
    static const double def_betas[2] = {0.9, 0.999};
    cj_reals(c, "optimizer.params.betas", betas, 2, def_betas);
    if (!(betas[0] >= 0 && betas[0] < 1 && betas[1] >= 0 && betas[1] < 1))
        cj_invalid(c, "optimizer.params.betas", "two numbers in [0, 1)");
    o->beta1 = betas[0];
    o->beta2 = betas[1];
    o->eps = cj_real(c, "optimizer.params.eps", 1e-8);
    if (!(o->eps > 0))
        cj_invalid(c, "optimizer.params.eps", "a number > 0");
    o->weight_decay = cj_real(c, "optimizer.params.weight_decay", 0.0);
    if (!(o->weight_decay >= 0))
        cj_invalid(c, "optimizer.params.weight_decay", "a number >= 0");
    if (cj_bool(c, "optimizer.params.amsgrad", 0))
        cj_invalid(c, "optimizer.params.amsgrad", "false (AMSGrad is not implemented)");
    if (!cj_bool(c, "optimizer.params.bias_correction", 1))
        cj_invalid(c, "optimizer.params.bias_correction", "true (Adam without bias correction is not implemented)");
    cj_accept_inert(c, "optimizer.params", optim_inert, sizeof optim_inert / sizeof *optim_inert);
}

static warmup_type_t read_warmup_type(cj_ctx_t *c)
{
    const char *t = cj_string(c, "scheduler.params.warmup_type", "log");
    if (strcmp(t, "log") == 0)
        return WARMUP_LOG;
    if (strcmp(t, "linear") == 0)
        return WARMUP_LINEAR;
    cj_invalid(c, "scheduler.params.warmup_type", "\"log\" or \"linear\"");
    return WARMUP_LOG;
}

static long read_total_steps(cj_ctx_t *c, config_t *cfg, int linked)
{
    const char *path = "scheduler.params.total_num_steps";
    cfg->sched.total_follows_steps = !cj_given(c, c->user, path);
    cj_resolve_auto(c, path, json_integer(cfg->run.steps));
    if (linked && !cj_given(c, c->user, path))
        cj_put(c, path, json_integer(cfg->run.steps));
    if (!cj_lookup(c, c->root, path)) {
        cj_note(c, "%s not given: using run.steps = %ld", path, cfg->run.steps);
        cj_put(c, path, json_integer(cfg->run.steps));
    }
    long long n = cj_integer(c, path, cfg->run.steps);
    if (n <= 0) {
        cj_invalid(c, path, "a positive integer");
        n = cfg->run.steps; /* one bad value, one message */
    }
    return (long)n;
}

static long read_warmup_steps(cj_ctx_t *c)
{
    long long n = cj_integer(c, "scheduler.params.warmup_num_steps", 1000);
    if (n < 0)
        cj_invalid(c, "scheduler.params.warmup_num_steps", "an integer >= 0");
    return (long)n;
}

static double read_ratio(cj_ctx_t *c, const char *path, double def)
{
    double r = cj_real(c, path, def);
    if (!(r >= 0 && r <= 1))
        cj_invalid(c, path, "a ratio in [0, 1]");
    return r;
}

void config_read_scheduler(cj_ctx_t *c, config_t *cfg, int linked)
{
    sched_config_t *s = &cfg->sched;
    memset(s, 0, sizeof *s);
    if (!cj_section(c, "scheduler")) {
        /* No schedule: constant lr. A null scheduler leaves no trace. */
        s->type = SCHED_CONSTANT;
        cj_remove(c->root, "scheduler");
        return;
    }
    cj_section(c, "scheduler.params");
    const char *type = cj_string(c, "scheduler.type", NULL);
    if (strcmp(type, "WarmupLR") == 0)
        s->type = SCHED_WARMUP_LR;
    else if (strcmp(type, "WarmupDecayLR") == 0)
        s->type = SCHED_WARMUP_DECAY_LR;
    else if (strcmp(type, "WarmupCosineLR") == 0)
        s->type = SCHED_WARMUP_COSINE_LR;
    else {
        cj_invalid(c, "scheduler.type",
                   "\"WarmupLR\", \"WarmupDecayLR\" or \"WarmupCosineLR\" (other DeepSpeed schedules are not "
                   "implemented; remove \"scheduler\" for a constant lr)");
        /* the params of a schedule fabula does not know are that one error,
         * not unknown keys or checks of another schedule's */
        json_t *params = cj_lookup(NULL, c->root, "scheduler.params");
        const char *key;
        json_t *val;
        if (json_is_object(params))
            json_object_foreach(params, key, val) {
                char path[160];
                snprintf(path, sizeof path, "scheduler.params.%s", key);
                if (!cj_strs_has(&c->known, path))
                    cj_strs_push(&c->known, path);
            }
        return;
    }

    const double lr = cfg->optim.lr;
    if (s->type == SCHED_WARMUP_COSINE_LR) {
        s->total_num_steps = read_total_steps(c, cfg, linked);
        s->warmup_min_ratio = read_ratio(c, "scheduler.params.warmup_min_ratio", 0.0);
        s->warmup_num_steps = read_warmup_steps(c);
        s->cos_min_ratio = read_ratio(c, "scheduler.params.cos_min_ratio", 1e-4);
        s->warmup_type = read_warmup_type(c);
        s->warmup_max_lr = lr;
        /* DeepSpeed divides by total_num_steps - max(2, warmup_num_steps). */
        long w = s->warmup_num_steps < 2 ? 2 : s->warmup_num_steps;
        if (s->total_num_steps == w)
            cj_invalid(c, "scheduler.params.total_num_steps",
                       "a value other than max(2, warmup_num_steps) = %ld (WarmupCosineLR divides by their "
                       "difference)",
                       w);
    } else {
        const char *max_path = "scheduler.params.warmup_max_lr";
        cj_resolve_auto(c, max_path, json_real(lr));
        if (linked && !cj_given(c, c->user, max_path))
            cj_put(c, max_path, json_real(lr));
        s->warmup_min_lr = cj_real(c, "scheduler.params.warmup_min_lr", 0.0);
        if (!(s->warmup_min_lr >= 0))
            cj_invalid(c, "scheduler.params.warmup_min_lr", "a number >= 0");
        /* WarmupLR's warmup_max_lr defaults to the optimizer's lr, WarmupDecayLR's to 0.001. */
        s->warmup_max_lr = cj_real(c, max_path, s->type == SCHED_WARMUP_LR ? lr : 1e-3);
        if (!(s->warmup_max_lr > 0))
            cj_invalid(c, max_path, "a learning rate > 0");
        s->warmup_num_steps = read_warmup_steps(c);
        s->warmup_type = read_warmup_type(c);
        if (s->type == SCHED_WARMUP_DECAY_LR)
            s->total_num_steps = read_total_steps(c, cfg, linked);
    }
    if (s->type != SCHED_WARMUP_LR && s->total_num_steps < s->warmup_num_steps)
        cj_warn(c, "scheduler.params.total_num_steps (%ld) is less than warmup_num_steps (%ld)", s->total_num_steps,
                s->warmup_num_steps);
}
