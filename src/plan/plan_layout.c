/* Layouts: the one a config and a world give, one written as a spec
 * ("dp=8,tp=2,zero=3,..."), and whether a layout divides the model
 * (docs/plan.md, "Memory"). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "util/error.h"

/* Bytes of one stored activation on the backend the config asks for: the
 * CUDA backend and cpu16 store 16-bit activations; "cpu" and "auto" are
 * planned as the CPU backend (auto picks CUDA only where a GPU is seen). */
static int act_bytes_of(const config_t *cfg)
{
    return cfg->run.backend == RUN_BACKEND_CUDA || cfg->run.backend == RUN_BACKEND_CPU16 ? 2 : 4;
}

void plan_layout_from_config(const config_t *cfg, int world, plan_layout_t *lay)
{
    memset(lay, 0, sizeof *lay);
    lay->world = world;
    lay->tp = cfg->parallel.tensor_parallel_size > 0 ? cfg->parallel.tensor_parallel_size : 1;
    lay->pp = cfg->parallel.pipeline_parallel_size > 0 ? cfg->parallel.pipeline_parallel_size : 1;
    lay->dp = world / (lay->tp * lay->pp) > 0 ? world / (lay->tp * lay->pp) : 1;
    lay->ep = cfg->parallel.expert_parallel_size > 0 ? cfg->parallel.expert_parallel_size : 1;
    lay->zero = cfg->zero.stage;
    lay->offload_optimizer = cfg->zero.offload_optimizer;
    lay->offload_param = cfg->zero.offload_param && cfg->zero.stage == 3;
    lay->sequence_parallel = cfg->parallel.sequence_parallel;
    lay->recompute = (plan_recompute_t)cfg->model.recompute; /* MODEL_RECOMPUTE_* in the same order */
    lay->virtual_stages = cfg->parallel.virtual_pipeline_stages > 1 ? cfg->parallel.virtual_pipeline_stages : 1;
    lay->micro_batch_tokens = cfg->loader.max_tokens_per_batch;
    lay->grad_accum = cfg->grad_accum > 0 ? cfg->grad_accum : 1;
    lay->act_bytes = act_bytes_of(cfg);
}

static int parse_int(const char *s, int lo, long long hi, int *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int plan_layout_parse(const char *spec, const config_t *cfg, plan_layout_t *lay, char *err, size_t errlen)
{
    plan_layout_from_config(cfg, 1, lay);
    lay->ep = 1;
    int have_ep = 0, have_dp = 0, have_offload = 0, world = 0;
    char *copy = strdup(spec), *save = NULL;
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : NULL;
        if (eq)
            *eq = 0;
        int *field = NULL, lo = 1;
        if (!strcmp(tok, "dp"))
            field = &lay->dp, have_dp = 1;
        else if (!strcmp(tok, "world"))
            field = &world;
        else if (!strcmp(tok, "tp"))
            field = &lay->tp;
        else if (!strcmp(tok, "pp"))
            field = &lay->pp;
        else if (!strcmp(tok, "ep"))
            field = &lay->ep, have_ep = 1;
        else if (!strcmp(tok, "vpp"))
            field = &lay->virtual_stages;
        else if (!strcmp(tok, "tokens"))
            field = &lay->micro_batch_tokens;
        else if (!strcmp(tok, "accum"))
            field = &lay->grad_accum;
        else if (!strcmp(tok, "zero"))
            field = &lay->zero, lo = 0;
        if (field) {
            if (!val || parse_int(val, lo, field == &lay->zero ? 3 : INT_MAX / 2, field) != 0) {
                snprintf(err, errlen, "layout '%s': %s expects %s", spec, tok,
                         field == &lay->zero ? "a ZeRO stage 0..3" : "a positive integer");
                rc = -1;
            }
        } else if (!strcmp(tok, "offload")) {
            have_offload = 1;
            if (val && !strcmp(val, "none"))
                lay->offload_optimizer = lay->offload_param = 0;
            else if (val && !strcmp(val, "optimizer"))
                lay->offload_optimizer = 1, lay->offload_param = 0;
            else if (val && !strcmp(val, "param"))
                lay->offload_optimizer = 0, lay->offload_param = 1;
            else if (val && !strcmp(val, "both"))
                lay->offload_optimizer = lay->offload_param = 1;
            else {
                snprintf(err, errlen, "layout '%s': offload expects none, optimizer, param or both", spec);
                rc = -1;
            }
        } else if (!strcmp(tok, "sp")) {
            int on = 1;
            if (val && (parse_int(val, 0, 1, &on) != 0)) {
                snprintf(err, errlen, "layout '%s': sp expects 0 or 1 (or no value)", spec);
                rc = -1;
            }
            lay->sequence_parallel = on;
        } else if (!strcmp(tok, "recompute")) {
            if (val && !strcmp(val, "none"))
                lay->recompute = PLAN_RECOMPUTE_NONE;
            else if (val && !strcmp(val, "selective"))
                lay->recompute = PLAN_RECOMPUTE_SELECTIVE;
            else if (val && !strcmp(val, "full"))
                lay->recompute = PLAN_RECOMPUTE_FULL;
            else {
                snprintf(err, errlen, "layout '%s': recompute expects none, selective or full", spec);
                rc = -1;
            }
        } else {
            snprintf(err, errlen,
                     "layout '%s': unknown part '%s' (expected world, dp, tp, pp, ep, zero, offload, sp, recompute, "
                     "vpp, tokens, accum)",
                     spec, tok);
            rc = -1;
        }
    }
    free(copy);
    /* the config's offload_param applies at stage 3 only, whichever stage
     * the spec picked */
    if (rc == 0 && !have_offload)
        lay->offload_param = cfg->zero.offload_param && lay->zero == 3;
    if (rc == 0 && !have_ep && cfg->parallel.expert_parallel_size > 1)
        lay->ep = cfg->parallel.expert_parallel_size;
    if (rc == 0 && (long long)lay->dp * lay->tp * lay->pp > INT_MAX / 2) {
        snprintf(err, errlen, "layout '%s': dp x tp x pp is too large", spec);
        rc = -1;
    }
    /* world given: dp is what the others leave (or, given too, must agree:
     * plan_layout_check says when it does not) */
    if (rc == 0 && world && !have_dp)
        lay->dp = world / (lay->tp * lay->pp) > 0 ? world / (lay->tp * lay->pp) : 1;
    if (rc == 0)
        lay->world = world ? world : lay->dp * lay->tp * lay->pp;
    return rc;
}

