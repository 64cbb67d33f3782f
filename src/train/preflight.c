#include "train/preflight.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/resume_schedule.h"
#include "io/data_path.h"
#include "loader/data_source.h"
#include "loader/step_plan.h"
#include "model/model.h"
#include "model/params.h"
#include "parallel/world.h"
#include "plan/plan.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

/* ------------------------------------------------------------ inputs */

/* The default config's data.train: a path relative to the working
 * directory (or the installed data directory), which is where a run
 * started elsewhere without a config misses it. */
static int is_default_train(const char *path)
{
    json_error_t err;
    json_t *d = json_loads(config_default_json(), 0, &err);
    FB_ASSERT(d);
    const char *def = json_string_value(json_object_get(json_object_get(d, "data"), "train"));
    const int same = def && !strcmp(def, path);
    json_decref(d);
    return same;
}

/* errno of `path` as a run would open it, 0 when readable. */
static int unreadable(const char *path)
{
    char *resolved = data_path_resolve(path);
    const int err = access(resolved, R_OK) == 0 ? 0 : errno;
    free(resolved);
    return err;
}

void train_inputs_check(const config_t *cfg)
{
    const data_config_t *d = &cfg->data;
    int err;
    if (d->corpus_path[0] && (err = unreadable(d->corpus_path)) != 0)
        fb_fatal_all(FB_EXIT_IO, "data.corpus = '%s': %s (a corpus file made by `fabula prep`; docs/prep.md)",
                     d->corpus_path, strerror(err));
    if (!d->corpus_path[0] && (err = unreadable(d->train_path)) != 0) {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd))
            snprintf(cwd, sizeof cwd, "(the working directory)");
        if (is_default_train(d->train_path))
            fb_fatal_all(FB_EXIT_IO, "data.train = '%s': %s: the built-in default config's sample, a path relative "
                         "to the working directory (%s) or to the installed data directory %s. Run from the top "
                         "of fabula's source tree, install fabula (make install), or give the data: "
                         "--set data.train=NOVELS.jsonl, or data.corpus=C.h5 from `fabula prep` (docs/config.md)",
                         d->train_path, strerror(err), cwd, FB_PKGDATADIR);
        fb_fatal_all(FB_EXIT_IO, "data.train = '%s': %s (novels as JSON or JSONL, relative to the working directory "
                     "%s)", d->train_path, strerror(err), cwd);
    }
    if (strcmp(d->tokenizer, "bytes") != 0 && (err = unreadable(d->tokenizer)) != 0)
        fb_fatal_all(FB_EXIT_IO, "data.tokenizer = '%s': %s (\"bytes\", or the tokenizer file `fabula prep` used)",
                     d->tokenizer, strerror(err));
}

/* ------------------------------------------------------------ pre-flight */

static double mib(size_t b) { return b / 1048576.0; }

static void say_layout(const config_t *cfg, const plan_layout_t *lay)
{
    const int ep = lay->ep;
    printf("  layout: world %d = pp %d x dp %d x tp %d%s; ep %d", lay->world, lay->pp, lay->dp, lay->tp,
           cfg->parallel.sequence_parallel ? " (sequence parallel)" : "", ep);
    if (ep > 1)
        printf(" (the experts of each MoE layer over %d ranks, %d copies of each)", ep, lay->dp / ep);
    printf("; ZeRO stage %d%s%s\n", lay->zero, lay->offload_optimizer ? ", optimizer offloaded" : "",
           lay->offload_param ? ", parameters offloaded" : "");
}

static void say_model(const config_t *cfg)
{
    const model_config_t *m = &cfg->model;
    param_table_t t;
    param_table_build(&t, m);
    printf("  model: %d layers, hidden %d, %d heads (%d kv), vocabulary %d", m->num_hidden_layers, m->hidden_size,
           m->num_attention_heads, m->num_key_value_heads, m->vocab_size);
    if (config_model_is_moe(m))
        printf(", %d experts top-%d (capacity factor %g%s)", m->num_local_experts, m->num_experts_per_tok,
               m->capacity_factor, m->capacity_factor > 0 ? "" : ": dropless");
    printf("; %.3fM parameters, %.3fM active a token%s\n", param_table_total(&t) / 1e6, model_active_params(m) / 1e6,
           cfg->init_from ? " (model.init_from's)" : "");
    param_table_free(&t);
}

/* What the data gives a step, and how its samples compare with the
 * config's lengths. */
