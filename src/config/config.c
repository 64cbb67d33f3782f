/* config_load: the embedded default, the user's files and --set overrides,
 * merged into one tree and read section by section.
 *
 * The merge is plain (objects recursively, anything else replaces) except
 * where merging a DeepSpeed config over the default would mix two runs:
 *  - batch keys: the default's micro batch and accumulation apply only if
 *    the user gives none of the three batch keys (config_batch.c);
 *  - "optimizer" and "scheduler": a user's block that names its "type" is a
 *    DeepSpeed block and replaces the default's whole, so that what it leaves
 *    out takes DeepSpeed's default for that type, not fabula's value (a
 *    WarmupDecayLR without warmup_type is "log", as in DeepSpeed). A block
 *    without a type (`--set scheduler.params.warmup_num_steps=50`) tunes the
 *    default's and merges into it;
 *  - "scheduler": a user file with an "optimizer" but no "scheduler" gets no
 *    schedule (constant lr, as DeepSpeed would run that file).
 */
#include "config/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_alias.h"
#include "config/config_internal.h"
#include "config/config_json.h"
#include "config/config_source.h"
#include "util/error.h"

static json_t *parse_default(void)
{
    json_error_t err;
    json_t *d = json_loads(config_default_json(), JSON_REJECT_DUPLICATES, &err);
    if (!d)
        fb_fatal(FB_EXIT_INTERNAL, "embedded default config:%d:%d: %s", err.line, err.column, err.text);
    return d;
}

/* "model": "PATH" in a config file: the model section is the JSON file PATH
 * (a Hugging Face config.json as transformers saves it), relative to the
 * directory of the config file that names it. */
static void model_from_file(const cj_ctx_t *c, json_t *file, const char *file_path)
{
    json_t *m = json_object_get(file, "model");
    if (!json_is_string(m))
        return;
    const char *p = json_string_value(m);
    const char *slash = strrchr(file_path, '/');
    char *full;
    if (p[0] == '/' || !slash) {
        full = fb_strdup(p);
    } else {
        size_t d = (size_t)(slash - file_path) + 1, n = strlen(p);
        full = fb_malloc(d + n + 1);
        memcpy(full, file_path, d);
        memcpy(full + d, p, n + 1);
    }
    json_t *obj = source_load_file(c, full);
    free(full);
    FB_ASSERT(json_object_set_new(file, "model", obj) == 0);
}

/* A user's block that says what it is: a "type" string other than "auto". */
static int names_type(json_t *user_block)
{
    json_t *t = json_object_get(user_block, "type");
    return json_is_object(user_block) && json_is_string(t) && !cj_is_auto(t);
}

/* Removes from `base` (a copy of the default) what must not be merged with
 * the user's config. Returns 1 when the default's scheduler stays. */
static int adjust_defaults(const cj_ctx_t *c, json_t *base, int files_optimizer)
{
    if (names_type(json_object_get(c->user, "optimizer")))
        json_object_del(base, "optimizer");
    json_t *us = json_object_get(c->user, "scheduler");
    if (files_optimizer && !us) {
        cj_note(c, "the config gives an \"optimizer\" but no \"scheduler\": constant lr (the default's schedule "
                   "is not used)");
        json_object_del(base, "scheduler");
    } else if (names_type(us)) {
        json_object_del(base, "scheduler");
    }
    return json_object_get(base, "scheduler") != NULL;
}

/* Whether the known path k is an object some other known path lies in. */
static int is_section(const cj_ctx_t *c, const char *k)
{
    size_t n = strlen(k);
    for (size_t i = 0; i < c->known.n; i++)
        if (!strncmp(c->known.items[i], k, n) && c->known.items[i][n] == '.')
            return 1;
    return 0;
}

/* Whether a config file speaks DeepSpeed: it holds one of the keys a
 * ds_config.json is made of. Its missing keys then mean what they mean to
 * DeepSpeed where fabula's default config sets another value
 * (gradient_clipping: config_precision.c). */
static int speaks_deepspeed(json_t *file)
{
    static const char *const keys[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                       "gradient_accumulation_steps", "optimizer", "scheduler", "fp16", "bf16",
                                       "zero_optimization"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (json_object_get(file, keys[i]))
            return 1;
    return 0;
}

/* The effective config in a reading order: fabula's sections, the batch
 * triple together, then DeepSpeed's blocks; anything else keeps its place
 * after them. */
static json_t *reading_order(json_t *root)
{
    static const char *const order[] = {"model", "data", "run", "train_batch_size", "train_micro_batch_size_per_gpu",
                                        "gradient_accumulation_steps", "steps_per_print", "gradient_clipping",
                                        "optimizer", "scheduler", "fp16", "bf16", "zero_optimization"};
    json_t *out = json_object();
    FB_ASSERT(out);
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        json_t *v = json_object_get(root, order[i]);
        if (v)
            FB_ASSERT(json_object_set(out, order[i], v) == 0);
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!json_object_get(out, key))
            FB_ASSERT(json_object_set(out, key, v) == 0);
    }
    return out;
}