#define FAIL(...) \
    do { \
        snprintf(err, errlen, __VA_ARGS__); \
        return -1; \
    } while (0)

int plan_layout_check(const config_t *cfg, const plan_layout_t *lay, char *err, size_t errlen)
{
    const model_config_t *mc = &cfg->model;
    const int experts = config_model_experts(mc);
    if (lay->dp < 1 || lay->tp < 1 || lay->pp < 1 || lay->ep < 1 || lay->virtual_stages < 1)
        FAIL("dp, tp, pp, ep and vpp must be positive");
    if ((long long)lay->dp * lay->tp * lay->pp != lay->world)
        FAIL("world size %d is not dp x tp x pp = %d x %d x %d = %lld", lay->world, lay->dp, lay->tp, lay->pp,
             (long long)lay->dp * lay->tp * lay->pp);
    if (mc->num_attention_heads % lay->tp != 0)
        FAIL("tp = %d does not divide model.num_attention_heads = %d", lay->tp, mc->num_attention_heads);
    /* kv heads: split over tp, or replicated (each rank one copy of a head
     * its query heads share) when there are fewer of them than ranks */
    const int kv = mc->num_key_value_heads;
    if (kv % lay->tp != 0 && !(kv < lay->tp && lay->tp % kv == 0))
        FAIL("tp = %d and model.num_key_value_heads = %d: the kv heads neither split over tp (tp divides them) nor "
             "replicate (they divide tp)",
             lay->tp, kv);
    if (mc->intermediate_size % lay->tp != 0)
        FAIL("tp = %d does not divide model.intermediate_size = %d", lay->tp, mc->intermediate_size);
    if (mc->vocab_size % lay->tp != 0)
        FAIL("tp = %d does not divide model.vocab_size = %d (vocab-parallel embedding and logits)", lay->tp,
             mc->vocab_size);
    if (mc->num_hidden_layers % (lay->pp * lay->virtual_stages) != 0)
        FAIL("pp x vpp = %d x %d does not divide model.num_hidden_layers = %d", lay->pp, lay->virtual_stages,
             mc->num_hidden_layers);
    if (lay->virtual_stages > 1 && lay->pp == 1)
        FAIL("vpp = %d needs pp > 1 (interleaving splits each pipeline stage)", lay->virtual_stages);
    if (lay->ep > 1 && experts == 1)
        FAIL("ep = %d needs an MoE model (model.num_local_experts = %d)", lay->ep, mc->num_local_experts);
    if (experts % lay->ep != 0)
        FAIL("ep = %d does not divide model.num_local_experts = %d", lay->ep, experts);
    if (lay->dp % lay->ep != 0)
        FAIL("ep = %d does not divide dp = %d (expert-parallel ranks are data-parallel ranks)", lay->ep, lay->dp);
    if (lay->sequence_parallel && lay->tp == 1)
        FAIL("sequence parallelism needs tp > 1 (it splits the tensor-parallel group's tokens)");
    if (lay->zero < 0 || lay->zero > 3)
        FAIL("zero = %d: expected a ZeRO stage 0..3", lay->zero);
    if (lay->offload_param && lay->zero != 3)
        FAIL("offload=param needs zero = 3 (only stage 3 keeps a parameter shard to offload)");
    if (lay->micro_batch_tokens < cfg->data.seq_len)
        FAIL("tokens = %d: a micro-batch holds at least one sample of data.seq_len = %d tokens (as "
             "data.max_tokens_per_batch)", lay->micro_batch_tokens, cfg->data.seq_len);
    return 0;
}
/* The value of part `key` ("dp") of a spec, or 0 when the spec has no such
 * part or a malformed one (plan_layout_parse says so). */
