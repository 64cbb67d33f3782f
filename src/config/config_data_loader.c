/* The loader keys of "data": how a step's samples are spread over the
 * data-parallel ranks (sampler), packed into micro-batches (packing,
 * max_tokens_per_batch), weighted by cost (attention_cost), mixed by length
 * over training (curriculum) and cut while the context grows
 * (seq_len_warmup). Semantics in docs/loader.md, keys in docs/config.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "util/error.h"

#define RATIO_TOL 1e-6

static const char *const class_keys[LOADER_NCLASSES] = {"short", "medium", "long"};

static const char *const sampler_names[] = {[LOADER_SAMPLER_UNIFORM] = "uniform", [LOADER_SAMPLER_GREEDY] = "greedy",
                                            [LOADER_SAMPLER_LPT] = "lpt"};
static const char *const packing_names[] = {[LOADER_PACK_SEQUENTIAL] = "sequential",
                                            [LOADER_PACK_BEST_FIT] = "best_fit", [LOADER_PACK_BALANCED] = "balanced"};

static int name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int config_sampler_parse(const char *name, loader_sampler_t *out)
{
    int i = name_index(sampler_names, (int)(sizeof sampler_names / sizeof *sampler_names), name);
    if (i < 0)
        return 0;
    *out = (loader_sampler_t)i;
    return 1;
}

const char *config_sampler_name(loader_sampler_t s)
{
    return (unsigned)s < sizeof sampler_names / sizeof *sampler_names ? sampler_names[s] : "?";
}

int config_packing_parse(const char *name, loader_packing_t *out)
{
    int i = name_index(packing_names, (int)(sizeof packing_names / sizeof *packing_names), name);
    if (i < 0)
        return 0;
    *out = (loader_packing_t)i;
    return 1;
}

const char *config_packing_name(loader_packing_t s)
{
    return (unsigned)s < sizeof packing_names / sizeof *packing_names ? packing_names[s] : "?";
}

static void read_strategies(cj_ctx_t *c, loader_config_t *l)
{
    const char *s = cj_string(c, "data.sampler", cj_default_string(c, "data.sampler"));
    if (!config_sampler_parse(s, &l->sampler))
        cj_invalid(c, "data.sampler", "\"lpt\", \"greedy\" or \"uniform\"");
    const char *p = cj_string(c, "data.packing", cj_default_string(c, "data.packing"));
    if (!config_packing_parse(p, &l->packing))
        cj_invalid(c, "data.packing", "\"best_fit\", \"balanced\" or \"sequential\"");
}

/* Absent, null or "auto": pending, an "auto" kept in the tree where the
 * value will go, for config_resolve_attention_cost to replace. */
static void read_attention_cost(cj_ctx_t *c, loader_config_t *l)
{
    const char *path = "data.attention_cost";
    json_t *v = cj_lookup(c, c->root, path);
    if (!v || json_is_null(v) || cj_is_auto(v)) {
        if (!cj_strs_has(&c->known, path))
            cj_strs_push(&c->known, path);
        l->attention_cost_auto = cj_is_auto(v) ? LOADER_COST_AUTO : LOADER_COST_ABSENT;
        l->attention_cost = 0.0;
        cj_put(c, path, json_string("auto"));
        return;
    }
    l->attention_cost_auto = LOADER_COST_SET;
    l->attention_cost = cj_real(c, path, 0.0);
    if (!(l->attention_cost >= 0.0) || !isfinite(l->attention_cost))
        cj_invalid(c, path, "a number >= 0 or \"auto\" (L d / N_active of the model)");
}

/* "auto" is the padded batch's memory: micro_batch samples of seq_len. The
 * per-rank token budget of a step is this times gradient_accumulation_steps. */
static void read_budget(cj_ctx_t *c, const config_t *cfg, loader_config_t *l)
{
    long long padded = (long long)cfg->micro_batch * cfg->data.seq_len;
    if (padded > INT32_MAX)
        padded = INT32_MAX;
    l->max_tokens_per_batch = cj_int(c, "data.max_tokens_per_batch", (int)padded);
    if (l->max_tokens_per_batch < cfg->data.seq_len)
        cj_invalid(c, "data.max_tokens_per_batch",
                   "an integer >= data.seq_len (%d): a micro-batch must hold the longest sample", cfg->data.seq_len);
    read_attention_cost(c, l);
}

/* Records the error; the caller stops reading the phases. */
static void phase_invalid(const cj_ctx_t *c, int i, const char *key, const char *expected)
{
    char path[96];
    snprintf(path, sizeof path, "data.curriculum.phases[%d].%s", i, key);
    json_t *arr = cj_lookup(NULL, c->root, "data.curriculum.phases");
    json_t *v = json_object_get(json_array_get(arr, (size_t)i), key);
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(16)) : NULL;
    char *shown = cj_cut(text ? text : "(absent)");
    cj_error(c, "config key '%s' = %s: expected %s", path, shown, expected);
    free(shown);
    free(text);
}