/* The effective config as config.json shows it. */
static char *effective_text(const json_t *root)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(16));
    if (!text)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "json_dumps", "out of memory");
    char *copy = fb_strdup(text);
    free(text);
    return copy;
}

static void note_list(const cj_ctx_t *c, const char *what, const cj_strs_t *s)
{
    if (s->n == 0)
        return;
    size_t len = 1;
    for (size_t i = 0; i < s->n; i++)
        len += strlen(s->items[i]) + 2;
    char *text = fb_malloc(len);
    text[0] = '\0';
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            strcat(text, ", ");
        strcat(text, s->items[i]);
    }
    cj_note(c, "%s: %s", what, text);
    free(text);
}

/* The data-parallel ranks DeepSpeed's batch identity counts: world / (tp
 * pp) as train lays the ranks out, or a plan's layout's
 * (config_plan_ranks_t). */
static int batch_ranks(const config_plan_ranks_t *plan, int world_size, int tp, int pp)
{
    if (plan && plan->dp > 0)
        return plan->dp;
    if (plan && plan->tp > 0)
        tp = plan->tp;
    if (plan && plan->pp > 0)
        pp = plan->pp;
    return world_size / tp / pp > 0 ? world_size / tp / pp : 1;
}

/* Every section of the merged tree, in the order the readers need
 * (config_internal.h); `plan`: the ranks a plan reads it for, or NULL. */
static void read_sections(cj_ctx_t *c, config_t *cfg, int world_size, int linked, const config_plan_ranks_t *plan)
{
    config_read_run(c, cfg);
    config_read_checkpoint(c, cfg);
    config_read_tboard(c, cfg);
    config_read_model(c, cfg);
    config_read_data(c, cfg);
    const int tp = config_read_tensor_parallel(c, cfg, world_size);
    const int pp = config_read_pipeline_parallel(c, cfg, world_size);
    const int any_dp = plan && plan->dp == CONFIG_PLAN_ANY_DP, dp = batch_ranks(plan, world_size, tp, pp);
    config_read_batch(c, cfg, dp, any_dp);
    config_read_loader(c, cfg);
    config_read_optimizer(c, cfg);
    config_read_scheduler(c, cfg, linked);
    config_read_precision(c, cfg);
    config_read_zero(c, cfg);
    config_read_parallel(c, cfg, world_size);
    config_read_monitor(c, cfg, world_size);
    config_read_compat(c, cfg);
    config_check_tensor_parallel(c, cfg);
    config_check_pipeline_parallel(c, cfg);
    if (cj_nerrors(c) == 0) {
        /* sized by this machine's memory: a plan is of another */
        if (!plan)
            config_check_memory(c, cfg, world_size);
        config_advise(c, cfg, any_dp ? 0 : dp);
    }
}

/* config_load, of the user's files (`users_files`) or of one a command
 * made (config_load_object): only a user's file is read as a DeepSpeed
 * config whose missing keys mean DeepSpeed's defaults. */
static void load(config_t *cfg, const char *const *paths, int npaths, const char *const *sets, int nsets,
                 int world_size, int verbose, int users_files, const config_plan_ranks_t *plan)
{
    memset(cfg, 0, sizeof *cfg);
    cj_ctx_t c;
    cj_ctx_init(&c, verbose);
    c.defaults = parse_default();

    /* The user's tree alone decides which parts of the default apply. */
    c.user = json_object();
    FB_ASSERT(c.user);
    json_t **files = fb_calloc((size_t)(npaths > 0 ? npaths : 1), sizeof *files);
    for (int i = 0; i < npaths; i++) {
        files[i] = source_load_file(&c, paths[i]);
        model_from_file(&c, files[i], paths[i]);
        if (users_files && !c.deepspeed_file && speaks_deepspeed(files[i]))
            c.deepspeed_file = paths[i];
        source_merge(c.user, files[i]);
    }
    json_t *uo = json_object_get(c.user, "optimizer");
    int files_optimizer = uo && !json_is_null(uo);
    source_set_t *ss = fb_calloc((size_t)(nsets > 0 ? nsets : 1), sizeof *ss);
    for (int i = 0; i < nsets; i++) {
        source_set_parse(&c, sets[i], &ss[i]);
        source_set_apply(&c, c.user, &ss[i], 0);
        cj_strs_push(&c.set_keys, ss[i].path);
        cj_strs_push(&c.set_keys, ss[i].raw);
    }

    /* The merged tree: adjusted default, then each file in order, then the
     * sets (checked against the merged structure). */
    c.root = json_deep_copy(c.defaults);
    FB_ASSERT(c.root);
    int linked = adjust_defaults(&c, c.root, files_optimizer);
    for (int i = 0; i < npaths; i++) {
        source_merge(c.root, files[i]);
        json_decref(files[i]);
    }
    free(files);
    for (int i = 0; i < nsets; i++) {
        source_set_apply(&c, c.root, &ss[i], 1);
        source_set_free(&ss[i]);
    }
    free(ss);
    cfg->init_from = config_init_from(&c);

    read_sections(&c, cfg, world_size, linked, plan);

    cj_warn_unknown(&c);
    /* every problem of the config at once, not one per run */
    cj_check_errors(&c);
    note_list(&c, "resolved from \"auto\"", &c.autos);
    note_list(&c, "accepted without effect in fabula", &c.inert);

    json_t *ordered = reading_order(c.root);
    cfg->effective_json = effective_text(ordered);
    json_decref(ordered);
    cj_ctx_free(&c);
}