static int spec_part(const char *spec, const char *key)
{
    const size_t n = strlen(key);
    for (const char *p = spec; (p = strstr(p, key)) != NULL; p += n) {
        if ((p != spec && p[-1] != ',') || p[n] != '=')
            continue;
        char *end;
        long v = strtol(p + n + 1, &end, 10);
        return v > 0 && v < (1 << 24) && (*end == ',' || *end == 0) ? (int)v : 0;
    }
    return 0;
}

int plan_layout_spec_has(const char *spec, const char *key)
{
    const size_t n = strlen(key);
    for (const char *p = spec; (p = strstr(p, key)) != NULL; p += n)
        if ((p == spec || p[-1] == ',') && (p[n] == '=' || p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

void plan_layout_spec_ranks(const char *spec, config_plan_ranks_t *r)
{
    const int world = spec_part(spec, "world"), dp = spec_part(spec, "dp");
    r->tp = spec_part(spec, "tp");
    r->pp = spec_part(spec, "pp");
    /* as plan_layout_parse reads it: dp given; else what world leaves over
     * tp and pp (the config's where the spec has none: config_load_plan's
     * count); else 1 */
    r->dp = dp ? dp : world ? 0 : 1;
    long long w = world ? world : (long long)(dp ? dp : 1) * (r->tp ? r->tp : 1) * (r->pp ? r->pp : 1);
    r->world = w > 0 && w < (1 << 30) ? (int)w : 1;
}

int plan_layout_batch(plan_layout_t *lay, const char *spec, long long global_tokens, const char *batch_name,
                      char *err, size_t errlen)
{
    const int has_tokens = plan_layout_spec_has(spec, "tokens"), has_accum = plan_layout_spec_has(spec, "accum");
    if (has_tokens == has_accum)
        return 0;
    const long long per = (long long)lay->dp * (has_tokens ? lay->micro_batch_tokens : lay->grad_accum);
    if (global_tokens % per != 0 || global_tokens / per > INT_MAX / 2) {
        snprintf(err, errlen,
                 "layout '%s': dp %d x %s %d does not divide the global batch of %lld tokens (%s): give %s too, or "
                 "a %s that divides it",
                 spec, lay->dp, has_tokens ? "tokens" : "accum", has_tokens ? lay->micro_batch_tokens : lay->grad_accum,
                 global_tokens, batch_name, has_tokens ? "accum=" : "tokens=", has_tokens ? "tokens=" : "accum=");
        return -1;
    }
    if (has_tokens)
        lay->grad_accum = (int)(global_tokens / per);
    else
        lay->micro_batch_tokens = (int)(global_tokens / per);
    return 0;
}

void plan_layout_resolve(const config_t *cfg, const char *spec, int world, const char *what, plan_layout_t *lay)
{
    char err[768];
    if (spec) {
        if (plan_layout_parse(spec, cfg, lay, err, sizeof err) != 0)
            fb_fatal(FB_EXIT_USAGE, "%s: %s", what, err);
        /* the batch is train's on this layout's dp (config_load_plan) */
        char name[160];
        snprintf(name, sizeof name, "train_batch_size %d x data.seq_len %d", cfg->train_batch_size,
                 cfg->data.seq_len);
        if (plan_layout_batch(lay, spec, (long long)cfg->train_batch_size * cfg->data.seq_len, name, err,
                              sizeof err) != 0)
            fb_fatal(FB_EXIT_USAGE, "%s: %s", what, err);
    } else {
        plan_layout_from_config(cfg, world, lay);
    }
    if (plan_layout_check(cfg, lay, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_USAGE, "%s: layout dp=%d,tp=%d,pp=%d,ep=%d,zero=%d: %s", what, lay->dp, lay->tp, lay->pp,
                 lay->ep, lay->zero, err);
}