static void say_data(const config_t *cfg, const data_source_t *src, const data_source_t *valid, int dp)
{
    const int64_t n = src->n;
    if (src->corpus) {
        const int prep_len = corpus_max_seq_len(src->corpus);
        printf("  data: %s: %lld training samples, %.3fM tokens; prep's windows up to %d tokens, data.seq_len %d%s\n",
               src->what, (long long)n, src->tokens / 1e6, prep_len, cfg->data.seq_len,
               cfg->data.seq_len > prep_len   ? " (no sample is longer than prep's windows)"
               : cfg->data.seq_len < prep_len ? " (longer samples are cut to it)"
                                              : "");
        printf("  tokenizer: %s, the one the corpus was made with (%s, %d ids, sha256 %.12s...)\n",
               cfg->data.tokenizer, corpus_tokenizer_kind(src->corpus), corpus_vocab_size(src->corpus),
               corpus_tokenizer_digest(src->corpus));
    } else {
        printf("  data: %s: %lld windows of up to data.seq_len = %d tokens (overlap %d, at least %d), %.3fM tokens, "
               "tokenizer %s\n",
               src->what, (long long)n, cfg->data.seq_len, cfg->data.overlap, cfg->data.min_seq_len,
               src->tokens / 1e6, cfg->data.tokenizer);
    }
    const int tbs = cfg->train_batch_size;
    printf("  step: train_batch_size %d = %d a micro-batch x %d accumulation step(s) x %d data-parallel rank(s): ",
           tbs, cfg->micro_batch, cfg->grad_accum, dp);
    if (n > 0 && tbs > n)
        printf("%d samples a step from %lld, each sample about %.1f times a step\n", tbs, (long long)n,
               (double)tbs / (double)n);
    else if (n > 0)
        printf("%d of %lld samples a step, an epoch every %.1f steps (run.steps %ld: %.2f epochs)\n", tbs,
               (long long)n, (double)n / tbs, cfg->run.steps, (double)cfg->run.steps * tbs / (double)n);
    else
        printf("the corpus has no sample\n");
    if (valid)
        printf("  validation: every %ld steps, %lld of the %lld held-out samples\n", cfg->run.eval_interval,
               (long long)(valid->n < cfg->run.eval_samples ? valid->n : cfg->run.eval_samples), (long long)valid->n);
}

static void say_memory(const config_t *cfg, const plan_layout_t *lay)
{
    plan_memory_t m;
    plan_memory(cfg, lay, &m);
    printf("  memory per rank%s (fabula plan memory): parameters %.2f MiB, gradients %.2f MiB, optimizer state %.2f "
           "MiB, workspaces %.2f MiB, activations %.2f MiB at peak; %.2f MiB device%s",
           lay->pp > 1 ? " (the fullest stage)" : "", mib(m.params + m.host_params), mib(m.grads + m.host_grads),
           mib(m.optimizer + m.host_optimizer), mib(m.workspace), mib(m.activations_peak + m.moe_buffers_capacity),
           mib(m.device_total), cfg->run.backend == RUN_BACKEND_CUDA ? "" : " (CPU backend: host memory)");
    if (m.host_total)
        printf(", %.2f MiB host", mib(m.host_total));
    printf("%s\n", m.predicted ? " (a prediction: docs/plan.md)" : "");
    if ((cfg->bf16_enabled || cfg->fp16.enabled) && lay->act_bytes == 4)
        printf("  note: %s.enabled, but the CPU backend computes in fp32 (%s applies to run.backend \"cuda\" or "
               "\"cpu16\"): sized as fp32\n",
               cfg->bf16_enabled ? "bf16" : "fp16", cfg->bf16_enabled ? "bf16" : "fp16");
}

typedef struct preflight {
    const config_t *cfg;
    int world, dp, verbose;
    data_source_t src, valid;
    int have_valid;
} preflight_t;

/* The run's own openings: data_source_open (and the validation split) and
 * the step plan, so that their errors and warnings are the run's. */
static void open_data(void *arg)
{
    preflight_t *p = arg;
    data_source_open(&p->src, p->cfg, p->verbose);
    if (p->cfg->run.eval_interval > 0) {
        char who[64];
        snprintf(who, sizeof who, "run.eval_interval = %ld", p->cfg->run.eval_interval);
        data_source_open_valid(&p->valid, p->cfg, p->verbose, who);
        p->have_valid = 1;
    }
    step_plan_t plan;
    step_plan_init(&plan, p->cfg, p->src.lens, p->src.n, p->dp, 0);
    step_plan_next(&plan, 0);
    step_plan_free(&plan);
}

void train_preflight(const config_t *cfg, int world, int verbose)
{
    plan_layout_t lay;
    plan_layout_from_config(cfg, world, &lay);
    char err[512];
    if (plan_layout_check(cfg, &lay, err, sizeof err) != 0)
        fb_fatal_all(FB_EXIT_USAGE, "pre-flight for %d rank(s): %s", world, err);
    train_inputs_check(cfg);
    preflight_t p = {.cfg = cfg, .world = world, .dp = lay.dp, .verbose = verbose};
    static char msg[1 << 14];
    parallel_agree_outcome(fb_catch(open_data, &p, msg, sizeof msg), msg);
    if (verbose) {
        printf("fabula: pre-flight for %d rank(s), nothing trained:\n", world);
        say_layout(cfg, &lay);
        say_model(cfg);
        say_data(cfg, &p.src, p.have_valid ? &p.valid : NULL, lay.dp);
        say_memory(cfg, &lay);
        long step;
        char why[1024];
        char *from = train_resume_point(cfg, &step, why, sizeof why);
        if (from)
            printf("  resume: from %s at step %ld (run.resume \"%s\")\n", from, step, cfg->run.resume);
        else if (why[0])
            printf("  resume: run.resume \"%s\" designates a checkpoint that cannot be read (%s): the run looks "
                   "for an older one or stops\n", cfg->run.resume, why);
        else
            printf("  resume: none (run.resume \"%s\"): the run starts at step 0\n", cfg->run.resume);
        free(from);
        if (p.src.vocab_grow > cfg->model.vocab_size)
            printf("  model.init_from: the vocabulary grows from %d to %d rows for the tokenizer's appended special "
                   "tokens\n", cfg->model.vocab_size, p.src.vocab_grow);
        printf("fabula: pre-flight done: every warning the run would print at start is above; the effective "
               "config follows\n");
        fflush(stdout);
    }
    if (p.have_valid)
        data_source_close(&p.valid);
    data_source_close(&p.src);
}