void config_load(config_t *cfg, const char *const *paths, int npaths, const char *const *sets, int nsets,
                 int world_size, int verbose)
{
    load(cfg, paths, npaths, sets, nsets, world_size, verbose, 1, NULL);
}

void config_load_plan(config_t *cfg, const char *const *paths, int npaths, const char *const *sets, int nsets,
                      const config_plan_ranks_t *ranks, int verbose)
{
    FB_ASSERT(ranks && ranks->world >= 1);
    load(cfg, paths, npaths, sets, nsets, ranks->world, verbose, 1, ranks);
}

void config_load_made(config_t *cfg, const char *path, const char *const *sets, int nsets, int world_size,
                      int verbose)
{
    const char *paths[1] = {path};
    load(cfg, paths, 1, sets, nsets, world_size, verbose, 0, NULL);
}

const char *config_key_for_word(const char *word)
{
    static char found[160];
    char norm[96];
    size_t n = strlen(word);
    if (n == 0 || n >= sizeof norm)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = word[i] == '-' ? '_' : word[i];
    const config_alias_t *a = config_alias_find(norm);
    if (a)
        return a->key;
    /* the keys the default config is read with: every section's */
    cj_ctx_t c;
    cj_ctx_init(&c, 0);
    c.defaults = parse_default();
    c.root = json_deep_copy(c.defaults);
    c.user = json_object();
    FB_ASSERT(c.root && c.user);
    config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    read_sections(&c, &cfg, 1, 1, NULL);
    const char *key = NULL;
    int matches = 0;
    for (size_t i = 0; i < c.known.n; i++) {
        const char *k = c.known.items[i], *dot = strrchr(k, '.');
        if (!strcmp(dot ? dot + 1 : k, norm) && !is_section(&c, k)) {
            key = k;
            matches++;
        }
    }
    /* a name several sections share ("enabled") names none of them */
    if (matches == 1)
        snprintf(found, sizeof found, "%s", key);
    config_free(&cfg);
    cj_ctx_free(&c);
    return matches == 1 ? found : NULL;
}

void config_resolve_attention_cost(config_t *cfg, double c, int verbose)
{
    const char *path = "data.attention_cost";
    FB_ASSERT(cfg->loader.attention_cost_auto != LOADER_COST_SET && c >= 0.0 && isfinite(c));
    cj_ctx_t ctx;
    cj_ctx_init(&ctx, verbose);
    json_error_t err;
    ctx.root = json_loads(cfg->effective_json, 0, &err);
    if (!ctx.root)
        fb_fatal(FB_EXIT_INTERNAL, "effective config:%d:%d: %s", err.line, err.column, err.text);
    /* the placeholder read_attention_cost left: replaced in place, so the
     * effective config reads as if config_load had known the value */
    if (cfg->loader.attention_cost_auto == LOADER_COST_AUTO)
        cj_resolve_auto(&ctx, path, json_real(c));
    else
        FB_ASSERT(cj_store(ctx.root, path, json_real(c), NULL) == 0);
    note_list(&ctx, "resolved from \"auto\"", &ctx.autos);
    free(cfg->effective_json);
    cfg->effective_json = effective_text(ctx.root);
    cj_ctx_free(&ctx);
    cfg->loader.attention_cost = c;
    cfg->loader.attention_cost_auto = LOADER_COST_SET;
}

void config_free(config_t *cfg)
{
    free(cfg->init_from);
    free(cfg->data.train_path);
    free(cfg->data.corpus_path);
    free(cfg->data.tokenizer);
    free(cfg->run.run_dir);
    free(cfg->run.resume);
    free(cfg->checkpoint.dir);
    free(cfg->tensorboard.dir);
    free(cfg->csv_monitor.dir);
    mpi_hints_free(&cfg->checkpoint.mpi_info);
    mpi_hints_free(&cfg->prep.mpi_info);
    free(cfg->effective_json);
    memset(cfg, 0, sizeof *cfg);
}