/* phases: an array of {"until", "short", "medium", "long"} objects, read by
 * hand (the getters address objects only). A ratio left out is 0. */
static void read_phases(cj_ctx_t *c, loader_config_t *l)
{
    const char *path = "data.curriculum.phases";
    if (!cj_strs_has(&c->known, path))
        cj_strs_push(&c->known, path);
    json_t *arr = cj_lookup(c, c->root, path);
    if (!arr || json_is_null(arr) || cj_is_auto(arr))
        arr = cj_lookup(NULL, c->defaults, path);
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > LOADER_MAX_PHASES) {
        cj_invalid(c, path, "an array of 1 to %d phase objects {\"until\", \"short\", \"medium\", \"long\"}",
                   LOADER_MAX_PHASES);
        return;
    }
    l->nphases = (int)json_array_size(arr);
    double prev = 0.0;
    for (int i = 0; i < l->nphases; i++) {
        json_t *ph = json_array_get(arr, (size_t)i);
        if (!json_is_object(ph)) {
            cj_invalid(c, path, "an array of phase objects (item %d is not an object)", i);
            return;
        }
        const char *key;
        json_t *v;
        json_object_foreach(ph, key, v) {
            int known = strcmp(key, "until") == 0;
            for (int k = 0; k < LOADER_NCLASSES; k++)
                known |= strcmp(key, class_keys[k]) == 0;
            if (!known && c->strict)
                cj_error(c, "unknown config key '%s[%d].%s' (an error with --strict / run.strict_config)", path,
                         i, key);
            else if (!known)
                cj_warn(c, "unknown config key '%s[%d].%s' (ignored)", path, i, key);
        }
        loader_phase_t *p = &l->phases[i];
        json_t *u = json_object_get(ph, "until");
        if (!json_is_number(u)) {
            phase_invalid(c, i, "until", "a number in (0, 1]: the end of the phase as a fraction of run.steps");
            return;
        }
        p->until = json_number_value(u);
        if (!(p->until > prev) || p->until > 1.0) {
            phase_invalid(c, i, "until", "a number in (0, 1], larger than the previous phase's");
            return;
        }
        if (i == l->nphases - 1 && p->until != 1.0) {
            phase_invalid(c, i, "until", "1.0 (the last phase ends with the run)");
            return;
        }
        prev = p->until;
        double sum = 0.0;
        for (int k = 0; k < LOADER_NCLASSES; k++) {
            json_t *r = json_object_get(ph, class_keys[k]);
            p->mix[k] = json_is_number(r) ? json_number_value(r) : 0.0;
            if ((r && !json_is_number(r)) || !(p->mix[k] >= 0.0 && p->mix[k] <= 1.0)) {
                phase_invalid(c, i, class_keys[k], "a number in [0, 1]");
                return;
            }
            sum += p->mix[k];
        }
        if (fabs(sum - 1.0) > RATIO_TOL) {
            char msg[128];
            snprintf(msg, sizeof msg, "short + medium + long = 1 (they sum to %.9g)", sum);
            phase_invalid(c, i, "short", msg);
            return;
        }
    }
}

static void read_curriculum(cj_ctx_t *c, loader_config_t *l)
{
    cj_section(c, "data.curriculum");
    l->curriculum = cj_bool(c, "data.curriculum.enabled", 0);
    l->short_threshold = cj_int(c, "data.curriculum.short_threshold", 1024);
    l->long_threshold = cj_int(c, "data.curriculum.long_threshold", 2048);
    if (l->short_threshold < 1)
        cj_invalid(c, "data.curriculum.short_threshold", "a positive integer (tokens)");
    if (l->long_threshold <= l->short_threshold)
        cj_invalid(c, "data.curriculum.long_threshold", "an integer > data.curriculum.short_threshold (%d)",
                   l->short_threshold);
    read_phases(c, l);
}

static void read_warmup(cj_ctx_t *c, loader_config_t *l)
{
    cj_section(c, "data.seq_len_warmup");
    l->warmup = cj_bool(c, "data.seq_len_warmup.enabled", 0);
    l->warmup_start = cj_int(c, "data.seq_len_warmup.start", 256);
    long long steps = cj_integer(c, "data.seq_len_warmup.steps", 1000);
    if (l->warmup_start < 1)
        cj_invalid(c, "data.seq_len_warmup.start", "a positive integer (tokens; above data.seq_len means no warm-up)");
    if (steps < 1)
        cj_invalid(c, "data.seq_len_warmup.steps", "a positive integer");
    l->warmup_steps = (long)steps;
}

void config_read_loader(cj_ctx_t *c, config_t *cfg)
{
    loader_config_t *l = &cfg->loader;
    read_strategies(c, l);
    read_budget(c, cfg, l);
    read_curriculum(c, l);
    read_warmup(c, l);
}
